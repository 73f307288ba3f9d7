"""Kafka's message encoding, decoded from the generated spec tables (auditor/formats/specs/).

Kafka describes its records in JSON message specs; ``scripts/gen_kafka_specs.py`` turns the specs
shipped in Kafka's jars into data tables, and this module decodes any message of those tables at
any of its versions. For each (message, version) it compiles, once and lazily, a specialised
Python function from the table (consecutive fixed-width fields read by one ``struct`` call, no
per-record interpretation of the spec), so a record costs what a hand-written decoder would.

Encoding (Kafka's ``MessageDataGenerator``; kafka-format.md): fields in spec order, each present
in the versions its ``versions`` range names; big-endian fixed widths (int8/16/32/64, uint16,
uint32, float64, bool = one byte != 0, uuid = 16 bytes); in *flexible* versions strings, bytes,
records and arrays carry an unsigned-varint length + 1 (0 = null), else int16 (strings) or
int32 (bytes, records, arrays) lengths with -1 = null; a nullable struct field starts with an
int8 (-1 = null); every struct of a flexible version ends with its tagged fields (count, then
tag, size, data per field; unknown tags kept raw).

What comes back: a ``dict`` per struct, keys are the field names as Kafka's JSON converters
print them (first letter lower-cased: ``topicId``, ``partitionId``), values ``int``, ``float``,
``bool``, ``str``, ``bytes`` (bytes/records), ``None`` (null), ``list``, nested ``dict``; uuids
as ``str`` the way Kafka's tools print them (``Uuid.toString()``: URL-safe base64, no padding).
Fields absent from the version are absent from the dict; tagged fields absent from the data
carry their spec default. Unknown tagged fields: ``"_unknownTaggedFields": {tag: bytes}``.

Errors: every break is a :class:`FormatError` naming the file, byte position, field, value
found and what was expected. Lengths are checked against the bytes that remain before anything
is read or allocated. The fast path does only the checks that keep memory bounded; when it
fails, the same message is decoded again by a checked variant that pinpoints the field.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field as dc_field
from typing import Callable

from auditor.formats.errors import FormatError
from auditor.formats.specs import (kafka_clients, kafka_group_coordinator, kafka_metadata,
                                   kafka_share_coordinator, kafka_storage,
                                   kafka_transaction_coordinator)

#: The generated table modules, searched in this order by :func:`spec`.
SPEC_MODULES = (kafka_metadata, kafka_clients, kafka_group_coordinator, kafka_storage,
                kafka_transaction_coordinator, kafka_share_coordinator)

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

_UUID_CACHE: dict[bytes, str] = {}
_UUID_CACHE_MAX = 65536
_b64 = base64.urlsafe_b64encode


def uuid_str(raw: bytes) -> str:
    """16 bytes as Kafka's ``Uuid.toString()``: URL-safe base64 without padding."""
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


class _Retry(Exception):
    """The fast path saw something wrong: decode again with the checked variant."""


class _Fail(Exception):
    def __init__(self, pos, field, found, expected):
        super().__init__(pos, field, found, expected)
        self.pos, self.field, self.found, self.expected = pos, field, found, expected


def _uvarint(buf, pos, end):
    """(value, new position) of an unsigned varint (at most 5 bytes) starting at pos."""
    value = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise _Fail(start, "varint", f"{pos - start} byte(s) before the end", "a complete unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if pos - start >= MAX_VARINT_BYTES:
            raise _Fail(start, "varint", f"more than {MAX_VARINT_BYTES} bytes", "an unsigned varint of at most 5 bytes")


def _fail(pos, field, found, expected):
    raise _Fail(pos, field, found, expected)


# --------------------------------------------------------------------------------------------
# Code generation: one function per (struct, version, mode)
# --------------------------------------------------------------------------------------------

def _is_array(t: str) -> bool:
    return t.startswith("[]")


def _is_struct(t: str) -> bool:
    base = t[2:] if _is_array(t) else t
    return base not in FIXED and base not in VARIABLE


def _default_expr(f: dict, version: int, resolve) -> str:
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
        items = ", ".join(f"{json_name(g['name'])!r}: {_default_expr(g, version, resolve)}"
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


class _Compiler:
    """Writes the Python source of the decode functions of one message at one version."""

    def __init__(self, message: "MessageSpec", version: int, checked: bool):
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
        v = self.version
        nullable = in_versions(f.get("nullableVersions"), v)
        fflex = self.flexible
        if "flexibleVersions" in f:
            fflex = in_versions(f["flexibleVersions"], v)
        if tagged:
            fflex = True
        if _is_array(t):
            elem = t[2:]
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
                if elem == "uuid":
                    i = self.tmp()
                    body.append(f"{target} = [_uuid_str(buf[{i}:{i} + 16]) for {i} in range(pos, pos + 16 * {n}, 16)]")
                elif elem == "bool":
                    i = self.tmp()
                    body.append(f"{target} = [buf[{i}] != 0 for {i} in range(pos, pos + {n})]")
                else:
                    body.append(f"{target} = list(_unpack(f'>{{{n}}}{fmt}', buf, pos))")
                body.append(f"pos += {width} * {n}")
            elif elem in VARIABLE:
                i = self.tmp()
                body.append(f"{target} = []")
                body.append(f"for {i} in range({n}):")
                inner = []
                e = self.tmp()
                self.read_scalar_variable(elem, e, f"{label}[]", inner, fflex, False)
                inner.append(f"{target}.append({e})")
                body.extend("    " + x for x in inner)
            else:
                fn = self.struct_function(elem, self.resolve(f))
                i = self.tmp()
                e = self.tmp()
                body.append(f"{target} = []")
                body.append(f"for {i} in range({n}):")
                body.append(f"    {e}, pos = {fn}(buf, pos, end)")
                body.append(f"    {target}.append({e})")
            if nullable:
                lines.extend("    " + x for x in body)
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
        items += [f"{json_name(f['name'])!r}: {_default_expr(f, v, self.resolve)}" for f in tagged]
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
            "_unpack": struct.unpack_from, "_uvarint": _uvarint, "_fail": _fail, "_uuid_str": uuid_str,
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


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------

@dataclass
class MessageSpec:
    """One message spec of the generated tables, with its compiled decoders."""
    name: str
    type: str | None                 # "metadata", "coordinator-key", "coordinator-value", "data", ...
    api_key: int | None
    valid_versions: tuple            # (lowest, highest)
    flexible_versions: tuple | None  # (lowest, highest or None), None: never flexible
    fields: list
    common_structs: dict
    source: str                      # generated module name, e.g. "kafka_metadata"
    kafka_version: str
    _readers: dict = dc_field(default_factory=dict, repr=False)

    def has_version(self, version: int) -> bool:
        return in_versions(self.valid_versions, version)

    def struct_fields(self, f: dict) -> list:
        """The fields of a struct-typed field (inline, or one of the message's common structs)."""
        if "fields" in f:
            return f["fields"]
        t = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        return self.common_structs[t]

    def default_value(self, f: dict, version: int):
        """A field's spec default at ``version``, as the decoder fills in a missing tagged field."""
        return eval(_default_expr(f, version, self.struct_fields), {})   # an expression of literals

    def to_json(self, version: int, data: dict) -> dict:
        """``data`` as Kafka's generated JSON converters write it (what DumpLogSegments prints):
        tagged fields left out while they hold their default, bytes/records as base64, unknown
        tagged fields dropped."""
        return self._json_struct(self.fields, version, data)

    def _json_struct(self, fields, version, data):
        out = {}
        flexible = in_versions(self.flexible_versions, version)
        for f in fields:
            if not in_versions(f.get("versions"), version):
                continue
            name = json_name(f["name"])
            value = data.get(name)
            if flexible and in_versions(f.get("taggedVersions"), version) and value == self.default_value(f, version):
                continue
            out[name] = self._json_value(f, version, value)
        return out

    def _json_value(self, f, version, value):
        if value is None:
            return None
        t = f["type"]
        if t in ("bytes", "records"):
            return base64.b64encode(value).decode("ascii")
        if t.startswith("[]"):
            elem = t[2:]
            if elem in FIXED or elem in VARIABLE:
                return list(value)
            fields = self.struct_fields(f)
            return [self._json_struct(fields, version, v) for v in value]
        if t in FIXED or t in VARIABLE:
            return value
        return self._json_struct(self.struct_fields(f), version, value)

    def compiled(self, version: int, checked: bool = False) -> Callable:
        """The raw compiled function ``f(buf, pos, end) -> (dict, new_pos)`` (no error wrapping)."""
        return _Compiler(self, version, checked).build()

    def reader(self, version: int, exact: bool = True) -> Callable:
        """A decoder for one version: ``f(buf, pos=0, end=None, file=None, base=0)``.

        Returns the decoded dict when ``exact`` (the message must end exactly at ``end``), else
        ``(dict, end_position)``. ``file`` and ``base`` (the byte position of ``buf[0]`` in that
        file) only label errors. Raises :class:`FormatError`.
        """
        key = (version, exact)
        r = self._readers.get(key)
        if r is None:
            r = self._readers[key] = self._make_reader(version, exact)
        return r

    def decode(self, data, version: int, *, pos: int = 0, end: int | None = None,
               file=None, base: int = 0):
        """Decode one whole message (``data[pos:end]``) at ``version``; a dict, or FormatError."""
        return self.reader(version)(data, pos, end, file, base)

    def _make_reader(self, version: int, exact: bool) -> Callable:
        name = self.name
        if not self.has_version(version):
            expected = f"a version of {name} in {versions_text(self.valid_versions)} (Kafka {self.kafka_version} specs)"

            def unsupported(buf, pos=0, end=None, file=None, base=0):
                raise FormatError(file if file is not None else "<bytes>", base + pos, f"{name}.version",
                                  version, expected)
            return unsupported
        checked_box = []

        def slow(buf, pos, end, file, base):
            if not checked_box:
                checked_box.append(self.compiled(version, checked=True))
            label = file if file is not None else "<bytes>"
            try:
                obj, p = checked_box[0](buf, pos, end)
            except _Fail as e:
                raise FormatError(label, base + e.pos, e.field, e.found, e.expected) from None
            except (IndexError, struct.error, ValueError) as e:   # a bug, not bad input; still named
                raise FormatError(label, base + pos, f"{name} v{version}", type(e).__name__ + ": " + str(e),
                                  "bytes the decoder can read") from None
            if exact and p != end:
                raise FormatError(label, base + p, f"{name} v{version}", f"{end - p} byte(s) after the message",
                                  "the message to end exactly at the end of its bytes")
            return obj, p

        if exact:
            def slow_exact(buf, pos, end, file, base):
                return slow(buf, pos, end, file, base)[0]
            read = _Compiler(self, version, False).build(slow_exact, exact=True)
        else:
            read = _Compiler(self, version, False).build(slow, exact=False)
        return read


_BY_NAME: dict[str, MessageSpec] = {}
_BY_SOURCE: dict[str, dict[str, MessageSpec]] = {}
_BY_KEY: dict[tuple[str, int], MessageSpec] = {}


def _load():
    for module in SPEC_MODULES:
        source = module.__name__.rsplit(".", 1)[-1]
        table = {}
        for name, m in module.MESSAGES.items():
            spec_ = MessageSpec(name=name, type=m.get("type"), api_key=m.get("apiKey"),
                                valid_versions=m["validVersions"], flexible_versions=m.get("flexibleVersions"),
                                fields=m["fields"], common_structs=m.get("commonStructs", {}),
                                source=source, kafka_version=module.KAFKA_VERSION)
            table[name] = spec_
            _BY_NAME.setdefault(name, spec_)
            if spec_.api_key is not None and spec_.type is not None:
                _BY_KEY.setdefault((spec_.type, spec_.api_key), spec_)
        _BY_SOURCE[source] = table


_load()


def spec(name: str, source: str | None = None) -> MessageSpec:
    """The message spec named ``name`` (e.g. "PartitionRecord", "OffsetCommitValue"); KeyError if none.

    ``source`` picks a generated module ("kafka_metadata", "kafka_group_coordinator", ...) when a
    name exists in several jars.
    """
    if source is not None:
        return _BY_SOURCE[source][name]
    return _BY_NAME[name]


def by_api_key(spec_type: str, api_key: int) -> MessageSpec | None:
    """The spec of a given type ("metadata", "coordinator-key", "coordinator-value") and api key."""
    return _BY_KEY.get((spec_type, api_key))


def specs(source: str | None = None) -> list[MessageSpec]:
    """Every spec (of one generated module when ``source`` is given)."""
    if source is not None:
        return list(_BY_SOURCE[source].values())
    return [s for table in _BY_SOURCE.values() for s in table.values()]


def decode(name: str, version: int, data, *, pos: int = 0, end: int | None = None, file=None, base: int = 0) -> dict:
    """Decode one message ``name`` at ``version`` from ``data[pos:end]`` (shortcut of spec().decode())."""
    return spec(name).decode(data, version, pos=pos, end=end, file=file, base=base)
