"""How big the HTML report and the findings JSON get for a cluster of N segments (default 10,000).

    .venv/bin/python benchmarks/report_size.py [--segments 10000] [--out .cache/report-size]

SYNTHETIC rows (benchmarks/synthetic_rows.py: real segment rows replicated into a made-up
cluster, marked SYNTHETIC) are written as a collect manifest and audited with the real
`kafka-audit audit --manifest` on Spark local; the script prints the sizes of report.html and
findings.json and the number of findings. It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--segments", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=REPO / ".cache" / "report-size")
    args = ap.parse_args(argv)
    from auditor.manifest import LOG_DIRS_SCHEMA

    manifest = args.out / "manifest"
    manifest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "synthetic_rows.py"), "--rows", str(args.segments),
                    "--out", str(manifest), "--brokers", "6", "--topics", "20", "--partitions", "12", "--rf", "3"],
                   check=True)
    segs = pq.read_table(manifest / "segments.parquet", columns=["log_dir", "broker_id", "cluster_id"])
    dirs = sorted({(r["log_dir"], r["broker_id"], r["cluster_id"]) for r in segs.to_pylist()})
    now = int(time.time() * 1000)
    pq.write_table(pa.Table.from_pylist([
        {"log_dir": d, "broker_id": b, "cluster_id": c, "directory_id": None, "partition_dirs": None, "problems": [],
         "host": "synthetic", "collected_at_ms": now, "finished_at_ms": now} for d, b, c in dirs], schema=LOG_DIRS_SCHEMA),
        manifest / "log_dirs.parquet")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "auditor.cli", "audit", "--manifest", str(manifest), "--out",
                           str(args.out / "report.html"), "--json", str(args.out / "findings.json"), "--exit-zero"],
                          capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    doc = json.loads((args.out / "findings.json").read_text())
    html = (args.out / "report.html").stat().st_size
    js = (args.out / "findings.json").stat().st_size
    print(f"{args.segments:,} SYNTHETIC segments, {doc['totals']['partition_dirs']:,} partition dirs, "
          f"{len(doc['findings']):,} findings ({', '.join(f'{v} {k}' for k, v in doc['counts'].items())}); "
          f"audit {time.monotonic() - t0:.0f} s")
    print(f"report.html {html:,} bytes ({html / 1024 / 1024:.2f} MiB), findings.json {js:,} bytes ({js / 1024 / 1024:.2f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
