"""Peak resident memory of this process and its descendants, sampled from /proc (Linux, no psutil).

Roles: ``driver-python`` (this process), ``jvm`` (the Spark driver JVM, which also hosts the
executors in local mode), ``python-workers`` (PySpark workers: the executors' Python side,
summed). Peaks are sampled every ``interval_s``; the JVM's own high-water mark (VmHWM) is
read too, so short peaks between samples are not lost for it.
"""

from __future__ import annotations

import os
import threading
import time


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        tree.setdefault(ppid, []).append(int(name))
    return tree


def descendants(pid: int | None = None) -> list[int]:
    """The pids of every live descendant of ``pid`` (default: this process), from one /proc pass."""
    tree = _children()
    seen, stack = [], list(tree.get(os.getpid() if pid is None else pid, []))
    while stack:
        child = stack.pop()
        seen.append(child)
        stack.extend(tree.get(child, []))
    return seen


def _status(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class PeakMemory:
    def __init__(self, interval_s: float = 0.1):
        self.interval_s = interval_s
        self.peaks = {"driver-python": 0, "jvm": 0, "python-workers": 0}
        self.jvm_hwm = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        workers = jvm = 0
        for pid in descendants():
            cmd = _cmdline(pid)
            rss = _status(pid, "VmRSS")
            if "java" in cmd.split(" ")[0]:
                jvm += rss
                self.jvm_hwm = max(self.jvm_hwm, _status(pid, "VmHWM"))
            elif "pyspark" in cmd or "python" in cmd:
                workers += rss
        self.peaks["driver-python"] = max(self.peaks["driver-python"], _status(os.getpid(), "VmRSS"))
        self.peaks["jvm"] = max(self.peaks["jvm"], jvm)
        self.peaks["python-workers"] = max(self.peaks["python-workers"], workers)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval_s)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._sample()
        self._stop.set()
        self._thread.join()
        self.peaks["jvm"] = max(self.peaks["jvm"], self.jvm_hwm)

    def report(self) -> str:
        return ", ".join(f"{k} {v / 2**20:,.0f} MiB" for k, v in self.peaks.items())
