"""KRaft metadata log decoding and state rebuild, beside Kafka's DumpLogSegments.

    .venv/bin/python benchmarks/metadata.py                  # 1,014,000 records, 100,000+ partitions
    .venv/bin/python benchmarks/metadata.py --copies 600     # a smaller run
    .venv/bin/python benchmarks/metadata.py --pure-python    # also ours without the C extension

Prints figures; asserts nothing. Targets (issue 11) are printed beside the figures with PASS/MISS.

Data, made from real bytes (built under the repo's ignored ``.cache/bench/metadata/``):

* ``decode/00000000000000000000.log``: the data batch of the newest real metadata snapshot
  (``../shared/fixtures/real/metadata/``, 169 records: PartitionRecord, ConfigRecord,
  TopicRecord, RegisterBrokerRecord, FeatureLevelRecord ...) repeated ``--copies`` times (6,000:
  1,014,000 records), each copy's baseOffset rewritten so offsets increase (baseOffset is outside
  the CRC).
* ``state/__cluster_metadata-0/00000000000000000000.log``: the same batch repeated until the
  partitions reach ``--partitions`` (100,000), every copy's 9 topic IDs made unique (a 4-byte copy
  number over the ID's first bytes) and the batch CRC-32C recomputed: a cluster of ~6,500 topics.

Measured, each in a subprocess pinned to one CPU (``sched_setaffinity``), wall time inside it:
``ours``: every record of the decode file framed and decoded into fields
(``metadata_log.read_entries``; with the C extension when it is built, and with ``--pure-python``
also through the Python decoders alone, ``kafka_message.use_c = False``); ``DumpLogSegments --cluster-metadata-decoder --files <same
file>`` (the JVM, its start included, output counted not stored; the JVM may use more than the
pinned CPU for GC/JIT threads); ``state``: ``read_metadata_log`` of the state dir (decode +
replay into topics/partitions).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from auditor.formats.log_reader import LogReader  # noqa: E402
from auditor.formats.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET  # noqa: E402

REAL = ROOT.parent / "shared" / "fixtures" / "real" / "metadata" / "kraft-transactional" / "__cluster_metadata-0"
SNAPSHOT = REAL / "00000000000000060500-0000000025.checkpoint"
OUT = ROOT / ".cache" / "bench" / "metadata"
TOPIC_IDS = None


def real_data_batch() -> tuple[bytes, int]:
    """(bytes of the snapshot's data batch, its record count)."""
    r = LogReader(SNAPSHOT)
    for b in r.batches():
        if not b.is_control:
            data = bytes(r.read_batch_bytes(b))
            r.close()
            return data, b.last_offset - b.base_offset + 1
    raise SystemExit(f"no data batch in {SNAPSHOT}")


def topic_ids(batch: bytes) -> list[bytes]:
    from auditor.cluster import metadata_log as ml
    from auditor.formats import kafka_message as km
    ids = {km.uuid_bytes(e.data["topicId"]) for e in ml.read_entries(SNAPSHOT, []) if e.type == "TopicRecord"}
    return sorted(ids)


def build(copies: int, partitions: int) -> tuple[Path, Path, int, int]:
    import crc32c
    batch, count = real_data_batch()
    dec = OUT / "decode" / "00000000000000000000.log"
    stdir = OUT / "state" / "__cluster_metadata-0"
    marker = OUT / "MARKER.json"
    want = {"copies": copies, "partitions": partitions, "batch_bytes": len(batch), "v": 1}
    if marker.is_file() and json.loads(marker.read_text()) == want and dec.is_file():
        meta = json.loads((OUT / "counts.json").read_text())
        return dec, stdir.parent, meta["decode_records"], meta["state_partitions"]
    dec.parent.mkdir(parents=True, exist_ok=True)
    stdir.mkdir(parents=True, exist_ok=True)
    with open(dec, "wb") as f:
        b = bytearray(batch)
        for k in range(copies):
            struct.pack_into(">q", b, 0, k * count)
            f.write(b)
    ids = topic_ids(batch)
    per_copy = 139
    n_state = -(-partitions // per_copy)
    with open(stdir / "00000000000000000000.log", "wb") as f:
        for k in range(n_state):
            b = bytearray(batch)
            for tid in ids:
                new = struct.pack(">I", k) + tid[4:]
                start = 0
                while True:
                    i = b.find(tid, start)
                    if i < 0:
                        break
                    b[i:i + 16] = new
                    start = i + 16
            struct.pack_into(">q", b, 0, k * count)
            struct.pack_into(">I", b, CRC_OFFSET, crc32c.crc32c(bytes(b[ATTRIBUTES_OFFSET:])))
            f.write(b)
    (OUT / "counts.json").write_text(json.dumps({"decode_records": copies * count,
                                                  "state_partitions": n_state * per_copy}))
    marker.write_text(json.dumps(want))
    return dec, stdir.parent, copies * count, n_state * per_copy


CHILD = r"""
import os, sys, time, json
os.sched_setaffinity(0, {0})
sys.path.insert(0, %(root)r)
from auditor.cluster import metadata_log as ml
from auditor.formats import kafka_message as km
what, path = sys.argv[1], sys.argv[2]
km.use_c = km.use_c and sys.argv[3] == "c"
t = time.perf_counter()
c = time.process_time()
if what == "decode":
    notes = []
    n = 0
    for e in ml.read_entries(path, notes):
        n += 1
    out = {"records": n, "notes": len(notes)}
else:
    log = ml.read_metadata_log([path])
    out = {"records": log.records_read, "topics": len(log.state.topics),
           "partitions": log.state.partition_count, "notes": len(log.notes)}
out["wall_s"] = time.perf_counter() - t
out["cpu_s"] = time.process_time() - c
out["c"] = km.use_c
print(json.dumps(out))
"""


def child(what: str, path: Path, mode: str = "c") -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD % {"root": str(ROOT)}, what, str(path), mode],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def dump_log_segments(path: Path) -> dict:
    cp_file = ROOT / ".cache" / "kafka" / "4.2.1" / "classpath.txt"
    if not cp_file.is_file():
        subprocess.run(["bash", str(ROOT / "scripts" / "kafka-jars.sh")], check=True, stdout=subprocess.DEVNULL)
    cmd = ["taskset", "-c", "0", "java", "-Djava.awt.headless=true",
           f"-Dlog4j2.configurationFile={ROOT / '.cache/kafka/4.2.1/log4j2-tools.properties'}",
           "-cp", cp_file.read_text().strip(), "kafka.tools.DumpLogSegments", "--cluster-metadata-decoder",
           "--files", str(path)]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines = 0
    for line in proc.stdout:
        if line.startswith(b"| offset:"):
            lines += 1
    _pid, _status, usage = os.wait4(proc.pid, 0)
    return {"records": lines, "wall_s": time.perf_counter() - t, "rc": os.waitstatus_to_exitcode(_status),
            "cpu_s": usage.ru_utime + usage.ru_stime}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=6000)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pure-python", action="store_true", help="also decode without the C extension")
    args = ap.parse_args()
    dec, state_dir, n_dec, n_parts = build(args.copies, args.partitions)
    size = dec.stat().st_size
    print(f"decode file: {dec} ({size / 2**20:.1f} MiB, {n_dec:,} records)")
    print(f"state log:   {state_dir} ({n_parts:,} partitions)")
    ours = sorted((child("decode", dec) for _ in range(args.runs)), key=lambda r: r["wall_s"])
    o = ours[len(ours) // 2]
    assert o["records"] == n_dec and o["notes"] == 0, o
    dls = dump_log_segments(dec)
    st = sorted((child("state", state_dir) for _ in range(args.runs)), key=lambda r: r["wall_s"])
    s = st[len(st) // 2]
    o_rate, d_rate = n_dec / o["wall_s"], dls["records"] / dls["wall_s"]
    o_cpu, d_cpu = n_dec / o["cpu_s"], dls["records"] / dls["cpu_s"]
    print(f"\nrecords decoded (median of {args.runs}; both pinned to CPU 0; CPU = user + system time, the JVM's"
          f" all threads):")
    print(f"  ours (read_entries, framed + every field):  wall {o['wall_s']:7.2f} s {o_rate:10,.0f}/s   "
          f"CPU {o['cpu_s']:7.2f} s {o_cpu:10,.0f}/s")
    print(f"  DumpLogSegments --cluster-metadata-decoder: wall {dls['wall_s']:7.2f} s {d_rate:10,.0f}/s   "
          f"CPU {dls['cpu_s']:7.2f} s {d_cpu:10,.0f}/s  ({dls['records']:,} record lines, JVM start included, "
          f"rc {dls['rc']})")
    ratio, cpu_ratio = o_rate / d_rate, o_cpu / d_cpu
    print(f"  ratio: wall {ratio:.2f}x, CPU {cpu_ratio:.2f}x   (load average now: {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs: wall figures are only fair on an idle machine)")
    print(f"  ours decoded with the C extension: {o['c']}")
    if args.pure_python:
        py = sorted((child("decode", dec, "py") for _ in range(args.runs)), key=lambda r: r["wall_s"])
        p = py[len(py) // 2]
        assert p["records"] == n_dec and p["notes"] == 0 and not p["c"], p
        print(f"  ours, pure Python (use_c False):          wall {p['wall_s']:7.2f} s {n_dec / p['wall_s']:10,.0f}/s   "
              f"CPU {p['cpu_s']:7.2f} s {n_dec / p['cpu_s']:10,.0f}/s   ratio: wall "
              f"{n_dec / p['wall_s'] / d_rate:.2f}x, CPU {n_dec / p['cpu_s'] / d_cpu:.2f}x")
    print(f"\nstate rebuilt: {s['partitions']:,} partitions, {s['topics']:,} topics from {s['records']:,} records: "
          f"wall {s['wall_s']:.2f} s, CPU {s['cpu_s']:.2f} s (median of {args.runs}), notes {s['notes']}")
    print("\ntargets:")
    print(f"  decoding >= 5x DumpLogSegments      measured {ratio:8.2f}x wall   {'PASS' if ratio >= 5 else 'MISS'}"
          f"   {cpu_ratio:.2f}x CPU   {'PASS' if cpu_ratio >= 5 else 'MISS'}")
    print(f"  state for 100,000 partitions < 10 s measured {s['wall_s']:8.2f} s wall  "
          f"{'PASS' if s['wall_s'] < 10 and s['partitions'] >= 100_000 else 'MISS'}")


if __name__ == "__main__":
    main()
