"""The key statistics' C fold (auditor/keys/_ckeys.c) against the Python path (KeyStats.add).

Input: the bytes of one .log; its first byte also picks a sample size and a record count. Checks:

* ``scan_partition_keys`` of a partition dir holding the input as its segment gives the same
  sketches (``KeyStats.to_bytes``) and the same result (offsets, bytes read, notes) through the C
  fold as through the pure-Python path, reading everything and in sampled mode: the C walk and its
  hand-back to Python decide nothing the Python reader would decide differently;
* ``KeyFold.add_records`` on the input taken as the records of one v2 batch (the form a
  decompressed batch takes), in an exact-size buffer, as a CreateTime or a LogAppendTime batch
  (by the input's length): it adds the records exactly when ``record_batch.iter_records`` reads
  them all without an error, and then the same sketches, ``first_seen`` (offsets, timestamps) included;
* the same records fed to ``KeyFold.records_feed`` in pieces whose sizes the input picks (the key
  scan's path for a compressed batch): it adds exactly the records ``iter_records`` yields before
  it raises (all of them when it does not), the same sketches and offsets, and the error read from
  the bytes it kept of the refused record alone is the loop's (as a gzip batch's records);
* nothing raises but what the Python path notes.

Seeds: ``python tests/fuzz/fuzz_key_fold.py`` writes tests/fuzz/corpus/key_fold/ (keyed batches of
every codec, legacy messages, and prefixes of the real brokers' segments).
"""

from __future__ import annotations

import gzip
import struct
import sys
from pathlib import Path

if __name__ == "__main__":  # seeds: no build under test needed
    sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]

from auditor.formats import record_batch as v2  # noqa: E402
from auditor.formats.errors import FormatError  # noqa: E402
from auditor.keys.partition_keys import scan_partition_keys  # noqa: E402
from auditor.keys.sketches import KeyStats  # noqa: E402
from fuzz.common import Disagreement, exact_buffer, scratch, write  # noqa: E402

PARTITION = "keyfold-0"
SEGMENT = "00000000000000000000.log"
SMALL = {"capacity": 1, "sample_size": 2}  # tiny summaries: a fold every 5 distinct keys of an input


def _scan(use_c: bool, sample: int | None):
    found = scan_partition_keys(scratch() / PARTITION, use_c=use_c, sample_bytes=sample, prefix_bytes=2, **SMALL)
    return found.stats.to_bytes(), found.to_json(20)


BASE_OFFSET = 7
#: near Java's long limit, so a large timestampDelta wraps as Java's long arithmetic does
BASE_TIMESTAMP = (1 << 63) - 5000
MAX_TIMESTAMP = 1_700_000_000_000
LOG_APPEND_TIME = 0x08  # the attributes' timestamp-type bit


def _records_as_batch(count: int, records: bytes, attrs: int) -> tuple[object, bytes]:
    """A v2 batch header (uncompressed) around ``records``, for the Python reader."""
    after_crc = struct.pack(">hiqqqhii", attrs, max(count - 1, 0), BASE_TIMESTAMP, MAX_TIMESTAMP, -1, -1, -1,
                            count) + records
    batch = struct.pack(">qiibI", BASE_OFFSET, 4 + 1 + 4 + len(after_crc), 0, 2, 0) + after_crc
    return v2.parse_v2_header(batch, 0, 0), batch


def _add_records(data: bytes) -> None:
    count = data[0] if data else 0
    records = data[1:]
    attrs = LOG_APPEND_TIME if len(data) % 2 else 0  # both timestamp types, by the input's length
    c = KeyStats(**SMALL)
    fold = c.c_fold()
    added = fold.add_records(exact_buffer(records), 0, count, BASE_OFFSET, BASE_TIMESTAMP,
                             MAX_TIMESTAMP if attrs else None)
    c.absorb(fold)
    python = KeyStats(**SMALL)
    header, batch = _records_as_batch(count, records, attrs)
    try:
        read = [(r.key, r.value_size, r.offset, r.timestamp_ms) for r in v2.iter_records(header, batch, keys=True)]
    except FormatError:
        read = None
    if (added is None) != (read is None):
        raise Disagreement(f"add_records gave {added!r}; iter_records {'raised' if read is None else 'read them all'}")
    _records_in_pieces(data, count, records, attrs, header, batch)
    if read is None:
        if c.records:
            raise Disagreement(f"add_records refused the batch but added {c.records} records")
        return
    for key, value_size, offset, timestamp_ms in read:
        python.add(key, value_size, offset, timestamp_ms)
    offsets = (len(read), read[0][2], read[-1][2]) if read else (0, None, None)
    if added != offsets:
        raise Disagreement(f"add_records returned {added}, the Python reader read {offsets}")
    if c.to_bytes() != python.to_bytes():
        raise Disagreement("add_records gave other sketches than KeyStats.add on the same records")


def _records_in_pieces(data: bytes, count: int, records: bytes, attrs: int, header, batch) -> None:
    """records_begin / records_feed (pieces of 1..64 bytes, sizes from the input) / records_end
    against the records iter_records yields before it raises."""
    c = KeyStats(**SMALL)
    fold = c.c_fold()
    fold.records_begin(count, BASE_OFFSET, BASE_TIMESTAMP, MAX_TIMESTAMP if attrs else None)
    pos = i = 0
    while pos < len(records):
        n = 1 + data[i % len(data)] % 64
        fold.records_feed(exact_buffer(records[pos:pos + n]))
        pos, i = pos + n, i + 1
    added = fold.records_end()
    c.absorb(fold)
    python = KeyStats(**SMALL)
    yielded = []
    # the same records as a gzip batch's: the loop's error names positions in the decompressed stream,
    # as the one read from the bytes records_end kept of the refused record alone must
    gz_header, gz_batch = _records_as_batch(count, gzip.compress(records, 1), attrs | 1)
    error = None
    try:
        for r in v2.iter_records(gz_header, gz_batch, keys=True):
            yielded.append(r.offset)
            python.add(r.key, r.value_size, r.offset, r.timestamp_ms)
    except FormatError as exc:
        error = str(exc)
    offsets = (len(yielded), yielded[0], yielded[-1]) if yielded else (0, None, None)
    if added[:3] != offsets:
        raise Disagreement(f"records_feed added {added[:3]}, iter_records yielded {offsets} before raising")
    if c.to_bytes() != python.to_bytes():
        raise Disagreement("records_feed gave other sketches than KeyStats.add on the records iter_records yields")
    _n, _first, _last, next_at, fed, refused = added
    whole = refused is None and next_at == fed
    if whole != (error is None) or fed != len(records):
        raise Disagreement(f"records_feed: refused {refused!r}, next at {next_at} of {fed}; iter_records: {error}")
    if error is not None:
        alone = v2.refused_record_error(gz_header, v2.refused_in_stream(refused or b"", next_at, fed, _n))
        if str(alone) != error:
            raise Disagreement(f"the refused record's kept bytes give {alone}, the loop {error}")


def one_input(data: bytes) -> None:
    write(f"{PARTITION}/{SEGMENT}", data)
    sample = None if not data or data[0] < 128 else 1 + data[0] * 8
    for mode in (None, sample):
        if _scan(True, mode) != _scan(False, mode):
            raise Disagreement(f"the C fold and the Python path differ (sample_bytes={mode})")
    _add_records(data)


def make_seeds() -> None:
    import random

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fuzz.make_seeds import REAL, Seeds, batch_prefix
    from harness.legacy_messages import gzip_wrapper, legacy_message
    from harness.records import keyed_batch, keyed_segment, numbered_record

    s = Seeds("key_fold")
    for seed in (1, 2):
        s.add(batch_prefix(keyed_segment(seed, batches=6), 4096))
    rnd = random.Random(3)
    records = [(rnd.choice((None, b"", b"k%d" % rnd.randrange(9))), b"v" * rnd.randrange(5), []) for _ in range(20)]
    s.add(keyed_batch(0, records) + keyed_batch(20, records, codec="gzip") + keyed_batch(40, records, codec="zstd"))
    s.add(bytes([3]) + b"".join(numbered_record(i, *records[i]) for i in range(3)))  # records as add_records reads them
    # LogAppendTime batches (every record at maxTimestamp: first_seen's timestamps), plain and compressed
    s.add(keyed_batch(0, records, log_append=True, max_ts=1_700_000_000_123)
          + keyed_batch(20, records, codec="lz4", log_append=True, max_ts=1_700_000_000_456))
    long_keys = [(rnd.randbytes(n), b"v", []) for n in (127, 128, 129, 300, 0, 1)] * 2  # BLAKE2b's block edges
    s.add(keyed_batch(0, long_keys) + keyed_batch(12, long_keys, codec="snappy"))
    s.add(legacy_message(0, 1, b"a", b"x") + gzip_wrapper(3, 1, [(b"b", b"y"), (b"c", None), (None, b"y")])
          + legacy_message(4, 0, b"d", b"z"))
    for log in sorted((REAL / "broker-dirs").rglob("*.log")):
        s.add(batch_prefix(log.read_bytes(), 4096))
    # plain batches past the C walk's first 16 KiB window, one of them across its end (the refill
    # of a batch whose header the window holds but not its end: _ckeys.c KeyFold_walk); two records
    # of 300-byte values a batch: few records, so that the traced Python path stays fast under atheris
    big = [(b"k%d" % i, b"v" * 300, []) for i in range(2)]
    s.add(batch_prefix(b"".join(keyed_batch(i * 2, big) for i in range(30)), 17500))
    # a control batch among plain ones (counted as read, its keys not added), and the same file with
    # a first byte of 0x80 and over: one_input then also scans it sampled (whole batches before the cut skipped)
    control = keyed_batch(0, records) + keyed_batch(20, [(b"\0\0\0\0", b"\0\0\0\0\0\0", [])], control=True) + keyed_batch(21, records)
    s.add(control)
    s.add(b"\x80" + (control * 3)[1:])
    print("key_fold", s.count)


if __name__ == "__main__":
    make_seeds()
