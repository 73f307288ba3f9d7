"""The tables the auditor produces, declared once.

Every consumer (the in-process scanner, the Spark job, the checks, Great Expectations,
the reports and the tests) takes its columns from here. Conventions:

* units are in the names (``size_bytes``, ``mtime_ms``, ``max_timestamp_ms``);
* absence is ``None``, never Kafka's ``-1`` sentinel;
* times are epoch milliseconds (UTC) in the tables; humans see ISO-8601 with the zone;
* a value is only filled when the scan depth that produced the row can know it exactly,
  except where a column's description says it is a bound.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from auditor import __version__
from auditor.json_stream import Encoded
from auditor.units import iso_utc

if TYPE_CHECKING:
    import pyarrow as pa  # imported where a schema is built: the scanner and replay-check need no Arrow

TOOL = "kafka-log-auditor"

DEPTHS = ("stat", "index", "headers", "deep")
"""Scan depths, cheapest first: each one fills every column the previous one does."""


@dataclass(frozen=True)
class Column:
    name: str
    type_name: str
    """The Arrow type, by name (:data:`ARROW_TYPES`); :attr:`type` is the ``pa.DataType``."""
    description: str
    depth: str = "stat"
    """The cheapest depth that fills this column."""
    instant: bool = False
    """An instant in epoch milliseconds (JSON adds its ISO-8601 ``_utc`` twin); a duration is not."""

    @property
    def type(self) -> pa.DataType:
        return arrow_type(self.type_name)

    @property
    def is_list(self) -> bool:
        return self.type_name.startswith("list<")


ARROW_TYPES = {
    "int32": lambda pa: pa.int32(),
    "int64": lambda pa: pa.int64(),
    "string": lambda pa: pa.string(),
    "bool": lambda pa: pa.bool_(),
    "list<string>": lambda pa: pa.list_(pa.string()),
    "list<int32>": lambda pa: pa.list_(pa.int32()),
    "list<struct<epoch: int32, start_offset: int64>>":
        lambda pa: pa.list_(pa.struct([("epoch", pa.int32()), ("start_offset", pa.int64())])),
}
"""Column type names to their Arrow types. The columns name their types rather than hold them, so
that importing this module does not import pyarrow (and numpy with it): the scanner, replay-check
and the JSON writers run without Arrow; the schemas are built on first use."""


def arrow_type(name: str) -> pa.DataType:
    import pyarrow as pa

    return ARROW_TYPES[name](pa)


_STR_LIST = "list<string>"
_INT_LIST = "list<int32>"

_LOCATION = [
    Column("broker_id", "int32", "node.id (KRaft) or broker.id (ZooKeeper) from the log dir's meta.properties"),
    Column("cluster_id", "string", "cluster.id from meta.properties"),
    Column("log_dir", "string", "absolute path of the log dir as given to the scanner"),
    Column("topic", "string", "topic name parsed from the partition directory"),
    Column("partition", "int32", "partition number parsed from the partition directory"),
    Column("dir_kind", "string", "live | future | delete | stray | metadata (KRaft __cluster_metadata)"),
    Column("dir_name", "string", "the partition directory's own name"),
]

SEGMENT_COLUMNS: tuple[Column, ...] = tuple(
    _LOCATION
    + [
        Column("base_offset", "int64", "base offset from the segment file name"),
        Column("file_state", "string", "None for a normal segment, else deleted | cleaned | swap (suffix after the name)"),
        Column("is_active", "bool", "the partition's highest-base-offset live segment (the one being appended to)"),
        Column("log_size_bytes", "int64", ".log size; None when the .log is missing"),
        Column("index_size_bytes", "int64", ".index size (preallocated size for the active segment)"),
        Column("timeindex_size_bytes", "int64", ".timeindex size (preallocated size for the active segment)"),
        Column("txnindex_size_bytes", "int64", ".txnindex size; None when absent (the normal case)"),
        Column("log_mtime_ms", "int64", ".log last-modified time, the input of the legacy (v0) ListOffsets lookup", instant=True),
        Column("index_mtime_ms", "int64", ".index last-modified time", instant=True),
        Column("timeindex_mtime_ms", "int64", ".timeindex last-modified time", instant=True),
        Column("first_offset", "int64", "base offset of the first batch", "index"),
        Column("first_batch_max_timestamp_ms", "int64", "max timestamp of the first batch (drives time-based rolls)", "index", instant=True),
        Column("last_offset", "int64", "last offset of the last complete batch", "index"),
        Column("last_batch_max_timestamp_ms", "int64", "max timestamp of the last complete batch", "index", instant=True),
        Column("last_index_offset", "int64", "absolute offset of the last valid .index entry", "index"),
        Column("last_index_position", "int64", "byte position of the last valid .index entry", "index"),
        Column("last_timeindex_timestamp_ms", "int64", "timestamp of the last valid .timeindex entry", "index", instant=True),
        Column("last_timeindex_offset", "int64", "offset of the last valid .timeindex entry", "index"),
        Column("index_entries", "int64", "valid .index entries (zero tail excluded)", "index"),
        Column("timeindex_entries", "int64", "valid .timeindex entries (zero tail excluded)", "index"),
        Column(
            "max_timestamp_ms",
            "int64",
            "largest record timestamp: exact from 'headers' on; at 'index' depth the broker's own "
            "view (last time-index entry, then the batches after the last index entry)",
            "index",
            instant=True,
        ),
        Column(
            "min_batch_timestamp_ms",
            "int64",
            "smallest first-record timestamp over batches (v2 CreateTime baseTimestamp, LogAppendTime "
            "batch time, legacy message time): an upper bound on the oldest record",
            "headers",
            instant=True,
        ),
        Column("min_timestamp_ms", "int64", "smallest record timestamp, exact (every record read)", "deep", instant=True),
        Column("min_timestamp_offset", "int64", "offset of the (first) record with the smallest timestamp", "deep"),
        Column("max_timestamp_offset", "int64", "offset of the first record carrying the largest record timestamp", "deep"),
        Column(
            "max_backward_jump_ms",
            "int64",
            "largest step back in time: max over records of (largest timestamp before it in the segment - its "
            "timestamp); 0 when timestamps never go back",
            "deep",
        ),
        Column("max_backward_jump_offset", "int64", "offset of the record where max_backward_jump_ms was seen", "deep"),
        Column("batch_count", "int64", "batches (v2) or shallow messages (magic 0/1)", "headers"),
        Column("record_count", "int64", "records; None at 'headers' when legacy compressed wrappers need decompression", "headers"),
        Column("timestamp_types", _STR_LIST, "distinct timestamp types seen: CreateTime, LogAppendTime, NoTimestampType", "headers"),
        Column("magics", _INT_LIST, "distinct magic values seen", "headers"),
        Column("codecs", _STR_LIST, "distinct compression codecs seen", "headers"),
        Column("transactional_batches", "int64", "batches with the transactional bit", "headers"),
        Column("control_batches", "int64", "control batches (transaction markers, KRaft control records)", "headers"),
        Column("abort_markers", "int64", "ABORT control records", "headers"),
        Column("commit_markers", "int64", "COMMIT control records", "headers"),
        Column("aborted_txns", "int64", "entries in the .txnindex", "index"),
        Column("crc_failures", "int64", "batches whose stored CRC differs from the computed one", "deep"),
        Column("trailing_bytes", "int64", "bytes after the last complete batch", "headers"),
        Column("stop_reason", "string", "why the walk of the .log stopped early: partial-tail | zero-tail | corrupt | io-error", "index"),
        Column("depth", "string", "the depth this row was scanned at"),
        Column("scanned_at_ms", "int64", "when this segment was read", instant=True),
        Column("notes", _STR_LIST, "every oddity met, each naming file, byte position, field and value"),
    ]
)

LEADER_EPOCH_TYPE = "list<struct<epoch: int32, start_offset: int64>>"

PARTITION_COLUMNS: tuple[Column, ...] = tuple(
    _LOCATION
    + [
        Column("topic_id", "string", "topic id from partition.metadata (None on ZooKeeper-era data)"),
        Column("segment_count", "int64", "segments (.log files in a normal state)"),
        Column("size_bytes", "int64", "bytes of all segment .log files"),
        Column("log_start_offset", "int64", "log-start-offset-checkpoint, else the first segment's base offset"),
        Column("log_start_offset_source", "string", "checkpoint | first-segment"),
        Column("log_end_offset", "int64", "last offset + 1 of the active segment (needs depth index or more)", "index"),
        Column("high_watermark", "int64", "replication-offset-checkpoint"),
        Column("recovery_point", "int64", "recovery-point-offset-checkpoint"),
        Column("cleaner_offset", "int64", "cleaner-offset-checkpoint (compacted topics)"),
        Column("leader_epochs", LEADER_EPOCH_TYPE, "leader-epoch-checkpoint entries"),
        Column("latest_leader_epoch", "int32", "last leader-epoch-checkpoint entry's epoch"),
        Column("producer_snapshots", "int64", "producer state .snapshot files"),
        Column("oldest_log_mtime_ms", "int64", "oldest .log mtime of the partition", instant=True),
        Column("newest_log_mtime_ms", "int64", "newest .log mtime of the partition", instant=True),
        Column("depth", "string", "the depth this row was scanned at"),
        Column("notes", _STR_LIST, "every oddity met at partition level"),
    ]
)

FINDING_COLUMNS: tuple[Column, ...] = (
    Column("code", "string", "stable check code, KLA + 3 digits"),
    Column("check", "string", "the check's dotted name (also its config key)"),
    Column("severity", "string", "PASS | INFO | WARN | FAIL"),
    Column("message", "string", "what is wrong, with the numbers"),
    Column("fix", "string", "what to do about it"),
    Column("broker_id", "int32", "broker, when the finding is about one"),
    Column("log_dir", "string", "log dir, when the finding is about one"),
    Column("topic", "string", "topic, when the finding is about one"),
    Column("partition", "int32", "partition, when the finding is about one"),
    Column("base_offset", "int64", "segment base offset, when the finding is about one segment"),
    Column("thresholds_json", "string", "the thresholds used, as a JSON object"),
    Column("evidence_json", "string", "the offending values (capped), as a JSON array"),
    Column("evidence_count", "int64", "how many evidence items there were before capping"),
)

SEGMENT_KEY = ("broker_id", "log_dir", "topic", "partition", "dir_name", "base_offset", "file_state")
PARTITION_KEY = ("broker_id", "log_dir", "topic", "partition", "dir_name")
PARTITION_DIR_KEYS = ("broker_id", "log_dir", "topic", "partition", "dir_kind", "dir_name")
"""What joins a partition dir's row to its segments' rows in the aggregates (both engines)."""


def arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(c.name, c.type, nullable=True) for c in columns])


_SCHEMAS = {"SEGMENT_SCHEMA": SEGMENT_COLUMNS, "PARTITION_SCHEMA": PARTITION_COLUMNS, "FINDING_SCHEMA": FINDING_COLUMNS}
"""``SEGMENT_SCHEMA``, ``PARTITION_SCHEMA``, ``FINDING_SCHEMA``: the Arrow schemas of the columns,
built (pyarrow imported) on first use by the module's ``__getattr__``, then kept as attributes."""


def __getattr__(name: str):
    columns = _SCHEMAS.get(name)
    if columns is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    schema = globals()[name] = arrow_schema(columns)
    return schema


FINDING_FIELDS = tuple(c.name for c in FINDING_COLUMNS)
SEGMENT_FIELDS = tuple(c.name for c in SEGMENT_COLUMNS)
PARTITION_FIELDS = tuple(c.name for c in PARTITION_COLUMNS)


_EMPTY_TEMPLATES: dict[int, tuple[tuple[Column, ...], dict, tuple[str, ...]]] = {}


def empty_row(columns: tuple[Column, ...]) -> dict:
    """A row with every column present and absent (None); lists start empty (a new list each)."""
    # Keyed by identity (hashing 60 dataclasses per row would cost more than it saves); the
    # tuple is kept in the value so its id cannot be reused by another object.
    cached = _EMPTY_TEMPLATES.get(id(columns))
    if cached is None or cached[0] is not columns:
        template = {c.name: None for c in columns}
        list_columns = tuple(c.name for c in columns if c.is_list)
        cached = _EMPTY_TEMPLATES[id(columns)] = (columns, template, list_columns)
    _, template, list_columns = cached
    row = template.copy()
    for name in list_columns:
        row[name] = []
    return row


def to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_pylist(rows, schema=schema)


def read_parquet(path: str | os.PathLike, *, schema: pa.Schema | None = None,
                 columns: list[str] | None = None) -> pa.Table:
    """``pq.read_table`` of one file (manifests' tables), for a local one without ``pyarrow.dataset``
    (its import pulls in pandas: ~0.3 s that replay-check does not need): with ``schema``, its
    columns in its order, cast, the ones the file lacks null (an older manifest), as
    ``read_table(schema=)`` gives them; a column asked for and missing raises ValueError, as there.
    A URL (``s3://`` ...) goes through ``read_table`` and its filesystems."""
    import pyarrow as pa
    import pyarrow.parquet as pq  # here: the scanner and the JSON writers need no Parquet

    if "://" in str(path):
        from auditor.object_store import is_s3, read_bytes

        if not is_s3(str(path)):
            return pq.read_table(str(path), schema=schema, columns=columns)
        # the environment's S3 settings (auditor.object_store), one GET of the whole object (a
        # manifest's table is small): no dataset scan and its I/O threads on the S3 client
        path = pa.BufferReader(read_bytes(str(path)))
    pf = pq.ParquetFile(path)
    missing = [c for c in columns or () if c not in pf.schema_arrow.names]
    if missing:  # ParquetFile would leave them out
        raise ValueError(f"{path}: no column {missing[0]!r}")
    table = pf.read(columns=columns)
    if schema is None:
        return table
    arrays = [table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
              for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def spark_schema(schema: pa.Schema):
    """The same schema as a Spark StructType (imported lazily: the scanner runs without Spark)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def json_envelope(**fields) -> dict:
    """The head of every JSON document the tool publishes (scan, audit, replay-check): the tool
    and its version first, then ``fields`` in the order given."""
    return {"tool": TOOL, "version": __version__, **fields}


MAX_TIMELINE_PARTITIONS = 6
"""The findings document's ``tables.timelines`` holds the live segments of at most this many
partitions (the worst flagged ones, ``auditor.audit``); the report draws a chart for each."""


EVIDENCE_INSTANTS = (
    "replay_at_ms", "at_ms", "timestamp_ms", "oldest_timestamp_ms", "newest_timestamp_ms", "modern_timestamp_ms",
    "largest_timestamp_ms", "commit_timestamp_ms", "as_of_ms", "deletion_time_ms",
    "deletable_at_ms", "due_ms", "appended_before_ms", "appended_after_ms", "mtime_first_ms", "mtime_last_ms",
    "created_timestamp_ms",
)
"""Keys of findings' evidence and thresholds that hold an instant (epoch ms), besides the columns
above; every other ``*_ms`` key there is a duration (gap_ms, excess_ms, retention_ms ...)."""

INSTANT_FIELDS = frozenset(
    [c.name for c in (*SEGMENT_COLUMNS, *PARTITION_COLUMNS, *FINDING_COLUMNS) if c.instant] + list(EVIDENCE_INSTANTS))
"""Names holding an instant (epoch ms): the only ones that get a ``_utc`` twin."""


def with_utc(row: dict) -> dict:
    """A row for JSON: exact values kept, plus an ISO-8601 UTC twin after every instant column
    (never after a duration such as ``max_backward_jump_ms``)."""
    out = dict(row)
    for key, value in row.items():
        if key in INSTANT_FIELDS and isinstance(value, int):
            out[key[:-3] + "_utc"] = iso_utc(value)
    return out


_ISO_MIN_MS, _ISO_MAX_MS = -62_135_596_800_000, 253_402_300_799_999
"""Epoch ms of 0001-01-01 and the last millisecond of 9999: ``iso_utc``'s range."""


def _utc_twin_texts(rows: list[dict], keys: list[str]) -> dict[str, list[str | None]]:
    """Per instant column, every row's ISO-8601 twin (None where with_utc adds none), formatted by
    Arrow in one call per column; values outside iso_utc's range keep iso_utc's own text."""
    import pyarrow as pa
    import pyarrow.compute as pc  # here: ~0.1 s of import that commands not printing rows skip (replay-check)

    twins = {}
    for key in keys:
        values = [r.get(key) for r in rows]
        ok = [int(v) if isinstance(v, int) and _ISO_MIN_MS <= v <= _ISO_MAX_MS else None for v in values]
        text = pc.strftime(pa.array(ok, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
                           format="%Y-%m-%dT%H:%M:%SZ").to_pylist()
        twins[key] = [t if t is not None or not isinstance(v, int) else iso_utc(v) for t, v in zip(text, values)]
    return twins


def rows_with_utc(rows: list[dict]) -> list[dict]:
    """:func:`with_utc` over many rows at once, equal to it row for row (twins by Arrow, one call per
    column). Rows whose keys differ from the first row's go through :func:`with_utc`."""
    if not rows:
        return []
    first = rows[0].keys()
    keys = [k for k in first if k in INSTANT_FIELDS]
    twins = _utc_twin_texts(rows, keys)
    out = []
    for i, row in enumerate(rows):
        if row.keys() != first:
            out.append(with_utc(row))
            continue
        twin_row = dict(row)
        for key in keys:
            text = twins[key][i]
            if text is not None:
                twin_row[key[:-3] + "_utc"] = text
        out.append(twin_row)
    return out


def json_rows_with_utc(rows: list[dict], default=None) -> Iterator[Encoded]:
    """The JSON text of :func:`with_utc` of each row, for :mod:`auditor.json_stream`: the row encoded
    by the C encoder, its twins (formatted by Arrow per column) appended to the same object, so no
    row is copied (``scan --json``'s output cost; parses equal to ``json.dumps(with_utc(row))``)."""
    if not rows:
        return
    first = rows[0].keys()
    keys = [k for k in first if k in INSTANT_FIELDS]
    twins = _utc_twin_texts(rows, keys)
    tails = {k: [None if t is None else f', "{k[:-3]}_utc": "{t}"' for t in twins[k]] for k in keys}
    for i, row in enumerate(rows):
        if row.keys() != first:
            yield Encoded(json.dumps(with_utc(row), default=default))
            continue
        text = json.dumps(row, default=default)
        extra = "".join(t for t in (tails[k][i] for k in keys) if t is not None)
        if extra and text != "{}":
            text = text[:-1] + extra + "}"
        elif extra:
            text = "{" + extra[2:] + "}"
        yield Encoded(text)
