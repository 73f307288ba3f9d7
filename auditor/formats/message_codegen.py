"""Code generation for :mod:`auditor.formats.kafka_message`: from one message spec table at one
version, the Python source of a specialised decode function (consecutive fixed-width fields read
by one ``struct`` call, lengths checked before anything is sliced or allocated), compiled once.

Two variants per (message, version): *fast* (only the checks that keep memory bounded; any
failure raises and the caller re-decodes) and *checked* (a bounds check before every read, each
failure a :class:`DecodeFailure` naming byte position, field, value found and value expected).
The encoding rules are in kafka_message's docstring.
"""

from __future__ import annotations

import base64
import struct
from typing import Callable

#: Kafka strings are at most 0x7fff bytes (``readString``'s bound).
MAX_STRING_BYTES = 0x7FFF
#: An unsigned varint of an int32 takes at most 5 bytes.
MAX_VARINT_BYTES = 5
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
UNKNOWN_TAGGED_FIELDS = "_unknownTaggedFields"

#: struct format and width of each fixed-width type.
FIXED = {
    "bool": ("?", 1), "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2),
    "int32": ("i", 4), "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8),
    "uuid": ("16s", 16),
}
VARIABLE = ("string", "bytes", "records")
#: Arrays shorter than this are read by prebuilt ``struct`` objects (replica lists, ISR ...).
SHORT_ARRAY = 32
_ARRAYS = {fmt: [struct.Struct(f">{n}{fmt}").unpack_from for n in range(SHORT_ARRAY)]
           for fmt in ("b", "h", "H", "i", "I", "q", "d")}

_UUID_CACHE: dict[bytes, str] = {}
_UUID_CACHE_MAX = 65536
_b64 = base64.urlsafe_b64encode


def uuid_str(raw: bytes) -> str:
    """16 bytes as Kafka's ``Uuid.toString()``: URL-safe base64 without padding (``raw`` may be a
    slice of a ``bytearray`` or ``memoryview`` buffer: the cache keys on an immutable copy)."""
    if type(raw) is not bytes:
        raw = bytes(raw)
    s = _UUID_CACHE.get(raw)
    if s is None:
        if len(_UUID_CACHE) >= _UUID_CACHE_MAX:
            _UUID_CACHE.clear()
        s = _UUID_CACHE[raw] = _b64(raw)[:22].decode("ascii")
    return s


def uuid_bytes(text: str) -> bytes:
    """Inverse of :func:`uuid_str`."""
    return base64.urlsafe_b64decode(text + "==")


def json_name(name: str) -> str:
    """A spec field name as Kafka's JSON converters print it (first letter lower-cased)."""
    return name[:1].lower() + name[1:]


def in_versions(rng, version: int) -> bool:
    return rng is not None and rng[0] <= version and (rng[1] is None or version <= rng[1])


def versions_text(rng) -> str:
    if rng is None:
        return "none"
    lo, hi = rng
    return f"{lo}+" if hi is None else (str(lo) if lo == hi else f"{lo}-{hi}")


def field_flags(f: dict, version: int, flexible: bool, tagged: bool) -> tuple[bool, bool]:
    """(nullable, lengths as varints) of field ``f`` at ``version`` of a message whose version is
    ``flexible`` or not: the field's own flexibleVersions, when it has them, override the
    message's, and a tagged value always has varint lengths."""
    flex = in_versions(f["flexibleVersions"], version) if "flexibleVersions" in f else flexible
    return in_versions(f.get("nullableVersions"), version), flex or tagged


class DecodeFailure(Exception):
    """Where and why a checked decode failed (turned into a FormatError by kafka_message)."""

    def __init__(self, pos, field, found, expected):
        super().__init__(pos, field, found, expected)
        self.pos, self.field, self.found, self.expected = pos, field, found, expected


def read_uvarint(buf, pos, end):
    """(value, new position) of an unsigned varint (at most 5 bytes) starting at pos."""
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise DecodeFailure(start, "varint", f"{pos - start} byte(s) before the end", "a complete unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if pos - start >= MAX_VARINT_BYTES:
            raise DecodeFailure(start, "varint", f"more than {MAX_VARINT_BYTES} bytes", "an unsigned varint of at most 5 bytes")


def _fail(pos, field, found, expected):
    raise DecodeFailure(pos, field, found, expected)


# --------------------------------------------------------------------------------------------
# Code generation: one function per (struct, version, mode)
# --------------------------------------------------------------------------------------------

def _is_array(t: str) -> bool:
    return t.startswith("[]")


def _is_struct(t: str) -> bool:
    base = t[2:] if _is_array(t) else t
    return base not in FIXED and base not in VARIABLE


def default_expr(f: dict, version: int, resolve) -> str:
    """Python expression (fresh objects) for a field's default value."""
    t = f["type"]
    d = f.get("default")
    nullable = in_versions(f.get("nullableVersions"), version)
    if _is_array(t):
        return "None" if (d == "null" and nullable) else "[]"
    if _is_struct(t):
        if d == "null" and nullable:
            return "None"
        fields = resolve(f)
        items = ", ".join(f"{json_name(g['name'])!r}: {default_expr(g, version, resolve)}"
                          for g in fields if in_versions(g.get("versions"), version))
        return "{" + items + "}"
    if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        if d is None or d == "":
            return "0"
        if isinstance(d, int):
            return repr(d)
        text = str(d).strip()
        return repr(int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text))
    if t == "float64":
        return repr(float(d)) if d not in (None, "") else "0.0"
    if t == "bool":
        return "True" if str(d).lower() == "true" else "False"
    if t == "uuid":
        return repr(ZERO_UUID)
    if t == "string":
        if d == "null" and nullable:
            return "None"
        return repr("" if d is None else str(d))
    if t in ("bytes", "records"):
        return "None" if (d == "null" and nullable) or t == "records" else "b''"
    raise ValueError(f"no default for type {t}")


class Compiler:
    """Writes the Python source of the decode functions of one message at one version."""

    def __init__(self, message: object, version: int, checked: bool):
        self.m = message
        self.version = version
        self.checked = checked
        self.flexible = in_versions(message.flexible_versions, version)
        self.functions: list[str] = []
        self.done: dict[str, str] = {}
        self.consts: dict[str, object] = {}
        self.counter = 0

    def resolve(self, f: dict) -> list:
        if "fields" in f:
            return f["fields"]
        name = f["type"][2:] if _is_array(f["type"]) else f["type"]
        common = self.m.common_structs.get(name)
        if common is None:
            raise ValueError(f"{self.m.name}: struct type {name} of field {f['name']} not defined")
        return common

    def const(self, value, prefix="S") -> str:
        self.counter += 1
        name = f"_{prefix}{self.counter}"
        self.consts[name] = value
        return name

    def tmp(self) -> str:
        self.counter += 1
        return f"t{self.counter}"

    # --- fragments; each returns lines at indent 0 and sets `target` ---------------------
    def need(self, lines, size_expr: str, label: str, what: str):
        """Bounds check before a fixed read (checked mode only: fast mode lets struct raise)."""
        if self.checked:
            lines.append(f"if pos + {size_expr} > end: _fail(pos, {label!r}, "
                         f"f'{{end - pos}} byte(s) left', {what!r})")

    def read_length(self, lines, var: str, kind: str, flexible: bool, label: str):
        """var = length (-1 = null) of a string/bytes/array."""
        if flexible:
            if self.checked:
                lines.append(f"{var}, pos = _uvarint(buf, pos, end)")
            else:
                lines.append(f"{var} = buf[pos]")
                lines.append("pos += 1")
                lines.append(f"if {var} > 127: {var}, pos = _uvarint(buf, pos - 1, end)")
            lines.append(f"{var} -= 1")
        else:
            fmt, width = ("h", 2) if kind == "string" else ("i", 4)
            self.need(lines, str(width), label, f"a {width}-byte {kind} length")
            lines.append(f"{var}, = _unpack_{fmt}(buf, pos)")
            lines.append(f"pos += {width}")

    def check_length(self, lines, var: str, label: str, nullable: bool, kind: str, flexible: bool):
        """Bounds of a length just read (negative = null where nullable, as Kafka reads it)."""
        long_string = kind == "string" and flexible   # an int16 length cannot exceed 0x7fff
        if not self.checked:   # one combined test; the checked variant names what broke
            cond = [] if nullable else [f"{var} < 0"]
            cond.append(f"{var} > end - pos")
            if long_string:
                cond.append(f"{var} > {MAX_STRING_BYTES}")
            lines.append(f"if {' or '.join(cond)}: _fail(pos, {label!r}, {var}, 'a valid length')")
            return
        if not nullable:
            lines.append(f"if {var} < 0: _fail(pos, {label!r}, {var}, "
                         f"'a length >= 0 (non-nullable {kind})')")
        pre = f"{var} >= 0 and " if nullable else ""
        if long_string:
            lines.append(f"if {pre}{var} > {MAX_STRING_BYTES}: _fail(pos, {label!r}, {var}, "
                         f"'a string length <= {MAX_STRING_BYTES}')")
        lines.append(f"if {pre}{var} > end - pos: _fail(pos, {label!r}, {var}, "
                     f"f'a length <= the {{end - pos}} byte(s) left')")

    def read_value(self, f: dict, target: str, label: str, lines: list, tagged: bool):
        t = f["type"]
        nullable, fflex = field_flags(f, self.version, self.flexible, tagged)
        if _is_array(t):
            self.read_array(f, t[2:], target, label, lines, fflex, nullable)
            return
        if t in FIXED:
            fmt, width = FIXED[t]
            self.need(lines, str(width), label, f"a {width}-byte {t}")
            if t == "uuid":
                lines.append(f"{target} = _uuid_str(buf[pos:pos + 16])")
            elif t == "bool":
                lines.append(f"{target} = buf[pos] != 0")
            else:
                lines.append(f"{target}, = _unpack_{fmt}(buf, pos)")
            lines.append(f"pos += {width}")
            return
        if t in VARIABLE:
            self.read_scalar_variable(t, target, label, lines, fflex, nullable)
            return
        # a single struct
        fn = self.struct_function(t, self.resolve(f))
        if nullable and not tagged:
            self.need(lines, "1", label, "a 1-byte null marker")
            mk = self.tmp()
            lines.append(f"{mk} = buf[pos]")
            lines.append("pos += 1")
            lines.append(f"if {mk} >= 128: {target} = None")
            lines.append(f"else: {target}, pos = {fn}(buf, pos, end)")
        else:
            lines.append(f"{target}, pos = {fn}(buf, pos, end)")

    def read_array(self, f: dict, elem: str, target: str, label: str, lines: list, fflex: bool, nullable: bool):
        n = self.tmp()
        self.read_length(lines, n, "array", fflex, label)
        self.check_length(lines, n, label, nullable, "array", fflex)
        if nullable:
            lines.append(f"if {n} < 0: {target} = None")
            lines.append("else:")
            body = []
        else:
            body = lines
        if elem in FIXED:
            fmt, width = FIXED[elem]
            self.need(body, f"{n} * {width}", label, f"{width}-byte array elements")
            i = self.tmp()
            if elem == "uuid":
                body.append(f"{target} = [_uuid_str(buf[{i}:{i} + 16]) for {i} in range(pos, pos + 16 * {n}, 16)]")
            elif elem == "bool":
                body.append(f"{target} = [buf[{i}] != 0 for {i} in range(pos, pos + {n})]")
            else:
                # short arrays through prebuilt structs, longer ones through struct's format cache
                body.append(f"{target} = list(_ARRAYS_{fmt}[{n}](buf, pos) if {n} < {SHORT_ARRAY} "
                            f"else _unpack(f'>{{{n}}}{fmt}', buf, pos))")
            body.append(f"pos += {width} * {n}")
        else:
            i, e = self.tmp(), self.tmp()
            body.append(f"{target} = []")
            body.append(f"for {i} in range({n}):")
            if elem in VARIABLE:
                inner = []
                self.read_scalar_variable(elem, e, f"{label}[]", inner, fflex, False)
                body.extend("    " + x for x in inner)
            else:
                fn = self.struct_function(elem, self.resolve(f))
                body.append(f"    {e}, pos = {fn}(buf, pos, end)")
            body.append(f"    {target}.append({e})")
        if nullable:
            lines.extend("    " + x for x in body)

    def read_scalar_variable(self, t: str, target: str, label: str, lines: list, fflex: bool, nullable: bool):
        n = self.tmp()
        kind = "string" if t == "string" else "bytes"
        self.read_length(lines, n, kind, fflex, label)
        self.check_length(lines, n, label, nullable, kind, fflex)
        if t == "string":
            # fast: strict UTF-8 (any error re-decodes checked); checked: as Java, bad bytes -> U+FFFD
            value = (f"str(buf[pos:pos + {n}], 'utf-8', 'replace')" if self.checked
                     else f"buf[pos:pos + {n}].decode()")
        else:
            value = f"bytes(buf[pos:pos + {n}])"
        if nullable:
            lines.append(f"if {n} < 0: {target} = None")
            lines.append("else:")
            lines.append(f"    {target} = {value}")
            lines.append(f"    pos += {n}")
        else:
            lines.append(f"{target} = {value}")
            lines.append(f"pos += {n}")

    def struct_function(self, struct_name: str, fields: list) -> str:
        key = f"{struct_name}#{id(fields)}"
        if key in self.done:
            return self.done[key]
        fn = f"_d_{struct_name}_{len(self.done)}"
        self.done[key] = fn
        lines = self.struct_body(struct_name, fields)
        lines.append("return o, pos")
        self.functions.append(f"def {fn}(buf, pos, end):\n" + "\n".join("    " + x for x in lines))
        return fn

    def struct_body(self, struct_name: str, fields: list) -> list:
        """Lines that decode one struct into `o`, advancing `pos`."""
        v = self.version
        lines = []
        present = [f for f in fields if in_versions(f.get("versions"), v)]
        tagged = [f for f in present if self.flexible and in_versions(f.get("taggedVersions"), v)]
        plain = [f for f in present if f not in tagged]
        names = {}
        # consecutive fixed-width non-tagged fields read in one unpack (fast mode)
        i = 0
        while i < len(plain):
            f = plain[i]
            var = f"v{i}"
            names[id(f)] = var
            run = []
            j = i
            while (not self.checked and j < len(plain) and plain[j]["type"] in FIXED
                   and plain[j]["type"] != "uuid"
                   and "flexibleVersions" not in plain[j]):
                run.append(plain[j])
                j += 1
            if len(run) >= 2:
                fmt = ">" + "".join(FIXED[g["type"]][0] for g in run)
                width = sum(FIXED[g["type"]][1] for g in run)
                s = self.const(struct.Struct(fmt))
                vars_ = []
                for k, g in enumerate(run):
                    names[id(g)] = f"v{i + k}"
                    vars_.append(f"v{i + k}")
                lines.append(f"{', '.join(vars_)}, = {s}.unpack_from(buf, pos)")
                lines.append(f"pos += {width}")
                i = j
                continue
            self.read_value(f, var, f"{struct_name}.{f['name']}", lines, tagged=False)
            i += 1
        items = [f"{json_name(f['name'])!r}: {names[id(f)]}" for f in plain]
        items += [f"{json_name(f['name'])!r}: {default_expr(f, v, self.resolve)}" for f in tagged]
        lines.append("o = {" + ", ".join(items) + "}")
        if self.flexible:
            self.tagged_section(lines, struct_name, tagged)
        return lines

    def tagged_section(self, lines, struct_name, tagged):
        label = f"{struct_name}._taggedFields"
        if self.checked:
            lines.append("nt, pos = _uvarint(buf, pos, end)")
        else:
            lines.append("nt = buf[pos]")
            lines.append("pos += 1")
            lines.append("if nt > 127: nt, pos = _uvarint(buf, pos - 1, end)")
        lines.append("if nt:")
        body = []
        body.append(f"if nt > end - pos: _fail(pos, {label!r}, nt, f'a tagged field count <= the {{end - pos}} byte(s) left')")
        body.append("for _ in range(nt):")
        loop = []
        loop.append("tp = pos")
        loop.append("tag, pos = _uvarint(buf, pos, end)")
        loop.append("size, pos = _uvarint(buf, pos, end)")
        loop.append(f"if size > end - pos: _fail(pos, {label!r}, size, f'a tagged field size <= the {{end - pos}} byte(s) left')")
        loop.append("tend = pos + size")
        first = True
        for f in sorted(tagged, key=lambda g: g["tag"]):
            kw = "if" if first else "elif"
            first = False
            loop.append(f"{kw} tag == {int(f['tag'])}:")
            inner = []
            flabel = f"{struct_name}.{f['name']}"
            self.read_value(f, "tv", flabel, inner, tagged=True)
            inner.append(f"if pos != tend: _fail(tp, {flabel!r}, f'{{pos - tend:+d}} byte(s) against its size {{size}}', "
                         "'the value to fill its tagged size exactly')")
            inner.append(f"o[{json_name(f['name'])!r}] = tv")
            loop.extend("    " + x for x in inner)
        if first:
            loop.append("if True:")
        else:
            loop.append("else:")
        loop.append(f"    o.setdefault({UNKNOWN_TAGGED_FIELDS!r}, {{}})[tag] = bytes(buf[pos:tend])")
        loop.append("    pos = tend")
        body.extend("    " + x for x in loop)
        lines.extend("    " + x for x in body)

    def build(self, slow: Callable | None = None, exact: bool = True) -> Callable:
        """The compiled function: ``f(buf, pos, end) -> (dict, pos)``; with ``slow`` given, the
        reader ``f(buf, pos=0, end=None, file=None, base=0)`` whose top-level struct is inlined in
        a try block that hands any failure to ``slow(buf, pos, end, file, base)``."""
        if slow is None:
            top = self.struct_function(self.m.name, self.m.fields)
        else:
            body = self.struct_body(self.m.name, self.m.fields)
            ok = "if pos == end: return o" if exact else "if pos <= end: return o, pos"
            top = "_read"
            self.functions.append(
                "def _read(buf, pos=0, end=None, file=None, base=0):\n"
                "    if end is None: end = len(buf)\n"
                "    p0 = pos\n"
                "    try:\n" + "\n".join("        " + x for x in body + [ok]) + "\n"
                "    except Exception:\n"
                "        pass\n"
                "    return _slow(buf, p0, end, file, base)")
        namespace = {"_slow": slow,
            **{f"_ARRAYS_{fmt}": _ARRAYS[fmt] for fmt in _ARRAYS},
            "_unpack": struct.unpack_from, "_uvarint": read_uvarint, "_fail": _fail, "_uuid_str": uuid_str,
            "_unpack_b": struct.Struct(">b").unpack_from, "_unpack_h": struct.Struct(">h").unpack_from,
            "_unpack_H": struct.Struct(">H").unpack_from, "_unpack_i": struct.Struct(">i").unpack_from,
            "_unpack_I": struct.Struct(">I").unpack_from, "_unpack_q": struct.Struct(">q").unpack_from,
            "_unpack_d": struct.Struct(">d").unpack_from,
        }
        namespace.update(self.consts)
        source = "\n\n".join(self.functions)
        code = compile(source, f"<kafka_message {self.m.name} v{self.version}"
                               f"{' checked' if self.checked else ''}>", "exec")
        exec(code, namespace)
        fn = namespace[top]
        fn.source = source
        return fn


