#!/usr/bin/env bash
# The README's test command: sets up .venv (Python packages), the Kafka jars (Maven Central,
# cached under .cache/), then runs the whole test suite. Fails loudly when a component is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v java >/dev/null || { echo "test.sh: java (17+) is required for the real Kafka broker" >&2; exit 1; }
command -v mvn >/dev/null || { echo "test.sh: maven is required to resolve the Kafka jars" >&2; exit 1; }
bash scripts/setup.sh --test
bash scripts/kafka-jars.sh
# Kafka 3.9.1 too: the last line that answers ListOffsets v0, the oracle of the legacy (mtime) lookup
# (tests/test_legacy_lookup_v0.py)
KAFKA_VERSION=3.9.1 bash scripts/kafka-jars.sh
# Debian packages (Chromium for the report, ...): scripts/system-packages.sh lists them
bash scripts/system-packages.sh
export SPARK_LOCAL_IP=127.0.0.1
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$rc"
