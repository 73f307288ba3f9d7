"""A real Apache Kafka 4.x cluster (KRaft) on 127.0.0.1 for tests.

The jars come from Maven Central through ``scripts/kafka-jars.sh`` (see
``kafka_classpath()``); every broker is a real ``kafka.Kafka`` JVM, its storage
formatted by the real ``kafka.tools.StorageTool``.  Node 1 is a combined
broker+controller (static ``controller.quorum.voters``, so no ``--standalone``),
nodes 2..n are brokers only.  Each node gets its own directory under ``workdir``::

    workdir/node-1/server.properties   the config the JVM was started with
    workdir/node-1/log4j2.properties   broker log -> workdir/node-1/logs/server.log
    workdir/node-1/stdout.log          the JVM's stdout+stderr (GC/JVM messages only)
    workdir/node-1/format.log          StorageTool output
    workdir/node-1/data-0 ... data-k   log.dirs

Test data goes through a real client (confluent_kafka / librdkafka, which has every
codec).  Nothing here reads Kafka files: that is the product's job, and
``tests/harness/dumplog.py`` (Kafka's own DumpLogSegments) is its oracle.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)

from .tiers import refuse_in_fast_tiers

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "4.2.1")
LONG_MAX = 9223372036854775807

#: Broker defaults for tests.  ``broker_config`` passed to KafkaCluster overrides them.
TEST_BROKER_DEFAULTS: dict[str, str] = {
    # 4.0+ enforces log.segment.bytes >= 1 MiB (KIP-1030); 1 MiB is the smallest allowed.
    "log.segment.bytes": str(1024 * 1024),
    "log.index.interval.bytes": "4096",
    # Let tests produce timestamps far in the past and the future (4.0 default after.max = 1 h).
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": str(LONG_MAX),
    "log.message.timestamp.after.max.ms": str(LONG_MAX),
    "group.initial.rebalance.delay.ms": "0",
    # A restarted broker is refused (DUPLICATE_BROKER_REGISTRATION) until its previous
    # registration's session expires (default 9 s): keep restarts fast.
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    # Small internal topics: fast to create, few files.
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # The cleaner runs promptly in tests and fits in a small heap.
    "log.cleaner.backoff.ms": "500",
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
    # Small thread pools: 2 cores, up to 3 JVMs.
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
}

#: Topic config for ``KafkaCluster.roll_segments``: time-based roll driven by *record*
#: timestamps (``LogSegment.shouldRoll``: ``messageTimestamp - rollingBasedTimestamp >
#: segment.ms - jitter``), so it is independent of the wall clock.
ROLL_TOPIC_CONFIG: dict[str, str] = {"segment.ms": "60000", "segment.jitter.ms": "0"}


class KafkaHarnessError(RuntimeError):
    """Anything the harness could not do; the message says what and where the logs are."""


def wait_until(predicate, timeout_s: float, what: str, interval_s: float = 0.5):
    """Poll ``predicate`` until it returns a true value (returned); KafkaHarnessError naming
    ``what`` after ``timeout_s``: for state the broker reaches on its own schedule."""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise KafkaHarnessError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)
    return value


def newest_log_write_s(dirs: Iterable[Path]) -> float:
    """The newest ``.log`` mtime (seconds) in the partition directories ``dirs``."""
    return max((p.stat().st_mtime for d in dirs for p in Path(d).glob("*.log")), default=0.0)


def wait_past_newest_write(dirs: Iterable[Path], gap_ms: int, what: str, timeout_s: float = 60.0) -> None:
    """Until the clock is more than ``gap_ms`` past the newest ``.log`` write in ``dirs``.

    For tests that need real time between two appends: record-time rolls (the next append rolls
    when its time minus the active segment's first time exceeds ``segment.ms``/``log.roll.ms``;
    every record acknowledged so far was stamped at or before the file's mtime, by the client
    before the send or by the broker at the append) and mtimes spaced apart. The gap is measured
    from what the broker wrote, not from when the test's call returned; 50 ms of slack cover the
    file system's timestamp granularity."""
    dirs = list(dirs)
    newest = newest_log_write_s(dirs)
    if newest == 0.0:
        raise KafkaHarnessError(f"{what}: no .log file in {[str(d) for d in dirs]}")
    wait_until(lambda: time.time() > newest + (gap_ms + 50) / 1000, timeout_s,
               f"{what}: the clock {gap_ms} ms past the newest .log write ({newest:.3f})", interval_s=0.05)


def wait_topic_config_applied(cluster: "KafkaCluster", topic: str, key: str, value: Any,
                              node_ids: Iterable[int] | None = None, timeout_s: float = 60.0) -> None:
    """Until each broker of ``node_ids`` (default: all) has applied ``key=value`` to ``topic``'s logs.

    DescribeConfigs answers from the metadata image, which a broker installs before its
    DynamicConfigPublisher applies the change to the partitions' logs, so it cannot tell when an
    append sees the new value (a roll by ``segment.ms``, ``local.retention.ms``). The publisher
    logs "Updating topic T with new configuration : k -> v,..." (every override of the topic) on
    the thread that then applies it: that line is the broker's own report."""
    line = re.compile(rf"Updating topic {re.escape(topic)} with new configuration : (?:.*[ ,])?"
                      rf"{re.escape(key)} -> {re.escape(str(value))}(?:[,\s]|$)", re.M)
    for node_id in sorted(cluster.nodes if node_ids is None else node_ids):
        log = cluster.nodes[node_id].server_log
        wait_until(lambda: line.search(log.read_text(errors="replace")), timeout_s,
                   f"broker {node_id} to log applying {key}={value} to {topic} ({log})", interval_s=0.1)


def freeze_broker(cluster: "KafkaCluster", node_id: int = 1) -> int:
    """Stops the broker JVM (SIGSTOP): no file under its log dirs changes until ``thaw_broker``.
    ``kill()`` returns before every thread has stopped: a thread inside a call that creates a
    file (a new segment's .index after its .log) finishes it first, so frozen = every thread of
    the JVM in state T (/proc/PID/task/*/stat). Returns the pid."""
    pid = cluster.nodes[node_id].proc.pid
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: _all_threads_stopped(pid), 60, f"the broker's threads (pid {pid}) to stop on SIGSTOP")
    return pid


def thaw_broker(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)


def _all_threads_stopped(pid: int) -> bool:
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):  # a thread that ended meanwhile
            continue
    return bool(states) and all(s in ("T", "t") for s in states)


def kafka_tool(cluster: "KafkaCluster", main_class: str, *args: str, timeout: float = 180) -> str:
    """One of Kafka's command-line tools (``main_class``, e.g. ``kafka.admin.ConfigCommand``) against
    ``cluster`` (``--bootstrap-server`` added); its stdout, or KafkaHarnessError with its output."""
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC"]
    cfg = tools_log4j_config(cluster.classpath)
    if cfg is not None:
        cmd.append(f"-Dlog4j2.configurationFile={cfg}")
    cmd += ["-cp", cluster.classpath, main_class, "--bootstrap-server", cluster.bootstrap_servers, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise KafkaHarnessError(f"{main_class} {' '.join(args)}: exit {proc.returncode}\n"
                                f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def kafka_classpath(version: str | None = None) -> str:
    """Run scripts/kafka-jars.sh (idempotent) and return the ':'-joined classpath."""
    env = dict(os.environ)
    if version:
        env["KAFKA_VERSION"] = version
    script = REPO_ROOT / "scripts" / "kafka-jars.sh"
    proc = subprocess.run(
        ["bash", str(script)], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise KafkaHarnessError(
            f"{script} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    cp_file = Path(proc.stdout.strip().splitlines()[-1])
    return cp_file.read_text().strip()


def tools_log4j_config(classpath: str) -> Path | None:
    """The WARN-to-stderr log4j2 config kafka-jars.sh writes next to lib/."""
    first = Path(classpath.split(":")[0])
    cfg = first.parent.parent / "log4j2-tools.properties"
    return cfg if cfg.exists() else None


def uses_log4j1(classpath: str) -> bool:
    """Kafka 3.x logs through slf4j-reload4j (log4j 1.x syntax, ``-Dlog4j.configuration``)."""
    return any(Path(j).name.startswith("slf4j-reload4j-") for j in classpath.split(":"))


def log4j1_broker_config(log: Path) -> str:
    """The broker log config of a 3.x broker (reload4j): as the log4j2 one, in log4j 1.x syntax."""
    return (
        "log4j.rootLogger=INFO, file\n"
        "log4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={log}\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        "log4j.logger.kafka.request.logger=WARN\n"
        "log4j.logger.org.apache.kafka.clients=WARN\n"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def random_cluster_id() -> str:
    """Like org.apache.kafka.common.Uuid.randomUuid().toString(): 22 url-safe base64 chars."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"<{path} unreadable>"


Record = Any  # (key, value, timestamp_ms|None) tuple, or dict(key=, value=, timestamp=, headers=, partition=)


def _as_bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    return str(v).encode()


def _normalize(record: Record) -> dict[str, Any]:
    if isinstance(record, Mapping):
        r = dict(record)
    else:
        t = tuple(record)
        if len(t) == 2:
            t = t + (None,)
        if len(t) != 3:
            raise ValueError(f"record must be (key, value, timestamp_ms|None) or a dict, got {record!r}")
        r = {"key": t[0], "value": t[1], "timestamp": t[2]}
    out = {"key": _as_bytes(r.get("key")), "value": _as_bytes(r.get("value"))}
    if r.get("timestamp") is not None:
        out["timestamp"] = int(r["timestamp"])
    if r.get("headers"):
        out["headers"] = [(k, _as_bytes(v)) for k, v in dict(r["headers"]).items()] if isinstance(
            r["headers"], Mapping) else [(k, _as_bytes(v)) for k, v in r["headers"]]
    if r.get("partition") is not None:
        out["partition"] = int(r["partition"])
    return out


@dataclass
class Delivered:
    topic: str
    partition: int
    offset: int
    timestamp: tuple[int, int]  # (librdkafka timestamp type, ms)


@dataclass
class BrokerNode:
    node_id: int
    dir: Path
    port: int
    controller_port: int | None
    log_dirs: list[Path]
    config: dict[str, str]
    proc: subprocess.Popen | None = None
    stdout: Any = field(default=None, repr=False)

    @property
    def server_log(self) -> Path:
        return self.dir / "logs" / "server.log"


class KafkaCluster:
    """A KRaft cluster of ``brokers`` real Kafka JVMs on 127.0.0.1.

    >>> with KafkaCluster(tmp_path, brokers=1, log_dirs_per_broker=2) as kc:
    ...     kc.create_topic("t", partitions=2)
    ...     kc.produce("t", [("k", "v", 1_700_000_000_000)], compression="zstd")
    """

    def __init__(
        self,
        workdir: str | os.PathLike,
        brokers: int = 1,
        log_dirs_per_broker: int = 1,
        broker_config: Mapping[str, Any] | None = None,
        *,
        classpath: str | None = None,
        version: str | None = None,
        heap: str = "512m",
        startup_timeout_s: float = 180.0,
        stop_timeout_s: float = 90.0,
    ):
        if not 1 <= brokers <= 9:
            raise ValueError(f"brokers must be 1..9, got {brokers}")
        if not 1 <= log_dirs_per_broker <= 8:
            raise ValueError(f"log_dirs_per_broker must be 1..8, got {log_dirs_per_broker}")
        self.workdir = Path(workdir).resolve()
        self.n_brokers = brokers
        self.log_dirs_per_broker = log_dirs_per_broker
        self.user_config = {k: str(v) for k, v in (broker_config or {}).items()}
        # ``version`` (e.g. "3.9.1") resolves that release's jars; 3.x logs through reload4j
        # (log4j 1.x config), 4.x through log4j2 -- told apart by the jars on the classpath.
        self.classpath = classpath or kafka_classpath(version)
        self.log4j1 = uses_log4j1(self.classpath)
        self.heap = heap
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.cluster_id = random_cluster_id()
        self.nodes: dict[int, BrokerNode] = {}
        self._admin: AdminClient | None = None
        self._formatted = False
        self._plan()

    # ------------------------------------------------------------------ setup
    def _plan(self) -> None:
        controller_port = free_port()
        rf = str(min(3, self.n_brokers))
        for node_id in range(1, self.n_brokers + 1):
            ndir = self.workdir / f"node-{node_id}"
            port = free_port()
            log_dirs = [ndir / f"data-{k}" for k in range(self.log_dirs_per_broker)]
            cfg = dict(TEST_BROKER_DEFAULTS)
            cfg.update({
                "offsets.topic.replication.factor": rf,
                "transaction.state.log.replication.factor": rf,
                "share.coordinator.state.topic.replication.factor": rf,
                "default.replication.factor": "1",
            })
            cfg.update(self.user_config)
            cfg.update({
                "node.id": str(node_id),
                "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "log.dirs": ",".join(str(d) for d in log_dirs),
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            })
            if node_id == 1:
                cfg["process.roles"] = "broker,controller"
                cfg["listeners"] = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"
            else:
                cfg["process.roles"] = "broker"
                cfg["listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
            self.nodes[node_id] = BrokerNode(
                node_id, ndir, port, controller_port if node_id == 1 else None, log_dirs, cfg)

    def _java(self, node: BrokerNode, main: str, *args: str, heap: str | None = None) -> list[str]:
        cmd = ["java"]
        if heap:
            cmd += [f"-Xmx{heap}", "-Xms64m"]
        cmd += [
            "-XX:+UseSerialGC" if heap is None else "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            (f"-Dlog4j.configuration=file:{node.dir / 'log4j.properties'}" if self.log4j1 else
             f"-Dlog4j2.configurationFile={node.dir / 'log4j2.properties'}"),
            f"-Dkafka.logs.dir={node.dir / 'logs'}",
            "-cp", self.classpath, main, *args,
        ]
        return cmd

    def _write_files(self, node: BrokerNode) -> None:
        node.dir.mkdir(parents=True, exist_ok=True)
        (node.dir / "logs").mkdir(exist_ok=True)
        for d in node.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        (node.dir / "server.properties").write_text(
            "".join(f"{k}={v}\n" for k, v in sorted(node.config.items())))
        log = node.dir / "logs" / "server.log"
        if self.log4j1:
            (node.dir / "log4j.properties").write_text(log4j1_broker_config(log))
            return
        (node.dir / "log4j2.properties").write_text(
            "status = error\n"
            "appender.file.type = File\n"
            "appender.file.name = FILE\n"
            f"appender.file.fileName = {log}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = info\n"
            "rootLogger.appenderRef.file.ref = FILE\n"
            # The noisiest loggers, as in Kafka's own config/log4j2.yaml.
            "logger.kafka.name = kafka\nlogger.kafka.level = info\n"
            "logger.req.name = kafka.request.logger\nlogger.req.level = warn\n"
            "logger.zk.name = org.apache.kafka.clients\nlogger.zk.level = warn\n"
        )

    def format(self) -> None:
        """Format every node's log dirs with the real StorageTool (in parallel)."""
        procs = []
        for node in self.nodes.values():
            self._write_files(node)
            out = open(node.dir / "format.log", "wb")
            cmd = self._java(node, "kafka.tools.StorageTool", "format",
                             "--cluster-id", self.cluster_id,
                             "--config", str(node.dir / "server.properties"))
            procs.append((node, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT), out))
        for node, p, out in procs:
            rc = p.wait(timeout=120)
            out.close()
            if rc != 0:
                raise KafkaHarnessError(
                    f"StorageTool format failed for node {node.node_id} (exit {rc}):\n"
                    f"{_tail(node.dir / 'format.log')}")
        self._formatted = True

    # ------------------------------------------------------------ lifecycle
    def start(self) -> "KafkaCluster":
        if not self._formatted:
            self.format()
        for node_id in self.nodes:
            self._spawn(self.nodes[node_id])
        self.wait_ready(set(self.nodes))
        return self

    def _spawn(self, node: BrokerNode) -> None:
        refuse_in_fast_tiers(f"a Kafka broker (node {node.node_id})")
        if node.proc is not None and node.proc.poll() is None:
            raise KafkaHarnessError(f"node {node.node_id} is already running (pid {node.proc.pid})")
        node.stdout = open(node.dir / "stdout.log", "ab")
        cmd = self._java(node, "kafka.Kafka", str(node.dir / "server.properties"), heap=self.heap)
        node.proc = subprocess.Popen(cmd, stdout=node.stdout, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def _check_alive(self) -> None:
        for node in self.nodes.values():
            if node.proc is not None and node.proc.poll() is not None:
                raise KafkaHarnessError(
                    f"broker node {node.node_id} exited with {node.proc.returncode}; "
                    f"server.log tail:\n{_tail(node.server_log)}\nstdout tail:\n"
                    f"{_tail(node.dir / 'stdout.log')}")

    def wait_ready(self, node_ids: set[int], timeout_s: float | None = None) -> None:
        """Wait until cluster metadata lists exactly the expected live brokers."""
        deadline = time.monotonic() + (timeout_s or self.startup_timeout_s)
        last = None
        while time.monotonic() < deadline:
            self._check_alive()
            if not all(_port_open(self.nodes[i].port) for i in node_ids):
                time.sleep(0.2)
                continue
            try:
                md = self._metadata_admin(node_ids).list_topics(timeout=5)
                last = set(md.brokers)
                if last == node_ids:
                    return
            except KafkaException as e:
                last = e
            time.sleep(0.3)
        raise KafkaHarnessError(
            f"brokers {sorted(node_ids)} not ready after {timeout_s or self.startup_timeout_s}s "
            f"(last metadata: {last}); node-1 server.log tail:\n{_tail(self.nodes[1].server_log)}")

    def _metadata_admin(self, node_ids: set[int]) -> AdminClient:
        # A fresh client bootstrapped only from the expected-live brokers.
        bs = ",".join(f"127.0.0.1:{self.nodes[i].port}" for i in sorted(node_ids))
        return AdminClient({"bootstrap.servers": bs, "socket.timeout.ms": 5000})

    def stop_broker(self, node_id: int, timeout_s: float | None = None, require_clean: bool = False) -> int | None:
        """SIGTERM (controlled shutdown), then SIGKILL after ``timeout_s``.  Returns the exit code.
        ``require_clean``: KafkaHarnessError when it came to SIGKILL, for callers that read the
        files afterwards and need them closed by the broker (flushed, indexes trimmed)."""
        node = self.nodes[node_id]
        p = node.proc
        if p is None:
            return None
        killed_after_s = None
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=timeout_s or self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                killed_after_s = timeout_s or self.stop_timeout_s
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=30)
        rc = p.returncode
        node.proc = None
        if node.stdout:
            node.stdout.close()
            node.stdout = None
        if killed_after_s is not None and require_clean:
            raise KafkaHarnessError(
                f"broker node {node_id} did not exit within {killed_after_s:.0f} s of SIGTERM and was "
                f"SIGKILLed: its log files were not closed cleanly; server.log tail:\n{_tail(node.server_log)}")
        return rc

    def start_broker(self, node_id: int, wait: bool = True) -> None:
        self._spawn(self.nodes[node_id])
        if wait:
            self.wait_ready({i for i, n in self.nodes.items() if n.proc is not None})

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL at once: an unclean shutdown (recovery runs on the next start)."""
        node = self.nodes[node_id]
        if node.proc is not None and node.proc.poll() is None:
            os.killpg(node.proc.pid, signal.SIGKILL)
            node.proc.wait(timeout=30)
        self.stop_broker(node_id)

    def stop(self, require_clean: bool = False) -> None:
        """Stop brokers first, then the controller (node 1), so controlled shutdown can finish.
        ``require_clean``: every node is stopped, then KafkaHarnessError if any had to be
        SIGKILLed (see stop_broker)."""
        self._admin = None
        errors = []
        for node_id in sorted(self.nodes, reverse=True):
            try:
                self.stop_broker(node_id, require_clean=require_clean)
            except KafkaHarnessError as e:
                errors.append(str(e))
        if errors:
            raise KafkaHarnessError("\n".join(errors))

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return any(n.proc is not None and n.proc.poll() is None for n in self.nodes.values())

    # -------------------------------------------------------------- access
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values())

    def log_dirs(self, node_id: int = 1) -> list[Path]:
        return list(self.nodes[node_id].log_dirs)

    def partition_dirs(self, topic: str, partition: int) -> dict[int, Path]:
        """node_id -> the directory holding ``topic-partition`` on that node (any log dir)."""
        found = {}
        for node_id, node in self.nodes.items():
            for d in node.log_dirs:
                p = d / f"{topic}-{partition}"
                if p.is_dir():
                    found[node_id] = p
        return found

    def partition_dir(self, topic: str, partition: int = 0, node_id: int | None = None,
                      timeout_s: float = 60.0) -> Path:
        """The directory of ``topic-partition`` on ``node_id`` (default: the leader), once it
        holds a ``.log``: the broker creates the directory before the segment's files, so a
        test that reads it right after ``create_topic`` could otherwise see it empty."""
        deadline = time.monotonic() + timeout_s
        while True:
            # the leader asked again each round: -1 while an election is under way
            node = self.leader(topic, partition) if node_id is None else node_id
            dirs = self.partition_dirs(topic, partition)
            if node in dirs and any(dirs[node].glob("*.log")):
                return dirs[node]
            if time.monotonic() > deadline:
                raise KafkaHarnessError(f"{topic}-{partition} with a .log not found on node {node} "
                                        f"within {timeout_s:.0f} s: {dirs}")
            time.sleep(0.05)

    def segments(self, topic: str, partition: int = 0, node_id: int | None = None) -> list[Path]:
        """The partition's ``.log`` files, by base offset."""
        return sorted(self.partition_dir(topic, partition, node_id).glob("*.log"))

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return self._admin

    def leader(self, topic: str, partition: int = 0) -> int:
        md = self.admin().list_topics(topic, timeout=10)
        return md.topics[topic].partitions[partition].leader

    # -------------------------------------------------------------- topics
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, Any] | None = None, timeout_s: float = 60.0,
                     replica_assignment: Sequence[Sequence[int]] | None = None) -> None:
        """Create a topic and wait until every partition has a leader and a full ISR."""
        cfg = {k: str(v) for k, v in (config or {}).items()}
        if replica_assignment is not None:
            # confluent-kafka wants the partition count spelled out beside an explicit assignment
            nt = NewTopic(name, num_partitions=len(replica_assignment),
                          replica_assignment=[list(r) for r in replica_assignment], config=cfg)
            replication_factor = len(replica_assignment[0])
            partitions = len(replica_assignment)
        else:
            nt = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                          config=cfg)
        fut = self.admin().create_topics([nt], operation_timeout=timeout_s)[name]
        fut.result(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            md = self.admin().list_topics(name, timeout=10).topics.get(name)
            if md is not None and md.error is None and len(md.partitions) == partitions and all(
                    p.leader >= 0 and len(p.isrs) == replication_factor
                    for p in md.partitions.values()):
                # The leader also has to have created the log (it answers produce then).
                if all(self.partition_dirs(name, p) for p in md.partitions):
                    return
            time.sleep(0.1)
        raise KafkaHarnessError(f"topic {name} not ready after {timeout_s}s")

    def topic_config(self, topic: str) -> dict[str, str]:
        res = ConfigResource("topic", topic)
        cfg = self.admin().describe_configs([res])[res].result(timeout=10)
        return {k: v.value for k, v in cfg.items()}

    def alter_topic_config(self, topic: str, config: Mapping[str, Any]) -> None:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
        res = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET)
            for k, v in config.items()])
        self.admin().incremental_alter_configs([res])[res].result(timeout=10)

    # ------------------------------------------------------------ produce
    def _producer_conf(self, compression: str, linger_ms: float, batch_size: int | None,
                       extra: Mapping[str, Any] | None) -> dict[str, Any]:
        if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise ValueError(f"unknown compression {compression!r}")
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "compression.type": compression,
            "linger.ms": linger_ms,
            "acks": "all",
            "enable.idempotence": False,
            # generous: a loaded 2-core machine stalls a broker JVM for tens of seconds at times
            "message.timeout.ms": 120000,
        }
        if batch_size is not None:
            conf["batch.size"] = int(batch_size)
        conf.update(extra or {})
        return conf

    def produce(self, topic: str, records: Iterable[Record], compression: str = "none",
                partition: int | None = None, linger_ms: float = 5, batch_size: int | None = None,
                batch_num_messages: int | None = None, producer_config: Mapping[str, Any] | None = None,
                timeout_s: float = 180.0) -> list[Delivered]:
        """Produce ``records``; flush; raise on any delivery error.  Returns the delivery reports
        in produce order.  ``batch_num_messages`` caps records per batch (librdkafka option)."""
        extra = dict(producer_config or {})
        if batch_num_messages is not None:
            extra["batch.num.messages"] = int(batch_num_messages)
        p = Producer(self._producer_conf(compression, linger_ms, batch_size, extra))
        return self._send(p, topic, records, partition, timeout_s)

    def _send(self, p: Producer, topic: str, records: Iterable[Record], partition: int | None,
              timeout_s: float, flush: bool = True) -> list[Delivered]:
        errors: list[str] = []
        results: dict[int, Delivered] = {}

        def cb(i: int):
            def _cb(err, msg):
                if err is not None:
                    errors.append(f"record #{i}: {err}")
                else:
                    results[i] = Delivered(msg.topic(), msg.partition(), msg.offset(), msg.timestamp())
            return _cb

        n = 0
        for i, rec in enumerate(records):
            r = _normalize(rec)
            part = r.pop("partition", partition)
            kwargs = dict(r)
            if part is not None:
                kwargs["partition"] = part
            while True:
                try:
                    p.produce(topic, on_delivery=cb(i), **kwargs)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
            n += 1
        if flush:
            left = p.flush(timeout_s)
            if left:
                raise KafkaHarnessError(f"{left} records to {topic} still undelivered after {timeout_s}s")
            if errors:
                raise KafkaHarnessError(f"delivery to {topic} failed: {errors[:5]} ({len(errors)} errors)")
            return [results[i] for i in range(n)]
        return []

    def transaction(self, topic: str, records: Iterable[Record], commit: bool = True,
                    transactional_id: str | None = None, compression: str = "none",
                    partition: int | None = None, timeout_s: float = 60.0) -> None:
        """One transaction: init, begin, produce all, flush, then commit or abort.  The broker
        writes the data batches (isTransactional) and one control batch (COMMIT/ABORT) per
        partition; an abort adds an entry to the segment's ``.txnindex``.  Returns once those
        markers are in the logs: the coordinator writes them after answering commit/abort, so a
        caller looking at the files right away could otherwise miss them."""
        p = Producer(self._producer_conf(compression, 5, None, {
            "transactional.id": transactional_id or f"tx-{uuid.uuid4().hex[:12]}",
            "enable.idempotence": True,
            # librdkafka wants message.timeout.ms <= transaction.timeout.ms (default 60 s)
            "transaction.timeout.ms": 120000,
        }))
        p.init_transactions(timeout_s)
        p.begin_transaction()
        errors: list[str] = []
        touched: set[int] = set()

        def cb(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                touched.add(msg.partition())

        for rec in records:
            r = _normalize(rec)
            part = r.pop("partition", partition)
            if part is not None:
                r["partition"] = part
            p.produce(topic, on_delivery=cb, **r)
            p.poll(0)
        p.flush(timeout_s)
        if errors:
            p.abort_transaction(timeout_s)
            raise KafkaHarnessError(f"transactional delivery to {topic} failed: {errors[:5]}")
        if commit:
            p.commit_transaction(timeout_s)
        else:
            p.abort_transaction(timeout_s)
        for part in sorted(touched):
            self._wait_markers_written(topic, part, timeout_s)

    def _wait_markers_written(self, topic: str, partition: int, timeout_s: float) -> None:
        """Until no transaction is open on the partition: its last stable offset (read_committed
        'latest') has reached the high watermark, which happens when the marker is appended."""
        deadline = time.monotonic() + timeout_s
        while True:
            stable = self.list_offsets(topic, partition, "latest", isolation_level="read_committed")[0]
            high = self.list_offsets(topic, partition, "latest")[0]
            if stable == high:
                return
            if time.monotonic() > deadline:
                raise KafkaHarnessError(f"{topic}-{partition}: transaction markers not written after {timeout_s} s "
                                        f"(last stable offset {stable}, high watermark {high})")
            time.sleep(0.05)

    # ------------------------------------------------------------- consume
    def consume(self, topic: str, partition: int | None = None, isolation_level: str = "read_committed",
                timeout_s: float = 60.0) -> list[Any]:
        """Every message from the earliest offset to the current end (high watermark / LSO)."""
        c = Consumer({"bootstrap.servers": self.bootstrap_servers,
                      "group.id": f"harness-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "isolation.level": isolation_level,
                      "enable.partition.eof": True})
        try:
            md = c.list_topics(topic, timeout=10).topics[topic]
            parts = [partition] if partition is not None else sorted(md.partitions)
            tps = []
            for p in parts:
                lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if hi > lo:
                    tps.append(TopicPartition(topic, p, lo))
            if not tps:
                return []
            c.assign(tps)
            pending = {tp.partition for tp in tps}
            out = []
            deadline = time.monotonic() + timeout_s
            while pending and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        pending.discard(m.partition())
                        continue
                    raise KafkaHarnessError(f"consume {topic}: {m.error()}")
                out.append(m)
            if pending:
                raise KafkaHarnessError(f"consume {topic}: partitions {pending} not at end after {timeout_s}s")
            return out
        finally:
            c.close()

    def offsets_for_times(self, topic: str, partition: int, timestamp_ms: int,
                          isolation_level: str = "read_uncommitted") -> int:
        """The broker's ListOffsets answer for a timestamp, via Consumer.offsets_for_times.
        -1 when no record has timestamp >= ``timestamp_ms`` (the broker answers offset -1)."""
        c = Consumer({"bootstrap.servers": self.bootstrap_servers,
                      "group.id": f"harness-{uuid.uuid4().hex[:8]}",
                      "isolation.level": isolation_level, "enable.auto.commit": False})
        try:
            res = c.offsets_for_times([TopicPartition(topic, partition, timestamp_ms)], timeout=15)
            tp = res[0]
            if tp.error is not None:
                raise KafkaHarnessError(f"offsets_for_times {topic}-{partition}@{timestamp_ms}: {tp.error}")
            return tp.offset
        finally:
            c.close()

    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation_level: str = "read_uncommitted") -> tuple[int, int, int | None]:
        """Admin ListOffsets: ``spec`` is 'earliest' | 'latest' | 'max_timestamp' | a timestamp
        in ms.  Returns (offset, timestamp, leader_epoch) as the broker answered them."""
        from confluent_kafka import IsolationLevel
        if spec == "earliest":
            os_ = OffsetSpec.earliest()
        elif spec == "latest":
            os_ = OffsetSpec.latest()
        elif spec == "max_timestamp":
            os_ = OffsetSpec.max_timestamp()
        else:
            os_ = OffsetSpec.for_timestamp(int(spec))
        iso = (IsolationLevel.READ_COMMITTED if isolation_level == "read_committed"
               else IsolationLevel.READ_UNCOMMITTED)
        tp = TopicPartition(topic, partition)
        res = self.admin().list_offsets({tp: os_}, isolation_level=iso, request_timeout=15)
        info = res[tp].result(timeout=15)
        return info.offset, info.timestamp, info.leader_epoch

    # ------------------------------------------------------------ segments
    def roll_segments(self, topic: str, partition: int = 0, segments: int = 12,
                      records_per_segment: int = 5, segment_ms: int | None = None,
                      base_timestamp_ms: int | None = None, compression: str = "none",
                      value_size: int = 100) -> list[int]:
        """Append ``segments`` segments' worth of records to ``topic``-``partition``, each group
        of records timestamped ``2 * segment.ms`` after the previous group and sent as its own
        batch, so that every group after the first starts a new segment (record-time roll).

        The topic must have been created with ``ROLL_TOPIC_CONFIG`` (or another
        ``segment.ms``; pass it as ``segment_ms``).  Timestamps default to the past
        (ending about now).  Returns the first timestamp of each group.
        Afterwards the partition has ``(segments already there) + segments`` .log files when it
        was empty before (the first group goes into the existing empty segment).
        """
        if segment_ms is None:
            segment_ms = int(self.topic_config(topic)["segment.ms"])
        step = 2 * segment_ms + 1
        if base_timestamp_ms is None:
            base_timestamp_ms = int(time.time() * 1000) - segments * step
        p = Producer(self._producer_conf(compression, 1000, None, {"batch.num.messages": 10000}))
        firsts = []
        for s in range(segments):
            t0 = base_timestamp_ms + s * step
            firsts.append(t0)
            recs = [(f"k{s}-{i}", os.urandom(value_size // 2).hex(), t0 + i) for i in range(records_per_segment)]
            # One flush per group: the group is one batch, and the next group cannot join it.
            self._send(p, topic, recs, partition, 180.0)
        return firsts
