"""Reusable Airflow pieces for kafka-log-auditor: import them in your own DAGs.

* :class:`ReplayCheckOperator`: the pre-replay gate. Runs ``kafka-audit replay-check --json``,
  pushes the per-partition answers to XCom (key ``replay_check``) and fails (no retry) when the
  replay is unsafe, with the reasons in the task log and in the exception, so the downstream
  replay task never starts.
* :func:`plan_audit` writes one run's audit arguments into its work directory;
  :func:`spark_submit_audit` runs them with spark-submit (a SparkSubmitOperator, when the Spark
  provider is installed) and :func:`run_audit_cli` as a ``kafka-audit audit`` subprocess;
  :func:`read_audit_result` returns the paths and verdict; :func:`publish_report` copies the results to the output location with a stable
  ``latest`` name and dated copies; :func:`enforce_severity` fails when the audit's findings
  reached the chosen severity; :func:`notify_failure` is an ``on_failure_callback`` that mails
  the recipients through Airflow's SMTP notifier when they and an SMTP connection are set.

The auditor runs as a subprocess (its own interpreter and Spark driver), so a crash or memory
blow-up of a Spark job never takes an Airflow worker down, and the exit codes documented for
scripts are exactly what the tasks act on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from auditor.cli.common import EXIT_INPUT_PROBLEM, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from auditor.manifest import SEGMENTS_FILE, IncompleteManifest, find_manifests
from auditor.manifest_remote import read_marker
from auditor.object_store import JARS_ENV, ObjectStoreError, is_s3, s3a_jars

#: Exit codes of ``kafka-audit`` (auditor/cli/common.py).


def kafka_audit_command() -> list[str]:
    """How to start the CLI: $KAFKA_AUDIT_BIN, else the interpreter Airflow runs in (the
    auditor installed in the same virtualenv), as ``python -m auditor.cli``."""
    custom = os.environ.get("KAFKA_AUDIT_BIN")
    if custom:
        return custom.split()
    return [sys.executable, "-m", "auditor.cli"]


def _run(args: Sequence[str], log, timeout_s: float) -> subprocess.CompletedProcess:
    cmd = kafka_audit_command() + [str(a) for a in args]
    log.info("running %s", " ".join(cmd))
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    for line in proc.stdout.splitlines()[-200:]:
        log.info("kafka-audit: %s", line)
    for line in proc.stderr.splitlines()[-60:]:
        log.info("kafka-audit stderr: %s", line)
    return proc


def _as_list(value) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [v for v in value.split(",") if v]
    return [str(v) for v in value]


class ReplayCheckOperator(BaseOperator):
    """Fails (without retries) when rewinding ``topics`` to ``at`` would be unsafe.

    ``at``: ISO-8601 with zone, epoch ms or relative (``-6h``); templated, so ``{{ params.at }}``
    or a timestamp from an upstream task works. One of ``log_dirs``, ``manifests`` or
    ``bootstrap_server``. ``remote_storage_dir`` (tiered storage, optional): LocalTieredStorage's
    directory, passed as ``--remote-storage-dir`` so answers in remote ranges are exact (without
    it they are the remote segment's offset range). XCom: ``replay_check`` = the command's JSON
    (safe, worst, partitions).
    """

    template_fields = ("topics", "at", "log_dirs", "manifests", "bootstrap_server", "api", "fail_on", "config",
                       "remote_storage_dir")

    def __init__(self, *, topics, at, log_dirs=None, manifests=None, bootstrap_server=None, api: str = "both",
                 fail_on: str = "FAIL", config: str | None = None, timeout_s: float = 600,
                 remote_storage_dir: str | None = None, **kwargs):
        kwargs.setdefault("retries", 0)  # an unsafe answer does not get safer by retrying
        super().__init__(**kwargs)
        self.topics, self.at, self.log_dirs, self.manifests = topics, at, log_dirs, manifests
        self.bootstrap_server, self.api, self.fail_on, self.config = bootstrap_server, api, fail_on, config
        self.remote_storage_dir = remote_storage_dir
        self.timeout_s = timeout_s

    def execute(self, context) -> dict:
        args = ["replay-check", "--topic", ",".join(_as_list(self.topics)), f"--at={self.at}", "--api", self.api,
                "--fail-on", self.fail_on, "--json"]
        if self.config:
            args += ["--config", self.config]
        if self.remote_storage_dir:
            args += ["--remote-storage-dir", self.remote_storage_dir]
        sources = 0
        for d in _as_list(self.log_dirs):
            args += ["--log-dir", d]
            sources = 1
        for m in _as_list(self.manifests):
            args += ["--manifest", m]
            sources = 1
        if self.bootstrap_server:
            args += ["--bootstrap-server", self.bootstrap_server]
            sources = 1
        if not sources:
            raise AirflowFailException("ReplayCheckOperator needs log_dirs, manifests or bootstrap_server")
        proc = _run(args, self.log, self.timeout_s)
        if proc.returncode in (EXIT_USAGE, EXIT_INPUT_PROBLEM, EXIT_INTERNAL) or not proc.stdout.strip():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise AirflowFailException(f"replay-check could not run (exit {proc.returncode}): {last}")
        doc = json.loads(proc.stdout)
        context["ti"].xcom_push(key="replay_check", value=doc)
        unsafe = [p for p in doc["partitions"] if p["severity"] in ("WARN", "FAIL")]
        for p in unsafe:
            self.log.warning("%s %s-%s: %s", p["severity"], p["topic"], p["partition"], p["message"])
        if not doc["safe"]:
            reasons = "; ".join(f"{p['topic']}-{p['partition']}: {p['message']}" for p in unsafe[:5])
            more = f" (and {len(unsafe) - 5} more partitions)" if len(unsafe) > 5 else ""
            raise AirflowFailException(f"replay to {doc['replay_at_utc']} is UNSAFE ({doc['worst']}): {reasons}{more}")
        self.log.info("replay to %s is safe for %d partition(s)", doc["replay_at_utc"], len(doc["partitions"]))
        return {"safe": True, "replay_at_utc": doc["replay_at_utc"], "partitions": len(doc["partitions"])}


def check_inputs(log_dirs=None, manifests=None, max_age_hours: float = 26.0) -> dict:
    """Fresh inputs or a clear failure: log dirs readable, or manifests written recently."""
    dirs = _as_list(log_dirs)
    patterns = _as_list(manifests)
    if not dirs and not patterns:
        raise AirflowFailException("set the log_dirs or manifests param")
    problems = []
    for d in dirs:
        if not os.path.isdir(d) or not os.access(d, os.R_OK | os.X_OK):
            problems.append(f"{d}: not a readable directory")
    found = []
    oldest_allowed = time.time() - max_age_hours * 3600
    for pattern in patterns:
        try:
            hits = [os.path.join(d, SEGMENTS_FILE) for d in find_manifests([pattern])]
        except IncompleteManifest as exc:  # what a killed or failed collect left: never audited as complete
            problems.append(str(exc))
            continue
        except FileNotFoundError:
            problems.append(f"{pattern}: no manifest ({SEGMENTS_FILE}) found")
            continue
        except ObjectStoreError as exc:  # a missing bucket, access denied, an endpoint that does not answer
            problems.append(str(exc))
            continue
        for h in hits:
            if is_s3(h):  # its age: when the collect that wrote it started, in its _complete.json
                manifest = h.rsplit("/", 1)[0]
                collected_ms = read_marker(manifest).get("collected_at_ms") or 0
                if collected_ms / 1000 < oldest_allowed:
                    problems.append(f"{manifest}: collected {(time.time() - collected_ms / 1000) / 3600:.1f} h ago, "
                                    f"longer than {max_age_hours} h (did collect run on that broker?)")
                found.append(h)
                continue
            if "://" in h:  # another remote manifest: the engine reads it; its age cannot be seen from here
                found.append(h)
                continue
            age_h = (time.time() - os.path.getmtime(h)) / 3600
            if os.path.getmtime(h) < oldest_allowed:
                problems.append(f"{h}: {age_h:.1f} h old, older than {max_age_hours} h (did collect run on that broker?)")
            found.append(h)
    if problems:
        raise AirflowFailException("inputs not ready: " + "; ".join(problems))
    return {"log_dirs": dirs, "manifests": found}


def audit_cli_args(work_dir: str, log_dirs=None, manifests=None, spark_master: str | None = None,
                   config_file: str | None = None, history_dir: str | None = None, fail_on: str = "FAIL",
                   spark_conf: dict | None = None, state_dir: str | None = None,
                   metrics_file: str | None = None, metrics_labels: dict | None = None,
                   accept_file: str | None = None, fail_on_new: str | None = None,
                   extra_args: Sequence[str] = ()) -> list[str]:
    """The ``kafka-audit audit`` arguments writing report.html and findings.json into ``work_dir``
    (and, with ``metrics_file``, the run's metrics at that path for node_exporter's textfile
    collector, with ``metrics_labels`` on every series).
    Findings never fail the audit itself (``--exit-zero``): publishing comes first, then
    :func:`enforce_severity` decides."""
    report, findings = os.path.join(work_dir, "report.html"), os.path.join(work_dir, "findings.json")
    args = ["audit", "--out", report, "--json", findings, "--fail-on", fail_on, "--exit-zero", "--progress"]
    for d in _as_list(log_dirs):
        args += ["--log-dir", d]
    for m in _as_list(manifests):
        args += ["--manifest", m]
    if spark_master:
        args += ["--master", spark_master]
    if config_file:
        args += ["--config", config_file]
    if history_dir:
        args += ["--history", history_dir]
    if metrics_file:
        args += ["--metrics", metrics_file]
        for key, value in (metrics_labels or {}).items():
            args += ["--metrics-label", f"{key}={value}"]
    if accept_file:
        args += ["--accept", accept_file]
    if fail_on_new:  # the gate on change: only new or worsened findings fail the night (needs history_dir)
        args += ["--fail-on-new", fail_on_new]
    if state_dir and _as_list(log_dirs):  # incremental scans of log dirs (manifests keep theirs on the brokers)
        args += ["--state", state_dir]
    for key, value in (spark_conf or {}).items():
        args += ["--conf", f"{key}={value}"]
    return args + list(extra_args)


def spark_submit_available() -> bool:
    """Whether the Spark provider (and so SparkSubmitOperator) is installed."""
    try:
        from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator  # noqa: F401
    except ImportError:
        return False
    return True


def submit_application() -> str:
    """The file spark-submit runs: auditor/submit_app.py of the installed auditor."""
    import auditor.submit_app

    return auditor.submit_app.__file__


def plan_audit(work_dir: str, runner: str, **audit_args) -> dict:
    """Prepares one run's work dir: the audit's arguments written to ``audit-args.json`` (what
    spark-submit's application reads) and any results of an earlier attempt removed, so a
    result found afterwards is this attempt's. ``runner``: auto, spark-submit or cli."""
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    for stale in ("report.html", "findings.json"):
        (work / stale).unlink(missing_ok=True)
    if runner == "auto":
        runner = "spark-submit" if spark_submit_available() else "cli"
    if runner == "spark-submit":
        audit_args["spark_master"] = None  # spark-submit's master (the Spark connection) applies
    args = audit_cli_args(str(work), **audit_args)
    args_file = work / "audit-args.json"
    args_file.write_text(json.dumps(args, indent=1))
    return {"work_dir": str(work), "args": args, "args_file": str(args_file), "runner": runner,
            "jars": s3a_submit_jars(audit_args.get("manifests"), audit_args.get("spark_conf"))}


def s3a_submit_jars(manifests, spark_conf: dict | None) -> str:
    """spark-submit's ``--jars`` for ``s3://`` / ``s3a://`` manifests: hadoop-aws and the AWS SDK
    bundle (auditor.object_store.s3a_jars; the driver started by spark-submit cannot add them to its
    own classpath later), unless ``spark_conf`` brings hadoop-aws; "" otherwise. The s3a settings
    themselves come from the worker's AWS environment when the audit builds its session."""
    if not any(is_s3(m) for m in _as_list(manifests)):
        return ""
    given = (spark_conf or {}).get("spark.jars", "") + (spark_conf or {}).get("spark.jars.packages", "")
    if "hadoop-aws" in given:
        return ""
    jars = s3a_jars()
    if jars is None:
        raise AirflowFailException(f"s3:// manifests need hadoop-aws for Spark: run `bash scripts/s3-jars.sh "
                                   f"hadoop-aws` in the auditor's checkout or set {JARS_ENV} on the workers")
    return ",".join(jars)


def read_audit_result(work_dir: str) -> dict:
    """The audit's outcome from the findings.json it wrote into ``work_dir``."""
    findings = os.path.join(work_dir, "findings.json")
    if not os.path.exists(findings):
        raise RuntimeError(f"the audit wrote no {findings}: see the audit task's log")
    doc = json.loads(Path(findings).read_text())
    return {"report": os.path.join(work_dir, "report.html"), "findings": findings, "verdict": doc["verdict"],
            "exit_code": doc["exit_code"], "counts": doc["counts"], "as_of_utc": doc["as_of_utc"]}


def run_audit_cli(work_dir: str, args: Sequence[str], timeout_s: float = 4 * 3600, log=None) -> dict:
    """``kafka-audit audit`` with ``args`` (from :func:`audit_cli_args` or :func:`plan_audit`) as a
    subprocess whose Spark driver runs on this worker; the results land in ``work_dir``."""
    import logging

    log = log or logging.getLogger("kafka_audit")
    Path(work_dir).mkdir(parents=True, exist_ok=True)
    proc = _run(args, log, timeout_s)
    if proc.returncode in (EXIT_USAGE, EXIT_INPUT_PROBLEM):
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise AirflowFailException(f"kafka-audit audit refused its input (exit {proc.returncode}): {last}")
    if proc.returncode != EXIT_OK or not os.path.exists(os.path.join(work_dir, "findings.json")):
        # a crash (Spark, memory): worth the task's retries
        raise RuntimeError(f"kafka-audit audit failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return read_audit_result(work_dir)


def spark_submit_audit(task_id: str, plan_task_id: str = "plan", conn_id: str = "spark_default",
                       conf: dict | None = None, **kwargs) -> BaseOperator:
    """A SparkSubmitOperator running the audit planned by ``plan_task_id`` (its audit-args.json)
    with the driver started by spark-submit: master, deploy mode and resources come from the
    Airflow Spark connection ``conn_id`` and ``conf``. The driver's and executors' Python is
    this worker's interpreter unless ``conf`` says otherwise (spark.pyspark.python)."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    settings = {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable}
    settings.update(conf or {})
    return SparkSubmitOperator(
        task_id=task_id, application=submit_application(), conn_id=conn_id, conf=settings,
        application_args=[f"{{{{ ti.xcom_pull(task_ids='{plan_task_id}')['args_file'] }}}}"],
        jars=f"{{{{ ti.xcom_pull(task_ids='{plan_task_id}').get('jars', '') }}}}",   # s3:// manifests: hadoop-aws
        name="kafka-log-auditor", **kwargs)


def _atomic_copy(src: str, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def publish_report(result: dict, output_dir: str, date: str, keep: int = 30) -> dict:
    """``kafka-audit-latest.{html,json}`` plus ``kafka-audit-<date>.{html,json}``, keeping the
    newest ``keep`` dated copies."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for src, ext in ((result["report"], "html"), (result["findings"], "json")):
        for name in (f"kafka-audit-{date}.{ext}", f"kafka-audit-latest.{ext}"):
            _atomic_copy(src, out / name)
            written.append(str(out / name))
        dated = sorted(p for p in out.glob(f"kafka-audit-*.{ext}") if not p.name.startswith("kafka-audit-latest"))
        for old in dated[:-keep] if keep > 0 else []:
            old.unlink()
    return {"written": written, "latest_report": str(out / "kafka-audit-latest.html")}


def change_lines(doc: dict, limit: int = 20) -> list[str]:
    """The failure mail's body for a gate on change (``fail_on_new``): the new findings at or above
    it (FAILs first), then the worsened ones, each "SEVERITY CODE where: message"."""
    from checks.framework.base import RANK as rank
    floor = rank[doc["fail_on_new"]]
    lines = []
    for status in ("new", "worsened"):
        hits = sorted((f for f in doc["findings"] if f.get("status") == status and rank[f["severity"]] >= max(floor, 1)),
                      key=lambda f: (-rank[f["severity"]], f.get("identity") or ""))
        lines.append(f"{status} ({len(hits)}):")
        for f in hits[:limit]:
            place = f"{f.get('topic')}-{f.get('partition')}" if f.get("topic") is not None else "cluster"
            lines.append(f"  {f['severity']} {f['code']} {place}"
                         f"{' broker ' + str(f['broker_id']) if f.get('broker_id') is not None else ''}: {f['message']}")
        if len(hits) > limit:
            lines.append(f"  ... and {len(hits) - limit} more in the report")
    return lines


def enforce_severity(result: dict, published: dict) -> dict:
    """Fails the run when the findings reached the failing severity (the audit's exit_code); with
    the gate on change, the message lists the new findings first, then the worsened ones."""
    if result["exit_code"] != EXIT_OK:
        doc = json.loads(Path(result["findings"]).read_text())
        if doc.get("fail_on_new"):
            since = doc.get("since") or {}
            raise AirflowFailException(
                f"audit: {since.get('new', 0)} new and {since.get('worsened', 0)} worsened finding(s), gate at "
                f"{doc['fail_on_new']} (new or worsened since {(doc.get('history') or {}).get('previous_run_utc') or 'no earlier run'})\n"
                + "\n".join(change_lines(doc)) + f"\nreport: {published['latest_report']}")
        worst = [f for f in doc["findings"] if f["severity"] == doc["verdict"]][:5]
        lines = "; ".join(f"{f['code']} {f.get('topic') or ''}-{f.get('partition')}: {f['message']}" for f in worst)
        raise AirflowFailException(f"audit verdict {doc['verdict']} reaches {doc['fail_on']}: {lines} "
                                   f"(report: {published['latest_report']})")
    return {"verdict": result["verdict"]}


def notify_failure(context: dict[str, Any]) -> None:
    """on_failure_callback: mail the ``recipients`` param through Airflow's SMTP notifier.
    Without recipients (or without an SMTP connection) it only logs: the failed run, its log and
    Airflow's own alerting remain."""
    import html
    import logging

    log = logging.getLogger("kafka_audit")
    params = context.get("params") or {}
    recipients = _as_list(params.get("recipients"))
    ti = context.get("ti") or context.get("task_instance")
    what = f"{getattr(ti, 'dag_id', '?')}.{getattr(ti, 'task_id', '?')} failed: {context.get('exception')}"
    log.error("kafka-audit: %s", what)
    if not recipients:
        return
    try:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        SmtpNotifier(to=recipients, subject=f"[kafka-audit] {what.splitlines()[0][:150]}",
                     html_content=f"<pre>{html.escape(what)}</pre><p>Report: "
                                  f"{html.escape(str(params.get('output_dir')))}/kafka-audit-latest.html</p>",
                     smtp_conn_id=params.get("smtp_conn_id") or "smtp_default").notify(context)
    except Exception as exc:  # noqa: BLE001 - a notification problem must not hide the failure itself
        log.error("kafka-audit: could not mail %s: %s", recipients, exc)
