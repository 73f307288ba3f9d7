"""A partition directory's own files with ``--state``: ``leader-epoch-checkpoint`` and ``partition.metadata``.

A full scan opens and parses both for every partition directory (on a small log dir, a fourth of
a nightly second run's time). With a state they are taken from it as a segment's row is: the
state keeps, in a line of the partition directory with base offset FILES_KEY, the partition
row's columns read from them (FILE_COLUMNS) beside what proves both files unchanged
(:func:`files_proof`, from ``lstat`` alone: device, inode, size and mtime in ns of each, or its
absence). When the proof holds, nothing is opened; else they are read as without state, and the
columns kept for the next run only when the read wrote no note (a corrupt or unreadable file is
read again every run: its note is the scan's) and the proof was the same before and after it.
The broker replaces both files by writing a temporary file and renaming it (a new inode), so the
proof changes with each write; a change that keeps a file's inode, size and mtime is not seen,
as for a closed segment.
"""

from __future__ import annotations

import json
import os
import stat as stat_mod
from collections.abc import Callable

from auditor.scan.state import json_value

PARTITION_FILES = ("leader-epoch-checkpoint", "partition.metadata")
FILE_COLUMNS = ("leader_epochs", "latest_leader_epoch", "topic_id")
"""The partition row's columns read from PARTITION_FILES (the scan's ``_read_partition_files``)."""
FILES_KEY = -1
"""The base offset of the state line holding a partition directory's FILE_COLUMNS (never a segment's)."""


def files_proof(path) -> str | None:
    """``dev:ino:size:mtime_ns`` of each of PARTITION_FILES (``-`` when absent), ``|``-joined; None
    when one is not a regular file or cannot be stat-ed (then it is read, and nothing is kept)."""
    parts = []
    for name in PARTITION_FILES:
        try:
            st = os.lstat(os.path.join(path, name))
        except FileNotFoundError:
            parts.append("-")
            continue
        except OSError:
            return None
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        parts.append(f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def read_with_state(pstate, path, prow: dict, notes: list[str], read: Callable[[], None]) -> None:
    """FILE_COLUMNS of ``prow`` from ``pstate`` (a :class:`auditor.scan.state.PartitionState`) when
    the files' proof holds, else by ``read()`` (which fills ``prow`` and ``notes`` as without state)."""
    proof = files_proof(path)
    hit = pstate.old.get(FILES_KEY)
    lds = pstate.log_dir_state
    if proof is not None and hit is not None and hit[0] == proof:
        values = json_value(hit[1])
        if isinstance(values, list) and len(values) == len(FILE_COLUMNS):
            prow.update(zip(FILE_COLUMNS, values))
            lds.keep(pstate.dir_name, FILES_KEY, proof, hit[1], same=True, segment=False)
            return
    noted = len(notes)
    read()
    if proof is not None and len(notes) == noted and files_proof(path) == proof:
        lds.keep(pstate.dir_name, FILES_KEY, proof, json.dumps([prow[c] for c in FILE_COLUMNS]),
                 segment=False)
