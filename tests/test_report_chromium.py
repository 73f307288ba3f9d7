"""The demo report as a person sees it: opened in a real headless Chromium (Debian's), with no
console errors, every chart loaded and visible, the findings table sorting and filtering, and
strings from the data escaped. The JSON is validated against the published JSON Schema.
Screenshots go to artifacts/ (ignored by git, kept by CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from harness.chromium import ARTIFACTS, browser, open_page  # noqa: F401 - the module-scoped headless Chromium fixture

# tier (tests/harness/tiers.py): headless Chromium (Playwright) and `kafka-audit demo` on Spark
pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """`kafka-audit demo` as a newcomer runs it (the README's main command), once."""
    out = tmp_path_factory.mktemp("demo")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run([sys.executable, "-m", "auditor.cli", "demo", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"report: {out / 'report.html'}" in proc.stdout
    return out, proc


def test_demo_json_is_valid_against_the_published_schema(demo):
    out, _ = demo
    schema = json.loads((REPO / "reports" / "findings.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = json.loads((out / "findings.json").read_text())
    jsonschema.validate(doc, schema)
    codes = {f["code"] for f in doc["findings"] if f["severity"] in ("WARN", "FAIL")}
    # the planted anomalies are found: skew, reassignment, retention gap, timestamps, blocked retention
    assert {"KLA001", "KLA020", "KLA010", "KLA030", "KLA031"} <= codes, codes
    # the demo reads keys (audit --keys): the keyed topic's partition-count change splits keys,
    # and the skew finding names its hot key
    split = [f for f in doc["findings"] if f["code"] == "KLA070"]
    assert [f["topic"] for f in split] == ["customers"] and "partition count changed" in split[0]["message"], split
    skew = next(f for f in doc["findings"] if f["code"] == "KLA001" and f["topic"] == "clicks")
    assert "cause: hot keys: key#" in skew["message"], skew["message"]
    assert doc["keys"]["ran"] is True
    assert doc["verdict"] == "FAIL" and doc["exit_code"] == 1


def test_demo_report_in_chromium(demo, browser):
    out, _ = demo
    report = out / "report.html"
    html = report.read_text()
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html  # no external resource
    page, problems = open_page(browser, report, "demo-report-summary")
    assert page.inner_text("#verdict") == "FAIL"
    images = page.eval_on_selector_all(
        "img", "imgs => imgs.map(i => ({ok: i.complete && i.naturalWidth > 0, w: i.getBoundingClientRect().width,"
               " h: i.getBoundingClientRect().height, alt: i.alt}))")
    assert len(images) >= 3, images
    assert all(i["ok"] and i["w"] > 100 and i["h"] > 50 for i in images), images
    first_chart = page.locator("figure.chart").first
    first_chart.scroll_into_view_if_needed()
    first_chart.screenshot(path=str(ARTIFACTS / "demo-report-chart.png"))
    assert not problems, problems


def test_findings_filter_and_sort(demo, browser):
    out, _ = demo
    page, problems = open_page(browser, out / "report.html", "demo-report-filter")
    visible = "() => Array.from(document.querySelectorAll('tr.finding')).filter(r => r.offsetParent !== null).length"
    all_rows = page.eval_on_selector_all("tr.finding", "rows => rows.length")
    shown = page.evaluate(visible)
    assert 0 < shown < all_rows  # PASS rows start hidden
    page.check("input.sev-toggle[value=PASS]")
    assert page.evaluate(visible) == all_rows
    page.fill("#finding-filter", "audit-log")
    filtered = page.evaluate(visible)
    texts = page.eval_on_selector_all("tr.finding", "rows => rows.filter(r => r.offsetParent !== null).map(r => r.textContent)")
    assert 0 < filtered < all_rows and all("audit-log" in t for t in texts)
    page.fill("#finding-filter", "")
    # sort the replay-readiness table by partition, both ways
    header = page.locator("#replay-table th.sortable").first
    header.click()
    first = page.eval_on_selector_all("#replay-table tbody tr", "rows => rows.map(r => r.cells[0].textContent)")
    header.click()
    second = page.eval_on_selector_all("#replay-table tbody tr", "rows => rows.map(r => r.cells[0].textContent)")
    assert first == sorted(first) and second == sorted(first, reverse=True)
    # sort a findings table by severity
    table = page.locator("section.check-group table").first
    table.locator("th.sortable").first.click()
    ranks = table.evaluate("t => Array.from(t.tBodies[0].rows).map(r => Number(r.cells[0].dataset.sort))")
    assert ranks == sorted(ranks)
    page.screenshot(path=str(ARTIFACTS / "demo-report-sorted.png"))
    assert not problems, problems


def test_report_of_100000_findings_grouped_and_filtered_in_chromium(demo, browser, tmp_path):
    """A report of 100,000 findings (the demo's, copied under SYNTHETIC topic names): grouped by
    check, worst check first, each group's rows worst first and capped, the per-check counts
    covering every finding, saying what it lists; the filter and the severity toggles work.
    (Its open and filter times are measured by benchmarks/report_chromium.py, not here.)"""
    from harness.many_findings import many_findings_document
    from reports.html import MAX_ROWS_PER_CHECK, render

    out, _ = demo
    doc = many_findings_document(json.loads((out / "findings.json").read_text()), 100_000)
    report = tmp_path / "many.html"
    report.write_text(render(doc))
    want: dict[str, dict[str, int]] = {}
    for f in doc["findings"]:
        counts = want.setdefault(f["check"], {s: 0 for s in ("FAIL", "WARN", "INFO", "PASS")})
        counts[f["severity"]] += 1
    page, problems = open_page(browser, report, "report-100000-findings")
    summary = page.text_content("#findings-summary")
    assert "100,000 finding(s)" in summary and f"lists each check's {MAX_ROWS_PER_CHECK} worst findings" in summary, summary
    counts = page.eval_on_selector_all("#check-counts tbody tr", """rows => rows.map(r => [r.dataset.check,
        Array.from(r.cells).slice(2, 7).map(c => Number(c.dataset.sort))])""")
    assert {c: dict(zip(("FAIL", "WARN", "INFO", "PASS"), n[:4])) for c, n in counts} == want
    assert sum(sum(n[:4]) for _, n in counts) == 100_000
    groups = page.eval_on_selector_all("section.check-group", """secs => secs.map(s => [s.dataset.check,
        Number(s.dataset.total), Array.from(s.querySelectorAll('tr.finding')).map(r => Number(r.dataset.sevRank))])""")
    rank = {"PASS": 0, "INFO": 1, "WARN": 2, "FAIL": 3}
    assert [g[0] for g in groups] == [c for c, _ in counts]  # the counts table lists the groups in their order
    worst = [max(rank[s] for s, n in want[c].items() if n) for c, _, _ in groups]
    assert worst == sorted(worst, reverse=True)  # the worst check first
    for check, total, ranks in groups:
        assert total == sum(want[check].values())
        assert len(ranks) == min(total, MAX_ROWS_PER_CHECK) and ranks == sorted(ranks, reverse=True), check
    visible = "() => Array.from(document.querySelectorAll('tr.finding')).filter(r => r.offsetParent !== null)"
    listed = page.eval_on_selector_all("tr.finding", "rows => rows.length")
    shown = page.evaluate(f"{visible}.length")
    assert 0 < shown <= listed == sum(len(g[2]) for g in groups)
    # a copy's topic prefix, as listed (the rows listed are each check's worst, the first places in order)
    prefix = "-".join(page.eval_on_selector_all("tr.finding", "rows => rows.map(r => r.cells[1].textContent).filter(t => t.startsWith('SYNTHETIC-')).pop()")
                      .split("-")[:2]) + "-"
    assert prefix.startswith("SYNTHETIC-"), prefix
    page.fill("#finding-filter", prefix)
    texts = page.evaluate(f"() => ({visible})().map(r => r.textContent)")
    assert 0 < len(texts) < shown and all(prefix in t for t in texts)
    assert page.text_content("#shown-count") == f"{len(texts)} shown"
    page.fill("#finding-filter", "")
    page.uncheck("input.sev-toggle[value=WARN]")
    severities = page.evaluate(f"() => ({visible})().map(r => r.dataset.severity)")
    assert severities and "WARN" not in severities
    page.screenshot(path=str(ARTIFACTS / "report-100000-findings-filtered.png"))
    assert not problems, problems


def test_strings_from_the_data_are_escaped(demo, browser, tmp_path):
    from reports.html import render

    out, _ = demo
    doc = json.loads((out / "findings.json").read_text())
    evil = "<script>alert('x')</script><img src=x onerror=alert(1)>"
    doc["findings"][0]["message"] = evil
    doc["findings"][0]["log_dir"] = "/data/<u id=injected>underlined</u>"
    doc["inputs"]["log_dirs"] = [evil]
    path = tmp_path / "escaped.html"
    path.write_text(render(doc))
    assert evil not in path.read_text()
    page, problems = open_page(browser, path, "escaped")
    assert page.locator("text=<script>alert('x')</script>").count() >= 1  # shown as text
    assert page.locator("#injected").count() == 0 and page.locator("img[src=x]").count() == 0
    assert not problems, problems  # no dialog fired, no request to "x"


def test_topic_configs_section_in_chromium(demo, browser):
    """The demo's topic configs come from its KRaft metadata log: the report's "Topic configs"
    section shows each of them (topic, config, value, source) as the findings JSON has them, and
    the Kafka defaults the other topic configs fell back to."""
    out, _ = demo
    doc = json.loads((out / "findings.json").read_text())
    given = sorted((r["topic"], r["config"], r["value"], r["source"])
                   for r in doc["inputs"]["topic_configs"] if r["source"] != "Kafka default")
    assert len(given) >= 5 and {s for *_, s in given} == {"metadata log: topic config"}, given
    assert ("payments", "retention.ms", "3600000", "metadata log: topic config") in given
    page, problems = open_page(browser, out / "report.html", "demo-report-topic-configs")
    table = page.locator("#topic-config-table")
    table.scroll_into_view_if_needed()
    assert table.is_visible() and page.locator("#topic-configs").is_visible()
    shown = page.eval_on_selector_all(
        "#topic-config-table tbody tr", "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))")
    assert sorted(tuple(r) for r in shown) == given
    page.click("#topic-config-defaults summary")
    defaults = page.eval_on_selector_all(
        "#topic-config-defaults tr", "rows => rows.slice(1).map(r => Array.from(r.cells).map(c => c.innerText.trim()))")
    expected = {}
    for r in doc["inputs"]["topic_configs"]:
        if r["source"] == "Kafka default":
            expected[(r["config"], r["value"])] = expected.get((r["config"], r["value"]), 0) + 1
    assert {(c, v): int(n) for c, v, n in defaults} == expected
    table.screenshot(path=str(ARTIFACTS / "demo-report-topic-configs-table.png"))
    assert not problems, problems


def _next_commands(stdout: str) -> list[str]:
    """The commands `kafka-audit demo` prints after the audit (each after a '# what it shows' line)."""
    lines = stdout.split("\nnext, on the same sample", 1)[1].splitlines()
    return [line for prev, line in zip(lines, lines[1:]) if prev.startswith("# ") and line.strip()]


def test_the_printed_next_commands_run_as_printed(demo):
    """The three commands the demo prints after its audit, copied and run as they are (a shell
    would split them the same way: shlex), on the same unpacked sample: each answers with its
    documented exit code."""
    import shlex
    out, proc = demo
    commands = _next_commands(proc.stdout)
    assert [shlex.split(c)[3 if " -m " in c else 1] for c in commands] == ["replay-check", "replay-check", "groups"], commands
    sample = out / "sample" / "demo-cluster"
    assert all(str(sample) in c for c in commands), commands
    runs = [subprocess.run(shlex.split(c), capture_output=True, text=True, timeout=600, cwd=REPO) for c in commands]
    for c, r in zip(commands, runs):
        print(f"$ {c}\nexit {r.returncode}\n{r.stdout[-3000:]}{r.stderr[-1000:]}")
    topics, group, groups = runs
    # replay of audit-log and history to 5 days back: audit-log's retention deleted it (gap: unsafe, 1);
    # the tiered topic's modern answer comes from LocalTieredStorage's files: offset 100, the 21st
    # record of the group stamped 5 days back (records 250 ms apart from 5 s before the target)
    assert topics.returncode == 1 and "UNSAFE: replay of audit-log, history" in topics.stdout, topics.stdout + topics.stderr
    lines = topics.stdout.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("history-0 ")]
    assert " 100 " in lines[at] and "remote 0..239" in lines[at + 1] and "local: no record" in lines[at + 1], lines[at:at + 2]
    assert "None" not in topics.stdout
    # the group committed below audit-log's log start: the reset skips nothing it could still read
    assert group.returncode in (0, 1) and "group 'audit-archiver'" in group.stdout, group.stdout + group.stderr
    assert ("UNSAFE" if group.returncode else "safe") + ": replay of group 'audit-archiver'" in group.stdout
    assert groups.returncode == 0, groups.stderr
    listed = {line.split()[0] for line in groups.stdout.splitlines()[2:] if line and not line.startswith(("-", " "))}
    assert {"billing", "audit-archiver"} <= listed and any(g.startswith("legacy-etl") for g in listed), groups.stdout


def test_group_and_tiered_sections_in_chromium(demo, browser):
    """The sample's consumer groups and tiered topic, as a person sees them in the report: the
    group checks' sections (below the log start, a deleted topic's offsets) and the replay row of
    the tiered topic with its local and remote ranges."""
    out, _ = demo
    page, problems = open_page(browser, out / "report.html", "demo-report-groups")
    below = page.locator("section.check-group[data-check='groups.below_log_start'] tr.finding[data-severity=FAIL]")
    assert below.count() == 1 and "audit-archiver" in below.first.inner_text()
    assert below.first.is_visible()
    gone = page.locator("section.check-group[data-check='groups.missing_partition'] tr.finding[data-severity=WARN]")
    # (text_content: a check group off screen is not rendered (content-visibility: auto), so its innerText is empty)
    assert gone.count() == 1 and "old-events" in gone.first.text_content()
    below.first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "demo-report-groups.png"))
    rows = page.eval_on_selector_all("#replay-table tbody tr", "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText))")
    history = [r for r in rows if r[0] == "history-0"]
    assert history and history[0][4] == "100" and "remote 0..239" in history[0][7], rows
    page.locator("#replay-table").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "demo-report-tiered.png"))
    # the keyed topic: its split keys in the keys section, and the skewed partition's heaviest key
    keys_section = page.locator("#keys")
    assert keys_section.is_visible()
    split = page.locator("section.check-group[data-check='keys.split_key'] tr.finding[data-severity=WARN]")
    assert split.count() == 1 and "customers" in split.first.text_content()
    assert page.locator("h3#keys-clicks-1").is_visible()
    assert "cust-vip" not in page.content()  # keys are data: fingerprints only
    keys_section.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "demo-report-keys.png"))
    assert not problems, problems


def test_plan_section_in_chromium(demo, browser):
    """The demo's disk skew (KLA002) comes with its fix: the report's plan section is visible, its
    moves table lists the plan's moves as the findings JSON has them, its broker table every broker
    with its bytes today and at steady state, and it shows the commands that write and run the plan."""
    out, _ = demo
    doc = json.loads((out / "findings.json").read_text())
    plan = doc["plan"]
    assert plan and plan["moves"] and plan["balance"] == "steady", plan
    page, problems = open_page(browser, out / "report.html", "demo-report-plan")
    section = page.locator("#plan")
    section.scroll_into_view_if_needed()
    assert section.is_visible() and "reassignment plan" in section.inner_text()
    moves = page.eval_on_selector_all(
        "#plan-moves tbody tr", "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))")
    assert [(r[0], int(r[1]), int(r[3]), int(r[5]), r[6]) for r in moves] == \
        [(m["topic"], m["partition"], m["from_broker"], m["to_broker"], m["to_dir"]) for m in plan["moves"]]
    assert page.locator("#plan-moves").is_visible()
    brokers = page.eval_on_selector_all(
        "#plan-brokers tbody tr", "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))")
    assert [int(r[0]) for r in brokers] == [b["broker_id"] for b in plan["brokers"]]
    assert all(len(r) == 8 and r[3] != "-" for r in brokers), brokers      # the steady state is known per broker
    commands = page.locator("#plan ~ pre").first.inner_text()
    assert "kafka-audit plan --log-dir" in commands and "--execute --throttle" in commands and "--verify" in commands
    assert page.locator("#plan ~ pre").first.is_visible()
    page.locator("#plan-moves").screenshot(path=str(ARTIFACTS / "demo-report-plan-moves.png"))
    assert not problems, problems
