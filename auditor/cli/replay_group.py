"""``kafka-audit replay-check --group G --at T``: a consumer group rewound to a time (the report;
the predictions are ``auditor.replay.groups`` and ``auditor.replay.protocol``).

A replay is almost always a consumer group rewound with ``kafka-consumer-groups --reset-offsets
--to-datetime T``. For each topic-partition the group has committed, this predicts what that
command sets (``ConsumerGroupCommand.resetToDateTime``: ListOffsets for T, read_uncommitted; the
log end offset when the broker answers -1, i.e. T after the newest record), and how many records
(offsets) and ``.log`` bytes the group would re-read (reset below its committed offset) or skip
(reset above it). The safety verdicts are those of ``replay-check --topic`` (check
``replay.safety``) for exactly the group's partitions.

Sources: log dirs (the group's committed offsets from ``__consumer_offsets`` on disk, exact
answers from the files), manifests (the committed offsets from the ``__consumer_offsets`` files
at the paths the manifests recorded; answers from the rows, exact where the files are
reachable), or ``--bootstrap-server`` (``list_consumer_group_offsets``, ``offsets_for_times``
and the earliest / latest offsets; no bytes).
"""

from __future__ import annotations


from auditor.replay.groups import GroupReset
from auditor.units import human_bytes

TOTAL_KEYS = ("records_reread", "records_skipped", "bytes_reread", "bytes_skipped")


def group_document(facts: dict, resets: list[GroupReset], verdicts: dict) -> dict:
    parts = []
    for r in resets:
        d = r.to_dict()
        d["verdict"] = verdicts.get((r.topic, r.partition))
        parts.append(d)
    totals = {k: sum(p[k] or 0 for p in parts) for k in TOTAL_KEYS}
    return dict(facts, partitions=parts, totals=totals)


def print_group_table(doc: dict) -> None:
    print(f"group {doc['group']!r}: protocol {doc['protocol']}, state {doc['state']}, {len(doc['partitions'])} partition(s)")
    header = (f"{'partition':28s} {'verdict':7s} {'committed':>10s} {'reset to':>10s} {'from':14s} "
              f"{'re-read':>9s} {'skipped':>9s} {'bytes':>10s}")
    print(header)
    print("-" * len(header))

    def num(v):
        return "-" if v is None else f"{v:,}"
    for p in doc["partitions"]:
        moved = p["bytes_reread"] if p["records_reread"] else p["bytes_skipped"]
        print(f"{p['topic'] + '-' + str(p['partition']):28s} {str(p['verdict'] or '-'):7s} {num(p['committed_offset']):>10s} "
              f"{num(p['reset_offset']):>10s} {p['reset_source'][:14]:14s} {num(p['records_reread']):>9s} "
              f"{num(p['records_skipped']):>9s} {(human_bytes(moved) if moved else '-'):>10s}")
    t = doc["totals"]
    print(f"total: re-reads {t['records_reread']:,} records ({human_bytes(t['bytes_reread'])}), skips "
          f"{t['records_skipped']:,} records ({human_bytes(t['bytes_skipped'])})")


__all__ = ["group_document", "print_group_table"]
