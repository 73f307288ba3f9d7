"""The message-spec decoder: KRaft metadata records, __consumer_offsets keys and values,
__remote_log_metadata values, control record values (auditor/formats/kafka_message.py and its
generated Python readers, against the C interpreter of the same tables, _cmessage.Decoder).

Input: a mode byte, then the bytes of one value (or a target number and a message body):

* 0: a framed metadata record value (metadata_records.decode_metadata_value);
* 1: a __remote_log_metadata value (remote_log_metadata.decode_value);
* 2: a coordinator key (offsets_records.decode_key);
* 3: a coordinator record type byte, then its value (offsets_records.decode_value);
* 4-7: a control record type byte and version byte, then its value (decode_control_value);
* else: two bytes naming one (message, version) of every spec read from disk, then its body,
  decoded exact (even mode) or not (odd mode).

Checks: the public decoders raise nothing but FormatError. For the (message, version) each input
reaches, the C decoder alone (``Decoder.c_decode``: None where it would ask the Python reader)
and the pure-Python reader are run on the same bytes: whenever C gives a result, Python must give
the very same one (repr-equal: same keys, order, types and values), never a FormatError. That
comparison is independent. Where C answers None the full decoder calls the Python reader with the
same arguments, so its result or error is Python's by construction (checked too, cheaply).
The C side reads from a buffer that ends where its allocation ends (common.exact_buffer).
"""

from __future__ import annotations

import struct

from auditor.formats import kafka_message as km
from auditor.formats import message_program
from auditor.formats import metadata_records as mrec
from auditor.formats import offsets_records as orec
from auditor.formats import remote_log_metadata as rlm
from auditor.formats.errors import FormatError

from fuzz.common import Disagreement, exact_buffer

#: every (message, version) the tool reads from disk: metadata, coordinator keys and values,
#: remote log metadata, control records
SOURCES = ("kafka_metadata", "kafka_group_coordinator", "kafka_storage", "kafka_transaction_coordinator",
           "kafka_share_coordinator")
CONTROL = tuple(mrec.CONTROL_SPECS.values())
TARGETS = [(s, v) for s in sorted(km.specs(), key=lambda s: (s.source, s.name))
           if s.source in SOURCES or (s.source == "kafka_clients" and s.name in CONTROL)
           for v in range(s.valid_versions[0], (s.valid_versions[1] if s.valid_versions[1] is not None
                                                else s.valid_versions[0]) + 1)]
_READERS: dict = {}


def _readers(spec, version: int, exact: bool):
    key = (spec.source, spec.name, version, exact)
    r = _READERS.get(key)
    if r is None:
        python = spec._make_reader(version, exact)
        r = _READERS[key] = (python, message_program.c_reader(spec, version, exact, python))
    return r


def _outcome(call):
    try:
        return "ok", call()
    except FormatError as exc:
        return "error", str(exc)


def compare(spec, version: int, buf: bytes, pos: int, end: int, exact: bool = True) -> None:
    """C alone vs Python alone on ``buf[pos:end]`` at ``version`` (see the module docstring)."""
    if not spec.has_version(version):
        return
    python, c = _readers(spec, version, exact)
    py = _outcome(lambda: python(buf, pos, end, "fuzz", 0))
    if c is None:
        return
    alone = c.c_decode(exact_buffer(buf), pos, end)
    if alone is not None and (py[0] != "ok" or repr(alone) != repr(py[1])):
        raise Disagreement(f"{spec.name} v{version} (exact={exact}) bytes {buf[pos:end].hex()}: "
                           f"C decoded {alone!r}, Python gave {py}")
    full = _outcome(lambda: c(buf, pos, end, "fuzz", 0))
    if repr(full) != repr(py):
        raise Disagreement(f"{spec.name} v{version}: the C decoder's call gave {full}, Python {py}")
    # the keyword call form, and error positions offset by base (as the metadata log reader calls it)
    keywords = _outcome(lambda: c(buf, pos=pos, end=end, file="fuzz", base=7))
    if repr(keywords) != repr(_outcome(lambda: python(buf, pos, end, "fuzz", 7))):
        raise Disagreement(f"{spec.name} v{version}: keyword call {keywords} differs from Python's")


def _metadata_value(value: bytes) -> None:
    try:
        frame = mrec.read_frame(value)
    except FormatError:
        return
    if frame.spec is not None:
        compare(frame.spec, frame.version, value, frame.body_position, len(value))
    try:
        mrec.decode_metadata_value(value)
    except FormatError:
        pass


def _remote_value(value: bytes) -> None:
    try:
        _fv, api_key, version, pos = rlm.read_frame(value, "fuzz")
    except FormatError:
        return
    if api_key in rlm.MESSAGES:
        compare(km.spec(rlm.MESSAGES[api_key][0], rlm.SPEC_SOURCE), version, value, pos, len(value))
    try:
        rlm.decode_value(value, "fuzz")
    except FormatError:
        pass


def _key(key: bytes) -> None:
    rtype = orec.key_version(key)
    spec = km.by_api_key(orec.KEY_SPEC_TYPE, rtype) if rtype is not None else None
    if spec is not None:
        version = spec.valid_versions[1] if spec.valid_versions[1] is not None else spec.valid_versions[0]
        compare(spec, version, key, orec.VERSION_LENGTH, len(key))
    try:
        orec.decode_key(key)
    except FormatError:
        pass


def _value(rtype: int, value: bytes) -> None:
    spec = km.by_api_key(orec.VALUE_SPEC_TYPE, rtype)
    if spec is not None and len(value) >= 2:
        compare(spec, struct.unpack_from(">h", value)[0], value, orec.VERSION_LENGTH, len(value))
    try:
        orec.decode_value(rtype, value)
    except FormatError:
        pass


def _control(ctype: int, version: int, value: bytes) -> None:
    name = mrec.CONTROL_SPECS.get(ctype)
    if name is not None:
        compare(km.spec(name, "kafka_clients"), version, value, 0, len(value))
    try:
        mrec.decode_control_value(ctype, version, value)
    except FormatError:
        pass


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0], data[1:]
    if mode == 0:
        _metadata_value(body)
    elif mode == 1:
        _remote_value(body)
    elif mode == 2:
        _key(body)
    elif mode == 3:
        _value(body[0] if body else 0, body[1:])
    elif mode < 8:
        _control(body[0] if body else 0, body[1] if len(body) > 1 else 0, body[2:])
    else:
        n = struct.unpack_from(">H", body)[0] if len(body) >= 2 else 0
        spec, version = TARGETS[n % len(TARGETS)]
        compare(spec, version, body, 2, len(body), exact=mode % 2 == 0)
