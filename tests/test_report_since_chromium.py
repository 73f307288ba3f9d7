"""The report's "Since the previous run" section as a person sees it, in Debian's headless
Chromium: two audits of the demo sample's real broker log dirs into one history (the second a day
later by --as-of, with an accept file), then the second report opened: the section comes first,
its counts and rows agree with the JSON, ages read "open for 2 runs, since ...", accepted findings
show their reason, and the page has no console error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.cli.demo import unpack_demo_sample
from auditor.units import iso_utc
from harness.chromium import browser, open_page  # noqa: F401 - the module-scoped headless Chromium fixture

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[1]
ACCEPT = REPO / "tests" / "cases" / "accept" / "matched.yaml"


@pytest.fixture(scope="module")
def two_nights(tmp_path_factory):
    out = tmp_path_factory.mktemp("since")
    log_dirs, meta = unpack_demo_sample(out / "sample")
    base = [sys.executable, "-m", "auditor.cli", "audit", "--engine", "local", "--no-progress", "--history", str(out / "history"),
            "--config", str(log_dirs[0].parent / "demo-audit.yaml")] + [a for d in log_dirs for a in ("--log-dir", str(d))]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    night1 = meta["made_at_ms"]
    # night 1 judges a replay target (a FAIL the second night does not ask about: resolved)
    first = subprocess.run(base + ["--as-of", iso_utc(night1), "--at", str(meta["replay_at_ms"]), "--json",
                                   str(out / "n1.json")], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert first.returncode == 1, first.stderr[-3000:]
    second = subprocess.run(base + ["--as-of", iso_utc(night1 + 86_400_000), "--accept", str(ACCEPT),
                                    "--json", str(out / "n2.json"), "--out", str(out / "n2.html")],
                            capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert second.returncode in (0, 1), second.stderr[-3000:]
    return out, json.loads((out / "n2.json").read_text()), iso_utc(night1)


def test_since_section_in_chromium(two_nights, browser):  # noqa: F811
    out, doc, night1 = two_nights
    assert doc["since"]["resolved"] >= 1 and doc["since"]["persisting"] >= 1 and doc["accepted"]
    page, problems = open_page(browser, out / "n2.html", "since-previous-run")
    try:
        assert page.locator("h2").first.inner_text() == "Since the previous run"
        assert page.locator("#since").is_visible()
        for status in ("new", "worsened", "resolved", "persisting"):
            card = page.locator(f"#since-counts .card[data-status={status}] b").inner_text()
            assert int(card) == doc["since"][status], status
        assert int(page.locator("#since-counts .card[data-status=accepted] b").inner_text()) == len(doc["accepted"])
        resolved = page.locator("#since-resolved tr.since-row")
        assert resolved.count() == len(doc["resolved"])
        assert {resolved.nth(i).get_attribute("data-identity") for i in range(resolved.count())} == \
            {r["identity"] for r in doc["resolved"]}
        new = [f for f in doc["findings"] if f["status"] in ("new", "worsened") and f["severity"] != "PASS"]
        assert page.locator("#since-changed tr.since-row").count() == len(new)
        page.locator("#since-still-details > summary").click()
        still = page.locator("#since-still tr.since-row")
        assert still.count() == doc["since"]["persisting"] and still.first.is_visible()
        assert still.first.locator("td.age").inner_text() == f"open for 2 runs, since {night1}"
        # the findings table tags what is new or worsened, row for row
        tags = page.locator("section.check-group tr.finding .status-tag")
        assert tags.count() == len(new) and set(tags.all_text_contents()) <= {"new", "worsened"}  # text: groups off screen are not rendered
        reasons = page.locator("#accepted-findings td.reason").all_inner_texts()
        assert sorted(set(reasons)) == sorted({a["acceptance"]["reason"] for a in doc["accepted"]})
    finally:
        page.close()
    assert problems == [], problems
