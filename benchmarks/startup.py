"""Start-up time of the broker commands on the base install (issue 25), beside the code before.

    .venv/bin/python benchmarks/startup.py                 # before = main, 11 runs per command
    .venv/bin/python benchmarks/startup.py --before HEAD~3 --runs 21

Prints figures; asserts nothing. Target (issue 25): ``kafka-audit collect --help`` and
``replay-check`` on the base install start in under 0.3 s, printed as PASS/MISS beside the medians.

Method: the working tree is built into a wheel (``python -m build``: sdist, then the wheel from it)
and installed into a fresh virtualenv under ``.cache/bench/startup/`` with the base dependencies
only (no Spark, no pandas; pip byte-compiles as a user's install does). The code before is
``git archive <rev>`` of the same repository, byte-compiled, run with the same virtualenv's
interpreter and ``PYTHONPATH`` on it (its C extensions are not built: start-up does not run them).
Each command is one whole process, timed from spawn to exit (``time.perf_counter``), runs of
before and after interleaved so that load changes hit both; medians and minima of ``--runs``.
``replay-check`` runs in disk mode on the bundled demo sample (4 real Kafka 4.2 log dirs,
unpacked once): the question of issue 25 is the start, and on this sample the check itself is a
few milliseconds. The machine's load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "bench" / "startup"
TARGET_S = 0.3


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc


def base_install() -> Path:
    """A fresh venv with the working tree's wheel, base dependencies only; its python."""
    shutil.rmtree(WORK / "dist", ignore_errors=True)
    shutil.rmtree(WORK / "venv", ignore_errors=True)
    sh([sys.executable, "-m", "build", "--outdir", str(WORK / "dist"), str(ROOT)])
    sh([sys.executable, "-m", "venv", str(WORK / "venv")])
    python = WORK / "venv" / "bin" / "python"
    sh([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(next((WORK / "dist").glob("*.whl")))])
    for module in ("pyspark", "pandas"):
        if subprocess.run([str(python), "-c", f"import {module}"], capture_output=True).returncode == 0:
            raise SystemExit(f"{module} is importable in the base install: not what this measures")
    return python


def tree_at(rev: str) -> Path:
    """``git archive rev`` unpacked and byte-compiled."""
    target = WORK / "before"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    archive = WORK / "before.tar"
    sh(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), rev])
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    sh([sys.executable, "-m", "compileall", "-q", str(target / "auditor"), str(target / "checks"), str(target / "reports")])
    return target


def demo_sample() -> tuple[list[str], dict]:
    target = WORK / "sample"
    if not (target / "demo-cluster" / "demo.json").exists():
        with tarfile.open(ROOT / "auditor" / "samples" / "demo-cluster.tar.gz") as tar:
            tar.extractall(target, filter="data")
    meta = json.loads((target / "demo-cluster" / "demo.json").read_text())
    return [str(target / "demo-cluster" / d) for d in meta["log_dirs"]], meta


def once(cmd: list[str], env: dict, ok: tuple[int, ...]) -> tuple[float, float]:
    """(wall s, CPU s: the child's user + system time) of one whole process."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=WORK, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.decode()[-1000:]}")
    return elapsed, (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="main", help="git revision of the code before (default: main)")
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()}")
    started = time.monotonic()
    python = base_install()
    print(f"base install built and installed in {time.monotonic() - started:.1f} s: {WORK / 'venv'}")
    before = tree_at(args.before)
    dirs, meta = demo_sample()
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    variants = {
        f"before ({args.before})": ([str(python), "-m", "auditor.cli"], {**clean, "PYTHONPATH": str(before)}),
        "after (python -m auditor.cli)": ([str(python), "-m", "auditor.cli"], clean),
        "after (kafka-audit script)": ([str(python.parent / "kafka-audit")], clean),
    }
    replay = ["replay-check", "--json", *[a for d in dirs for a in ("--log-dir", d)],
              "--topic", ",".join(meta["replay_topics"]), "--at", str(meta["replay_at_ms"])]
    commands = {"collect --help": (["collect", "--help"], (0,)), "replay-check (disk, demo sample)": (replay, (0, 1)),
                "replay-check --help": (["replay-check", "--help"], (0,)), "groups --help": (["groups", "--help"], (0,))}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for command, (argv, ok) in commands.items():
        for name, (prefix, env) in variants.items():
            once(prefix + argv, env, ok)  # warm-up: file cache, .pyc written
        for _ in range(args.runs):
            for name, (prefix, env) in variants.items():
                times.setdefault((command, name), []).append(once(prefix + argv, env, ok))
    print(f"\n{args.runs} runs each, whole process (spawn to exit), seconds; CPU = the child's user + system")
    print(f"{'command':<34} {'variant':<32} {'wall med':>8} {'wall min':>8} {'CPU med':>8}  target: wall < {TARGET_S} s")
    for (command, name), values in times.items():
        wall = statistics.median(v[0] for v in values)
        verdict = ("PASS" if wall < TARGET_S else "MISS") if name.startswith("after") else ""
        print(f"{command:<34} {name:<32} {wall:8.3f} {min(v[0] for v in values):8.3f} "
              f"{statistics.median(v[1] for v in values):8.3f}  {verdict}")
    for command in commands:
        b = [statistics.median(v[i] for v in times[(command, f"before ({args.before})")]) for i in (0, 1)]
        a = [statistics.median(v[i] for v in times[(command, "after (python -m auditor.cli)")]) for i in (0, 1)]
        print(f"{command}: before/after = {b[0] / a[0]:.2f}x wall, {b[1] / a[1]:.2f}x CPU")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
