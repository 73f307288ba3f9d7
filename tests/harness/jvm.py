"""Kafka's command-line tools (the oracles: DumpLogSegments, kafka-consumer-groups) run as short JVMs.

Each run loads a few thousand classes of Kafka and Scala from the jars before it reads anything:
about a second of CPU per run, and the suite runs them by the dozen. The first run of a tool on a
classpath writes an archive of the classes it loaded (the JDK's dynamic class-data sharing,
``-XX:ArchiveClassesAtExit``) under ``.cache/jvm-cds/``; later runs map it
(``-XX:SharedArchiveFile``). DumpLogSegments on one small segment: 1.2-1.6 s of CPU without,
0.73-0.85 s with (JDK 17, load 2).

The archive changes how classes are loaded, never what the tool prints: the JVM checks it against
its own build and the classpath's jars and ignores one that does not match (``-Xshare:auto``, the
default). Its name holds a digest of the java binary, the classpath and each jar's size and mtime,
so new jars get a new archive rather than a silently ignored one. CDS logging is off: its warnings
would go to stdout, which the harness parses (tests/test_harness.py compares a run with and
without the archive byte for byte). A run that fails or is killed leaves no archive behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .kafka import REPO_ROOT, tools_log4j_config

ARCHIVE_DIR = REPO_ROOT / ".cache" / "jvm-cds"
#: the tools are short runs: one GC thread, the client compiler only (no C2 threads compiling code
#: that is about to exit)
TOOL_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
QUIET_CDS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def archive_path(classpath: str, main_class: str) -> Path:
    """Where the class-data archive of ``main_class`` on ``classpath`` lives."""
    digest = hashlib.sha256()
    java = shutil.which("java") or "java"
    for part in [os.path.realpath(java), *classpath.split(":")]:
        try:
            st = os.stat(part)
            digest.update(f"{part}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except OSError:
            digest.update(f"{part}\0missing\n".encode())
    return ARCHIVE_DIR / f"{main_class.rsplit('.', 1)[-1]}-{digest.hexdigest()[:16]}.jsa"


def tool_command(classpath: str, main_class: str, args: Sequence[str], jvm_options: Sequence[str] = (),
                 archive: str | None = None) -> list[str]:
    """The java command line of one tool run; ``archive``: the class-data option to add, if any."""
    cmd = ["java", *TOOL_OPTIONS, *jvm_options]
    if archive:
        cmd += [archive, *QUIET_CDS]
    cfg = tools_log4j_config(classpath)
    if cfg:
        cmd.append(f"-Dlog4j2.configurationFile={cfg}")
    return cmd + ["-cp", classpath, main_class, *args]


def run_tool(classpath: str, main_class: str, args: Sequence[str], *, timeout_s: float,
             jvm_options: Sequence[str] = (), text: bool = False, class_data: bool = True,
             **run_kwargs) -> subprocess.CompletedProcess:
    """One run of a Kafka tool (``subprocess.run``, output captured), from the class-data archive
    when there is one; the first successful run writes it (to a temporary name, renamed into
    place: two xdist workers may race, either archive is whole)."""
    final = archive_path(classpath, main_class) if class_data else None
    staged = None
    if final is None:
        class_data_option = None
    elif final.is_file():
        class_data_option = f"-XX:SharedArchiveFile={final}"
    else:
        final.parent.mkdir(parents=True, exist_ok=True)
        staged = final.with_name(f"{final.name}.{os.getpid()}.tmp")
        class_data_option = f"-XX:ArchiveClassesAtExit={staged}"
    try:
        proc = subprocess.run(tool_command(classpath, main_class, args, jvm_options, class_data_option),
                              capture_output=True, timeout=timeout_s, text=text, **run_kwargs)
        if staged is not None and proc.returncode == 0 and staged.is_file():
            os.replace(staged, final)
        return proc
    finally:
        if staged is not None:
            staged.unlink(missing_ok=True)
