"""Decompression of Kafka record payloads, bounded in memory, with `cramjam` only.

Codec ids (`CompressionType.java`): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. Legacy (magic 0/1)
wrappers never carry zstd (Kafka rejects it); v2 batches may.

Invariants:

* **Bounded output.** Every codec writes into a buffer of at most ``max_bytes``; output that would
  exceed it raises :class:`FormatError` naming the cap. Nothing is allocated from a size a file
  declares before that size is checked against the cap. gzip / zstd streams do not say their
  size up front, so they are decompressed into a buffer that grows by x4 up to the cap
  (``decompress_into`` stops at the end of the buffer: a bomb costs at most the cap).
* **Kafka's framings, not the libraries' defaults:**

  - snappy: Kafka's Java client wraps snappy in xerial's ``SnappyOutputStream`` framing
    (``XERIAL_MAGIC`` + two int32 version fields, then ``[int32 length][raw snappy block]``
    chunks); librdkafka and others write one raw block. xerial's ``SnappyInputStream`` reads a
    buffer without the magic as one raw block, so we accept both, as Kafka does.
  - lz4: Kafka's own frame reader (``Lz4BlockInputStream``) is re-implemented here: magic,
    FLG, BD, optional content size, HC, then ``[int32 LE size][block][optional checksum]`` until
    an end mark. Blocks are decompressed independently (Kafka does the same). For **magic 0**
    the HC byte is not checked, because Kafka's pre-0.10 writer computed it over the wrong
    bytes (the frame magic was included; ``useBrokenFlagDescriptorChecksum = magic == 0``);
    for magic 1/2 a wrong HC is an error, as in Kafka.

* **In pieces, for the 'deep' record fold** (:func:`decompress_chunks`): the same bytes and the same
  errors as :func:`decompress`, handed over as they come, so that a bomb at the cap (256 MiB of
  7-byte records from a ~1 MiB payload) is never a 256 MiB buffer to zero, fault in and copy:
  gzip through zlib in 1 MiB pieces (zlib's reading of the stream is used only where it cannot
  differ from cramjam's: :class:`IrregularStream` hands anything else back to :func:`decompress`),
  lz4 block by block, zstd in one pass into a lazily mapped buffer of the cap.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from typing import Iterator

import cramjam

from auditor.formats.errors import FormatError

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
#: codec id -> name as DumpLogSegments prints it (``CompressionType.name``).
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd", "unknown(5)", "unknown(6)", "unknown(7)")

#: Default cap on the bytes one payload may decompress to.
DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
#: First guess for gzip/zstd output, as a multiple of the compressed size (grows x4 on overflow).
_INITIAL_RATIO = 8
_MIN_INITIAL_BYTES = 64 * 1024
#: gzip's last 4 bytes: ISIZE, the uncompressed size (mod 2^32) of the last member (RFC 1952).
GZIP_ISIZE_LENGTH = 4
GZIP_MIN_STREAM = 18     # 10-byte header + 8-byte trailer
#: deflate's largest expansion (a 258-byte match per ~2 bits: ~1032:1): ISIZE is believed up to it.
DEFLATE_MAX_RATIO = 1032
#: What cramjam says when `decompress_into` ran out of output buffer.
_BUFFER_FULL = "failed to write whole buffer"
#: The pieces decompress_chunks hands gzip over in (zlib's output limit per call): a piece stays in
#: the CPU's cache while the record fold reads it.
CHUNK_BYTES = 1 << 20
#: gzip member header (RFC 1952): ID1 ID2 CM FLG ...; CM 8 is deflate. FLG bits zlib and cramjam
#: might read differently (FHCRC, the header's own CRC16; the reserved bits 5-7) send a stream back
#: to decompress().
GZIP_HEADER_MIN = 10
GZIP_MAGIC = b"\x1f\x8b\x08"
GZIP_FLG_OFFSET = 3
GZIP_FLG_FHCRC = 0x02
GZIP_FLG_RESERVED = 0xE0

# --- xerial snappy framing (org.xerial.snappy.SnappyCodec) ---------------------------------
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_VERSION_OFFSET = len(XERIAL_MAGIC)               # int32 version
XERIAL_COMPAT_VERSION_OFFSET = XERIAL_VERSION_OFFSET + 4  # int32 min compatible version
XERIAL_HEADER_SIZE = XERIAL_COMPAT_VERSION_OFFSET + 4     # 16: chunks start here
XERIAL_CHUNK_LENGTH_SIZE = 4                              # int32 big-endian chunk length

# --- lz4 frame (https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md) -----------------
LZ4_FRAME_MAGIC = 0x184D2204
LZ4_MAGIC_SIZE = 4
LZ4_FLG_OFFSET = LZ4_MAGIC_SIZE
LZ4_BD_OFFSET = LZ4_FLG_OFFSET + 1
LZ4_CONTENT_SIZE_OFFSET = LZ4_BD_OFFSET + 1  # only when FLG has the content-size bit
LZ4_CONTENT_SIZE_LENGTH = 8
LZ4_FLG_VERSION_MASK = 0xC0
LZ4_FLG_VERSION = 0x40
LZ4_FLG_BLOCK_CHECKSUM_MASK = 0x10
LZ4_FLG_CONTENT_SIZE_MASK = 0x08
LZ4_FLG_CONTENT_CHECKSUM_MASK = 0x04
LZ4_BD_BLOCK_MAX_SIZE_SHIFT = 4
LZ4_BD_BLOCK_MAX_SIZE_MASK = 0x70
LZ4_BLOCK_UNCOMPRESSED_MASK = 0x80000000
LZ4_CHECKSUM_SIZE = 4
#: BD block-max-size code -> bytes (codes 4..7; `Lz4BlockOutputStream.BD`).
LZ4_BLOCK_MAX_SIZES = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}

_U32_BE = struct.Struct(">I")
_I32_BE = struct.Struct(">i")
_U32_LE = struct.Struct("<I")


def codec_name(codec_id: int) -> str:
    return CODEC_NAMES[codec_id & 0x07]


def decompress(codec_id: int, data, *, magic: int, max_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
               label: str = "<bytes>", position: int = 0) -> bytes:
    """Decompress one Kafka payload (a v2 batch's records, or a legacy wrapper's value).

    ``position`` is the byte position of the payload in ``label`` (for error messages).
    Raises FormatError for an unknown codec, corrupt input, or output beyond ``max_bytes``.
    """
    if codec_id == CODEC_GZIP:
        return _grow_into(cramjam.gzip.decompress_into, data, max_bytes, label, position, "gzip", _gzip_size(data))
    if codec_id == CODEC_SNAPPY:
        return _snappy(data, max_bytes, label, position)
    if codec_id == CODEC_LZ4:
        return _lz4_frame(data, magic, max_bytes, label, position)
    if codec_id == CODEC_ZSTD:
        if magic < 2:
            raise FormatError(label, position, "compression codec", "zstd", "gzip, snappy or lz4 in a magic 0/1 wrapper")
        return _grow_into(cramjam.zstd.decompress_into, data, max_bytes, label, position, "zstd")
    raise FormatError(label, position, "compression codec", codec_id, "0..4 (none, gzip, snappy, lz4, zstd)")


class IrregularStream(Exception):
    """A gzip stream zlib refuses, or one whose header zlib and cramjam might read differently:
    :func:`decompress` (cramjam) decides it, as before decompress_chunks existed."""


def decompress_chunks(codec_id: int, data, *, magic: int, max_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                      label: str = "<bytes>", position: int = 0) -> Iterator:
    """:func:`decompress`'s bytes in order, in pieces (buffers valid until the next piece: read
    each once, keep none), for a reader that folds them as they come (the 'deep' record fold).

    The pieces join to decompress()'s bytes and every FormatError is decompress()'s; an error may
    come after some pieces (the reader drops what it made of them). gzip raises IrregularStream
    where zlib refuses the stream or might read it otherwise than cramjam (then call decompress()).
    """
    if codec_id == CODEC_GZIP:
        yield from _gzip_chunks(data, max_bytes, label, position)
    elif codec_id == CODEC_LZ4:
        yield from _lz4_blocks(data, magic, max_bytes, label, position)
    elif codec_id == CODEC_ZSTD and magic >= 2:
        yield _grow_into(cramjam.zstd.decompress_into, data, max_bytes, label, position, "zstd", view=True)
    else:
        yield decompress(codec_id, data, magic=magic, max_bytes=max_bytes, label=label, position=position)


def _gzip_chunks(data, max_bytes: int, label, position) -> Iterator[bytes]:
    """A gzip stream of one or more members through zlib, CHUNK_BYTES at a time, stopped one byte past
    the cap (the cap error of decompress(): cramjam stops at the same byte). A member header with FHCRC
    or reserved bits, a zlib error (bad data, CRC, ISIZE) or a cut stream raise IrregularStream: on
    those only cramjam's reading (decompress()) is the tool's."""
    total = 0
    rest = memoryview(data)
    while True:
        if (len(rest) < GZIP_HEADER_MIN or bytes(rest[:len(GZIP_MAGIC)]) != GZIP_MAGIC
                or rest[GZIP_FLG_OFFSET] & (GZIP_FLG_FHCRC | GZIP_FLG_RESERVED)):
            raise IrregularStream
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)   # gzip wrapper: header, deflate, CRC32 and ISIZE checked
        pending = rest
        while not member.eof:
            try:
                piece = member.decompress(pending, min(CHUNK_BYTES, max_bytes - total + 1))
            except zlib.error:
                raise IrregularStream from None
            pending = member.unconsumed_tail
            total += len(piece)
            if total > max_bytes:
                raise _cap_error(label, position, "gzip", max_bytes, len(data))
            if piece:
                yield piece
            elif not pending:
                raise IrregularStream   # the stream ends inside a member
        rest = memoryview(member.unused_data)
        if not rest:
            return


def _cap_error(label, position, codec, max_bytes, compressed: int | None = None) -> FormatError:
    found = f"more than {max_bytes} bytes" + (f" from {compressed} compressed bytes" if compressed is not None else "")
    return FormatError(label, position, f"{codec} decompressed size", found,
                       f"<= {max_bytes} bytes (the decompression cap max_decompressed_bytes)")


def _gzip_size(data) -> int | None:
    """The uncompressed size a gzip stream's trailer states (ISIZE), believed only up to deflate's
    largest ratio (a lying trailer costs no more than a real bomb); None when too short."""
    if len(data) < GZIP_MIN_STREAM:
        return None
    size = int.from_bytes(bytes(data[-GZIP_ISIZE_LENGTH:]), "little")
    return min(size, len(data) * DEFLATE_MAX_RATIO)


def _grow_into(fn, data, max_bytes: int, label, position, codec: str, size_hint: int | None = None,
               view: bool = False):
    """Streams whose size is unknown up front: decompress into a buffer that grows x4 to the cap,
    from ``size_hint`` when the stream states its size (gzip: one pass for a one-member stream;
    each growth decompresses again from the start: a bomb at the cap was decompressed ~1.7 times).

    ``view``: a read-only memoryview of the output instead of bytes (no copy), and after a first
    buffer too small straight to the cap, in an anonymous mapping (pages that are never written
    cost nothing, those written are not zeroed twice): two passes at most, where x4 growth took up
    to seven for a zstd bomb at the cap. The bytes and errors are the same: decoding is the same
    up to the end of any buffer, and the last pass decides."""
    data = bytes(data)
    size = min(max_bytes, max(_MIN_INITIAL_BYTES, size_hint if size_hint is not None else len(data) * _INITIAL_RATIO))
    while True:
        out = mmap.mmap(-1, size) if view and size == max_bytes and size > _MIN_INITIAL_BYTES else bytearray(size)
        try:
            n = fn(data, out)
        except Exception as exc:  # noqa: BLE001 - cramjam.DecompressionError, or OSError from the codec: re-raised named
            if _BUFFER_FULL not in str(exc):
                raise FormatError(label, position, f"{codec} stream", type(exc).__name__ + ": " + str(exc),
                                  f"a valid {codec} stream") from None
            if size >= max_bytes:
                raise _cap_error(label, position, codec, max_bytes, len(data)) from None
            size = max_bytes if view else min(max_bytes, size * 4)
            continue
        # cramjam raises when the output does not fit, so n <= size here: the stream is complete.
        if view:
            return memoryview(out)[:n].toreadonly()
        return bytes(memoryview(out)[:n]) if n < size else bytes(out)


def _snappy_block(block, max_bytes: int, label, position) -> bytes:
    try:
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as exc:  # noqa: BLE001 - any codec failure becomes a FormatError naming file and position
        raise FormatError(label, position, "snappy block length", bytes(block[:5]).hex(),
                          f"a valid snappy block header ({exc})") from None
    if n > max_bytes:
        raise _cap_error(label, position, "snappy", max_bytes, len(block))
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:  # noqa: BLE001 - any codec failure becomes a FormatError naming file and position
        raise FormatError(label, position, "snappy block", type(exc).__name__ + ": " + str(exc),
                          "a valid raw snappy block") from None


def _snappy(data, max_bytes: int, label, position) -> bytes:
    data = bytes(data)
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data, max_bytes, label, position)
    if len(data) < XERIAL_HEADER_SIZE:
        raise FormatError(label, position, "xerial snappy header", len(data), f">= {XERIAL_HEADER_SIZE} bytes")
    parts = []
    total = 0
    pos = XERIAL_HEADER_SIZE
    while pos < len(data):
        if pos + XERIAL_CHUNK_LENGTH_SIZE > len(data):
            raise FormatError(label, position + pos, "xerial chunk length", bytes(data[pos:]).hex(), "4 bytes")
        (length,) = _I32_BE.unpack_from(data, pos)
        pos += XERIAL_CHUNK_LENGTH_SIZE
        if length < 0 or pos + length > len(data):
            raise FormatError(label, position + pos - 4, "xerial chunk length", length,
                              f"0..{len(data) - pos} (the bytes left in the payload)")
        block = _snappy_block(data[pos:pos + length], max_bytes - total, label, position + pos)
        total += len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)


def _lz4_frame(data, magic: int, max_bytes: int, label, position) -> bytes:
    return b"".join(bytes(block) for block in _lz4_blocks(data, magic, max_bytes, label, position))


# long function: the LZ4 frame format read field by field in its specified order (magic, FLG, BD,
# content size, header checksum, blocks, end mark), each check next to its field
def _lz4_blocks(data, magic: int, max_bytes: int, label, position) -> Iterator:
    """Each block's output in turn (a view of one reused buffer: valid until the next block)."""
    data = bytes(data)
    n = len(data)
    if n < LZ4_CONTENT_SIZE_OFFSET + 1:
        raise FormatError(label, position, "lz4 frame", n, f">= {LZ4_CONTENT_SIZE_OFFSET + 1} bytes")
    (frame_magic,) = _U32_LE.unpack_from(data, 0)
    if frame_magic != LZ4_FRAME_MAGIC:
        raise FormatError(label, position, "lz4 frame magic", hex(frame_magic), hex(LZ4_FRAME_MAGIC))
    flg = data[LZ4_FLG_OFFSET]
    bd = data[LZ4_BD_OFFSET]
    if flg & LZ4_FLG_VERSION_MASK != LZ4_FLG_VERSION:
        raise FormatError(label, position + LZ4_FLG_OFFSET, "lz4 FLG version", flg >> 6, 1)
    block_max = LZ4_BLOCK_MAX_SIZES.get((bd & LZ4_BD_BLOCK_MAX_SIZE_MASK) >> LZ4_BD_BLOCK_MAX_SIZE_SHIFT)
    if block_max is None:
        raise FormatError(label, position + LZ4_BD_OFFSET, "lz4 BD block max size code",
                          (bd & LZ4_BD_BLOCK_MAX_SIZE_MASK) >> LZ4_BD_BLOCK_MAX_SIZE_SHIFT, "4..7")
    hc_pos = LZ4_CONTENT_SIZE_OFFSET
    if flg & LZ4_FLG_CONTENT_SIZE_MASK:
        hc_pos += LZ4_CONTENT_SIZE_LENGTH
    if hc_pos >= n:
        raise FormatError(label, position, "lz4 frame descriptor", n, f"> {hc_pos} bytes")
    if magic >= 1:
        # Kafka checks HC = second byte of xxh32(FLG..end of descriptor) except for magic 0,
        # whose writers hashed from the frame magic on (the "broken" checksum).
        expected_hc = (xxh32(data[LZ4_FLG_OFFSET:hc_pos]) >> 8) & 0xFF
        if data[hc_pos] != expected_hc:
            raise FormatError(label, position + hc_pos, "lz4 frame descriptor checksum (HC)", data[hc_pos],
                              f"{expected_hc} (magic {magic}; only magic 0 may carry the old broken HC)")
    pos = hc_pos + 1
    block_checksum = LZ4_CHECKSUM_SIZE if flg & LZ4_FLG_BLOCK_CHECKSUM_MASK else 0
    total = 0
    scratch = bytearray(block_max)  # one block's output at most (<= 4 MiB)
    view = memoryview(scratch)
    while True:
        if pos + 4 > n:
            raise FormatError(label, position + pos, "lz4 block size", bytes(data[pos:]).hex(),
                              "4 bytes (a block size or the end mark)")
        (word,) = _U32_LE.unpack_from(data, pos)
        pos += 4
        if word == 0:  # end mark; a content checksum may follow (Kafka skips it too)
            break
        size = word & ~LZ4_BLOCK_UNCOMPRESSED_MASK
        if size > block_max or pos + size + block_checksum > n:
            raise FormatError(label, position + pos - 4, "lz4 block size", size,
                              f"<= {min(block_max, n - pos - block_checksum)} (block max size / bytes left)")
        block = data[pos:pos + size]
        if word & LZ4_BLOCK_UNCOMPRESSED_MASK:
            out = block
        else:
            try:
                # decompress_block(output_len=) would return block_max bytes, zero-padded:
                # decompress_block_into reports the real length
                got = cramjam.lz4.decompress_block_into(block, scratch)
                out = view[:got]
            except Exception as exc:  # noqa: BLE001 - any codec failure becomes a FormatError naming file and position
                raise FormatError(label, position + pos, "lz4 block", type(exc).__name__ + ": " + str(exc),
                                  "a valid lz4 block (decoded independently, as Kafka does)") from None
        total += len(out)
        if total > max_bytes:
            raise _cap_error(label, position, "lz4", max_bytes, n)
        yield out
        pos += size + block_checksum  # block checksums are not verified: the batch CRC covers them


# --- xxHash32, for the 2..10-byte lz4 frame descriptor only -----------------------------------
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 (pure Python; fine for short inputs like a frame descriptor)."""
    n = len(data)
    i = 0
    if n >= 16:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed, (seed - _P1) & _M32
        while i + 16 <= n:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
