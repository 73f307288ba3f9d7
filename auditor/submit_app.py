"""The ``spark-submit`` application of the audit: ``kafka-audit audit`` as a Spark driver.

    spark-submit --master spark://m:7077 auditor/submit_app.py ARGS_JSON
    spark-submit --master yarn auditor/submit_app.py audit --log-dir /data/kafka --out r.html

ARGS_JSON is a file holding the audit's command-line arguments as a JSON list (the nightly
Airflow DAG writes one per run, so the arguments are visible next to the results); otherwise
the arguments are the CLI's own. The session is the one spark-submit configured (master,
deploy mode, resources): the audit does not pass ``--master`` unless told to. Exit codes are
the CLI's (0 ok, 1 findings reached --fail-on, 2 usage or config, 3 input problem).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def audit_argv(argv: list[str]) -> list[str]:
    """The CLI arguments from ``[ARGS_JSON]`` or ``[audit, ...]``."""
    if len(argv) == 1 and argv[0].endswith(".json"):
        args = json.loads(Path(argv[0]).read_text())
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise SystemExit(f"{argv[0]}: expected a JSON list of strings (the audit's arguments)")
    else:
        args = list(argv)
    return args if args[:1] == ["audit"] else ["audit", *args]


def main() -> int:
    # spark-submit puts this file's directory first on sys.path; the installed package is meant
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        sys.path.pop(0)
    from auditor.cli import main as cli_main

    return cli_main(audit_argv(sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
