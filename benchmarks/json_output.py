"""``--json`` against the table view on the same input: JSON must cost at most 1.3x the table.

    .venv/bin/python benchmarks/json_output.py            # builds .cache/bench/json-5000 once (~20 s)
    .venv/bin/python benchmarks/json_output.py --runs 5

Input: a log dir of 5,000 partition dirs, copies of the real broker fixtures' partition dirs
(``../shared/fixtures/real/broker-dirs``; real segment bytes, made-up topic names
``jsonbench<k>-<p>``). Each command runs as a fresh ``kafka-audit`` process, stdout to
``/dev/null``; wall time of the whole process, medians of ``--runs``:

* ``scan DIR`` (table) vs ``scan --json DIR``, at ``index`` and ``headers`` depth;
* ``audit --log-dir DIR`` (summary table only) vs ``audit --log-dir DIR --json -``.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures" / "real" / "broker-dirs"
TARGET_DIRS = 5000
CLI = str(REPO / ".venv" / "bin" / "kafka-audit")


def build(root: Path) -> Path:
    target = root / "json-5000" / "data"
    done = root / "json-5000" / "DONE"
    if done.exists():
        return target
    shutil.rmtree(target.parent, ignore_errors=True)
    target.mkdir(parents=True)
    sources = sorted(p for p in FIXTURES.glob("*/*/*") if p.is_dir() and not p.name.startswith("__"))
    if not sources:
        raise SystemExit(f"no partition dirs under {FIXTURES}")
    meta = next(FIXTURES.glob("*/*/meta.properties"))
    shutil.copy2(meta, target / "meta.properties")
    k = 0
    while k < TARGET_DIRS:
        src = sources[k % len(sources)]
        shutil.copytree(src, target / f"jsonbench{k}-0", copy_function=shutil.copy2)
        k += 1
    done.write_text("ok\n")
    return target


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
                   env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--root", default=str(REPO / ".cache" / "bench"))
    ap.add_argument("--no-audit", action="store_true")
    args = ap.parse_args(argv)
    d = build(Path(args.root))
    n_segments = sum(1 for _ in d.glob("*/*.log"))
    print(f"--json vs table ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} CPUs; "
          f"{TARGET_DIRS:,} partition dirs, {n_segments:,} segments; medians of {args.runs} runs, whole process)")
    pairs = [(f"scan --depth {depth}", ["scan", "--no-progress", "--depth", depth, str(d)],
              ["scan", "--no-progress", "--depth", depth, "--json", str(d)]) for depth in ("index", "headers")]
    if not args.no_audit:
        pairs.append(("audit --depth headers", ["audit", "--no-progress", "--log-dir", str(d)],
                      ["audit", "--no-progress", "--log-dir", str(d), "--json", "-"]))
    print(f"  {'command':<24} {'table s':>8} {'--json s':>9} {'ratio':>6}  target <= 1.3x")
    for label, table_args, json_args in pairs:
        t = statistics.median(timed(table_args) for _ in range(args.runs))
        j = statistics.median(timed(json_args) for _ in range(args.runs))
        print(f"  {label:<24} {t:>8.2f} {j:>9.2f} {j / t:>5.2f}x  {'PASS' if j / t <= 1.3 else 'MISS'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
