"""Reading ``__consumer_offsets`` while the broker's log cleaner and retention change its files.

Kafka's ``LocalLog.replaceSegments`` renames the segments a cleaning replaces to ``.deleted``
before it renames the cleaned ``.log.swap`` to ``.log``: a listing taken in between finds the
replaced offsets in no live segment. On a copy of a real partition (the 2018 broker's
``__consumer_offsets-28``), these tests put the dir in those states and prove the read waits for
the swap, reads again when a segment it read was replaced, and says so when the dir never settles.
"""

from __future__ import annotations

import pytest
import os
import shutil
import threading
import time

from auditor.cluster import offsets_segments
from auditor.cluster.consumer_groups import OFFSETS_TOPIC, fold_partition_dir
from auditor.formats.log_reader import LogReader
from harness.realdata import LOG_DIRS

pytestmark = pytest.mark.recorded

REAL_DIR = next(d for d in LOG_DIRS if (d / f"{OFFSETS_TOPIC}-28").is_dir()) / f"{OFFSETS_TOPIC}-28"
SEGMENT = f"{0:020d}.log"


def _copy(tmp_path):
    pdir = tmp_path / f"{OFFSETS_TOPIC}-28"
    shutil.copytree(REAL_DIR, pdir)
    for p in pdir.iterdir():
        p.chmod(0o644)
    return pdir


def _facts(fold):
    return fold.store, fold.pending, fold.records


def test_a_swap_in_progress_is_waited_for(tmp_path):
    pdir = _copy(tmp_path)
    whole = fold_partition_dir(pdir, 28)
    assert whole.records > 1000 and not whole.notes
    # The moment between the cleaner's two renames: the offsets live only in the .swap.
    (pdir / SEGMENT).rename(pdir / f"{SEGMENT}.swap")
    done = threading.Timer(0.4, lambda: (pdir / f"{SEGMENT}.swap").rename(pdir / SEGMENT))
    t0 = time.monotonic()   # before the timer starts: the read cannot end before the rename, 0.4 s on
    done.start()
    try:
        during = fold_partition_dir(pdir, 28)
        waited = time.monotonic() - t0
    finally:
        done.join()
    assert waited >= 0.4
    assert _facts(during) == _facts(whole) and not during.notes


def test_a_swap_that_stays_is_named(tmp_path, monkeypatch):
    pdir = _copy(tmp_path)
    (pdir / SEGMENT).rename(pdir / f"{SEGMENT}.swap")
    monkeypatch.setattr(offsets_segments, "SWAP_SETTLE_S", 0.2)
    fold = fold_partition_dir(pdir, 28)
    assert fold.records == 0
    assert any(f"{SEGMENT}.swap still there after 0.2 s" in n and "may be missing" in n for n in fold.notes), fold.notes


def _replace_with_copy(path, size=None):
    """What the cleaner does to a segment: the same name, a new file (a new inode), here holding
    the first ``size`` bytes (a batch boundary) of the old one, or all of them."""
    tmp = path.with_name(path.name + ".cleaned")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        dst.write(src.read() if size is None else src.read(size))
    os.replace(tmp, path)


def _half_way(path) -> int:
    """The position of the batch half way through ``path``."""
    reader = LogReader(path)
    try:
        positions = [b.position for b in reader.batches()]
    finally:
        reader.close()
    return positions[len(positions) // 2]


def test_a_segment_replaced_while_read_is_read_again(tmp_path):
    pdir = _copy(tmp_path)
    whole = fold_partition_dir(pdir, 28)
    cut = _half_way(pdir / SEGMENT)
    replaced = []

    def pace():   # called between reads: the cleaner replaces the segment once, mid-read
        if not replaced:
            _replace_with_copy(pdir / SEGMENT, cut)
            replaced.append(time.monotonic())

    fold = fold_partition_dir(pdir, 28, pace=pace)
    assert len(replaced) == 1
    cleaned = fold_partition_dir(pdir, 28)   # the dir as the cleaner left it
    assert cleaned.records < whole.records
    assert _facts(fold) == _facts(cleaned) and not fold.notes


def test_a_dir_that_never_settles_is_named(tmp_path):
    pdir = _copy(tmp_path)
    reads = []

    def pace():   # the segment is replaced during every read
        reads.append(1)
        _replace_with_copy(pdir / SEGMENT)

    fold = fold_partition_dir(pdir, 28, pace=pace)
    assert len(reads) >= offsets_segments.MAX_READS
    assert any(f"replaced or deleted while read, {offsets_segments.MAX_READS} times" in n for n in fold.notes), fold.notes
