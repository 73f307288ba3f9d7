"""The message-spec decoder: KRaft metadata records, __consumer_offsets keys and values,
__remote_log_metadata values, control record values (auditor/formats/kafka_message.py and its
generated Python readers, against the C interpreter of the same tables, _cmessage.Decoder).

Input: a mode byte, then the bytes of one value (or a target number and a message body):

* 0: a framed metadata record value (metadata_records.decode_metadata_value);
* 1: a __remote_log_metadata value (remote_log_metadata.decode_value);
* 2: a coordinator key (offsets_records.decode_key);
* 3: a coordinator record type byte, then its value (offsets_records.decode_value);
* 4-7: a control record type byte and version byte, then its value (decode_control_value);
* 0xFE: the Decoder's program compiler: two bytes naming one (message, version), a damage byte,
  two bytes naming a node of its program; that node damaged (a wrong type or shape at each level
  of the program: struct, parts, field, key, kind, array element, tagged entry, tag, default), or
  a default holding nested lists and dicts (copied for every message): ``_cmessage.Decoder`` must
  refuse a damaged program with ValueError / TypeError / OverflowError, never crash;
* 0xFF: the call forms the readers never use, on two bytes naming a (message, version) and a
  body: c_decode of a buffer that does not convert or of positions that are not ints (None), a
  keyword that is not UTF-8 and too many arguments (handed to the Python reader, which raises
  TypeError), a fallback that is not callable (TypeError);
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


PROGRAM_MODE, CALLS_MODE = 0xFE, 0xFF
#: damage kinds of PROGRAM_MODE: where in the program, and what is put there
DAMAGES = ("struct", "parts", "field", "key", "kind", "kind type", "array sub", "element kind", "tagged entry",
           "tag", "default", "default key", "nested defaults")
REFUSED = (ValueError, TypeError, OverflowError)


def _nodes(prog: tuple, out: dict) -> dict:
    """Every struct, field, tagged entry and default of a program, by what it is (paths as tuples)."""
    out.setdefault("struct", []).append(prog)
    _flexible, plain, tagged, defaults = prog
    fields = list(plain) + [f for _tag, f in tagged]
    out.setdefault("field", []).extend(fields)
    out.setdefault("tagged entry", []).extend(tagged)
    out.setdefault("default", []).extend(defaults)
    for f in fields:
        if f[1] == message_program.ARRAY:
            out.setdefault("array", []).append(f)
            if f[4][0] == message_program.STRUCT:
                _nodes(f[4][1], out)
        elif f[1] == message_program.STRUCT:
            _nodes(f[4], out)
    return out


def _replace(tree, old, new):
    """``tree`` with the node ``old`` (by identity) replaced by ``new`` (tuples rebuilt on the path)."""
    if tree is old:
        return new
    if isinstance(tree, tuple):
        return tuple(_replace(t, old, new) for t in tree)
    return tree


def _damaged(prog: tuple, damage: str, pick: int):
    """(program with one node damaged, True when it must be refused), or None when it has no such node."""
    nodes = _nodes(prog, {})
    kind = {"parts": "struct", "key": "field", "kind": "field", "kind type": "field", "array sub": "array",
            "element kind": "array", "tag": "tagged entry", "default key": "default",
            "nested defaults": "struct"}.get(damage, damage)
    if not nodes.get(kind):
        return None
    # the nested defaults go on the top struct, where the check below finds them
    node = prog if damage == "nested defaults" else nodes[kind][pick % len(nodes[kind])]
    new = {
        "struct": lambda n: n[:3],
        "parts": lambda n: (n[0], list(n[1]), n[2], n[3]),
        "field": lambda n: n[:4],
        "key": lambda n: (n[0].encode(),) + n[1:],
        "kind": lambda n: (n[0], 99) + n[2:],
        "kind type": lambda n: (n[0], "int8") + n[2:],
        "array sub": lambda n: n[:4] + (None,),
        "element kind": lambda n: n[:4] + ((99, None),),
        "tagged entry": lambda n: n + (0,),
        "tag": lambda n: (-1,) + n[1:],
        "default": lambda n: n[:1],
        "default key": lambda n: (5,) + n[1:],
        "nested defaults": lambda n: n[:3] + (n[3] + (("fuzzNested", [[1, {"a": [2]}], {"b": []}]),),),
    }[damage](node)
    return _replace(prog, node, new), damage != "nested defaults"


def _program_mode(body: bytes) -> None:
    if len(body) < 5 or message_program._cmessage is None:
        return
    n, damage, pick = struct.unpack_from(">HBH", body)
    spec, version = TARGETS[n % len(TARGETS)]
    try:
        prog = message_program.program(spec, version)
    except message_program.Unsupported:
        return
    got = _damaged(prog, DAMAGES[damage % len(DAMAGES)], pick)
    if got is None:
        return
    prog, refused = got
    python, _c = _readers(spec, version, True)
    try:
        dec = message_program._cmessage.Decoder(prog, True, python)
    except REFUSED:
        if refused:
            return
        raise
    if refused:
        raise Disagreement(f"Decoder took a damaged program ({DAMAGES[damage % len(DAMAGES)]}): {prog!r}")
    buf = exact_buffer(body[5:])
    first, second = dec.c_decode(buf), dec.c_decode(buf)
    if first is not None:   # a default of lists and dicts: equal in every message, never the same object
        if first["fuzzNested"] != [[1, {"a": [2]}], {"b": []}] or first["fuzzNested"] is second["fuzzNested"]:
            raise Disagreement(f"nested default decoded as {first['fuzzNested']!r}")


def _calls_mode(body: bytes) -> None:
    n = struct.unpack_from(">H", body)[0] if len(body) >= 2 else 0
    spec, version = TARGETS[n % len(TARGETS)]
    python, c = _readers(spec, version, True)
    if c is None:
        return
    for args in ((5,), (body, "0"), (body, 2, "end"), (body, 2**70)):
        if c.c_decode(*args) is not None:
            raise Disagreement(f"c_decode{args!r} gave a result")
    for call in (lambda: c(body, **{"\udc80": 0}), lambda: c(body, 2, len(body), "fuzz", 0, 1)):
        try:
            call()
        except TypeError:
            continue
        raise Disagreement("a call form the Python reader refuses was taken")
    try:
        type(c)(c.program, True, 5)
    except TypeError:
        return
    raise Disagreement("Decoder took a fallback that is not callable")


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0], data[1:]
    if mode == PROGRAM_MODE:
        _program_mode(body)
    elif mode == CALLS_MODE:
        _calls_mode(body)
    elif mode == 0:
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
