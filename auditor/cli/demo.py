"""``kafka-audit demo``: the full audit on a bundled sample of real broker data (on the driver, or Spark local mode)."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tarfile
import tempfile
from importlib.resources import files
from pathlib import Path

from auditor.audit import AuditRequest
from auditor.engines.base import ENGINES
from auditor.cli.audit import AuditRun, execute
from auditor.cli.common import FORMATTER
from auditor.units import iso_utc

DEMO_SAMPLE = "demo-cluster.tar.gz"


def register(sub) -> None:
    demo = sub.add_parser(
        "demo",
        formatter_class=FORMATTER,
        help="the full audit on a bundled sample of real broker data (--engine spark: Spark local mode)",
        description=(
            "Unpack a bundled sample of log dirs written by real Kafka 4.2 brokers, with planted\n"
            "anomalies (a skewed topic, a reassigned partition, a retention gap, out-of-bound and\n"
            "future timestamps, consumer groups behind the log start and on a deleted topic, a\n"
            "tiered-storage topic with its remote files, keyed topics), restore its files' mtimes,\n"
            "and run the full audit: with --engine spark on Spark in local mode (the job a cluster\n"
            "runs), by default (auto) on the driver, as `audit` does for small inputs (same\n"
            "findings, no JVM). The audit time is the time the sample was made, and the sample's\n"
            "config scales the time thresholds to the minutes the sample took to make. Then it\n"
            "prints the commands to run next on the same sample (replay-check, replay-check\n"
            "--group, groups), ready to copy."
        ),
    )
    demo.add_argument("--out", metavar="DIR", help="where to unpack and write the report (default: a new temp dir)")
    demo.add_argument("--engine", choices=ENGINES, default="auto",
                      help="where the checks run: auto (this small sample: the driver), local, or spark "
                           "(Spark local mode unless --master)")
    demo.add_argument("--master", help="Spark master (default local[*]; implies --engine spark)")
    demo.set_defaults(func=run)



def remote_storage_of(log_dirs: list[Path], meta: dict) -> Path | None:
    """The sample's LocalTieredStorage directory (the tiered topic's remote segments), if it has one."""
    name = meta.get("remote_storage_dir")
    return log_dirs[0].parent / name if name else None


def program_name() -> str:
    """How this process was started, so that a printed command runs as it is: the ``kafka-audit``
    script (by its absolute path when it was called by a path, ``.venv/bin/kafka-audit``), else
    ``python -m auditor.cli``."""
    script = sys.argv[0]
    if os.path.basename(script) == "kafka-audit":
        return shlex.quote(os.path.abspath(script) if os.sep in script else script)
    return f"{shlex.quote(sys.executable)} -m auditor.cli"


def next_commands(log_dirs: list[Path], meta: dict, program: str = "kafka-audit") -> list[tuple[str, str]]:
    """(what it shows, the command) for what a user runs next on the unpacked sample."""
    dirs = " ".join(f"--log-dir {shlex.quote(str(d))}" for d in log_dirs)
    at = iso_utc(meta["replay_at_ms"])
    remote = remote_storage_of(log_dirs, meta)
    tiered = f" --remote-storage-dir {shlex.quote(str(remote))}" if remote else ""
    return [
        (f"per partition, what a consumer rewound to {at} gets (exit 0 safe, 1 unsafe)",
         f"{program} replay-check --topic {','.join(meta['replay_topics'])} --at {at} {dirs}{tiered}"),
        (f"group {meta['replay_group']} reset with kafka-consumer-groups --to-datetime {at}: what it re-reads or skips "
         f"(exit 0 safe, 1 unsafe)",
         f"{program} replay-check --group {shlex.quote(meta['replay_group'])} --at {at} {dirs}{tiered}"),
        ("every consumer group on disk: committed offsets, log start and end, lag (exit 0)",
         f"{program} groups {' '.join(shlex.quote(str(d)) for d in log_dirs)}"),
    ]


def unpack_demo_sample(target: Path) -> tuple[list[Path], dict]:
    """Unpacks the planted-anomaly sample (mtimes restored from the archive); returns its log
    dirs and its description (demo.json: when it was made, the replay target, the config)."""
    target.mkdir(parents=True, exist_ok=True)
    with files("auditor.samples").joinpath(DEMO_SAMPLE).open("rb") as fh, tarfile.open(fileobj=fh) as tar:
        tar.extractall(target, filter="data")  # keeps each member's mtime: the sample's evidence
    root = target / "demo-cluster"
    meta = json.loads((root / "demo.json").read_text())
    log_dirs = [root / d for d in meta["log_dirs"]]
    return log_dirs, meta


def run(args) -> int:
    # absolute: the commands printed at the end must work from any directory
    out = Path(args.out).resolve() if args.out else Path(tempfile.mkdtemp(prefix="kafka-audit-demo-"))
    log_dirs, meta = unpack_demo_sample(out / "sample")
    sys.stderr.write(f"demo: sample of {len(log_dirs)} real broker log dirs unpacked under {out / 'sample'}\n")
    remote = remote_storage_of(log_dirs, meta)  # the tiered topic's remote segments: exact replay answers
    req = AuditRequest(log_dirs=[str(d) for d in log_dirs], depth="deep", config_path=str(log_dirs[0].parent / "demo-audit.yaml"),
                       replay_at_ms=meta["replay_at_ms"], replay_topics=meta["replay_topics"], master=args.master,
                       as_of_ms=meta["made_at_ms"], engine=args.engine,
                       remote_storage_dir=str(remote) if remote else None, keys=True)
    execute(AuditRun(request=req, out_html=str(out / "report.html"), out_json=str(out / "findings.json"),
                     history=str(out / "history"), progress=True))
    print(f"\nreport: {out / 'report.html'}\nfindings: {out / 'findings.json'}")
    # the sample's findings are planted: the demo succeeded when the report is written
    print("(the sample's anomalies are planted: `kafka-audit audit` would exit 1 on them; the demo exits 0)")
    if "replay_group" in meta:
        print("\nnext, on the same sample (exit codes: 0 safe, 1 unsafe, 2 usage error, 3 input problem):")
        for what, command in next_commands(log_dirs, meta, program_name()):
            print(f"\n# {what}\n{command}")
    return 0
