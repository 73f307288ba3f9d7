"""Kafka computes offsets and timestamps in Java ``long`` arithmetic, which wraps at 64 bits:
``lastOffset() = baseOffset() + lastOffsetDelta()``, a record's ``baseOffset + offsetDelta`` and
``baseTimestamp + timestampDelta``, an index entry's ``baseOffset + relativeOffset``. A corrupt
field near the int64 bounds therefore gives what DumpLogSegments prints: the wrapped value. The
decoders wrap the same way (the C ones with unsigned arithmetic), so that the C and Python paths
agree and every value fits the int64 columns of the manifest (issue 24: a batch with
baseOffset 2^63 - 1 gave a Python int beyond int64, and ``collect`` died writing Parquet).
"""

from __future__ import annotations

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_SPAN = 1 << 64


def wrap(value: int) -> int:
    """``value`` as a Java long sum gives it (two's complement, 64 bits)."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    return (value - INT64_MIN) % _SPAN + INT64_MIN
