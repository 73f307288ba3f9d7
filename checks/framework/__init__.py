"""What every rule check shares: the ``Check`` base, findings and the audit context
(:mod:`~checks.framework.base`), the frame of many partitions a check reads at once
(:mod:`~checks.framework.batch`), the audit config (:mod:`~checks.framework.config`), the registry
(:mod:`~checks.framework.registry`) and the Great Expectations suite over the segment table
(:mod:`~checks.framework.expectations`). No rule lives here."""
