"""Listing and stat-ing under a log dir, read-only: every failure becomes a note, never a raise."""

from __future__ import annotations

import os
from pathlib import Path


def lstat_or_note(path: str | Path, notes: list[str], what: str) -> os.stat_result | None:
    """``os.lstat`` (links are never followed); None and a note when the file is gone or unreadable."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        notes.append(f"{path}: {what} vanished between listing and reading (deleted or renamed by the broker)")
    except OSError as exc:
        notes.append(f"{path}: cannot stat {what}: {exc.strerror} (errno {exc.errno})")
    return None


def list_dir(path: Path, notes: list[str]) -> list[os.DirEntry]:
    """A directory's entries sorted by name; [] and a note when it vanished or cannot be listed."""
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name)
    except FileNotFoundError:
        notes.append(f"{path}: directory vanished between listing and reading")
    except OSError as exc:
        notes.append(f"{path}: cannot list directory: {exc.strerror} (errno {exc.errno})")
    return []


def symlink_note(entry: os.DirEntry, root: Path) -> str:
    """The note for a symbolic link met under ``root`` (never followed), saying where it points."""
    try:
        target = os.path.realpath(entry.path)
    except OSError:
        target = "?"
    where = "inside" if target.startswith(str(root) + os.sep) else "OUTSIDE"
    return f"{entry.path}: symbolic link to {target} ({where} the log dir): not followed"
