"""Capacity foresight: which log dir's filesystem fills first, when, and why.

Kafka's own retention rules projected forward from what is on disk (DESIGN.md, "Foresight and
the fix"): per partition replica an ingress rate from its segments' record times, the time rule on
each segment's largest timestamp (a future timestamp blocks it and everything after it), the size
rule per partition in whole segments, rolling by ``segment.bytes`` / ``segment.ms``, compact-only
topics that never shrink by retention, tiered topics' ``local.retention.*``, the retention check
interval and the delete delay (deleted files linger as ``*.deleted``). Bytes over time form a
sawtooth; the projection follows its upper edge (a deletion at the latest moment the broker may
make it), so the time to full it gives is the earliest the disk can fill at the rates seen.

Pure core, thin I/O: :mod:`auditor.capacity.model` works on numpy columns and plain dicts
(the log-dir rows with ``auditor.scan.filesystem.FS_FIELDS``, the topics' rules); the engines hand
it the segment table's columns.
"""

from auditor.capacity.model import CapacityResult, CapacitySettings, TopicRules, project_capacity

__all__ = ["CapacityResult", "CapacitySettings", "TopicRules", "project_capacity"]
