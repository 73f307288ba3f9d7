"""Key statistics and the partitioner per topic, proven on a real broker (issue 23).

One KRaft broker for the module, stopped once the data is written (the files are then quiet).
Keyed producers (confluent-kafka, i.e. librdkafka) write three topics of 6 partitions:

* ``orders-crc32``: librdkafka's default partitioner (``consistent_random``: CRC32);
* ``orders-murmur2``: ``partitioner=murmur2_random`` (the Java client's hash);
* ``orders-explicit``: keys, but every record sent to a partition chosen by the test;
* ``orders-java``: Kafka's own Java producer (``VerifiableProducer`` from the Kafka jars, keys "0"
  to "499" repeating), whose JSON send reports are its ground truth;
* ``orders-mixed``: the same 1,000 keys from two producers, the default one and murmur2_random;
* ``orders-grown``: created with 4 partitions, 1,000 keys written, raised to 6 partitions with the
  admin API (``kafka-topics --alter --partitions`` does the same), the same keys written again.

Each keyed topic has 3,000 keys, two hot keys planted at 20 % and 5 % of its records, and null-key
records. The delivery reports are the ground truth (key -> partition, records per partition); the
tool's answer comes from ``kafka-audit scan --json --keys`` run as users run it, and from the
whole audit (``kafka-audit audit --keys``) on both engines and from manifests (``collect --keys``):
the checks find the planted hot key (KLA001's cause), the split keys (KLA070) and the two
partitioners (KLA071), the report draws the hot partition's keys, and no key text is shown.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from auditor.keys.partitioners import key_partition, murmur2
from harness.chromium import ARTIFACTS, browser, open_page  # noqa: F401 - the module-scoped headless Chromium fixture

pytestmark = pytest.mark.live

PARTITIONS = 6
RECORDS = 8000           # keyed records per topic
NULL_RECORDS = 240       # null-key records per keyed topic
KEYS = 3000
HOT = {b"hot-customer-a": 0.20, b"hot-customer-b": 0.05}
TOPICS = {"orders-crc32": {}, "orders-murmur2": {"partitioner": "murmur2_random"}, "orders-explicit": None}
ROOT = Path(__file__).resolve().parents[1]


def keyed_records(seed: int) -> list[bytes | None]:
    rnd = random.Random(seed)
    keys: list[bytes | None] = []
    for hot, share in HOT.items():
        keys += [hot] * int(RECORDS * share)
    keys += [b"customer-%d" % rnd.randrange(KEYS) for _ in range(RECORDS - len(keys))]
    keys += [None] * NULL_RECORDS
    rnd.shuffle(keys)
    return keys


@pytest.fixture(scope="module")
def written(kafka_cluster_factory):
    kc = kafka_cluster_factory(brokers=1, stop_timeout_s=120)
    truth = {}
    for i, (topic, producer_config) in enumerate(TOPICS.items()):
        kc.create_topic(topic, partitions=PARTITIONS)
        keys = keyed_records(seed=i)
        if producer_config is None:  # explicit partitions: nothing a hash explains
            rnd = random.Random(99)
            records = [dict(key=k, value=os.urandom(40), partition=rnd.randrange(PARTITIONS)) for k in keys]
            delivered = kc.produce(topic, records)
        else:
            delivered = kc.produce(topic, [(k, os.urandom(40), None) for k in keys], producer_config=producer_config)
        per_partition: dict[int, Counter] = defaultdict(Counter)
        nulls: Counter = Counter()
        for key, report in zip(keys, delivered):
            if key is None:
                nulls[report.partition] += 1
            else:
                per_partition[report.partition][key] += 1
        truth[topic] = {"keys": per_partition, "nulls": nulls,
                        "records": Counter(d.partition for d in delivered)}
    truth.update(java_producer(kc))
    truth.update(two_producers(kc))
    truth.update(grown_topic(kc))
    log_dirs = [str(d) for d in kc.log_dirs(1)]
    kc.stop()  # quiet files: what the test measures is what the tool reads
    return {"truth": truth, "log_dirs": log_dirs}


def partitions_by_key(keys, delivered) -> dict[bytes, set[int]]:
    where: dict[bytes, set[int]] = defaultdict(set)
    for key, report in zip(keys, delivered):
        where[key].add(report.partition)
    return where


JAVA_RECORDS = 3000
JAVA_KEYS = 500


def java_producer(kc) -> dict:
    from harness.kafka import tools_log4j_config

    kc.create_topic("orders-java", partitions=PARTITIONS)
    cfg = tools_log4j_config(kc.classpath)
    cmd = ["java", "-Xmx256m", *([f"-Dlog4j2.configurationFile={cfg}"] if cfg else []), "-cp", kc.classpath,
           "org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", kc.bootstrap_servers,
           "--topic", "orders-java", "--max-messages", str(JAVA_RECORDS), "--repeating-keys", str(JAVA_KEYS)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    sent = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    acked = [e for e in sent if e.get("name") == "producer_send_success"]
    assert len(acked) == JAVA_RECORDS, [e for e in sent if e.get("name") == "producer_send_error"][:3]
    where: dict[bytes, set[int]] = defaultdict(set)
    for e in acked:
        where[e["key"].encode()].add(e["partition"])
    return {"orders-java": {"where": where, "records": Counter(e["partition"] for e in acked)}}


def two_producers(kc) -> dict:
    kc.create_topic("orders-mixed", partitions=PARTITIONS)
    keys = [b"account-%d" % i for i in range(1000)]
    where: dict[bytes, set[int]] = defaultdict(set)
    for config in ({}, {"partitioner": "murmur2_random"}):
        delivered = kc.produce("orders-mixed", [(k, b"v", None) for k in keys], producer_config=config)
        for key, parts in partitions_by_key(keys, delivered).items():
            where[key] |= parts
    return {"orders-mixed": {"where": where}}


def grown_topic(kc) -> dict:
    from confluent_kafka.admin import NewPartitions

    from harness.kafka import wait_until

    kc.create_topic("orders-grown", partitions=4)
    keys = [b"device-%d" % i for i in range(1000)]
    where: dict[bytes, set[int]] = defaultdict(set)
    for key, parts in partitions_by_key(keys, kc.produce("orders-grown", [(k, b"v", None) for k in keys])).items():
        where[key] |= parts
    first_done_ms = time.time_ns() // 1_000_000
    kc.admin().create_partitions([NewPartitions("orders-grown", PARTITIONS)])["orders-grown"].result(timeout=60)
    wait_until(lambda: len(kc.admin().list_topics("orders-grown", timeout=10).topics["orders-grown"].partitions)
               == PARTITIONS and all(kc.partition_dirs("orders-grown", p) for p in range(PARTITIONS)),
               120, "orders-grown to have 6 partitions, each with its dir")
    grown_ms = time.time_ns() // 1_000_000
    for key, parts in partitions_by_key(keys, kc.produce("orders-grown", [(k, b"v", None) for k in keys])).items():
        where[key] |= parts
    return {"orders-grown": {"where": where, "phases_ms": (first_done_ms, grown_ms)}}


def run_scan(log_dirs: list[str], *extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", "--json", *extra, *log_dirs],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def scanned(written):
    return run_scan(written["log_dirs"], "--keys", "--keys-top", "20")


def partitions_of(doc: dict, topic: str) -> dict[int, dict]:
    return {row["partition"]: row["keys"] for row in doc["partitions"] if row["topic"] == topic}


def test_the_partitioner_is_named_right(scanned, written):
    verdicts = {v["topic"]: v for v in scanned["key_partitioners"]}
    assert verdicts["orders-crc32"]["partitioner"] == "crc32", verdicts["orders-crc32"]["verdict"]
    assert verdicts["orders-murmur2"]["partitioner"] == "murmur2", verdicts["orders-murmur2"]["verdict"]
    explicit = verdicts["orders-explicit"]
    assert explicit["partitioner"] is None and explicit["verdict"].startswith("no known partitioner"), explicit
    java = verdicts["orders-java"]
    assert java["partitioner"] == "murmur2", java["verdict"]
    assert java["split_keys"]["split_keys_found"] == 0
    mixed = verdicts["orders-mixed"]
    assert mixed["partitioner"] is None
    assert {mixed["two_explanations"]["first"]["family"], mixed["two_explanations"]["second"]["family"]} == \
        {"crc32", "murmur2"}
    assert mixed["two_explanations"]["cause"].startswith("two partitioners")
    grown = verdicts["orders-grown"]
    assert grown["partitioner"] is None and grown["partition_count"] == PARTITIONS
    assert (grown["two_explanations"]["second"]["family"], grown["two_explanations"]["second"]["partition_count"]) \
        == ("crc32", 4)
    assert grown["two_explanations"]["cause"].startswith("the partition count changed")
    # when: the metadata log's record of the added partitions, between the two produce phases
    added = grown["partitions_added"]
    assert sorted(a["partition"] for a in added) == [4, 5]
    phases = written["truth"]["orders-grown"]["phases_ms"]
    # the controller's batch time can precede the Python clock read before the call by a few ms
    # (seen: 4 ms): a second of slack on the lower bound; the upper bound is exact
    assert all(phases[0] - 1000 <= a["timestamp_ms"] <= phases[1] for a in added), (added, phases)
    assert "partitions 4, 5 added at" in grown["two_explanations"]["cause"]
    assert all("partitions_added" not in verdicts[t] for t in TOPICS)
    for topic in TOPICS:
        assert verdicts[topic]["partition_count"] == PARTITIONS
        assert verdicts[topic]["partition_count_source"] == "metadata log"
        assert verdicts[topic]["null_key_records"] == NULL_RECORDS


@pytest.mark.parametrize("topic", list(TOPICS))
def test_counts_null_keys_heavy_hitters_and_distinct_keys_match_the_delivery_reports(scanned, written, topic):
    truth = written["truth"][topic]
    found = partitions_of(scanned, topic)
    assert sorted(found) == list(range(PARTITIONS))
    for partition, keys in found.items():
        records = truth["records"][partition]
        assert keys["records"] == records
        assert keys["null_key_records"] == truth["nulls"][partition]
        exact: Counter = truth["keys"][partition]
        # every key above 1 % of the partition's records, and only those, among the reported ones above 1 %
        above = {murmur2(k): n for k, n in exact.items() if n > records / 100}
        reported = {h["key"]["murmur2"]: h for h in keys["heavy_hitters"]}
        assert above.keys() <= reported.keys(), (partition, above, list(reported))
        assert {m for m, h in reported.items() if h["records_min"] > records / 100} == above.keys()
        for fingerprint, n in above.items():
            assert reported[fingerprint]["records_min"] <= n <= reported[fingerprint]["records_max"]
        # distinct keys within 3 stated standard errors (a deterministic input: holds or is wrong)
        error = keys["distinct_keys_relative_std_error"]
        assert abs(keys["distinct_keys_estimate"] - len(exact)) <= 3 * error * len(exact) + 1
        assert keys["mode"] == "all" and keys["scanned_bytes"] == keys["log_bytes"]
        assert keys["notes"] == []


def test_hot_keys_are_ranked_first_where_the_reports_put_them(scanned, written):
    for topic in ("orders-crc32", "orders-murmur2"):
        truth = written["truth"][topic]["keys"]
        found = partitions_of(scanned, topic)
        for hot, share in HOT.items():
            where = [p for p, counts in truth.items() if hot in counts]
            assert len(where) == 1  # a hash partitioner: one partition per key
            heavy = {h["key"]["murmur2"]: h for h in found[where[0]]["heavy_hitters"]}
            entry = heavy[murmur2(hot)]
            assert entry["key"] == {"murmur2": murmur2(hot), "length": len(hot), "printable": True}
            assert entry["records_min"] <= int(RECORDS * share) <= entry["records_max"]
        ranked = 0
        for partition, counts in truth.items():
            # the stated guarantee: a key ahead of the next by more than the error is ranked first
            (most, first), (_, second) = counts.most_common(2)
            if first - second > found[partition]["heavy_hitters_error_records"]:
                assert found[partition]["heavy_hitters"][0]["key"]["murmur2"] == murmur2(most)
                ranked += 1
        assert ranked >= 1  # the hot keys' partitions at least


def test_the_java_clients_placement_is_our_murmur2(scanned, written):
    truth = written["truth"]["orders-java"]
    for key, parts in truth["where"].items():
        assert parts == {key_partition("murmur2", key, PARTITIONS)}, key
    found = partitions_of(scanned, "orders-java")
    assert {p: k["records"] for p, k in found.items()} == dict(truth["records"])


@pytest.mark.parametrize("topic", ["orders-mixed", "orders-grown"])
def test_split_keys_match_the_delivery_reports(scanned, written, topic):
    where = written["truth"][topic]["where"]
    split_truth = {murmur2(k): parts for k, parts in where.items() if len(parts) > 1}
    found = {v["topic"]: v for v in scanned["key_partitioners"]}[topic]["split_keys"]
    # every topic's keys fit its partitions' samples here (1,000 keys), so every split key is found
    assert found["split_keys_found"] == len(split_truth) > 0
    assert found["split_share_estimate"] == pytest.approx(len(split_truth) / len(where), abs=1e-6)
    for example in found["examples"]:
        assert {int(p) for p in example["records_by_partition"]} == split_truth[example["key"]["murmur2"]]
    for verdict in scanned["key_partitioners"]:
        if verdict["topic"] in ("orders-crc32", "orders-murmur2"):
            assert verdict["split_keys"]["split_keys_found"] == 0


def test_the_hot_partition_is_explained_by_its_hot_key(scanned, written):
    verdicts = {v["topic"]: v for v in scanned["key_partitioners"]}
    for topic in ("orders-crc32", "orders-murmur2"):
        truth = written["truth"][topic]
        (hot_partition,) = [p for p, counts in truth["keys"].items() if b"hot-customer-a" in counts]
        skewed = {s["partition"]: s for s in verdicts[topic]["skewed_partitions"]}
        assert hot_partition in skewed, (topic, verdicts[topic]["skewed_partitions"])
        cause = skewed[hot_partition]
        assert cause["cause"] == "hot keys" and cause["records"] == truth["records"][hot_partition]
        assert cause["keys"][0]["key"]["murmur2"] == murmur2(b"hot-customer-a")


def test_keys_never_appear_in_the_output(scanned):
    text = json.dumps(scanned)
    # every key written is "customer-N", "hot-customer-a/b", "account-N" or "device-N" (the log
    # dirs' own fields, e.g. fs_device, are no key)
    assert "customer-" not in text and "account-" not in text and "device-" not in text


def test_sampled_mode_says_what_it_read(written):
    doc = run_scan(written["log_dirs"], "--keys-sample-mib", "0.05")
    asked = math.floor(0.05 * (1 << 20))
    bitten = 0
    for topic in TOPICS:  # the three topics of 8,240 records
        for partition, keys in partitions_of(doc, topic).items():
            assert keys["mode"] == "sampled" and keys["sample_bytes_asked"] == asked
            # from the batch holding the cut: at least the budget (or the whole partition), at most a batch more
            assert min(asked, keys["log_bytes"]) <= keys["scanned_bytes"] <= keys["log_bytes"]
            total = written["truth"][topic]["records"][partition]
            assert 0 < keys["records"] <= total
            if keys["scanned_bytes"] < keys["log_bytes"]:  # the sample bites: fewer records than the partition holds
                assert keys["records"] < total
                bitten += 1
    assert bitten > 0


# -- the audit, end to end: both engines, manifests, the report ---------------------------------
#: The planted hot key makes its partition ~2.4x the median (8,240 records over 6 partitions, well
#: under 1 MiB): the config lowers KLA001's thresholds, as a user would for a small topic.
AUDIT_CONFIG = "checks:\n  skew.partition_size: {warn_ratio: 1.8, fail_ratio: 50, min_topic_bytes: 0}\n"
KEY_CODES = ("KLA001", "KLA070", "KLA071")


def _audit(tmp: Path, name: str, *inputs: str, extra: tuple = ()) -> tuple[dict, str]:
    from harness.cli import kafka_audit

    config = tmp / "audit.yaml"
    config.write_text(AUDIT_CONFIG)
    out_json, out_html = tmp / f"{name}.json", tmp / f"{name}.html"
    res = kafka_audit("audit", *inputs, "--config", config, "--json", out_json, "--out", out_html,
                      "--exit-zero", "--no-progress", *extra)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(out_json.read_text()), out_html.read_text()


@pytest.fixture(scope="module")
def audited(written, tmp_path_factory):
    """The audit's documents and reports: from the log dirs on the driver and on Spark, from a
    manifest collected with --keys and from one collected without (an older manifest)."""
    from harness.cli import kafka_audit

    import shutil

    from auditor.keys.manifest_part import KEYS_FILE

    tmp = tmp_path_factory.mktemp("keys-audit")
    dirs = [a for d in written["log_dirs"] for a in ("--log-dir", d)]
    out = {"local": _audit(tmp, "local", *dirs, extra=("--keys", "--engine", "local")),
           "spark": _audit(tmp, "spark", *dirs, extra=("--keys", "--engine", "spark", "--master", "local[1]"))}
    res = kafka_audit("collect", *written["log_dirs"], "--out", tmp / "manifest", "--depth", "headers", "--keys",
                      "--no-progress")
    assert res.returncode == 0, res.stderr[-3000:]
    out["manifest"] = _audit(tmp, "manifest", "--manifest", tmp / "manifest", extra=("--engine", "local"))
    # an older manifest: the same one without its key part (the part is written after the manifest's
    # completion marker, which does not list it)
    shutil.copytree(tmp / "manifest", tmp / "old-manifest")
    (tmp / "old-manifest" / KEYS_FILE).unlink()
    out["old-manifest"] = _audit(tmp, "old-manifest", "--manifest", tmp / "old-manifest", extra=("--engine", "local"))
    return out


def key_findings(doc: dict) -> list[tuple]:
    return sorted((f["code"], f["severity"], f["topic"], f["partition"], f["message"])
                  for f in doc["findings"] if f["code"] in KEY_CODES and f["severity"] != "PASS")


def test_audit_finds_the_hot_key_split_keys_and_two_partitioners(audited, written):
    doc, _ = audited["local"]
    by = defaultdict(list)
    for f in doc["findings"]:
        if f["severity"] != "PASS":
            by[f["code"], f["topic"]].append(f)
    for topic in ("orders-crc32", "orders-murmur2"):  # KLA001 names the planted hot key as the cause
        truth = written["truth"][topic]
        (hot_partition,) = [p for p, counts in truth["keys"].items() if b"hot-customer-a" in counts]
        (finding,) = by["KLA001", topic]
        assert finding["partition"] == hot_partition and "cause: hot keys: key#" in finding["message"], finding
        assert finding["fix"].startswith("Spread the hot keys named here")
        cause = next(e["cause"] for e in finding["evidence"] if e["partition"] == hot_partition)
        hot = cause["keys"][0]
        assert hot["key"] == {"murmur2": murmur2(b"hot-customer-a"), "length": 14, "printable": True}
        exact = truth["keys"][hot_partition][b"hot-customer-a"] / truth["records"][hot_partition]
        assert hot["share_of_records"] == pytest.approx(exact, abs=1e-6)
        assert 0 < hot["share_of_bytes"] <= 1 and cause["records"] == truth["records"][hot_partition]
    for topic, cause in (("orders-grown", "the partition count changed"), ("orders-mixed", "two partitioners")):
        where = written["truth"][topic]["where"]
        split = {murmur2(k): parts for k, parts in where.items() if len(parts) > 1}
        (finding,) = by["KLA070", topic]
        assert finding["evidence_count"] == len(split) > 0 and f"likely cause: {cause}" in finding["message"]
        for item in finding["evidence"]:
            assert {p["partition"] for p in item["partitions"]} == split[item["key"]["murmur2"]]
            assert all(p["first_offset"] is not None and p["first_timestamp_utc"].endswith("Z") for p in item["partitions"])
    grown = by["KLA070", "orders-grown"][0]
    assert "partitions 4, 5 added at" in grown["message"]
    added_utc = min(a["timestamp_utc"] for a in grown["evidence"][0]["partitions_added"])
    assert all(item["since_utc"] >= added_utc for item in grown["evidence"])  # split since the partitions were added
    (two,) = by["KLA071", "orders-mixed"]
    assert {e["family"] for e in two["evidence"]} == {"crc32", "murmur2"}
    assert {t for code, t in by if code == "KLA071"} == {"orders-mixed"}
    # explicit partitions chosen at random per record split keys too: found, and no partitioner blamed
    (explicit,) = by["KLA070", "orders-explicit"]
    assert "likely cause: unknown: explicit partitions or a custom partitioner" in explicit["message"]
    truth = defaultdict(set)
    for partition, counts in written["truth"]["orders-explicit"]["keys"].items():
        for key in counts:
            truth[murmur2(key)].add(partition)
    for item in explicit["evidence"]:
        assert {p["partition"] for p in item["partitions"]} <= truth[item["key"]["murmur2"]]
        assert len(item["partitions"]) > 1
    assert {t for code, t in by if code == "KLA070"} == {"orders-grown", "orders-mixed", "orders-explicit"}


def test_both_engines_and_the_manifest_give_the_same_key_findings(audited):
    local = key_findings(audited["local"][0])
    assert len(local) >= 5, local
    assert key_findings(audited["spark"][0]) == local
    assert key_findings(audited["manifest"][0]) == local
    assert audited["spark"][0]["keys"]["topics"] == audited["local"][0]["keys"]["topics"]


def test_an_older_manifest_still_reads_and_says_the_key_checks_did_not_run(audited):
    doc, html = audited["old-manifest"]
    assert doc["keys"]["ran"] is False
    assert any("no key statistics" in n for n in doc["keys"]["notes"]), doc["keys"]["notes"]
    assert not [f for f in key_findings(doc) if f[0] != "KLA001"]
    assert all("cause:" not in f[4] for f in key_findings(doc))
    assert 'id="keys-not-run"' in html


def test_the_report_shows_the_hot_partitions_keys_and_never_a_key(audited, written):
    schema = json.loads((ROOT / "reports" / "findings.schema.json").read_text())
    import jsonschema

    for name, (doc, html) in audited.items():
        jsonschema.validate(doc, schema)
        for text in (json.dumps(doc), html):
            shown = [text[max(0, m.start() - 80):m.end() + 40]  # the produced keys' text (not "device-width")
                     for m in re.finditer(r"customer|account-\d|device-\d", text)]
            assert not shown, (name, shown)
    doc, html = audited["local"]
    for topic in ("orders-crc32", "orders-murmur2"):
        (hot_partition,) = [p for p, c in written["truth"][topic]["keys"].items() if b"hot-customer-a" in c]
        assert f"Heaviest keys of {topic}-{hot_partition}" in html
        assert f"key#{murmur2(b'hot-customer-a') & 0xFFFFFFFF:08x} (len 14)" in html
        rows = {t["topic"]: t for t in doc["keys"]["topics"]}[topic]["partitions"]
        assert hot_partition in [p["partition"] for p in rows if p.get("top_keys")]


def test_the_keys_section_in_chromium(audited, written, browser, tmp_path):
    """The report as a person sees it: the hot partitions' key charts load and show, the key table
    reads, no console error (Debian's headless Chromium, as tests/harness/chromium.py opens it)."""
    report = tmp_path / "keys-report.html"
    report.write_text(audited["local"][1])
    page, problems = open_page(browser, report, "keys-report")
    section = page.locator("h2#keys")
    section.scroll_into_view_if_needed()
    charts = page.eval_on_selector_all(
        "img[alt^='Heaviest keys of']", "imgs => imgs.map(i => ({ok: i.complete && i.naturalWidth > 0, "
                                        "w: i.getBoundingClientRect().width, alt: i.alt}))")
    hot = {f"Heaviest keys of {t}-{p}" for t in ("orders-crc32", "orders-murmur2")
           for p, c in written["truth"][t]["keys"].items() if b"hot-customer-a" in c}
    assert hot <= {c["alt"] for c in charts} and all(c["ok"] and c["w"] > 100 for c in charts), charts
    first = page.locator("table.top-keys").first
    assert first.locator("tr").count() >= 2 and "key#" in first.inner_text()
    page.locator("figure.chart img[alt^='Heaviest keys of']").first.screenshot(path=str(ARTIFACTS / "keys-report-chart.png"))
    assert not problems, problems
