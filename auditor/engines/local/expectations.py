"""The Great Expectations suite (:mod:`checks.framework.expectations`) on the local engine: GX's
pandas datasource, each expectation on a frame of only the columns it reads."""

from __future__ import annotations

import functools

from checks.framework.expectations import (NAMES_ONLY, SOURCE_NAME, ExpectationsResult, gx_context, spec_in_order,
                                           validate)
from checks.framework.gx_import import import_gx


def run_expectations(segments_df, ctx, *, one_frame: bool = False, release=None) -> ExpectationsResult:
    """GX validation of the segment table (a pandas DataFrame or a pyarrow Table) through GX's
    pandas datasource; failed expectations become findings. The suite is built whole and validated
    on the batch (``Batch.validate``): nothing is stored, no validation definition or checkpoint.

    On pandas, GX copies the whole batch frame for most metrics it computes (each expectation's
    domain): at a million rows those copies were two thirds of the suite's time. So each
    expectation is validated on a frame of only the columns it reads (expectations reading the same
    columns together, :func:`_pandas_parts`), and those reading the column names only
    (:data:`NAMES_ONLY`) on the frame's empty head (every column, in order). The same expectations,
    results and findings, in the suite's order, as one validation of the whole frame
    (``one_frame=True``: the reference, tests/test_expectations_parts.py). ``release``: called after
    each part (the local engine hands its ``release_memory``)."""
    gx = import_gx()
    context = gx_context(gx)
    spec = spec_in_order(ctx)
    source = context.data_sources.add_pandas(name=SOURCE_NAME)
    if one_frame:
        whole = segments_df.to_pandas() if _is_arrow_table(segments_df) else segments_df
        parts = [(lambda: _hashable_lists(whole), spec)]
    else:
        parts = _pandas_parts(segments_df, spec)
    return validate(gx, context, source, parts, spec, release)


def _pandas_parts(table, spec) -> list:
    """(make frame, expectations) pairs for the pandas datasource, each frame made when its part is
    validated: the names-only expectations on the empty head, then per set of columns read, the
    expectations reading exactly those on a frame of those columns (:func:`_columns_read`).
    ``table``: a pandas DataFrame, or a pyarrow Table (converted a few columns at a time, as
    Arrow's default conversion, the driver's frame, would give them)."""
    if _is_arrow_table(table):
        head = table.schema.empty_table().to_pandas()
        parts = [(lambda: _hashable_lists(head), [e for e in spec if e[1][0] in NAMES_ONLY])]
    else:
        parts = [(lambda: _hashable_lists(table.iloc[0:0]), [e for e in spec if e[1][0] in NAMES_ONLY])]
    by_columns: dict[tuple, list] = {}
    for e in spec:
        if e[1][0] not in NAMES_ONLY:
            by_columns.setdefault(_named(e[1][1]), []).append(e)
    parts += [(functools.partial(_columns_read, table, columns,
                                 categorical=any(e[1][0] in CATEGORICAL_READERS for e in expectations)), expectations)
              for columns, expectations in by_columns.items()]
    return [(f, e) for f, e in parts if e]


def _is_arrow_table(value) -> bool:
    return type(value).__module__.startswith("pyarrow") and hasattr(value, "schema") and hasattr(value, "column")


def _named(kwargs: dict) -> tuple:
    """The columns an expectation's kwargs name."""
    named = [kwargs[key] for key in ("column", "column_A", "column_B") if key in kwargs]
    return tuple(sorted({*named, *kwargs.get("column_list", ())}))


#: Expectations whose string columns are handed to GX as pandas categoricals: the segment key's
#: uniqueness hashes seven columns of a million rows, five of them strings; on categoricals
#: (integer codes) it took 0.35 s of CPU instead of 1.35 s at 991,158 rows (benchmarks/fleet.py's
#: fleet), and no column of Python strings is made; a set test on a categorical tests each
#: category once. The values, nulls and samples are the same (tests/test_expectations_parts.py).
CATEGORICAL_READERS = frozenset({"ExpectCompoundColumnsToBeUnique", "ExpectColumnValuesToBeInSet"})


def _columns_read(frame, columns, categorical: bool = False):
    """The frame's ``columns`` (in the frame's order) as one consolidated frame (GX's copies of it
    are plain block copies). 32-bit integer columns are widened to 64 bits: GX's between test is
    vectorized for int64 and float64 only, and calls Python per row otherwise (a million calls
    for ``partition``); the values, and so every count and sample, are the same. ``categorical``:
    string columns as pandas categoricals (:data:`CATEGORICAL_READERS`)."""
    import numpy as np
    import pandas as pd
    import pyarrow.types as pat

    from auditor.arrow_compact import pandas_values

    arrow = _is_arrow_table(frame)

    def values(c):
        if categorical and arrow and pat.is_dictionary(frame.column(c).type) and pat.is_string(frame.column(c).type.value_type):
            return frame.column(c).to_pandas().cat.as_unordered()  # the driver's sorted dictionary (auditor.arrow_compact)
        if categorical and arrow and (pat.is_string(frame.column(c).type) or pat.is_large_string(frame.column(c).type)):
            return frame.column(c).dictionary_encode().to_pandas()
        if categorical and not arrow and frame[c].dtype == object and _all_str_or_none(frame[c]):
            return frame[c].astype("category")
        v = pandas_values(frame.column(c)) if arrow else frame[c].to_numpy()
        return v.astype(np.int64) if v.dtype == np.int32 else v

    names = frame.column_names if arrow else frame.columns
    index = pd.RangeIndex(frame.num_rows) if arrow else frame.index
    return _hashable_lists(pd.DataFrame({c: values(c) for c in names if c in columns}, index=index))


def _all_str_or_none(series) -> bool:
    """A pandas column of strings and nulls only (a categorical of it keeps every value)."""
    return all(v is None or isinstance(v, str) for v in series.dropna().unique()) if len(series) else False


def _hashable_lists(frame):
    """The frame with its list cells (numpy arrays from Arrow) as tuples: GX fingerprints a pandas
    batch with ``pd.util.hash_pandas_object``, which refuses arrays and falls back to pickling the
    whole frame (~60% of the suite's CPU at 100,000 rows, benchmarks/fleet.py). No expectation of
    the suite reads these columns' values; the columns, their order and every other value stay."""
    lists = [c for c in ("timestamp_types", "magics", "codecs", "notes") if c in frame.columns]
    if not lists or not len(frame):
        return frame
    out = frame.copy(deep=False)  # shares every other column's memory (assign would copy the whole frame)
    for c in lists:
        out[c] = _as_tuples(frame[c].to_numpy())
    return out


def _as_tuples(cells) -> list:
    """List cells as tuples (None for a null cell); cells that are one object (the driver's frame
    shares equal list cells: auditor.engines.local.tables.segment_frame) share one tuple."""
    made: dict[int, tuple] = {}
    out = []
    for v in cells:
        if v is None or isinstance(v, float):
            out.append(None)
            continue
        t = made.get(id(v))  # the frame holds every cell, so an id is not reused meanwhile
        if t is None:
            t = made[id(v)] = tuple(v)
        out.append(t)
    return out
