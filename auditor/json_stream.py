"""JSON written as fast as the scan: C-encoded, streamed, one list item per line.

``json.dump(doc, fh, indent=1)`` runs the standard library's pure-Python encoder (the C encoder
only serves ``json.dumps`` without ``indent``) and was more than half of ``scan --json``'s time.
Here every value is encoded by ``json.dumps`` without indentation (the C encoder), and a
document's lists are written item by item, so lists may be generators: rows are encoded and
written as they are produced, and the whole document never exists as one string.

Layout: the top-level object has one key per line; a list value opens on its key's line and has
one item per line (compact JSON), which ``jq``, ``grep`` and line-based diffs read well::

    {"tool": "kafka-log-auditor",
    "segments": [
    {"broker_id": 1, ...},
    {"broker_id": 1, ...}
    ]}

Stdlib only (layer 1: any layer may use it).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

CHUNK_ITEMS = 512
"""List items encoded per ``write`` call (fewer, larger writes; bounded memory)."""


class Encoded(str):
    """A list item already encoded as JSON text: written as is."""


def _encoder(default: Callable[[Any], Any] | None) -> Callable[[Any], str]:
    # json.dumps with the default separators and no indent goes through the C encoder
    if default is None:
        return json.dumps
    # one encoder for every item: json.dumps(value, default=...) builds a JSONEncoder per call, which
    # was ~40% of the time of a findings list's 350,000 small items (benchmarks/fleet.py, on fire)
    return json.JSONEncoder(default=default).encode


def _is_stream(value: Any) -> bool:
    """A list, a tuple, any other sequence (e.g. rows read lazily from a columnar table) or an iterator."""
    if isinstance(value, (str, bytes, bytearray)):
        return False
    return isinstance(value, Sequence) or (hasattr(value, "__next__") and hasattr(value, "__iter__"))


def _holds_stream(value: Any) -> bool:
    """A mapping with a stream among its values (written key by key, its streams item by item)."""
    return isinstance(value, Mapping) and any(_is_stream(v) or _holds_stream(v) for v in value.values())


def write_items(items: Iterable[Any], out: TextIO, encode: Callable[[Any], str]) -> int:
    """Writes ``[`` item, item ... ``]`` (one item per line); returns the count written."""
    out.write("[")
    count = 0
    chunk: list[str] = []
    for item in items:
        chunk.append(item if type(item) is Encoded else encode(item))
        count += 1
        if len(chunk) >= CHUNK_ITEMS:
            out.write(("\n" if count == len(chunk) else ",\n") + ",\n".join(chunk))
            chunk = []
    if chunk:
        out.write(("\n" if count == len(chunk) else ",\n") + ",\n".join(chunk))
    out.write("\n]" if count else "]")
    return count


def write_document(doc: Mapping[str, Any], out: TextIO, *, default: Callable[[Any], Any] | None = None) -> None:
    """Writes ``doc`` (a mapping) as JSON to ``out``, its list, sequence or iterator values streamed
    item by item, and so are those of a nested mapping holding one (e.g. ``{"tables":
    {"replica_stats": rows}}``: no one string of all the rows).

    Equal to ``json.dumps(doc, default=default)`` once parsed (iterators are consumed once);
    ends with a newline.
    """
    _write_object(doc, out, _encoder(default))
    out.write("\n")


def _write_object(doc: Mapping[str, Any], out: TextIO, encode: Callable[[Any], str]) -> None:
    out.write("{")
    first = True
    for key, value in doc.items():
        out.write(("" if first else ",\n") + encode(str(key)) + ": ")
        first = False
        if _is_stream(value):
            write_items(value, out, encode)
        elif _holds_stream(value):
            _write_object(value, out, encode)
        else:
            out.write(encode(value))
    out.write("}")


def dumps_document(doc: Mapping[str, Any], *, default: Callable[[Any], Any] | None = None) -> str:
    """:func:`write_document` into a string (for callers that need the text, e.g. to write it atomically)."""


    buf = io.StringIO()
    write_document(doc, buf, default=default)
    return buf.getvalue()
