"""The partition each known default client partitioner chooses for a key (pure functions).

Three hash functions cover the default key partitioners of the common clients; what differs
between clients is how the 32-bit hash becomes a partition number:

========================  ==========================================================  ==================
hash family               clients (key not null)                                      partition
========================  ==========================================================  ==================
``murmur2``               Kafka's Java client (``BuiltInPartitioner.partitionForKey``,  ``(h & 0x7fffffff) % n``
                          ``Utils.toPositive``), librdkafka ``murmur2`` and
                          ``murmur2_random`` (``rd_kafka_msg_partitioner_murmur2*``)
``crc32``                 librdkafka ``consistent`` and ``consistent_random`` (its      ``crc32 % n`` (unsigned)
                          default, so confluent-kafka's): ``rd_crc32(key) % cnt``
``fnv1a``                 sarama's ``NewHashPartitioner`` (its default) and kafka-go's  ``abs(int32(h) % n)``
                          ``Hash``: ``int32(fnv32a) % n``, negated when negative;
                          librdkafka ``fnv1a``/``fnv1a_random`` do the same
                          (``rd_fnv1a`` takes ``abs`` of the int32 hash, then ``% cnt``)
``fnv1a-reference``       sarama's ``NewReferenceHashPartitioner`` / ``WithAbsFirst``   ``(h & 0x7fffffff) % n``
========================  ==========================================================  ==================

Read from the clients' sources (librdkafka ``src/rdkafka_msg.c``, ``src/rdmurmur2.c``,
``src/rdfnv1a.c``; sarama ``partitioner.go``; Kafka ``clients/.../utils/Utils.java``).
``abs(int32(h) % n)`` equals ``abs(int32(h)) % n`` for Go's and C's truncating ``%``, including
``int32(h) == -2**31`` (both give ``2**31 % n``), so one function serves sarama and librdkafka.

Records without a key are not placed by the hash in most clients, so they say nothing about the
partitioner: Kafka's Java client (since 3.3, KIP-794) and librdkafka's ``*_random`` partitioners
send them to a sticky or random partition, sarama to a random one. librdkafka's non-random
``consistent``/``murmur2``/``fnv1a`` hash a null key as zero bytes (a fixed partition:
:func:`null_key_partition`). An empty (zero-length) key is random under ``consistent_random``
(it tests ``keylen == 0``) and hashed by the others.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Callable

_U32 = 0xFFFFFFFF
_INT32_SIGN = 0x80000000
#: Kafka's ``Utils.toPositive``: clears the sign bit (not ``abs``: ``abs(-2**31)`` overflows in Java).
POSITIVE_MASK = 0x7FFFFFFF

# --- murmur2 as Kafka computes it (Utils.murmur2; librdkafka rd_murmur2 gives the same bits) ---
MURMUR2_SEED = 0x9747B28C
MURMUR2_M = 0x5BD1E995
MURMUR2_R = 24

# --- FNV-1a, 32 bit (Go's hash/fnv New32a; librdkafka rd_fnv1a) --------------------------------
FNV1A_OFFSET_BASIS = 0x811C9DC5
FNV1A_PRIME = 0x01000193


def to_int32(h: int) -> int:
    """The unsigned 32-bit value ``h`` read as a two's-complement int32 (Java's ``int``)."""
    return h - (1 << 32) if h & _INT32_SIGN else h


def murmur2(key: bytes) -> int:
    """Kafka's ``Utils.murmur2(byte[])``: a signed int32, as the Java client computes it.

    Four-byte blocks are read little-endian; shifts are unsigned (Java ``>>>``)."""
    length = len(key)
    h = (MURMUR2_SEED ^ length) & _U32
    whole = length & ~3
    if whole:
        for k in struct.unpack_from(f"<{whole // 4}I", key):
            k = (k * MURMUR2_M) & _U32
            k ^= k >> MURMUR2_R
            k = (k * MURMUR2_M) & _U32
            h = ((h * MURMUR2_M) & _U32) ^ k
    rest = length & 3
    if rest:
        if rest == 3:
            h ^= key[whole + 2] << 16
        if rest >= 2:
            h ^= key[whole + 1] << 8
        h ^= key[whole]
        h = (h * MURMUR2_M) & _U32
    h ^= h >> 13
    h = (h * MURMUR2_M) & _U32
    h ^= h >> 15
    return to_int32(h)


def crc32(key: bytes) -> int:
    """CRC-32 (IEEE, zlib's), unsigned: librdkafka's ``rd_crc32``."""
    return zlib.crc32(key) & _U32


def fnv1a32(key: bytes) -> int:
    """FNV-1a 32-bit, unsigned (Go's ``fnv.New32a().Sum32()``)."""
    h = FNV1A_OFFSET_BASIS
    for byte in key:
        h = ((h ^ byte) * FNV1A_PRIME) & _U32
    return h


# --- hash -> partition, per family -----------------------------------------------------------

def murmur2_partition(murmur2_hash: int, partitions: int) -> int:
    """Java's ``toPositive(murmur2) % n`` (and librdkafka's ``(rd_murmur2 & 0x7fffffff) % cnt``)."""
    return (murmur2_hash & POSITIVE_MASK) % partitions


def crc32_partition(crc: int, partitions: int) -> int:
    """librdkafka's ``rd_crc32(key) % partition_cnt`` (uint32 % int32: the unsigned value)."""
    return (crc & _U32) % partitions


def fnv1a_partition(fnv: int, partitions: int) -> int:
    """sarama's ``NewHashPartitioner``: ``int32(h) % n``, negated when negative; equal to
    librdkafka's ``abs(int32(h)) % cnt``."""
    return abs(to_int32(fnv & _U32)) % partitions


def fnv1a_reference_partition(fnv: int, partitions: int) -> int:
    """sarama's ``NewReferenceHashPartitioner``: ``(int32(h) & 0x7fffffff) % n``."""
    return (fnv & POSITIVE_MASK) % partitions


@dataclass(frozen=True)
class HashFamily:
    """One way of turning a key into a partition: the hash it needs and how it is reduced."""

    name: str
    hash_name: str  # the KeyHashes field it reads: "murmur2", "crc32" or "fnv1a"
    to_partition: Callable[[int, int], int]
    clients: str


FAMILIES: tuple[HashFamily, ...] = (
    HashFamily("murmur2", "murmur2", murmur2_partition,
               "Kafka Java client default; librdkafka murmur2 / murmur2_random"),
    HashFamily("crc32", "crc32", crc32_partition,
               "librdkafka consistent / consistent_random (librdkafka's and confluent-kafka's default)"),
    HashFamily("fnv1a", "fnv1a", fnv1a_partition,
               "sarama NewHashPartitioner (its default), kafka-go Hash, librdkafka fnv1a / fnv1a_random"),
    HashFamily("fnv1a-reference", "fnv1a", fnv1a_reference_partition,
               "sarama NewReferenceHashPartitioner"),
)
FAMILY_BY_NAME = {family.name: family for family in FAMILIES}


@dataclass(frozen=True, slots=True)
class KeyHashes:
    """What the partitioners need of one key, without its bytes."""

    murmur2: int  # signed int32, as Kafka's Utils.murmur2 returns it (also the key's fingerprint)
    crc32: int    # unsigned
    fnv1a: int    # unsigned

    @classmethod
    def of(cls, key: bytes) -> "KeyHashes":
        return cls(murmur2(key), crc32(key), fnv1a32(key))


def partition_for(family: str | HashFamily, hashes: KeyHashes, partitions: int) -> int:
    """The partition ``family`` chooses for a non-empty key with these hashes among ``partitions``."""
    if partitions < 1:
        raise ValueError(f"partition count = {partitions}, expected >= 1")
    fam = FAMILY_BY_NAME[family] if isinstance(family, str) else family
    return fam.to_partition(getattr(hashes, fam.hash_name), partitions)


def key_partition(family: str, key: bytes, partitions: int) -> int:
    """The partition ``family`` chooses for ``key`` (bytes) among ``partitions``."""
    return partition_for(family, KeyHashes.of(key), partitions)


#: librdkafka partitioners that hash a null key as if it were zero bytes (so always one partition);
#: every other default partitioner places null keys at random or sticky.
NULL_KEY_HASHED = {"librdkafka consistent": "crc32", "librdkafka murmur2": "murmur2", "librdkafka fnv1a": "fnv1a"}


def null_key_partition(partitioner: str, partitions: int) -> int | None:
    """Where ``partitioner`` (a key of :data:`NULL_KEY_HASHED`) puts a null key; None when it
    places null keys at random (every other client partitioner)."""
    family = NULL_KEY_HASHED.get(partitioner)
    return None if family is None else key_partition(family, b"", partitions)
