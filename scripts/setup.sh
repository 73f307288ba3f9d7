#!/usr/bin/env bash
# Creates .venv in the repo root and installs the auditor with the full audit's [audit] extra
# (with --test: [test], which includes [audit], [airflow] and the test tools).
# Idempotent: re-running only installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# PyPI over the network: more retries and a longer socket timeout than pip's defaults (5, 15 s)
PIP=(.venv/bin/python -m pip install -q --retries 10 --timeout 60)
"${PIP[@]}" --upgrade pip
if [ "${1:-}" = "--test" ]; then
  "${PIP[@]}" -e ".[test]"
else
  # the README's demo runs the full audit on Spark: the [audit] extra (a broker needs only the
  # base install: docs/broker-install.md)
  "${PIP[@]}" -e ".[audit]"
fi
