"""The findings document made night-aware: identities, the comparison with the previous run in the
history, accepted findings, and the gate (``--fail-on`` / ``--fail-on-new``) over what is left.

:func:`annotate` is pure (the document, the previous run as read, the accept file); the CLI reads
the history (``auditor.nightly.finding_history.read_previous``) before and appends this run after.
"""

from __future__ import annotations

from typing import Callable

from auditor.nightly.accept import AcceptFile, mark_stale, split_accepted
from checks.framework.base import SEVERITIES
from auditor.nightly.identity import RANK, Comparison, classify, gate_on_change, history_rows, identity_fields, identity_of, \
    unclassified
from auditor.nightly.finding_history import Previous



def annotate(doc: dict, previous: Previous | None, accept: AcceptFile | None, fail_on_new: str | None = None,
             lookup: Callable[[str], object] | None = None) -> tuple[dict, list[dict], list[dict]]:
    """The document with ``identity``/``status``/``first_seen``/``runs_open`` on every finding,
    ``resolved``, ``accepted``, ``acceptance`` and ``history`` at the top, and the counts, verdict
    and exit code over the findings that are not accepted. ``previous`` None: the run has no
    ``--history`` (statuses null). Returns (document, history rows, accept entries) for the history.
    The document's finding dicts are completed in place (annotating again recomputes every field)."""
    as_of_ms = doc["as_of_ms"]
    fields: dict[str, tuple[str, ...]] = {}
    findings = doc["findings"]
    for f in findings:  # completed in place, as unclassified/classify do: no copy of 350,000 dicts
        if f["check"] not in fields:
            fields[f["check"]] = identity_fields(f["check"], lookup)
        f["identity"] = identity_of(f, fields[f["check"]])
    split = split_accepted(findings, accept, as_of_ms)
    notes = list(previous.notes) if previous is not None else []
    if previous is None:
        kept, accepted = unclassified(split.findings, as_of_ms), unclassified(split.accepted, as_of_ms)
        comparison = Comparison([])
    else:
        comparison = classify(split.findings + split.accepted, previous.findings, as_of_ms)
        n = len(split.findings)
        kept, accepted = comparison.findings[:n], comparison.findings[n:]
    notes += split.notes
    if accept is not None:
        notes += mark_stale(split.entries, previous.unmatched if previous is not None else {}, accept.stale_after_runs)
    worst = max((RANK[f["severity"]] for f in kept), default=0)
    fail_on = doc["fail_on"]
    if fail_on_new:
        tripped = gate_on_change(kept, fail_on_new)
        exit_code = 1 if tripped else 0
    else:
        exit_code = 1 if worst >= RANK[fail_on] and RANK[fail_on] > 0 else 0
    out = dict(doc)
    out.update(
        verdict=SEVERITIES[worst], exit_code=exit_code, fail_on_new=fail_on_new,
        counts={s: sum(1 for f in kept if f["severity"] == s) for s in SEVERITIES},
        findings=kept,
        resolved=comparison.resolved if previous is not None else [],
        accepted=accepted,
        acceptance=({"file": accept.path, "stale_after_runs": accept.stale_after_runs, "entries": split.entries}
                    if accept is not None else None),
        since=(Comparison(kept, comparison.resolved).counts() if previous is not None else None),
        history={"previous_run_utc": _iso(previous.as_of_ms) if previous is not None else None,
                 "previous_run_ms": previous.as_of_ms if previous is not None else None,
                 "runs": (previous.runs + 1) if previous is not None else 0, "notes": notes},
    )
    rows = history_rows(kept, accepted) if previous is not None else []
    return out, rows, split.entries


def _iso(ms):
    from auditor.units import iso_utc

    return iso_utc(ms) if ms is not None else None
