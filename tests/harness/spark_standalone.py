"""A real Spark standalone cluster: a master and its workers started on 127.0.0.1 from the
installed PySpark's own launcher (spark-class), stopped by the caller. Used by the tests (one
worker) and by ``benchmarks/fleet_spark.py`` (two workers, 1 core each)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from harness.kafka import free_port

from .tiers import refuse_in_fast_tiers


def _wait(what: str, ok, timeout_s: float, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.5)
    tails = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-2000:]}" for p in logs if p.exists())
    raise AssertionError(f"{what} not up after {timeout_s} s\n{tails}")


class StandaloneSpark:
    """A Spark standalone master + ``workers`` workers (``cores`` each, ``memory`` each: what their
    executors may take) from the installed PySpark."""

    def __init__(self, workdir: Path, workers: int = 1, cores: int = 1, memory: str = "1g"):
        import pyspark

        self.spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
        self.workdir = workdir
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port, self.ui = free_port(), free_port()
        self.worker_uis = [free_port() for _ in range(workers)]
        self.procs: list[subprocess.Popen] = []
        self.url = f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, *args: str) -> Path:
        log = self.workdir / f"{name}.log"
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_WORKER_DIR": str(self.workdir / "work"),
               "SPARK_LOG_DIR": str(self.workdir)}
        self.procs.append(subprocess.Popen([str(self.spark_class), *args], stdout=log.open("wb"),
                                           stderr=subprocess.STDOUT, env=env, cwd=self.workdir, start_new_session=True))
        return log

    def state(self) -> dict:
        """The master's JSON status (workers, active and completed applications); {} when down."""
        try:
            # generous: the master's UI answers slowly on a loaded machine, and {} here means "down"
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=15) as r:
                return json.load(r)
        except OSError:
            return {}

    def start(self) -> "StandaloneSpark":
        """Master, then workers, each waited for; a part that does not come up stops what started."""
        refuse_in_fast_tiers("a standalone Spark cluster")
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> "StandaloneSpark":
        mlog = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(self.port), "--webui-port", str(self.ui))
        _wait("spark master", lambda: self.state().get("status") == "ALIVE", 180, [mlog])
        logs = [mlog]
        for i, ui in enumerate(self.worker_uis):
            logs.append(self._spawn("worker" if i == 0 else f"worker-{i + 1}", "org.apache.spark.deploy.worker.Worker",
                                    self.url, "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(ui),
                                    "--host", "127.0.0.1", "--work-dir", str(self.workdir / "work")))
        _wait(f"{self.workers} spark worker(s)", lambda: sum(w.get("state") == "ALIVE" for w in self.state().get("workers", []))
              >= self.workers, 180, logs)
        return self

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def diagnostics(self, tail_chars: int = 3000) -> str:
        """What to read when a job on this cluster hangs or fails: the master's state (workers,
        applications), and the ends of the master's, the workers' and every executor's logs."""
        state = self.state()
        summary = {"status": state.get("status"), "cores": state.get("cores"), "coresused": state.get("coresused"),
                   "workers": [{k: w.get(k) for k in ("id", "state", "cores", "coresused", "memoryused")}
                               for w in state.get("workers", [])],
                   "activeapps": [{k: a.get(k) for k in ("id", "name", "state", "cores", "duration")}
                                  for a in state.get("activeapps", [])],
                   "completedapps": [{k: a.get(k) for k in ("id", "name", "state", "duration")}
                                     for a in state.get("completedapps", [])]}
        logs = sorted(self.workdir.glob("*.log")) + sorted((self.workdir / "work").glob("*/*/std*"))
        tails = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-tail_chars:]}" for p in logs if p.is_file())
        return f"spark standalone master state: {json.dumps(summary, default=str)}\n{tails}"

    def completed_apps(self, at_least: int = 0, timeout_s: float = 120) -> list[dict]:
        """The master's finished applications, oldest first; waits up to ``timeout_s`` for
        ``at_least`` of them (the master marks an application finished shortly after its driver
        disconnects)."""
        deadline = time.monotonic() + timeout_s
        while True:
            apps = sorted(self.state().get("completedapps", []), key=lambda a: a.get("starttime", 0))
            if len(apps) >= at_least or time.monotonic() > deadline:
                return apps
            time.sleep(0.5)
