"""The rows a replay question is answered from: the asked topics' segment and partition-dir rows,
scanned from log dirs (:func:`rows_from_log_dirs`) or read from manifests by the caller."""

from __future__ import annotations

from dataclasses import dataclass, field

from auditor.formats import filenames
from auditor.scan import plan_log_dir, scan_partition_dir


@dataclass
class ReplayRows:
    """Segment and partition-dir rows (plain dicts, as the scanner writes them) and the problems
    met reading them."""

    segments: list[dict] = field(default_factory=list)
    partitions: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def only(self, keys: set | dict) -> "ReplayRows":
        """The rows of these (topic, partition)s."""
        return ReplayRows([r for r in self.segments if (r["topic"], r["partition"]) in keys],
                          [r for r in self.partitions if (r["topic"], r["partition"]) in keys], self.problems)


def rows_from_log_dirs(log_dirs: list[str], topics: set[str]) -> ReplayRows:
    """The topics' rows at depth headers, without reading (or stat-ing) index files (``indexes=False``): the
    answers use the .log walk's columns, never the index columns, and the replay search reads the
    searched segment's indexes itself; the rows are not printed."""
    out = ReplayRows()
    for log_dir in log_dirs:
        plan = plan_log_dir(log_dir)
        out.problems += plan.info["problems"]
        for pdir in plan.partition_dirs:
            parsed = filenames.parse_partition_dir(pdir.name)
            if parsed is None or parsed.topic not in topics:
                continue
            rows, prow = scan_partition_dir(pdir, "headers", log_dir_info=plan.info,
                                            checkpoints_by_tp=plan.checkpoints_by_tp, root=plan.root, indexes=False)
            out.segments += rows
            out.partitions.append(prow)
    return out


def by_partition(rows) -> dict[tuple, list[dict]]:
    """Rows grouped by (topic, partition)."""
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault((r["topic"], r["partition"]), []).append(r)
    return out
