"""The interface of the audit's table stages (:class:`TableEngine`) and what they hand back
(:class:`TableOutcome`); the implementations are :mod:`auditor.table_engines.local` and
:mod:`auditor.table_engines.spark`, chosen by :mod:`auditor.table_engines.choose`."""

from __future__ import annotations

import platform
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from auditor import __version__
from checks.base import AuditContext, Finding
from checks.expectations import ExpectationsResult

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
