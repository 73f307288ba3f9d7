"""``python -m auditor.cli``: the same entry point as the ``kafka-audit`` script."""

import sys

from auditor.cli import main

sys.exit(main())
