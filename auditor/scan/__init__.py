"""Log dirs to rows: one row per segment, one per partition directory. Pure Python, no Spark.

The scanner is strictly read-only: files are opened ``O_RDONLY`` (with ``O_NOATIME`` when
allowed), read with ``pread`` in bounded chunks (never mmap'd: a broker trimming an index
we had mapped would kill us with SIGBUS), symlinks are never followed, and nothing under a
log dir is ever created, locked, truncated or renamed.

Work grows with the depth asked for:

* ``stat``    names, sizes, mtimes: one ``lstat`` per file;
* ``index``   plus the first batch header, the index/timeindex tails (binary search over the
  preallocated zero tail) and the batches after the last offset-index entry: constant work
  per segment (about ``index.interval.bytes`` of reading);
* ``headers`` every batch header;
* ``deep``    every record: decompression, per-record timestamps, CRC.

Every oddity becomes a note naming the file, byte position, field and value; a file that
vanishes or cannot be read between listing and reading is a note, not a crash.

Modules: :mod:`~auditor.scan.segment` (one segment), :mod:`~auditor.scan.partition_dir` (one
partition directory), :mod:`~auditor.scan.log_dir` (one log dir, many log dirs);
:mod:`~auditor.scan.files` (read-only listing) and :mod:`~auditor.scan.progress` under them.
"""

from auditor.scan.log_dir import LogDirPlan, ScanResult, iter_log_dir, plan_log_dir, scan_log_dirs
from auditor.scan.partition_dir import OFFSET_CHECKPOINTS, scan_partition_dir
from auditor.scan.progress import Progress, ProgressCallback
from auditor.scan.segment import SegmentFiles, scan_segment

__all__ = [
    "LogDirPlan", "OFFSET_CHECKPOINTS", "Progress", "ProgressCallback", "ScanResult", "SegmentFiles",
    "iter_log_dir", "plan_log_dir", "scan_log_dirs", "scan_partition_dir", "scan_segment",
]
