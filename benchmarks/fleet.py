"""Fleet scale: whole `kafka-audit audit --manifest` runs on a SYNTHETIC 30-broker fleet, side by
side with the code before (a git ref), wall, CPU and peak RSS, with the time of each stage.

    nice -n 10 .venv/bin/python benchmarks/fleet.py --rows 10000,100000,1000000 --before /tmp/fleet-before
    git worktree add /tmp/fleet-before f32eae6     # the code before issue 19, once (or git archive REF | tar -x)
    nice -n 10 .venv/bin/python benchmarks/fleet.py --rows 100000 --anomalies --chromium   # the report in Chromium

The fleet is NOT real broker data: the real rows of manifests collected from real brokers (the
bundled demo sample auditor/samples/demo-cluster.tar.gz and /work/shared/fixtures/real/broker-dirs,
collected here with ``auditor.manifest.collect_manifest`` at depth headers) are copied under new
topic names into 30 brokers' manifests. Marked SYNTHETIC three ways: ``cluster_id`` SYNTHETIC-fleet,
log dirs under /synthetic/, and the Parquet files' metadata ``kafka_audit.synthetic = true``.

Shape (as real clusters have): replication factor 3; partition dirs of 1 to 50 segments (a
geometric spread with the mean rows / dirs, capped at 50); ``--dirs-per-row`` sets the number of
partition dirs (default: 50,000 dirs for 100,000 rows, the issue's mid-size cluster; 100,000 dirs
at 1,000,000 rows). Each segment copies one real segment row (its sizes, index entries, magics,
notes, batch counts) and gets contiguous offsets and timestamps/mtimes one segment apart; the
replicas of a partition share their segments (mtimes a few seconds apart), as followers do.

Each run is a fresh process (``--engine local``, ``--progress``: the progress lines give the stages),
its CPU and peak RSS from ``wait4``, and per stage the wall and CPU time, the peak RSS reached by the
stage's end (``/proc/PID/status`` VmHWM) and the stage's own peak (``stage``: VmRSS sampled every
0.2 s during the stage, so a peak shorter than that can be missed); the same manifests for each
code version, runs interleaved.
Prints medians per size and code, the ratios, the check cost per partition dir, the RSS per segment
row, the GX suite's stage ('validating': GX's import, the suite, its cleanup) in CPU and wall seconds
and its share of the audit's, whether the findings (a sha256 of the JSON's list) and the GX results
(a sha256 of the JSON's ``expectations``: every expectation's success, counts and samples) are
identical across the code versions, and the load average; with ``--chromium`` the report's load and sort time in headless Chromium. Asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

CACHE = REPO / ".cache" / "bench-fleet"
BROKERS = 30
RF = 3
MAX_SEGMENTS = 50
HOUR_MS = 3_600_000
T0 = 1_700_000_000_000
AS_OF = "2023-11-20T00:00:00Z"
REAL_BROKER_DIRS = REPO.parent / "shared" / "fixtures" / "real" / "broker-dirs"


OFFSET_COLUMNS = ("base_offset", "first_offset", "last_offset", "last_index_offset", "last_timeindex_offset",
                  "min_timestamp_offset", "max_timestamp_offset", "max_backward_jump_offset")
MTIME_COLUMNS = ("log_mtime_ms", "index_mtime_ms", "timeindex_mtime_ms")
TIME_COLUMNS = ("first_batch_max_timestamp_ms", "last_batch_max_timestamp_ms", "last_timeindex_timestamp_ms",
                "max_timestamp_ms", "min_batch_timestamp_ms", "min_timestamp_ms", "scanned_at_ms") + MTIME_COLUMNS


def real_rows() -> tuple[pa.Table, pa.Table, pa.Table]:
    """Segment, partition and log-dir rows of manifests collected from real brokers (cached)."""
    from auditor.cli.demo import unpack_demo_sample
    from auditor.manifest import collect_manifest, read_manifest

    out = CACHE / "real"
    if not (out / "done").exists():
        with tempfile.TemporaryDirectory() as tmp:
            demo_dirs, _ = unpack_demo_sample(Path(tmp) / "demo")
            sources = [list(map(str, demo_dirs))] + [[str(p)] for p in sorted(REAL_BROKER_DIRS.glob("*/*")) if p.is_dir()]
            for i, dirs in enumerate(sources):
                collect_manifest(dirs, out / f"m{i}", depth="headers")
        (out / "done").write_text("ok")
    tables = [read_manifest(m) for m in sorted(out.glob("m*"))]
    return tuple(pa.concat_tables([t[i] for t in tables], promote_options="default") for i in range(3))


def healthy_mask(t: pa.Table) -> pa.Array:
    """Real rows no check flags on their own (no notes, stop reason, CRC failure, trailing bytes,
    offset hole, late mtime, index entry past the end): a fleet whose findings are the exception.
    The real rows of the demo sample carry its planted anomalies; ``--anomalies`` keeps them."""
    def col(name):
        return t[name].to_numpy(zero_copy_only=False).astype("float64")

    notes = np.array([not n for n in t["notes"].to_pylist()])
    late = col("log_mtime_ms") - col("max_timestamp_ms")
    ok = (notes & t["stop_reason"].is_null().to_numpy(zero_copy_only=False)
          & (np.nan_to_num(col("crc_failures")) == 0) & (np.nan_to_num(col("trailing_bytes")) == 0)
          & (col("first_offset") == col("base_offset")) & (late >= 0) & (late < 3_600_000)
          & ~(col("last_index_position") >= col("log_size_bytes")) & ~np.isnan(col("index_size_bytes"))
          & ~np.isnan(col("timeindex_size_bytes")) & (np.nan_to_num(col("max_backward_jump_ms")) < 3_600_000))
    return pa.array(ok)


def synthesize(rows: int, dirs: int, out: Path, seed: int = 19, healthy: bool = True,
               topic_prefix: str = "SYNTHETIC-fleet-", on_fire: bool = False) -> dict:
    """30 brokers' manifests under ``out``: ``dirs`` partition dirs, about ``rows`` segment rows.
    ``on_fire``: every partition dir flagged (:func:`set_on_fire`), audited at :data:`ON_FIRE_AS_OF`."""
    from auditor.manifest import LOG_DIRS_SCHEMA
    from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA

    seg_base, part_base, info_base = real_rows()
    live = pc.and_(pc.equal(seg_base["dir_kind"], "live"),
                   pc.and_(pc.is_null(seg_base["file_state"]), pc.is_valid(seg_base["log_size_bytes"])))
    seg_base = seg_base.filter(live)
    if healthy:
        seg_base = seg_base.filter(healthy_mask(seg_base))
    rng = np.random.default_rng(seed)
    partitions = dirs // RF
    mean = max(1.0, rows / (partitions * RF))
    counts = np.minimum(rng.geometric(1.0 / mean, partitions), MAX_SEGMENTS)  # segments per partition (all replicas)
    counts = np.maximum(1, np.round(counts * rows / (counts.sum() * RF))).astype(np.int64)
    counts = np.minimum(counts, MAX_SEGMENTS)
    topics = max(1, partitions // 50)
    p_topic, p_part = np.arange(partitions) % topics, np.arange(partitions) // topics
    # one template segment per (partition, segment), shared by the partition's replicas
    n_tpl = int(counts.sum())
    tpl_part = np.repeat(np.arange(partitions), counts)
    tpl_seq = np.arange(n_tpl) - np.repeat(np.cumsum(counts) - counts, counts)
    tpl = seg_base.take(pa.array(rng.integers(0, seg_base.num_rows, n_tpl)))
    def col(name):
        return tpl[name].to_numpy(zero_copy_only=False).astype("float64")  # NaN for null

    old_base = col("base_offset")
    span = np.nan_to_num(col("last_offset") - old_base + 1, nan=1.0).clip(1).astype(np.int64)
    starts = np.cumsum(span) - span
    first = starts - np.repeat(starts[np.cumsum(counts) - counts], counts)  # offsets from 0 in each partition
    newest = T0 + tpl_seq * HOUR_MS + rng.integers(0, 600_000, n_tpl)
    old_newest = np.where(np.isnan(col("max_timestamp_ms")), col("log_mtime_ms"), col("max_timestamp_ms"))
    offset_shift, time_shift = first - old_base, newest - np.nan_to_num(old_newest, nan=float(T0))
    active = tpl_seq == np.repeat(counts, counts) - 1
    # replicas
    idx = np.repeat(np.arange(n_tpl), RF)
    replica = np.tile(np.arange(RF), n_tpl)
    part_of = tpl_part[idx]
    broker = ((p_topic[part_of] + p_part[part_of] + replica * (BROKERS // RF)) % BROKERS + 1).astype(np.int32)
    log_dir = np.char.add(np.char.add("/synthetic/broker-", broker.astype(str)), np.char.add("/data-", (p_part[part_of] % 2).astype(str)))
    topic = np.char.add(topic_prefix, p_topic[part_of].astype(str))
    partition = p_part[part_of].astype(np.int32)
    n = len(idx)
    t = tpl.take(pa.array(idx))
    def shifted(name, by):  # a real value moved with its segment (offsets) or its time (timestamps)
        return pa.array(np.where(np.isnan(col(name)), np.nan, col(name) + by)[idx], from_pandas=True).cast(pa.int64())

    replace = {name: shifted(name, offset_shift) for name in OFFSET_COLUMNS}
    replace.update({name: shifted(name, time_shift) for name in TIME_COLUMNS})
    replace.update({
        "broker_id": pa.array(broker), "cluster_id": pa.array(np.full(n, "SYNTHETIC-fleet")),
        "log_dir": pa.array(log_dir), "topic": pa.array(topic), "partition": pa.array(partition),
        "dir_kind": pa.array(np.full(n, "live")), "dir_name": pa.array(np.char.add(np.char.add(topic, "-"), partition.astype(str))),
        "is_active": pa.array(active[idx]), "file_state": pa.nulls(n, pa.string()),
    })
    jitter = rng.integers(0, 5_000, n)  # followers write the same segment seconds apart
    for name in MTIME_COLUMNS:
        replace[name] = pc.add(replace[name], pa.array(jitter))
    if on_fire:
        set_on_fire(replace, replica, active[idx], rng)
    segments = pa.Table.from_arrays([replace.get(f.name, t.column(f.name)).cast(f.type) if f.name in replace
                                     else t.column(f.name) for f in SEGMENT_SCHEMA], schema=SEGMENT_SCHEMA)
    # one partition-dir row per replica
    dir_keys = ["broker_id", "log_dir", "topic", "partition", "dir_name"]
    g = segments.group_by(dir_keys).aggregate([("log_size_bytes", "sum"), ("log_size_bytes", "count"),
                                               ("log_mtime_ms", "min"), ("log_mtime_ms", "max"),
                                               ("base_offset", "min"), ("last_offset", "max")])
    m = g.num_rows
    p = part_base.filter(pc.equal(part_base["dir_kind"], "live")).take(pa.array(rng.integers(0, 1, m)))
    prow = {k: g[k] for k in dir_keys}
    prow.update({"cluster_id": pa.array(np.full(m, "SYNTHETIC-fleet")), "dir_kind": pa.array(np.full(m, "live")),
                 "segment_count": g["log_size_bytes_count"], "size_bytes": g["log_size_bytes_sum"],
                 "oldest_log_mtime_ms": g["log_mtime_ms_min"], "newest_log_mtime_ms": g["log_mtime_ms_max"],
                 "log_start_offset": g["base_offset_min"], "log_end_offset": pc.add(g["last_offset_max"], 1),
                 "high_watermark": pc.add(g["last_offset_max"], 1), "topic_id": pa.nulls(m, pa.string())})
    parts = pa.Table.from_arrays([prow[f.name].cast(f.type) if f.name in prow else p.column(f.name)
                                  for f in PARTITION_SCHEMA], schema=PARTITION_SCHEMA)
    meta = {b"kafka_audit.synthetic": b"true", b"kafka_audit.synthetic_source": b"real rows of collected manifests"}
    out.mkdir(parents=True, exist_ok=True)
    info_tpl = info_base.slice(0, 1).to_pylist()[0]
    for b in range(1, BROKERS + 1):
        d = out / f"broker-{b}"
        d.mkdir(exist_ok=True)
        for name, table in (("segments", segments), ("partitions", parts)):
            mine = table.filter(pc.equal(table["broker_id"], b))
            pq.write_table(mine.replace_schema_metadata({**(mine.schema.metadata or {}), **meta}), d / f"{name}.parquet")
        infos = [{**{k: info_tpl.get(k) for k in LOG_DIRS_SCHEMA.names}, "broker_id": b,
                  "log_dir": f"/synthetic/broker-{b}/data-{i}", "cluster_id": "SYNTHETIC-fleet"} for i in (0, 1)]
        info = pa.Table.from_pylist([{k: r.get(k) for k in LOG_DIRS_SCHEMA.names} for r in infos], schema=LOG_DIRS_SCHEMA)
        pq.write_table(info.replace_schema_metadata(meta), d / "log_dirs.parquet")
    return {"segment_rows": segments.num_rows, "partition_dirs": parts.num_rows, "partitions": partitions,
            "segments_per_dir_max": int(counts.max())}


#: The on-fire fleet's audit time: two months after its records (T0 + up to 50 h), so time
#: retention (7 d by default) is overdue on every closed segment.
ON_FIRE_AS_OF = "2024-01-20T00:00:00Z"
#: When the on-fire fleet's third replicas were re-written (a cluster-wide reassignment), 20 days after T0.
MOVED_AT_MS = T0 + 20 * 24 * HOUR_MS


def set_on_fire(replace: dict, replica, active, rng) -> None:
    """The columns of a fleet where every partition dir is flagged, as a bad day has them:
    retention stopped (the audit time, :data:`ON_FIRE_AS_OF`, is two months after the records),
    every partition's third replica re-written at :data:`MOVED_AT_MS` (its mtimes packed into 4
    minutes, days after its records: KLA020), and a producer clock 2 days ahead on every active
    segment (KLA030 on every replica dir, KLA031 where it blocks the retention walk)."""
    n = len(replica)
    moved = replica == 2
    for name in MTIME_COLUMNS:
        reset = pa.array(MOVED_AT_MS + rng.integers(0, 240_000, n))
        replace[name] = pc.if_else(pa.array(moved), reset, replace[name])
    ahead = int(np.datetime64(ON_FIRE_AS_OF.rstrip("Z"), "ms").astype(np.int64)) + 2 * 24 * HOUR_MS
    for name in ("max_timestamp_ms", "last_batch_max_timestamp_ms"):
        replace[name] = pc.if_else(pa.array(active), pa.array(np.full(n, ahead) + rng.integers(0, 600_000, n)),
                                   replace[name])


def synthesize_chunked(rows: int, dirs: int, out: Path, chunk_rows: int = 1_000_000) -> dict:
    """:func:`synthesize` in chunks of about ``chunk_rows`` rows (each its own topics, named
    SYNTHETIC-fleet-cK-N, and seed), appended broker by broker into one manifest per broker, so
    10,000,000 rows are made in the memory of 1,000,000."""
    import shutil

    chunks = max(1, round(rows / chunk_rows))
    shapes = []
    for k in range(chunks):
        shapes.append(synthesize(rows // chunks, dirs // chunks, out / f"chunk-{k}", seed=19 + k,
                                 topic_prefix=f"SYNTHETIC-fleet-c{k}-"))
    for b in range(1, BROKERS + 1):
        d = out / f"broker-{b}"
        d.mkdir(parents=True, exist_ok=True)
        for name in ("segments", "partitions"):
            writer = None
            for k in range(chunks):
                table = pq.read_table(out / f"chunk-{k}" / f"broker-{b}" / f"{name}.parquet")
                writer = writer or pq.ParquetWriter(d / f"{name}.parquet", table.schema)
                writer.write_table(table)
            writer.close()
        shutil.copy(out / "chunk-0" / f"broker-{b}" / "log_dirs.parquet", d / "log_dirs.parquet")
    for k in range(chunks):
        shutil.rmtree(out / f"chunk-{k}")
    return {"segment_rows": sum(s["segment_rows"] for s in shapes), "partition_dirs": sum(s["partition_dirs"] for s in shapes),
            "partitions": sum(s["partitions"] for s in shapes), "segments_per_dir_max": max(s["segments_per_dir_max"] for s in shapes),
            "chunks": chunks}


STAGE = re.compile(r"^(?P<what>.+)$")


def _cpu_s(pid: int) -> float:
    """user + sys CPU seconds of a live process so far (/proc/PID/stat fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reaped_cpu_s(pid: int) -> float:
    """user + sys CPU seconds of the children a live process has waited for (/proc/PID/stat fields
    16 and 17), 0 when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _status_mib(pid: int, field: str) -> float:
    """A memory field of a live process (``VmHWM``: peak RSS so far; ``VmRSS``: now) from
    /proc/PID/status, MiB; 0 when gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _hwm_mib(pid: int) -> float:
    return _status_mib(pid, "VmHWM")


def run_audit(code: Path, manifests: Path, out: Path, engine: str = "local", extra: tuple[str, ...] = (),
              nice: int = 0, timeout_s: float | None = None, as_of: str = AS_OF) -> dict:
    """One whole `kafka-audit audit --manifest` in a fresh process of ``code``: wall, CPU, peak RSS,
    and from each progress line to the next (the stages) the wall and CPU time and the peak RSS
    reached by the stage's end. The process's descendants (on Spark: the driver JVM) are sampled
    too (``tree``: peak RSS of the Python driver, of the JVM, of both at once; their CPU)."""
    import threading

    from _procmem import descendants

    env = {**os.environ, "PYTHONPATH": str(code)}
    cmd = [sys.executable, "-m", "auditor.cli", "audit", "--manifest", str(manifests / "*"), "--engine", engine,
           "--json", str(out / "findings.json"), "--out", str(out / "report.html"), "--as-of", as_of,
           "--progress", "--exit-zero", *extra]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=str(code), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=(lambda: os.nice(nice)) if nice else None, start_new_session=True)
    timer = None
    if timeout_s:  # stopped there: the stages so far are still reported (its own process group: the JVM too)
        import signal

        timer = threading.Timer(timeout_s, lambda: os.killpg(proc.pid, signal.SIGTERM))
        timer.start()
    # the Python's own peak RSS and its reaped children's CPU, sampled: wait4's rusage counts the
    # children it reaped (the driver JVM, which the audit ends and reaps before its report) in
    # ru_maxrss and in its CPU times
    tree = {"python_mib": 0.0, "jvm_mib": 0.0, "sum_mib": 0.0, "child_cpu": {}, "python_hwm_mib": 0.0,
            "reaped_cpu_s": 0.0}
    stage_peak = {"python_mib": 0.0, "jvm_mib": 0.0}  # sampled during the current stage; reset at each progress line
    done = threading.Event()

    def sample() -> None:  # the JVM's RSS and CPU while it lives (it is gone by wait4)
        while not done.is_set():
            py = _rss_mib(proc.pid)
            tree["python_hwm_mib"] = max(tree["python_hwm_mib"], _hwm_mib(proc.pid))
            tree["reaped_cpu_s"] = max(tree["reaped_cpu_s"], _reaped_cpu_s(proc.pid))
            jvm = 0.0
            for pid in descendants(proc.pid):
                jvm += _rss_mib(pid)
                tree["child_cpu"][pid] = max(tree["child_cpu"].get(pid, 0.0), _cpu_s(pid))
            tree["python_mib"], tree["jvm_mib"] = max(tree["python_mib"], py), max(tree["jvm_mib"], jvm)
            stage_peak["python_mib"] = max(stage_peak["python_mib"], py)
            stage_peak["jvm_mib"] = max(stage_peak["jvm_mib"], jvm)
            tree["sum_mib"] = max(tree["sum_mib"], py + jvm)
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stages, last, last_cpu, name = [], start, 0.0, "start"
    stage_peaks = []  # per stage (aligned with ``stages``): sampled peak RSS of the Python driver and of the JVM, MiB
    log = (out / "stderr.log").open("w")
    for line in proc.stderr:
        log.write(line)
        now, cpu, hwm = time.monotonic(), _cpu_s(proc.pid), _hwm_mib(proc.pid)
        stages.append((name, now - last, cpu - last_cpu, hwm))
        stage_peaks.append((max(stage_peak["python_mib"], _rss_mib(proc.pid)), stage_peak["jvm_mib"]))
        stage_peak["python_mib"] = stage_peak["jvm_mib"] = 0.0
        last, last_cpu, name = now, cpu, line.strip()[:70]
    _, status, usage = os.wait4(proc.pid, 0)
    end = time.monotonic()
    if timer is not None:
        timer.cancel()
    log.close()
    if os.waitstatus_to_exitcode(status) != 0:  # --exit-zero: anything else is a failure
        print(f"  the audit exited {os.waitstatus_to_exitcode(status)}; the end of its stderr:\n"
              + (out / "stderr.log").read_text()[-3000:])
    done.set()
    sampler.join()
    own_cpu = usage.ru_utime + usage.ru_stime - tree["reaped_cpu_s"]  # without the reaped JVM's
    own_hwm = tree["python_hwm_mib"] or usage.ru_maxrss / 1024
    stages.append((name, end - last, own_cpu - last_cpu, own_hwm))
    stage_peaks.append((stage_peak["python_mib"], stage_peak["jvm_mib"]))
    doc = json.loads((out / "findings.json").read_text()) if (out / "findings.json").exists() else {}
    findings = doc.get("findings", [])
    digest = hashlib.sha256(json.dumps(findings, sort_keys=True).encode()).hexdigest()[:16]
    # the GX suite's results (every expectation's success, counts, percent, samples), beside the findings
    gx_digest = hashlib.sha256(json.dumps(doc.get("expectations"), sort_keys=True).encode()).hexdigest()[:16]
    return {"wall_s": end - start, "cpu_s": own_cpu, "rss_mib": own_hwm,
            "status": os.waitstatus_to_exitcode(status), "stages": stages, "stage_peaks": stage_peaks, "tree": tree,
            "children_cpu_s": sum(tree["child_cpu"].values()), "findings_list": findings,
            "findings": sum(1 for f in findings if f.get("severity") != "PASS"), "findings_sha256": digest,
            # partition dirs with a finding of their own (topic, partition, broker, log dir), or of their
            # partition (a finding with no broker: every dir of it)
            "flagged_dirs": _flagged_dirs(findings, manifests),
            "expectations_sha256": gx_digest,
            "json_mib": (out / "findings.json").stat().st_size / 2**20 if (out / "findings.json").exists() else None,
            "html_mib": (out / "report.html").stat().st_size / 2**20 if (out / "report.html").exists() else None}


def _flagged_dirs(findings: list[dict], manifests: Path) -> int:
    """How many of the manifests' partition dirs a finding names (its own: topic, partition,
    broker, log dir; or its partition's, for a finding without a broker)."""
    parts = pa.concat_tables([pq.read_table(p, columns=["topic", "partition", "broker_id", "log_dir"])
                              for p in sorted(manifests.glob("*/partitions.parquet"))]).to_pylist()
    own = {(f["topic"], f["partition"], f["broker_id"], f["log_dir"]) for f in findings if f.get("severity") != "PASS"}
    whole = {(f["topic"], f["partition"]) for f in findings if f.get("severity") != "PASS" and f["broker_id"] is None}
    return sum((p["topic"], p["partition"], p["broker_id"], p["log_dir"]) in own or (p["topic"], p["partition"]) in whole
               for p in parts)


def _rss_mib(pid: int) -> float:
    return _status_mib(pid, "VmRSS")


CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium_open_and_sort(report: Path) -> dict:
    """The report opened in Debian's headless Chromium (Playwright, as tests/test_report_chromium.py):
    seconds to the load event, and seconds for a click on the first sortable header of every table
    to re-order it (all tables, in one go), with the rows the page holds."""
    import shutil

    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        start = time.monotonic()
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        opened = time.monotonic() - start
        tables = page.eval_on_selector_all("table", "ts => ts.filter(t => t.querySelector('th.sortable')).length")
        rows = page.eval_on_selector_all("tr", "rs => rs.length")
        start = time.monotonic()
        page.evaluate("() => { for (const t of document.querySelectorAll('table')) {"
                      " const h = t.querySelector('th.sortable'); if (h) h.click(); } }")
        sorted_s = time.monotonic() - start
        browser.close()
    return {"open_s": opened, "sort_s": sorted_s, "sortable_tables": tables, "rows": rows}


def stage_cpu_s(stages, prefix: str) -> float:
    """CPU seconds of a stage: from its progress line (``prefix``) to the next one."""
    return sum(cpu for name, _, cpu, _ in stages if name.split("] ", 1)[-1].startswith(prefix))


def stage_wall_s(stages, prefix: str) -> float:
    """Wall seconds of a stage: from its progress line (``prefix``) to the next one."""
    return sum(wall for name, wall, _, _ in stages if name.split("] ", 1)[-1].startswith(prefix))


def check_stage_s(stages) -> float:
    """The checks' stage (the audit prints no line between the GX suite and the report: the stage
    after it is both)."""
    return stage_cpu_s(stages, "running the checks")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="10000,100000,1000000", help="segment-row counts (comma-separated)")
    ap.add_argument("--dirs", default="", help="partition dirs per size (default: rows / 2, at most 100,000)")
    ap.add_argument("--before", default="", help="a checkout of the code before (git worktree add DIR f32eae6)")
    ap.add_argument("--before-max-rows", type=int, default=100_000,
                    help="largest size the old code runs at (issue 19's start: ~10 KiB a row, 10 GiB at 1,000,000)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--anomalies", action="store_true", help="keep the real rows that carry anomalies (more findings)")
    ap.add_argument("--chromium", action="store_true", help="open each report in headless Chromium: load and sort time")
    ap.add_argument("--fleets", default="clean,on-fire",
                    help="clean: today's fleet (findings the exception); on-fire: every partition dir flagged (set_on_fire)")
    args = ap.parse_args()
    sizes = [int(r) for r in args.rows.split(",")]
    dirs = [int(d) for d in args.dirs.split(",")] if args.dirs else [min(r // 2, 100_000) for r in sizes]
    codes = {"after": REPO}
    if args.before:
        codes["before"] = Path(args.before)
    print(f"load average at start: {os.getloadavg()}")
    table = []
    for (rows, ndirs), fleet in [(size, f) for size in zip(sizes, dirs) for f in args.fleets.split(",")]:
        fire = fleet == "on-fire"
        where = CACHE / f"fleet-{rows}-{ndirs}{'-anomalies' if args.anomalies else ''}{'-on-fire' if fire else ''}"
        if not (where / "shape.json").exists():
            shape = synthesize(rows, ndirs, where / "manifests", healthy=not args.anomalies, on_fire=fire)
            (where / "shape.json").write_text(json.dumps(shape))
        shape = json.loads((where / "shape.json").read_text())
        as_of = ON_FIRE_AS_OF if fire else AS_OF
        print(f"\n== SYNTHETIC {fleet} fleet: {shape['segment_rows']:,} segment rows, {shape['partition_dirs']:,} partition dirs, "
              f"{shape['partitions']:,} partitions, {BROKERS} brokers, up to {shape['segments_per_dir_max']} segments a dir, "
              f"--as-of {as_of}")
        results: dict[str, list[dict]] = {c: [] for c in codes}
        for _ in range(args.runs):
            for code, path in codes.items():
                if code == "before" and rows > args.before_max_rows:
                    continue
                out = Path(tempfile.mkdtemp(prefix=f"fleet-{code}-"))
                r = run_audit(path, where / "manifests", out, as_of=as_of)
                results[code].append(r)
                print(f"  {code:6s} wall {r['wall_s']:7.1f} s  cpu {r['cpu_s']:7.1f} s  rss {r['rss_mib']:6.0f} MiB  "
                      f"checks cpu {check_stage_s(r['stages']):6.1f} s  'validating' cpu {stage_cpu_s(r['stages'], 'validating'):6.1f} s  exit {r['status']}  findings {r['findings']:,}  "
                      f"sha256 {r['findings_sha256']}  GX results sha256 {r['expectations_sha256']}  json {r['json_mib']:.1f} MiB  html {r['html_mib']:.1f} MiB  load {os.getloadavg()[0]:.1f}")
                if args.chromium and (out / "report.html").exists():
                    c = chromium_open_and_sort(out / "report.html")
                    print(f"      chromium: opened in {c['open_s']:.2f} s, {c['sortable_tables']} sortable tables sorted in "
                          f"{c['sort_s']:.2f} s ({c['rows']:,} table rows in the page)")
                for (name, wall, cpu, hwm), (stage_py, _) in zip(r["stages"], r["stage_peaks"]):
                    print(f"      wall {wall:7.1f} s  cpu {cpu:7.1f} s  peak rss {hwm:6.0f} MiB  stage {stage_py:6.0f} MiB  {name}")
        med = {c: {k: statistics.median(x[k] for x in rs) for k in ("wall_s", "cpu_s", "rss_mib")}
               | {"checks_s": statistics.median(check_stage_s(x["stages"]) for x in rs),
                  "gx_s": statistics.median(stage_cpu_s(x["stages"], "validating") for x in rs),
                  "gx_share": statistics.median(stage_cpu_s(x["stages"], "validating") / x["cpu_s"] for x in rs),
                  "gx_wall_s": statistics.median(stage_wall_s(x["stages"], "validating") for x in rs),
                  "gx_wall_share": statistics.median(stage_wall_s(x["stages"], "validating") / x["wall_s"] for x in rs)}
               for c, rs in results.items() if rs}
        for c, m in med.items():
            print(f"  median {c:6s}: wall {m['wall_s']:.1f} s, cpu {m['cpu_s']:.1f} s, rss {m['rss_mib']:.0f} MiB, "
                  f"checks cpu {m['checks_s']:.2f} s = {m['checks_s'] / shape['partition_dirs'] * 1e6:.0f} µs per partition dir, "
                  f"'validating' (GX) stage cpu {m['gx_s']:.2f} s ({m['gx_share']:.1%} of the audit's CPU), "
                  f"wall {m['gx_wall_s']:.2f} s ({m['gx_wall_share']:.1%} of its wall), "
                  f"rss {m['rss_mib'] * 1024 / shape['segment_rows']:.2f} KiB per segment row")
        digests = {c: {x["findings_sha256"] for x in rs} for c, rs in results.items() if rs}
        if len(digests) > 1:
            same = len(set().union(*digests.values())) == 1
            print(f"  findings (the JSON's 'findings' list, sha256): {'IDENTICAL' if same else 'DIFFERENT'} across the code versions")
            gx_digests = {c: {x["expectations_sha256"] for x in rs} for c, rs in results.items() if rs}
            same = len(set().union(*gx_digests.values())) == 1
            print(f"  GX results (the JSON's 'expectations', sha256): {'IDENTICAL' if same else 'DIFFERENT'} across the code versions")
        for c, rs in results.items():
            if rs:
                m, found = med[c], statistics.median(x["findings"] for x in rs)
                table.append((f"{shape['segment_rows']:,} rows {fleet}", c, m["checks_s"],
                              m["checks_s"] / max(found, 1) * 1e6, m["wall_s"], m["cpu_s"], m["rss_mib"], found,
                              statistics.median(x["flagged_dirs"] for x in rs), shape["partition_dirs"]))
        if "before" in med and "after" in med:
            b, a = med["before"], med["after"]
            print(f"  before/after: wall x{b['wall_s'] / a['wall_s']:.1f}, cpu x{b['cpu_s'] / a['cpu_s']:.1f}, "
                  f"checks x{b['checks_s'] / max(a['checks_s'], 1e-9):.1f}, rss {b['rss_mib']:.0f} -> {a['rss_mib']:.0f} MiB")
    print("\n| fleet | code | checks cpu s | µs per finding | whole audit wall s | cpu s | peak RSS MiB | findings | dirs flagged |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, c, checks, per, wall, cpu, rss, found, flagged, ndirs in table:
        print(f"| {name} | {c} | {checks:.2f} | {per:.0f} | {wall:.1f} | {cpu:.1f} | {rss:.0f} | {found:,.0f} | "
              f"{flagged:,.0f} of {ndirs:,} |")
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
