"""Executions per second of each fuzz harness, side by side with a git revision's harnesses, in one
run: ``.venv/bin/python benchmarks/fuzz_rates.py [--before REV] [--seconds S] [harness...]``.

For each atheris harness, REV's harness (its tests/fuzz/ and auditor/ exported with ``git archive``
into a temporary directory, built there) and this checkout's run in turn for S seconds each (default
20) from the committed seeds alone (a fresh output corpus, no dictionary or flag change), under
``nice -n 10``; then each native harness (this checkout only: REV has none). Prints libFuzzer's own
figures (executions, its average exec/s, which leaves out the start-up) with the load average
before each run. The machine is shared: only figures of one run compare. Asserts nothing.
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
    done = subprocess.run(["nice", "-n", "10", sys.executable, str(checkout / "tests" / "fuzz" / "run.py"), harness,
                           str(out), str(seeds), f"-max_total_time={seconds}", "-print_final_stats=1",
                           f"-artifact_prefix={work}/"], env=env, capture_output=True, text=True, cwd=checkout)
    log = done.stdout + done.stderr
    execs = re.findall(r"stat::number_of_executed_units: (\d+)", log)
    rate = re.findall(r"stat::average_exec_per_sec:\s+(\d+)", log)
    if done.returncode != 0 or not execs:
        return "failed", log[-300:].replace("\n", " | "), load
    return execs[-1], rate[-1], load


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
        print(f"{'harness':18} {'side':10} {'execs':>9} {'exec/s':>8}  load (1, 5, 15 min)")
        for h in names:
            sides = [("now", ROOT)] if h in targets.NATIVE else [(rev, before), ("now", ROOT)]
            for label, checkout in sides:
                execs, rate, load = _run(checkout, h, args.seconds, work)
                print(f"{h:18} {label:10} {execs:>9} {rate:>8}  {load}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
