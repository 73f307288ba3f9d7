"""The Spark job gives the in-process scanner's tables, whatever the way in.

(a) real broker dirs (tests/harness/realdata.py): in-process == Spark local == manifests read by Spark;
(b) a real 3-broker Kafka cluster (RF 3, 2 log dirs each), snapshotted: in-process == Spark
    local == a real Spark standalone cluster (master + worker started here) == per-broker
    manifests (``kafka-audit collect``, checked not to import pyspark) read by Spark;
(c) the aggregates equal values computed here, independently, from the in-process rows.
Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

# tier (tests/harness/tiers.py): a standalone Spark cluster and `scan --engine spark` subprocesses, started without a fixture
pytestmark = pytest.mark.live

from auditor.manifest import LOG_DIRS_FILE, collect_manifest
from auditor.engines.spark import aggregates, read_manifests, scan_dataframes
from auditor.scan import scan_log_dirs
from auditor.schema import DEPTHS, PARTITION_KEY, PARTITION_SCHEMA, SEGMENT_KEY, SEGMENT_SCHEMA, to_table
from auditor.scan.filesystem import FS_FIELDS_OF_THE_MOMENT
from harness.realdata import LOG_DIRS
from harness.spark_standalone import StandaloneSpark
from harness.spark_session import spark  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
IGNORED = ("scanned_at_ms",)


# ---------------------------------------------------------------------------------------
# Normalisation: every engine's rows through the one declared schema, sorted by the key
# ---------------------------------------------------------------------------------------


def _sort_key(key):
    return lambda r: tuple((r[k] is not None, r[k] if r[k] is not None else 0) if k not in ("topic", "log_dir", "dir_name", "file_state")
                           else (r[k] is not None, r[k] or "") for k in key)


def norm(rows: list[dict], schema: pa.Schema, key) -> list[dict]:
    rows = to_table([{k: r.get(k) for k in schema.names} for r in rows], schema).to_pylist()
    for r in rows:
        for k in IGNORED:
            r.pop(k, None)
    return sorted(rows, key=_sort_key(key))


def spark_rows(df) -> list[dict]:
    return [r.asDict(recursive=True) for r in df.collect()]


def parquet_rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def assert_same(label: str, got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want), f"{label}: {len(got)} rows, expected {len(want)}"
    for g, w in zip(got, want):
        if g != w:
            diff = {k: (g.get(k), w.get(k)) for k in w if g.get(k) != w.get(k)}
            raise AssertionError(f"{label}: row differs (got, expected): {diff}\nexpected row: {w}")


def info_view(infos: list[dict]) -> list[dict]:
    keys = ("log_dir", "broker_id", "cluster_id", "directory_id", "partition_dirs", "problems")
    return sorted(({k: i.get(k) for k in keys} for i in infos), key=lambda i: i["log_dir"])


# ---------------------------------------------------------------------------------------
# (c) the aggregates, computed independently in plain Python
# ---------------------------------------------------------------------------------------


def _live(s: dict) -> bool:
    return s["file_state"] is None and s["log_size_bytes"] is not None


def _exact_sum(values):
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


def expected_aggregates(segments: list[dict], partitions: list[dict]) -> dict[str, dict]:
    by_dir: dict[tuple, list[dict]] = {}
    for s in segments:
        by_dir.setdefault((s["broker_id"], s["log_dir"], s["dir_name"]), []).append(s)
    per_dir = {}
    for p in partitions:
        segs = by_dir.get((p["broker_id"], p["log_dir"], p["dir_name"]), [])
        live = [s for s in segs if _live(s)]
        oldest = [s["min_timestamp_ms"] if s["min_timestamp_ms"] is not None else s["min_batch_timestamp_ms"] for s in segs]
        oldest = [t for t in oldest if t is not None]
        newest = [s["max_timestamp_ms"] for s in segs if s["max_timestamp_ms"] is not None]
        mt = [s["log_mtime_ms"] for s in live if s["log_mtime_ms"] is not None]
        firsts = [s["first_offset"] for s in segs if s["first_offset"] is not None]
        lasts = [s["last_offset"] for s in segs if s["last_offset"] is not None]
        per_dir[(p["broker_id"], p["log_dir"], p["dir_name"])] = {
            "broker_id": p["broker_id"], "log_dir": p["log_dir"], "topic": p["topic"], "partition": p["partition"],
            "dir_kind": p["dir_kind"], "dir_name": p["dir_name"],
            # the partition row's own facts, carried through
            "cluster_id": p["cluster_id"], "topic_id": p["topic_id"], "log_start_offset": p["log_start_offset"],
            "log_end_offset": p["log_end_offset"], "high_watermark": p["high_watermark"],
            "segment_count": len(live), "size_bytes": sum(s["log_size_bytes"] for s in live),
            "other_segment_files": len(segs) - len(live),
            "index_bytes": sum((s["index_size_bytes"] or 0) + (s["timeindex_size_bytes"] or 0)
                               + (s["txnindex_size_bytes"] or 0) for s in live),
            "message_count": _exact_sum(s["record_count"] for s in live),
            "oldest_record_timestamp_ms": min(oldest, default=None), "newest_record_timestamp_ms": max(newest, default=None),
            "first_offset": min(firsts, default=None), "last_offset": max(lasts, default=None),
            "oldest_log_mtime_ms": min(mt, default=None), "newest_log_mtime_ms": max(mt, default=None),
            "mtime_spread_ms": (max(mt) - min(mt)) if mt else None,
            "notes": len(p["notes"]) + sum(len(s["notes"]) for s in segs),
        }

    def rollup(rows):
        rows = list(rows)
        mins = [r["oldest_log_mtime_ms"] for r in rows if r["oldest_log_mtime_ms"] is not None]
        maxs = [r["newest_log_mtime_ms"] for r in rows if r["newest_log_mtime_ms"] is not None]
        return {
            "partition_dirs": len(rows),
            "replicas": sum(r["dir_kind"] == "live" for r in rows),
            "segment_count": sum(r["segment_count"] for r in rows),
            "size_bytes": sum(r["size_bytes"] for r in rows),
            "message_count": _exact_sum(r["message_count"] for r in rows),
            "oldest_record_timestamp_ms": min((r["oldest_record_timestamp_ms"] for r in rows if r["oldest_record_timestamp_ms"] is not None), default=None),
            "newest_record_timestamp_ms": max((r["newest_record_timestamp_ms"] for r in rows if r["newest_record_timestamp_ms"] is not None), default=None),
            "oldest_log_mtime_ms": min(mins, default=None), "newest_log_mtime_ms": max(maxs, default=None),
            "mtime_spread_ms": (max(maxs) - min(mins)) if mins else None,
            "notes": sum(r["notes"] for r in rows),
        }

    def group(rows, key):
        out: dict = {}
        for r in rows:
            out.setdefault(key(r), []).append(r)
        return out

    topics = {}
    live_dirs = [r for r in per_dir.values() if r["dir_kind"] == "live"]
    for topic, rows in group(live_dirs, lambda r: r["topic"]).items():
        t = rollup(rows)
        del t["partition_dirs"]   # a topic row counts partitions and replicas instead
        by_tp = group(rows, lambda r: r["partition"])
        sizes = [max(r["size_bytes"] for r in reps) for reps in by_tp.values()]
        # per partition the largest replica's count (replicas agree on data), None if one is unknown
        tp_counts = [max((r["message_count"] for r in reps if r["message_count"] is not None), default=None)
                     if all(r["message_count"] is not None for r in reps) else None for reps in by_tp.values()]
        t.update(topic=topic, partitions=len(by_tp), min_replicas=min(map(len, by_tp.values())),
                 max_replicas=max(map(len, by_tp.values())),
                 max_partition_size_bytes=max(sizes), median_partition_size_bytes=float(statistics.median(sizes)),
                 partition_message_count=_exact_sum(tp_counts),
                 brokers=len({r["broker_id"] for r in rows}))
        topics[topic] = t
    brokers = {}
    for b, rows in group(per_dir.values(), lambda r: r["broker_id"]).items():
        brokers[b] = {**rollup(rows), "broker_id": b, "log_dirs": len({r["log_dir"] for r in rows})}
    log_dirs = {k: {**rollup(rows), "broker_id": k[0], "log_dir": k[1]}
                for k, rows in group(per_dir.values(), lambda r: (r["broker_id"], r["log_dir"])).items()}
    return {"replica_stats": per_dir, "topic_stats": topics, "broker_stats": brokers, "log_dir_stats": log_dirs}


def check_aggregates(seg_df, part_df, segments: list[dict], partitions: list[dict]) -> None:
    want = expected_aggregates(segments, partitions)
    got = aggregates(seg_df, part_df)
    keys = {"replica_stats": lambda r: (r["broker_id"], r["log_dir"], r["dir_name"]), "topic_stats": lambda r: r["topic"],
            "broker_stats": lambda r: r["broker_id"], "log_dir_stats": lambda r: (r["broker_id"], r["log_dir"])}
    for name, expected in want.items():
        rows = {keys[name](r): r for r in spark_rows(got[name])}
        assert set(rows) == set(expected), f"{name}: keys {sorted(map(str, rows))} != {sorted(map(str, expected))}"
        for k, exp in expected.items():
            # every column the engine gives is modelled here: a new column fails until it is
            assert set(rows[k]) == set(exp), f"{name}: columns {sorted(rows[k])} != modelled {sorted(exp)}"
            assert rows[k] == exp, f"{name}[{k}]: " + ", ".join(
                f"{c}: {rows[k][c]!r} != {exp[c]!r}" for c in exp if rows[k][c] != exp[c])


# ---------------------------------------------------------------------------------------
# (a) real broker dirs
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", DEPTHS)
def test_real_broker_dirs_same_rows_in_process_spark_and_manifest(spark, tmp_path, depth):  # noqa: F811
    assert LOG_DIRS, "no real log dirs"
    local = scan_log_dirs(LOG_DIRS, depth)
    assert local.segments, "the real fixtures hold segments"
    want_seg = norm(local.segments, SEGMENT_SCHEMA, SEGMENT_KEY)
    want_part = norm(local.partitions, PARTITION_SCHEMA, PARTITION_KEY)

    scan = scan_dataframes(spark, LOG_DIRS, depth)
    try:
        assert_same("spark segments", norm(spark_rows(scan.segments), SEGMENT_SCHEMA, SEGMENT_KEY), want_seg)
        assert_same("spark partitions", norm(spark_rows(scan.partitions), PARTITION_SCHEMA, PARTITION_KEY), want_part)
        assert info_view(scan.log_dirs) == info_view(local.log_dirs)
        check_aggregates(scan.segments, scan.partitions, local.segments, local.partitions)
    finally:
        scan.unpersist()

    res = collect_manifest(LOG_DIRS, tmp_path / "manifest", depth)
    assert res.segments == len(local.segments) and res.partitions == len(local.partitions)
    assert not any(p.name.startswith(".") for p in (tmp_path / "manifest").iterdir()), "temporary files left behind"
    man = read_manifests(spark, [str(tmp_path / "manifest")])
    assert_same("manifest segments", norm(spark_rows(man.segments), SEGMENT_SCHEMA, SEGMENT_KEY), want_seg)
    assert_same("manifest partitions", norm(spark_rows(man.partitions), PARTITION_SCHEMA, PARTITION_KEY), want_part)
    assert info_view(man.log_dirs) == info_view(local.log_dirs)
    meta = pq.read_schema(tmp_path / "manifest" / "segments.parquet").metadata
    assert meta[b"kafka_audit.depth"] == depth.encode() and int(meta[b"kafka_audit.collected_at_ms"]) > 0


def test_collect_refuses_out_inside_a_log_dir(tmp_path):
    log_dir = tmp_path / "copy" / "kafka-logs"
    shutil.copytree(LOG_DIRS[0], log_dir)
    before = sorted(str(p.relative_to(log_dir)) for p in log_dir.rglob("*"))
    for out in (log_dir, log_dir / "manifest", log_dir / LOG_DIRS[0].name / ".." / "x"):
        proc = subprocess.run([PY, "-m", "auditor.cli", "collect", "--out", str(out), str(log_dir)],
                              capture_output=True, text=True, cwd=REPO)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "inside the scanned log dir" in proc.stderr, proc.stderr
    assert sorted(str(p.relative_to(log_dir)) for p in log_dir.rglob("*")) == before


def test_cli_spark_engine_json_equals_local(tmp_path):
    """`scan --engine spark --json` (collects: small output) prints the local engine's document."""
    docs = {}
    for engine in ("local", "spark"):
        proc = subprocess.run([PY, "-m", "auditor.cli", "scan", "--engine", engine, "--depth", "headers", "--json",
                               "--conf", "spark.sql.shuffle.partitions=2", *map(str, LOG_DIRS)],
                              capture_output=True, text=True, cwd=REPO, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        docs[engine] = json.loads(proc.stdout)
    for doc in docs.values():
        doc.pop("as_of_ms")
        doc.pop("as_of_utc")
        for d in doc["log_dirs"]:  # the filesystem under it, statted at each scan (auditor.scan.filesystem)
            for volatile in FS_FIELDS_OF_THE_MOMENT:
                d.pop(volatile, None)
        doc.pop("engine", None)
        for s in doc["segments"]:
            s.pop("scanned_at_ms")
            s.pop("scanned_at_utc")
    assert docs["spark"] == docs["local"]


# ---------------------------------------------------------------------------------------
# (b) a real 3-broker cluster, a real Spark standalone cluster
# ---------------------------------------------------------------------------------------


def _produce_cluster_data(kc) -> None:
    kc.create_topic("orders", partitions=4, replication_factor=3)
    kc.create_topic("skewed", partitions=3, replication_factor=3)
    base = 1_700_000_000_000
    # ~2 MiB of incompressible values per 'orders' partition: 1 MiB segments roll for real; codecs mixed.
    for i, codec in enumerate(("none", "zstd", "gzip", "lz4")):
        kc.produce("orders", [dict(key=f"k{j}", value=os.urandom(600), timestamp=base + 1000 * j, partition=p)
                              for p in range(4) for j in range(i * 800, (i + 1) * 800)], compression=codec)
    # one big partition, two small ones, with older timestamps on the small ones
    kc.produce("skewed", [dict(key=None, value=os.urandom(600), timestamp=base + j, partition=0) for j in range(4000)])
    kc.produce("skewed", [dict(key=None, value=f"{j:08d}", timestamp=base - 86_400_000 + j, partition=1 + j % 2)
                          for j in range(200)], compression="snappy")


@pytest.fixture(scope="module")
def cluster_snapshot(kafka_cluster_factory, tmp_path_factory):
    # the records are from 2023: without log.retention.ms=-1 the retention check (30 s after each
    # broker starts) could delete them before kc.stop() on a loaded machine
    kc = kafka_cluster_factory(brokers=3, log_dirs_per_broker=2, broker_config={"log.retention.ms": "-1"})
    _produce_cluster_data(kc)
    kc.stop(require_clean=True)  # a quiet, flushed state; the snapshot is what every engine reads
    snap = tmp_path_factory.mktemp("snapshot")
    log_dirs = {}
    for node_id in sorted(kc.nodes):
        for d in kc.log_dirs(node_id):
            target = snap / f"node-{node_id}" / d.name
            shutil.copytree(d, target, symlinks=True)  # copy2: mtimes preserved
            log_dirs.setdefault(node_id, []).append(target)
    return log_dirs


# 3 brokers, Spark local, 3 collect processes and a standalone Spark job: at load 30 the fixture and
# the test took more than the suite's 900 s per test
@pytest.mark.timeout(1800)
def test_cluster_snapshot_same_tables_everywhere(spark, cluster_snapshot, tmp_path):  # noqa: F811
    per_broker = cluster_snapshot
    all_dirs = [d for dirs in per_broker.values() for d in dirs]
    depth = "headers"
    timings = {}

    t = time.perf_counter()
    local = scan_log_dirs(all_dirs, depth)
    timings["in-process"] = time.perf_counter() - t
    want_seg = norm(local.segments, SEGMENT_SCHEMA, SEGMENT_KEY)
    want_part = norm(local.partitions, PARTITION_SCHEMA, PARTITION_KEY)
    assert {s["broker_id"] for s in local.segments} == {1, 2, 3}
    orders = {(s["broker_id"], s["partition"]) for s in local.segments if s["topic"] == "orders"}
    assert len(orders) == 12, "RF 3 x 4 partitions on 3 brokers"
    assert sum(1 for s in local.segments if s["topic"] == "orders") > 12, "segments rolled"

    # Spark local
    t = time.perf_counter()
    scan = scan_dataframes(spark, all_dirs, depth)
    try:
        assert_same("spark local segments", norm(spark_rows(scan.segments), SEGMENT_SCHEMA, SEGMENT_KEY), want_seg)
        assert_same("spark local partitions", norm(spark_rows(scan.partitions), PARTITION_SCHEMA, PARTITION_KEY), want_part)
        assert info_view(scan.log_dirs) == info_view(local.log_dirs)
        timings["spark local"] = time.perf_counter() - t
        check_aggregates(scan.segments, scan.partitions, local.segments, local.partitions)
    finally:
        scan.unpersist()

    # per-broker manifests, written by the CLI in a process that must not load pyspark
    manifests = tmp_path / "manifests"
    for node_id, dirs in per_broker.items():
        code = ("import sys; from auditor.cli import main; rc = main(sys.argv[1:]); "
                "assert 'pyspark' not in sys.modules and 'py4j' not in sys.modules, 'collect imported Spark'; sys.exit(rc)")
        proc = subprocess.run([PY, "-c", code, "collect", "--nice", "--depth", depth, "--out",
                               str(manifests / f"broker-{node_id}"), *map(str, dirs)],
                              capture_output=True, text=True, cwd=REPO)
        assert proc.returncode == 0, proc.stderr
        assert "wrote manifest" in proc.stderr and "priority: cpu: nice 19" in proc.stderr, proc.stderr
        infos = pq.read_table(manifests / f"broker-{node_id}" / LOG_DIRS_FILE).to_pylist()
        assert {i["broker_id"] for i in infos} == {node_id} and all(i["collected_at_ms"] > 0 for i in infos)
    man = read_manifests(spark, [str(manifests / "broker-*")])
    assert_same("manifest segments", norm(spark_rows(man.segments), SEGMENT_SCHEMA, SEGMENT_KEY), want_seg)
    assert_same("manifest partitions", norm(spark_rows(man.partitions), PARTITION_SCHEMA, PARTITION_KEY), want_part)
    assert info_view(man.log_dirs) == info_view(local.log_dirs)
    check_aggregates(man.segments, man.partitions, local.segments, local.partitions)

    # a real Spark standalone cluster, through the CLI (its own driver process)
    cluster = StandaloneSpark(tmp_path / "spark-standalone").start()
    try:
        out = tmp_path / "standalone-out"
        t = time.perf_counter()
        try:
            proc = subprocess.run(
                [PY, "-m", "auditor.cli", "scan", "--engine", "spark", "--master", cluster.url, "--depth", depth,
                 "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=1",
                 "--parquet", str(out), *map(str, all_dirs)],
                capture_output=True, text=True, cwd=REPO, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
                timeout=600)
        except subprocess.TimeoutExpired as e:
            # what the job was waiting for: the CLI's own log, the master's view, the executors' logs
            said = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise AssertionError(f"scan --engine spark on the standalone cluster ran over {e.timeout} s "
                                 f"(load {os.getloadavg()}):\n{said[-4000:]}\n{cluster.diagnostics()}") from None
        timings["spark standalone (CLI, incl. JVM start)"] = time.perf_counter() - t
        assert proc.returncode == 0, proc.stderr[-4000:] + "\n" + cluster.diagnostics()
        # the CLI has exited: its application is (or within moments becomes) a completed one of
        # the master (two state() reads could each miss it while it moves from active to completed)
        apps = cluster.completed_apps(at_least=1)
        assert apps, f"the job did not run on the standalone master: {cluster.state()}"
    finally:
        cluster.stop()
    assert_same("standalone segments", norm(parquet_rows(out / "segments.parquet"), SEGMENT_SCHEMA, SEGMENT_KEY), want_seg)
    assert_same("standalone partitions", norm(parquet_rows(out / "partitions.parquet"), PARTITION_SCHEMA, PARTITION_KEY), want_part)
    assert info_view(json.loads((out / "log_dirs.json").read_text())) == info_view(local.log_dirs)
    topic_stats = {r["topic"]: r for r in parquet_rows(out / "topic_stats.parquet")}
    assert topic_stats["orders"]["partitions"] == 4 and topic_stats["orders"]["min_replicas"] == 3
    assert topic_stats["skewed"]["max_partition_size_bytes"] > 5 * topic_stats["skewed"]["median_partition_size_bytes"]
    print("timings (s):", {k: round(v, 2) for k, v in timings.items()}, f"segments={len(want_seg)}")
