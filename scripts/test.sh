#!/usr/bin/env bash
# The README's test command: sets up .venv (Python packages), the Kafka jars (Maven Central,
# cached under .cache/), then runs the whole test suite, tier by tier (below). Fails loudly when a
# component is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v java >/dev/null || { echo "test.sh: java (17+) is required for the real Kafka broker" >&2; exit 1; }
command -v mvn >/dev/null || { echo "test.sh: maven is required to resolve the Kafka jars" >&2; exit 1; }
bash scripts/setup.sh --test
bash scripts/kafka-jars.sh
# Kafka 3.9.1 too: the last line that answers ListOffsets v0, the oracle of the legacy (mtime) lookup
# (tests/test_legacy_lookup_v0.py)
KAFKA_VERSION=3.9.1 bash scripts/kafka-jars.sh
# Object storage: s3proxy (a real S3 API server the tests start on 127.0.0.1) and hadoop-aws with its
# AWS SDK bundle at PySpark's Hadoop version (Spark's s3a://), from Maven Central into .cache/s3/
bash scripts/s3-jars.sh >/dev/null
# Debian packages (Chromium for the report, ...): scripts/system-packages.sh lists them
bash scripts/system-packages.sh
export SPARK_LOCAL_IP=127.0.0.1
# Bytecode cache: with PYTHONDONTWRITEBYTECODE set (this machine's shells set it), every Python the
# suite starts (each tier's pytest, its xdist workers, every CLI subprocess) compiled the project's
# modules again, and pytest re-rewrote the asserts of every test module and of its plugins' packages
# (hypothesis, anyio, ...): 7 s of CPU to collect the suite instead of 3 s, in each process. The
# cache goes under .cache/pycache (PYTHONPYCACHEPREFIX), never beside the sources (nor in the
# virtualenvs test_wheel_install sizes). The bytecode of files under /tmp (those virtualenvs,
# pytest's tmp dirs) is never read again: dropped at each start, so the cache does not grow run by run.
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ] && [ -z "${PYTHONPYCACHEPREFIX:-}" ]; then
  export PYTHONPYCACHEPREFIX=$PWD/.cache/pycache
  rm -rf "$PYTHONPYCACHEPREFIX/tmp"
  unset PYTHONDONTWRITEBYTECODE
fi

# The suite in three tiers (pytest marks applied by tests/conftest.py; rules in tests/harness/tiers.py),
# fastest first; a failing step stops the run before any broker starts:
#   unit      pure functions            } one pytest run, the fast lane: 2 workers (pytest-xdist),
#   recorded  real files read offline   } whole files per worker (module fixtures and module totals
#                                         stay in one process)
#   live      brokers, Spark, Airflow,  two workers, whole files each (most of a live module's time is
#             Chromium                  waiting on a broker, a reassignment, a retention cycle: two modules
#                                       overlap their waits), then the modules marked `serial` alone
#                                       (their assertions hold a rate or a duration measured against the
#                                       wall clock: a tmpfs filled at a producer's rate)
# unit and recorded share one run: two runs paid two collections and left a worker idle at the end
# of each (72 s in CI, 55 s together). TEST_TIERS="unit recorded" runs the fast lane only; a single
# tier runs alone. Arguments go to every step's pytest; with no arguments (CI) a step that collects
# no test (pytest exit 5) is a failure, with arguments (a path, -k ...) a step holding none of the
# selected tests is passed over, and all of them holding none fails.
TIERS=" ${TEST_TIERS:-unit recorded live} "
for tier in $TIERS; do
  case $tier in unit|recorded|live) ;;
    *) echo "test.sh: unknown tier '$tier' in TEST_TIERS (unit recorded live)" >&2; exit 2 ;;
  esac
done
steps=()
if [[ $TIERS == *" unit "* && $TIERS == *" recorded "* ]]; then
  steps+=("unit or recorded")
elif [[ $TIERS == *" unit "* ]]; then
  steps+=("unit")
elif [[ $TIERS == *" recorded "* ]]; then
  steps+=("recorded")
fi
[[ $TIERS == *" live "* ]] && steps+=("live and not serial" "live and serial")
declare -A XDIST=([unit or recorded]="-n 2 --dist loadfile" [unit]="-n 2 --dist loadfile"
                  [recorded]="-n 2 --dist loadfile" [live and not serial]="-n 2 --dist loadfile --durations=25"
                  [live and serial]="--durations=10")
summary=()
ran=0
report() { printf 'test.sh: %s\n' "${summary[@]}" "load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2; }
for step in "${steps[@]}"; do
  start=$SECONDS
  set +e
  # shellcheck disable=SC2086  # the xdist options are words
  .venv/bin/python -m pytest -m "$step" ${XDIST[$step]} "$@"
  rc=$?
  set -e
  name=${step// or /+}
  name=${name//live and not serial/live (two workers)}
  summary+=("tier ${name//live and serial/live (serial)}: exit $rc in $((SECONDS - start)) s")
  if [ "$rc" -eq 5 ] && [ "$#" -gt 0 ]; then
    summary[-1]+=" (none of the selected tests is in this tier)"
    continue
  fi
  ran=$((ran + 1))
  if [ "$rc" -eq 5 ]; then
    summary[-1]+=" (pytest collected no tests: that is a failure here)"
    report
    exit 1
  fi
  if [ "$rc" -ne 0 ]; then
    report
    exit "$rc"
  fi
done
report
if [ "$ran" -eq 0 ]; then
  echo "test.sh: no tier collected a test: that is a failure here" >&2
  exit 1
fi
