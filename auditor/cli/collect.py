"""``kafka-audit collect``: on a broker, a Parquet manifest of its log dirs. No Spark, no JVM."""

from __future__ import annotations

import sys
from pathlib import Path

from auditor.cli.common import (add_log_dir_arguments, one_input, DEPTH_HELP, FORMATTER, CliError, input_exit_code, keys_sample_bytes, progress_printer,
                                wants_progress)
from auditor.scan.pagecache import NICE_READ_RATE_MIB_S
from auditor.scan.state import StateDirError
from auditor.units import human_bytes
from auditor.schema import DEPTHS


def register(sub) -> None:
    collect = sub.add_parser(
        "collect",
        formatter_class=FORMATTER,
        help="on a broker: write a Parquet manifest of its log dirs (no Spark, no JVM)",
        description=(
            "Scan log dirs (read-only) into a Parquet manifest directory: segments.parquet,\n"
            "partitions.parquet, log_dirs.parquet (broker id, host, collection time), and what the\n"
            "cluster records about itself when these log dirs hold it, decoded: the KRaft metadata\n"
            "log (cluster_metadata.jsonl.gz: topics, configs, replica moves), tiered storage's\n"
            "__remote_log_metadata (remote_log_metadata.jsonl.gz) and the consumer groups of\n"
            "__consumer_offsets (consumer_groups.jsonl.gz), so that `audit --manifest` and\n"
            "`replay-check --manifest` know what they know from the log dirs (docs/manifests.md).\n"
            "Pure Python, for brokers; `kafka-audit scan --engine spark --manifest` reads them.\n\n"
            + DEPTH_HELP
        ),
        epilog="example:\n  kafka-audit collect --nice --out /tmp/manifest-$(hostname) /var/lib/kafka/data",
    )
    add_log_dir_arguments(collect)
    collect.add_argument("--out", required=True, metavar="PATH",
                         help="manifest directory to write (refused inside a scanned log dir), or an object-store prefix "
                              "s3://bucket/prefix (AWS_* settings; docs/object-storage.md)")
    collect.add_argument("--depth", choices=DEPTHS, default="headers",
                         help="see above (default: headers, as scan and audit: every check has its facts)")
    collect.add_argument("--nice", action="store_true",
                         help="lowest CPU priority (nice 19) and idle I/O class (Linux ioprio); also leaves the "
                              "page cache as found and reads at most --max-read-rate (default with --nice: "
                              f"{NICE_READ_RATE_MIB_S:g} MiB/s)")
    collect.add_argument("--state", metavar="DIR",
                         help="incremental scan: keep each log dir's closed-segment rows in DIR (outside every log "
                              "dir) and read only what changed since the last run (the active segment, new, "
                              "cleaned, truncated or re-indexed segments)")
    collect.add_argument("--max-read-rate", type=float, metavar="MiB/s",
                         help="read at most this many MiB/s (0: unlimited)")
    care = collect.add_mutually_exclusive_group()
    care.add_argument("--page-cache-care", dest="page_cache_care", action="store_true", default=None,
                      help="drop from the page cache the pages the scan brought in (mincore before, "
                           "posix_fadvise DONTNEED after), so the broker's hot pages stay (default with --nice)")
    care.add_argument("--no-page-cache-care", dest="page_cache_care", action="store_false")
    collect.add_argument("--keys", action="store_true",
                         help="also the key statistics of every partition (keys.jsonl.gz: distinct keys, heaviest keys "
                              "as fingerprints, null keys, key sizes; reads every record; docs/keys.md)")
    collect.add_argument("--keys-sample-mib", type=float, metavar="N",
                         help="key statistics from the newest N MiB of each partition only (implies --keys)")
    collect.add_argument("--progress", dest="progress", action="store_true", default=None)
    collect.add_argument("--no-progress", dest="progress", action="store_false")
    collect.set_defaults(func=run)


def run(args) -> int:
    # here, not at the top: `collect --help` starts without the manifest writer and the cluster
    # decoders (half its start-up on a broker; benchmarks/startup.py)
    one_input(args, "log_dirs")
    for path in args.log_dirs:
        if not Path(path).is_dir():
            raise CliError(f"log dir {path!r} is not a directory")
    if args.state and "://" in args.state:
        raise CliError(f"--state {args.state}: must be a local directory (it is rewritten in place each run, with "
                       "renames an object store does not have); --out may be s3://")
    remote = remote_out(args.out)
    if remote is not None:
        return collect_to_store(args, remote)
    return collect_to(args, args.out)


def remote_out(out: str) -> str | None:
    """The object-store URL ``--out`` names (checked now: bucket there, the prefix marked incomplete), or None."""
    if "://" not in out:
        return None
    from auditor.manifest_remote import prepare_prefix
    from auditor.object_store import is_s3

    if not is_s3(out):
        raise CliError(f"--out {out}: collect writes a local directory or s3:// / s3a:// (docs/object-storage.md)")
    prepare_prefix(out)   # an unreachable store fails here, before the scan (exit 3)
    return out.rstrip("/")


STAGING_PREFIX = "kafka-audit-collect-pid"
"""Staging directories of ``collect --out s3://`` in ``$TMPDIR``: ``<prefix><pid>-<random>``,
holding :data:`STAGING_LOCK`, locked (``flock``) by the collect writing there for its lifetime."""
STAGING_LOCK = ".lock"


def make_staging() -> tuple[Path, object]:
    """A new staging directory in ``$TMPDIR`` and the open file holding its lock (kept open: the
    lock is the collect's, released by the kernel however the process ends)."""
    import fcntl
    import os
    import tempfile

    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-"))
    lock = open(staging / STAGING_LOCK, "w")  # noqa: SIM115 - held open for the collect's lifetime
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return staging, lock


def remove_stale_staging(tmp_dir: str | None = None) -> list[str]:
    """Removes the staging directories that collects killed before their cleanup left in
    ``tmp_dir`` (default ``$TMPDIR``): a directory whose lock no process holds (its collect is
    dead; a lock survives no process), or, killed before its lock file was made, whose pid is
    no running process. Directories of running collects, of other users, and anything else are
    left alone. The paths removed."""
    import fcntl
    import os
    import shutil
    import tempfile

    from auditor.atomic import pid_alive

    root = Path(tmp_dir or tempfile.gettempdir())
    removed = []
    try:
        candidates = sorted(root.glob(f"{STAGING_PREFIX}*"))
    except OSError:
        return removed
    for d in candidates:
        try:
            if not d.is_dir() or d.is_symlink() or d.stat().st_uid != os.getuid():
                continue
            lock_path = d / STAGING_LOCK
            if lock_path.exists():
                with open(lock_path, "a") as lock:
                    try:
                        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue          # a running collect's
                    shutil.rmtree(d)
            else:
                pid = d.name[len(STAGING_PREFIX):].partition("-")[0]
                if not pid.isdigit() or pid_alive(int(pid)):
                    continue
                shutil.rmtree(d)
            removed.append(str(d))
        except OSError:
            continue                      # (another collect removing it at the same moment)
    return removed


def collect_to_store(args, url: str) -> int:
    """The manifest written whole into a local staging directory, then published object by object,
    ``_complete.json`` last (auditor.manifest_remote); the staging directory removed after. Staging
    directories that killed collects left are removed first (:func:`remove_stale_staging`)."""
    import shutil

    from auditor.manifest_remote import publish_manifest

    for stale in remove_stale_staging():
        sys.stderr.write(f"removed {stale}: the staging directory of a collect that was killed\n")
    staging, lock = make_staging()
    try:
        code = collect_to(args, str(staging), shown=url)
        names = publish_manifest(staging, url)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        lock.close()
    sys.stderr.write(f"published {url}: {', '.join(names)} ({COMPLETE_NOTE})\n")
    return code


COMPLETE_NOTE = "_complete.json last"


def collect_to(args, out: str, shown: str | None = None) -> int:
    from auditor.manifest import CollectError, collect_manifest

    sample = keys_sample_bytes(args.keys_sample_mib)
    show_progress = wants_progress(args)
    try:
        res = collect_manifest(args.log_dirs, out, args.depth, nice=args.nice,
                               on_progress=progress_printer() if show_progress else None,
                               state_dir=args.state, page_cache_care=args.page_cache_care,
                               max_read_rate_mib_s=args.max_read_rate)
    except (CollectError, StateDirError) as exc:
        raise CliError(str(exc)) from exc
    if show_progress:
        sys.stderr.write("\n")
    for line in res.priority:
        sys.stderr.write(f"priority: {line}\n")
    for info in res.log_dirs:
        if info.get("scan_state"):
            st = info["scan_state"]
            unchanged = "" if st.get("rewritten", True) else ", unchanged"
            sys.stderr.write(f"state: {info['log_dir']}: {st['reused']:,} closed segments from the state, "
                             f"{st['continued']:,} continued where the last run stopped "
                             f"({human_bytes(st['skipped_bytes'])} not read again), {st['read']:,} read whole, "
                             f"{st['kept']:,} kept ({st['file']}{unchanged})\n")
    from auditor.keys.manifest_part import KEYS_FILE, collect_keys_part

    if args.keys or sample is not None:
        res.cluster_parts.append(collect_keys_part(res.log_dirs, res.out, sample))
    else:
        (Path(res.out) / KEYS_FILE).unlink(missing_ok=True)  # a re-collect without --keys must not keep an old one
    for line in res.cluster_parts:
        sys.stderr.write(f"cluster: {line}\n")
    sys.stderr.write(
        f"wrote manifest {shown or res.out}: {res.segments} segments, {res.partitions} partition dirs, "
        f"{len(res.log_dirs)} log dirs in {res.elapsed_s:.1f} s\n"
    )
    return input_exit_code(res.log_dirs)
