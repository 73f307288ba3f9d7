"""What the harnesses share: a scratch directory for the files a decoder reads, exact-size buffers
for the C decoders, and the one way to say two paths disagree."""

from __future__ import annotations

import ctypes
import os
import struct
import tempfile
from pathlib import Path

_SCRATCH: Path | None = None


class Disagreement(AssertionError):
    """The C and the Python path decoded the same bytes differently (a finding, like a crash)."""


def scratch() -> Path:
    """A private directory for this process, on tmpfs when there is one (a file per execution);
    $KLA_FUZZ_SCRATCH when set (the suite's repeatable runs: a random directory name reaches the
    notes and paths the harnessed code compares, and so libFuzzer's mutations)."""
    global _SCRATCH
    if _SCRATCH is None and os.environ.get("KLA_FUZZ_SCRATCH"):
        _SCRATCH = Path(os.environ["KLA_FUZZ_SCRATCH"])
        _SCRATCH.mkdir(parents=True, exist_ok=True)
    if _SCRATCH is None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _SCRATCH = Path(tempfile.mkdtemp(prefix="kla-fuzz-", dir=base))
    return _SCRATCH


def write(name: str, data: bytes) -> Path:
    """``data`` as scratch()/name (name may hold a subdirectory of one harness's own)."""
    path = scratch() / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path


def exact_buffer(data: bytes) -> memoryview:
    """``data`` in a buffer that ends exactly where its allocation ends (a ctypes array: malloc'd to
    its size when over 16 bytes), so ASan sees a C read one byte past the end; a bytes object
    would hide it (its data ends with a NUL inside the same allocation)."""
    array = (ctypes.c_ubyte * len(data)).from_buffer_copy(data) if data else (ctypes.c_ubyte * 0)()
    return memoryview(array).cast("B")


def split(data: bytes, parts: int) -> list[bytes]:
    """``parts`` pieces of ``data``: each but the last prefixed by a big-endian uint16 length (a
    shorter input gives empty pieces), the last is the rest."""
    out, pos = [], 0
    for _ in range(parts - 1):
        n = struct.unpack_from(">H", data, pos)[0] if pos + 2 <= len(data) else 0
        pos = min(pos + 2, len(data))
        out.append(data[pos:pos + n])
        pos = min(pos + n, len(data))
    out.append(data[pos:])
    return out


def join(pieces: list[bytes]) -> bytes:
    """The inverse of :func:`split` (seeds are built with it)."""
    return b"".join(struct.pack(">H", len(p)) + p for p in pieces[:-1]) + pieces[-1]


def same(a, b) -> bool:
    """Equality that holds for NaN floats decoded from the same bytes (repr compares them)."""
    return a == b or repr(a) == repr(b)
