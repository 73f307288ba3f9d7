"""Page-cache care: a scan leaves the page cache as it found it, and reads are paced.

Residency is the kernel's own answer (``mincore``); files are made cold with
``posix_fadvise(DONTNEED)`` after ``fsync`` (dirty pages cannot be dropped) and warmed by reading.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from auditor.manifest import collect_manifest
from auditor.scan import scan_log_dirs
from auditor.scan.pagecache import AVAILABLE, PAGE, PageCacheCare, ReadRate, cold_ranges, file_residency
from harness.realdata import copy_log_dir

pytestmark = pytest.mark.recorded

if not AVAILABLE:  # fail loudly: the feature is Linux-only and this suite runs on Linux
    raise RuntimeError("mincore/posix_fadvise not available: page-cache care cannot be tested here")


def _cold(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read(path: Path, offset: int = 0, length: int | None = None) -> None:
    with open(path, "rb") as fh:
        fh.seek(offset)
        fh.read(length if length is not None else -1)


def test_cold_ranges():
    assert cold_ranges(bytes([1, 0, 0, 1, 0])) == [(PAGE, 2 * PAGE), (4 * PAGE, PAGE)]
    assert cold_ranges(bytes([1, 1])) == [] and cold_ranges(b"") == []


def test_only_the_pages_the_scan_brought_in_are_dropped(tmp_path):
    f = tmp_path / "seg.log"
    f.write_bytes(os.urandom(256 * PAGE))
    _cold(f)
    _read(f, 0, 64 * PAGE)                      # the "hot tail" someone else keeps cached
    _read(f, 200 * PAGE, 10 * PAGE)
    before = file_residency(f)
    assert before[0] >= 74 and before[1] == 256
    care = PageCacheCare()
    care.around([f], lambda: _read(f))         # a scan reading everything
    assert file_residency(f) == before
    assert care.dropped_bytes == (256 - before[0]) * PAGE
    # without care the same read leaves every page resident
    _read(f)
    assert file_residency(f) == (256, 256)


def test_bytes_appended_during_the_scan_stay_cached(tmp_path):
    f = tmp_path / "active.log"
    f.write_bytes(os.urandom(16 * PAGE))
    _cold(f)

    def scan_while_appending():
        _read(f)
        with open(f, "ab") as fh:                # the broker appends meanwhile
            fh.write(os.urandom(8 * PAGE))
        return {}

    PageCacheCare().around([f], scan_while_appending)
    resident, total = file_residency(f)
    assert total == 24 and resident >= 8        # the appended pages (beyond the old size) were not dropped


def test_collect_with_care_leaves_a_real_log_dir_as_resident_as_before(tmp_path):
    log_dir = copy_log_dir("kraft-transactional", tmp_path)
    files = sorted(p for p in log_dir.rglob("*") if p.is_file())
    for p in files:
        _cold(p)
    for p in files[::2]:
        _read(p)
    before = [file_residency(p) for p in files]
    collect_manifest([log_dir], tmp_path / "manifest", "deep", page_cache_care=True)
    assert [file_residency(p) for p in files] == before
    scan_log_dirs([log_dir], "deep")            # plain scan, for contrast: everything it read is cached
    after_plain = [file_residency(p) for p in files]
    assert sum(r for r, _ in after_plain) > sum(r for r, _ in before)


def test_read_rate_paces_the_reads(tmp_path):
    f = tmp_path / "big.log"
    f.write_bytes(os.urandom(4 * 1024 * 1024))
    started = time.monotonic()
    rate = ReadRate(8)                          # 8 MiB/s: 4 MiB take at least half a second
    _read(f)
    read_took = time.monotonic() - started
    rate.pace()
    # a lower bound whatever the load; it slept unless the read itself already took that long
    # (the speed figures are in benchmarks/pacing_and_walk.py)
    assert time.monotonic() - started >= 0.45
    assert rate.slept_s > 0 or read_took >= 0.5, (rate.slept_s, read_took)
    with pytest.raises(ValueError, match="positive"):
        ReadRate(0)
