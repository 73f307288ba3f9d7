"""The fix for skew: a reassignment plan that Kafka's own ``kafka-reassign-partitions`` executes.

Pure: replicas with their bytes per (broker, log dir), replica sets, leaders, racks and log dir
capacities in (:class:`PlanInput`), a :class:`Plan` out (:func:`plan`), and the plan as the
reassignment file, its rollback and a summary (:mod:`auditor.plan.output`). Nothing here reads
or writes a file: ``kafka-audit plan`` (``auditor/cli/plan.py``) gathers the input.
"""

from auditor.plan.model import BrokerSpec, Move, PartitionSpec, Plan, PlanInput, PlanOptions
from auditor.plan.output import reassignment, rollback, summary
from auditor.plan.planner import plan

__all__ = ["BrokerSpec", "Move", "PartitionSpec", "Plan", "PlanInput", "PlanOptions", "plan", "reassignment",
           "rollback", "summary"]
