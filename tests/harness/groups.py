"""Consumer groups made by real clients on a real broker, and Kafka's own tools as oracles.

``build_group_scenario(cluster)`` fills a running single-broker ``KafkaCluster`` (started with
``GROUP_BROKER_CONFIG``) with topics and more than 20 consumer groups covering what the
``__consumer_offsets`` reader must get right:

* classic-protocol groups that really joined (subscribe, range / roundrobin /
  cooperative-sticky assignors: GroupMetadata records with members) and "simple" groups that
  only commit (assign + commit, no membership);
* new-protocol groups (KIP-848, ``group.protocol=consumer``: ConsumerGroup* records);
* commits with metadata strings (ASCII and non-ASCII), repeated commits (the last one wins);
* a deleted group (``delete_consumer_groups``: offset and group tombstones);
* a group whose offsets were committed in a committed transaction
  (``send_offsets_to_transaction``) and one whose transactional commit was aborted (its
  earlier plain commit must stay);
* a lagging group on a topic whose oldest segments time retention deletes within hours;
* a group whose committed offset is below the log start (``delete_records`` moved it);
* a group committed to a topic that was then deleted;
* ``__consumer_offsets`` rolled and compacted by the cleaner (``log.roll.ms`` small, cleaner
  ratio tiny): ``wait_offsets_cleaned`` confirms a cleaner checkpoint above 0.

Oracles: ``list_committed_offsets`` (admin ``list_consumer_group_offsets`` for every group),
``describe_groups`` (admin ``describe_consumer_groups``: type and state),
``ConsumerGroupsTool.reset_to_datetime_dry_run`` (the real ``kafka-consumer-groups
--reset-offsets --to-datetime T --dry-run``, class
``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand`` from ``kafka-tools``).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from .jvm import run_tool
from .kafka import KafkaCluster, KafkaHarnessError, wait_past_newest_write
from .scenarios import read_cleaner_checkpoint

OFFSETS_TOPIC = "__consumer_offsets"
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

#: Broker settings for the scenario: __consumer_offsets rolls a segment whenever a commit comes
#: more than 2 s after its segment's first record (``log.roll.ms`` reaches the internal topic,
#: whose topic config sets only cleanup policy, compression and segment.bytes), and the cleaner
#: cleans it as soon as anything is dirty.  Data topics set their own ``segment.ms``.
GROUP_BROKER_CONFIG: dict[str, str] = {
    "log.roll.ms": "2000",
    "log.cleaner.min.cleanable.ratio": "0.01",
    "log.cleaner.backoff.ms": "300",
    "offsets.topic.num.partitions": "3",
    # the log-start-offset-checkpoint (what DeleteRecords moved) on disk within a second, not a minute
    "log.flush.start.offset.checkpoint.interval.ms": "1000",
    # segments wholly below a DeleteRecords' new log start are deleted by the retention check
    # (5 min by default): until then the broker's time lookups can choose one of them and answer -1
    # (UnifiedLog.searchOffsetInLocalLog), after it the next segment; the scenario waits for it
    "log.retention.check.interval.ms": "1000",
    "offsets.commit.timeout.ms": "5000",
    # the new protocol's session timeout floor, so closing members leave promptly
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
}

DATA_TOPIC_CONFIG = {"segment.ms": "600000", "segment.jitter.ms": "0", "index.interval.bytes": "256"}


@dataclass
class GroupScenario:
    t0_ms: int                                   # first data timestamp of the time-ordered topics
    data_end_ms: int                             # newest data timestamp of those topics
    topics: dict[str, int]                       # live data topic -> partitions
    deleted_topics: list[str]
    groups: dict[str, dict[str, Any]]            # group -> {"kind": ..., ...} what was done
    deleted_groups: list[str]
    expected: dict[str, dict[tuple[str, int], int]]   # group -> (topic, partition) -> offset
    expected_metadata: dict[str, dict[tuple[str, int], str]]
    records: dict[str, list[list[tuple[int, int]]]] = field(default_factory=dict)
    """topic -> per partition [(offset, timestamp_ms)] as delivered."""
    elapsed_s: float = 0.0


# ---------------------------------------------------------------------------------- clients


def _consumer(cluster: KafkaCluster, group: str, **extra) -> Consumer:
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "enable.partition.eof": False}
    conf.update(extra)
    return Consumer(conf)


def commit_offsets(cluster: KafkaCluster, group: str, offsets: dict[tuple[str, int], int],
                   metadata: dict[tuple[str, int], str] | None = None) -> None:
    """A commit without membership (a 'simple' classic group): assign nothing, commit offsets."""
    c = _consumer(cluster, group)
    try:
        tps = []
        for (t, p), off in offsets.items():
            md = (metadata or {}).get((t, p))
            tps.append(TopicPartition(t, p, off, md) if md is not None else TopicPartition(t, p, off))
        res = c.commit(offsets=tps, asynchronous=False)
        bad = [tp for tp in res if tp.error is not None]
        if bad:
            raise KafkaHarnessError(f"commit for {group} failed: {bad}")
    finally:
        c.close()


def consume_and_commit(cluster: KafkaCluster, group: str, topics: list[str], n_records: int,
                       timeout_s: float = 120.0, **conf) -> dict[tuple[str, int], int]:
    """Join ``group`` (subscribe), read ``n_records`` records, commit synchronously, close.
    Returns the committed offsets (next offset per partition read)."""
    c = _consumer(cluster, group, **conf)
    got: dict[tuple[str, int], int] = {}
    try:
        c.subscribe(topics)
        deadline = time.monotonic() + timeout_s
        seen = 0
        while seen < n_records:
            if time.monotonic() > deadline:
                raise KafkaHarnessError(f"group {group}: only {seen}/{n_records} records after {timeout_s} s")
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaHarnessError(f"group {group}: {m.error()}")
            got[(m.topic(), m.partition())] = m.offset() + 1
            seen += 1
        res = c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in got.items()], asynchronous=False)
        bad = [tp for tp in res if tp.error is not None]
        if bad:
            raise KafkaHarnessError(f"commit for {group} failed: {bad}")
    finally:
        c.close()
    return got


def transactional_commit(cluster: KafkaCluster, group: str, topic: str,
                         offsets: dict[tuple[str, int], int], commit: bool) -> None:
    """Produce one record to ``topic`` and commit ``offsets`` for ``group`` in one transaction
    (``send_offsets_to_transaction``); commit or abort it."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                  "transactional.id": f"txg-{uuid.uuid4().hex[:10]}", "enable.idempotence": True})
    c = _consumer(cluster, group)
    try:
        # 90 s each: the first init_transactions creates __transaction_state on a loaded machine
        p.init_transactions(90)
        p.begin_transaction()
        p.produce(topic, key=b"txn", value=b"txn-record", partition=0)
        p.flush(90)
        p.send_offsets_to_transaction([TopicPartition(t, pt, o) for (t, pt), o in offsets.items()],
                                      c.consumer_group_metadata(), 90)
        if commit:
            p.commit_transaction(90)
        else:
            p.abort_transaction(90)
    finally:
        c.close()


# ------------------------------------------------------------------------------- scenario


def _produce_timed(cluster: KafkaCluster, topic: str, partitions: int, per_partition: int,
                   t0_ms: int, step_ms: int, batch: int = 5, value_size: int = 200,
                   compression: str = "none") -> list[list[tuple[int, int]]]:
    """Records with timestamps t0 + i*step per partition, sent in batches of ``batch``."""
    out: list[list[tuple[int, int]]] = [[] for _ in range(partitions)]
    pad = "v" * value_size
    for start in range(0, per_partition, batch):
        recs = []
        for p in range(partitions):
            for i in range(start, min(start + batch, per_partition)):
                recs.append({"key": f"k{p}-{i}", "value": f"{topic}-{p}-{i}-{pad}",
                             "timestamp": t0_ms + i * step_ms, "partition": p})
        for d in cluster.produce(topic, recs, compression=compression, linger_ms=50):
            out[d.partition].append((d.offset, d.timestamp[1]))
    return out


def wait_segments_below_log_start_deleted(cluster: KafkaCluster, topic: str, partition: int, log_start: int,
                                         timeout_s: float = 120.0) -> None:
    """Until the broker's retention check has deleted every segment wholly below ``log_start``
    (a ``.log`` file renamed ``.deleted``): at most one live segment starts at or below it. Before
    that, what the broker answers to a time lookup depends on when it is asked."""
    deadline = time.monotonic() + timeout_s
    while True:
        bases = sorted(int(p.name[:-4]) for d in cluster.partition_dirs(topic, partition).values()
                       for p in d.glob("*.log"))
        if sum(1 for b in bases if b <= log_start) <= 1:
            return
        if time.monotonic() > deadline:
            raise KafkaHarnessError(f"{topic}-{partition}: segments {bases} still below log start {log_start} "
                                    f"after {timeout_s:.0f} s")
        time.sleep(0.2)


def _wait_offsets_roll_due(cluster: KafkaCluster) -> None:
    """Until the next commit rolls a new ``__consumer_offsets`` segment: the clock past
    ``log.roll.ms`` after the newest write to any of its partitions (commits carry the broker's
    append time)."""
    n = int(cluster.nodes[1].config.get("offsets.topic.num.partitions", "50"))
    dirs = [d for p in range(n) for d in cluster.partition_dirs(OFFSETS_TOPIC, p).values()]
    wait_past_newest_write(dirs, int(GROUP_BROKER_CONFIG["log.roll.ms"]), f"a {OFFSETS_TOPIC} roll")


def build_group_scenario(cluster: KafkaCluster) -> GroupScenario:
    started = time.monotonic()
    admin = cluster.admin()
    now = int(time.time() * 1000)
    t0 = (now - 6 * HOUR_MS) // 1000 * 1000
    step = 60_000
    per_partition = 40
    topics = {"orders": 6, "events": 3, "lagging": 2, "trimmed": 1, "gone": 1}
    for name, n in topics.items():
        cfg = dict(DATA_TOPIC_CONFIG)
        if name == "lagging":
            cfg.update({"retention.ms": str(7 * DAY_MS), "segment.ms": str(HOUR_MS)})
        cluster.create_topic(name, partitions=n, config=cfg)
    records: dict[str, list[list[tuple[int, int]]]] = {}
    records["orders"] = _produce_timed(cluster, "orders", 6, per_partition, t0, step)
    records["events"] = _produce_timed(cluster, "events", 3, per_partition, t0 + 30_000, step, compression="zstd")
    # lagging: records from 7 days - 2 h ago on, 1 h apart: the first segments are due for
    # deletion by time retention within a few hours
    lag_t0 = (now - 7 * DAY_MS + 2 * HOUR_MS) // 1000 * 1000
    records["lagging"] = _produce_timed(cluster, "lagging", 2, 30, lag_t0, HOUR_MS, batch=1)
    records["trimmed"] = _produce_timed(cluster, "trimmed", 1, 50, t0, step)
    records["gone"] = _produce_timed(cluster, "gone", 1, 10, t0, step)
    data_end = t0 + (per_partition - 1) * step + 30_000

    expected: dict[str, dict[tuple[str, int], int]] = {}
    expected_md: dict[str, dict[tuple[str, int], str]] = {}
    groups: dict[str, dict[str, Any]] = {}

    # classic groups that really join (members, assignors)
    for i, assignor in enumerate(["range", "roundrobin", "cooperative-sticky", "range"]):
        g = f"classic-member-{i}"
        got = consume_and_commit(cluster, g, ["orders"] if i % 2 == 0 else ["orders", "events"], 25 + 7 * i,
                                 **{"partition.assignment.strategy": assignor, "group.protocol": "classic"})
        expected[g] = got
        groups[g] = {"kind": "classic", "assignor": assignor}
    # new consumer protocol (KIP-848)
    for i in range(4):
        g = f"kip848-{i}"
        got = consume_and_commit(cluster, g, ["orders"] if i % 2 == 0 else ["events"], 30 + 11 * i,
                                 **{"group.protocol": "consumer"})
        expected[g] = got
        groups[g] = {"kind": "consumer"}
    # simple groups: commits only; some several times, some with metadata
    for i in range(10):
        g = f"simple-{i}"
        offs = {("orders", p): (i * 3 + p * 2) % 38 + 1 for p in range(6)}
        if i % 3 == 0:
            offs.update({("events", p): (i + p) % 40 for p in range(3)})
        md = {}
        if i % 2 == 0:
            md = {k: f"md-{g}-{k[0]}-{k[1]}" for k in offs}
        if i == 4:
            md[("orders", 0)] = "métadonnée ✓ 元数据"
        commit_offsets(cluster, g, {k: max(v - 5, 0) for k, v in offs.items()})   # an older commit first
        commit_offsets(cluster, g, offs, md)
        expected[g] = offs
        expected_md[g] = md
        groups[g] = {"kind": "simple", "commits": 2}

    # deleted group
    commit_offsets(cluster, "deleted-group", {("orders", 0): 7, ("orders", 1): 8})
    admin.delete_consumer_groups(["deleted-group"])["deleted-group"].result(timeout=30)
    groups["deleted-group"] = {"kind": "deleted"}

    # transactional commits
    transactional_commit(cluster, "txn-committed", "events", {("orders", 0): 21, ("orders", 3): 22}, commit=True)
    expected["txn-committed"] = {("orders", 0): 21, ("orders", 3): 22}
    groups["txn-committed"] = {"kind": "transaction", "outcome": "commit"}
    commit_offsets(cluster, "txn-aborted", {("orders", 1): 5, ("orders", 2): 6})
    transactional_commit(cluster, "txn-aborted", "events", {("orders", 1): 30, ("orders", 2): 31}, commit=False)
    expected["txn-aborted"] = {("orders", 1): 5, ("orders", 2): 6}
    groups["txn-aborted"] = {"kind": "transaction", "outcome": "abort"}

    # lagging group: reads nothing past the first records of 'lagging'
    commit_offsets(cluster, "lagging-group", {("lagging", 0): 1, ("lagging", 1): 0})
    expected["lagging-group"] = {("lagging", 0): 1, ("lagging", 1): 0}
    groups["lagging-group"] = {"kind": "lagging"}

    # committed offset below the log start
    commit_offsets(cluster, "below-start", {("trimmed", 0): 10})
    res = admin.delete_records([TopicPartition("trimmed", 0, 30)])
    for fut in res.values():
        fut.result(timeout=30)
    wait_segments_below_log_start_deleted(cluster, "trimmed", 0, 30)
    expected["below-start"] = {("trimmed", 0): 10}
    groups["below-start"] = {"kind": "below-log-start", "log_start_offset": 30}

    # committed to a topic that is then deleted
    commit_offsets(cluster, "gone-group", {("gone", 0): 4, ("orders", 5): 3})
    admin.delete_topics(["gone"], operation_timeout=30)["gone"].result(timeout=30)
    # the coordinator drops the deleted topic's offsets when it sees the deletion (tombstones written
    # asynchronously): wait for that, not only for the topic to leave the metadata
    deadline = time.monotonic() + 90
    while "gone" in admin.list_topics(timeout=10).topics or ("gone", 0) in list_committed_offsets(
            cluster, ["gone-group"])["gone-group"]:
        if time.monotonic() > deadline:
            raise KafkaHarnessError("topic 'gone' or gone-group's offsets of it still listed 90 s after the deletion")
        time.sleep(0.2)
    groups["gone-group"] = {"kind": "deleted-topic"}
    expected["gone-group"] = {("orders", 5): 3}   # the coordinator drops offsets of deleted topics (checked)

    # more commits over time, so __consumer_offsets rolls (log.roll.ms) and the cleaner cleans
    for rnd in range(3):
        _wait_offsets_roll_due(cluster)
        for i in range(0, 10, 3):
            g = f"simple-{i}"
            offs = dict(expected[g])
            offs[("orders", 0)] = min(offs[("orders", 0)] + 1 + rnd, 40)
            md = dict(expected_md.get(g, {}))
            commit_offsets(cluster, g, offs, md or None)
            expected[g] = offs
            groups[g]["commits"] += 1
    _wait_offsets_roll_due(cluster)
    commit_offsets(cluster, "roll-trigger", {("orders", 4): 1})
    expected["roll-trigger"] = {("orders", 4): 1}
    groups["roll-trigger"] = {"kind": "simple", "commits": 1}

    return GroupScenario(t0_ms=t0, data_end_ms=data_end, topics={k: v for k, v in topics.items() if k != "gone"},
                         deleted_topics=["gone"], groups=groups, deleted_groups=["deleted-group"],
                         expected=expected, expected_metadata=expected_md, records=records,
                         elapsed_s=time.monotonic() - started)


def wait_offsets_cleaned(cluster: KafkaCluster, timeout_s: float = 120.0) -> dict[int, int]:
    """Until the cleaner has cleaned at least one __consumer_offsets partition (its checkpoint,
    firstDirtyOffset, above 0).  Returns partition -> firstDirtyOffset of the cleaned ones."""
    deadline = time.monotonic() + timeout_s
    n = int(cluster.nodes[1].config.get("offsets.topic.num.partitions", "50"))
    while True:
        cleaned = {}
        for p in range(n):
            v = read_cleaner_checkpoint(cluster, OFFSETS_TOPIC, p)
            if v:
                cleaned[p] = v
        if cleaned:
            return cleaned
        if time.monotonic() > deadline:
            raise KafkaHarnessError(f"the cleaner cleaned no {OFFSETS_TOPIC} partition in {timeout_s} s")
        time.sleep(0.5)


def cleaner_pending(partition_dir: Path, first_dirty_offset: int | None, min_cleanable_ratio: float) -> str | None:
    """Why Kafka's log cleaner would still rewrite this compacted partition (None: it would not).

    Files of a cleaning under way (``.cleaned``, ``.swap``), or dirty bytes above the ratio, by
    ``LogCleanerManager.grabFilthiestCompactedLog``: clean = segments below the checkpoint's first
    dirty offset, cleanable = the others but the active one (no open transaction: the caller checks),
    cleaned when cleanable / (clean + cleanable) > the ratio. Without new appends, None stays None."""
    try:
        names = os.listdir(partition_dir)
        if busy := sorted(n for n in names if n.endswith((".cleaned", ".swap"))):
            return f"cleaning under way ({', '.join(busy)})"
        segs = sorted((int(n[:-4]), (partition_dir / n).stat().st_size) for n in names
                      if n.endswith(".log") and n[:-4].isdigit())
    except FileNotFoundError as exc:   # a segment swapped or deleted while listed
        return f"files changing ({exc.filename})"
    if len(segs) < 2:
        return None
    first_dirty = max(first_dirty_offset or 0, segs[0][0])
    clean = sum(size for base, size in segs if base < first_dirty)
    cleanable = sum(size for base, size in segs[:-1] if base >= first_dirty)
    if cleanable and cleanable / (clean + cleanable) > min_cleanable_ratio:
        return f"{cleanable} dirty bytes of {clean + cleanable} from offset {first_dirty} (ratio > {min_cleanable_ratio})"
    return None


def wait_offsets_settled(cluster: KafkaCluster, groups: list[str], timeout_s: float = 180.0) -> None:
    """Until nothing changes __consumer_offsets on its own any more, so that tests reading its files
    and asking the broker see the same state: every group in ``groups`` described EMPTY (a member
    whose leave was lost expires after the session timeout, and the coordinator writes that), no
    open transaction on any partition (last stable offset = high watermark: markers written) and
    the cleaner with nothing left to clean (``cleaner_pending``). The scenario's last commit rolls a
    segment, and the cleaner cleaned it while the first test read the files."""
    deadline = time.monotonic() + timeout_s
    n = int(cluster.nodes[1].config.get("offsets.topic.num.partitions", "50"))
    ratio = float(cluster.nodes[1].config.get("log.cleaner.min.cleanable.ratio", "0.5"))
    while True:
        why = [f"group {g} is {d['state']}" for g, d in describe_groups(cluster, groups).items() if d["state"] != "EMPTY"]
        for p in range(n):
            stable = cluster.list_offsets(OFFSETS_TOPIC, p, "latest", isolation_level="read_committed")[0]
            high = cluster.list_offsets(OFFSETS_TOPIC, p, "latest")[0]
            if stable != high:
                why.append(f"partition {p}: open transaction (last stable offset {stable} < high watermark {high})")
        if not why:
            for p in range(n):
                d = cluster.partition_dirs(OFFSETS_TOPIC, p).get(1)
                if d is not None and (pending := cleaner_pending(d, read_cleaner_checkpoint(cluster, OFFSETS_TOPIC, p),
                                                                 ratio)):
                    why.append(f"partition {p}: {pending}")
        if not why:
            return
        if time.monotonic() > deadline:
            raise KafkaHarnessError(f"{OFFSETS_TOPIC} still changing after {timeout_s:.0f} s: {'; '.join(why)}")
        time.sleep(0.5)


# -------------------------------------------------------------------------------- oracles


def list_committed_offsets(cluster: KafkaCluster, groups: list[str]) -> dict[str, dict[tuple[str, int], tuple[int, str]]]:
    """Admin list_consumer_group_offsets for each group: (topic, partition) -> (offset, metadata)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    admin = cluster.admin()
    out = {}
    for g in groups:
        fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)])[g]
        res = fut.result(timeout=30)
        out[g] = {(tp.topic, tp.partition): (tp.offset, tp.metadata or "")
                  for tp in res.topic_partitions if tp.offset >= 0}
    return out


def describe_groups(cluster: KafkaCluster, groups: list[str]) -> dict[str, dict[str, str]]:
    """Admin describe_consumer_groups: group -> {"type": CLASSIC|CONSUMER|..., "state": ...}."""
    admin = cluster.admin()
    out = {}
    for g, fut in admin.describe_consumer_groups(groups).items():
        d = fut.result(timeout=30)
        out[g] = {"type": getattr(getattr(d, "type", None), "name", str(getattr(d, "type", None))),
                  "state": d.state.name, "protocol_type": getattr(d, "protocol_type", None),
                  "partition_assignor": d.partition_assignor}
    return out


def iso_utc_ms(ms: int) -> str:
    """The --to-datetime argument for an instant: 'YYYY-MM-DDTHH:mm:SS.sss' + 'Z'."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


RE_DRY_RUN = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(-?\d+)\s*$")


class ConsumerGroupsTool:
    """Kafka's kafka-consumer-groups (ConsumerGroupCommand from kafka-tools), run as a JVM."""

    MAIN_CLASS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

    def __init__(self, classpath: str, bootstrap_servers: str, timeout_s: float = 120.0):
        self.classpath = classpath
        self.bootstrap = bootstrap_servers
        self.timeout_s = timeout_s

    def run(self, *args: str) -> subprocess.CompletedProcess:
        proc = run_tool(self.classpath, self.MAIN_CLASS, ["--bootstrap-server", self.bootstrap, *args],
                        timeout_s=self.timeout_s, text=True)
        if proc.returncode != 0:
            raise KafkaHarnessError(f"{' '.join(args)}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n"
                                    f"{proc.stderr[-2000:]}")
        return proc

    def reset_to_datetime_dry_run(self, group: str, target_ms: int, topics: list[str] | None = None
                                  ) -> dict[tuple[str, int], int]:
        """``--reset-offsets --group G --to-datetime T --dry-run`` (``--all-topics`` unless
        ``topics``): (topic, partition) -> NEW-OFFSET as printed."""
        scope = ["--all-topics"] if not topics else [a for t in topics for a in ("--topic", t)]
        proc = self.run("--reset-offsets", "--group", group, *scope, "--to-datetime", iso_utc_ms(target_ms),
                        "--dry-run")
        return parse_dry_run(proc.stdout, group)


    def reset_to_datetime_dry_run_groups(self, groups: list[str], target_ms: int
                                         ) -> dict[str, dict[tuple[str, int], int]]:
        """The same for several groups in one JVM (``--group`` repeated, ``--all-topics``)."""
        args = [a for g in groups for a in ("--group", g)]
        proc = self.run("--reset-offsets", *args, "--all-topics", "--to-datetime", iso_utc_ms(target_ms), "--dry-run")
        return {g: parse_dry_run(proc.stdout, g) for g in groups}


def parse_dry_run(text: str, group: str) -> dict[tuple[str, int], int]:
    out = {}
    for line in text.splitlines():
        m = RE_DRY_RUN.match(line.strip())
        if m and m.group(1) == group:
            out[(m.group(2), int(m.group(3)))] = int(m.group(4))
    return out
