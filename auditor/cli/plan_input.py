"""What ``kafka-audit plan`` reads to build the planner's input (:class:`auditor.plan.PlanInput`):
each replica's bytes and log dir from the log dirs (a ``stat`` scan: ``.log`` sizes) or from
manifests; the replica sets, leaders and racks from the KRaft metadata log those dirs hold, or
from a live cluster (``--bootstrap-server``, confluent-kafka's admin client)."""

from __future__ import annotations

import os

from auditor.cli.common import CliError, InputProblem
from auditor.plan.inputs import MissingBrokers, build_input as plan_input, from_metadata_state

#: manifests collected further apart than this are from different moments (a note says so)
MANIFEST_SPREAD_MS = 15 * 60 * 1000


def disk_rows(log_dirs: list[str], manifests: list[str], depth: str = "stat"):
    """(partition rows, log dir -> broker id, notes, segment rows, log-dir rows) from log dirs (a
    scan at ``depth``) or from manifests (segment rows as Arrow tables)."""
    notes: list[str] = []
    if manifests:
        from auditor.manifest import find_manifests, read_manifest
        rows, dirs, times, segments, infos_all = [], {}, [], [], []
        found = find_manifests(manifests)
        if not found:
            raise InputProblem(f"no manifest under {', '.join(manifests)}")
        for m in found:
            segs, parts, infos = read_manifest(m)
            rows += parts.to_pylist()
            segments.append(segs)
            for info in infos.to_pylist():
                dirs[os.path.abspath(info["log_dir"])] = info.get("broker_id")
                times.append(info.get("collected_at_ms"))
                infos_all.append(info)
        notes += moments_note(times)
        return rows, dirs, notes, segments, infos_all
    from auditor.scan import scan_log_dirs
    result = scan_log_dirs(log_dirs, depth=depth)
    dirs = {os.path.abspath(i["log_dir"]): i["broker_id"] for i in result.log_dirs}
    return result.partitions, dirs, notes, result.segments, result.log_dirs


def moments_note(times: list[int | None]) -> list[str]:
    """A note when manifests were collected more than :data:`MANIFEST_SPREAD_MS` apart."""
    times = [t for t in times if t is not None]
    if times and max(times) - min(times) > MANIFEST_SPREAD_MS:
        return [f"the manifests were collected {(max(times) - min(times)) / 60000:.0f} min apart: the sizes are "
                f"from different moments (replicas written or deleted in between are counted as they were)"]
    return []


def metadata_from_disk(log_dirs: list[str], manifests: list[str]):
    """(brokers {id: (rack, fenced)}, partitions {(topic, p): (replicas, leader, why it must stay or None)},
    notes, the metadata state) or None when no metadata log."""
    if manifests:
        from auditor.manifest import read_cluster_metadata
        log, _ = read_cluster_metadata(manifests)
    else:
        from auditor.cluster.metadata_log import MetadataLogNotFound, read_metadata_log
        try:
            log = read_metadata_log(log_dirs)
        except MetadataLogNotFound:
            log = None
    if log is None:
        return None
    return (*from_metadata_state(log.state), log.state)


def metadata_from_cluster(bootstrap: str, timeout_s: float = 30.0):
    """The same from a live cluster: Metadata (replicas, leaders) and DescribeCluster (racks)."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout_s * 1000)})
    try:
        md = admin.list_topics(timeout=timeout_s)
        nodes = admin.describe_cluster(request_timeout=timeout_s).result(timeout=timeout_s).nodes
    except Exception as exc:  # noqa: BLE001 - any client failure is one line
        raise CliError(f"--bootstrap-server {bootstrap}: {exc}") from None
    brokers = {n.id: (n.rack, False) for n in nodes}     # DescribeCluster lists the brokers that serve
    parts = {(t, i): (list(p.replicas), p.leader, None) for t, tm in md.topics.items() for i, p in tm.partitions.items()}
    return brokers, parts, [], None


def parse_capacities(values: list[str]) -> dict[str, int]:
    """``--capacity BYTES`` (every log dir) or ``--capacity DIR=BYTES``."""
    out = {}
    for v in values:
        d, _, n = v.rpartition("=")
        out[os.path.abspath(d) if d else "*"] = parse_bytes(n, "--capacity")
    return out


UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
         "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_bytes(text: str, flag: str) -> int:
    """``123``, ``10MiB``, ``1.5g``: bytes (binary units); CliError otherwise."""
    t = text.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num):]
    try:
        value = float(num)
    except ValueError:
        value = -1
    if unit not in UNITS or not value > 0:
        raise CliError(f"{flag} {text}: expected a size in bytes > 0 (e.g. 500000000, 10MiB, 2GiB)")
    return int(value * UNITS[unit])


def build_input(rows, dir_brokers, brokers, parts, capacities, notes):
    """:func:`auditor.plan.inputs.build_input`; a serving broker without log dirs is an input problem (exit 3)."""
    try:
        return plan_input(rows, dir_brokers, brokers, parts, capacities, notes)
    except MissingBrokers as exc:
        raise InputProblem(str(exc)) from None
