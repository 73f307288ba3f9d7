"""The package as users install it (issue 25): ``python -m build`` makes an sdist and a wheel, the
wheel goes into a fresh virtualenv outside the checkout, and a broker's commands run there on the
base install alone (no Spark, no pandas): ``collect``, ``scan --json``, ``replay-check --json`` and
``groups --json`` on real brokers' log dirs give the checkout's results. The same wheel built with
no C compiler (``CC=false``: the optional extensions fail, setuptools leaves them out) gives the same
results through the pure-Python fallbacks. A command that needs the ``[audit]`` extra exits 2 with one
line naming it; after ``pip install 'kafka-log-auditor[audit]'`` in the same environment, ``audit`` runs.

pip uses PyPI (and pip's cache), as a user's install does: no ``--no-build-isolation``, so a build
dependency missing from ``[build-system]`` fails here. The tests run in file order on one module-scoped
virtualenv: the last one adds ``[audit]`` to it. Phase times and the installed size are printed.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.realdata import BROKER_DIRS

# live (the slow lane, after the fast tiers): builds an sdist and two wheels, makes a virtualenv and
# pip-installs from PyPI into it, twice (minutes; a component start, not a fast check)
pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[1]
DEMO_TARBALL = ROOT / "auditor" / "samples" / "demo-cluster.tar.gz"
OFFSETS_LOG_DIR = BROKER_DIRS / "kafka-2018-v2" / "kafka-logs"  # a 2018 broker: __consumer_offsets-28
C_EXTENSIONS = ("formats._cwalk", "formats._coffsets", "formats._cmessage", "keys._ckeys")  # under auditor/
PACKAGE_DATA = ("reports/templates/report.html.j2", "reports/findings.schema.json", "reports/groups.schema.json",
                "auditor/samples/demo-cluster.tar.gz")
VOLATILE = {"as_of_ms", "as_of_utc", "scanned_at_ms", "scanned_at_utc",
            "fs_statted_at_ms", "fs_statted_at_utc", "fs_free_bytes", "fs_available_bytes"}  # statted at each scan
"""Keys whose values are the time of the run, not facts about the data."""
BASE_SIZE_TARGET_MB = 300
# --no-compile: no .pyc written at install (a third of the [audit] install's time here); Python writes
# them on first import instead
PIP = ("-m", "pip", "install", "-q", "--no-compile", "--retries", "10", "--timeout", "60", "--disable-pip-version-check")
# the import names of what [audit] adds; none may be importable on the base install
AUDIT_ONLY_MODULES = ("pyspark", "great_expectations", "pandas", "matplotlib", "jinja2")


def run(cmd: list[str], *, cwd: Path, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def checked(proc: subprocess.CompletedProcess, what: str, ok=(0,)) -> subprocess.CompletedProcess:
    assert proc.returncode in ok, f"{what}: exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


FIGURES: list[str] = []
"""Phase times and sizes, shown on the terminal (captured output or not) by :func:`show_figures`."""


def timed(what: str, fn):
    started = time.monotonic()
    out = fn()
    FIGURES.append(f"{what}: {time.monotonic() - started:.1f} s")
    return out


def show_figures(capsys) -> None:
    with capsys.disabled():
        for line in FIGURES:
            print(f"\n[wheel] {line}", end="", flush=True)
        print(flush=True)
    FIGURES.clear()


# --------------------------------------------------------------------------------------------------
# fixtures: the distributions, the log dirs, the virtualenv
# --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """sdist and wheel (``python -m build``: the wheel is built from the sdist, in an isolated env),
    and a second wheel from the same sdist with no working C compiler."""
    out = tmp_path_factory.mktemp("dist")
    checked(timed("python -m build (sdist, then the wheel from it)", lambda: run(
        [sys.executable, "-m", "build", "--outdir", str(out / "c"), str(ROOT)], cwd=ROOT)), "python -m build")
    sdist = next((out / "c").glob("*.tar.gz"))
    wheel = next((out / "c").glob("*.whl"))
    unpacked = out / "sdist"
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    no_cc = {**os.environ, "CC": "false", "CXX": "false"}
    proc = checked(timed("python -m build --wheel with CC=false", lambda: run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out / "pure"), str(next(unpacked.iterdir()))],
        cwd=out, env=no_cc)), "python -m build --wheel (CC=false)")
    assert "building extension" in proc.stdout + proc.stderr, "the CC=false build did not try (and fail) the C extensions"
    return {"sdist": sdist, "wheel": wheel, "pure_wheel": next((out / "pure").glob("*.whl"))}


@pytest.fixture(scope="module")
def log_dirs(tmp_path_factory) -> dict[str, list[Path]]:
    """The bundled demo sample (real Kafka 4.2 log dirs, mtimes restored from the archive) and a real
    2018 broker's log dir that holds a __consumer_offsets partition (read in place: read-only)."""
    target = tmp_path_factory.mktemp("sample")
    with tarfile.open(DEMO_TARBALL) as tar:
        tar.extractall(target, filter="data")
    root = target / "demo-cluster"
    meta = json.loads((root / "demo.json").read_text())
    return {"demo": [root / d for d in meta["log_dirs"]], "offsets": [OFFSETS_LOG_DIR], "meta": meta,
            "config": root / "demo-audit.yaml"}


@pytest.fixture(scope="module")
def venv(tmp_path_factory, dists):
    """A fresh virtualenv outside the checkout with the wheel's base install only."""
    home = tmp_path_factory.mktemp("venv")
    path = home / "venv"
    checked(run([sys.executable, "-m", "venv", str(path)], cwd=home), "python -m venv")
    python = str(path / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    checked(timed("pip install the wheel (base install)", lambda: run(
        [python, *PIP, str(dists["wheel"])], cwd=home, env=env)), "pip install wheel")
    cwd = home / "cwd"  # no checkout here, nor above
    cwd.mkdir()
    yield {"path": path, "python": python, "kafka_audit": str(path / "bin" / "kafka-audit"), "env": env, "cwd": cwd}
    shutil.rmtree(path, ignore_errors=True)  # 1.2 GB with [audit]: not left for pytest's kept tmp dirs


def in_venv(venv: dict, args: list[str], ok=(0,)) -> subprocess.CompletedProcess:
    return checked(run([venv["kafka_audit"], *args], cwd=venv["cwd"], env=venv["env"]), f"venv: kafka-audit {args[0]}", ok)


def in_checkout(args: list[str], ok=(0,)) -> subprocess.CompletedProcess:
    """The checkout's ``kafka-audit`` run in this process (one import of the stack for every command)."""
    import auditor
    from auditor.cli import main

    assert Path(auditor.__file__).is_relative_to(ROOT), f"auditor imported from {auditor.__file__}, not {ROOT}"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(args)
    return checked(subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue()), f"checkout: kafka-audit {args[0]}", ok)


def venv_python(venv: dict, code: str) -> subprocess.CompletedProcess:
    return run([venv["python"], "-c", code], cwd=venv["cwd"], env=venv["env"])


# --------------------------------------------------------------------------------------------------
# the results compared
# --------------------------------------------------------------------------------------------------

def stable(value):
    """A JSON document without the keys that hold the time of the run."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def manifest_facts(manifest: Path) -> dict:
    """A manifest's tables and cluster parts, less when and where it was collected."""
    facts = {}
    for name in ("segments", "partitions", "log_dirs"):
        table = pq.read_table(manifest / f"{name}.parquet")
        drop = [c for c in ("scanned_at_ms", "host", "collected_at_ms", "finished_at_ms", *VOLATILE) if c in table.column_names]
        facts[name] = table.drop_columns(drop).to_pylist()
    for part in sorted(manifest.glob("*.jsonl.gz")):
        facts[part.name] = [json.loads(line) for line in gzip.open(part).read().splitlines()]
    return facts


def command_results(runner, log_dirs: dict, out: Path) -> dict:
    """collect, scan --json, replay-check --json and groups --json on the real log dirs."""
    demo, offsets, meta = log_dirs["demo"], log_dirs["offsets"], log_dirs["meta"]
    results = {}
    for name, dirs in (("demo", demo), ("offsets", offsets)):
        runner(["collect", "--out", str(out / f"manifest-{name}"), "--depth", "headers", *map(str, dirs)])
        results[f"collect {name}"] = manifest_facts(out / f"manifest-{name}")
        results[f"scan {name}"] = stable(json.loads(runner(["scan", "--json", "--depth", "deep", *map(str, dirs)]).stdout))
    at = ["--at", str(meta["replay_at_ms"])]
    replay_dirs = [a for d in demo for a in ("--log-dir", str(d))]
    for topics in (meta["replay_topics"], ["clicks", "orders", "payments", "sensor-readings"]):
        proc = runner(["replay-check", "--json", *replay_dirs, "--topic", ",".join(topics), *at], ok=(0, 1))
        results[f"replay-check {topics}"] = (proc.returncode, stable(json.loads(proc.stdout)))
    proc = runner(["replay-check", "--json", "--manifest", str(out / "manifest-demo"), "--topic", "orders", *at], ok=(0, 1))
    results["replay-check --manifest"] = (proc.returncode, stable(json.loads(proc.stdout)))
    results["groups"] = stable(json.loads(runner(["groups", "--json", *map(str, offsets)]).stdout))
    results["metadata"] = stable(json.loads(runner(["metadata", "--json", "--history", str(demo[0])]).stdout))
    return results


@pytest.fixture(scope="module")
def checkout_results(tmp_path_factory, log_dirs) -> dict:
    return timed("the commands from the checkout", lambda: command_results(
        in_checkout, log_dirs, tmp_path_factory.mktemp("checkout-out")))


# --------------------------------------------------------------------------------------------------
# the tests (in this order: the last one adds [audit] to the virtualenv)
# --------------------------------------------------------------------------------------------------

def test_sdist_and_wheels_hold_the_code_the_extensions_and_the_package_data(dists):
    with tarfile.open(dists["sdist"]) as tar:
        in_sdist = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    for source in ("auditor/formats/_cwalk.c", "auditor/formats/_coffsets.c", "auditor/formats/_cmessage.c",
                   "auditor/keys/_ckeys.c", "auditor/formats/_record_batch.h", "auditor/formats/_record_reading.h",
                   "auditor/formats/_legacy_message.h",
                   "setup.py", "pyproject.toml", *PACKAGE_DATA):
        assert source in in_sdist, f"{source} missing from the sdist {dists['sdist'].name}"
    for key, with_c in (("wheel", True), ("pure_wheel", False)):
        names = set(zipfile.ZipFile(dists[key]).namelist())
        for data in PACKAGE_DATA + ("auditor/formats/specs/kafka_metadata.py", "auditor/cli/__main__.py"):
            assert data in names, f"{data} missing from {dists[key].name}"
        for ext in C_EXTENSIONS:
            built = [n for n in names if n.startswith(f"auditor/{ext.replace('.', '/')}.") and n.endswith(".so")]
            assert bool(built) == with_c, f"{key}: {ext} compiled: {built}"
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "kafka-audit = auditor.cli:main" in zipfile.ZipFile(dists[key]).read(entry_points).decode()


def test_audit_extra_lists_what_the_cli_checks_for():
    """The modules the CLI looks for before `audit`/`report`/`demo` are those of pyproject's [audit]."""
    from auditor.cli.common import EXTRA_MODULES

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    distributions = sorted(req.split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower()
                           for req in extras["audit"])
    assert distributions == sorted(m.replace("_", "-") for m in EXTRA_MODULES["audit"]) == sorted(
        m.replace("_", "-") for m in AUDIT_ONLY_MODULES)


@pytest.mark.parametrize("command", ["collect", "replay-check", "groups", "metadata"])
def test_broker_commands_start_without_arrow_or_the_audit_stack(command):
    """Their ``--help`` imports neither pyarrow nor numpy (~0.4 s on a broker) nor the [audit] stack:
    the start-up benchmarks/startup.py measures stays small."""
    heavy = ("pyarrow", "numpy") + AUDIT_ONLY_MODULES
    code = ("import contextlib, io, sys\nfrom auditor.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            f"    main([{command!r}, '--help'])  # argparse exits after the help\n"
            f"print(0, sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))")
    proc = checked(run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}),
                   f"{command} --help")
    assert proc.stdout.split(None, 1) == ["0", "[]\n"], proc.stdout


def test_base_install_runs_the_broker_commands_with_the_checkouts_results(venv, log_dirs, checkout_results, tmp_path,
                                                                           capsys):
    where = venv_python(venv, "import auditor, auditor.formats._cwalk as c; print(auditor.__file__); print(c.__file__)")
    checked(where, "import auditor in the venv")
    package, extension = where.stdout.split()
    assert Path(package).is_relative_to(venv["path"]) and Path(extension).is_relative_to(venv["path"]), where.stdout
    for module in AUDIT_ONLY_MODULES:
        proc = venv_python(venv, f"import {module}")
        assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, f"{module} importable on the base install"
    site = next((venv["path"] / "lib").glob("python3.*/site-packages"))
    installer = ("pip", "setuptools", "pkg_resources", "_distutils_hack")  # the venv's own, not ours
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.is_symlink()
               and f.relative_to(site).parts[0].split("-")[0] not in installer)
    total = sum(f.stat().st_size for f in venv["path"].rglob("*") if f.is_file() and not f.is_symlink())
    FIGURES.append(f"base install: {size / 1e6:.0f} MB of packages ({total / 1e6:.0f} MB for the whole venv "
                   f"with pip and setuptools); target {BASE_SIZE_TARGET_MB} MB")
    show_figures(capsys)
    assert size <= BASE_SIZE_TARGET_MB * 1e6, f"the base install takes {size / 1e6:.0f} MB"
    ours = timed("the commands on the base install", lambda: command_results(
        lambda args, ok=(0,): in_venv(venv, args, ok), log_dirs, tmp_path))
    assert ours.keys() == checkout_results.keys()
    for key in ours:
        assert ours[key] == checkout_results[key], f"{key}: the installed wheel differs from the checkout"
    assert ours["groups"]["groups"], "no consumer group read from the real __consumer_offsets"
    show_figures(capsys)


def test_commands_needing_the_audit_extra_exit_2_naming_it(venv, log_dirs, tmp_path):
    demo = log_dirs["demo"]
    for args in (["audit", "--log-dir", str(demo[0]), "--json", str(tmp_path / "f.json")],
                 ["report", "--out", str(tmp_path / "r.html"), str(tmp_path / "f.json")],
                 ["demo"], ["audit", "--help"], ["scan", "--engine", "spark", str(demo[0])]):
        proc = in_venv(venv, args, ok=(2,))
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and "needs the [audit] extra" in lines[0] and \
            "pip install 'kafka-log-auditor[audit]'" in lines[0], (args, proc.stderr)
        assert "Traceback" not in proc.stderr and not proc.stdout


def test_wheel_built_without_a_compiler_gives_the_same_results(venv, dists, log_dirs, checkout_results, tmp_path,
                                                               capsys):
    python = venv["python"]
    try:
        checked(run([python, *PIP, "--force-reinstall", "--no-deps", str(dists["pure_wheel"])], cwd=venv["cwd"],
                    env=venv["env"]), "pip install the CC=false wheel")
        for ext in C_EXTENSIONS:
            proc = venv_python(venv, f"import auditor.{ext}")
            assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, f"{ext} still importable"
        pure = timed("the commands on the pure-Python install", lambda: command_results(
            lambda args, ok=(0,): in_venv(venv, args, ok), log_dirs, tmp_path))
        for key in pure:
            assert pure[key] == checkout_results[key], f"{key}: the pure-Python wheel differs from the checkout"
        show_figures(capsys)
    finally:
        checked(run([python, *PIP, "--force-reinstall", "--no-deps", str(dists["wheel"])], cwd=venv["cwd"],
                    env=venv["env"]), "pip install the wheel again")


def test_audit_extra_added_to_the_same_environment_then_audit_runs(venv, dists, log_dirs, tmp_path, capsys):
    checked(timed("pip install 'kafka-log-auditor[audit]' (the same wheel)", lambda: run(
        [venv["python"], *PIP, f"{dists['wheel']}[audit]"], cwd=venv["cwd"], env=venv["env"])), "pip install [audit]")
    meta = log_dirs["meta"]
    findings, report = tmp_path / "findings.json", tmp_path / "report.html"
    args = ["audit", *[a for d in log_dirs["demo"] for a in ("--log-dir", str(d))], "--config", str(log_dirs["config"]),
            "--as-of", str(meta["made_at_ms"]), "--at", str(meta["replay_at_ms"]), "--topic", ",".join(meta["replay_topics"]),
            "--depth", "deep", "--json", str(findings), "--out", str(report), "--no-progress"]
    timed("audit on the demo sample", lambda: in_venv(venv, args, ok=(1,)))  # the sample's anomalies are planted
    doc = json.loads(findings.read_text())
    codes = {f["code"] for f in doc["findings"]}
    # the planted anomalies: retention gap before the replay target, skew, reassignment (mtime reset),
    # timestamps out of bounds, and the Great Expectations suite's result
    assert {"KLA010", "KLA001", "KLA030", "KLA040", "KLA090"} <= codes, codes
    assert doc["versions"]["great_expectations"] and report.stat().st_size > 10_000
    checked(venv_python(venv, "import pyspark"), "import pyspark after [audit]")
    show_figures(capsys)
