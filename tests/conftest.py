"""Session fixtures for the real-Kafka harness (tests/harness/).

Java and Maven are required: when they are missing these fixtures FAIL (never skip), because
a test that silently skips its real broker proves nothing.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys

import pytest

# the shared helpers of tests/harness/ assert as the tests do: their failures show the values compared
pytest.register_assert_rewrite("harness")

from harness import tiers  # noqa: E402 - after the rewrite is registered
from harness.dumplog import DumpLogSegments  # noqa: E402
from harness.kafka import KafkaCluster, kafka_classpath  # noqa: E402


_module_reads_real_files: dict[str, bool] = {}


def _reads_real_files(module) -> bool:
    """The module imported harness/realdata.py (itself, or a name it defines)."""
    if module.__name__ not in _module_reads_real_files:
        rd = sys.modules.get(tiers.RECORDED_MODULE)
        ours = set()
        if rd is not None:
            ours = {id(v) for k, v in vars(rd).items() if not k.startswith("_") and k != "annotations"
                    and not inspect.ismodule(v) and not isinstance(v, type)}
            ours.add(id(rd))
        _module_reads_real_files[module.__name__] = any(id(v) in ours for v in vars(module).values())
    return _module_reads_real_files[module.__name__]


@pytest.hookimpl(tryfirst=True)  # before -m deselects by these marks
def pytest_collection_modifyitems(config, items):
    """Every test's tier is the one its module or its own decorator declares (tests/harness/tiers.py);
    collection fails on a test declaring none, or one lighter than the fixtures it uses."""
    rank = {t: i for i, t in enumerate(tiers.TIERS)}
    errors = []
    for item in items:
        declared_all = {m.name for m in item.iter_markers() if m.name in rank}
        if len(declared_all) != 1:
            errors.append(f"{item.nodeid}: {'no tier' if not declared_all else 'tiers ' + ', '.join(sorted(declared_all))} "
                          "declared (one of: pytestmark = pytest.mark.unit|recorded|live, or the test's decorator)")
            continue
        declared = declared_all.pop()
        names = set(getattr(item, "fixturenames", ()))
        implied = "unit"
        if names & tiers.RECORDED_FIXTURES or (item.module is not None and _reads_real_files(item.module)):
            implied = "recorded"
        if names & tiers.LIVE_FIXTURES:
            implied = "live"
        if rank[declared] < rank[implied]:
            errors.append(f"{item.nodeid}: declared {declared} but its fixtures make it {implied} ({sorted(names)})")
    if errors:
        raise pytest.UsageError("test tiers (tests/harness/tiers.py):\n" + "\n".join(errors))


def pytest_configure(config):
    # pytest-xdist (--dist loadfile) hands out files in collection order, the one set below
    # (pytest_collection_modifyitems_long_files_first). Its own reordering, by number of tests,
    # would put a one-test file of 30 s last, run by one worker while the other has finished.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")  # after -m deselects
def pytest_collection_modifyitems_long_files_first(config, items):
    """Under pytest-xdist, whole files longest first: the modules marked ``schedule_first(cpu_s=N)``
    by N, then the others by number of selected tests (xdist's own order); each file's tests keep
    their order. A long file handed out last keeps one worker busy while the other has finished."""
    if not hasattr(config, "workerinput"):  # an xdist worker collects for the scheduler (its dist is "no")
        return
    files: dict[str, list] = {}
    for i, item in enumerate(items):
        path = item.nodeid.split("::")[0]
        if path not in files:
            mark = item.get_closest_marker("schedule_first")
            files[path] = [-(mark.kwargs["cpu_s"] if mark else 0), 0, i]
        files[path][1] -= 1
    items.sort(key=lambda item: files[item.nodeid.split("::")[0]])


def pytest_collection_finish(session):
    """A session with no live test selected may not start a broker or Spark (tiers.py's guard)."""
    if session.items and not any(item.get_closest_marker("live") for item in session.items):
        os.environ[tiers.FAST_ONLY_ENV] = "1"


def _require_java_and_maven() -> None:
    missing = [t for t in ("java", "mvn") if shutil.which(t) is None]
    if missing:
        pytest.fail(f"the real-Kafka test harness needs {' and '.join(missing)} on PATH "
                    "(Java 17+, Maven 3.8+); install them, do not skip these tests", pytrace=False)
    out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    first = out.splitlines()[0] if out else ""
    try:
        major = int(first.split('"')[1].split(".")[0])
    except (IndexError, ValueError):
        major = 0
    if major < 17:
        pytest.fail(f"Kafka 4.x needs Java 17+, found: {first!r}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_classpath_str() -> str:
    """The ':'-joined classpath of Kafka 4.2.1 jars (runs scripts/kafka-jars.sh once)."""
    _require_java_and_maven()
    return kafka_classpath()




@pytest.fixture(scope="session", name="kafka_classpath")
def _kafka_classpath(kafka_classpath_str: str) -> str:
    return kafka_classpath_str


@pytest.fixture(scope="module")
def kafka_cluster_factory(tmp_path_factory, kafka_classpath_str):
    """``factory(brokers=1, log_dirs_per_broker=1, broker_config=None, start=True, **kw)`` ->
    a started KafkaCluster in a fresh tmp dir.  Every cluster is stopped at the end of the module
    that made it (one factory per module): a finished module's brokers never hold memory, CPU and
    ports while the next modules run."""
    clusters: list[KafkaCluster] = []

    def factory(brokers: int = 1, log_dirs_per_broker: int = 1, broker_config=None,
                start: bool = True, **kw) -> KafkaCluster:
        workdir = tmp_path_factory.mktemp(f"kafka-{brokers}b")
        kc = KafkaCluster(workdir, brokers=brokers, log_dirs_per_broker=log_dirs_per_broker,
                          broker_config=broker_config, classpath=kafka_classpath_str, **kw)
        clusters.append(kc)
        if start:
            kc.start()
        return kc

    yield factory
    errors = []
    for kc in clusters:
        try:
            kc.stop()
        except Exception as e:  # stop the rest anyway
            errors.append(f"{kc.workdir}: {e}")
    if errors:
        raise RuntimeError("stopping Kafka clusters failed: " + "; ".join(errors))


@pytest.fixture(scope="session")
def dump_log_segments(kafka_classpath_str) -> DumpLogSegments:
    """Kafka's own DumpLogSegments, parsed (``.dump(files)``, ``.dump_dir(dir)``,
    ``.dump_record_set(bytes_or_path)``)."""
    return DumpLogSegments(classpath=kafka_classpath_str)
