"""The driver's segment table made smaller in memory, same values (issue 19: memory by the row).

Two things a segment table of a million rows holds many times over:

- **repeated strings.** A segment row repeats its partition dir's strings (cluster id, log dir,
  topic, dir name, kind, depth): as plain Arrow strings the 991,158-row fleet of
  benchmarks/fleet.py held ~119 MiB of them, as dictionaries a 4-byte index a row and each distinct
  string once (~31 MiB). The dictionary is sorted (by UTF-8 bytes, which is Python's code point
  order) and the type marked ``ordered``, so an index compares as its string does: :func:`sort_key`
  sorts by the indices (Arrow sorts no dictionary column itself).
- **columns without a value.** A scan at depth ``headers`` fills no record-level column
  (``min_timestamp_ms``, ``crc_failures``, ...): Parquet hands each back as a zeroed 8-byte-a-row
  buffer, ~58 MiB resident for the fleet's eight. A column whose every value is null gets one shared
  buffer of fresh anonymous pages (``mmap``) that nothing writes, so the kernel backs it with its
  zero page: no resident memory, whatever the row count.

Every reader that turns a column into pandas goes through :func:`pandas_values`, which gives what
Arrow's default conversion of the plain column gives (Python ``str`` objects, ``None`` for a null;
not a categorical, whose nulls are NaN), so checks and GX see the values they saw before.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def compact_columns(table: pa.Table) -> pa.Table:
    """``table`` with each all-null fixed-width or string column on a shared zero buffer
    (:func:`_all_null`) and each other string column that is smaller as a dictionary replaced by a
    sorted dictionary of it (:func:`sorted_dictionary`); other columns are the same objects (no copy)."""
    zero = None
    for i, field in enumerate(table.schema):
        column = table.column(i)
        if table.num_rows and column.null_count == table.num_rows and _has_zero_layout(field.type):
            if zero is None:  # fresh anonymous pages, read and never written: the kernel's zero page
                zero = pa.py_buffer(mmap.mmap(-1, 8 * (table.num_rows + 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                                              prot=mmap.PROT_READ))
            table = table.set_column(i, field, _all_null(field.type, table.num_rows, zero))
        elif pa.types.is_string(field.type):
            encoded = sorted_dictionary(column)
            if encoded is not None:
                table = table.set_column(i, field.with_type(encoded.type), encoded)
    return table


def concat_compacted(tables: Sequence[pa.Table]) -> pa.Table:
    """The concatenation of tables of one schema, each made by :func:`compact_columns`, as
    :func:`compact_columns` of their plain concatenation would hold it, without making that plain
    concatenation (a table collected in slices, compacted slice by slice: the Spark driver's
    per-partition-dir statistics). A column that is a sorted dictionary in every table gets one
    sorted dictionary of all their values (each table's indices mapped to it); a column of one
    plain type everywhere is chunked as it is (all-null chunks keep their zero buffer); a column
    that is a dictionary in some tables and plain in others is decoded and encoded again as a whole."""
    tables = list(tables)
    if len(tables) == 1:
        return tables[0]
    if not tables:
        raise ValueError("concat_compacted: no table")
    names = tables[0].column_names
    columns, fields = [], []
    for name in names:
        parts = [t.column(name) for t in tables]
        if all(is_sorted_dictionary(p.type) for p in parts):
            column = _merged_dictionaries(parts)
        elif len({p.type for p in parts}) == 1:
            column = pa.chunked_array([chunk for p in parts for chunk in p.chunks], type=parts[0].type)
        else:
            plain = pa.chunked_array([chunk for p in parts for chunk in decoded(p).chunks])
            column = sorted_dictionary(plain) or plain
        columns.append(column)
        fields.append(tables[0].schema.field(name).with_type(column.type))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=tables[0].schema.metadata))


def _merged_dictionaries(parts: Sequence[pa.ChunkedArray]) -> pa.ChunkedArray:
    """Sorted dictionary columns as one, over the sorted union of their dictionaries."""
    dictionaries = [chunk.dictionary for p in parts for chunk in p.chunks]
    values = pc.unique(pa.chunked_array(dictionaries, type=parts[0].type.value_type))
    values = values.take(pc.sort_indices(values))
    chunks = []
    for chunk in (chunk for p in parts for chunk in p.chunks):
        mapping = pc.index_in(chunk.dictionary, value_set=values)  # every value is in the union
        chunks.append(pa.DictionaryArray.from_arrays(mapping.take(chunk.indices), values, ordered=True))
    return pa.chunked_array(chunks, type=parts[0].type)


def _has_zero_layout(data_type: pa.DataType) -> bool:
    """A type whose all-null array is valid on zero-filled buffers of 8 bytes a row (a validity
    bitmap, then fixed-width values or 32-bit offsets)."""
    return (pa.types.is_integer(data_type) or pa.types.is_floating(data_type) or pa.types.is_boolean(data_type)
            or pa.types.is_string(data_type))


def _all_null(data_type: pa.DataType, rows: int, zero: pa.Buffer) -> pa.ChunkedArray:
    """``rows`` nulls of ``data_type`` on the zero buffer (validity all 0; values or offsets all 0)."""
    buffers = [zero, zero, pa.py_buffer(b"")] if pa.types.is_string(data_type) else [zero, zero]
    return pa.chunked_array([pa.Array.from_buffers(data_type, rows, buffers, null_count=rows)], type=data_type)


def sorted_dictionary(column: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """A string column as ``dictionary<int32, string, ordered>`` with its distinct values sorted,
    one dictionary shared by every chunk; None when that would not be smaller (most values distinct)."""
    values = pc.drop_null(pc.unique(column))
    values = values.take(pc.sort_indices(values))
    dictionary_type = pa.dictionary(pa.int32(), pa.string(), ordered=True)
    if values.nbytes + 4 * len(column) >= column.nbytes:
        return None
    indices = pc.index_in(column, value_set=values)  # null stays null; every other value is in the set
    chunks = [pa.DictionaryArray.from_arrays(chunk, values, ordered=True)
              for chunk in (indices.chunks if isinstance(indices, pa.ChunkedArray) else [indices])]
    return pa.chunked_array(chunks, type=dictionary_type)


def is_sorted_dictionary(data_type: pa.DataType) -> bool:
    """A column :func:`sorted_dictionary` made (an ordered dictionary of strings)."""
    return pa.types.is_dictionary(data_type) and data_type.ordered and pa.types.is_string(data_type.value_type)


def sort_key(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """What to sort ``column`` by: a sorted dictionary's indices (their order is the strings'),
    another dictionary decoded (Arrow sorts no dictionary column), any other column as it is."""
    if not is_sorted_dictionary(column.type):
        return decoded(column)
    return pa.chunked_array([chunk.indices for chunk in column.chunks], type=column.type.index_type)


def decoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A sorted dictionary column as the plain string column it encodes (others as they are)."""
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column


def pandas_values(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The column as the numpy array of Arrow's default pandas conversion of its plain values: a
    dictionary of strings gives an object array of ``str`` and ``None`` for a null, each distinct
    string one object (as Arrow's conversion deduplicates them): the shared dictionary converted
    once, not once per chunk (30 brokers' chunks made 30 copies of every string)."""
    if not pa.types.is_dictionary(column.type):
        return column.to_pandas().to_numpy()
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if not chunks:
        return np.empty(0, dtype=object)
    dictionary = chunks[0].dictionary
    if not all(chunk.dictionary.equals(dictionary) for chunk in chunks[1:]):  # not one of ours: Arrow decodes
        return decoded(pa.chunked_array(chunks, type=column.type)).to_pandas().to_numpy()
    strings = np.empty(len(dictionary) + 1, dtype=object)  # the last one: None, for a null index
    strings[:-1] = dictionary.to_pandas().to_numpy()
    indices = pa.chunked_array([chunk.indices for chunk in chunks], type=column.type.index_type)
    return strings[pc.fill_null(indices, -1).to_numpy()]
