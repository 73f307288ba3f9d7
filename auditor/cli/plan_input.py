"""What ``kafka-audit plan`` reads to build the planner's input (:class:`auditor.plan.PlanInput`):
each replica's bytes and log dir from the log dirs (a ``stat`` scan: ``.log`` sizes) or from
manifests; the replica sets, leaders and racks from the KRaft metadata log those dirs hold, or
from a live cluster (``--bootstrap-server``, confluent-kafka's admin client)."""

from __future__ import annotations

import os

from auditor.cli.common import CliError, InputProblem
from auditor.plan import BrokerSpec, PartitionSpec, PlanInput

METADATA_TOPIC = "__cluster_metadata"
#: manifests collected further apart than this are from different moments (a note says so)
MANIFEST_SPREAD_MS = 15 * 60 * 1000


def disk_rows(log_dirs: list[str], manifests: list[str]) -> tuple[list[dict], dict[str, int | None], list[str]]:
    """Partition rows, log dir -> broker id, notes: from log dirs or from manifests."""
    notes: list[str] = []
    if manifests:
        from auditor.manifest import find_manifests, read_manifest
        rows, dirs, times = [], {}, []
        found = find_manifests(manifests)
        if not found:
            raise InputProblem(f"no manifest under {', '.join(manifests)}")
        for m in found:
            _, parts, infos = read_manifest(m)
            rows += parts.to_pylist()
            for info in infos.to_pylist():
                dirs[os.path.abspath(info["log_dir"])] = info.get("broker_id")
                times.append(info.get("collected_at_ms"))
        notes += moments_note(times)
        return rows, dirs, notes
    from auditor.scan import scan_log_dirs
    result = scan_log_dirs(log_dirs, depth="stat")
    dirs = {os.path.abspath(i["log_dir"]): i["broker_id"] for i in result.log_dirs}
    return result.partitions, dirs, notes


def moments_note(times: list[int | None]) -> list[str]:
    """A note when manifests were collected more than :data:`MANIFEST_SPREAD_MS` apart."""
    times = [t for t in times if t is not None]
    if times and max(times) - min(times) > MANIFEST_SPREAD_MS:
        return [f"the manifests were collected {(max(times) - min(times)) / 60000:.0f} min apart: the sizes are "
                f"from different moments (replicas written or deleted in between are counted as they were)"]
    return []


def metadata_from_disk(log_dirs: list[str], manifests: list[str]):
    """(brokers {id: (rack, fenced)}, partitions {(topic, p): (replicas, leader, why it must stay or None)},
    notes) or None when no metadata log."""
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
    st = log.state
    # every broker fenced: a stopped cluster, or a copy of its disks; the plan is for when it runs
    all_fenced = bool(st.brokers) and all(b.fenced for b in st.brokers.values())
    brokers = {b.broker_id: (b.rack, b.fenced and not all_fenced) for b in st.brokers.values()}
    parts = {(t.name, i): (list(p.replicas), p.leader, _moving(p.adding_replicas, p.removing_replicas))
             for t in st.topics.values() for i, p in t.partitions.items()}
    notes = ["every broker is fenced in the metadata log (a stopped cluster, or a copy of its disks): planned as "
             "if all were serving"] if all_fenced else []
    return brokers, parts, notes


def _moving(adding, removing) -> str | None:
    if not adding and not removing:
        return None
    return f"a reassignment is under way (adding {list(adding or [])}, removing {list(removing or [])})"


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
    return brokers, parts, []


def build_input(rows: list[dict], dir_brokers: dict[str, int | None], brokers: dict[int, tuple[str | None, bool]],
                parts: dict, capacities: dict, notes: list[str]) -> PlanInput:
    """The planner's input: live replicas placed and sized; every other byte of a log dir (the
    metadata log, ``-delete`` / ``-future`` dirs, partitions the metadata does not know) fixed."""
    dirs_of: dict[int, list[str]] = {}
    for d, b in sorted(dir_brokers.items()):
        if b is not None:
            dirs_of.setdefault(b, []).append(d)
    for b in sorted(b for b in brokers if b not in dirs_of and brokers[b][1]):
        notes.append(f"broker {b} is fenced and none of its log dirs is among the inputs: its replicas stay where they are")
    missing = sorted(b for b in brokers if b not in dirs_of and not brokers[b][1])
    if missing:
        raise InputProblem(f"no log dir of broker(s) {', '.join(map(str, missing))} among the inputs: give every "
                           f"broker's log dirs (or manifests), the plan needs each replica's bytes")
    specs = {}
    for b, dirs in dirs_of.items():
        rack, fenced = brokers.get(b, (None, False))
        specs[b] = BrokerSpec(b, rack, dirs, fenced=fenced)
    fixed: dict[tuple[int, str], int] = {}
    where: dict[tuple[str, int, int], tuple[str, int]] = {}
    for r in rows:
        b, d = r["broker_id"], os.path.abspath(r["log_dir"])
        if b is None:
            continue
        key = (r["topic"], r["partition"])
        if r["dir_kind"] == "live" and r["topic"] != METADATA_TOPIC and key in parts:
            where[(r["topic"], r["partition"], b)] = (d, int(r["size_bytes"] or 0))
        else:
            fixed[(b, d)] = fixed.get((b, d), 0) + int(r["size_bytes"] or 0)
    partitions = {}
    for (t, i), (replicas, leader, moving) in parts.items():
        if moving:
            notes.append(f"{t}-{i}: {moving}: not planned")
        found = {b: where[(t, i, b)] for b in replicas if (t, i, b) in where}
        biggest = max((s for _, s in found.values()), default=0)
        for b in replicas:
            if b not in found and b in specs:
                notes.append(f"{t}-{i}: no replica on broker {b}'s log dirs; counted at {biggest} bytes")
        partitions[(t, i)] = PartitionSpec(t, i, list(replicas), leader,
                                           {b: found[b][0] if b in found else None for b in replicas},
                                           {b: found[b][1] if b in found else biggest for b in replicas},
                                           movable=not moving)
    unknown = sorted({b for p in partitions.values() for b in p.replicas if b not in specs})
    if unknown:
        notes.append(f"replicas on broker(s) {unknown} that are not registered: those replicas are not balanced")
    caps = {}
    for (b, d) in fixed.keys() | {(b, d) for b, s in specs.items() for d in s.log_dirs}:
        cap = capacities.get(d, capacities.get("*"))
        if cap is not None:
            caps[(b, d)] = cap
    return PlanInput(specs, partitions, fixed, caps, None, notes)


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
