"""KRaft metadata records damaged on purpose: :func:`rewrite_record` changes one record's value in a
real uncompressed snapshot (same length) and fixes the batch CRC, so that only the record's content
is wrong."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c

from auditor.formats import offsets_records as orec
from auditor.formats.log_reader import LogReader
from auditor.formats.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET


def rewrite_record(path: Path, offset: int, mutate) -> None:
    """Rewrite the value of the record at ``offset`` in an uncompressed snapshot (same length),
    fixing the batch CRC so only the record's content is wrong."""
    data = bytearray(path.read_bytes())
    reader = LogReader(path)
    for batch in reader.batches():
        if batch.base_offset <= offset <= batch.last_offset:
            raw = bytes(reader.read_batch_bytes(batch))
            for off, _ts, _k, value in orec.iter_key_values(batch, raw):
                if off == offset:
                    i = raw.index(value)
                    new = mutate(bytes(value))
                    assert len(new) == len(value)
                    start = batch.position + i
                    data[start:start + len(new)] = new
                    crc = crc32c.crc32c(bytes(data[batch.position + ATTRIBUTES_OFFSET: batch.position + batch.size_bytes]))
                    struct.pack_into(">I", data, batch.position + CRC_OFFSET, crc)
    reader.close()
    path.write_bytes(bytes(data))
