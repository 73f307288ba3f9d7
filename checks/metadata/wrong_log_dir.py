"""KLA082 metadata.wrong_log_dir: a replica in another log dir than the metadata log says.

What it checks:
    With the KRaft metadata log read, every live partition directory whose broker's replica the
    metadata assigns to a known directory ID (one of the audited log dirs' ``meta.properties``
    ``directory.id``) that is not the log dir the directory is in. Replicas the metadata has not
    placed yet (UNASSIGNED, MIGRATING) or whose directory is not among the audited dirs are not
    judged.

Why it matters:
    Since KIP-858 the controller tracks each replica's log dir to handle a failed disk: a replica
    it believes on another dir is not taken offline when its real disk fails (and is when the
    other one does), and a half-done ``alterReplicaLogDirs`` or a directory moved by hand is
    exactly this state. Mtime-based reasoning about the move (KLA020) is then wrong too.

Example finding:
    WARN events-1 on broker 2: in /data/k0 but the metadata log places it in /data/k1
    (directory ID Fq0...).

How to fix:
    Finish or redo the move with ``kafka-reassign-partitions --reassignment-json-file`` and
    ``log_dirs``; never move partition directories by hand; restart the broker so that it
    re-reports its directories.

Options: generated from ``options`` below (checks.framework.base.options_section).
"""

from __future__ import annotations

import os

from checks.framework.base import Check, CheckInput, metadata_partition_rows, severity_option


class WrongLogDir(Check):
    code = "KLA082"
    name = "metadata.wrong_log_dir"
    title = "Replicas in another log dir than the metadata log says"
    scope = "cluster"
    options = {
        "severity": severity_option("WARN"),
    }

    def run(self, data: CheckInput, ctx, opts):
        out = []
        for moves, row, topic, partition, broker in metadata_partition_rows(data, ctx):
            dir_id = moves.assignments.get((topic, partition), {}).get(broker)
            expected = moves.dir_path(dir_id)
            if expected is None or os.path.abspath(expected) == os.path.abspath(row["log_dir"]):
                continue
            out.append(self.finding(
                opts["severity"],
                f"on broker {broker}: in {row['log_dir']} but the metadata log places it in "
                f"{expected} (directory ID {dir_id})",
                "Finish or redo the move with kafka-reassign-partitions (log_dirs); never move partition dirs by "
                "hand; restart the broker so that it re-reports its directories.",
                evidence=[{"topic": topic, "partition": partition, "broker_id": broker, "log_dir": row["log_dir"],
                           "metadata_log_dir": expected, "directory_id": dir_id, "metadata_log": moves.metadata_dir}],
                topic=topic, partition=partition, broker_id=broker, log_dir=row["log_dir"]))
        return out
