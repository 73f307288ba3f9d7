"""Many short ``kafka-audit`` runs to kill, without paying the interpreter's start-up each time.

:class:`Zygote` starts one Python that imports the CLI (and optionally runs a command once, which
must exit 0, so that the imports a command makes lazily are done too), then forks one process per request that
runs ``auditor.cli.main(args)`` from its start and exits with its exit code. Each is a real
process that a test kills with a real SIGKILL; only the imports are shared. (A cold start of the
CLI costs 1-3 s on a loaded machine, the audit's imports 10 s or more: 50 kills would cost minutes.)
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ZYGOTE = r"""
import json, os, sys
from auditor.cli import build_parser, main
command, warm = json.loads(sys.argv[1])
build_parser(command)  # the command's module and what it imports
if warm:
    import contextlib
    with contextlib.redirect_stdout(sys.stderr):  # (stdout answers the test)
        code = main(warm)  # (imports made inside the command's run)
    if code:  # a test may use the warm-up run's output: it must have succeeded
        sys.exit(f"the warm-up run exited {code}")
sys.stdout.write("ready\n")
sys.stdout.flush()
for line in sys.stdin:
    args, err_path = json.loads(line)
    pid = os.fork()
    if pid == 0:
        fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        try:
            code = main(args)
        except SystemExit as exc:  # (argparse)
            code = exc.code if isinstance(exc.code, int) else 2
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 99
        sys.stderr.flush()
        os._exit(code)
    sys.stdout.write(f"{pid}\n")
    sys.stdout.flush()
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(f"{status}\n")
    sys.stdout.flush()
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


class Zygote:
    """``Zygote(tmp, "collect")``; ``pid = z.start([...])``; kill it or not; ``status = z.wait()``."""

    def __init__(self, tmp: Path, command: str, warm: list[str] | None = None, timeout_s: float = 600):
        self.tmp = tmp
        self.proc = subprocess.Popen([sys.executable, "-c", ZYGOTE, json.dumps([command, warm])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=tmp.joinpath("zygote.err").open("w"),
                                     env=_env(), cwd=ROOT, text=True, bufsize=1)
        line = self.proc.stdout.readline()
        assert line == "ready\n", f"the zygote did not start: {tmp.joinpath('zygote.err').read_text()[-2000:]}"

    def start(self, args: list[str]) -> int:
        """Forks one run of ``kafka-audit ARGS``; its pid."""
        self.proc.stdin.write(json.dumps([args, str(self.tmp / "stderr")]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the zygote died: {self.tmp.joinpath('zygote.err').read_text()[-2000:]}"
        return int(line)

    def wait(self) -> int:
        """The wait status (os.waitpid's) of the run started last."""
        line = self.proc.stdout.readline()
        assert line, f"the zygote died: {self.tmp.joinpath('zygote.err').read_text()[-2000:]}"
        return int(line)

    def stderr(self) -> str:
        """What the run started last wrote on stderr."""
        return (self.tmp / "stderr").read_text(errors="replace")

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def alive(pid: int) -> bool:
    """Running (not a zombie its parent has yet to reap)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def open_files(pid: int, containing: str) -> list[str]:
    """Base names of the files process ``pid`` holds open now whose name contains ``containing``."""
    names = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return names
    for fd in fds:
        try:
            name = os.path.basename(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        if containing in name:
            names.append(name)
    return names


def kill_at_random_moment(zygote: Zygote, args: list[str], rng: random.Random, run_s: float,
                          targets: dict[str, str], temp_mark: str, target_wait_s: float) -> tuple[str, list[str], int, int]:
    """Starts ``args`` in the zygote and SIGKILLs it at a random moment: 40 % after a random delay
    (up to 1.1 x ``run_s``), else while it holds one of ``targets``' temporary files open (a
    random one, plus up to 2 ms). Returns (how the moment was chosen, the temporary files it held
    open then, its wait status, its pid); a run that finished first is not killed."""
    pid = zygote.start(args)
    held: list[str] = []
    if rng.random() < 0.4:
        delay = rng.uniform(0.0, 1.1 * run_s)
        how = f"after {delay * 1000:.0f} ms"
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and alive(pid):
            held = open_files(pid, temp_mark)
            time.sleep(min(0.002, max(deadline - time.monotonic(), 0)))
    else:
        target = rng.choice(sorted(targets))
        extra = rng.uniform(0.0, 0.002)
        how = f"holding the {target} temp file +{extra * 1000:.1f} ms"
        deadline = time.monotonic() + target_wait_s
        while alive(pid) and time.monotonic() < deadline:
            held = open_files(pid, temp_mark)
            if any(targets[target] in n for n in held):
                time.sleep(extra)
                break
    if alive(pid):
        held = open_files(pid, temp_mark) or held
        os.kill(pid, signal.SIGKILL)
    return how, held, zygote.wait(), pid
