"""Decode programs for the C message decoder (``auditor/formats/_cmessage.c``), built at run time
from the generated spec tables (auditor/formats/specs/), the same tables message_codegen compiles
into Python: the spec tables stay the one source, the C side knows the wire encoding only.

A program describes one (message, version) as nested tuples; ``_cmessage.Decoder`` turns it into
C arrays once and decodes by walking them. Encoding rules: kafka_message's docstring.

    struct  = (flexible, plain fields, tagged fields as (tag, field), defaults as (key, value))
    field   = (key, kind, nullable, flexible length, sub)
    sub     = struct program (kind STRUCT), (element kind, element struct or None) (kind ARRAY),
              else None

``key`` is the field's name as the Python decoder writes it (``json_name``); ``nullable`` of a
non-tagged struct field means "starts with an int8 null marker" (a tagged struct has none);
``defaults`` hold the value each tagged field takes when the data lacks it (``default_expr``,
evaluated: lists and dicts are copied by the C side for every decoded message).

The C decoder returns a result only when every length, varint and bound is regular and every
string is valid UTF-8; anything else is handed to the Python reader (its ``fallback``), which
names the problem exactly as without the extension.
"""

from __future__ import annotations

from auditor.formats.message_codegen import FIXED, VARIABLE, default_expr, field_flags, in_versions, json_name

try:  # optional C decoder (setup.py builds it when a compiler is there)
    from auditor.formats import _cmessage
except ImportError:  # pragma: no cover - the pure-Python path is tested by switching C off
    _cmessage = None

#: The extension is built and importable.
C_AVAILABLE = _cmessage is not None

#: The kinds the C decoder knows (same numbers as ``enum kind`` in _cmessage.c).
KINDS = {"bool": 0, "int8": 1, "int16": 2, "uint16": 3, "int32": 4, "uint32": 5, "int64": 6,
         "float64": 7, "uuid": 8, "string": 9, "bytes": 10, "records": 10}
STRUCT = 11
ARRAY = 12


class Unsupported(Exception):
    """A spec shape the C decoder does not take (the Python decoder alone reads it)."""


def _base(t: str) -> str:
    return t[2:] if t.startswith("[]") else t


class ProgramBuilder:
    """The program of one message spec (a kafka_message.MessageSpec) at one version."""

    def __init__(self, message, version: int):
        self.m = message
        self.version = version
        self.flexible = in_versions(message.flexible_versions, version)

    def resolve(self, f: dict) -> list:
        if "fields" in f:
            return f["fields"]
        common = self.m.common_structs.get(_base(f["type"]))
        if common is None:
            raise Unsupported(f"{self.m.name}: struct type {f['type']} of field {f['name']} not defined")
        return common

    def struct(self, fields: list) -> tuple:
        v = self.version
        present = [f for f in fields if in_versions(f.get("versions"), v)]
        tagged = [f for f in present if self.flexible and in_versions(f.get("taggedVersions"), v)]
        plain = [f for f in present if f not in tagged]
        defaults = tuple((json_name(f["name"]), eval(default_expr(f, v, self.resolve), {}))  # literals only
                         for f in tagged)
        return (self.flexible,
                tuple(self.field(f, tagged=False) for f in plain),
                tuple((int(f["tag"]), self.field(f, tagged=True)) for f in sorted(tagged, key=lambda g: g["tag"])),
                defaults)

    def field(self, f: dict, tagged: bool) -> tuple:
        t = f["type"]
        nullable, flex = field_flags(f, self.version, self.flexible, tagged)
        key = json_name(f["name"])
        if t.startswith("[]"):
            elem = t[2:]
            if elem in KINDS:
                return key, ARRAY, nullable, flex, (KINDS[elem], None)
            if elem.startswith("[]"):
                raise Unsupported(f"{self.m.name}.{f['name']}: array of arrays")
            return key, ARRAY, nullable, flex, (STRUCT, self.struct(self.resolve(f)))
        if t in FIXED or t in VARIABLE:
            return key, KINDS[t], nullable, flex, None
        return key, STRUCT, nullable and not tagged, flex, self.struct(self.resolve(f))


def program(message, version: int) -> tuple:
    """The decode program of ``message`` (a kafka_message.MessageSpec) at ``version``."""
    return ProgramBuilder(message, version).struct(message.fields)


def c_reader(message, version: int, exact: bool, fallback):
    """A ``_cmessage.Decoder`` with the Python reader's signature and results, or None when the
    extension is not built or the spec has a shape it does not take. ``fallback`` (the Python
    reader) is called, with the same arguments, for anything irregular."""
    if _cmessage is None:
        return None
    try:
        prog = program(message, version)
    except Unsupported:
        return None
    return _cmessage.Decoder(prog, exact, fallback)
