"""KLA002 skew.broker_disk: brokers and log dirs holding far more bytes than the others.

What it checks:
    The bytes of every partition directory on each broker (live replicas, ``-future`` and
    ``-delete`` copies included: they use disk too), and on each log dir, against the mean of
    the brokers (of the log dirs). Needs at least two brokers (two log dirs).

Why it matters:
    The fullest disk decides when a broker stops (a full log dir goes offline, and with it every
    replica on it). Uneven brokers come from skewed partitions, from an assignment that never
    rebalanced after brokers were added, or from stuck ``-delete``/``-future`` directories.

Example finding:
    WARN broker 3: 1.8 TiB, 2.4x the mean of 6 brokers (770.0 GiB); log dir /data/d2 of broker
    3 holds 1.2 TiB, 3.1x the mean log dir.

How to fix:
    Reassign partitions away from the heavy broker (kafka-reassign-partitions, Cruise Control),
    and between its log dirs (``alterReplicaLogDirs``); look for leftover ``-delete``
    directories; fix partition skew first if one topic causes it.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

from checks.framework.base import Check, CheckInput, Option, Severity, non_negative, opt_int, positive
from auditor.units import human_bytes


class SkewBrokerDisk(Check):
    code = "KLA002"
    name = "skew.broker_disk"
    title = "Broker and log-dir disk skew"
    scope = "cluster"
    identity = ("broker_id", "log_dir")
    options = {
        "warn_ratio": Option(1.5, "WARN when a broker (log dir) reaches this multiple of the mean", float, positive, "> 0"),
        "fail_ratio": Option(3.0, "FAIL at this multiple", float, positive, "> 0"),
        "min_bytes": Option(1 << 20, "brokers and log dirs smaller than this are not judged", int, non_negative, ">= 0"),
    }

    def run(self, data: CheckInput, ctx, opts):
        stats = data.replica_stats
        if stats is None or not len(stats):
            return []
        out = []
        # dropna=False: a log dir without meta.properties (broker id None) still uses disk.
        per_broker = stats.groupby("broker_id", dropna=False)["size_bytes"].sum()
        per_dir = stats.groupby(["broker_id", "log_dir"], dropna=False)["size_bytes"].sum()
        out += self._judge("broker", {(opt_int(b),): int(v) for b, v in per_broker.items()}, opts)
        out += self._judge("log dir", {(opt_int(b), d): int(v) for (b, d), v in per_dir.items()}, opts)
        return out

    def _judge(self, kind: str, sizes: dict, opts) -> list:
        if len(sizes) < 2:
            return []
        mean = sum(sizes.values()) / len(sizes)
        if mean <= 0:
            return []
        out = []
        for key, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
            ratio = size / mean
            if size < opts["min_bytes"] or ratio < opts["warn_ratio"]:
                continue
            severity = Severity.FAIL if ratio >= opts["fail_ratio"] else Severity.WARN
            broker = key[0]
            where = f"broker {broker}" if kind == "broker" else f"log dir {key[1]} of broker {broker}"
            out.append(self.finding(
                severity,
                f"{where} holds {human_bytes(size)}, {ratio:.1f}x the mean of {len(sizes)} {kind}s ({human_bytes(mean)})",
                "Reassign partitions away from it (kafka-reassign-partitions / Cruise Control, alterReplicaLogDirs "
                "between log dirs); look for leftover -delete directories; fix partition skew first.",
                thresholds={"warn_ratio": opts["warn_ratio"], "fail_ratio": opts["fail_ratio"], "mean_bytes": int(mean)},
                evidence=[{"kind": kind, "broker_id": k[0], "log_dir": k[1] if len(k) > 1 else None, "size_bytes": v,
                           "ratio_to_mean": round(v / mean, 3)} for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])],
                broker_id=broker, log_dir=key[1] if len(key) > 1 else None,
            ))
        return out
