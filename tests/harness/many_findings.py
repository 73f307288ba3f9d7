"""A findings document with many findings for the report at scale (tests/test_report_chromium.py,
benchmarks/report_chromium.py): a real audit's document (the demo's findings.json) whose problem
findings are copied under new topic names (``SYNTHETIC-<n>-<topic>``) until there are ``count``,
each copy's severity drawn from the real ones (a fleet on fire's mix: every check, many WARNs)."""

from __future__ import annotations

import random


def many_findings_document(doc: dict, count: int = 100_000, seed: int = 34) -> dict:
    """``doc`` (a findings document as read from JSON) with ``count`` findings: its own, then
    SYNTHETIC copies of its non-PASS ones in the real findings' order, severities shuffled among
    theirs. The counts follow the findings."""
    rng = random.Random(seed)
    problems = [f for f in doc["findings"] if f["severity"] != "PASS"]
    severities = [f["severity"] for f in problems]
    findings = list(doc["findings"])
    k = 0
    while len(findings) < count:
        for f in problems:
            if len(findings) >= count:
                break
            topic = f"SYNTHETIC-{k}-{f['topic']}" if f.get("topic") is not None else f"SYNTHETIC-{k}"
            findings.append({**f, "topic": topic, "severity": rng.choice(severities)})
        k += 1
    out = dict(doc, findings=findings)
    out["counts"] = {s: sum(f["severity"] == s for f in findings) for s in ("PASS", "INFO", "WARN", "FAIL")}
    return out
