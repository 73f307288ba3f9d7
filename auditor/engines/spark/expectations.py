"""The Great Expectations suite (:mod:`checks.framework.expectations`) on the Spark engine: one GX
validation on the segment table's Spark DataFrame."""

from __future__ import annotations

from checks.framework.expectations import SOURCE_NAME, ExpectationsResult, gx_context, spec_in_order, validate
from checks.framework.gx_import import import_gx


def run_expectations(segments_df, ctx) -> ExpectationsResult:
    """GX validation of the segment table, a Spark DataFrame, through GX's Spark datasource; failed
    expectations become findings (the suite built whole, validated on the batch, nothing stored)."""
    gx = import_gx()
    context = gx_context(gx)
    spec = spec_in_order(ctx)
    # persist=False: GX's default persists the whole segment table (every column) before the
    # first metric; at 10,000,000 rows that one job ran 5+ minutes and spilled the executors'
    # heaps, while each expectation reads a column or two (benchmarks/fleet_spark.py)
    source = context.data_sources.add_spark(name=SOURCE_NAME, persist=False)
    return validate(gx, context, source, [(lambda: segments_df, spec)], spec)
