"""Two audits into one history dir, on bytes a real broker wrote (fixtures/real/broker-dirs/
kafka-2018-v2): the first sees ``__consumer_offsets-28`` as it was at 03:16 (its one segment cut
after the last batch written by then, with its index entries), the second the whole segment as the
broker left it at 05:57. The second run's capacity section gives the bytes written in between
exactly (the segment both runs saw, like with like), beside the model's growth, in the JSON, the
HTML table and the terminal; the first says there was nothing to compare with.

The model itself has nothing to measure here (these records are years older than the filesystem
statted today: every partition is idle), so the second run states growth where the model saw none;
the planted rate change on a real broker is in tests/test_capacity_live.py."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
import pytest

from harness.cli import kafka_audit_in_process
from harness.realdata import copy_log_dir

pytestmark = pytest.mark.recorded

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "reports" / "findings.schema.json").read_text())
SEGMENT = "00000000000000000000"
CUT_AT_MS = 1534302960000  # 2018-08-15T03:16:00Z: the broker had then written a quarter of the segment


def _cut(part: Path, before_ms: int) -> tuple[int, int]:
    """Keeps the batches of ``part``'s segment whose max timestamp is before ``before_ms`` (v2
    headers: base offset, length, ..., max timestamp at byte 35), and the index entries below the
    cut. Returns (bytes kept, next offset)."""
    log = (part / f"{SEGMENT}.log").read_bytes()
    pos, next_offset = 0, 0
    while pos + 61 <= len(log):
        base, length = struct.unpack_from(">qi", log, pos)
        last_delta, = struct.unpack_from(">i", log, pos + 23)
        max_ts, = struct.unpack_from(">q", log, pos + 35)
        if max_ts >= before_ms:
            break
        pos, next_offset = pos + 12 + length, base + last_delta + 1
    (part / f"{SEGMENT}.log").write_bytes(log[:pos])
    index = (part / f"{SEGMENT}.index").read_bytes()
    kept = [index[i:i + 8] for i in range(0, len(index) - 7, 8) if struct.unpack_from(">ii", index, i)[1] < pos]
    (part / f"{SEGMENT}.index").write_bytes(b"".join(kept))
    tindex = (part / f"{SEGMENT}.timeindex").read_bytes()
    (part / f"{SEGMENT}.timeindex").write_bytes(b"".join(
        tindex[i:i + 12] for i in range(0, len(tindex) - 11, 12) if struct.unpack_from(">qi", tindex, i)[1] < next_offset))
    return pos, next_offset


def _audit(log_dir: Path, out: Path, history: Path, as_of: str):
    proc = kafka_audit_in_process("audit", "--engine", "local", "--no-progress", "--log-dir", log_dir,
                                  "--json", out / "findings.json", "--out", out / "report.html",
                                  "--history", history, "--as-of", as_of)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    doc = json.loads((out / "findings.json").read_text())
    jsonschema.validate(doc, SCHEMA)
    return proc, doc


def test_two_audits_give_the_bytes_written_in_between(tmp_path):
    log_dir = copy_log_dir("kafka-2018-v2", tmp_path / "now")
    part = log_dir / "__consumer_offsets-28"
    for p in part.iterdir():
        p.chmod(0o644)
    whole = (part / f"{SEGMENT}.log").stat().st_size
    saved = tmp_path / "whole"
    shutil.copytree(part, saved)
    kept, next_offset = _cut(part, CUT_AT_MS)
    assert 0 < kept < whole and next_offset > 0
    history = tmp_path / "history"
    (tmp_path / "r1").mkdir()
    (tmp_path / "r2").mkdir()

    _, first = _audit(log_dir, tmp_path / "r1", history, "2018-08-15T03:17:00Z")
    entry = next(e for e in first["capacity"] if e.get("capacity_known"))
    assert entry["observed_growth_bytes_per_s"] is None
    assert "no previous run" in entry["observed"]["notes"][0]

    for p in saved.iterdir():  # the broker wrote on: the whole segment as it left it
        shutil.copy2(p, part / p.name)
    proc, second = _audit(log_dir, tmp_path / "r2", history, "2018-08-15T05:58:00Z")
    entry = next(e for e in second["capacity"] if e.get("capacity_known"))
    interval_s = (second["as_of_ms"] - first["as_of_ms"]) / 1000.0
    assert entry["observed"]["appended_bytes"] == whole - kept  # exactly the bytes after the cut
    assert entry["observed"]["replicas_by_method"] == {"segments": 2, "offsets": 0, "new": 0}
    assert entry["observed_growth_bytes_per_s"] == pytest.approx((whole - kept) * (1 + 20 / 4096) / interval_s, rel=1e-6)
    assert entry["observed_since_utc"] == "2018-08-15T03:17:00.000Z" and entry["model_compared"] == "previous run"
    statement = entry["observed_statement"]
    assert statement and "where the model saw none" in statement and "__consumer_offsets" in statement, entry
    topic = next(t for t in entry["observed"]["by_topic"] if t["topic"] == "__consumer_offsets")
    assert topic["appended_bytes"] == whole - kept
    # the terminal and the HTML say it too
    print(proc.stdout)
    assert "capacity " in proc.stdout and "written " in proc.stdout and "where the model saw none" in proc.stdout
    html = (tmp_path / "r2" / "report.html").read_text()
    assert "written since the previous run" in html and 'id="capacity-observed"' in html
    # the history holds one capacity ledger per run, and the findings history does not call them foreign
    ledgers = sorted(history.glob("capacity-*.parquet"))
    assert len(ledgers) == 2
    rows = pq.read_table(ledgers[0]).to_pylist()
    assert {"end_offset": next_offset, "active_log_bytes": kept} == {
        k: next(r for r in rows if r["topic"] == "__consumer_offsets")[k] for k in ("end_offset", "active_log_bytes")}
    assert not any("does not know" in n for n in second["history"]["notes"]), second["history"]["notes"]
