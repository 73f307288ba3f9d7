"""Mergeable, bounded-memory summaries of the keys of a stream of records (pure).

One :class:`KeyStats` per partition (or segment, replica, executor, manifest): they merge, so
partial scans combine into the same answer whatever the split. Memory is bounded by the
parameters, whatever the number of keys or their sizes.

Parts, with the error each states:

* **Distinct keys**: :class:`HyperLogLog` (Flajolet et al. 2007, 64-bit hash, so no large-range
  correction; linear counting below 2.5 m). Relative standard error ``1.04 / sqrt(m)``,
  ``m = 2**precision`` registers: 1.6 % at the default precision 12 (4 KiB). Merge = register max:
  exact, associative, commutative.
* **Heaviest keys**: :class:`HeavyHitters`, the Misra-Gries summary, which is Space-Saving with its
  counters lowered by the minimum (Agarwal et al., "Mergeable summaries", 2012). It keeps at most
  ``capacity`` counters and one number ``decrement`` (Δ). For every key: ``count <= true <= count +
  Δ`` (a key not listed has ``count`` 0), and ``Δ <= (N - sum of counts) / (capacity + 1) <= N /
  (capacity + 1)``. So every key with more than Δ records is listed, and two listed keys whose
  true counts differ by more than Δ are ranked in the right order. Bytes (key + value) per key are
  a lower bound: the bytes of the records it was counted for (exact when Δ is 0). Merges keep the
  guarantee in any order (not bit-identical across orders once counters are dropped).
* **A uniform sample of distinct keys**: :class:`KeySample`, the ``k`` keys with the smallest
  64-bit hash ("bottom-k"), each with its exact record count and bytes (a key with one of the k
  smallest hashes of the whole stream is in every partial sample it appears in, from its first
  record). Merge: exact, associative. The partitioner attribution reads it.
* Key sizes (log2 histogram, total, largest), null keys, empty keys: exact counters.

The same state can be reached in C: :meth:`KeyStats.c_fold` hands the state to a
``auditor.keys._ckeys.KeyFold`` (the optional extension: the same steps, byte-identical
sketches, ``first_seen`` included; records enter it per record, per v2 batch or per run of plain batches of a .log) and
:meth:`KeyStats.absorb` takes it back. Without the extension ``c_fold`` returns None and
:meth:`KeyStats.add` is the path.

Keys are data: no key bytes are kept past :meth:`KeyStats.seal` (called by every serialisation
and merge). A listed key is kept as its :class:`KeyInfo`: its murmur2 (Kafka's, the fingerprint
shown to people), the CRC32 and FNV-1a hashes the partitioners need, its length and whether it is
printable; a printable prefix only when ``prefix_bytes`` allows one (default 0: none).
"""

# long module: the four sketches and KeyStats, which _ckeys.c mirrors step by step: one file to review against it

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass
from functools import partial

from auditor.keys.partitioners import KeyHashes

try:  # optional C fold of the same state (setup.py builds it when a compiler is there)
    from auditor.keys import _ckeys
except ImportError:  # pragma: no cover - exercised by the pure-Python equality tests
    _ckeys = None

SKETCH_VERSION = 1
DEFAULT_HLL_PRECISION = 12
DEFAULT_HEAVY_CAPACITY = 1024
DEFAULT_SAMPLE_SIZE = 512
#: Exact per-key counts are gathered in a buffer and folded into the summary when the buffer
#: holds this many distinct keys (x capacity) or this many key bytes: bounded either way.
BUFFER_KEYS_PER_COUNTER = 4
BUFFER_MAX_KEY_BYTES = 8 << 20
#: Key sizes are counted in buckets of their bit length: 0 (empty), 1, 2-3, 4-7, ... 2**31..
SIZE_BUCKETS = 33
_ID_BITS = 64


_blake2b = hashlib.blake2b


def key_id(key: bytes) -> int:
    """The 64-bit identity of a key inside the sketches (BLAKE2b, stable across processes)."""
    return int.from_bytes(_blake2b(key, digest_size=8).digest(), "big")


def is_printable(key: bytes) -> bool:
    try:
        return key.decode("utf-8").isprintable()
    except UnicodeDecodeError:
        return False


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """A key as the report may show it, and the hashes the partitioners need; never its bytes
    (unless ``prefix`` was allowed)."""

    length: int
    printable: bool
    hashes: KeyHashes
    prefix: str | None = None

    @classmethod
    def of(cls, key: bytes, prefix_bytes: int = 0) -> "KeyInfo":
        printable = is_printable(key)
        prefix = None
        if prefix_bytes > 0 and printable:
            prefix = key[:prefix_bytes].decode("utf-8", "ignore")
        return cls(len(key), printable, KeyHashes.of(key), prefix)

    def fingerprint(self) -> dict:
        out = {"murmur2": self.hashes.murmur2, "length": self.length, "printable": self.printable}
        if self.prefix is not None:
            out["prefix"] = self.prefix
        return out

    def to_list(self) -> list:
        h = self.hashes
        return [self.length, self.printable, h.murmur2, h.crc32, h.fnv1a, self.prefix]

    @classmethod
    def from_list(cls, item: list) -> "KeyInfo":
        length, printable, m2, crc, fnv, prefix = item
        return cls(int(length), bool(printable), KeyHashes(int(m2), int(crc), int(fnv)), prefix)


# ---------------------------------------------------------------------------------------------
class HyperLogLog:
    """Distinct count of 64-bit hashes; relative standard error 1.04 / sqrt(2**precision)."""

    __slots__ = ("precision", "registers")

    def __init__(self, precision: int = DEFAULT_HLL_PRECISION, registers: bytearray | None = None):
        if not 4 <= precision <= 18:
            raise ValueError(f"HyperLogLog precision = {precision}, expected 4..18")
        self.precision = precision
        self.registers = registers if registers is not None else bytearray(1 << precision)

    @property
    def relative_error(self) -> float:
        return 1.04 / math.sqrt(1 << self.precision)

    def add_hash(self, h: int) -> None:
        rest_bits = _ID_BITS - self.precision
        rest = h & ((1 << rest_bits) - 1)
        rank = rest_bits - rest.bit_length() + 1
        index = h >> rest_bits
        if rank > self.registers[index]:
            self.registers[index] = rank

    def merge(self, other: "HyperLogLog") -> None:
        if other.precision != self.precision:
            raise ValueError(f"HyperLogLog precision {other.precision} merged into {self.precision}")
        self.registers = bytearray(max(a, b) for a, b in zip(self.registers, other.registers))

    def estimate(self) -> int:
        m = len(self.registers)
        alpha = 0.7213 / (1 + 1.079 / m)
        raw = alpha * m * m / sum(2.0 ** -r for r in self.registers)
        zeros = self.registers.count(0)
        if raw <= 2.5 * m and zeros:
            return round(m * math.log(m / zeros))  # linear counting: exact-ish for small counts
        return round(raw)

    def to_dict(self) -> dict:
        return {"precision": self.precision, "registers": base64.b64encode(bytes(self.registers)).decode()}

    @classmethod
    def from_dict(cls, data: dict) -> "HyperLogLog":
        registers = bytearray(base64.b64decode(data["registers"]))
        if len(registers) != 1 << data["precision"]:
            raise ValueError(f"HyperLogLog registers: {len(registers)} bytes, expected {1 << data['precision']}")
        return cls(data["precision"], registers)


# ---------------------------------------------------------------------------------------------
class HeavyHitters:
    """Misra-Gries / Space-Saving: at most ``capacity`` counters ``id -> [count, bytes]`` and
    ``decrement`` (Δ); ``count <= true count <= count + Δ`` for every key."""

    __slots__ = ("capacity", "counters", "decrement")

    def __init__(self, capacity: int = DEFAULT_HEAVY_CAPACITY):
        if capacity < 1:
            raise ValueError(f"heavy-hitter capacity = {capacity}, expected >= 1")
        self.capacity = capacity
        self.counters: dict[int, list[int]] = {}
        self.decrement = 0

    def merge_counts(self, counts: dict[int, list[int]], decrement: int = 0) -> None:
        """Add ``counts`` (``id -> [count, bytes]``, e.g. exact counts of a chunk, decrement 0, or
        another summary's counters and Δ), then keep ``capacity`` counters by lowering every count
        by the (capacity+1)-th largest (Agarwal et al.'s merge)."""
        mine = self.counters
        for ident, (count, nbytes) in counts.items():
            entry = mine.get(ident)
            if entry is None:
                mine[ident] = [count, nbytes]
            else:
                entry[0] += count
                entry[1] += nbytes
        self.decrement += decrement
        if len(mine) > self.capacity:
            cut = sorted((entry[0] for entry in mine.values()), reverse=True)[self.capacity]
            self.decrement += cut
            self.counters = {ident: [entry[0] - cut, entry[1]] for ident, entry in mine.items() if entry[0] > cut}

    def merge(self, other: "HeavyHitters") -> None:
        self.merge_counts(other.counters, other.decrement)

    def top(self, k: int | None = None) -> list[tuple[int, int, int]]:
        """``(id, count, bytes)`` by count, largest first (ties by id, for a stable order)."""
        ranked = sorted(self.counters.items(), key=lambda item: (-item[1][0], item[0]))
        return [(ident, count, nbytes) for ident, (count, nbytes) in ranked[:k]]


class KeySample:
    """The ``size`` distinct keys with the smallest ids, each with its exact [count, bytes]."""

    __slots__ = ("size", "entries", "_largest")

    def __init__(self, size: int = DEFAULT_SAMPLE_SIZE):
        if size < 1:
            raise ValueError(f"key sample size = {size}, expected >= 1")
        self.size = size
        self.entries: dict[int, list[int]] = {}
        self._largest: int | None = None  # the largest id kept, once full

    @property
    def threshold(self) -> int | None:
        """The largest id kept once the sample is full (every key with a smaller id is in it);
        None while it is not full (every key seen is in it)."""
        return self._largest

    def add(self, ident: int, nbytes: int) -> bool:
        """Count one record; True when ``ident`` is newly kept (its KeyInfo is then wanted)."""
        entry = self.entries.get(ident)
        if entry is not None:
            entry[0] += 1
            entry[1] += nbytes
            return False
        if self._largest is not None and ident > self._largest:
            return False
        self.entries[ident] = [1, nbytes]
        if len(self.entries) > self.size:
            del self.entries[max(self.entries)]
        if len(self.entries) == self.size:
            self._largest = max(self.entries)
        return True

    def merge(self, other: "KeySample") -> None:
        if other.size != self.size:
            raise ValueError(f"key sample of size {other.size} merged into one of size {self.size}")
        for ident, (count, nbytes) in other.entries.items():
            entry = self.entries.get(ident)
            if entry is None:
                self.entries[ident] = [count, nbytes]
            else:
                entry[0] += count
                entry[1] += nbytes
        if len(self.entries) > self.size:
            keep = sorted(self.entries)[:self.size]
            self.entries = {ident: self.entries[ident] for ident in keep}
        self._largest = max(self.entries) if len(self.entries) == self.size else None


# ---------------------------------------------------------------------------------------------
class KeyStats:
    """Everything kept about the keys of one stream of records; see the module docstring."""

    def __init__(self, *, precision: int = DEFAULT_HLL_PRECISION, capacity: int = DEFAULT_HEAVY_CAPACITY,
                 sample_size: int = DEFAULT_SAMPLE_SIZE, prefix_bytes: int = 0):
        self.records = 0
        self.null_keys = 0
        self.empty_keys = 0
        self.key_bytes = 0
        self.record_bytes = 0  # key + value bytes of every record (null key or value: 0)
        self.max_key_bytes = 0
        self.size_histogram = [0] * SIZE_BUCKETS
        self.prefix_bytes = prefix_bytes
        self.hll = HyperLogLog(precision)
        self.heavy = HeavyHitters(capacity)
        self.sample = KeySample(sample_size)
        self.info: dict[int, KeyInfo] = {}
        self._buffer: dict[int, list[int]] = {}
        self._pending: dict[int, bytes] = {}  # key bytes of buffered/new ids without KeyInfo yet
        self._pending_bytes = 0
        self.first_seen: dict[int, tuple[int, int | None]] = {}
        """Per kept key (sample and heavy hitters): the offset and timestamp of the first record
        counted for it, when :meth:`add` was given them. Exact for the sample's keys (kept from
        their first record); a heavy hitter dropped and counted again later shows that later
        record. The split-key check reads it ("since when")."""
        self._first_pending: dict[int, tuple[int, int | None]] = {}

    # -- the hot path -----------------------------------------------------------------------
    def add(self, key: bytes | None, value_size: int, offset: int | None = None,
            timestamp_ms: int | None = None) -> None:
        """One record: its key (None for a null key) and its value's size (-1 for null); its
        offset and timestamp when known (kept as the key's first record, see ``first_seen``)."""
        self.records += 1
        nbytes = value_size if value_size > 0 else 0
        if key is None:
            self.null_keys += 1
            self.record_bytes += nbytes
            return
        size = len(key)
        nbytes += size
        self.record_bytes += nbytes
        self.key_bytes += size
        self.size_histogram[size.bit_length()] += 1
        if size > self.max_key_bytes:
            self.max_key_bytes = size
        if size == 0:
            self.empty_keys += 1
        # key_id and HyperLogLog.add_hash inlined: this runs once per record (a call each cost ~20 %)
        ident = int.from_bytes(_blake2b(key, digest_size=8).digest(), "big")
        hll = self.hll
        rest_bits = _ID_BITS - hll.precision
        rank = rest_bits - (ident & ((1 << rest_bits) - 1)).bit_length() + 1
        if rank > hll.registers[ident >> rest_bits]:
            hll.registers[ident >> rest_bits] = rank
        entry = self._buffer.get(ident)
        if entry is None:
            self._buffer[ident] = [1, nbytes]
            if ident not in self.info and ident not in self._pending:
                self._pending[ident] = key
                self._pending_bytes += size
            if offset is not None and ident not in self.first_seen and ident not in self._first_pending:
                self._first_pending[ident] = (offset, timestamp_ms)
        else:
            entry[0] += 1
            entry[1] += nbytes
        sample = self.sample
        if sample._largest is None or ident <= sample._largest:  # most keys are above the sample's threshold
            sample.add(ident, nbytes)
        if (len(self._buffer) > BUFFER_KEYS_PER_COUNTER * self.heavy.capacity
                or self._pending_bytes > BUFFER_MAX_KEY_BYTES):
            self._fold()

    def _fold(self) -> None:
        """The buffer's exact counts into the heavy hitters; KeyInfo for the ids kept, key bytes
        of the others dropped."""
        self.heavy.merge_counts(self._buffer)
        self._buffer = {}
        kept = self.heavy.counters.keys() | self.sample.entries.keys()
        for ident, key in self._pending.items():
            if ident in kept:
                self.info[ident] = KeyInfo.of(key, self.prefix_bytes)
        self._pending = {}
        self._pending_bytes = 0
        if len(self.info) > len(kept):
            self.info = {ident: info for ident, info in self.info.items() if ident in kept}
        self._keep_first_seen(self._first_pending, kept)
        self._first_pending = {}

    def _keep_first_seen(self, more: dict[int, tuple[int, int | None]], kept) -> None:
        """``first_seen`` with ``more`` (the earliest offset wins), for the ``kept`` ids only."""
        merged = dict(self.first_seen)
        for ident, seen in more.items():
            known = merged.get(ident)
            if known is None or seen[0] < known[0]:
                merged[ident] = seen
        self.first_seen = {ident: seen for ident, seen in merged.items() if ident in kept}

    def seal(self) -> "KeyStats":
        """Fold what is buffered: after this no key bytes are held. Returns self."""
        if self._buffer or self._pending or self._first_pending:
            self._fold()
        return self

    # -- the C fold ------------------------------------------------------------------------------
    def c_fold(self):
        """A ``_ckeys.KeyFold`` holding this state (buffer and pending keys included, so a later
        :meth:`absorb` continues exactly where :meth:`add` would), or None when the extension is
        not built. Records go to the fold, not to this object, until :meth:`absorb`."""
        if _ckeys is None:
            return None
        fold = _ckeys.KeyFold(self.hll.precision, self.heavy.capacity, self.sample.size,
                              BUFFER_KEYS_PER_COUNTER * self.heavy.capacity, BUFFER_MAX_KEY_BYTES,
                              partial(KeyInfo.of, prefix_bytes=self.prefix_bytes))
        fold.load((self.records, self.null_keys, self.empty_keys, self.key_bytes, self.record_bytes,
                   self.max_key_bytes, list(self.size_histogram), bytes(self.hll.registers), self.heavy.decrement,
                   [(i, c, b) for i, (c, b) in self.heavy.counters.items()],
                   [(i, c, b) for i, (c, b) in self.sample.entries.items()],
                   list(self.info.items()),
                   [(i, c, b) for i, (c, b) in self._buffer.items()],
                   list(self._pending.items()), self._pending_bytes,
                   [(i, o, t) for i, (o, t) in self.first_seen.items()],
                   [(i, o, t) for i, (o, t) in self._first_pending.items()]))
        return fold

    def absorb(self, fold) -> "KeyStats":
        """Take back the state of ``fold`` (from :meth:`c_fold`). Returns self."""
        (self.records, self.null_keys, self.empty_keys, self.key_bytes, self.record_bytes, self.max_key_bytes,
         histogram, registers, decrement, heavy, sample, info, buffer, pending, pending_bytes, first_seen,
         first_pending) = fold.state()
        self.size_histogram = histogram
        self.hll.registers = bytearray(registers)
        self.heavy.decrement = decrement
        self.heavy.counters = {i: [c, b] for i, c, b in heavy}
        self.sample.entries = {i: [c, b] for i, c, b in sample}
        self.sample._largest = max(self.sample.entries) if len(self.sample.entries) == self.sample.size else None
        self.info = dict(info)
        self._buffer = {i: [c, b] for i, c, b in buffer}
        self._pending = dict(pending)
        self._pending_bytes = pending_bytes
        self.first_seen = {i: (o, t) for i, o, t in first_seen}
        self._first_pending = {i: (o, t) for i, o, t in first_pending}
        return self

    # -- merge and serialisation ----------------------------------------------------------------
    def merge(self, other: "KeyStats") -> "KeyStats":
        self.seal()
        other.seal()
        for name in ("records", "null_keys", "empty_keys", "key_bytes", "record_bytes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_key_bytes = max(self.max_key_bytes, other.max_key_bytes)
        self.size_histogram = [a + b for a, b in zip(self.size_histogram, other.size_histogram)]
        self.hll.merge(other.hll)
        self.heavy.merge(other.heavy)
        self.sample.merge(other.sample)
        kept = self.heavy.counters.keys() | self.sample.entries.keys()
        merged = {**other.info, **self.info}
        self.info = {ident: merged[ident] for ident in kept if ident in merged}
        self._keep_first_seen(other.first_seen, kept)
        return self

    def to_dict(self) -> dict:
        self.seal()
        return {
            "version": SKETCH_VERSION,
            "records": self.records, "null_keys": self.null_keys, "empty_keys": self.empty_keys,
            "key_bytes": self.key_bytes, "record_bytes": self.record_bytes, "max_key_bytes": self.max_key_bytes,
            "size_histogram": list(self.size_histogram), "prefix_bytes": self.prefix_bytes,
            "hll": self.hll.to_dict(),
            "heavy": {"capacity": self.heavy.capacity, "decrement": self.heavy.decrement,
                      "counters": [[f"{i:016x}", c, b] for i, (c, b) in sorted(self.heavy.counters.items())]},
            "sample": {"size": self.sample.size,
                       "entries": [[f"{i:016x}", c, b] for i, (c, b) in sorted(self.sample.entries.items())]},
            "keys": {f"{i:016x}": info.to_list() for i, info in sorted(self.info.items())},
            "first_seen": {f"{i:016x}": list(seen) for i, seen in sorted(self.first_seen.items())},
        }

    @classmethod
    def from_dict(cls, data: dict) -> "KeyStats":
        if data.get("version") != SKETCH_VERSION:
            raise ValueError(f"key sketch version = {data.get('version')!r}, expected {SKETCH_VERSION}")
        stats = cls(precision=data["hll"]["precision"], capacity=data["heavy"]["capacity"],
                    sample_size=data["sample"]["size"], prefix_bytes=data.get("prefix_bytes", 0))
        for name in ("records", "null_keys", "empty_keys", "key_bytes", "record_bytes", "max_key_bytes"):
            setattr(stats, name, int(data[name]))
        if len(data["size_histogram"]) != SIZE_BUCKETS:
            raise ValueError(f"key size histogram: {len(data['size_histogram'])} buckets, expected {SIZE_BUCKETS}")
        stats.size_histogram = [int(v) for v in data["size_histogram"]]
        stats.hll = HyperLogLog.from_dict(data["hll"])
        stats.heavy.decrement = int(data["heavy"]["decrement"])
        stats.heavy.counters = {int(i, 16): [int(c), int(b)] for i, c, b in data["heavy"]["counters"]}
        stats.sample.merge(_sample_of(data["sample"]))
        stats.info = {int(i, 16): KeyInfo.from_list(item) for i, item in data["keys"].items()}
        # optional: parts written before first_seen existed have none
        stats.first_seen = {int(i, 16): (int(o), None if t is None else int(t))
                            for i, (o, t) in (data.get("first_seen") or {}).items()}
        return stats

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "KeyStats":
        return cls.from_dict(json.loads(data))

    # -- what people read -----------------------------------------------------------------------
    @property
    def keyed(self) -> int:
        return self.records - self.null_keys

    def summary(self, top: int = 10) -> dict:
        """The JSON shown per partition: counts, estimates with their stated error, the top keys
        as fingerprints (never bytes)."""
        self.seal()
        delta = self.heavy.decrement
        heaviest = []
        for ident, count, nbytes in self.heavy.top(top):
            info = self.info.get(ident)
            item = {"key": info.fingerprint() if info else None, "records_min": count, "records_max": count + delta,
                    "share": round(count / self.records, 6) if self.records else None, "bytes_min": nbytes}
            heaviest.append(item)
        return {
            "records": self.records,
            "null_key_records": self.null_keys,
            "null_key_share": round(self.null_keys / self.records, 6) if self.records else None,
            "empty_key_records": self.empty_keys,
            "distinct_keys_estimate": self.hll.estimate(),
            "distinct_keys_relative_std_error": round(self.hll.relative_error, 4),
            "key_bytes": {"total": self.key_bytes, "max": self.max_key_bytes,
                          "mean": round(self.key_bytes / self.keyed, 2) if self.keyed else None,
                          "log2_histogram": _trim(self.size_histogram)},
            "heavy_hitters": heaviest,
            "heavy_hitters_error_records": delta,
            "heavy_hitters_guarantee": (f"every key with more than {delta} records is listed; each key's true count "
                                        f"is within [records_min, records_max]"),
        }


def _sample_of(data: dict) -> KeySample:
    sample = KeySample(data["size"])
    sample.entries = {int(i, 16): [int(c), int(b)] for i, c, b in data["entries"]}
    if len(sample.entries) > sample.size:
        raise ValueError(f"key sample: {len(sample.entries)} entries, expected <= {sample.size}")
    sample._largest = max(sample.entries) if len(sample.entries) == sample.size else None
    return sample


def _trim(histogram: list[int]) -> dict[str, int]:
    """Non-empty buckets, named by their size range ("0", "1", "2-3", "4-7", ...)."""
    out = {}
    for bucket, count in enumerate(histogram):
        if count:
            low, high = (0, 0) if bucket == 0 else (1 << (bucket - 1), (1 << bucket) - 1)
            out[str(low) if low == high else f"{low}-{high}"] = count
    return out
