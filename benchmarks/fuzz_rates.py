"""Executions per second of each fuzz harness, side by side with a git revision's harnesses, in one
run: ``.venv/bin/python benchmarks/fuzz_rates.py [--before REV] [--seconds S] [harness...]``.

For each atheris harness, REV's harness (its tests/fuzz/ and auditor/ exported with ``git archive``
into a temporary directory, built there) and this checkout's run in turn for S seconds each (default
20) from the committed seeds alone (a fresh output corpus, no dictionary or flag change), under
``nice -n 10``; the native harnesses the same way when REV has them (tests/fuzz/native_targets.py).
Prints libFuzzer's own figures (executions, its average exec/s, which leaves out the start-up)
and the run's CPU time (user + system of the harness process, from wait4, start-up included) with
executions per CPU second, and the load average before each run. On the shared machine under
``nice`` the exec/s is mostly the share of a core the run got (at load 15-25 under nice 19, 5-15 %
of one); executions per CPU second is what a harness costs, and what core-hours to a number of
executions follow from. Only figures of one run compare. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fuzz import targets  # noqa: E402


def _run(checkout: Path, harness: str, seconds: int, work: Path) -> tuple[str, str, str]:
    out = work / f"corpus-{checkout.name}-{harness}"
    out.mkdir(parents=True, exist_ok=True)
    seeds = ROOT / targets.seeds(harness)   # the same seeds for both sides
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    env = dict(os.environ, PYTHONPATH=f"{checkout}:{checkout / 'tests'}", PYTHONHASHSEED="0",
               KLA_FUZZ_SCRATCH=str(work / f"scratch-{checkout.name}"))
    logfile = work / f"log-{checkout.name}-{harness}"
    with open(logfile, "w") as log_out:
        proc = subprocess.Popen(["nice", "-n", "10", sys.executable, str(checkout / "tests" / "fuzz" / "run.py"),
                                 harness, str(out), str(seeds), f"-max_total_time={seconds}", "-print_final_stats=1",
                                 f"-artifact_prefix={work}/"], env=env, stdout=log_out, stderr=subprocess.STDOUT,
                                cwd=checkout)
        _, status, usage = os.wait4(proc.pid, 0)   # run.py re-executes itself: one process, its CPU time
        proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    log = logfile.read_text(errors="replace")
    execs = re.findall(r"stat::number_of_executed_units: (\d+)", log)
    rate = re.findall(r"stat::average_exec_per_sec:\s+(\d+)", log)
    if proc.returncode != 0 or not execs:
        return "failed", log[-300:].replace("\n", " | "), load, cpu
    return execs[-1], rate[-1], load, cpu


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="HEAD", help="git revision to compare with (default HEAD)")
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("harness", nargs="*")
    args = parser.parse_args(argv)
    names = args.harness or [*targets.HARNESSES, *targets.NATIVE]
    with tempfile.TemporaryDirectory(prefix="fuzz-rates-") as tmp:
        work = Path(tmp)
        before = work / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", args.before, "auditor", "tests/fuzz", "setup.py"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        rev = subprocess.run(["git", "rev-parse", "--short", args.before], cwd=ROOT, capture_output=True,
                             text=True).stdout.strip()
        has_native = (before / "tests" / "fuzz" / "native_targets.py").exists()
        print(f"{'harness':18} {'side':10} {'execs':>9} {'exec/s':>8} {'CPU s':>7} {'exec/CPU s':>10}  "
              f"load (1, 5, 15 min)")
        for h in names:
            sides = [("now", ROOT)] if h in targets.NATIVE and not has_native else [(rev, before), ("now", ROOT)]
            for label, checkout in sides:
                execs, rate, load, cpu = _run(checkout, h, args.seconds, work)
                per_cpu = f"{int(execs) / cpu:,.0f}" if execs.isdigit() and cpu > 0 else "-"
                print(f"{h:18} {label:10} {execs:>9} {rate:>8} {cpu:7.1f} {per_cpu:>10}  {load}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
