"""What a long scan has done so far, for progress printers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Progress:
    """What a long scan has done so far; handed to the progress callback."""

    log_dirs_total: int = 0
    log_dirs_done: int = 0
    partitions_done: int = 0
    segments_done: int = 0
    bytes_done: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


ProgressCallback = Callable[[Progress], None]
