"""Output files that are either whole or absent: written under a temporary name, renamed into place.

A reader of any file the tool writes (manifests, state files, reports, metrics) must never see
half of it, whatever kills the writer (SIGKILL, a full disk, a power cut). The one recipe, here so
every writer uses it: write a temporary file **in the same directory** (a rename is atomic only
within one file system), flush and ``fsync`` it (its bytes are on disk before its name is), rename
it over the target (``os.replace``: readers see the old file or the new one, never a mix), then
``fsync`` the directory (the rename itself survives a crash). On any failure the temporary file is
removed and the target is left as it was.

Temporary names are ``.<name>.tmp-<pid>``: hidden, per process, and recognisable
(:data:`TEMP_MARK`): a writer killed with SIGKILL cannot remove its own, so the next writer of
the same directory removes the stale ones it finds (:func:`remove_stale_temps`).

Errors come out as :class:`OutputError`: an ``OSError`` whose message names the path and the
reason in one line ("cannot write /out/x: No space left on device"), for the CLI's exit code 3.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

TEMP_MARK = ".tmp-"
"""In every temporary name: ``.<name>.tmp-<pid>``."""


class OutputError(OSError):
    """An output path could not be written (full disk, read-only, not a directory...): one line
    naming the path; the target was left as it was."""

    def __init__(self, path: str | os.PathLike, exc: BaseException | str):
        reason = exc if isinstance(exc, str) else (getattr(exc, "strerror", None) or str(exc))
        errno_ = getattr(exc, "errno", None)
        super().__init__(errno_, f"cannot write {os.fspath(path)}: {reason}")
        self.path = os.fspath(path)

    def __str__(self) -> str:
        return self.args[1] if len(self.args) > 1 else super().__str__()


def temp_path(path: str | os.PathLike) -> Path:
    """The temporary name of ``path`` for this process (same directory)."""
    p = Path(path)
    return p.with_name(f".{p.name}{TEMP_MARK}{os.getpid()}")


def fsync_dir(directory: str | os.PathLike) -> None:
    """Makes the renames and unlinks in ``directory`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # (some file systems refuse fsync on a directory: the rename is still atomic)
    finally:
        os.close(fd)


def publish(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Renames a written and fsynced temporary file over ``path`` and makes the rename durable."""
    try:
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(path, exc) from exc
    fsync_dir(Path(path).parent)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", encoding: str | None = None) -> Iterator[BinaryIO]:
    """``with atomic_open(p) as f: f.write(...)``: ``p`` is replaced whole when the block ends
    without an error, else left as it was (the temporary file removed). OSErrors become
    :class:`OutputError` naming ``p``."""
    if mode not in ("wb", "w"):
        raise ValueError(f"mode = {mode!r}, expected 'wb' or 'w'")
    path = Path(path)
    tmp = temp_path(path)
    try:
        fh = open(tmp, mode, encoding=encoding if mode == "w" else None)  # noqa: SIM115 - closed below
    except OSError as exc:
        raise OutputError(path, exc) from exc
    try:
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise OutputError(path, exc) from exc
        raise
    publish(tmp, path)


def atomic_write(path: str | os.PathLike, data: bytes | str | Callable[[BinaryIO], object]) -> Path:
    """Writes ``data`` (bytes, text as UTF-8, or a function given the open binary file) to
    ``path`` whole or not at all (see the module doc); returns ``path``."""
    with atomic_open(path, "wb") as fh:
        if callable(data):
            data(fh)
        else:
            fh.write(data.encode() if isinstance(data, str) else data)
    return Path(path)


def remove_stale_temps(directory: str | os.PathLike, names: set[str] | None = None) -> list[Path]:
    """Removes the temporary files writers killed before their rename left in ``directory``
    (those of ``names`` only, when given); returns what was removed. Never for a live writer's:
    a temp whose pid is a running process is left alone."""
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.startswith(".") or TEMP_MARK not in name:
            continue
        target, _, pid = name[1:].rpartition(TEMP_MARK)
        if not pid.isdigit() or (names is not None and target not in names) or pid_alive(int(pid)):
            continue
        try:
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def pid_alive(pid: int) -> bool:
    """A process with this pid runs (this one counts; another user's too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_writable(path: str | os.PathLike, is_dir: bool = False) -> None:
    """OutputError naming ``path`` unless a file can be written there (``is_dir``: into it), checked
    before a long run rather than after it: the directory is created if needed and a temporary file
    is created and removed. (A disk that fills up later is still caught by the writers.)"""
    p = Path(path)
    directory = p if is_dir else p.parent
    if p.exists() and p.is_dir() != is_dir:
        raise OutputError(path, "is a directory" if p.is_dir() else "exists and is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = temp_path(directory / (p.name if not is_dir else ".write-check"))
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(path, exc) from exc


def as_output_error(path: str | os.PathLike, exc: OSError) -> OutputError:
    """``exc`` as an OutputError naming ``path`` (itself when it already is one)."""
    return exc if isinstance(exc, OutputError) else OutputError(path, exc)
