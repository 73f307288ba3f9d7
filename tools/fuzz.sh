#!/usr/bin/env bash
# tools/fuzz.sh [SECONDS_PER_HARNESS] [harness...]: coverage-guided fuzzing of the decoders.
#
# Builds the C extensions with clang + ASan + UBSan + libFuzzer's coverage (build/fuzz/asan) and
# with clang's source-based coverage (build/fuzz/cov), never touching the in-place build; then,
# one harness at a time under `nice -n 10`, runs atheris for SECONDS_PER_HARNESS (default 60) on
# the committed seeds (tests/fuzz/corpus/H) plus the corpus it grew before (build/fuzz/corpus/H,
# git-ignored, kept between runs). The native harnesses c_* (libFuzzer programs with the C decoders
# linked in and Python embedded, build/fuzz/native/fuzz_c; thousands of executions a second) run
# the same way on the seeds of the atheris harness whose input layout they share (targets.NATIVE),
# their grown corpus in build/fuzz/corpus/c_*. Then it
# prints executions, rate, coverage, corpus size and findings per
# harness with the load average; then the line coverage of each C file by the whole corpus, with
# the lines never run. Findings (crash, sanitizer report, timeout, out of memory, a C/Python
# disagreement) land in build/fuzz/findings/H/ and make the exit code 1 (slow-unit-* files there are
# listed, not counted: inputs over 10 s that did not time out, which a loaded machine makes).
# FUZZ_COVERAGE=0: no coverage step (e.g. several tools/fuzz.sh at once, one harness list each: the
# coverage step replays into one profile dir, so run it once afterwards: tests/fuzz/coverage.py).
# FUZZ_HANGS=1: then benchmarks/fuzz_hangs.py (1 MiB worst cases of every decoder, normal build).
# Long run (the issue's 10,000,000 executions per harness), e.g.:
#   FUZZ_RUNS=10000000 tools/fuzz.sh 0            # a number of runs instead of a time limit
# Docs: docs/fuzzing.md.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
export PYTHONPATH=$ROOT:$ROOT/tests
SECONDS_PER=${1:-60}
shift || true
ALL=$($PY -c 'from fuzz import targets; print(" ".join([*targets.HARNESSES, *targets.NATIVE]))') || exit 2
HARNESSES=${*:-$ALL}
OUT=$ROOT/build/fuzz
# a coverage-instrumented binary run without it writes default.profraw into the working directory
# (the repo root); tests/fuzz/coverage.py sets its own for the profiles it reads
export LLVM_PROFILE_FILE=${LLVM_PROFILE_FILE:-$OUT/profiles-stray/%p-%m.profraw}
$PY -c 'from fuzz import native; native.build("asan"); native.build("cov"); native.build_native(); native.sanitizer_runtime()' || exit 2

status=0
printf '%-18s %10s %8s %8s %6s %7s %9s  %s\n' harness execs exec/s seconds cov ft corpus "findings (load avg before -> after)"
for h in $HARNESSES; do
  mkdir -p "$OUT/corpus/$h" "$OUT/findings/$h" "$OUT/logs"
  log=$OUT/logs/$h.log
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  limit=(-max_total_time="$SECONDS_PER")
  if [ -n "${FUZZ_RUNS:-}" ]; then
    case $h in c_*) limit=(-runs="$FUZZ_RUNS") ;; *) limit=(-atheris_runs="$FUZZ_RUNS") ;; esac
  fi
  start=$(date +%s)
  seeds=$($PY -c "from fuzz import targets; print(targets.seeds('$h'))")
  nice -n 10 "$PY" tests/fuzz/run.py "$h" "$OUT/corpus/$h" "$seeds" "${limit[@]}" \
    -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb="${FUZZ_RSS_MB:-3072}" -malloc_limit_mb="${FUZZ_MALLOC_MB:-1024}" \
    -artifact_prefix="$OUT/findings/$h/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
  rate=$(( ${execs:-0} / (secs > 0 ? secs : 1) ))
  # libFuzzer's slow-unit-* files are inputs slower than -report_slow_units (10 s) that did not time
  # out: a loaded machine makes them (they are listed, to replay on the normal build), not findings
  found=$(ls "$OUT/findings/$h" | grep -vc '^slow-unit-')
  slow=$(ls "$OUT/findings/$h" | grep -c '^slow-unit-')
  what="none"
  [ "$slow" -ne 0 ] && what="none ($slow slow unit(s) in build/fuzz/findings/$h: replay them on the normal build)"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    why=$(grep -m1 -E 'ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer)|runtime error:|^[A-Za-z_.]*(Error|Exception|Disagreement)[:(]|ERROR: libFuzzer' "$log" | cut -c1-160)
    what="rc=$rc, $found file(s) in build/fuzz/findings/$h: $why"
  fi
  printf '%-18s %10s %8s %8s %6s %7s %9s  %s (load %s -> %s)\n' "$h" "${execs:-?}" "$rate" "$secs" "${cov:-?}" "${ft:-?}" \
    "${corp:-?}" "$what" "$load_before" "$load_after"
done

if [ "${FUZZ_COVERAGE:-1}" != 0 ]; then
  echo
  echo "line coverage of the C decoders by the corpus (committed + grown; clang source-based coverage):"
  $PY tests/fuzz/coverage.py $HARNESSES || status=1
fi
if [ -n "${FUZZ_HANGS:-}" ]; then
  echo
  echo "1 MiB worst cases on the normal build (a hang: more than 1 s per decoder call):"
  nice -n 10 "$PY" benchmarks/fuzz_hangs.py || status=1
fi
exit $status
