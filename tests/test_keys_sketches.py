"""auditor.keys.sketches: the stated bounds hold, merges equal one pass within them (issue 23).

Property tests (hypothesis) on streams of keys; small capacities so the summaries do drop
counters. The truth is computed exactly beside each stream.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.keys.partitioners import murmur2
from auditor.keys.sketches import HeavyHitters, HyperLogLog, KeySample, KeyStats, key_id

# sketches over 200,000 keys: 1.6 s of CPU at load 12-15; xdist starts the longest files first
pytestmark = [pytest.mark.unit, pytest.mark.schedule_first(cpu_s=1.6)]

CAPACITY = 8
SAMPLE = 16

# a stream: key numbers drawn with skew (small numbers often), a few null keys, value sizes
records = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(0, 3), st.integers(0, 300)), st.integers(-1, 50)),
    max_size=400,
)


def key_of(n: int | None) -> bytes | None:
    return None if n is None else f"user-{n}".encode()


def stats_of(stream, **kw) -> KeyStats:
    stats = KeyStats(precision=6, capacity=CAPACITY, sample_size=SAMPLE, **kw)
    for n, value_size in stream:
        stats.add(key_of(n), value_size)
    return stats.seal()


def truth(stream) -> Counter:
    return Counter(key_id(key_of(n)) for n, _ in stream if n is not None)


def assert_heavy_bounds(heavy: HeavyHitters, true: Counter, total: int) -> None:
    delta = heavy.decrement
    assert delta <= total / (heavy.capacity + 1)
    assert len(heavy.counters) <= heavy.capacity
    for ident, count in true.items():
        listed = heavy.counters.get(ident, [0, 0])[0]
        assert listed <= count <= listed + delta, (ident, listed, count, delta)
        if count > delta:
            assert ident in heavy.counters  # every key above Δ is listed
    for ident in heavy.counters:
        assert ident in true


@settings(max_examples=150, deadline=None)
@given(records)
def test_one_pass_keeps_the_stated_bounds(stream):
    stats = stats_of(stream)
    true = truth(stream)
    keyed = sum(true.values())
    assert stats.records == len(stream)
    assert stats.null_keys == len(stream) - keyed
    assert_heavy_bounds(stats.heavy, true, keyed)
    # ranking: keys whose true counts differ by more than Δ are in the right order
    ranked = [ident for ident, _, _ in stats.heavy.top()]
    for i, a in enumerate(ranked):
        for b in ranked[i + 1:]:
            assert not true[b] > true[a] + stats.heavy.decrement
    # the sample: the SAMPLE smallest ids, with exact counts
    assert sorted(stats.sample.entries) == sorted(true)[:SAMPLE]
    for ident, (count, _) in stats.sample.entries.items():
        assert count == true[ident]
    # every listed key has its KeyInfo
    assert set(stats.info) == set(stats.heavy.counters) | set(stats.sample.entries)


@settings(max_examples=150, deadline=None)
@given(records, st.integers(0, 400))
def test_merge_of_two_halves_equals_one_pass_within_bounds(stream, cut):
    whole = stats_of(stream)
    merged = stats_of(stream[:cut]).merge(stats_of(stream[cut:]))
    a, b = whole.to_dict(), merged.to_dict()
    for exact in ("records", "null_keys", "empty_keys", "key_bytes", "record_bytes", "max_key_bytes",
                  "size_histogram", "hll", "sample"):
        assert a[exact] == b[exact], exact
    assert_heavy_bounds(merged.heavy, truth(stream), sum(truth(stream).values()))
    assert set(merged.info) == set(merged.heavy.counters) | set(merged.sample.entries)


@settings(max_examples=100, deadline=None)
@given(records, st.integers(0, 400), st.integers(0, 400))
def test_merge_is_associative_within_bounds(stream, i, j):
    i, j = sorted((i, j))
    parts = [stream[:i], stream[i:j], stream[j:]]
    left = stats_of(parts[0]).merge(stats_of(parts[1])).merge(stats_of(parts[2]))
    right = stats_of(parts[0]).merge(stats_of(parts[1]).merge(stats_of(parts[2])))
    a, b = left.to_dict(), right.to_dict()
    for exact in ("records", "null_keys", "size_histogram", "hll", "sample"):
        assert a[exact] == b[exact], exact
    true = truth(stream)
    assert_heavy_bounds(left.heavy, true, sum(true.values()))
    assert_heavy_bounds(right.heavy, true, sum(true.values()))


@settings(max_examples=100, deadline=None)
@given(records)
def test_serialisation_round_trip_and_merge_after_it(stream):
    stats = stats_of(stream)
    again = KeyStats.from_bytes(stats.to_bytes())
    assert again.to_dict() == stats.to_dict()
    # a deserialised summary (no key bytes, only KeyInfo) merges like a fresh one
    both = KeyStats.from_bytes(stats.to_bytes()).merge(again)
    assert both.records == 2 * stats.records
    assert set(both.info) == set(both.heavy.counters) | set(both.sample.entries)


def test_heavy_hitters_exact_ranked_above_the_threshold():
    # 20,000 records: 3 hot keys at 20 %, 10 %, 5 %, the rest spread over 5,000 keys
    stream = []
    for i in range(20_000):
        if i % 20 < 4:
            n = 1_000_000
        elif i % 20 < 6:
            n = 1_000_001
        elif i % 20 < 7:
            n = 1_000_002
        else:
            n = (i * 7919) % 5_000
        stream.append((n, 10))
    stats = KeyStats(capacity=64).seal()
    for n, size in stream:
        stats.add(key_of(n), size)
    stats.seal()
    true = truth(stream)
    delta = stats.heavy.decrement
    assert delta <= 20_000 / 65
    top = stats.heavy.top(3)
    assert [ident for ident, _, _ in top] == [key_id(key_of(n)) for n in (1_000_000, 1_000_001, 1_000_002)]
    for ident, count, nbytes in top:
        assert count <= true[ident] <= count + delta
    summary = stats.summary(top=3)
    hot = summary["heavy_hitters"][0]
    assert hot["key"] == {"murmur2": murmur2(b"user-1000000"), "length": 12, "printable": True}
    assert hot["records_min"] <= 4_000 <= hot["records_max"]


@pytest.mark.parametrize("n", [10, 1_000, 20_000, 200_000])
def test_hyperloglog_within_its_stated_error(n):
    hll = HyperLogLog(12)
    for i in range(n):
        hll.add_hash(key_id(b"key-%d" % i))
    # 3 standard errors: a deterministic input, so this either holds or the estimator is wrong
    assert abs(hll.estimate() - n) <= 3 * hll.relative_error * n + 1, (hll.estimate(), n)


def test_keys_are_not_kept_only_fingerprints():
    stats = KeyStats(capacity=4, sample_size=4)
    for i in range(100):
        stats.add(b"alice@example.com" if i % 3 else b"bob-secret-%d" % i, 100)
    data = stats.to_bytes()
    assert b"alice" not in data and b"secret" not in data
    assert stats.summary()["heavy_hitters"][0]["key"]["length"] == len(b"alice@example.com")
    allowed = KeyStats(capacity=4, sample_size=4, prefix_bytes=5)
    allowed.add(b"alice@example.com", 1)
    assert allowed.summary()["heavy_hitters"][0]["key"]["prefix"] == "alice"


def test_binary_and_null_and_empty_keys():
    stats = KeyStats()
    stats.add(None, 10)
    stats.add(b"", 5)
    stats.add(b"\x00\xff", -1)
    s = stats.summary()
    assert (s["records"], s["null_key_records"], s["empty_key_records"]) == (3, 1, 1)
    assert s["key_bytes"]["log2_histogram"] == {"0": 1, "2-3": 1}
    printable = {tuple(sorted(h["key"].items())) for h in s["heavy_hitters"]}
    assert (("length", 2), ("murmur2", murmur2(b"\x00\xff")), ("printable", False)) in printable
    assert stats.record_bytes == 10 + 5 + 2


def test_bad_parameters_and_versions_are_refused():
    with pytest.raises(ValueError):
        HyperLogLog(30)
    with pytest.raises(ValueError):
        HeavyHitters(0)
    with pytest.raises(ValueError):
        KeySample(0)
    data = KeyStats().to_dict()
    data["version"] = 99
    with pytest.raises(ValueError, match="version"):
        KeyStats.from_dict(data)
