"""auditor.keys.partitioners against the clients' own published test vectors (issue 23).

Each table says where its numbers come from; the numbers are the clients' expectations, the
code under test is ours (read from their sources, not copied).
"""

from __future__ import annotations

import pytest

from auditor.keys.partitioners import (FAMILIES, KeyHashes, crc32, fnv1a32, fnv1a_partition,
                                       fnv1a_reference_partition, key_partition, murmur2, murmur2_partition,
                                       null_key_partition, partition_for, to_int32)

pytestmark = pytest.mark.unit

# Apache Kafka, clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2:
# Utils.murmur2(bytes) as a signed int.
KAFKA_UTILS_TEST_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# librdkafka, src/rdmurmur2.c, unittest_murmur2 ("java_murmur2_results", int32 of rd_murmur2):
# aligned and unaligned reads of the same strings, and the empty key.
_SHORT, _LONG = b"1234", b"PreAmbleWillBeRemoved,ThePrePartThatIs"
LIBRDKAFKA_UNITTEST_MURMUR2 = [
    (b"kafka", 0xD067CF64),
    (b"giberish123456789", 0x8F552B0C),
    (_SHORT, 0x9FC97B14),
    (_SHORT[1:], 0xE7C009CA),
    (_SHORT[2:], 0x873930DA),
    (_SHORT[3:], 0x5A4B5CA1),
    (_LONG, 0x78424F1C),
    (_LONG[1:], 0x4A62B377),
    (_LONG[2:], 0xE0E4E09E),
    (_LONG[3:], 0x62B8B43F),
    (b"", 0x106E08D9),
]

# librdkafka, src/rdfnv1a.c, unittest_fnv1a ("golang_hashfnv_results": rd_fnv1a, which is the
# absolute value of Go's int32(fnv.New32a().Sum32()), to match sarama's NewHashPartitioner).
LIBRDKAFKA_UNITTEST_FNV1A_ABS = [
    (b"kafka", 0xD33C4E1),
    (b"giberish123456789", 0x77A58295),
    (_SHORT, 0x23BDD03),
    (_SHORT[1:], 0x2DEA3CD2),
    (_SHORT[2:], 0x740FA83E),
    (_SHORT[3:], 0x310CA263),
    (_LONG, 0x65CBD69C),
    (_LONG[1:], 0x6E49C79A),
    (_LONG[2:], 0x69EED356),
    (_LONG[3:], 0x6ABCC023),
    (b"", 0x7EE3623B),
]

# Go, src/hash/fnv/fnv_test.go, golden32a: FNV-1a 32-bit sums (big-endian bytes).
GO_FNV_GOLDEN32A = [(b"", 0x811C9DC5), (b"a", 0xE40C292C), (b"ab", 0x4D2505CA), (b"abc", 0x1A47E90B)]

# librdkafka, tests/0048-partitioner.c, do_test_partitioners: key -> expected partition for each
# partitioner, as "<hash constant> % part_cnt" with part_cnt 7 (quick) or 17. Keys: NULL, "",
# "23456" (an unaligned pointer into "123456"), a long string, "hejsan". Entries for NULL keys and
# for the empty key under consistent_random are random there (-1) and are tested separately.
LIBRDKAFKA_0048_KEYS = [b"23456", b"this is another string with more length to it perhaps", b"hejsan"]
LIBRDKAFKA_0048_EXPECTED = {
    "crc32": [0xB1B451D7, 0xB0150DF7, 0xD077037E],     # "consistent" / "consistent_random"
    "murmur2": [0x058D780F, 0x4F7703DA, 0x5EC19395],   # "murmur2" / "murmur2_random"
    "fnv1a": [0x27E6F469, 0x155E3E5F, 0x17B1E27A],     # "fnv1a" / "fnv1a_random"
}
LIBRDKAFKA_0048_EMPTY_KEY = {"crc32": 0x0, "murmur2": 0x106E08D9, "fnv1a": 0x7EE3623B}


@pytest.mark.parametrize("key,expected", KAFKA_UTILS_TEST_MURMUR2)
def test_murmur2_matches_kafka_utils_test(key, expected):
    assert murmur2(key) == expected


@pytest.mark.parametrize("key,expected", LIBRDKAFKA_UNITTEST_MURMUR2)
def test_murmur2_matches_librdkafka_unittest(key, expected):
    assert murmur2(key) == to_int32(expected)


@pytest.mark.parametrize("key,expected", LIBRDKAFKA_UNITTEST_FNV1A_ABS)
def test_fnv1a_matches_librdkafka_unittest(key, expected):
    assert abs(to_int32(fnv1a32(key))) == expected


@pytest.mark.parametrize("key,expected", GO_FNV_GOLDEN32A)
def test_fnv1a_matches_go_golden(key, expected):
    assert fnv1a32(key) == expected


@pytest.mark.parametrize("partitions", [7, 17])
@pytest.mark.parametrize("family", sorted(LIBRDKAFKA_0048_EXPECTED))
def test_partitions_match_librdkafka_0048(family, partitions):
    for key, constant in zip(LIBRDKAFKA_0048_KEYS, LIBRDKAFKA_0048_EXPECTED[family]):
        assert key_partition(family, key, partitions) == constant % partitions, key
    # the empty key: hashed by consistent, murmur2(_random), fnv1a(_random)
    assert key_partition(family, b"", partitions) == LIBRDKAFKA_0048_EMPTY_KEY[family] % partitions


@pytest.mark.parametrize("partitions", [7, 17])
def test_null_key_partition_matches_librdkafka_0048(partitions):
    # the NULL key row of 0048: consistent -> 0, murmur2 -> 0x106e08d9 % n, fnv1a -> 0x7ee3623b % n
    assert null_key_partition("librdkafka consistent", partitions) == 0
    assert null_key_partition("librdkafka murmur2", partitions) == 0x106E08D9 % partitions
    assert null_key_partition("librdkafka fnv1a", partitions) == 0x7EE3623B % partitions
    assert null_key_partition("librdkafka consistent_random", partitions) is None  # random there
    assert null_key_partition("java", partitions) is None


def test_java_to_positive_is_a_mask_not_abs():
    # Utils.toPositive clears the sign bit: -973932308 ("21") -> 1173551340, not 973932308
    assert murmur2_partition(-973932308, 1 << 31) == -973932308 & 0x7FFFFFFF == 1173551340
    assert murmur2_partition(-(1 << 31), 10) == 0


def test_fnv1a_negative_hash_sarama_vs_reference():
    # int32(h) = -2128831035 for the empty key: sarama's default takes |h % n|, the reference
    # partitioner masks the sign bit first; they differ, both must be right
    h = fnv1a32(b"")
    assert to_int32(h) == -2128831035
    assert fnv1a_partition(h, 10) == 5          # -2128831035 % 10 = -5 (Go truncates) -> 5
    assert fnv1a_reference_partition(h, 10) == 18652613 % 10  # 0x811c9dc5 & 0x7fffffff = 18652613
    # the most negative int32: |h| overflows in C, Go negates the remainder: both give 2**31 % n
    assert fnv1a_partition(0x80000000, 7) == (1 << 31) % 7


def test_partition_for_uses_the_stored_hashes():
    hashes = KeyHashes.of(b"hejsan")
    for family in FAMILIES:
        for n in (1, 3, 12, 100):
            assert partition_for(family, hashes, n) == key_partition(family.name, b"hejsan", n)
            assert 0 <= partition_for(family, hashes, n) < n
    assert crc32(b"hejsan") == 0xD077037E
    with pytest.raises(ValueError):
        partition_for("murmur2", hashes, 0)
