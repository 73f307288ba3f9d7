"""A real node_exporter and Prometheus for tests: Debian's ``prometheus-node-exporter`` and
``prometheus`` binaries started as processes on 127.0.0.1, stopped by the test.

node_exporter runs its textfile collector alone (``--collector.disable-defaults``) on a test's
directory; Prometheus scrapes it every second into a TSDB in a temp dir. Readiness is waited on
through their own HTTP endpoints (``/metrics``, ``/-/ready``). A missing binary is an error, not
a skip: scripts/system-packages.sh installs both.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from harness.kafka import free_port, wait_until

NODE_EXPORTER_BIN = Path("/usr/bin/prometheus-node-exporter")
PROMETHEUS_BIN = Path("/usr/bin/prometheus")
PROMTOOL_BIN = Path("/usr/bin/promtool")
START_TIMEOUT_S = 120   # a loaded machine (load 30) starts Prometheus slowly
SCRAPE_INTERVAL = "1s"


class ProcessHarnessError(RuntimeError):
    pass


def require(binary: Path) -> Path:
    """The binary, or an error saying how to install it (never a skip)."""
    if not binary.exists():
        raise ProcessHarnessError(f"{binary} is missing: install Debian's prometheus and prometheus-node-exporter "
                                  "packages (scripts/system-packages.sh); these tests do not skip")
    return binary


def http_get(url: str, timeout_s: float = 10) -> tuple[int, bytes]:
    """(status, body); (0, b'') when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


class _Process:
    """One started binary with its output in ``workdir/<name>.log``."""

    name = ""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.log = workdir / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _spawn(self, argv: list[str]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                                         start_new_session=True)

    def _wait_ready(self, path: str) -> None:
        def ready():
            if self.proc.poll() is not None:
                raise ProcessHarnessError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
            return http_get(self.url + path, timeout_s=5)[0] == 200

        try:
            wait_until(ready, START_TIMEOUT_S, f"{self.name} on {self.url}{path}")
        except Exception as exc:
            raise ProcessHarnessError(f"{exc}\n{self.tail()}") from None

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


class NodeExporter(_Process):
    """node_exporter with only its textfile collector, reading ``textfile_dir``."""

    name = "node_exporter"

    def __init__(self, workdir: Path, textfile_dir: Path):
        super().__init__(workdir)
        self.textfile_dir = textfile_dir

    def start(self) -> "NodeExporter":
        self.textfile_dir.mkdir(parents=True, exist_ok=True)
        self._spawn([str(require(NODE_EXPORTER_BIN)), f"--web.listen-address=127.0.0.1:{self.port}",
                     "--collector.disable-defaults", "--collector.textfile",
                     f"--collector.textfile.directory={self.textfile_dir}", "--log.level=warn"])
        self._wait_ready("/metrics")
        return self

    def metrics_text(self) -> str:
        return http_get(self.url + "/metrics")[1].decode()


class Prometheus(_Process):
    """A Prometheus server scraping ``targets`` (host:port) every second."""

    name = "prometheus"

    def __init__(self, workdir: Path, targets: list[str]):
        super().__init__(workdir)
        self.targets = targets

    def start(self) -> "Prometheus":
        config = self.workdir / "prometheus.yml"
        self.workdir.mkdir(parents=True, exist_ok=True)
        # YAML is a superset of JSON: the config written as JSON needs no YAML library
        config.write_text(json.dumps({
            "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_INTERVAL,
                       "evaluation_interval": SCRAPE_INTERVAL},
            "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": self.targets}]}],
        }, indent=1))
        self._spawn([str(require(PROMETHEUS_BIN)), f"--config.file={config}",
                     f"--storage.tsdb.path={self.workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{self.port}",
                     "--storage.tsdb.retention.time=1h", "--log.level=warn"])
        self._wait_ready("/-/ready")
        return self

    def query(self, promql: str) -> list[dict]:
        """The instant query's result vector: [{"metric": {labels}, "value": [ts, "text"]}, ...]."""
        status, body = http_get(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")
        if status != 200:
            raise ProcessHarnessError(f"query {promql!r}: HTTP {status}: {body[:500]!r}")
        doc = json.loads(body)
        if doc.get("status") != "success":
            raise ProcessHarnessError(f"query {promql!r}: {doc}")
        return doc["data"]["result"]

    def scalar(self, promql: str) -> float | None:
        """The value of a query answering one series; None when it answers none."""
        result = self.query(promql)
        if not result:
            return None
        if len(result) > 1:
            raise ProcessHarnessError(f"query {promql!r} answered {len(result)} series, expected one: {result}")
        return float(result[0]["value"][1])

    def target_health(self) -> list[tuple[str, str]]:
        """(scrape URL, health) of each active target."""
        status, body = http_get(f"{self.url}/api/v1/targets")
        if status != 200:
            return []
        return [(t["scrapeUrl"], t["health"]) for t in json.loads(body)["data"]["activeTargets"]]
