"""replay-check without pandas: replay.safety on plain row dicts gives the very findings the engines'
path (pandas DataFrames per partition, ``run_partition_checks``) gives; the group resets reuse the
replay search where it is the same lookup and equal a fresh search everywhere; the command imports
no pandas, matplotlib, Great Expectations or Spark.

On the real broker dirs of ../shared/fixtures/real (every partition, targets from before the
oldest record to after the newest) and on damaged rows: a second replica whose files are not
there, a replica without broker id or partition row, a deleted segment file, a leader-epoch
entry above the log start offset.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from auditor import replay
from auditor.check_runner import GROUP, as_frame, replay_safety_on_rows, run_partition_checks
from auditor.replay import groups as rg, modern as replay_modern, views as replay_views
from auditor.replay.rows import rows_from_log_dirs
from auditor.schema import PARTITION_SCHEMA, SEGMENT_SCHEMA
from checks.framework.base import AuditContext
from checks.framework.config import Config
from harness.realdata import LOG_DIRS

# replay-check subprocesses, pandas path: 9 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.recorded, pytest.mark.schedule_first(cpu_s=9)]

ROOT = Path(__file__).resolve().parents[1]
NOW_MS = 1_900_000_000_000


def _rows(log_dir: Path) -> tuple[list[dict], list[dict]]:
    rows = rows_from_log_dirs([str(log_dir)], _topics(log_dir))
    return rows.segments, rows.partitions


def _topics(log_dir: Path) -> set[str]:
    return {p.name.rpartition("-")[0] for p in log_dir.iterdir() if p.is_dir()}


def _targets(segments: list[dict]) -> list[int]:
    """Before the oldest record, every segment's oldest and newest timestamp and mtime, after all."""
    stamps = set()
    for r in segments:
        for key in ("min_batch_timestamp_ms", "max_timestamp_ms", "log_mtime_ms"):
            if r.get(key) is not None:
                stamps |= {r[key] - 1, r[key], r[key] + 1}
    ordered = sorted(stamps)
    step = max(len(ordered) // 12, 1)
    return [ordered[0] - 86_400_000] + ordered[::step] + [ordered[-1] + 86_400_000]


def _ctx(target: int) -> AuditContext:
    return AuditContext(as_of_ms=NOW_MS, config=Config(None), replay_at_ms=target, replay_topics=None)


def _int(value):
    return None if value is None or (isinstance(value, float) and value != value) else int(value)


def _pandas_predict_replicas(topic, partition, segments, partitions, ctx, *, search_files):
    """The oracle: auditor.replay.predict_replicas as it was on pandas (masks, groupby, iloc) before
    it read plain rows (commit 2b29fe3), kept here verbatim but for the names it imports."""
    replicas = []
    if segments is not None and len(segments):
        live = segments[segments["dir_kind"] == "live"]
        for (broker, log_dir), rows in live.groupby(["broker_id", "log_dir"], dropna=False, sort=True):
            views = replay.segment_views(rows.to_dict("records"))
            if views:
                replicas.append((_int(broker), log_dir, views))
    out = []
    for broker, log_dir, views in replicas:
        prow = None
        if partitions is not None and len(partitions):
            match = partitions[(partitions["broker_id"] == broker) & (partitions["log_dir"] == log_dir)
                               & (partitions["dir_kind"] == "live")]
            prow = match.iloc[0].to_dict() if len(match) else None
        lso = _int(prow.get("log_start_offset")) if prow else None
        start = replay.log_start(views, lso if prow and prow.get("log_start_offset_source") == "checkpoint" else None,
                                 replay.epoch_starts(prow))
        if start.source == replay.LOG_START_LEADER_EPOCH:
            lso = start.offset
        pred = replay.predict(views, ctx.replay_at_ms, log_start_offset=lso,
                              log_end_offset=_int(prow.get("log_end_offset")) if prow else None,
                              high_watermark=_int(prow.get("high_watermark")) if prow else None,
                              as_of_ms=ctx.as_of_ms, read_files=search_files,
                              remote=ctx.remote_partition(topic, partition, prow.get("topic_id") if prow else None),
                              leader_epochs=replay.epoch_starts(prow),
                              remote_storage_dir=ctx.remote_storage_dir if search_files else None)
        pred.log_start = start
        out.append(replay.ReplicaPrediction(broker, log_dir, views, pred))
    out.sort(key=lambda r: (-(r.prediction.log_end_offset or -1), r.broker_id if r.broker_id is not None else 1 << 30))
    return out


def _via_frames(segments: list[dict], partitions: list[dict], ctx) -> list[dict]:
    """What replay-check did before: Arrow-typed pandas frames, grouped, run_partition_checks, the
    replay search on pandas (the oracle above)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(replay, "predict_replicas", _pandas_predict_replicas)
        return _via_frames_now(segments, partitions, ctx)


def _via_frames_now(segments: list[dict], partitions: list[dict], ctx) -> list[dict]:
    seg, part = as_frame(segments, SEGMENT_SCHEMA), as_frame(partitions, PARTITION_SCHEMA)
    keys = sorted({(r["topic"], r["partition"]) for r in partitions} | {(r["topic"], r["partition"]) for r in segments})
    seg_groups = dict(iter(seg.groupby(GROUP))) if len(seg) else {}
    part_groups = dict(iter(part.groupby(GROUP))) if len(part) else {}
    out = []
    for key in keys:
        out += run_partition_checks(seg_groups.get(key, seg.iloc[0:0]), part_groups.get(key, part.iloc[0:0]), ctx,
                                    names=["replay.safety"])
    return [f.to_dict() for f in out]


def _damaged(segments: list[dict], partitions: list[dict]) -> tuple[list[dict], list[dict]]:
    """The same rows plus: a second replica, the furthest (broker 7, another log dir: its files are
    absent, so both lookups fall back to the rows), a replica with no broker id and no partition
    row, one on the same broker in another log dir, a deleted segment file, a -future partition row, and on the first partition's broker-7 row a leader-epoch entry
    above its log start offset (replay.safety raises the log start, the reset's lookup does not)."""
    seg, part = copy.deepcopy(segments), copy.deepcopy(partitions)
    for r in segments:
        seg.append(dict(r, broker_id=7, log_dir="/nowhere/broker-7"))
        seg.append(dict(r, broker_id=None, log_dir="/nowhere/unknown"))
        seg.append(dict(r, log_dir="/nowhere/same-broker"))  # ties the scanned replica: log-dir order decides
        seg.append(dict(r, file_state="deleted", base_offset=r["base_offset"] + 1))
    for p in partitions:
        part.append(dict(p, broker_id=7, log_dir="/nowhere/broker-7",
                         log_end_offset=(p["log_end_offset"] or 0) + 5))
    raised = part[len(partitions)]
    raised["leader_epochs"] = [{"epoch": 3, "start_offset": (raised["log_start_offset"] or 0) + 2}]
    raised["log_start_offset_source"] = "checkpoint"
    # a -future copy's row of the same replica first: only the live row counts
    part.insert(0, dict(partitions[0], dir_kind="future", log_start_offset=1, log_end_offset=10**9))
    return seg, part


@pytest.mark.parametrize("log_dir", LOG_DIRS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("damaged", [False, True], ids=["as-scanned", "damaged"])
def test_rows_give_the_findings_of_the_pandas_path(log_dir, damaged):
    segments, partitions = _rows(log_dir)
    assert segments and partitions
    if damaged:
        segments, partitions = _damaged(segments, partitions)
    compared = 0
    for target in _targets(segments):
        ctx = _ctx(target)
        expected = _via_frames(segments, partitions, ctx)
        got = [f.to_dict() for f in replay_safety_on_rows(segments, partitions, ctx)]
        assert got == expected, f"target {target}"
        assert _via_frames_now(segments, partitions, ctx) == expected, f"engines' path, target {target}"
        compared += len(got)
    assert compared >= 10


def test_the_comparison_can_fail():
    # a different target changes the evidence: equal findings above are not equal by accident
    log_dir = next(p for p in LOG_DIRS if p.parent.name == "kafka-2018-v2")
    segments, partitions = _rows(log_dir)
    targets = _targets(segments)
    assert _via_frames(segments, partitions, _ctx(targets[0])) != _via_frames(segments, partitions, _ctx(targets[-1]))


def _committed(partitions: list[dict]) -> dict:
    out = {}
    for p in partitions:
        lso, leo = p["log_start_offset"] or 0, p["log_end_offset"] or 0
        out[(p["topic"], p["partition"])] = (lso + leo) // 2
    return out


@pytest.mark.parametrize("log_dir", LOG_DIRS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("damaged", [False, True], ids=["as-scanned", "damaged"])
def test_group_resets_reuse_the_search_and_equal_a_fresh_one(log_dir, damaged, monkeypatch):
    segments, partitions = _rows(log_dir)
    if damaged:
        segments, partitions = _damaged(segments, partitions)
    committed = _committed(partitions)
    calls = []
    real_predict = rg.predict

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real_predict(*args, **kwargs)

    monkeypatch.setattr(rg, "predict", counted)
    for target in _targets(segments):
        fresh = rg.resets_from_rows(segments, partitions, committed, target, NOW_MS)
        assert len(calls) == len([r for r in fresh if r.reset_source != "partition not found"])
        searches: dict = {}
        replay_safety_on_rows(segments, partitions, _ctx(target), searches)
        calls.clear()
        reused = rg.resets_from_rows(segments, partitions, committed, target, NOW_MS, searches)
        assert reused == fresh, f"target {target}"
        if not damaged:
            assert calls == [], "every partition's search was the same lookup: none should be searched again"
        else:
            # the first partition's search raised its log start: not the reset's lookup, searched again
            assert (partitions[0]["topic"], partitions[0]["partition"]) in {(r.topic, r.partition) for r in fresh}
            assert calls, "a search that is not the reset's lookup must not be reused"
        calls.clear()


INDEX_COLUMNS = ("last_index_offset", "last_index_position", "last_timeindex_timestamp_ms", "last_timeindex_offset",
                 "index_entries", "timeindex_entries", "aborted_txns", "index_size_bytes", "timeindex_size_bytes",
                 "txnindex_size_bytes", "index_mtime_ms", "timeindex_mtime_ms")


@pytest.mark.parametrize("log_dir", LOG_DIRS, ids=lambda p: p.parent.name)
def test_rows_without_index_files_give_the_same_findings(log_dir):
    """replay-check's scan does not read index files (``indexes=False``): its rows are the full
    headers scan's but for the index columns (None) and the notes about index files, and every
    finding (verdicts, evidence) and group reset is the same as from the full scan's rows."""
    _lean_rows_equal_full_rows(log_dir)


def test_rows_without_damaged_index_files_give_the_same_findings(tmp_path):
    """The same with index files the full scan notes as broken (out of order, odd size, entries
    past the log): the notes are the scan's; the search reads the searched segment's files itself."""
    from harness.realdata import copy_log_dir

    log_dir = copy_log_dir("kafka-2018-v2", tmp_path)
    damaged = 0
    for path in sorted(log_dir.rglob("*index")):
        data = path.read_bytes()
        if path.suffix == ".timeindex":
            data += (1).to_bytes(8, "big") + (3).to_bytes(4, "big") + b"\x07"  # backwards, then an odd byte
        else:
            data += (1).to_bytes(4, "big") + (1 << 30).to_bytes(4, "big")  # a position past the .log
        path.write_bytes(data)
        damaged += 1
    assert damaged
    notes = _lean_rows_equal_full_rows(log_dir)
    assert any(".timeindex" in n for n in notes) and any(".index" in n for n in notes)


def _lean_rows_equal_full_rows(log_dir: Path) -> list[str]:
    """Asserts the above; returns the notes the lean scan left out."""
    from auditor.scan import plan_log_dir, scan_partition_dir

    segments, partitions = _rows(log_dir)
    plan = plan_log_dir(log_dir)
    full_seg, full_part = [], []
    for pdir in plan.partition_dirs:
        rows, prow = scan_partition_dir(pdir, "headers", log_dir_info=plan.info,
                                        checkpoints_by_tp=plan.checkpoints_by_tp, root=plan.root)
        full_seg += rows
        full_part.append(prow)
    assert partitions == full_part and len(segments) == len(full_seg)
    dropped = 0
    all_left_out: list[str] = []
    for lean, full in zip(segments, full_seg):
        assert all(lean[c] is None for c in INDEX_COLUMNS)
        assert {k: v for k, v in lean.items() if k not in INDEX_COLUMNS + ("notes", "scanned_at_ms")} == \
            {k: v for k, v in full.items() if k not in INDEX_COLUMNS + ("notes", "scanned_at_ms")}
        left_out = [n for n in full["notes"] if n not in lean["notes"]]
        assert [n for n in full["notes"] if n not in left_out] == lean["notes"]
        assert all("index" in n for n in left_out), left_out
        dropped += sum(full[c] is not None for c in INDEX_COLUMNS)
        all_left_out += left_out
    if any(p.suffix in (".index", ".timeindex", ".txnindex") for p in log_dir.rglob("*")):
        assert dropped, "the full scan read index files: the comparison is not between equal rows"
    committed = _committed(partitions)
    for target in _targets(segments):
        searches, full_searches = {}, {}
        got = [f.to_dict() for f in replay_safety_on_rows(segments, partitions, _ctx(target), searches)]
        assert got == [f.to_dict() for f in replay_safety_on_rows(full_seg, full_part, _ctx(target), full_searches)]
        assert rg.resets_from_rows(segments, partitions, committed, target, NOW_MS, searches) == \
            rg.resets_from_rows(full_seg, full_part, committed, target, NOW_MS, full_searches)
    return all_left_out


_IMPORTS = """
import sys
from auditor.cli import main
rc = main(sys.argv[1:])
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'matplotlib', 'great_expectations', 'pyspark',
                                                          'py4j', 'reports', 'jinja2'})
if '--log-dir' in sys.argv:  # no Arrow, numpy or crc32c from disk (small indexes are read without numpy)
    heavy += sorted({m.split('.')[0] for m in sys.modules} & {'pyarrow', 'numpy', 'crc32c'})
# one check runs: its module alone is imported (checks.check_named), not the whole registry
heavy += sorted(m for m in sys.modules if m.startswith('checks.') and m not in (
    'checks.framework', 'checks.framework.base', 'checks.framework.config', 'checks.framework.registry',
    'checks.replay', 'checks.replay.safety'))
print('HEAVY', heavy)
sys.exit(10 + rc if heavy else rc)
"""


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    """collect's manifest of the 2018 broker's log dir (its rows, its consumer groups)."""
    log_dir = next(p for p in LOG_DIRS if p.parent.name == "kafka-2018-v2")
    out = tmp_path_factory.mktemp("manifest") / "m"
    subprocess.run([sys.executable, "-m", "auditor.cli", "collect", "--out", str(out), "--depth", "headers",
                    "--no-progress", str(log_dir)], cwd=ROOT, check=True, capture_output=True, timeout=300)
    return out


@pytest.mark.parametrize("source", ["log-dir", "manifest"])
@pytest.mark.parametrize("args", [
    ["--topic", "debug_topic"],
    ["--group", "debug-consumer-group"],
    ["--group", "debug-consumer-group", "--json"],
], ids=["topic", "group", "group-json"])
def test_replay_check_imports_no_pandas_nor_the_audit_stack(args, source, manifest):
    log_dir = next(p for p in LOG_DIRS if p.parent.name == "kafka-2018-v2")
    where = ["--log-dir", str(log_dir)] if source == "log-dir" else ["--manifest", str(manifest)]
    cmd = [sys.executable, "-c", _IMPORTS, "replay-check", *args, "--at", "2018-08-15T02:00:00Z", *where]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "HEAVY []" in proc.stdout


def test_manifest_tables_read_without_pyarrow_dataset_equal_read_table(manifest, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from auditor.schema import read_parquet

    for name, schema in (("segments.parquet", SEGMENT_SCHEMA), ("partitions.parquet", PARTITION_SCHEMA),
                         ("log_dirs.parquet", None)):
        ours, theirs = read_parquet(manifest / name, schema=schema), pq.read_table(manifest / name, schema=schema)
        assert ours.num_rows and ours.equals(theirs) and ours.schema.equals(theirs.schema, check_metadata=True)
    # an older manifest: a column it lacks, one the schema dropped since, a narrower type
    old = tmp_path / "old.parquet"
    pq.write_table(pa.table({"topic": ["t"], "partition": pa.array([3], pa.int64()), "gone": [1]}), old)
    ours, theirs = read_parquet(old, schema=PARTITION_SCHEMA), pq.read_table(old, schema=PARTITION_SCHEMA)
    assert ours.equals(theirs) and ours.schema.equals(theirs.schema, check_metadata=True)
    with pytest.raises(ValueError):  # as read_table: a column asked for and missing fails, never left out
        read_parquet(old, columns=["topic", "log_end_offset"])
    with pytest.raises(ValueError):
        pq.read_table(old, columns=["topic", "log_end_offset"])


def test_the_whole_help_still_lists_every_command():
    proc = subprocess.run([sys.executable, "-m", "auditor.cli", "--help"], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0
    for name in ("scan", "collect", "audit", "report", "demo", "replay-check", "groups", "metadata"):
        assert f"\n    {name}" in proc.stdout, name


def _offset_position_oracle(views, offset):
    """auditor.replay.offset_position as it was before offset_positions (one index read and one
    reader per offset, os.path.exists first), kept here verbatim but for the names it imports."""
    import bisect
    import os

    from auditor.formats.errors import FormatError
    from auditor.formats.log_reader import LogReader
    from auditor.formats.offset_index import read_offset_index

    if offset is None or not views:
        return None, False
    bases = [v.base_offset for v in views]
    i = bisect.bisect_right(bases, offset) - 1
    if i < 0:
        return 0, True
    seg = views[i]
    last = seg.last_offset
    if last is not None and offset > last:
        return seg.log_size_bytes, seg.log_size_bytes is not None
    if not seg.log_path or not os.path.exists(seg.log_path):
        return 0, False
    entries = []
    if seg.index_path and os.path.exists(seg.index_path):
        try:
            entries = read_offset_index(seg.index_path, seg.base_offset).entries
        except (OSError, FormatError):
            entries = []
    start = replay_modern.offset_index_lookup(entries, offset)
    try:
        reader = LogReader(seg.log_path)
    except OSError:
        return 0, False
    try:
        if start >= reader.size_bytes:
            start = 0
        for batch in reader.batches(start):
            if batch.last_offset >= offset:
                return batch.position, True
        return reader.stop_position, reader.stop_reason is None
    finally:
        reader.close()


def test_offset_positions_equal_one_lookup_per_offset(tmp_path):
    """The group resets ask offset_positions for the committed offset's and the reset's positions at
    once (one index read, one reader per segment): equal to the lookup per offset it replaced, for
    every offset of every real partition (and around them), and with the files damaged: an index
    pointing past the .log, a .log cut mid-batch, a missing .index, a missing .log."""
    from harness.realdata import copy_log_dir

    copies = [copy_log_dir(p.parent.name, tmp_path / "a") for p in LOG_DIRS]
    damaged = [copy_log_dir(p.parent.name, tmp_path / "b") for p in LOG_DIRS]
    for n, path in enumerate(sorted(p for d in damaged for p in d.rglob("*.log"))):
        index = path.with_suffix(".index")
        if n % 4 == 0 and index.exists():
            index.write_bytes(index.read_bytes() + (7).to_bytes(4, "big") + (1 << 30).to_bytes(4, "big"))
        elif n % 4 == 1:
            path.write_bytes(path.read_bytes()[:max(path.stat().st_size // 2, 1)])
        elif n % 4 == 2 and index.exists():
            index.unlink()
        else:
            path.unlink()
    compared = 0
    for log_dir, broken in zip(copies, damaged):
        segments = rows_from_log_dirs([str(log_dir)], _topics(log_dir)).segments
        by_dir: dict = {}
        for r in segments:  # the rows of the intact copy, and the same rows pointing at the damaged one
            by_dir.setdefault(r["dir_name"], []).append(r)
            by_dir.setdefault("damaged " + r["dir_name"], []).append(dict(r, log_dir=str(broken)))
        for rows in by_dir.values():
            views = replay.segment_views(rows)
            if not views:
                continue
            ends = {v.base_offset for v in views} | {v.last_offset for v in views if v.last_offset is not None}
            offsets = sorted({o + d for o in ends for d in (-1, 0, 1, 2)}) + [None]
            expected = [_offset_position_oracle(views, o) for o in offsets]
            assert replay.offset_positions(views, offsets) == expected
            for a in offsets[::3]:
                for b in offsets[::5]:
                    assert replay.offset_positions(views, [a, b]) == [_offset_position_oracle(views, a),
                                                                       _offset_position_oracle(views, b)]
            compared += len(offsets)
    assert compared > 100


def _segment_views_oracle(rows):
    """auditor.replay.segment_views as it was before it read each row in one pass (_values)."""
    get = replay_views._get
    views = []
    for row in rows:
        if get(row, "file_state") is not None or get(row, "log_size_bytes") is None:
            continue
        directory = replay_views._dir_prefix(Path(get(row, "log_dir") or "") / (get(row, "dir_name") or ""))
        name = f"{directory}{int(get(row, 'base_offset')):020d}"
        min_ts = get(row, "min_timestamp_ms")
        views.append(replay.SegmentView(
            base_offset=int(get(row, "base_offset")), largest_timestamp_ms=get(row, "max_timestamp_ms"),
            log_mtime_ms=get(row, "log_mtime_ms"), log_size_bytes=get(row, "log_size_bytes"),
            first_offset=get(row, "first_offset"), last_offset=get(row, "last_offset"),
            min_timestamp_ms=min_ts if min_ts is not None else get(row, "min_batch_timestamp_ms"),
            log_path=f"{name}.log", index_path=f"{name}.index", timeindex_path=f"{name}.timeindex",
            is_active=get(row, "is_active"), depth=get(row, "depth"),
            **{k: get(row, k) for k in ("index_entries", "index_size_bytes", "index_mtime_ms", "timeindex_entries",
                                        "timeindex_size_bytes", "timeindex_mtime_ms")}))
    return sorted(views, key=lambda v: v.base_offset)


@pytest.mark.parametrize("log_dir", LOG_DIRS, ids=lambda p: p.parent.name)
def test_segment_views_equal_the_per_column_reads(log_dir):
    """segment_views reads each row in one pass: the same views as reading column by column, from
    plain scanner rows, from pandas rows (NaN for nulls, floats for nullable integers) and from
    damaged rows (deleted files, other replicas, NaN everywhere)."""
    segments, partitions = _rows(log_dir)
    damaged, _ = _damaged(segments, partitions)
    pandas_rows = as_frame(damaged, SEGMENT_SCHEMA).to_dict("records")
    assert any(isinstance(v, float) for r in pandas_rows for v in r.values())
    damaged += [dict(r, log_dir=float("nan"), min_timestamp_ms=float("nan"), max_timestamp_ms=7.0,
                     base_offset=float(r["base_offset"])) for r in segments]
    for rows in (segments, damaged, pandas_rows):
        assert replay.segment_views(rows) == _segment_views_oracle(rows)
