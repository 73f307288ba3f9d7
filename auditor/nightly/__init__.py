"""From night to night: a finding's identity and the comparison with the previous run
(:mod:`~auditor.nightly.identity`, :mod:`~auditor.nightly.compare`), accepted findings
(:mod:`~auditor.nightly.accept`), and the two stores of a ``--history`` directory: every finding of
every run (:mod:`~auditor.nightly.finding_history`) and one row of counts per run
(:mod:`~auditor.nightly.run_history`)."""
