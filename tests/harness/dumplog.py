"""Kafka's own ``kafka.tools.DumpLogSegments`` as a test oracle, with its output parsed.

Runs ``java -cp <classpath> kafka.tools.DumpLogSegments --files a,b,c [--deep-iteration]``
(many files per JVM: a JVM start costs ~0.5 s) and parses every line it prints into
``DumpedFile`` objects.  Line formats are those of Kafka 4.2.1
``core/src/main/scala/kafka/tools/DumpLogSegments.scala`` (read from the
``kafka_2.13-4.2.1-sources.jar`` on Maven Central):

stdout, per file (in ``--files`` order)::

    Dumping <file as given>
    .log:       Log starting offset: <n>
      v2 batch: baseOffset: B lastOffset: L count: C baseSequence: S lastSequence: S2
                producerId: P producerEpoch: E partitionLeaderEpoch: PLE isTransactional: b
                isControl: b deleteHorizonMs: OptionalLong.empty|OptionalLong[n] position: POS
                <CreateTime|LogAppendTime>: MAXTS size: SZ magic: 2 compresscodec: none|gzip|snappy|lz4|zstd
                crc: CRC isvalid: b                                            (one line)
      v0/v1 batch (shallow entry): offset: LAST position: POS <TsType>: TS size: SZ magic: M
                compresscodec: C crc: CRC isvalid: b
      record (--deep-iteration): | offset: O <TsType>: TS keySize: K valueSize: V
                [ sequence: S headerKeys: [a,b]]           (magic >= 2)
                [ isValid: b crc: CRC}]                    (magic < 2; the '}' is in Kafka's source)
                [ endTxnMarker: COMMIT|ABORT coordinatorEpoch: N | LeaderChange: {json} |
                  SnapshotHeader {json} | SnapshotFooter {json} | KRaftVersion {json} |
                  KRaftVoters {json} | controlType: X(id)]  (control batches)
      Found <n> invalid bytes at the end of <file name>
    .index:     offset: O position: P      | "<file> is empty." | "<file> passed sanity check."
    .timeindex: timestamp: T offset: O     | "<file> passed sanity check."
    .txnindex:  version: V producerId: P firstOffset: F lastOffset: L lastStableOffset: S
    .snapshot:  producerId: P producerEpoch: E coordinatorEpoch: C currentTxnFirstOffset: OptionalLong..
                lastTimestamp: T [firstSequence: F lastSequence: L lastOffset: O offsetDelta: D timestamp: T]
    .checkpoint (KRaft snapshot): "Snapshot end offset: O, epoch: E" | "KRaft bootstrap snapshot", then as .log

stderr, after all files (paths absolute)::

    Mismatches in :<path>                      /  "  Index offset: X, log offset: Y"
    Found timestamp mismatch in :<path>        /  "  Index timestamp: X, log timestamp: Y"
    Found out of order timestamp in :<path>    /  "  Index timestamp: X, Previously indexed timestamp: Y"
    The following indexed offsets are not found in the log.   /  "Indexed offset: X, found log offset: Y"
                                               (no file name is printed for this one)
    Non-consecutive offsets in <path>          /  "  X is followed by Y"
    Ignoring unknown file <file>               (printed when met)

Read-only (checked in the 4.2.1 source): ``.log`` is opened with ``FileRecords.open(file,
mutable=false)`` -> ``FileChannel.open(path)`` (READ only); indexes with ``new OffsetIndex /
TimeIndex(file, base, maxIndexSize=-1, writable=false)`` -> ``RandomAccessFile(file, "r")`` and
a READ_ONLY mmap.  One exception: ``AbstractIndex`` calls ``file.createNewFile()`` first, so
dumping a ``.timeindex`` whose ``.index`` is missing *creates an empty .index* (and then fails).
``dump_log_segments`` therefore never passes such a file in place: it stages a copy of that
segment's files (with empty stand-ins for the missing ones) in a temporary directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from .jvm import run_tool
from .kafka import KafkaHarnessError, kafka_classpath

MAIN_CLASS_4_0_TO_4_2 = "kafka.tools.DumpLogSegments"
MAIN_CLASS_4_3 = "org.apache.kafka.tools.DumpLogSegments"

_TS = r"(CreateTime|LogAppendTime|NoTimestampType)"
RE_V2_BATCH = re.compile(
    r"baseOffset: (-?\d+) lastOffset: (-?\d+) count: (\S+) baseSequence: (-?\d+) "
    r"lastSequence: (-?\d+) producerId: (-?\d+) producerEpoch: (-?\d+) "
    r"partitionLeaderEpoch: (-?\d+) isTransactional: (true|false) isControl: (true|false) "
    r"deleteHorizonMs: OptionalLong(?:\.empty|\[(-?\d+)\]) position: (\d+) "
    + _TS + r": (-?\d+) size: (\d+) magic: (\d+) compresscodec: (\w+) crc: (\d+) "
    r"isvalid: (true|false)")
RE_LEGACY_BATCH = re.compile(
    r"offset: (-?\d+) position: (\d+) " + _TS + r": (-?\d+) size: (\d+) magic: (\d+) "
    r"compresscodec: (\w+) crc: (\d+) isvalid: (true|false)")
RE_RECORD = re.compile(
    r"\| offset: (-?\d+) " + _TS + r": (-?\d+) keySize: (-?\d+) valueSize: (-?\d+)"
    r"(?: sequence: (-?\d+) headerKeys: \[(.*?)\])?"
    r"(?: isValid: (true|false) crc: (\d+)\}?)?"
    r"(.*)")
RE_END_TXN = re.compile(r" endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: (-?\d+)")
RE_OTHER_CONTROL = re.compile(
    r" (LeaderChange:|SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters|controlType:) (.*)")
RE_INDEX = re.compile(r"offset: (-?\d+) position: (-?\d+)")
RE_TIMEINDEX = re.compile(r"timestamp: (-?\d+) offset: (-?\d+)")
RE_TXN = re.compile(r"version: (-?\d+) producerId: (-?\d+) firstOffset: (-?\d+) "
                    r"lastOffset: (-?\d+) lastStableOffset: (-?\d+)")
RE_SNAPSHOT = re.compile(
    r"producerId: (-?\d+) producerEpoch: (-?\d+) coordinatorEpoch: (-?\d+) "
    r"currentTxnFirstOffset: OptionalLong(?:\.empty|\[(-?\d+)\]) lastTimestamp: (-?\d+) ?"
    r"(?:firstSequence: (-?\d+) lastSequence: (-?\d+) lastOffset: (-?\d+) "
    r"offsetDelta: (-?\d+) timestamp: (-?\d+))?")
RE_TRAILING = re.compile(r"Found (\d+) invalid bytes at the end of (.*)")
RE_LOG_START = re.compile(r"Log starting offset: (-?\d+)")
RE_KRAFT_SNAPSHOT = re.compile(r"Snapshot end offset: (-?\d+), epoch: (-?\d+)")


@dataclass
class DumpRecord:
    offset: int
    timestamp_type: str
    timestamp: int
    key_size: int
    value_size: int
    sequence: int | None = None           # magic >= 2
    header_keys: list[str] | None = None  # magic >= 2
    is_valid: bool | None = None          # magic < 2 (per inner message CRC)
    crc: int | None = None                # magic < 2
    control_type: str | None = None       # COMMIT / ABORT / LeaderChange / SnapshotHeader / ...
    coordinator_epoch: int | None = None
    extra: str = ""                       # anything else printed on the line (control JSON, data)
    # the record's whole text as printed, "| offset: ..." to its end; with --print-data-log the key
    # and payload text may hold newlines, so it can span lines (parse_stdout(data_log=True))
    text: str = ""


@dataclass
class DumpBatch:
    position: int
    last_offset: int
    timestamp_type: str
    max_timestamp: int
    size: int
    magic: int
    compresscodec: str
    crc: int
    is_valid: bool
    base_offset: int | None = None        # v2 only; legacy lines print only the (last) offset
    count: int | None = None
    base_sequence: int | None = None
    last_sequence: int | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    partition_leader_epoch: int | None = None
    is_transactional: bool | None = None
    is_control: bool | None = None
    delete_horizon_ms: int | None = None  # None = OptionalLong.empty
    records: list[DumpRecord] = field(default_factory=list)


@dataclass
class DumpedFile:
    path: Path                            # the file as the caller named it (not a staging copy)
    kind: str                             # log | index | timeindex | txnindex | snapshot | checkpoint | unknown
    log_start_offset: int | None = None   # "Log starting offset" (= the name's base offset)
    batches: list[DumpBatch] = field(default_factory=list)
    invalid_trailing_bytes: int = 0
    index_entries: list[tuple[int, int]] = field(default_factory=list)       # (offset, position)
    time_index_entries: list[tuple[int, int]] = field(default_factory=list)  # (timestamp, offset)
    aborted_txns: list[dict] = field(default_factory=list)
    producer_snapshot: list[dict] = field(default_factory=list)
    empty: bool = False                   # "<file> is empty." (.index with 0 entries)
    sanity_check_passed: bool | None = None
    index_mismatches: list[tuple[int, int]] = field(default_factory=list)           # (index offset, log offset)
    time_index_mismatches: list[tuple[int, int]] = field(default_factory=list)      # (index ts, log ts)
    time_index_out_of_order: list[tuple[int, int]] = field(default_factory=list)    # (ts, previous ts)
    time_index_offsets_not_found: list[tuple[int, int]] = field(default_factory=list)  # (indexed, found)
    non_consecutive_offsets: list[tuple[int, int]] = field(default_factory=list)
    kraft_snapshot: tuple[int, int] | None = None   # (end offset, epoch)
    # DumpLogSegments checks "entry.offset == baseOffset && i > 0" to stop at the zero tail of a
    # preallocated (active-segment) index, so an index with NO real entries still prints its
    # all-zero entry 0 ("offset: <base> position: 0" / "timestamp: 0 offset: <base>") and then
    # reports it as a mismatch / "indexed offset not found".  This flag says the file's entry 0
    # is all zero bytes on disk, i.e. that first printed entry is that artefact (a real entry 0
    # never is: the batch at position 0 is never indexed).  For an empty .log the tool instead
    # dies with NoSuchElementException (see ``error``).
    zero_entry_0: bool = False
    ignored: bool = False                 # "Ignoring unknown file"
    error: str | None = None              # the JVM failed on this file (stack trace tail)
    unparsed: list[str] = field(default_factory=list)  # lines the parser did not recognise

    @property
    def records(self) -> list[DumpRecord]:
        return [r for b in self.batches for r in b.records]

    @property
    def real_index_entries(self) -> list[tuple[int, int]]:
        """``index_entries`` without the zero-tail artefact (see ``zero_entry_0``)."""
        return self.index_entries[1:] if self.zero_entry_0 else self.index_entries

    @property
    def real_time_index_entries(self) -> list[tuple[int, int]]:
        return self.time_index_entries[1:] if self.zero_entry_0 else self.time_index_entries


_KIND = {".log": "log", ".index": "index", ".timeindex": "timeindex", ".txnindex": "txnindex",
         ".snapshot": "snapshot", ".checkpoint": "checkpoint"}


def _kind(path: Path) -> str:
    return _KIND.get(path.suffix, "unknown")


def _b(s: str) -> bool:
    return s == "true"


def _parse_record(line: str) -> DumpRecord | None:
    m = RE_RECORD.fullmatch(line)
    if not m:
        return None
    (off, tst, ts, ks, vs, seq, hk, valid, crc, rest) = m.groups()
    r = DumpRecord(int(off), tst, int(ts), int(ks), int(vs), text=line)
    if seq is not None:
        r.sequence = int(seq)
        r.header_keys = [k for k in hk.split(",")] if hk else []
    if valid is not None:
        r.is_valid = _b(valid)
        r.crc = int(crc)
    mt = RE_END_TXN.match(rest)
    if mt:
        r.control_type = mt.group(1)
        r.coordinator_epoch = int(mt.group(2))
        rest = rest[mt.end():]
    else:
        mo = RE_OTHER_CONTROL.match(rest)
        if mo:
            r.control_type = mo.group(1).rstrip(":")
    r.extra = rest.strip()
    return r


def _parse_batch(line: str) -> DumpBatch | None:
    m = RE_V2_BATCH.fullmatch(line)
    if m:
        g = m.groups()
        return DumpBatch(
            base_offset=int(g[0]), last_offset=int(g[1]),
            count=None if g[2] == "null" else int(g[2]),
            base_sequence=int(g[3]), last_sequence=int(g[4]), producer_id=int(g[5]),
            producer_epoch=int(g[6]), partition_leader_epoch=int(g[7]),
            is_transactional=_b(g[8]), is_control=_b(g[9]),
            delete_horizon_ms=None if g[10] is None else int(g[10]),
            position=int(g[11]), timestamp_type=g[12], max_timestamp=int(g[13]), size=int(g[14]),
            magic=int(g[15]), compresscodec=g[16], crc=int(g[17]), is_valid=_b(g[18]))
    m = RE_LEGACY_BATCH.fullmatch(line)
    if m:
        g = m.groups()
        return DumpBatch(last_offset=int(g[0]), position=int(g[1]), timestamp_type=g[2],
                         max_timestamp=int(g[3]), size=int(g[4]), magic=int(g[5]),
                         compresscodec=g[6], crc=int(g[7]), is_valid=_b(g[8]))
    return None


def parse_stdout(text: str, files: Sequence[Path], data_log: bool = False) -> dict[str, DumpedFile]:
    """Parse DumpLogSegments stdout.  ``files`` are the paths passed with --files (as given),
    used to map 'Dumping <file>' headers to results.  Returns {path-as-given: DumpedFile}.

    ``data_log``: the dump ran with ``--print-data-log``, which prints each key and value as
    ``new String(bytes, UTF_8)`` (StringDecoder): a value holding newline bytes continues on the
    next lines, so a line that is no known line after a record belongs to that record's text.
    Lines are split on "\n" only (the JVM's println), never on the other characters
    ``str.splitlines`` breaks at (\r, \x1c, \u2028, ...), which a value may hold."""
    out: dict[str, DumpedFile] = {}
    cur: DumpedFile | None = None
    last_record: DumpRecord | None = None   # the record a continuation line belongs to
    for line in text.removesuffix("\n").split("\n"):
        if line.startswith("Dumping "):
            last_record = None
            p = line[len("Dumping "):]
            cur = DumpedFile(Path(p), _kind(Path(p)))
            out[p] = cur
            continue
        if cur is None:
            if line.strip():
                raise KafkaHarnessError(f"DumpLogSegments output before any 'Dumping' line: {line!r}")
            continue
        k = cur.kind
        if k in ("log", "checkpoint"):
            if line.startswith("| "):
                rec = _parse_record(line)
                if rec is None or not cur.batches:
                    cur.unparsed.append(line)
                else:
                    cur.batches[-1].records.append(rec)
                    last_record = rec
                continue
            b = _parse_batch(line)
            if b is not None:
                cur.batches.append(b)
                last_record = None
                continue
            if data_log and last_record is not None and not (RE_LOG_START.fullmatch(line) or RE_TRAILING.fullmatch(line)):
                last_record.text += "\n" + line
                last_record.extra += "\n" + line
                continue
            m = RE_LOG_START.fullmatch(line)
            if m:
                cur.log_start_offset = int(m.group(1))
                continue
            m = RE_TRAILING.fullmatch(line)
            if m:
                cur.invalid_trailing_bytes = int(m.group(1))
                continue
            m = RE_KRAFT_SNAPSHOT.fullmatch(line)
            if m:
                cur.kraft_snapshot = (int(m.group(1)), int(m.group(2)))
                continue
            if line == "KRaft bootstrap snapshot":
                continue
        elif k == "index":
            m = RE_INDEX.fullmatch(line)
            if m:
                cur.index_entries.append((int(m.group(1)), int(m.group(2))))
                continue
            if line.endswith(" is empty."):
                cur.empty = True
                continue
            if line.endswith(" passed sanity check."):
                cur.sanity_check_passed = True
                continue
        elif k == "timeindex":
            m = RE_TIMEINDEX.fullmatch(line)
            if m:
                cur.time_index_entries.append((int(m.group(1)), int(m.group(2))))
                continue
            if line.endswith(" passed sanity check."):
                cur.sanity_check_passed = True
                continue
        elif k == "txnindex":
            m = RE_TXN.fullmatch(line)
            if m:
                cur.aborted_txns.append(dict(zip(
                    ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset"),
                    map(int, m.groups()))))
                continue
        elif k == "snapshot":
            m = RE_SNAPSHOT.fullmatch(line.rstrip())
            if m:
                g = m.groups()
                e = {"producer_id": int(g[0]), "producer_epoch": int(g[1]),
                     "coordinator_epoch": int(g[2]),
                     "current_txn_first_offset": None if g[3] is None else int(g[3]),
                     "last_timestamp": int(g[4])}
                if g[5] is not None:
                    e.update(first_sequence=int(g[5]), last_sequence=int(g[6]), last_offset=int(g[7]),
                             offset_delta=int(g[8]), timestamp=int(g[9]))
                cur.producer_snapshot.append(e)
                continue
        if line.strip():
            cur.unparsed.append(line)
    return out


def parse_stderr(text: str, results: dict[str, DumpedFile]) -> list[str]:
    """Attach DumpLogSegments' stderr reports to the files (matched by absolute path).
    Returns the stderr lines that are not such reports (warnings, stack traces)."""
    by_abs = {str(Path(k).absolute()): v for k, v in results.items()}
    timeindexes = [v for v in results.values() if v.kind == "timeindex"]
    other: list[str] = []
    target: list | None = None
    pair_re: re.Pattern | None = None
    for line in text.splitlines():
        heads = (
            ("Mismatches in :", "index_mismatches", r"  Index offset: (-?\d+), log offset: (-?\d+)"),
            ("Found timestamp mismatch in :", "time_index_mismatches",
             r"  Index timestamp: (-?\d+), log timestamp: (-?\d+)"),
            ("Found out of order timestamp in :", "time_index_out_of_order",
             r"  Index timestamp: (-?\d+), Previously indexed timestamp: (-?\d+)"),
            ("Non-consecutive offsets in ", "non_consecutive_offsets", r"  (-?\d+) is followed by (-?\d+)"),
        )
        for prefix, attr, pat in heads:
            if line.startswith(prefix):
                f = by_abs.get(line[len(prefix):])
                target = getattr(f, attr) if f is not None else []
                if f is None:
                    other.append(line)
                pair_re = re.compile(pat)
                break
        else:
            if line == "The following indexed offsets are not found in the log.":
                # Kafka prints no file name here; attribute it when unambiguous.
                target = timeindexes[0].time_index_offsets_not_found if len(timeindexes) == 1 else []
                pair_re = re.compile(r"Indexed offset: (-?\d+), found log offset: (-?\d+)")
                if len(timeindexes) != 1:
                    other.append(line)
                continue
            if line.startswith("Ignoring unknown file "):
                f = results.get(line[len("Ignoring unknown file "):])
                if f is not None:
                    f.ignored = True
                target = None
                continue
            if target is not None and pair_re is not None:
                m = pair_re.fullmatch(line)
                if m:
                    target.append((int(m.group(1)), int(m.group(2))))
                    continue
            target = None
            if line.strip():
                other.append(line)
    return other


@dataclass
class DumpResult:
    files: dict[Path, DumpedFile]
    stderr_other: list[str]
    jvm_runs: int

    def __getitem__(self, path: str | os.PathLike) -> DumpedFile:
        return self.files[Path(path).absolute()]

    def __iter__(self):
        return iter(self.files.values())


class DumpLogSegments:
    """Runs Kafka's DumpLogSegments on files in place (read-only) and parses the output."""

    def __init__(self, classpath: str | None = None, main_class: str = MAIN_CLASS_4_0_TO_4_2,
                 files_per_jvm: int = 200, timeout_s: float = 300.0, class_data: bool = True):
        self.classpath = classpath or kafka_classpath()
        self.class_data = class_data  # start from the class-data archive (harness/jvm.py)
        self.main_class = main_class
        self.files_per_jvm = files_per_jvm
        self.timeout_s = timeout_s
        self.jvm_runs = 0

    def _args(self, files: Sequence[str], deep: bool, extra: Sequence[str]) -> list[str]:
        return (["--deep-iteration"] if deep else []) + list(extra) + ["--files", ",".join(files)]

    def _run_once(self, files: list[str], deep: bool, extra: Sequence[str],
                  results: dict[str, DumpedFile], other: list[str]) -> None:
        if not files:
            return
        self.jvm_runs += 1
        # stdout in UTF-8 whatever the locale (JDK 17 reads sun.stdout.encoding, 19+ stdout.encoding):
        # an ASCII locale would print every non-ASCII character of --print-data-log text as '?'
        run = run_tool(self.classpath, self.main_class, self._args(files, deep, extra), timeout_s=self.timeout_s,
                       jvm_options=["-Xss4m", "-Dsun.stdout.encoding=UTF-8", "-Dstdout.encoding=UTF-8"],
                       class_data=self.class_data)
        # bytes decoded here, not by text=True: its universal newlines would turn a "\r" printed
        # inside a value into a line break
        proc = subprocess.CompletedProcess(run.args, run.returncode, run.stdout.decode("utf-8", "replace"),
                                           run.stderr.decode("utf-8", "replace"))
        got = parse_stdout(proc.stdout, [Path(f) for f in files], data_log="--print-data-log" in extra)
        if proc.returncode == 0:
            results.update(got)
            other.extend(parse_stderr(proc.stderr, got))
            return
        # The JVM died on one file (an uncaught exception ends the tool).  Blame the last file
        # it started, then redo the files before it (to get their end-of-run stderr reports)
        # and carry on with the files after it.
        started = [f for f in files if f in got]
        if not started:
            raise KafkaHarnessError(
                f"DumpLogSegments failed before dumping anything (exit {proc.returncode}):\n"
                f"{proc.stderr[-3000:]}")
        bad = started[-1]
        f = got[bad]
        err_lines = proc.stderr.strip().splitlines()
        head = [l for l in err_lines if "Exception" in l and not l.startswith("\t")][:1]
        f.error = "\n".join(head + ["..."] + err_lines[-15:])
        results[bad] = f
        i = files.index(bad)
        self._run_once(files[:i], deep, extra, results, other)
        self._run_once(files[i + 1:], deep, extra, results, other)

    def dump(self, files: Iterable[str | os.PathLike], deep_iteration: bool = True,
             extra_args: Sequence[str] = ()) -> DumpResult:
        """Dump ``files`` (any mix of .log/.index/.timeindex/.txnindex/.snapshot).  Files whose
        sibling .log/.index are missing are dumped from a staged copy (see module doc)."""
        paths = [Path(f).absolute() for f in files]
        for p in paths:
            if not p.is_file():
                raise FileNotFoundError(p)
        staging: Path | None = None
        as_given: dict[str, Path] = {}
        try:
            args: list[str] = []
            for p in paths:
                a = p
                if p.suffix in (".index", ".timeindex"):
                    base = p.name.split(".")[0]
                    need = [p.with_name(base + ".log")]
                    if p.suffix == ".timeindex":
                        need.append(p.with_name(base + ".index"))
                    if not all(n.exists() for n in need):
                        if staging is None:
                            staging = Path(tempfile.mkdtemp(prefix="dumplog-stage-"))
                        sd = staging / str(len(as_given))
                        sd.mkdir()
                        for n in [p] + need:
                            if n.exists():
                                shutil.copyfile(n, sd / n.name)
                            else:
                                (sd / n.name).touch()
                        a = sd / p.name
                if str(a) in as_given:
                    continue
                as_given[str(a)] = p
                args.append(str(a))
            results: dict[str, DumpedFile] = {}
            other: list[str] = []
            runs_before = self.jvm_runs
            for i in range(0, len(args), self.files_per_jvm):
                self._run_once(args[i:i + self.files_per_jvm], deep_iteration, extra_args, results, other)
            out: dict[Path, DumpedFile] = {}
            for a, orig in as_given.items():
                f = results.get(a)
                if f is None:
                    raise KafkaHarnessError(f"DumpLogSegments printed nothing for {a}")
                f.path = orig
                if f.kind in ("index", "timeindex"):
                    n = 8 if f.kind == "index" else 12
                    with open(orig, "rb") as fh:
                        first = fh.read(n)
                    f.zero_entry_0 = len(first) == n and first == bytes(n)
                out[orig] = f
            return DumpResult(out, other, self.jvm_runs - runs_before)
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)

    def dump_dir(self, partition_dir: str | os.PathLike, deep_iteration: bool = True,
                 suffixes: Sequence[str] = (".log", ".index", ".timeindex", ".txnindex", ".snapshot"),
                 ) -> DumpResult:
        files = sorted(p for p in Path(partition_dir).iterdir() if p.is_file() and p.suffix in suffixes)
        return self.dump(files, deep_iteration)

    def dump_record_sets(self, items: Iterable[bytes | str | os.PathLike], deep_iteration: bool = True,
                         extra_args: Sequence[str] = ()) -> list[DumpedFile]:
        """Like ``dump_record_set`` for many record sets, in as few JVMs as possible."""
        with tempfile.TemporaryDirectory(prefix="dumplog-rs-") as td:
            paths = []
            for i, data in enumerate(items):
                if not isinstance(data, bytes):
                    data = Path(data).read_bytes()
                d = Path(td) / str(i)
                d.mkdir()
                p = d / f"{0:020d}.log"
                p.write_bytes(data)
                paths.append(p)
            res = self.dump(paths, deep_iteration, extra_args)
            return [res[p] for p in paths]

    def dump_record_set(self, data: bytes | str | os.PathLike, deep_iteration: bool = True,
                        base_offset: int = 0) -> DumpedFile:
        """Dump raw record-set bytes (e.g. a fixture ``.bin``) by copying them into a temporary
        ``<base_offset:020d>.log`` (DumpLogSegments only reads files named ``*.log``)."""
        if not isinstance(data, bytes):
            data = Path(data).read_bytes()
        with tempfile.TemporaryDirectory(prefix="dumplog-rs-") as td:
            p = Path(td) / f"{base_offset:020d}.log"
            p.write_bytes(data)
            return self.dump([p], deep_iteration)[p]
