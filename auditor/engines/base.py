"""The interface of the audit's table stages (:class:`TableEngine`) and what they hand back
(:class:`TableOutcome`); the implementations are :mod:`auditor.engines.local.engine` and
:mod:`auditor.engines.spark.engine`, chosen by :mod:`auditor.engines.choose`."""

from __future__ import annotations

import platform
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from auditor import __version__
from auditor.keys.audit_keys import build_key_audit, from_manifests, scan_keys_local
from auditor.manifest import find_manifests
from checks.framework.base import AuditContext, Finding
from checks.framework.expectations import ExpectationsResult

ENGINES = ("auto", "local", "spark")

Progress = Callable[[str], None]
TimelineKeys = Callable[[list[Finding]], list[tuple[str, int]]]
"""The findings -> the (topic, partition) pairs the report draws a segment timeline for."""


@dataclass
class TableOutcome:
    """What the table stages hand to the findings document, whichever engine ran them."""

    findings: list[Finding]
    gx: ExpectationsResult
    stats: list[dict]
    timelines: dict[str, list[dict]]
    versions: dict[str, str]
    log_dirs: list[dict]
    engine: dict = field(default_factory=dict)


class TableEngine(ABC):
    """Scan (or read manifests), aggregate, check and validate: the audit's table stages."""

    name: str

    @abstractmethod
    def run_tables(self, req, ctx: AuditContext, progress: Progress, timeline_keys: TimelineKeys,
                   timeline_columns: Sequence[str]) -> TableOutcome:
        """The findings (sorted), the GX result, the per-partition-dir statistics, the timelines of
        the partitions ``timeline_keys`` picks (their live segments' ``timeline_columns``), the
        versions of what ran, the log-dir rows."""


def versions(engine: str, gx_version: str, **components: str) -> dict[str, str]:
    """The versions the findings document names: ours, Python's, the engine's ``components``, GX's."""
    return {"kafka-log-auditor": __version__, "python": platform.python_version(), **components,
            "great_expectations": gx_version, "engine": engine}


def wants_keys(req) -> bool:
    """Whether the audit reads key statistics: manifests always (their key parts, when collected
    with ``--keys``), log dirs when asked (``--keys`` / ``--keys-sample-mib``)."""
    return bool(req.manifests) or req.keys or req.keys_sample_bytes is not None


def read_keys(req, ctx, progress, scan_log_dirs) -> None:
    """Step 2c of the audit, called by each table engine: the key statistics for the keys.* checks
    and KLA001's cause (``ctx.keys``): the manifests' key parts, or (``--keys``) the log dirs' keys
    read by ``scan_log_dirs(log_dirs, sample_bytes, prefix_bytes)`` (``auditor.keys.audit_keys.scan_keys_local``
    on the driver; on Spark, ``scan_keys_spark`` bound to the engine's session)."""
    if not wants_keys(req):
        return
    counts, added = ctx.key_partitions or ({}, {})
    prefix = ctx.config.key_prefix_bytes
    if req.manifests:
        pairs, notes = from_manifests(find_manifests(req.manifests))
        source = "manifests (collect --keys)"
    else:
        mode = "all records" if req.keys_sample_bytes is None else f"the newest {req.keys_sample_bytes:,} bytes per partition"
        where = "" if scan_log_dirs is scan_keys_local else ", on the executors"
        progress(f"reading the keys of every partition ({mode}{where})")
        pairs, notes, source = scan_log_dirs(req.log_dirs, req.keys_sample_bytes, prefix), [], f"log dirs ({mode})"
    ctx.keys = build_key_audit(pairs, source, notes=notes, prefix_bytes=prefix, counts=counts, added=added)
    for note in ctx.keys.notes:
        progress(f"keys: {note}")
