"""A magic 0/1 compressed wrapper's inner messages in C (``_cwalk.legacy_frames`` / ``legacy_fold``,
issue 24's hang rule: more than 1 s for a 1 MiB input). A 40 KB gzip wrapper of 26-byte inner
messages decompresses to 16 MiB (645,277 messages): the Python loop read them twice at 'deep' (the
walk's base offset, then the records), 2.34-3.4 CPU s; ~37 s at the 256 MiB cap. The row and the
notes are the pure-Python loop's, byte for byte, on every shape; where C stops at a broken inner
message, Python reads that message alone for the note (counted here, not timed: the figures are
benchmarks/decompression_bombs.py's)."""

from __future__ import annotations

import gzip
import struct
import zlib

import pytest

import auditor.scan.segment as segment
from auditor.formats import legacy
from auditor.scan.segment import SegmentFiles, scan_segment

pytestmark = pytest.mark.unit

GZIP, SNAPPY = 1, 2
LOG_APPEND_TIME = 0x08
INT64_MAX = 2**63 - 1


def _message(offset: int, magic: int = 0, *, attrs: int = 0, ts: int = 0, key: bytes | None = None,
             value: bytes | None = None, size_delta: int = 0, raw_magic: int | None = None) -> bytes:
    """One legacy entry (offset, size, crc, magic, attributes, [timestamp], key, value)."""
    body = bytes([magic if raw_magic is None else raw_magic, attrs]) + (struct.pack(">q", ts) if magic else b"")
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message) + size_delta) + message


def _wrapper(offset: int, magic: int, inner: bytes, *, codec: int = GZIP, ts: int = 5_000, attrs: int = 0) -> bytes:
    payload = {GZIP: lambda d: gzip.compress(d, 9), SNAPPY: _snappy}[codec](inner)
    return _message(offset, magic, attrs=codec | attrs, ts=ts, value=payload)


def _snappy(data: bytes) -> bytes:
    import cramjam

    return bytes(cramjam.snappy.compress_raw(data))


def _with_key_length(entry: bytes, key_length: int) -> bytes:
    """A magic 0 entry whose keyLength field (entry byte 18) says ``key_length``."""
    return entry[:18] + struct.pack(">i", key_length) + entry[22:]


def _set(magic: int, n: int, *, first: int = 0, ts=lambda i: 1_000 + (i * 7919) % 5_000 - 2_000) -> bytes:
    return b"".join(_message(first + i, magic, ts=ts(i), key=b"k" if i % 3 else None, value=b"v" * (i % 4))
                    for i in range(n))


def _shapes() -> dict[str, bytes]:
    v0, v1 = _set(0, 40), _set(1, 40)
    return {
        "magic 0 wrapper": _wrapper(39, 0, v0),
        "magic 0 wrapper, snappy": _wrapper(39, 0, v0, codec=SNAPPY),
        "magic 1 wrapper (relative offsets)": _wrapper(1_039, 1, v1),
        "magic 1 wrapper, offset 0 (old librdkafka)": _wrapper(0, 1, v1),
        "magic 1 wrapper, LogAppendTime": _wrapper(1_039, 1, v1, attrs=LOG_APPEND_TIME, ts=777),
        "magic 1 wrapper, LogAppendTime -1": _wrapper(1_039, 1, v1, attrs=LOG_APPEND_TIME, ts=-1),
        "magic 0 inner messages in a magic 1 wrapper": _wrapper(1_039, 1, v0),
        "offsets beyond int64 (Java long wrap)": _wrapper(INT64_MAX, 1, _set(1, 40, first=-(2**62))),
        "timestamps far apart (step back beyond int64)": _wrapper(1, 1, _message(0, 1, ts=INT64_MAX)
                                                                  + _message(1, 1, ts=-(2**63))),
        "two wrappers and a plain message": (_wrapper(39, 0, v0) + _message(40, 0, value=b"x")
                                             + _wrapper(1_080, 1, v1)),
        "incomplete trailing inner entry (the end of the set)": _wrapper(39, 0, v0 + _message(40)[:-3]),
        "fewer than 12 bytes after the last": _wrapper(39, 0, v0 + b"\x00" * 11),
        "wrapper offset below the last inner one": _wrapper(10, 1, v1),
        "no inner message": _wrapper(0, 0, b""),
        "inner size under 14": _wrapper(39, 0, v0 + _message(40, size_delta=-20)),
        "inner magic 2": _wrapper(39, 0, v0 + _message(40, raw_magic=2)),
        "inner magic 1 shorter than its overhead": _wrapper(39, 0, v0 + _message(40, raw_magic=1)),
        "inner key length past its message": _wrapper(39, 0, v0 + _with_key_length(_message(40, key=b"kk"), 99)),
        "inner value length not the rest": _wrapper(39, 0, v0 + _message(40, value=b"vvv", size_delta=1) + b"\x00"),
        "inner message compressed": _wrapper(39, 0, v0 + _message(40, attrs=GZIP, value=b"x")),
        "a broken message before good ones": _wrapper(79, 0, v0 + _message(40, raw_magic=9) + _set(0, 40, first=41)),
        "wrapper with a null value": _message(0, 0, attrs=GZIP),
        "corrupt gzip": _message(0, 0, attrs=GZIP, value=b"\x1f\x8b\x08\x00garbage"),
    }


def _deep(path, use_c: bool, depth: str = "deep") -> dict:
    segment.USE_C_RECORDS = legacy.USE_C_INNER = use_c
    try:
        row = scan_segment(SegmentFiles(0, None, {"log": str(path)}), depth, is_active=False, location={},
                           indexes=False)
    finally:
        segment.USE_C_RECORDS = legacy.USE_C_INNER = True
    row.pop("scanned_at_ms")
    return row


class PythonLoop:
    """Counts the Python inner message loop's work while installed: whole sets walked
    (legacy._inner_entries) and single messages read (legacy._inner_message)."""

    def __init__(self, monkeypatch):
        self.sets = self.messages = self.c_walks = 0
        entries, message, c_walk = legacy._inner_entries, legacy._inner_message, legacy.walk_inner

        def counting_c_walk(*args, **kwargs):
            self.c_walks += 1
            return c_walk(*args, **kwargs)

        def counting_entries(*args, **kwargs):
            self.sets += 1
            return entries(*args, **kwargs)

        def counting_message(*args, **kwargs):
            self.messages += 1
            return message(*args, **kwargs)
        monkeypatch.setattr(legacy, "_inner_entries", counting_entries)
        monkeypatch.setattr(legacy, "_inner_message", counting_message)
        monkeypatch.setattr(legacy, "walk_inner", counting_c_walk)


@pytest.mark.parametrize("name", list(_shapes()))
def test_c_inner_walk_gives_the_python_loops_row_and_notes(tmp_path, monkeypatch, name):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_shapes()[name])
    for depth in ("headers", "deep"):
        pure = _deep(path, False, depth)
        counted = PythonLoop(monkeypatch)
        with_c = _deep(path, True, depth)
        monkeypatch.undo()
        assert with_c == pure, depth
        assert counted.sets == 0 and counted.messages <= 2, (depth, counted.sets, counted.messages)  # one per read


def test_c_inner_fold_values_on_a_known_wrapper(tmp_path):
    """By hand: a magic 1 wrapper at offset 1,002 of inner relative offsets 0, 1, 2 (absolute 1,000..1,002)
    with timestamps 50, 20, 40: smallest 20 at 1,001; largest 50 at 1,000; step back 30 at 1,001."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(_wrapper(1_002, 1, b"".join(_message(i, 1, ts=t) for i, t in enumerate((50, 20, 40)))))
    row = _deep(path, True)
    assert (row["record_count"], row["min_timestamp_ms"], row["min_timestamp_offset"], row["max_timestamp_offset"],
            row["max_backward_jump_ms"], row["max_backward_jump_offset"]) == (3, 20, 1_001, 1_000, 30, 1_001)


def _tiny_set_wrapper(n: int, magic: int, tail: bytes = b"") -> bytes:
    """A gzip wrapper of n identical 26-byte (magic 0) or 34-byte (magic 1) inner messages, then ``tail``."""
    unit = _message(0, magic, ts=1_000)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    payload = b"".join(c.compress(unit * 65_536) for _ in range(n // 65_536))
    payload += c.compress(unit * (n % 65_536) + tail) + c.flush()
    return _message(n, magic, attrs=GZIP, ts=5_000, value=payload)


@pytest.mark.parametrize("magic", [0, 1])
def test_a_wrapper_of_a_million_inner_messages(tmp_path, monkeypatch, magic):
    """1,000,000 inner messages (26 / 34 MB decompressed from ~60 KB), then the same with a broken
    last one: read without the Python loop (it read them twice: ~5 CPU s here, ~37 s at the cap),
    and decompressed once for the walk's base offset and the records;
    the broken one's note is the pure-Python loop's, checked on 3,000 messages."""
    broken = _message(0, magic, raw_magic=7)
    for n, tail in ((1_000_000, b""), (1_000_000, broken), (3_000, broken)):
        path = tmp_path / f"{n}-{len(tail)}" / "00000000000000000000.log"
        path.parent.mkdir()
        path.write_bytes(_tiny_set_wrapper(n, magic, tail))
        counted = PythonLoop(monkeypatch)
        row = _deep(path, True)
        monkeypatch.undo()
        assert counted.sets == 0 and counted.messages <= 1, (counted.sets, counted.messages)
        assert counted.c_walks == 1   # decompressed and walked once for the base offset and the records
        unreadable = [note for note in row["notes"] if "unreadable" in note]
        if not tail:
            assert unreadable == [] and row["record_count"] == n
            assert row["min_timestamp_ms"] == (1_000 if magic else None)
            continue
        size = len(_message(0, magic))
        assert unreadable == [f"{path}: byte 0: records unreadable: {path} (wrapper at byte 0, decompressed gzip "
                              f"inner messages): byte {n * size + 16}: inner message magic = 7, expected 0 or 1"]
        if n == 3_000:
            assert _deep(path, False) == row
