"""The real-Kafka harness itself: jars, clusters, client round-trips, ListOffsets, segment
rolls, and DumpLogSegments (the oracle) parsed on live segments and on the real fixtures."""

from __future__ import annotations

import ast
import hashlib
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.kafka import REPO_ROOT, ROLL_TOPIC_CONFIG, KafkaHarnessError, wait_until
from harness.scenarios import CODECS, populate_conformance_data
from harness.realdata import BROKER_DIRS, REAL, RECORD_SETS

# DumpLogSegments on record sets and broker dirs: 5 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = pytest.mark.schedule_first(cpu_s=5)

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
#: The tests' records are years old (T0): with the default retention.ms (7 days) the broker's
#: retention check (first run 30 s after start, then every 5 min) deletes them under a running
#: test (seen here at load 14: the 3-broker test consumed 1 record of 31). Keep them.
KEEP_OLD_RECORDS = {"log.retention.ms": "-1"}


def _tree_state(root: Path) -> dict[str, tuple[int, int, str]]:
    """name -> (size, mtime_ns, sha256) for every file under root."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns,
                                             hashlib.sha256(p.read_bytes()).hexdigest())
    return out


# --------------------------------------------------------------------------- jars
@pytest.mark.recorded
def test_kafka_jars_script_is_idempotent_and_complete(kafka_classpath):
    jars = {Path(j).name for j in kafka_classpath.split(":")}
    assert "kafka_2.13-4.2.1.jar" in jars and "kafka-clients-4.2.1.jar" in jars
    assert any(j.startswith("log4j-slf4j-impl-") for j in jars), jars
    assert any(j.startswith("slf4j-api-1.7") for j in jars), jars
    cp_file = REPO_ROOT / ".cache/kafka/4.2.1/classpath.txt"
    before = cp_file.stat().st_mtime_ns
    t = time.monotonic()
    out = subprocess.run(["bash", "scripts/kafka-jars.sh"], cwd=REPO_ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    # a no-op: Maven not run, the classpath file not rewritten (the time bound is generous: the
    # check takes ~50 ms, Maven many seconds, and a loaded 2-core machine stalls processes)
    assert time.monotonic() - t < 10.0, "second run must be a fast no-op"
    assert cp_file.stat().st_mtime_ns == before, "second run rewrote the classpath"
    assert out.endswith(".cache/kafka/4.2.1/classpath.txt")


# ------------------------------------------------------------------ one broker
@pytest.fixture(scope="module")
def single(kafka_cluster_factory):
    """1 broker (combined broker+controller), 2 log dirs."""
    return kafka_cluster_factory(brokers=1, log_dirs_per_broker=2, broker_config=KEEP_OLD_RECORDS)


@pytest.mark.live
def test_single_broker_layout_and_logging(single):
    dirs = single.log_dirs(1)
    assert len(dirs) == 2
    for d in dirs:
        props = (d / "meta.properties").read_text()
        assert f"cluster.id={single.cluster_id}" in props and "node.id=1" in props
    # log4j2 via log4j-slf4j-impl: the broker logs to its file, not stdout. The broker answers
    # metadata requests a moment before it logs that it started: wait for the line.
    deadline = time.monotonic() + 30
    while True:
        log = single.nodes[1].server_log.read_text()
        if "Kafka Server started" in log or "started (kafka.server" in log or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert "Kafka Server started" in log or "started (kafka.server" in log, log[-2000:]
    assert (single.nodes[1].dir / "stdout.log").stat().st_size < 10_000


@pytest.mark.live
def test_round_trip_every_codec_across_log_dirs(single):
    single.create_topic("rt", partitions=4)
    placed = {single.partition_dir("rt", p).parent for p in range(4)}
    assert placed == set(single.log_dirs(1)), "4 partitions should spread over both log dirs"
    sent = []
    for i, codec in enumerate(CODECS):
        recs = [(f"k{i}-{j}", f"{codec}-{j}", T0 + 1000 * (10 * i + j)) for j in range(10)]
        single.produce("rt", recs, compression=codec, partition=i % 4)
        sent += recs
    got = single.consume("rt")
    assert sorted((m.key().decode(), m.value().decode(), m.timestamp()[1]) for m in got) == sorted(sent)


@pytest.mark.live
def test_offsets_for_times_is_the_brokers_answer(single):
    single.create_topic("oft", partitions=1)
    single.produce("oft", [(None, f"v{i}", T0 + i * 1000) for i in range(5)], partition=0)
    assert single.offsets_for_times("oft", 0, T0 - 10**9) == 0
    assert single.offsets_for_times("oft", 0, T0 + 2500) == 3
    assert single.offsets_for_times("oft", 0, T0 + 10**9) == -1      # after the newest: -1
    assert single.list_offsets("oft", 0, T0 + 2000)[:2] == (2, T0 + 2000)
    assert single.list_offsets("oft", 0, "max_timestamp")[:2] == (4, T0 + 4000)
    assert single.list_offsets("oft", 0, "latest")[0] == 5


@pytest.mark.live
def test_dumplog_on_live_segments_is_read_only_and_parsed(single, dump_log_segments):
    single.create_topic("live", partitions=1, config={"index.interval.bytes": "256"})
    # Recent timestamps: the control batches carry the broker's clock, and a batch more than
    # segment.ms (7 days) after the segment's first timestamp would roll the segment (§4).
    t0 = int(time.time() * 1000) - 60_000
    recs = [(f"k{i}", "x" * 100, t0 + i) for i in range(60)]
    # Batches cut by count only: with a short linger.ms a stalled producer loop (loaded machine)
    # sends a batch of 1 or 2 records; with a long one the batch goes at 3 records or at flush.
    single.produce("live", recs[:30], compression="gzip", partition=0, batch_num_messages=3,
                   linger_ms=10_000)
    single.produce("live", recs[30:], compression="none", partition=0, batch_num_messages=7,
                   linger_ms=10_000)
    single.transaction("live", [("t", "aborted", t0 + 100)], commit=False, partition=0)
    single.transaction("live", [("t", "committed", t0 + 101)], commit=True, partition=0)
    pdir = single.partition_dir("live", 0)
    before = _tree_state(pdir)
    idx = pdir / f"{0:020d}.index"
    assert idx.stat().st_size == 10 * 1024 * 1024          # active segment: preallocated
    assert (pdir / f"{0:020d}.timeindex").stat().st_size == 10 * 1024 * 1024 - 4

    res = dump_log_segments.dump_dir(pdir)
    assert _tree_state(pdir) == before, "DumpLogSegments must not modify a live partition dir"
    log = res[pdir / f"{0:020d}.log"]
    assert log.unparsed == [] and log.error is None and log.log_start_offset == 0
    data = [r for r in log.records if r.control_type is None]
    assert [(r.offset, r.timestamp) for r in data[:60]] == [(i, t0 + i) for i in range(60)]
    assert all(r.timestamp_type == "CreateTime" and r.key_size == len(f"k{r.offset}") and
               r.value_size == 100 for r in data[:60])
    # librdkafka caps a batch at batch_num_messages but may send fewer (the first record can
    # leave alone while the producer still waits for metadata): the batches' sizes are
    # DumpLogSegments' own, and only the cap and the coverage are the test's.
    gzip_batches = [b for b in log.batches if b.compresscodec == "gzip"]
    assert gzip_batches == log.batches[:len(gzip_batches)], "the gzip records were produced first"
    assert all(1 <= b.count <= 3 for b in gzip_batches), [b.count for b in gzip_batches]
    assert [(b.base_offset, b.last_offset) for b in gzip_batches] == [
        (b.last_offset - b.count + 1, b.last_offset) for b in gzip_batches]
    covered = [o for b in gzip_batches for o in range(b.base_offset, b.last_offset + 1)]
    assert covered == list(range(30)), covered
    assert len(gzip_batches) >= 10
    assert all(b.is_valid and b.magic == 2 for b in log.batches)
    # positions chain: each batch starts where the previous ended
    assert all(b.position == a.position + a.size for a, b in zip(log.batches, log.batches[1:]))
    markers = [r.control_type for r in log.records if r.control_type]
    assert markers == ["ABORT", "COMMIT"]
    ctrl = [b for b in log.batches if b.is_control]
    assert len(ctrl) == 2 and all(b.is_transactional for b in ctrl)
    txn = res[pdir / f"{0:020d}.txnindex"]
    assert [(t["first_offset"], t["last_offset"]) for t in txn.aborted_txns] == [(60, 61)]
    index = res[idx]
    assert len(index.index_entries) > 5 and index.unparsed == []
    # every offset-index entry points at a batch start whose last offset is the entry's
    starts = {b.position: b.last_offset for b in log.batches}
    # DumpLogSegments reads the active (preallocated) index from entry 0 and stops at the
    # first later all-zero entry; the entries it prints are all real here (index.interval 256).
    for off, pos in index.index_entries:
        assert starts.get(pos) == off, (off, pos)
    assert index.index_mismatches == []
    tindex = res[pdir / f"{0:020d}.timeindex"]
    assert tindex.time_index_entries and tindex.time_index_mismatches == []
    ts = [t for t, _ in tindex.time_index_entries]
    assert ts == sorted(set(ts))


@pytest.mark.live
def test_many_segments_recipe(single, dump_log_segments):
    single.create_topic("rolled", partitions=1, config=ROLL_TOPIC_CONFIG)
    firsts = single.roll_segments("rolled", 0, segments=15, records_per_segment=4,
                                  base_timestamp_ms=T0)
    logs = single.segments("rolled", 0)
    assert len(logs) == 15, [p.name for p in logs]
    assert [int(p.name.split(".")[0]) for p in logs] == [4 * i for i in range(15)]
    res = dump_log_segments.dump(logs)
    for i, p in enumerate(logs):
        recs = res[p].records
        assert [r.timestamp for r in recs] == [firsts[i] + j for j in range(4)]


# ----------------------------------------------------------------- three brokers
@pytest.mark.live
def test_three_broker_cluster_replicates_and_restarts(kafka_cluster_factory):
    kc = kafka_cluster_factory(brokers=3, broker_config=KEEP_OLD_RECORDS)
    md = kc.admin().list_topics(timeout=10)
    assert set(md.brokers) == {1, 2, 3}
    kc.create_topic("r3", partitions=3, replication_factor=3)
    kc.produce("r3", [(f"k{i}", f"v{i}", T0 + i) for i in range(30)], compression="lz4")
    for p in range(3):
        assert set(kc.partition_dirs("r3", p)) == {1, 2, 3}
    assert len(kc.consume("r3")) == 30
    # SIGTERM -> controlled shutdown; the JVM then exits 143 (128 + SIGTERM) after its hooks
    assert kc.stop_broker(3) in (0, 143)
    assert kc.nodes[3].proc is None
    kc.start_broker(3)
    assert set(kc.admin().list_topics(timeout=10).brokers) == {1, 2, 3}
    kc.produce("r3", [("after", "restart", T0 + 100)], partition=0)
    assert len(kc.consume("r3")) == 31
    # a broker that does not answer SIGTERM (stopped with SIGSTOP) is SIGKILLed after the timeout:
    # silently by default, an error where the caller needs cleanly closed files
    os.killpg(kc.nodes[3].proc.pid, signal.SIGSTOP)
    with pytest.raises(KafkaHarnessError, match="node 3 did not exit within 3 s of SIGTERM and was SIGKILLed"):
        kc.stop_broker(3, timeout_s=3, require_clean=True)
    assert kc.nodes[3].proc is None
    os.killpg(kc.nodes[2].proc.pid, signal.SIGSTOP)
    assert kc.stop_broker(2, timeout_s=3) == -signal.SIGKILL


# ----------------------------------------------------------------- conformance data
@pytest.mark.live
def test_conformance_scenarios(kafka_cluster_factory, dump_log_segments):
    kc = kafka_cluster_factory(brokers=1, log_dirs_per_broker=2)
    t = time.monotonic()  # the data, not the JVM's start (slow on a loaded machine)
    made = populate_conformance_data(kc)
    assert time.monotonic() - t < 120, "conformance data must take under 2 minutes"
    topics = made["topics"]
    seen_codecs: set[str] = set()
    for name, info in topics.items():
        for p in range(info["partitions"]):
            res = dump_log_segments.dump_dir(kc.partition_dir(name, p))
            logs = [f for f in res if f.kind == "log"]
            for f in res:
                assert f.unparsed == [] and f.error is None, (name, f.path, f.unparsed[:3], f.error)
            batches = [b for f in logs for b in f.batches]
            data = [r for f in logs for r in f.records if r.control_type is None]
            seen_codecs |= {b.compresscodec for b in batches}
            kind = info["kind"]
            if kind == "compacted":
                assert len(data) == info["records_after_cleaning"] < info["records"][p]
                tomb = [r for r in data if r.value_size == -1]
                assert len(tomb) == info["tombstones"]
                assert any(b.delete_horizon_ms is not None for b in batches), \
                    "cleaned tombstones carry a delete horizon (KIP-534)"
            else:
                assert len(data) == info["records"][p], (name, p)
            if kind == "codec":
                assert {b.compresscodec for b in batches} == {info["codec"]}
                assert len({b.count for b in batches}) >= 3, "mixed batch sizes"
            if kind == "transactions":
                assert sum(b.is_control for b in batches) == info["control_batches"]
                assert sum(len(f.aborted_txns) for f in res if f.kind == "txnindex") == info["aborted_txns"]
            if kind == "logappendtime":
                lo, hi = info["append_window_ms"]
                assert {b.timestamp_type for b in batches} == {"LogAppendTime"}
                assert all(lo - 5000 <= r.timestamp <= hi + 5000 for r in data)
            if kind == "many-segments":
                assert len(logs) >= 10 and len(logs) == info["segments"]
    assert seen_codecs >= set(CODECS)
    # Active segments of a running broker: preallocated indexes with a zero tail.
    active = kc.segments(f"{made['prefix']}-codec-none", 0)[-1]
    assert active.with_suffix(".index").stat().st_size == 10 * 1024 * 1024


@pytest.mark.live
def test_dumplog_zero_entry_artefact_on_active_index(single, dump_log_segments):
    """An active segment with data but no index entries yet: DumpLogSegments prints the
    all-zero entry 0 of the preallocated index and flags it; the harness marks it."""
    single.create_topic("tiny", partitions=1)
    # one batch of two records (the mismatches below are entry 0 against that batch's last offset
    # 1): a long linger.ms, so a producer loop stalled between the two records cannot split them
    single.produce("tiny", [("a", "b", None), ("c", "d", None)], partition=0, linger_ms=10_000)
    pdir = single.partition_dir("tiny", 0)
    res = dump_log_segments.dump_dir(pdir)
    idx = res[pdir / f"{0:020d}.index"]
    tidx = res[pdir / f"{0:020d}.timeindex"]
    assert idx.zero_entry_0 and idx.index_entries == [(0, 0)] and idx.real_index_entries == []
    assert idx.index_mismatches == [(0, 1)]
    assert tidx.zero_entry_0 and tidx.time_index_entries == [(0, 0)]
    assert tidx.time_index_offsets_not_found == [(0, 1)]
    # Empty active segment: the tool dies on the index (NoSuchElementException); the harness
    # records that on the file and still dumps the others.
    single.create_topic("vacant", partitions=1)
    vdir = single.partition_dir("vacant", 0)
    # partition_dir waits for the .log; the broker creates the segment's index files beside it
    # a moment later (or in the same moment): wait for the one this test reads too.
    vindex = vdir / f"{0:020d}.index"
    wait_until(vindex.exists, 30, f"the broker to create {vindex}", interval_s=0.05)
    res = dump_log_segments.dump_dir(vdir)
    assert "NoSuchElementException" in res[vdir / f"{0:020d}.index"].error
    assert res[vdir / f"{0:020d}.log"].batches == [] and res[vdir / f"{0:020d}.log"].error is None


# --------------------------------------------------------------- real fixtures
def _expected() -> dict[str, dict]:
    rx = re.compile(r"^(\S+) size (\d+) batches (\d+) magic (\{.*?\}) codec (\{.*?\}) txn (\d+) "
                    r"ctrl (\d+) offs (\(.*?\)) ts .*? crc_bad (\d+) trail (\d+) ")
    out = {}
    for line in (REAL / "EXPECTED.txt").read_text().splitlines():
        m = rx.match(line)
        if m:
            out[m.group(1)] = dict(batches=int(m.group(3)), magic=ast.literal_eval(m.group(4)),
                                   codec=ast.literal_eval(m.group(5)), txn=int(m.group(6)),
                                   ctrl=int(m.group(7)), offs=ast.literal_eval(m.group(8)),
                                   crc_bad=int(m.group(9)), trail=int(m.group(10)))
    return out


def _agrees(f, exp: dict, rel: str) -> None:
    b = f.batches
    assert len(b) == exp["batches"], rel
    assert dict(Counter(x.magic for x in b)) == exp["magic"], rel
    assert dict(Counter(x.compresscodec for x in b)) == exp["codec"], rel
    assert sum(bool(x.is_transactional) for x in b) == exp["txn"], rel
    assert sum(bool(x.is_control) for x in b) == exp["ctrl"], rel
    assert sum(not x.is_valid for x in b) == exp["crc_bad"], rel
    assert f.invalid_trailing_bytes == exp["trail"], rel
    if b:
        assert max(x.last_offset for x in b) == exp["offs"][1], rel


@pytest.mark.recorded
def test_dumplog_parses_real_broker_dirs_in_place(dump_log_segments):
    before = _tree_state(BROKER_DIRS)
    files = sorted(p for p in BROKER_DIRS.rglob("*") if p.is_file()
                   and p.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"))
    res = dump_log_segments.dump(files)
    assert _tree_state(BROKER_DIRS) == before
    assert res.jvm_runs == 1
    expected = _expected()
    n_logs = 0
    for f in res:
        assert f.unparsed == [] and f.error is None, (f.path, f.unparsed[:3], f.error)
        if f.kind == "log":
            rel = str(f.path.relative_to(REAL))
            _agrees(f, expected[rel], rel)
            n_logs += 1
    assert n_logs == sum(1 for k in expected if k.startswith("broker-dirs/"))
    co = res[BROKER_DIRS / "kafka-2018-v2/kafka-logs/__consumer_offsets-28/00000000000000000000.index"]
    assert len(co.index_entries) == 254
    tco = res[BROKER_DIRS / "kafka-2018-v2/kafka-logs/__consumer_offsets-28/00000000000000000000.timeindex"]
    assert len(tco.time_index_entries) == 258


@pytest.mark.recorded
def test_dumplog_parses_real_record_sets(dump_log_segments):
    expected = _expected()
    bins = sorted(RECORD_SETS.rglob("*.bin"))
    dumped = dump_log_segments.dump_record_sets(bins)
    legacy_seen = set()
    for p, f in zip(bins, dumped):
        rel = str(p.relative_to(REAL))
        assert f.unparsed == [], (rel, f.unparsed[:3])
        _agrees(f, expected[rel], rel)
        if f.error is None:
            for b in f.batches:
                if b.magic < 2:
                    legacy_seen.add((b.magic, b.timestamp_type))
                    assert b.base_offset is None
        else:
            # kafkajs v0_recordbatch_zstd: the batch header says codec none but the record
            # bytes are not plain records; Kafka's deep iteration throws.
            assert rel.endswith("v0_recordbatch_zstd.bin"), (rel, f.error)
    assert (0, "NoTimestampType") in legacy_seen and (1, "CreateTime") in legacy_seen
    rust = dumped[[p.name for p in bins].index(
        "fetch1.mytopic.1p.gzip.kafka.0821.records.bin")]
    assert len(rust.records) == 42 and all(r.timestamp == -1 and r.is_valid for r in rust.records)


@pytest.mark.recorded
def test_dumplog_never_creates_a_missing_index(tmp_path, dump_log_segments):
    """Kafka's AbstractIndex calls createNewFile() on the .index while dumping a .timeindex;
    the harness stages such files elsewhere so nothing appears in the dumped directory."""
    import shutil
    src = BROKER_DIRS / "kafka-2018-v2/kafka-logs/debug_topic-0"
    for name in ("00000000000000000000.log", "00000000000000000000.timeindex"):
        shutil.copyfile(src / name, tmp_path / name)
    before = sorted(p.name for p in tmp_path.iterdir())
    res = dump_log_segments.dump([tmp_path / "00000000000000000000.timeindex"])
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    f = res[tmp_path / "00000000000000000000.timeindex"]
    assert f.error is None and len(f.time_index_entries) == 2


@pytest.mark.recorded
def test_class_data_archive_changes_no_byte_of_the_tools_output(kafka_classpath_str):
    """DumpLogSegments started from the class-data archive (harness/jvm.py) prints what a plain JVM
    prints, stdout and stderr byte for byte, on real segments with --deep-iteration --print-data-log;
    the archive is then on disk, so the runs after the first use it."""
    from harness.dumplog import MAIN_CLASS_4_0_TO_4_2
    from harness.jvm import archive_path, run_tool

    # .log files only: dumping an index in place may create its missing twin (harness/dumplog.py stages those)
    files = sorted(str(p) for p in BROKER_DIRS.rglob("*.log") if p.stat().st_size)[:10]
    assert len(files) >= 6, files
    args = ["--deep-iteration", "--print-data-log", "--files", ",".join(files)]
    had_archive = archive_path(kafka_classpath_str, MAIN_CLASS_4_0_TO_4_2).is_file()
    first = run_tool(kafka_classpath_str, MAIN_CLASS_4_0_TO_4_2, args, timeout_s=300)  # writes the archive if none
    # with the archive already there (a warm cache) the first run is already a run from it: a second is the same run
    archived = first if had_archive else run_tool(kafka_classpath_str, MAIN_CLASS_4_0_TO_4_2, args, timeout_s=300)
    plain = run_tool(kafka_classpath_str, MAIN_CLASS_4_0_TO_4_2, args, timeout_s=300, class_data=False)
    assert archive_path(kafka_classpath_str, MAIN_CLASS_4_0_TO_4_2).is_file()
    assert "-XX:SharedArchiveFile=" + str(archive_path(kafka_classpath_str, MAIN_CLASS_4_0_TO_4_2)) in archived.args
    assert plain.returncode == archived.returncode == first.returncode == 0, plain.stderr[-2000:]
    assert plain.stdout.count(b"Dumping ") == len(files) and plain.stdout.count(b"| offset: ") > 100
    assert archived.stdout == plain.stdout and first.stdout == plain.stdout
    assert archived.stderr == plain.stderr and first.stderr == plain.stderr
