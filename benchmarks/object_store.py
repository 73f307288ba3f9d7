"""The fleet audited from a real S3 API server against the same manifests on local disk, on both
engines, as a ratio (docs/object-storage.md).

    nice -n 10 .venv/bin/python benchmarks/object_store.py --rows 100000 --engines local,spark --repeat 1

The fleet is benchmarks/fleet.py's SYNTHETIC one (30 brokers' manifests built from real rows of
manifests collected from real brokers, marked SYNTHETIC), each manifest given its
``_complete.json`` (``auditor.manifest_write.finish_manifest``), published to s3proxy on
127.0.0.1 (tests/harness/s3proxy.py; ``scripts/s3-jars.sh`` fetches it and hadoop-aws) with
``auditor.manifest_remote.publish_manifest``, as ``collect --out s3://`` does. Each audit is a fresh
``kafka-audit audit --manifest ... --engine E --json`` process (Spark: ``--master local[2]``), its wall
time measured; disk and S3 runs interleaved. Prints the medians, the ratio S3 / disk per engine,
whether the findings (a sha256 of the JSON's list; KLA090's evidence sorted) are equal, and the load
average. The server runs on the same machine: the ratio is the cost of the S3 protocol and the
client (listing, requests, checksums), not of a network. Asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

AS_OF = "2026-01-01T00:00:00Z"


def findings_sha(doc: dict) -> str:
    findings = [{**f, "evidence": sorted(f["evidence"], key=repr)} if f["code"] == "KLA090" else f
                for f in doc["findings"]]
    return hashlib.sha256(json.dumps(findings, sort_keys=True).encode()).hexdigest()[:16]


def audit(spec: str, engine: str, out: Path, env: dict) -> tuple[float, str]:
    argv = [sys.executable, "-m", "auditor.cli", "audit", "--manifest", spec, "--engine", engine, "--json", str(out),
            "--as-of", AS_OF, "--exit-zero"]
    if engine == "spark":
        argv += ["--master", "local[2]"]
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"audit of {spec} on {engine} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return wall, findings_sha(json.loads(out.read_text()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--engines", default="local,spark")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    import fleet
    from auditor.manifest_remote import publish_manifest
    from auditor.manifest_write import finish_manifest
    from harness.s3proxy import S3Proxy

    work = Path(tempfile.mkdtemp(prefix="kla-bench-s3-"))
    local = work / "fleet"
    shape = fleet.synthesize(args.rows, max(args.rows // 2, 3), local)
    now_ms = int(time.time() * 1000)
    brokers = sorted(p for p in local.iterdir() if p.is_dir())
    for d in brokers:
        finish_manifest(d, now_ms, "headers")
    server = S3Proxy(work / "s3proxy").start("bench")
    try:
        env = {**server.env(), "SPARK_LOCAL_IP": "127.0.0.1"}
        os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
        started = time.monotonic()
        for d in brokers:
            publish_manifest(d, f"s3://bench/fleet/{d.name}")
        upload_s = time.monotonic() - started
        results: dict[tuple[str, str], list[float]] = {}
        shas: dict[tuple[str, str], set[str]] = {}
        for _ in range(args.repeat):
            for engine in args.engines.split(","):
                for where, spec in (("disk", f"{local}/*"), ("s3", "s3://bench/fleet/*")):
                    wall, sha = audit(spec, engine, work / f"{engine}-{where}.json", env)
                    results.setdefault((engine, where), []).append(wall)
                    shas.setdefault((engine, where), set()).add(sha)
                    print(f"{engine:5s} {where:4s} {wall:7.1f} s  findings {sha}", flush=True)
    finally:
        server.stop()
    print(f"\nSYNTHETIC fleet: {shape['segment_rows']:,} segment rows, {shape['partition_dirs']:,} partition dirs, "
          f"{len(brokers)} manifests; published to s3proxy in {upload_s:.1f} s")
    for engine in args.engines.split(","):
        disk, s3 = statistics.median(results[(engine, "disk")]), statistics.median(results[(engine, "s3")])
        same = shas[(engine, "disk")] == shas[(engine, "s3")]
        print(f"{engine:5s}: disk {disk:.1f} s, s3 {s3:.1f} s, s3/disk {s3 / disk:.2f}; findings equal: {same}")
    print(f"load average: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
