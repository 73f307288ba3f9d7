"""The filesystem under a log dir: its size, what is free, its device and mount point (capacity foresight).

Read-only: one ``os.statvfs`` and one ``os.stat`` of the log dir, and ``/proc/self/mountinfo``
(Linux) for the mount point; nothing under the log dir is opened. Log dirs on one filesystem
(same host, same device id) fill together: ``auditor.capacity`` groups them by ``fs_device``.

The log-dir row gets the :data:`FS_FIELDS` (flat, so a manifest's ``log_dirs.parquet`` carries
them as columns); when the filesystem cannot be statted every number is None and
``fs_problem`` says why: "capacity unknown", never a guess.
"""

from __future__ import annotations

import os
import time

FS_FIELDS = (("fs_total_bytes", "int64"), ("fs_free_bytes", "int64"), ("fs_available_bytes", "int64"),
             ("fs_device", "string"), ("fs_mount", "string"), ("fs_type", "string"),
             ("fs_statted_at_ms", "int64"), ("fs_problem", "string"))
FS_FIELDS_OF_THE_MOMENT = ("fs_statted_at_ms", "fs_statted_at_utc", "fs_free_bytes", "fs_available_bytes")
"""The filesystem fields that change from one stat to the next (the time, the free space; with the
JSON's UTC twin): two scans of the same log dirs differ in these alone."""
"""The log-dir row's filesystem columns: total / free / available-to-unprivileged bytes
(``f_blocks`` / ``f_bfree`` / ``f_bavail`` times ``f_frsize``), the device id ("major:minor"), the
mount point and type (from ``/proc/self/mountinfo``; None elsewhere), when it was statted, and
why it could not be (None when it was)."""


def _mount_of(path: str, dev: int) -> tuple[str | None, str | None]:
    """The mount point and filesystem type holding ``path`` (device ``dev``): the longest mount
    point of that device that is a prefix of the path, from /proc/self/mountinfo; else walking up
    until the device changes."""
    best: tuple[str | None, str | None] = (None, None)
    want = f"{os.major(dev)}:{os.minor(dev)}"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 10 or parts[2] != want:
                    continue
                mount = parts[4].replace("\\040", " ")
                fstype = parts[parts.index("-") + 1] if "-" in parts else None
                if (path == mount or path.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[0] or ""):
                    best = (mount, fstype)
    except OSError:
        pass
    if best[0] is not None:
        return best
    here = path
    while True:  # no mountinfo (not Linux): the highest ancestor on the same device
        parent = os.path.dirname(here)
        try:
            if parent == here or os.stat(parent).st_dev != dev:
                return here, None
        except OSError:
            return here, None
        here = parent


def filesystem_of(log_dir: str | os.PathLike) -> dict:
    """The :data:`FS_FIELDS` of the filesystem under ``log_dir`` (an absolute path)."""
    path = os.path.abspath(log_dir)
    out: dict = {name: None for name, _ in FS_FIELDS}
    out["fs_statted_at_ms"] = time.time_ns() // 1_000_000
    try:
        st = os.statvfs(path)
        dev = os.stat(path).st_dev
    except OSError as exc:
        out["fs_problem"] = (f"{path}: cannot stat its filesystem: {exc.strerror or exc} (errno {exc.errno}): "
                             "capacity unknown")
        return out
    if st.f_blocks <= 0 or st.f_frsize <= 0:
        out["fs_problem"] = f"{path}: its filesystem reports no size (f_blocks {st.f_blocks}, f_frsize {st.f_frsize}): capacity unknown"
        return out
    out.update(fs_total_bytes=st.f_blocks * st.f_frsize, fs_free_bytes=st.f_bfree * st.f_frsize,
               fs_available_bytes=st.f_bavail * st.f_frsize, fs_device=f"{os.major(dev)}:{os.minor(dev)}")
    out["fs_mount"], out["fs_type"] = _mount_of(path, dev)
    return out
