"""Since the last run on a real broker: two audits of one KRaft broker's log dir, with changes the
test makes in between, through ``kafka-audit audit --history`` (the CLI as a subprocess) and
``--as-of`` two days apart. The changes are made by producing, which the broker does the same way
every time: a skewed topic made worse (worsened), one balanced by producing into its small
partitions (resolved: the check no longer reports it), one left alone (persisting) and a new skewed topic (new).
Every other finding must persist: nothing appears or resolves that the test did not plant."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from auditor.units import iso_utc

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[1]
DAY = 86_400_000
# warn 3x, fail 10x the median (defaults); the capacity checks judge the disk the test machine's
# root filesystem is, which two nights two days apart project differently: not what is planted here
CONFIG = ("checks:\n  skew.partition_size:\n    min_topic_bytes: 10000\n"
          "  capacity.time_to_full:\n    enabled: false\n  capacity.steady_state:\n    enabled: false\n")


@pytest.fixture(scope="module")
def broker(kafka_cluster_factory):
    kc = kafka_cluster_factory(brokers=1)
    yield kc
    kc.stop()


def fill(kc, topic: str, per_partition: dict[int, int]) -> None:
    for partition, n in per_partition.items():
        kc.produce(topic, [(f"k{i}", os.urandom(150).hex(), None) for i in range(n)], partition=partition)


def audit(kc, tmp_path: Path, history: Path, as_of_ms: int, name: str) -> tuple[int, dict, str]:
    out = tmp_path / f"{name}.json"
    config = tmp_path / "audit.yaml"
    config.write_text(CONFIG)
    args = [sys.executable, "-m", "auditor.cli", "audit", "--engine", "local", "--no-progress", "--config", str(config),
            "--history", str(history), "--as-of", iso_utc(as_of_ms), "--json", str(out), "--out", str(tmp_path / f"{name}.html")]
    for d in kc.log_dirs(1):
        args += ["--log-dir", str(d)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads(out.read_text()), proc.stdout


def skew(doc: dict, topic: str) -> dict | None:
    return next((f for f in doc["findings"] if f["code"] == "KLA001" and f["topic"] == topic), None)


def test_two_nights_classified_as_planted(broker, tmp_path):
    kc, history = broker, tmp_path / "history"
    for topic in ("clicks", "events", "steady"):
        kc.create_topic(topic, partitions=3)
    fill(kc, "clicks", {0: 400, 1: 100, 2: 100})     # 4x the median: WARN
    fill(kc, "events", {0: 1500, 1: 100, 2: 100})    # 15x: FAIL
    fill(kc, "steady", {0: 1500, 1: 100, 2: 100})    # 15x: FAIL, left alone
    night1 = int(time.time() * 1000)
    _, doc1, _ = audit(kc, tmp_path, history, night1, "night1")
    assert skew(doc1, "clicks")["severity"] == "WARN" and skew(doc1, "events")["severity"] == "FAIL"
    assert skew(doc1, "steady")["severity"] == "FAIL" and skew(doc1, "orders") is None
    assert doc1["history"]["previous_run_utc"] is None and doc1["resolved"] == []
    assert {f["status"] for f in doc1["findings"] if f["severity"] != "PASS"} == {"new"}

    fill(kc, "clicks", {0: 1100})                    # 15x: FAIL, worsened
    fill(kc, "events", {1: 1400, 2: 1400})           # balanced: PASS, resolved
    kc.create_topic("orders", partitions=3)
    fill(kc, "orders", {2: 1500, 0: 100, 1: 100})    # new
    night2 = night1 + 2 * DAY
    code, doc2, stdout = audit(kc, tmp_path, history, night2, "night2")

    assert code == 1 and doc2["history"]["previous_run_utc"] == iso_utc(night1) and doc2["history"]["runs"] == 2
    clicks, steady, orders = skew(doc2, "clicks"), skew(doc2, "steady"), skew(doc2, "orders")
    assert (clicks["severity"], clicks["status"], clicks["runs_open"], clicks["first_seen"]) == \
        ("FAIL", "worsened", 2, iso_utc(night1))
    assert (steady["severity"], steady["status"], steady["runs_open"], steady["first_seen"]) == \
        ("FAIL", "persisting", 2, iso_utc(night1))
    assert (orders["severity"], orders["status"], orders["runs_open"], orders["first_seen"], orders["partition"]) == \
        ("FAIL", "new", 1, iso_utc(night2), 2)
    assert skew(doc2, "events") is None  # balanced: the check has nothing to say about it
    assert [(r["identity"], r["severity_before"], r["now"], r["first_seen"]) for r in doc2["resolved"]] == \
        [("KLA001 topic=events", "FAIL", "gone", iso_utc(night1))]
    planted = {"KLA001 topic=clicks", "KLA001 topic=orders"}
    others = [f for f in doc2["findings"] if f["severity"] != "PASS" and f["identity"] not in planted | {steady["identity"]}]
    assert all(f["status"] == "persisting" and f["runs_open"] == 2 for f in others), \
        [(f["identity"], f["status"]) for f in others]
    assert doc2["since"] == {"new": 1, "worsened": 1, "persisting": 1 + len(others), "resolved": 1}
    assert f"1 new, 1 worsened, 1 resolved, {1 + len(others)} still open" in stdout
    files = sorted(p.name for p in history.glob("findings-*.parquet"))
    assert len(files) == 2, files
