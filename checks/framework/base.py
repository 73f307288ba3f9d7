"""The check framework: severities, findings, options, the Check base class.

A check is a class in its own module under ``checks/`` with a stable ``code`` (``KLA`` + 3
digits), a dotted ``name`` that is also its key in the config file, a ``scope`` saying what one
call of :meth:`Check.run` sees, declared ``options`` (its thresholds, with defaults) and a
docstring with the sections in :data:`DOCSTRING_SECTIONS`. ``run`` is a pure function of its
inputs (pandas DataFrames of rows declared in ``auditor/schema.py``, the audit context and the
options resolved for the topic); it returns findings, never a bare bool.

Scopes:

* ``partition``: :meth:`Check.run` sees one topic-partition: every segment row and partition-dir
  row of that partition (all replicas: every broker, every log dir, ``-future`` copies included),
  so it must not need anything outside its partition. The engines hand many partitions at once
  (:class:`PartitionBatch`, to :meth:`Check.run_batch`: the whole table on the driver, one bucket
  of partitions per ``applyInPandas`` call on Spark); a check's :meth:`Check.prefilter`, a
  vectorized superset of the partitions that can give a finding, keeps ``run`` to those
  (docs/batch-checks.md).
* ``cluster``: called once with the per-partition-dir statistics (``replica_stats`` of
  ``auditor.engines.spark.aggregates``: one row per partition dir, small) and the topic / broker / log-dir
  rollups. Never sees segment rows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Mapping, Sequence

if TYPE_CHECKING:  # the batch frame (numpy, pandas) is imported where a batch is built
    from checks.framework.batch import PartitionBatch

DOCSTRING_SECTIONS = ("What it checks", "Why it matters", "Example finding", "How to fix", "Options")
"""The sections of a check's documentation: the module docstring writes the first four; Options
is generated from the check's declared options (:func:`options_section`, :func:`documentation`)."""
OPTIONS_POINTER = "Options: generated from ``options`` below (checks.framework.base.options_section)."
"""What a check module's docstring says in place of the Options section it does not write."""
CODE_PATTERN = re.compile(r"^KLA\d{3}$")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
EVIDENCE_CAP = 20
"""Evidence items kept per finding; ``evidence_count`` keeps the full count."""


class Severity(IntEnum):
    PASS = 0
    INFO = 1
    WARN = 2
    FAIL = 3

    @classmethod
    def parse(cls, value: "str | Severity") -> "Severity":
        if isinstance(value, Severity):
            return value
        if isinstance(value, str) and value in cls.__members__:  # the usual spelling: one dict look-up (150,000 findings on a fleet on fire)
            return cls.__members__[value]
        try:
            return cls[str(value).strip().upper()]
        except KeyError:
            raise ValueError(f"severity {value!r} is not one of {', '.join(s.name for s in cls)}") from None


SEVERITIES: tuple[str, ...] = tuple(s.name for s in Severity)
"""The severity names, least severe first: the one order the JSON, the metrics and the gates use."""
RANK: dict[str, int] = {s.name: int(s) for s in Severity}
"""A severity name's place in :data:`SEVERITIES` (PASS 0 .. FAIL 3), for findings read back as JSON."""


@dataclass
class Finding:
    """One answer of one check, with where, what, what to do, the thresholds and the evidence."""

    code: str
    check: str
    severity: Severity
    message: str
    fix: str = ""
    broker_id: int | None = None
    log_dir: str | None = None
    topic: str | None = None
    partition: int | None = None
    base_offset: int | None = None
    thresholds: dict[str, Any] = field(default_factory=dict)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    evidence_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "check": self.check,
            "severity": self.severity.name,
            "message": self.message,
            "fix": self.fix,
            "broker_id": self.broker_id,
            "log_dir": self.log_dir,
            "topic": self.topic,
            "partition": self.partition,
            "base_offset": self.base_offset,
            "thresholds": self.thresholds,
            "evidence": self.evidence,
            "evidence_count": self.evidence_count,
        }

    def to_row(self) -> dict[str, Any]:
        """A row of ``auditor.schema.FINDING_SCHEMA`` (thresholds and evidence as JSON text)."""
        row = self.to_dict()
        row["thresholds_json"] = json.dumps(row.pop("thresholds"), sort_keys=True, default=str)
        row["evidence_json"] = json.dumps(row.pop("evidence"), default=str)
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "Finding":
        return cls(
            code=row["code"], check=row["check"], severity=Severity.parse(row["severity"]),
            message=row["message"], fix=row.get("fix") or "",
            broker_id=opt_int(row.get("broker_id")), log_dir=row.get("log_dir"), topic=row.get("topic"),
            partition=opt_int(row.get("partition")), base_offset=opt_int(row.get("base_offset")),
            thresholds=json.loads(row.get("thresholds_json") or "{}"),
            evidence=json.loads(row.get("evidence_json") or "[]"),
            evidence_count=int(row.get("evidence_count") or 0),
        )

    def sort_key(self):
        return (-int(self.severity), self.code, self.topic or "", self.partition if self.partition is not None else -1,
                self.broker_id if self.broker_id is not None else -1, self.log_dir or "",
                self.base_offset if self.base_offset is not None else -1, self.message)


def opt_int(value: Any) -> int | None:
    """An integer cell from pandas (float NaN for absence on both engines) as int or None."""
    if value is None or value != value:  # NaN != NaN
        return None
    return int(value)


def metadata_partition_rows(data: "CheckInput", ctx: Any):
    """The partition dirs on disk (live ones) with the KRaft metadata log's view of the cluster,
    for the metadata.* checks: yields ``(moves, row, topic, partition, broker_id)``; nothing when
    no metadata log was read or no partition row is there."""
    moves = ctx.partition_moves
    parts = data.partitions
    if moves is None or parts is None or not len(parts):
        return
    live = parts[parts["dir_kind"] == "live"]
    for row in frame_records(live):
        yield moves, row, row["topic"], opt_int(row["partition"]), opt_int(row["broker_id"])


def frame_records(frame) -> list[dict]:
    """``frame.to_dict("records")``: the same dicts, keys and values (cells of object and extension
    dtypes boxed as pandas boxes them), made column by column from ``frame.items()``. pandas' own
    takes each column with ``iloc`` (~20 µs a column: ~1 ms a call at the segment table's 50 columns,
    whatever the rows), this ~0.1 ms; the per-partition ``run`` calls it per partition and replica.
    Held equal, type for type, by tests/test_frame_records.py."""
    columns = frame.columns.tolist()
    if not columns or not frame.columns.is_unique:  # rows of no column; a name twice: pandas' own
        return frame.to_dict("records")
    import numpy as np
    from pandas.api.extensions import ExtensionDtype
    from pandas.core.dtypes.cast import maybe_box_native  # what to_dict("records") boxes cells with

    series = [s for _, s in frame.items()]
    rows = [dict(zip(columns, values)) for values in zip(*series)]
    boxed = [c for c, s in zip(columns, series) if s.dtype == np.dtype(object) or isinstance(s.dtype, ExtensionDtype)]
    if boxed:
        for row in rows:
            for c in boxed:
                row[c] = maybe_box_native(row[c])
    return rows


def cells(value: Any) -> list:
    """A list cell (numpy array, list or None/NaN) as a plain list."""
    if value is None or (isinstance(value, float) and value != value):
        return []
    return list(value)


def capped(items: Iterable[Any], cap: int = EVIDENCE_CAP) -> tuple[list[Any], int]:
    """The first ``cap`` items and the full count (the iterable is consumed, never stored whole)."""
    kept: list[Any] = []
    count = 0
    for item in items:
        if count < cap:
            kept.append(item)
        count += 1
    return kept, count


@dataclass(frozen=True)
class Option:
    """One threshold or setting of a check, as it appears in the config file."""

    default: Any
    description: str
    kind: type | tuple[type, ...] = float
    validate: Callable[[Any], bool] | None = None
    rule: str = ""
    """What ``validate`` demands, for the error message (e.g. ``">= 1"``)."""

    def check_value(self, where: str, value: Any) -> Any:
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) and bool not in kinds:
            raise ValueError(f"{where}: expected {_kind_names(kinds)}, got {value!r}")
        if value is not None and not isinstance(value, kinds):
            raise ValueError(f"{where}: expected {_kind_names(kinds)}, got {value!r} ({type(value).__name__})")
        if self.validate is not None and value is not None and not self.validate(value):
            raise ValueError(f"{where}: {value!r} breaks the rule {self.rule or 'of this option'}")
        return value


def _default_text(value: Any) -> str:
    """An option's default as the config file writes it (YAML): null, true, false, numbers, names."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def options_section(check: "type[Check] | Check") -> str:
    """The Options section of a check's documentation, from its declared :class:`Option`\\s: one
    line per option, ``name (default): description``, wrapped at 100 columns."""
    import textwrap

    lines = ["Options:"]
    for name, option in check.options.items():
        text = f"{name} ({_default_text(option.default)}): {option.description}."
        lines += textwrap.wrap(text, 100, initial_indent="    ", subsequent_indent="        ", break_on_hyphens=False,
                               break_long_words=False)
    if len(lines) == 1:
        lines.append("    (none)")
    return "\n".join(lines)


def documentation(check: "type[Check] | Check") -> str:
    """A check's whole documentation: its module docstring's prose, then the generated Options."""
    import sys

    doc = (sys.modules[check.__module__].__doc__ or "").replace(OPTIONS_POINTER, "").rstrip()
    return f"{doc}\n\n{options_section(check)}\n"


def _kind_names(kinds: Sequence[type]) -> str:
    return " or ".join("number" if k is float else k.__name__ for k in kinds)


def positive(v) -> bool:
    return v > 0


def non_negative(v) -> bool:
    return v >= 0


def severity_name(v) -> bool:
    return str(v).upper() in Severity.__members__


def severity_option(default: str, description: str = "severity of a finding") -> "Option":
    """The ``severity`` option of a check (and its ``*_severity`` variants): declared once here."""
    return Option(default, description, str, severity_name, "a severity name (PASS, INFO, WARN, FAIL)")


class Check:
    """Base class; subclasses set the class attributes and implement :meth:`run`."""

    code: ClassVar[str]
    name: ClassVar[str]
    title: ClassVar[str]
    scope: ClassVar[str]  # "partition" | "cluster"
    options: ClassVar[dict[str, Option]] = {}
    identity: ClassVar[tuple[str, ...]] = ("topic", "partition", "broker_id", "log_dir")
    """What makes two findings of this check, on two nights, the same problem: finding fields
    (``topic``, ``partition``, ``broker_id``, ``log_dir``) and ``evidence.<key>`` (the first evidence
    item's key, e.g. a consumer group). Never ``base_offset``: segments roll. See
    ``auditor/nightly/identity.py`` and docs/nightly-history.md."""

    replica_columns: ClassVar[tuple[str, ...] | None] = None
    """partition scope, for a check that judges a partition by its live replicas' segment rows:
    the columns its :meth:`judge` reads. Its :meth:`run` is then ``judge`` on records built from
    the partition's frame (:func:`replica_records`), and :meth:`run_batch` hands ``judge`` the
    same records cut from the batch's columns (no pandas frame per flagged partition)."""

    def run(self, data: "CheckInput", ctx: "AuditContext", opts: Mapping[str, Any]) -> Iterable[Finding]:
        raise NotImplementedError

    def judge(self, data: "CheckInput", replicas: list[tuple], ctx: "AuditContext", opts: Mapping[str, Any],
              **extra: Any) -> list[Finding]:
        """The findings of one partition (``data``: its topic and partition) from its live replicas:
        (broker id, log dir, segment rows as dicts with :attr:`replica_columns`, in base-offset
        order), replicas by broker id then log dir. Checks with :attr:`replica_columns` implement it."""
        raise NotImplementedError

    def run_batch(self, batch: "PartitionBatch", ctx: "AuditContext") -> list[Finding]:
        """partition scope: the findings of many partitions at once (a :class:`PartitionBatch`).

        :meth:`run` on each partition :meth:`prefilter` names: with the default prefilter (every
        partition) that is today's per-partition semantics, the reference; a check whose prefilter
        is a vectorized superset of the partitions that can give a finding returns the same
        findings by construction, at column-operation cost for the partitions without one. A check
        with :attr:`replica_columns` judges those partitions from the batch's columns, all their
        rows cut at once (:meth:`PartitionBatch.judged`); a check that overrides
        this builds its findings columnar (:mod:`checks.framework.columns`)."""
        if self.replica_columns is not None:
            return batch.judged(self, ctx)
        return batch.run_each(self, ctx, self.prefilter(batch, ctx))

    def judge_extra(self, batch: "PartitionBatch", ctx: "AuditContext") -> "Callable[[int], dict] | None":
        """What :meth:`judge` reads besides the live replicas, for the batch's partition ``i``
        (keyword arguments), computed once per batch; None: nothing."""
        return None

    def prefilter(self, batch: "PartitionBatch", ctx: "AuditContext") -> "Iterable[int] | None":
        """Indices into ``batch.keys`` of the partitions that may give a finding (a superset is
        fine, a missing one is a bug: tests/test_batch_checks.py holds every check to the
        reference); None: every partition."""
        return None

    # Helpers so findings are built the same way everywhere.
    def finding(self, severity: Severity | str, message: str, fix: str = "", *, thresholds: Mapping[str, Any] | None = None,
                evidence: Iterable[dict] = (), cap: int = EVIDENCE_CAP, **location: Any) -> Finding:
        if type(evidence) is list:  # a list's first items and length: what capped() gives, without the walk
            kept, count = evidence[:cap], len(evidence)
        else:
            kept, count = capped(evidence, cap)
        return Finding(code=self.code, check=self.name, severity=Severity.parse(severity), message=message, fix=fix,
                       thresholds=dict(thresholds or {}), evidence=kept, evidence_count=count, **location)

    def passed(self, message: str, **location: Any) -> Finding:
        return self.finding(Severity.PASS, message, **location)


@dataclass
class CheckInput:
    """What one ``run`` call sees (pandas DataFrames; see the module docstring for scopes).

    partition scope: ``segments`` (segment rows of one topic-partition, every replica) and
    ``partitions`` (its partition-dir rows). cluster scope: ``replica_stats``,
    ``topic_stats``, ``broker_stats``, ``log_dir_stats`` (the Spark job's aggregates) and
    ``partitions`` (all partition-dir rows).
    """

    topic: str | None = None
    partition: int | None = None
    segments: Any = None
    partitions: Any = None
    replica_stats: Any = None
    topic_stats: Any = None
    broker_stats: Any = None
    log_dir_stats: Any = None
    replay: Any = None
    """partition scope, ``replay.safety``: the replay search of this partition
    (``auditor.replay.predict_replicas``), done by the pipeline before the checks; None: not done."""


@dataclass
class AuditContext:
    """Everything a check may know besides the data: the audit time, config, the replay ask.

    ``topic_configs`` holds the live cluster's topic configs (``auditor.live_config``) when the
    audit was given a bootstrap server; :meth:`kafka_setting` falls back to the config file's
    ``kafka`` section (defaults and per-topic) and then to Kafka's own default.
    """

    as_of_ms: int
    config: "Any"  # checks.framework.config.Config
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    replay_at_ms: int | None = None
    replay_topics: tuple[str, ...] | None = None
    remote_logs: Any = None
    """tiered storage: what ``__remote_log_metadata`` says (an
    ``auditor.cluster.remote_storage.RemoteLogMetadata``), when it was read."""
    remote_storage_dir: str | None = None
    """tiered storage: LocalTieredStorage's directory (remote segments' files), for exact answers."""

    def remote_partition(self, topic: str, partition: int, topic_id: str | None = None):
        """The partition's remote storage view (``RemotePartition``), or None when none was read."""
        if self.remote_logs is None:
            return None
        return self.remote_logs.get(topic, partition, topic_id)

    cluster_state: Any = None
    """The cluster as the KRaft metadata log records it (an
    ``auditor.cluster.metadata_state.ClusterState``: replica sets, leaders, racks), when one was
    read; the audit plans the fix for disk skew from it (``auditor.audit.skew_plan``)."""

    partition_moves: Any = None
    """The KRaft metadata log's replica-set changes and log-dir moves (an
    ``auditor.cluster.metadata_state.PartitionMoves``), when a metadata log was read; KLA020 names
    the recorded event instead of guessing."""

    keys: Any = None
    """The key statistics per topic-partition and each topic's partitioner verdict (an
    ``auditor.keys.audit_keys.KeyAudit``), when the audit read them (``--keys``, or manifests
    collected with ``--keys``); None: not asked. The keys.* checks and KLA001's cause read it."""

    key_partitions: tuple | None = None
    """(partition count per topic, partitions added after each topic's creation) from the KRaft
    metadata log (``auditor.keys.audit_keys.metadata_partitions``), for the key statistics'
    partitioner verdicts; None: no metadata log read."""

    group_offsets: tuple = ()
    """Consumer groups' committed offsets, read from ``__consumer_offsets`` on disk
    (``auditor.cluster.consumer_groups.commit_rows``) or handed in: dicts with group, topic,
    partition, committed_offset, commit_timestamp_ms, protocol. Empty when not read."""

    topic_config_sources: dict[str, dict[str, str]] = field(default_factory=dict)
    """Where each of ``topic_configs`` came from: {topic: {config: "live cluster" | "metadata log:
    topic config" | "metadata log: cluster default"}} (``auditor.audit.topic_config_layers``);
    empty when unknown."""

    broker_settings: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Broker settings the capacity projection reads (``log.retention.check.interval.ms``,
    ``log.cleaner.backoff.ms``): {config: (value, where)} from the metadata log's dynamic cluster
    defaults, then a live broker's (``--bootstrap-server``: its static settings too); empty:
    the config file's ``kafka:`` block or Kafka's defaults."""

    metadata_notes: list[str] = field(default_factory=list)
    """Problems met reading the KRaft metadata log (file, offset, what), for the audit's outcome."""

    capacity: Any = None
    """The capacity projection (``auditor.capacity.CapacityResult``: per filesystem under the
    audited log dirs, bytes over the horizon, steady state, time to full and why), made by the
    engines before the checks; None: not made. The capacity.* checks judge it."""

    _commits_by_tp: dict | None = field(default=None, init=False, repr=False, compare=False)
    """:meth:`commits_on`'s index of ``group_offsets`` by (topic, partition), built on first use."""

    def options(self, check: type[Check] | Check, topic: str | None) -> dict[str, Any]:
        return self.config.options(check, topic)

    def kafka_setting(self, topic: str | None, key: str) -> str | None:
        if topic is not None and key in self.topic_configs.get(topic, {}):
            return self.topic_configs[topic][key]
        return self.config.kafka_setting(topic, key)

    def kafka_int(self, topic: str | None, key: str) -> int | None:
        value = self.kafka_setting(topic, key)
        return None if value is None else int(value)

    def commits_on(self, topic: str | None, partition: int | None) -> list[dict]:
        """The committed offsets of every consumer group on one topic-partition."""
        if self._commits_by_tp is None:
            index: dict = {}
            for c in self.group_offsets:
                index.setdefault((c["topic"], c["partition"]), []).append(c)
            self._commits_by_tp = index
        return self._commits_by_tp.get((topic, partition), [])

    def all_commits(self) -> list[dict]:
        """Every committed offset of every consumer group."""
        return list(self.group_offsets)

    def wants_replay(self, topic: str) -> bool:
        if self.replay_at_ms is None:
            return False
        return self.replay_topics is None or topic in self.replay_topics


def live_replicas(segments) -> list[tuple[int | None, str, Any]]:
    """The live replicas in a partition's segment rows: (broker id, log dir, DataFrame of its
    normal segments with a .log, sorted by base offset). ``-future``/``-delete`` copies and
    ``.deleted``/``.cleaned``/``.swap`` files are left out."""
    if segments is None or not len(segments):
        return []
    live = segments[(segments["dir_kind"] == "live") & segments["file_state"].isna() & segments["log_size_bytes"].notna()]
    out = []
    for (broker, log_dir), rows in live.groupby(["broker_id", "log_dir"], dropna=False, sort=True):
        out.append((opt_int(broker), log_dir, rows.sort_values("base_offset").reset_index(drop=True)))
    return out


def replica_records(segments) -> list[tuple[int | None, str, list[dict]]]:
    """:func:`live_replicas` with each replica's rows as dicts (what :meth:`Check.judge` reads)."""
    return [(broker, log_dir, frame_records(rows)) for broker, log_dir, rows in live_replicas(segments)]


def segment_file(row) -> str:
    """The .log path of a segment row, for messages and evidence."""
    return f"{row['log_dir']}/{row['dir_name']}/{int(row['base_offset']):020d}.log"


def error_finding(check: "type[Check] | Check", exc: Exception, topic=None, partition=None) -> Finding:
    """A check that raised, as a FAIL finding naming it: a bug of ours, but one bad partition must
    not hide the others."""
    return Finding(code=check.code, check=check.name, severity=Severity.FAIL, topic=topic, partition=partition,
                   message=f"check {check.name} failed on this input: {type(exc).__name__}: {exc}",
                   fix="Report this to the kafka-log-auditor maintainers with the segment rows of this partition.")
