"""Log-dir rows -> filesystems: log dirs on one device of one host fill together.

A log dir whose filesystem could not be statted (``fs_problem``) or whose row carries no
filesystem at all (a manifest collected before format 4) is "capacity unknown": an entry with
null numbers and the reason, and the second case said once for all such log dirs.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import numpy as np

FIXED_FIELDS = ("broker_id", "log_dirs", "mount", "total_bytes", "free_bytes", "kafka_bytes", "other_bytes",
                "growth_bytes_per_s", "steady_state_bytes", "seconds_to_full", "full_at_utc", "headroom_at_utc",
                "config_sources")
"""The fields every entry of the capacity section has (findings.schema.json)."""


@dataclass
class Filesystems:
    total: np.ndarray
    free: np.ndarray
    available: np.ndarray
    used: np.ndarray
    capacity: np.ndarray
    """What the broker can use: used now + available to unprivileged users."""
    origin_ms: np.ndarray
    index_of: dict[str, int]
    members: list[dict]
    """Per filesystem: log_dirs, broker ids, mount, device, type, host."""
    kafka_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    notes: list[str] = field(default_factory=list)
    unknown: list[dict] = field(default_factory=list)


def unknown_entry(info: dict, why: str) -> dict:
    """A capacity entry for a log dir whose filesystem is not known: null numbers and why."""
    entry = {k: None for k in FIXED_FIELDS}
    entry.update(broker_id=info.get("broker_id"), log_dirs=[info.get("log_dir")], config_sources={},
                 capacity_known=False, problem=why)
    return entry


def group_filesystems(log_dirs: list[dict]) -> Filesystems:
    here = socket.gethostname()
    groups: dict[tuple, list[dict]] = {}
    unknown, older = [], []
    # in log-dir order, not the rows' (each engine hands them in its own): the entries, the log dirs
    # of each and the one a finding names are then the same on every engine
    for info in sorted(log_dirs, key=lambda i: (str(i.get("log_dir")), i.get("broker_id") or -1)):
        if "fs_total_bytes" not in info:
            older.append(info.get("log_dir"))
            unknown.append(unknown_entry(info, "capacity unknown: no filesystem recorded (a manifest collected "
                                               "before format 4, or a scan that did not stat it)"))
            continue
        if info.get("fs_total_bytes") is None:
            unknown.append(unknown_entry(info, info.get("fs_problem") or "capacity unknown: the filesystem was not statted"))
            continue
        groups.setdefault((info.get("host") or here, info.get("fs_device")), []).append(info)
    notes = []
    if older:
        notes.append(f"capacity unknown for {len(older)} log dir(s) (first: {older[0]}): their manifests predate "
                     "format 4 and carry no filesystem sizes; collect them again to project capacity")
    members, index_of = [], {}
    cols = {k: [] for k in ("total", "free", "available", "origin")}
    for k, ((host, device), infos) in enumerate(groups.items()):
        newest = max(infos, key=lambda i: i.get("fs_statted_at_ms") or 0)
        cols["total"].append(float(newest["fs_total_bytes"]))
        cols["free"].append(float(newest["fs_free_bytes"]))
        cols["available"].append(float(newest["fs_available_bytes"]))
        cols["origin"].append(float(newest.get("fs_statted_at_ms") or 0))
        brokers = sorted({i.get("broker_id") for i in infos if i.get("broker_id") is not None})
        members.append({"log_dirs": [i["log_dir"] for i in infos], "brokers": brokers, "mount": newest.get("fs_mount"),
                        "device": device, "fs_type": newest.get("fs_type"), "host": host})
        for i in infos:
            index_of[i["log_dir"]] = k
    total, free, available = (np.array(cols[k]) for k in ("total", "free", "available"))
    used = total - free
    return Filesystems(total=total, free=free, available=available, used=used, capacity=used + available,
                       origin_ms=np.array(cols["origin"]), index_of=index_of, members=members, notes=notes,
                       unknown=unknown)
