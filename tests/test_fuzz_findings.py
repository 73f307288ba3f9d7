"""One test per thing the fuzzers found (issue 24), on the normal build, with the bytes that
triggered it (tests/fuzz/regressions/<harness>/). tests/test_fuzz_regressions.py replays the same
inputs through their harnesses; these tests state what each finding broke, at the user's level."""

from __future__ import annotations

import pytest
import struct
from pathlib import Path

from auditor.formats import _cwalk
from auditor.formats.log_reader import LogReader
from auditor.manifest import collect_manifest, read_manifest

pytestmark = pytest.mark.unit

REGRESSIONS = Path(__file__).resolve().parent / "fuzz" / "regressions"


def test_batch_whose_last_offset_leaves_int64_is_collected_as_kafka_computes_it(tmp_path):
    """baseOffset 2^63 - 1 with lastOffsetDelta 5: Python made 2^63 + 4 (collect then died writing it
    into the int64 column: OverflowError), the C fold added in signed C (undefined behaviour; wrapped
    with gcc's -fwrapv). Kafka's lastOffset() is a Java long sum: both now give its wrapped value."""
    data = (REGRESSIONS / "segment" / "last-offset-beyond-int64.bin").read_bytes()
    base, = struct.unpack_from(">q", data, 0)
    delta, = struct.unpack_from(">i", data, 23)
    assert (base, delta) == (2**63 - 1, 5)
    java = base + delta - 2**64
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(data)
    with LogReader(part / "00000000000000000000.log") as reader:
        assert [b.last_offset for b in reader.batches()] == [java]
        assert reader.fold_v2_headers(0)["last_offset"] == java
    for depth in ("headers", "deep"):
        collect_manifest([tmp_path / "logs"], tmp_path / f"out-{depth}", depth)
        segments = read_manifest(tmp_path / f"out-{depth}")[0].to_pylist()
        assert [(s["first_offset"], s["last_offset"]) for s in segments] == [(base, java)], depth


def test_quiet_check_at_a_position_near_int64_max_is_a_plain_no(tmp_path):
    """pos + 61 overflowed in C (undefined behaviour) for a position read from a damaged state file."""
    for name, size in (("a.log", 100), ("a.index", 8), ("a.timeindex", 12)):   # zero-filled: no entry
        (tmp_path / name).write_bytes(bytes(size))
    paths = [str(tmp_path / n) for n in ("a.log", "a.index", "a.timeindex")]
    assert _cwalk.quiet_facts(*paths, 0, 2**63 - 10) is None
    assert _cwalk.quiet_facts(*paths, 0, 39) is not None


def _manifest_with(tmp_path, name: str, content: bytes) -> Path:
    from auditor.manifest_write import finish_manifest

    out = tmp_path / "manifest"
    out.mkdir()
    (out / "segments.parquet").touch()   # find_manifests' mark of a manifest dir (the part is what is read)
    (out / name).write_bytes(content)
    finish_manifest(out, 0, "index")   # a complete manifest (collect's marker): only its part is damaged
    return out


def test_cluster_part_with_a_damaged_deflate_stream_is_a_note_not_a_crash(tmp_path):
    """zlib.error (not an OSError) escaped portable._load_lines and manifest._part_of: the audit and
    replay-check died on a manifest part damaged in transit. Found by the manifest_parts harness in
    13 executions."""
    from auditor.manifest import (CONSUMER_GROUPS_FILE, REMOTE_LOG_METADATA_FILE, read_consumer_groups,
                                  read_remote_log_metadata)
    from auditor.manifest_write import finish_manifest
    data = (REGRESSIONS / "manifest_parts" / "damaged-deflate-stream.bin").read_bytes()[1:]   # (selector byte)
    out = _manifest_with(tmp_path, REMOTE_LOG_METADATA_FILE, data)
    meta, notes = read_remote_log_metadata([out])
    assert meta is None and len(notes) == 1
    assert f"{out}/{REMOTE_LOG_METADATA_FILE}" in notes[0] and "unreadable" in notes[0] and "decompressing" in notes[0]
    (out / CONSUMER_GROUPS_FILE).write_bytes(data)
    finish_manifest(out, 0, "index")
    groups, notes = read_consumer_groups([out])
    assert groups is None and "unreadable" in notes[0]


def test_cluster_part_with_json_nested_too_deep_is_a_note_not_a_crash(tmp_path):
    """A line of 5,000 '[' made json raise RecursionError, which nothing caught."""
    import gzip

    from auditor.manifest import CLUSTER_METADATA_FILE, read_cluster_metadata
    text = (REGRESSIONS / "manifest_parts" / "json-nested-too-deep.bin").read_bytes()[1:]
    out = _manifest_with(tmp_path, CLUSTER_METADATA_FILE, gzip.compress(text))
    log, notes = read_cluster_metadata([out])
    assert log is None and len(notes) == 1
    assert CLUSTER_METADATA_FILE in str(notes[0]) and "line 1 is not JSON" in notes[0].message
    assert "recursion" in notes[0].message


def test_checkpoint_line_positions_after_non_ascii_lines(tmp_path):
    """The byte position of each line was found by encoding the whole text before it again, for every
    line: quadratic (a 40 KB file of empty lines after one 'é' took 2.9 s, 1 MiB about half an hour;
    benchmarks/fuzz_hangs.py --before 6d1d442). Now counted line by line: the same positions."""
    from auditor.formats import checkpoints
    from auditor.formats.errors import FormatError
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes("0\n3\nté 0 5\r\nü 1 7\nt 2\n".encode())
    assert [(n, pos) for n, pos, _ in checkpoints._lines(path)] == [(1, 0), (2, 2), (3, 4), (4, 13), (5, 20)]
    try:
        checkpoints.read_offset_checkpoint(path)
        raise AssertionError("a 2-field entry line must be refused")
    except FormatError as exc:
        assert exc.position == 20 and exc.field == "line 5: entry"
    data = (REGRESSIONS / "checkpoints" / "non-ascii-then-many-lines.bin").read_bytes()[1:]
    path.write_bytes(data)
    lines = checkpoints._lines(path)
    assert len(lines) == 4003 and lines[-1][:2] == (4003, len(data) - 1)


def test_properties_continuation_lines_join_as_before(tmp_path):
    """Each continuation line was appended to one growing str (quadratic: 80,000 lines took 0.8 s,
    1 MiB about 15 s); now joined once, to the same value."""
    from auditor.formats import checkpoints
    path = tmp_path / "meta.properties"
    path.write_bytes((REGRESSIONS / "checkpoints" / "many-continuation-lines.bin").read_bytes()[1:])
    assert checkpoints.parse_properties(path) == {"k": "a" * 3000 + "b"}
    path.write_bytes(b"a=x\\\n   y\\\\\nb : 1\\\n\nc=\\\\\\\n  z\n")
    assert checkpoints.parse_properties(path) == {"a": "xy\\", "b": "1", "c": "\\z"}


def test_mtime_beyond_int64_nanoseconds_is_reported_as_os_stat_does(tmp_path):
    """A file dated after 2262 (or before 1678): seconds * 10^9 overflowed an int64 in _cwalk (undefined
    behaviour; gcc's -fwrapv gave -8446744073709551616 for 10^19 ns) while Python's os.stat gives the
    exact int: segment_proof, quiet_facts and index_ends disagreed with their Python twins."""
    import os

    from auditor.scan.resume import quiet_facts_py
    from auditor.scan.segment import SegmentFiles
    from auditor.scan.state import segment_proof_py
    paths = []
    for name, size in (("00000000000000000000.log", 100), ("00000000000000000000.index", 8),
                       ("00000000000000000000.timeindex", 12)):
        (tmp_path / name).write_bytes(bytes(size))
        paths.append(str(tmp_path / name))
    stored = []
    for wanted in (10**19, -10**19 + 5, 2**63, -(2**63)):
        for p in paths:
            os.utime(p, ns=(wanted, wanted))
        ns = os.stat(paths[0]).st_mtime_ns   # (a file system may clamp what it stores)
        stored.append(ns)
        files = SegmentFiles(0, None, dict(zip(("log", "index", "timeindex"), paths)))
        assert _cwalk.segment_proof(*paths, None) == segment_proof_py(files) == (
            f"{os.stat(paths[0]).st_dev}:{os.stat(paths[0]).st_ino}:100:{ns}|8:{ns}|12:{ns}|-")
        assert _cwalk.quiet_facts(*paths, 0, 39) == quiet_facts_py(*paths, 0, 39)
        assert _cwalk.quiet_facts(*paths, 0, 39)[3] == ns
    assert max(stored) >= 2**63, f"the file system kept no mtime beyond int64 nanoseconds: {stored}"


# -- finding 5 (a harness error, not a decoder one): a record below its batch's baseOffset ---------

META_BELOW_BASE = REGRESSIONS / "metadata_batch" / "record-below-its-batch-base-offset.bin"


def test_metadata_record_below_its_batch_base_offset_goes_to_the_python_path_which_notes_it():
    """A record whose offsetDelta is -1 (offset -1 in a batch at baseOffset 0). The metadata_batch
    harness called the C path with the default start_offset 0 and expected every record (old
    harness: 'metadata_batch gave 0 entries for 1 records'; the integrator's input: 162 for 163,
    one record at offset -89): both paths left such a record out below ``start_offset`` without a
    note. Now the C batch path frames no batch with a negative offsetDelta (None: the Python path
    reads it) and the metadata log reader notes the record (tests/test_silent_skips.py)."""
    from auditor.formats import metadata_records as mrec
    from auditor.formats.record_batch import parse_v2_header
    from fuzz import targets

    data = META_BELOW_BASE.read_bytes()
    targets.load("metadata_batch").one_input(data)      # raised Disagreement with the old harness
    header = parse_v2_header(data, 0, 0)
    assert [r[0] for r in mrec.iter_records(header, data)] == [-1]
    entry = lambda *args: args  # noqa: E731
    fallback = lambda offset, ts, key, value: (offset, key, value)  # noqa: E731
    for start in (0, -(1 << 63)):
        assert mrec.c_metadata_batch(header, data, entry, fallback, label="t", position=0, start_offset=start) is None


def test_key_scan_of_a_compressed_batch_with_a_negative_records_count_is_a_note(tmp_path):
    """Found by the c_keys harness while the key scan learned to add a compressed batch in pieces
    (KeyFold.records_begin): the walk handed the batch back with recordsCount -16777216 and
    records_begin raised ValueError out of scan_partition_keys (the key scan crashed). Now such a
    batch goes to the Python reader, whose note names the field, as before."""
    from auditor.keys.partition_keys import scan_partition_keys

    data = (REGRESSIONS / "key_fold" / "compressed-batch-negative-records-count.bin").read_bytes()
    assert struct.unpack_from(">i", data, 57) == (-16777216,) and data[22] & 0x07 == 1   # gzip
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(data)
    found = [scan_partition_keys(part, use_c=use_c) for use_c in (True, False)]
    assert found[0].to_json() == found[1].to_json()
    assert found[0].unreadable_batches == 1 and "recordsCount = -16777216, expected >= 0" in found[0].notes[0]
