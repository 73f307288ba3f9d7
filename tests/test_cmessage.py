"""The C message decoder (auditor/formats/_cmessage.c) gives exactly what the Python decoder of
kafka_message gives: same dicts (keys, key order, value types), same notes and errors.

The C side decodes only regular input and hands everything else to the Python reader; these
tests prove (1) that it really decodes the real records itself (not a silent fallback), (2) that
what it decodes equals the Python path, value type by value type, on every record of the three
real metadata snapshots, the real __consumer_offsets records and generated messages of every
spec and version, and (3) that damaged input (cut, flipped bytes, unknown api key, newer version,
a body cut short, a truncated snapshot, a batch whose framing breaks) gives the same entries and
the same notes with the extension and without it (``kafka_message.use_c`` switched off).
"""

from __future__ import annotations

import random
import shutil
import struct
from pathlib import Path

import crc32c
import pytest

from auditor.cluster import metadata_log as ml
from auditor.formats import kafka_message as km
from auditor.formats import message_program
from auditor.formats import metadata_records as mr
from auditor.formats import offsets_records as orec
from auditor.formats.errors import FormatError
from auditor.formats.log_reader import LogReader
from auditor.formats.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, RECORDS_COUNT_OFFSET
from harness.realdata import BROKER_DIRS, REAL, at_least
from harness.metadata_records import rewrite_record
from harness.spec_messages import Encoder

pytestmark = pytest.mark.recorded

METADATA = REAL / "metadata" / "kraft-transactional" / ml.METADATA_DIR_NAME
SNAPSHOTS = at_least(sorted(METADATA.glob("*.checkpoint")), 3, "KRaft metadata snapshots")


def same(a, b) -> bool:
    """Equal and of the same types all the way down (True is not 1; dict key order counts)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b)      # NaN payloads too
    return a == b


def outcome(reader, *args, **kwargs):
    try:
        return "ok", reader(*args, **kwargs)
    except Exception as e:   # FormatError, or whatever the Python reader raises
        return type(e).__name__, str(e)


def format_outcome(reader, *args):
    """("ok", value) or ("FormatError", (file, position, field, message)); any other exception
    propagates and fails the test: damaged bytes must give the format's own error, never a crash."""
    try:
        return "ok", reader(*args)
    except FormatError as e:
        return "FormatError", (e.file, e.position, e.field, str(e))


def assert_damage_named(dec, buf: bytes, file: str = "f", base: int = 7):
    """C-first and Python alone: the same value or the same FormatError, naming ``file`` and a
    position within the bytes given; the C decoder alone never accepts what Python refuses and
    never returns another value (it hands anything irregular to Python)."""
    python = format_outcome(dec.fallback, buf, 0, None, file, base)
    assert same(format_outcome(dec, buf, 0, None, file, base), python)
    c_alone = dec.c_decode(buf)
    if python[0] == "FormatError":
        err_file, position, _field, message = python[1]
        assert err_file == file and base <= position <= base + len(buf), message
        assert message.startswith(f"{file}: byte {position}: "), message
        assert c_alone is None, (buf.hex(), message)
    else:
        assert c_alone is None or same(c_alone, python[1])
    return python


def entries_and_notes(path, use_c: bool, monkeypatch, **kw):
    monkeypatch.setattr(km, "use_c", use_c)
    notes: list[ml.Note] = []
    entries = [(e.file, e.position, e.offset, e.timestamp_ms, e.control, e.type, e.version, e.data)
               for e in ml.read_entries(path, notes, **kw)]
    monkeypatch.setattr(km, "use_c", True)
    return entries, [str(n) for n in notes]


def assert_same_both_ways(path, monkeypatch, **kw):
    with_c = entries_and_notes(path, True, monkeypatch, **kw)
    pure = entries_and_notes(path, False, monkeypatch, **kw)
    assert with_c[1] == pure[1]
    assert len(with_c[0]) == len(pure[0])
    for a, b in zip(*(with_c[0], pure[0])):
        assert same(a, b), (a, b)
    return with_c


def test_extension_is_built():
    # CI builds it with the machine's gcc (setup.py); a silent fallback would hide a 3x slowdown
    assert message_program.C_AVAILABLE, "auditor/formats/_cmessage.c was not built: `pip install -e .` with gcc"
    assert km.use_c
    assert isinstance(km.spec("PartitionRecord").reader(1), message_program._cmessage.Decoder)
    assert mr._cmessage is not None


# ------------------------------------------------------------------ real records ----------------

def _metadata_values(path):
    reader = LogReader(path)
    for batch in reader.batches():
        if not batch.is_control:
            for offset, _ts, _key, value in mr.iter_records(batch, reader.read_batch_bytes(batch)):
                yield offset, value
    reader.close()


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.name)
def test_real_snapshot_records_decoded_by_c_alone_equal_python(path, monkeypatch):
    count = 0
    for offset, value in _metadata_values(path):
        frame = mr.read_frame(value)
        dec = frame.spec.reader(frame.version)
        got = dec.c_decode(value, frame.body_position)
        assert got is not None, (path, offset, frame.spec.name)            # C itself, no fallback
        assert same(got, dec.fallback(value, frame.body_position, len(value))), (offset, got)
        count += 1
    assert count == {7364: 163, 21265: 163, 60500: 169}[int(path.name.split("-")[0])]
    entries, notes = assert_same_both_ways(path, monkeypatch)
    assert notes == [] and len(entries) == count + 2                           # + header, footer
    # the whole-batch C path took every data record (the frame table filled by the pass above)
    reader = LogReader(path)
    for batch in reader.batches():
        if not batch.is_control:
            it = mr.c_metadata_batch(batch, reader.read_batch_bytes(batch), ml.MetadataEntry, None,
                                     label=str(path), position=batch.position)
            assert len(list(it)) == it.count == batch.last_offset - batch.base_offset + 1 and it.fallbacks == 0
    reader.close()


def test_real_consumer_offsets_records_equal_python(monkeypatch):
    dirs = sorted(BROKER_DIRS.glob("*/*/__consumer_offsets-*"))
    assert dirs
    decoded_in_c = 0
    for seg in sorted(p for d in dirs for p in d.glob("*.log")):
        reader = LogReader(seg)
        for batch in reader.batches():
            if batch.magic != 2 or batch.is_control:
                continue
            for _o, _t, key, value in orec.iter_key_values(batch, reader.read_batch_bytes(batch)):
                rtype = orec.key_version(key)
                results = []
                for use_c in (True, False):
                    monkeypatch.setattr(km, "use_c", use_c)
                    k = outcome(orec.decode_key, key)
                    v = outcome(orec.decode_value, rtype, value) if value is not None else None
                    results.append((k, v))
                assert same(results[0], results[1]), (seg, results)
                spec = km.by_api_key(orec.VALUE_SPEC_TYPE, rtype)
                if value is not None and spec is not None:
                    monkeypatch.setattr(km, "use_c", True)
                    version = struct.unpack_from(">h", value)[0]
                    if spec.has_version(version) and spec.reader(version).c_decode(value, 2) is not None:
                        decoded_in_c += 1
        reader.close()
    assert decoded_in_c > 100


# ------------------------------------------------------------------ every spec and version ------

def uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _every_spec_version():
    return [(s, v) for s in km.specs() for v in range(s.valid_versions[0], s.valid_versions[1] + 1)]


def test_generated_messages_of_every_spec_and_version_and_their_damaged_copies():
    rnd = random.Random(11)
    pairs = _every_spec_version()
    assert len(pairs) > 100
    for spec, version in pairs:
        dec = spec.reader(version)
        prefix = spec.reader(version, exact=False)
        assert isinstance(dec, message_program._cmessage.Decoder), spec.name
        for _ in range(6):
            buf = Encoder(spec, version, rnd).struct(spec.fields)
            got = dec.c_decode(buf)
            assert got is not None, (spec.name, version, buf.hex())
            assert same(got, dec.fallback(buf)), (spec.name, version)
            assert same(outcome(prefix, buf + b"xy"), outcome(prefix.fallback, buf + b"xy"))
            damaged = [buf[:rnd.randrange(len(buf))] for _ in range(4)] if buf else [b""]
            for _ in range(4):
                flipped = bytearray(buf + b"\x00")
                flipped[rnd.randrange(len(flipped))] ^= 1 << rnd.randrange(8)
                damaged.append(bytes(flipped))
            refused = [assert_damage_named(dec, bad)[0] == "FormatError" for bad in damaged]
            # truncations that cut a field short are refused
            assert any(refused) or not buf, (spec.name, version)


def test_call_forms_and_buffer_types_equal_python():
    spec = km.spec("RegisterBrokerRecord")
    value = next(v for _o, v in _metadata_values(SNAPSHOTS[-1]) if v[1] == spec.api_key)
    dec, version = spec.reader(value[2]), value[2]
    want = dec.fallback(value, 3, len(value), "f", 0)
    for buf in (value, bytearray(value), memoryview(value)):
        assert same(dec(buf, 3), want) and same(dec(buf, pos=3, end=len(buf), file="f", base=9), want)
        # the Python reader too (its uuid cache once refused a bytearray's slices)
        assert same(dec.fallback(buf, 3, len(value), "f", 0), want)
    assert same(dec.c_decode(memoryview(value), 3), want)
    padded = b"zz" + value + b"tail"
    assert same(dec(padded, 5, 2 + len(value)), want)
    assert same(spec.reader(version, exact=False)(padded, 5), (want, 2 + len(value)))
    for args in [(value, 3, len(value) + 1), (value, -1), (value, 4, 3), (None,), (value, "3")]:
        assert outcome(dec, *args) == outcome(dec.fallback, *args)
        assert dec.c_decode(*args[:3]) is None if args[0] is not None else True
    # invalid UTF-8 is left to Python, which replaces it as Java does
    topic = km.spec("TopicRecord")
    bad = uv(3) + b"a\xff" + bytes(16) + b"\x00"
    assert topic.reader(0).c_decode(bad) is None and topic.decode(bad, 0)["name"] == "a\ufffd"


# ------------------------------------------------------------------ damaged metadata files ------

def _copy(tmp_path) -> Path:
    d = tmp_path / "logdir" / ml.METADATA_DIR_NAME
    shutil.copytree(METADATA, d)
    return d


def _set_record_count(path: Path, batch_index: int, delta: int) -> None:
    data = bytearray(path.read_bytes())
    reader = LogReader(path)
    batch = [b for b in reader.batches()][batch_index]
    reader.close()
    at = batch.position + RECORDS_COUNT_OFFSET
    struct.pack_into(">i", data, at, struct.unpack_from(">i", data, at)[0] + delta)
    crc = crc32c.crc32c(bytes(data[batch.position + ATTRIBUTES_OFFSET: batch.position + batch.size_bytes]))
    struct.pack_into(">I", data, batch.position + CRC_OFFSET, crc)
    path.write_bytes(bytes(data))


def test_damaged_snapshot_same_entries_and_notes_with_and_without_c(tmp_path, monkeypatch):
    d = _copy(tmp_path)
    newest = d / SNAPSHOTS[-1].name
    types = {e.offset: e.type for e in ml.read_entries(newest, [])}
    topics = sorted(o for o, t in types.items() if t == "TopicRecord")
    parts = sorted(o for o, t in types.items() if t == "PartitionRecord")
    rewrite_record(newest, topics[0], lambda v: v[:1] + bytes([99]) + v[2:])      # unknown api key 99
    rewrite_record(newest, parts[0], lambda v: v[:2] + bytes([9]) + v[3:])        # PartitionRecord v9
    rewrite_record(newest, parts[1], lambda v: v[:23] + b"\x7f" + v[24:])         # Replicas: past the end
    rewrite_record(newest, parts[2], lambda v: v[:-1] + b"\x01")                  # a tagged field past the end
    rewrite_record(newest, topics[1], lambda v: v[:4] + b"\xff" + v[5:])          # name: invalid UTF-8
    entries, notes = assert_same_both_ways(newest, monkeypatch)
    assert len(notes) == 4 and len(entries) == 171 - 4, notes
    assert "unknown metadata record type: api key 99" in notes[0] and "version 9 is newer" in notes[1]
    assert "PartitionRecord.Replicas = 126" in notes[2] and "PartitionRecord._taggedFields = 1" in notes[3]
    assert any(e[2] == topics[1] and "\ufffd" in e[7]["name"] for e in entries)
    assert_same_both_ways(newest, monkeypatch, start_offset=parts[3])              # mid-batch start
    # a record count beyond the batch's records: the C framing gives the batch back to Python
    _set_record_count(newest, 1, +1)
    entries, notes = assert_same_both_ways(newest, monkeypatch)
    assert any("batch unreadable" in n for n in notes) and len(entries) == 2
    # a truncated snapshot: the same notes from read_metadata_log either way
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])
    assert_same_both_ways(newest, monkeypatch)
    logs = []
    for use_c in (True, False):
        monkeypatch.setattr(km, "use_c", use_c)
        log = ml.read_metadata_log([d.parent])
        logs.append(([str(n) for n in log.notes], log.state, log.records_read))
    assert logs[0] == logs[1] and logs[0][1].partition_count == 134


def test_control_batches_and_other_frames_still_read_by_python(monkeypatch):
    """The C batch path is for data batches: control batches, and a frame it has not met, go the
    Python way; the entries of a whole snapshot stay the same (covered above) and the Python
    frame cache is per mode, so switching modes never reuses the other mode's readers."""
    monkeypatch.setattr(km, "use_c", False)
    list(ml.read_entries(SNAPSHOTS[0], []))
    monkeypatch.setattr(km, "use_c", True)
    list(ml.read_entries(SNAPSHOTS[0], []))
    assert all(not isinstance(r, message_program._cmessage.Decoder) for _n, r in ml._FRAMES[False].values())
    assert all(isinstance(r, message_program._cmessage.Decoder) for _n, r in ml._FRAMES[True].values())
    with pytest.raises(FormatError):
        km.spec("TopicRecord").reader(0)(b"\x02a", 0, None, "f", 0)


def test_randomly_damaged_batches_same_entries_and_notes(tmp_path, monkeypatch):
    """Bytes overwritten anywhere in the records of the newest snapshot's data batch (framing,
    frames, bodies): the same entries and notes with and without C, whichever path each takes."""
    raw = SNAPSHOTS[-1].read_bytes()
    reader = LogReader(SNAPSHOTS[-1])
    batch = next(b for b in reader.batches() if not b.is_control)
    reader.close()
    lo, hi = batch.position + 61, batch.position + batch.size_bytes
    path = tmp_path / SNAPSHOTS[-1].name
    rnd = random.Random(3)
    kinds = {"clean": 0, "record": 0, "batch": 0}
    for _ in range(120):
        data = bytearray(raw)
        for _ in range(rnd.randint(1, 3)):
            data[rnd.randrange(lo, hi)] = rnd.choice([0, 1, 2, 0x7F, 0x80, 0xFF, rnd.randrange(256)])
        path.write_bytes(bytes(data))
        _entries, notes = assert_same_both_ways(path, monkeypatch)
        kinds["clean" if not notes else "batch" if any("batch unreadable" in n for n in notes) else "record"] += 1
    assert min(kinds.values()) >= 10, kinds          # every kind of outcome was exercised
