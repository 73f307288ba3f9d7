"""Great Expectations over the segment table itself (KLA090 expectations.segment_table).

The rule checks trust the table; this suite checks the table: the declared columns in order,
keys present and unique (``auditor.schema.SEGMENT_KEY``), offsets and timestamps ordered within
each row, sizes within what ``segment.bytes`` allows, times inside sane bounds, enumerations
within their values. Each engine runs it its own way (``auditor.engines.spark.expectations``: one GX validation
on the Spark DataFrame; ``auditor.engines.local.expectations``: GX's pandas datasource, a few
columns at a time) through :func:`validate`: the same suite, results and findings on the same rows
(tests/test_local_engine.py). An ephemeral GX
context: nothing is written to disk, no usage statistics or network calls (GX 1.24 has none), no
progress bars. GX is imported without the modules this suite never uses (``checks.framework.gx_import``:
about half of GX's import cost). Every failed expectation becomes a finding beside the
rule checks, with GX's own counts and samples; when all pass, one PASS finding says so.

Why the size bound uses the largest configured ``segment.bytes``: a column expectation applies
one bound to every row, and topics may each set their own ``segment.bytes`` (config file, live
cluster). The largest value is the only bound no healthy segment of any topic can break; the
per-topic view belongs to a rule check. The broker rolls a segment before an append would take
it past ``segment.bytes`` (``LocalLog.shouldRoll``), but a topic whose ``segment.bytes`` was
lowered keeps its older, larger segments, and one batch may be larger than ``segment.bytes``
itself, so the bound adds one ``message.max.bytes`` (its default) and a failure is only a WARN.
"""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field
from typing import Any

from auditor.schema import DEPTHS, SEGMENT_FIELDS, SEGMENT_KEY
from checks.framework.base import Finding, Severity, capped

CODE = "KLA090"
CHECK = "expectations.segment_table"
EPOCH_2000_MS = 946_684_800_000
"""Earliest sane record timestamp and mtime: Kafka (2011) never stored older real data."""
YEAR_MS = 365 * 86_400_000
FUTURE_SLACK_TIMESTAMP_MS = 10 * YEAR_MS
"""Record timestamps further than this after the audit are not clock skew but garbage."""
FUTURE_SLACK_MTIME_MS = 86_400_000
"""An mtime a day after the audit: a broker clock set ahead, or files copied from one."""
DIR_KINDS = ["live", "future", "delete", "stray", "metadata"]
FILE_STATES = ["deleted", "cleaned", "swap"]
MESSAGE_MAX_BYTES = 1_048_588
"""Kafka's default message.max.bytes: one batch may take a segment past segment.bytes."""
SAMPLES = 10
"""Unexpected values kept per expectation (GX's partial list)."""
RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": SAMPLES}
"""What GX reports per expectation: BASIC carries everything the findings, the report and the JSON
read (element and unexpected counts, the percent of all rows, the partial list of unexpected values,
a table expectation's details); SUMMARY adds per expectation the indices of unexpected rows and a
query for them (two more metrics GX computes on the data for every column map, pair and compound
expectation, ~30% of the suite's validation CPU at 100,542 rows) and a count per partial value,
none of which is read. The same entries either way (tests/test_expectations_parts.py)."""


@dataclass
class ExpectationsResult:
    """One validation's outcome: overall success, one dict per expectation, the findings."""

    success: bool
    results: list[dict[str, Any]]
    findings: list[Finding]
    gx_version: str
    element_count: int | None = None
    notes: list[str] = field(default_factory=list)


def largest_segment_bytes(ctx) -> int:
    """The largest segment.bytes any topic may use: the default (config file or Kafka's), every
    per-topic override of the config file and every live topic config (see the module doc)."""
    values = [ctx.kafka_int(None, "segment.bytes") or 1 << 30]
    for configs in ctx.topic_configs.values():
        if configs.get("segment.bytes") is not None:
            values.append(int(configs["segment.bytes"]))
    for _pattern, _checks, kafka in ctx.config.topics:
        if "segment.bytes" in kafka:
            values.append(int(kafka["segment.bytes"]))
    return max(values)


def _pair(a: str, b: str, description: str, severity: Severity) -> tuple[str, dict, str, Severity]:
    """``a >= b`` on every row where both are known (absence is None: not a violation)."""
    return ("ExpectColumnPairValuesAToBeGreaterThanB",
            {"column_A": a, "column_B": b, "or_equal": True, "ignore_row_if": "either_value_is_missing"},
            description, severity)


def suite_spec(ctx) -> list[tuple[str, dict, str, Severity]]:
    """(GX expectation class name, kwargs, plain-English description, severity when it fails)."""
    max_segment = largest_segment_bytes(ctx) + MESSAGE_MAX_BYTES
    latest_timestamp = ctx.as_of_ms + FUTURE_SLACK_TIMESTAMP_MS
    latest_mtime = ctx.as_of_ms + FUTURE_SLACK_MTIME_MS
    spec: list[tuple[str, dict, str, Severity]] = [
        ("ExpectTableColumnsToMatchOrderedList", {"column_list": list(SEGMENT_FIELDS)},
         "the table has exactly the declared segment columns, in order (auditor/schema.py)", Severity.FAIL),
    ]
    for col in ("log_dir", "topic", "partition", "dir_name", "dir_kind", "base_offset", "depth", "broker_id"):
        # broker_id is None when a log dir has no meta.properties: a scan note, not a broken table.
        spec.append(("ExpectColumnValuesToNotBeNull", {"column": col},
                     f"every segment row has a {col}", Severity.FAIL if col != "broker_id" else Severity.WARN))
    spec += [
        ("ExpectCompoundColumnsToBeUnique", {"column_list": list(SEGMENT_KEY)},
         "each segment appears once (broker, log dir, topic, partition, directory, base offset, file state)",
         Severity.FAIL),
        ("ExpectColumnValuesToBeBetween", {"column": "partition", "min_value": 0},
         "partition numbers are not negative", Severity.FAIL),
        ("ExpectColumnValuesToBeBetween", {"column": "base_offset", "min_value": 0},
         "segment base offsets (file names) are not negative", Severity.FAIL),
        _pair("first_offset", "base_offset", "a segment's first batch is not before its base offset (file name)",
              Severity.FAIL),
        _pair("last_offset", "base_offset", "a segment's last offset is not below its base offset (file name)",
              Severity.FAIL),
        _pair("last_offset", "first_offset", "a segment's last offset is not below its first offset", Severity.FAIL),
        _pair("max_timestamp_ms", "min_timestamp_ms", "the largest record timestamp is not below the smallest",
              Severity.FAIL),
        _pair("min_timestamp_offset", "first_offset", "the oldest record's offset lies inside the segment",
              Severity.FAIL),
        _pair("last_offset", "max_timestamp_offset", "the newest record's offset lies inside the segment",
              Severity.FAIL),
        ("ExpectColumnValuesToBeBetween", {"column": "log_size_bytes", "min_value": 0, "max_value": max_segment},
         f"a .log is at most the largest segment.bytes plus one batch ({max_segment:,} bytes)", Severity.WARN),
        ("ExpectColumnValuesToBeBetween",
         {"column": "max_timestamp_ms", "min_value": EPOCH_2000_MS, "max_value": latest_timestamp},
         "largest record timestamps lie between 2000-01-01 and ten years after the audit", Severity.WARN),
        ("ExpectColumnValuesToBeBetween",
         {"column": "min_timestamp_ms", "min_value": EPOCH_2000_MS, "max_value": latest_timestamp},
         "smallest record timestamps lie between 2000-01-01 and ten years after the audit", Severity.WARN),
        ("ExpectColumnValuesToBeBetween", {"column": "log_mtime_ms", "min_value": EPOCH_2000_MS,
                                           "max_value": latest_mtime},
         ".log mtimes lie between 2000-01-01 and one day after the audit (not a clock set ahead)", Severity.WARN),
        ("ExpectColumnValuesToBeBetween", {"column": "max_backward_jump_ms", "min_value": 0},
         "backward timestamp jumps are never negative", Severity.FAIL),
        ("ExpectColumnValuesToBeBetween", {"column": "trailing_bytes", "min_value": 0},
         "trailing bytes are never negative", Severity.FAIL),
        ("ExpectColumnValuesToBeBetween", {"column": "batch_count", "min_value": 0},
         "batch counts are never negative", Severity.FAIL),
        ("ExpectColumnValuesToBeBetween", {"column": "record_count", "min_value": 0},
         "record counts are never negative", Severity.FAIL),
        ("ExpectColumnValuesToBeInSet", {"column": "dir_kind", "value_set": DIR_KINDS},
         "directory kinds are ones Kafka uses", Severity.FAIL),
        ("ExpectColumnValuesToBeInSet", {"column": "file_state", "value_set": FILE_STATES},
         "file states are ones Kafka uses (.deleted, .cleaned, .swap)", Severity.FAIL),
        ("ExpectColumnValuesToBeInSet", {"column": "depth", "value_set": list(DEPTHS)},
         "scan depths are known", Severity.FAIL),
    ]
    return spec


SOURCE_NAME = "kafka_log_auditor"  # the suite's GX datasource
NAMES_ONLY = ("ExpectTableColumnsToMatchOrderedList",)
"""Expectations that read the table's column names and nothing else."""


@contextlib.contextmanager
def _no_batch_fingerprint():
    """GX's pandas engine marks each batch with a fingerprint of its data (an md5 of
    ``pd.util.hash_pandas_object``: ~40 ms a batch at a million rows, more on string columns), a
    batch marker this suite never reads (the results carry none of it); GX itself skips it for
    frames of ``HASH_THRESHOLD`` bytes and more. That threshold is 0 while the suite validates."""
    from great_expectations.execution_engine import pandas_execution_engine as engine

    threshold = engine.HASH_THRESHOLD
    engine.HASH_THRESHOLD = 0
    try:
        yield
    finally:
        engine.HASH_THRESHOLD = threshold


def gx_context(gx):
    """An ephemeral GX context (nothing written to disk) without progress bars (no tqdm in DAG / CLI logs)."""
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


def spec_in_order(ctx) -> list:
    """The suite's expectations with their positions (the results are put back in this order)."""
    return list(enumerate(suite_spec(ctx)))


def validate(gx, context, source, parts, spec, release=None) -> ExpectationsResult:
    """Each part's expectations validated on its frame (:func:`validate_parts`), the results in the
    suite's order, failed expectations as findings, and one PASS finding when all are met."""
    validated = validate_parts(gx, context, source, parts, release)
    ordered = sorted((r for outcome in validated for r in outcome.results),
                     key=lambda r: (r.expectation_config.meta or {}).get("kla_index", len(spec)))
    results = [_result_entry(r) for r in ordered]
    element_count = next((e["element_count"] for e in results if e["element_count"] is not None), None)
    findings = [_finding(e) for e in results if not e["success"]]
    success = all(bool(outcome.success) for outcome in validated) and not findings
    if success:
        rows = f" over {element_count:,} segment rows" if element_count is not None else ""
        findings.append(Finding(code=CODE, check=CHECK, severity=Severity.PASS,
                                message=f"segment table: all {len(results)} expectations met{rows}"))
    return ExpectationsResult(success=success, results=results, findings=findings, gx_version=gx.__version__,
                              element_count=element_count)


def validate_parts(gx, context, source, parts, release=None) -> list:
    """Each part's expectations validated on its frame, made when its turn comes; the results, part
    by part. What a part leaves is freed before the next: the metrics the datasource's execution
    engine cached (:func:`_forget_metrics`), GX's reference cycles holding the frames (collected;
    ``gc.freeze`` first: the imports' ~1,000,000 objects are not scanned, 1 ms a collection instead
    of 120 ms), then ``release()``; the datasource is deleted at the end (the ephemeral context
    lives on in GX's project manager). At 991,158 rows the suite's memory grew ~165 MiB over the
    parts without this, kept to the end of the process (benchmarks/README.md)."""
    # one batch definition; each part is one batch of it (its dataframe a batch parameter)
    asset = source.add_dataframe_asset(name="segments").add_batch_definition_whole_dataframe("whole_table")
    validated = []
    freeze = gc.get_freeze_count() == 0  # a caller's own freeze is left as it is
    if freeze:
        gc.freeze()
    try:
        with _no_batch_fingerprint():
            for make_frame, expectations in parts:
                validated.append(_validate_part(gx, asset, make_frame, expectations))
                _forget_metrics(source)
                gc.collect()
                if release is not None:
                    release()
    finally:
        del asset, source
        context.data_sources.delete(SOURCE_NAME)
        gc.collect()  # the last part's frame, which the deleted datasource's engine held
        if freeze:
            gc.unfreeze()
    return validated


def _forget_metrics(source) -> None:
    """The metrics the datasource's execution engine cached dropped: it keeps every metric it
    computed (each expectation's full-length condition series) for its life, and no later part reads
    them (a part's metrics are of its own columns). A datasource per part would drop them too, at
    ~0.3 s of CPU (GX saves its project config four times a part)."""
    cache = getattr(source.get_execution_engine(), "_metric_cache", None)
    if isinstance(cache, dict):
        cache.clear()


def _validate_part(gx, asset, make_frame, expectations):
    """One part's expectations as one suite, validated on its frame (one batch of ``asset``)."""
    # GX reorders results; meta carries our position and severity through the run.
    suite = gx.ExpectationSuite(name="segment_table", expectations=[
        getattr(gx.expectations, class_name)(**kwargs, description=description, catch_exceptions=True,
                                             meta={"kla_index": index, "kla_severity": severity.name})
        for index, (class_name, kwargs, description, severity) in expectations])
    frame = make_frame()
    batch = asset.get_batch(batch_parameters={"dataframe": frame})
    outcome = batch.validate(suite, result_format=dict(RESULT_FORMAT))
    _null_strings_as_none(outcome, _categorical_columns(frame))
    return outcome


def _categorical_columns(frame) -> set:
    """The string columns a part hands GX as categoricals (:func:`_columns_read`)."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        return set()
    return {c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)}


def _null_strings_as_none(outcome, categorical: set) -> None:
    """A null in a categorical column comes back from GX as NaN where an object column gives None:
    the samples of those columns made what the reference (one frame of Arrow's default
    conversion) gives."""
    if not categorical:
        return
    for r in outcome.results:
        samples = (r.result or {}).get("partial_unexpected_list") or []
        for sample in samples:
            if isinstance(sample, dict):
                for c in categorical & sample.keys():
                    if isinstance(sample[c], float) and sample[c] != sample[c]:
                        sample[c] = None


def _result_entry(r) -> dict[str, Any]:
    """One GX ExpectationValidationResult as a plain, JSON-serialisable dict."""
    cfg = r.expectation_config
    kwargs = {k: v for k, v in cfg.kwargs.items() if k != "batch_id"}
    res = r.result or {}
    samples = res.get("partial_unexpected_list")
    if samples is None:
        samples = res.get("details", {}).get("mismatched") if isinstance(res.get("details"), dict) else None
    if isinstance(samples, dict):  # table-level mismatches
        samples = [samples]
    columns = kwargs.get("column_list")
    if "column_A" in kwargs:
        columns = [kwargs["column_A"], kwargs["column_B"]]
    entry = {
        "expectation": cfg.type,
        "column": kwargs.get("column"),
        "columns": list(columns) if columns is not None and "column" not in kwargs else None,
        "success": bool(r.success),
        "element_count": res.get("element_count"),
        "unexpected_count": res.get("unexpected_count"),
        # Of all rows (GX's plain unexpected_percent counts only rows where the column is not null).
        "unexpected_percent": res.get("unexpected_percent_total", res.get("unexpected_percent")),
        "partial_unexpected": [_jsonable(v) for v in (samples or [])[:SAMPLES]],
        "description": cfg.description or cfg.type,
        "severity": (cfg.meta or {}).get("kla_severity", Severity.WARN.name),
        "kwargs": _jsonable(kwargs),
    }
    if r.exception_info and r.exception_info.get("raised_exception"):
        entry["success"] = False
        entry["error"] = str(r.exception_info.get("exception_message"))
    return entry


def _finding(entry: dict[str, Any]) -> Finding:
    """A failed expectation as a KLA090 finding: what was expected, how many rows broke it, samples."""
    count = entry["unexpected_count"]
    total = entry["element_count"]
    if entry.get("error"):
        what = f"GX could not evaluate it: {entry['error']}"
    elif count is not None and total:
        what = f"{count:,} of {total:,} rows ({entry['unexpected_percent']:.2f}%) break it"
    elif count is not None:
        what = f"{count:,} rows break it"
    else:
        what = "it does not hold"
    where = entry["column"] or ", ".join(entry["columns"] or [])
    kept, _ = capped(entry["partial_unexpected"], SAMPLES)
    return Finding(
        code=CODE, check=CHECK, severity=Severity.parse(entry["severity"]),
        message=f"segment table: expected that {entry['description']}; {what} "
                f"({entry['expectation']}{' on ' + where if where else ''})",
        fix="The table is built from the files: look at the rows' notes and the sample values for the files "
            "involved; a table breaking its own invariants means corrupt files, a manifest from another version "
            "or a scanner bug (report it with the sample rows).",
        thresholds=entry["kwargs"], evidence=[{"unexpected": v} for v in kept],
        evidence_count=count if count is not None else len(kept))


def _jsonable(value):
    """GX hands back numpy scalars, tuples and Spark Rows: turn them into JSON-able values."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if hasattr(value, "asDict"):
        return _jsonable(value.asDict())
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    return str(value)
