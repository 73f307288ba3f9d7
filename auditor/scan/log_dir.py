"""Log dirs to rows: the log dir's own files, its listing, and the streaming scan over it.

:func:`plan_log_dir` lists one log dir (``meta.properties``, the offset checkpoints, partition
directory names) for every engine, so all of them report the same problems.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from auditor.formats import checkpoints, filenames
from auditor.formats.errors import FormatError
from auditor.scan.files import list_dir, symlink_note
from auditor.scan.filesystem import filesystem_of
from auditor.scan.partition_dir import OFFSET_CHECKPOINTS, scan_partition_dir
from auditor.scan.progress import Progress, ProgressCallback
from auditor.scan.state import LogDirState, check_state_dir
from auditor.schema import DEPTHS


@dataclass
class ScanResult:
    segments: list[dict]
    partitions: list[dict]
    log_dirs: list[dict]
    """One entry per log dir: path, broker and cluster ids, and problems met at that level."""



def _read_log_dir_header(root: Path, problems: list[str]) -> tuple[dict, dict]:
    info = {"log_dir": str(root), "broker_id": None, "cluster_id": None, "directory_id": None}
    meta = root / "meta.properties"
    if os.path.lexists(meta):
        try:
            props = checkpoints.read_meta_properties(meta)
            broker = props.get("node.id", props.get("broker.id"))
            info["broker_id"] = int(broker) if broker is not None else None
            info["cluster_id"] = props.get("cluster.id")
            info["directory_id"] = props.get("directory.id")
        except (FormatError, OSError, ValueError) as exc:
            problems.append(f"{meta}: unreadable: {exc}")
    else:
        problems.append(f"{meta}: missing: broker id unknown (a log dir that never started a broker, or not a log dir)")
    by_tp: dict[str, dict] = {}
    for file_name in OFFSET_CHECKPOINTS.values():
        cp = root / file_name
        if not os.path.lexists(cp):
            continue
        try:
            by_tp[file_name] = checkpoints.read_offset_checkpoint(cp)
        except (FormatError, OSError) as exc:
            problems.append(f"{cp}: unreadable: {exc}")
    return info, by_tp


@dataclass
class LogDirPlan:
    """A log dir's listing: its identity, its checkpoints and its partition directories.

    ``info`` is the log-dir row (log_dir, broker_id, cluster_id, directory_id, partition_dirs,
    problems); nothing under a partition directory has been read yet.
    """

    root: Path
    info: dict
    checkpoints_by_tp: dict
    partition_dirs: list[Path]


def plan_log_dir(log_dir: str | os.PathLike) -> LogDirPlan:
    """Lists one log dir (meta.properties, offset checkpoints, partition directory names).

    Shared by the in-process scan and the Spark job's driver, so both see the same problems.
    """
    root = Path(os.path.abspath(log_dir))
    problems: list[str] = []
    if not root.is_dir():
        problems.append(f"{root}: not a directory")
        info = {"log_dir": str(root), "broker_id": None, "cluster_id": None, "directory_id": None,
                "partition_dirs": 0, "problems": problems, **filesystem_of(root)}
        return LogDirPlan(root, info, {}, [])
    info, by_tp = _read_log_dir_header(root, problems)
    partition_dirs: list[Path] = []
    for entry in list_dir(root, problems):
        if entry.is_symlink():
            problems.append(symlink_note(entry, root))
            continue
        if entry.is_dir(follow_symlinks=False):
            if filenames.parse_partition_dir(entry.name) is None:
                problems.append(f"{entry.path}: directory is not a Kafka partition directory (left alone)")
                continue
            partition_dirs.append(Path(entry.path))
        elif entry.name not in filenames.LOG_DIR_FILES:
            problems.append(f"{entry.path}: unknown file in the log dir (left alone)")
    if not partition_dirs and info["broker_id"] is None:
        problems.append(f"{root}: not a Kafka log dir (no meta.properties and no partition directories)")
    info["partition_dirs"] = len(partition_dirs)
    info["problems"] = problems
    info.update(filesystem_of(root))  # the filesystem under it (auditor.scan.filesystem: capacity foresight)
    return LogDirPlan(root, info, by_tp, partition_dirs)


def iter_log_dir(
    log_dir: str | os.PathLike,
    depth: str = "index",
    *,
    progress: Progress | None = None,
    on_progress: ProgressCallback | None = None,
    state_dir: str | os.PathLike | None = None,
    page_cache_care: bool = False,
    max_read_rate_mib_s: float | None = None,
    hold_state: list | None = None,
) -> Iterator[tuple[list[dict], dict | None, dict | None]]:
    """Yields (segment rows, partition row) per partition directory, then (\u2205, None, log-dir info).

    Streaming keeps memory proportional to one partition, whatever the log dir holds. With
    ``state_dir`` the scan is incremental (:mod:`auditor.scan.state`: unchanged closed segments are
    not read again; the log-dir info gets ``scan_state`` counts); ``page_cache_care`` drops the
    pages the scan brought into the page cache, ``max_read_rate_mib_s`` paces the reads
    (:mod:`auditor.scan.pagecache`; the info gets ``page_cache``). ``hold_state``: the new state is
    written but appended to this list to be renamed (``publish()``) once the caller's outputs are whole.
    """
    from auditor.scan.pagecache import PageCacheCare, ReadRate  # here: ctypes and libc only for a scan that asks

    if depth not in DEPTHS:
        raise ValueError(f"depth = {depth!r}, expected one of {', '.join(DEPTHS)}")
    care = PageCacheCare() if page_cache_care else None
    if care is None:
        plan = plan_log_dir(log_dir)
    else:  # the log dir's own small files are read too: left as found like the segments
        root = Path(os.path.abspath(log_dir))
        header = [root / "meta.properties", *(root / name for name in OFFSET_CHECKPOINTS.values())]
        plan = care.around(header, lambda: plan_log_dir(log_dir))
    state = _open_state(state_dir, plan, depth)
    rate = ReadRate(max_read_rate_mib_s) if max_read_rate_mib_s else None
    try:
        for path in plan.partition_dirs:
            rows, prow = scan_partition_dir(
                path, depth, log_dir_info=plan.info, checkpoints_by_tp=plan.checkpoints_by_tp, root=plan.root,
                progress=progress, on_progress=on_progress,
                state=state.partition(path.name) if state is not None else None, care=care, rate=rate,
            )
            if progress is not None:
                progress.partitions_done += 1
            yield rows, prow, None
    except BaseException:
        if state is not None:
            state.abort()
        raise
    if state is not None:
        _finish_state(state, plan.info, hold_state)
    if care is not None or rate is not None:
        plan.info["page_cache"] = {"dropped_bytes": care.dropped_bytes if care else 0,
                                   "paced_s": round(rate.slept_s, 3) if rate else 0.0}
    if progress is not None:
        progress.log_dirs_done += 1
        if on_progress is not None:
            on_progress(progress)
    yield [], None, plan.info


def _finish_state(state: LogDirState, info: dict, hold_state: list | None) -> None:
    """Writes the new state (renamed into place now, or by whoever holds it: ``hold_state``); its counts in ``info``."""
    if hold_state is None:
        state.commit()
    else:
        state.prepare()
        hold_state.append(state)
    info["scan_state"] = {"file": str(state.path), "reused": state.reused, "read": state.scanned,
                          "continued": state.continued, "skipped_bytes": state.skipped_bytes,
                          "kept": state.stored, "rewritten": state.rewritten}


def _open_state(state_dir, plan: LogDirPlan, depth: str) -> LogDirState | None:
    if state_dir is None:
        return None
    check_state_dir(state_dir, [plan.root])
    state = LogDirState.open(state_dir, plan.info, depth)
    plan.info["problems"].extend(state.notes)
    return state


def scan_log_dirs(
    log_dirs: Iterable[str | os.PathLike],
    depth: str = "index",
    *,
    on_progress: ProgressCallback | None = None,
    state_dir: str | os.PathLike | None = None,
    page_cache_care: bool = False,
    max_read_rate_mib_s: float | None = None,
) -> ScanResult:
    """Every log dir's rows in memory (for small outputs; ``iter_log_dir`` streams). Options as
    :func:`iter_log_dir`; a state dir inside any of the log dirs is refused before anything is read."""
    log_dirs = list(log_dirs)
    if state_dir is not None:
        check_state_dir(state_dir, log_dirs)
    progress = Progress(log_dirs_total=len(log_dirs))
    segments: list[dict] = []
    partitions: list[dict] = []
    infos: list[dict] = []
    for log_dir in log_dirs:
        for rows, prow, info in iter_log_dir(log_dir, depth, progress=progress, on_progress=on_progress,
                                             state_dir=state_dir, page_cache_care=page_cache_care,
                                             max_read_rate_mib_s=max_read_rate_mib_s):
            segments.extend(rows)
            if prow is not None:
                partitions.append(prow)
            if info is not None:
                infos.append(info)
    return ScanResult(segments, partitions, infos)
