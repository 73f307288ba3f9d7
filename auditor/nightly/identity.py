"""Since the last run: finding identity and the night-to-night classification (pure functions).

A finding's **identity** names the problem, not the night: the check's code and the fields its
class declares in ``Check.identity`` (topic, partition, broker, log dir by default; a consumer
group or a config key for the checks about those), never the segment base offset (segments roll).
Two findings of one check at one place (one per corrupt segment, say) share the identity and are
judged together.

:func:`classify` compares this run's findings with the previous run's rows from the history:

* **new**: the identity was not open in the previous run (absent there, or PASS then);
* **worsened**: it was open and its severity went up;
* **persisting**: it was open at the same or a higher severity;
* **resolved** (a list of its own): open in the previous run, now absent or PASS.

A PASS result is compared with PASS results (new the first night the check passes there). Every
finding carries ``first_seen`` (the run it opened in, kept while it stays open) and ``runs_open``
(runs in a row it has been open, this one included). No previous run: every problem is new.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from auditor.units import iso_utc
from checks.framework.base import RANK

STATUSES = ("new", "worsened", "persisting")
DEFAULT_IDENTITY = ("topic", "partition", "broker_id", "log_dir")
SHORT = {"topic": "topic", "partition": "partition", "broker_id": "broker", "log_dir": "log_dir"}
#: Findings that come from outside the check registry (Great Expectations on the segment table):
#: the expectation's name, read from the message's "(expect_... on column)" tail.
EXPECTATION_CODE = "KLA090"
_EXPECTATION = re.compile(r"\((expect_[a-z_]+)(?: on ([^)]*))?\)")


def identity_fields(check: str, lookup: Callable[[str], object] | None = None) -> tuple[str, ...]:
    """The identity fields a check declares (``Check.identity``), or the default."""
    if lookup is None:
        from checks import check_named as lookup
    cls = lookup(check) if check else None
    return tuple(getattr(cls, "identity", DEFAULT_IDENTITY))


def identity_line(fields: Sequence[str]) -> str:
    """The identity of a check in words, for the docs: "code + topic, partition, broker, log dir"."""
    words = {"broker_id": "broker", "log_dir": "log dir"}
    return "code + " + ", ".join(words.get(f, f.replace("evidence.", "") if f.startswith("evidence.") else f)
                                 for f in fields)


def identity_of(finding: Mapping, fields: Sequence[str]) -> str:
    """``KLA045 topic=orders partition=3 broker=1 log_dir=/data/k1``: readable and stable."""
    code = finding["code"]
    if code == EXPECTATION_CODE:
        m = _EXPECTATION.search(finding.get("message") or "")
        return f"{code} " + (f"expectation={m.group(1)}{'/' + m.group(2) if m.group(2) else ''}" if m else
                             "expectation=" + json.dumps(finding.get("thresholds") or {}, sort_keys=True, default=str))
    parts = [code]
    evidence = None
    for f in fields:
        if f.startswith("evidence."):
            if evidence is None:
                first = (finding.get("evidence") or [None])[0]
                evidence = first if isinstance(first, Mapping) else {}
            key = f[9:]
            value = evidence.get(key)
        else:
            key, value = SHORT.get(f, f), finding.get(f)
        parts.append(f"{key}={'-' if value is None else value}")
    return " ".join(parts)


@dataclass(frozen=True)
class PreviousRow:
    """One identity in the previous run of the history (its worst severity there)."""

    identity: str
    severity: str
    first_seen_ms: int
    runs_open: int
    check: str = ""
    code: str = ""
    topic: str | None = None
    partition: int | None = None
    broker_id: int | None = None
    log_dir: str | None = None
    message: str = ""


@dataclass
class Comparison:
    """What :func:`classify` adds to a run: statuses on the findings, and the resolved list."""

    findings: list[dict]
    resolved: list[dict] = field(default_factory=list)

    def counts(self, min_rank: int = 1) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for f in self.findings:
            if RANK[f["severity"]] >= min_rank and f.get("status"):
                out[f["status"]] += 1
        out["resolved"] = len(self.resolved)
        return out


def status_of(severity: str, previous: PreviousRow | None) -> str:
    """new / worsened / persisting of one finding against its identity's previous row."""
    if previous is None:
        return "new"
    was_open, is_open = RANK[previous.severity] > 0, RANK[severity] > 0
    if was_open != is_open:
        return "new"  # a problem after a PASS is new; so is a PASS after a problem (that one is resolved)
    return "worsened" if RANK[severity] > RANK[previous.severity] else "persisting"


def classify(findings: Sequence[dict], previous: Mapping[str, PreviousRow] | None, as_of_ms: int) -> Comparison:
    """Each finding (dicts with ``identity`` set) gets status, first_seen(_ms) and runs_open (in
    place: the dicts are the document's); the previous run's open identities that are absent now
    or only PASS make the resolved list. ``previous`` None: no previous run (status new, first seen now)."""
    prev = previous or {}
    out = []
    texts: dict[int, str | None] = {}  # first-seen times repeat (one per earlier run): format each once
    for f in findings:
        p = prev.get(f["identity"])
        status = status_of(f["severity"], p)
        continuing = p is not None and (RANK[p.severity] > 0) == (RANK[f["severity"]] > 0)
        first = p.first_seen_ms if continuing else as_of_ms
        if first not in texts:
            texts[first] = iso_utc(first)
        f.update(status=status, first_seen=texts[first], first_seen_ms=first,  # in place: no copy a finding
                 runs_open=p.runs_open + 1 if continuing else 1)
        out.append(f)
    worst_now: dict[str, int] = {}
    for f in findings:
        worst_now[f["identity"]] = max(worst_now.get(f["identity"], 0), RANK[f["severity"]])
    resolved = [
        {"identity": p.identity, "check": p.check, "code": p.code, "severity_before": p.severity, "topic": p.topic,
         "partition": p.partition, "broker_id": p.broker_id, "log_dir": p.log_dir,
         "first_seen": iso_utc(p.first_seen_ms), "first_seen_ms": p.first_seen_ms, "runs_open": p.runs_open,
         "message_before": p.message, "now": "PASS" if p.identity in worst_now else "gone"}
        for p in sorted(prev.values(), key=lambda r: (-RANK[r.severity], r.identity))
        if RANK[p.severity] > 0 and worst_now.get(p.identity, 0) == 0
    ]
    return Comparison(out, resolved)


def unclassified(findings: Sequence[dict], as_of_ms: int) -> list[dict]:
    """The fields without a history (no ``--history``): status None; first seen this run and open
    for 1 run, as far as a run without history knows."""
    text = iso_utc(as_of_ms)
    for f in findings:  # in place: a fleet on fire has 350,000 (a copy each was the report's peak)
        f.update(status=None, first_seen=text, first_seen_ms=as_of_ms, runs_open=1)
    return list(findings)


def history_rows(findings: Iterable[dict], accepted: Iterable[dict] = ()) -> list[dict]:
    """One row per identity (its worst severity) for the history: from the classified findings
    and the accepted ones (accepted findings keep their age)."""
    rows: dict[str, dict] = {}
    for is_accepted, group in ((False, findings), (True, accepted)):
        for f in group:
            row = rows.get(f["identity"])
            if row is not None and RANK[f["severity"]] <= RANK[row["severity"]]:
                continue
            rows[f["identity"]] = {
                "identity": f["identity"], "check": f["check"], "code": f["code"], "severity": f["severity"],
                "topic": f.get("topic"), "partition": f.get("partition"), "broker_id": f.get("broker_id"),
                "log_dir": f.get("log_dir"), "first_seen_ms": f["first_seen_ms"], "runs_open": f["runs_open"],
                "message": (f.get("message") or "")[:500], "accepted": is_accepted}
    return [rows[k] for k in sorted(rows)]


def gate_on_change(findings: Sequence[dict], min_severity: str) -> list[dict]:
    """The findings that trip ``--fail-on-new``: new or worsened at or above ``min_severity``,
    new FAILs first, then worsened, worst first."""
    hits = [f for f in findings if f.get("status") in ("new", "worsened") and RANK[f["severity"]] >= RANK[min_severity]
            and RANK[f["severity"]] > 0]
    return sorted(hits, key=lambda f: (f["status"] != "new", -RANK[f["severity"]], f["identity"]))


def topic_matches(pattern: str | None, topic: str | None) -> bool:
    return pattern is None or (topic is not None and fnmatch.fnmatchcase(topic, pattern))
