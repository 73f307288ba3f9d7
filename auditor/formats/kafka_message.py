"""Kafka's message encoding, decoded from the generated spec tables (auditor/formats/specs/).

Kafka describes its records in JSON message specs; ``scripts/gen_kafka_specs.py`` turns the specs
shipped in Kafka's jars into data tables, and this module decodes any message of those tables at
any of its versions. For each (message, version) it compiles, once and lazily, a specialised
Python function from the table (consecutive fixed-width fields read by one ``struct`` call, no
per-record interpretation of the spec), so a record costs what a hand-written decoder would.

Encoding (Kafka's ``MessageDataGenerator``; docs/kafka-format-notes.md, "Message encoding"): fields in spec order, each present
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

With the optional C extension built, :meth:`MessageSpec.reader` returns a ``_cmessage.Decoder``
that decodes regular messages from a program built out of the same tables
(:mod:`auditor.formats.message_program`) and hands anything irregular to the Python reader
above, so results and errors are the same with it and without it (:data:`use_c`).
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field as dc_field
from typing import Callable

from auditor.formats import message_program
from auditor.formats.errors import FormatError
from auditor.formats.message_codegen import (FIXED, MAX_STRING_BYTES, MAX_VARINT_BYTES,  # noqa: F401 (API)
                                             UNKNOWN_TAGGED_FIELDS, VARIABLE, ZERO_UUID, Compiler,
                                             DecodeFailure, default_expr, in_versions, json_name,
                                             read_uvarint, uuid_bytes, uuid_str, versions_text)
from auditor.formats.specs import (kafka_clients, kafka_group_coordinator, kafka_metadata,
                                   kafka_share_coordinator, kafka_storage,
                                   kafka_transaction_coordinator)

#: The generated table modules, searched in this order by :func:`spec`.
SPEC_MODULES = (kafka_metadata, kafka_clients, kafka_group_coordinator, kafka_storage,
                kafka_transaction_coordinator, kafka_share_coordinator)

#: Decode through the C extension (auditor/formats/_cmessage.c, programs from the same tables) when
#: it is built. Same dicts, same errors either way: the C decoder hands anything irregular to the
#: Python reader. Tests switch it off to compare both paths.
use_c = message_program.C_AVAILABLE


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
        return eval(default_expr(f, version, self.struct_fields), {})   # an expression of literals

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
        return Compiler(self, version, checked).build()

    def reader(self, version: int, exact: bool = True) -> Callable:
        """A decoder for one version: ``f(buf, pos=0, end=None, file=None, base=0)``.

        Returns the decoded dict when ``exact`` (the message must end exactly at ``end``), else
        ``(dict, end_position)``. ``file`` and ``base`` (the byte position of ``buf[0]`` in that
        file) only label errors. Raises :class:`FormatError`. With :data:`use_c` (the extension
        built), a ``_cmessage.Decoder`` whose ``fallback`` is the Python reader.
        """
        c = use_c
        key = (version, exact, c)
        r = self._readers.get(key)
        if r is None:
            r = self._make_reader(version, exact)
            if c and self.has_version(version):
                r = message_program.c_reader(self, version, exact, r) or r
            self._readers[key] = r
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
            except DecodeFailure as e:
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
            read = Compiler(self, version, False).build(slow_exact, exact=True)
        else:
            read = Compiler(self, version, False).build(slow, exact=False)
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
