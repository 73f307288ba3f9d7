"""The HTML report of 100,000 findings in headless Chromium: time to open it and time to filter it,
measured in the browser (the Navigation Timing and ``performance.now()``), beside the render time
and the file's size.

    .venv/bin/python benchmarks/report_chromium.py                         # 100,000 findings, 3 runs
    .venv/bin/python benchmarks/report_chromium.py --findings 10000,100000 --runs 5
    .venv/bin/python benchmarks/report_chromium.py --doc findings.json      # another real document as the base

The document: a real audit's (``kafka-audit demo``'s findings.json, made once under .cache/) with
its problem findings copied under SYNTHETIC topic names to the count asked
(tests/harness/many_findings.py, the document tests/test_report_chromium.py opens). Per run, a
fresh page of one headless Chromium (Debian's, via Playwright, as tests/harness/chromium.py):

* **open**: ``loadEventEnd`` of the page's navigation entry (from the navigation's start; the
  report's script runs before it: its first filter pass over the listed rows is included);
* **filter**: typing a copy's topic prefix (``SYNTHETIC-<k>-``, of the last listed copy) into the
  filter box: from its ``input`` event to the next frame painted (``requestAnimationFrame``, then a
  task: the handler's pass over the rows, the style, layout and paint of what is on screen); then
  clearing it (**clear**, same measure);
* **toggle**: un-ticking WARN (the ``change`` event, same measure).

Prints each run and the medians, with the target the report is held to (open and filter in < 3 s)
as PASS/MISS. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

CACHE = REPO / ".cache" / "bench-report"
TARGET_S = 3.0
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

#: Runs in the page: fires the event and times it to the next frame the browser paints (the event's
#: handler, then the style, layout and paint of what is on screen: what the person waits for), in
#: milliseconds; then counts the rows left visible (not timed).
MEASURE = """([selector, action, value]) => new Promise(resolve => {
  const el = document.querySelector(selector);
  const t0 = performance.now();
  if (action === "fill") { el.value = value; el.dispatchEvent(new Event("input")); }
  else { el.checked = false; el.dispatchEvent(new Event("change")); }
  requestAnimationFrame(() => setTimeout(() => {
    const ms = performance.now() - t0;
    let visible = 0;
    for (const r of document.querySelectorAll("tr.finding")) { if (r.offsetParent !== null) visible += 1; }
    resolve([ms, visible]);
  }, 0));
})"""


def demo_document() -> dict:
    """The demo's findings.json (``kafka-audit demo --engine local``), made once."""
    path = CACHE / "demo" / "findings.json"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "auditor.cli", "demo", "--engine", "local", "--out", str(path.parent)],
                       check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return json.loads(path.read_text())


def measure(report: Path, runs: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        for _ in range(runs):
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(report.as_uri())
            page.wait_for_load_state("load")
            open_ms = page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd")
            rows = page.eval_on_selector_all("tr.finding", "rows => rows.length")
            # a copy's topic prefix as listed (the last listed copy's): matches some listed rows, not all
            prefix = "-".join(page.eval_on_selector_all("tr.finding", "rs => rs.map(r => r.cells[1].textContent).filter(t => t.startsWith('SYNTHETIC-')).pop()")
                              .split("-")[:2]) + "-"
            filter_ms, filtered = page.evaluate(MEASURE, ["#finding-filter", "fill", prefix])
            clear_ms, _ = page.evaluate(MEASURE, ["#finding-filter", "fill", ""])
            toggle_ms, _ = page.evaluate(MEASURE, ["input.sev-toggle[value=WARN]", "uncheck", None])
            out.append({"open_s": open_ms / 1000, "filter_s": filter_ms / 1000, "clear_s": clear_ms / 1000,
                        "toggle_s": toggle_ms / 1000, "rows": rows, "filtered": filtered})
            page.close()
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--findings", default="100000", help="finding counts (comma-separated)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--doc", help="a findings.json to copy findings from (default: the demo's)")
    args = ap.parse_args()
    from harness.many_findings import many_findings_document
    from reports.html import render

    base = json.loads(Path(args.doc).read_text()) if args.doc else demo_document()
    print(f"load average at start: {os.getloadavg()}")
    print("| findings | render s (CPU) | report MiB | rows listed | open s | filter s | clear s | WARN toggle s | open + filter < 3 s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for count in (int(c) for c in args.findings.split(",")):
        doc = many_findings_document(base, count)
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "report.html"
            started = time.process_time()
            report.write_text(render(doc))
            render_s = time.process_time() - started
            runs = measure(report, args.runs)
            for r in runs:
                print(f"  run: open {r['open_s']:.3f} s, filter {r['filter_s']:.3f} s ({r['filtered']} of {r['rows']} rows), "
                      f"clear {r['clear_s']:.3f} s, toggle {r['toggle_s']:.3f} s", file=sys.stderr)
            med = {k: statistics.median(r[k] for r in runs) for k in ("open_s", "filter_s", "clear_s", "toggle_s")}
            total = med["open_s"] + med["filter_s"]
            print(f"| {count:,} | {render_s:.2f} | {report.stat().st_size / 2**20:.1f} | {runs[0]['rows']:,} | "
                  f"{med['open_s']:.3f} | {med['filter_s']:.3f} | {med['clear_s']:.3f} | {med['toggle_s']:.3f} | "
                  f"{'PASS' if total < TARGET_S else 'MISS'} ({total:.2f} s) |")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
