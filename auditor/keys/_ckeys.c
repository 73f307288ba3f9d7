/*
 * _ckeys: the key statistics of issue 23 (auditor/keys/sketches.py KeyStats) folded in C.
 *
 * KeyFold holds the whole state of one KeyStats while a partition is read: the exact counters, the
 * key-size histogram, the HyperLogLog registers, the exact-count buffer with the bytes of the keys
 * that may need a KeyInfo, the Misra-Gries heavy hitters, the bottom-k sample and the set of ids
 * that have a KeyInfo. Every step is the Python one, in the same order, so the state handed back
 * (state()) is exactly the one KeyStats.add would have reached on the same records:
 *
 *   - a key's id is BLAKE2b with an 8-byte digest (RFC 7693), read big-endian (sketches.key_id);
 *   - the HyperLogLog register of the id's top `precision` bits takes the rank of the rest;
 *   - the buffer counts ids exactly; a new id without a KeyInfo keeps its key bytes (pending);
 *     the buffer is folded into the heavy hitters when it holds more than buffer_keys ids or more
 *     than buffer_max_bytes pending key bytes, checked after every keyed record, as KeyStats.add;
 *   - the fold (HeavyHitters.merge_counts then KeyStats._fold): counters summed, the
 *     (capacity+1)-th largest count subtracted when more than `capacity` remain; each pending id
 *     that is kept (heavy hitters or sample) gets its KeyInfo from info_factory(key bytes), a
 *     Python call once per newly kept key (printability and the partitioners' hashes);
 *   - the sample keeps the `sample_size` smallest ids with their exact counts (KeySample.add);
 *   - first_seen: an id entering the buffer without a first_seen entry notes its record's offset
 *     and timestamp (KeyStats._first_pending, kept in its buffer slot); each fold rebuilds
 *     first_seen from the old entries and the buffer's, for the kept ids only, the earliest offset
 *     winning (KeyStats._keep_first_seen). A record's timestamp is the one iter_records gives:
 *     baseTimestamp + timestampDelta (Java long arithmetic), or the batch's maxTimestamp in a
 *     LogAppendTime batch.
 *
 * Records enter by three doors: add(key, value_size, offset, timestamp_ms) for one record decoded
 * in Python (legacy messages, batches the C reader hands back), add_records(data, start, count,
 * base_offset, base_timestamp, log_append_timestamp) for the records of one v2 batch laid
 * out in `data` from `start` (a decompressed batch), and walk(fd, start, size, cut) for runs of
 * plain v2 batches of a .log file, read with pread in windows (never mmap, never a write), as
 * auditor/keys/partition_keys.py reads them; walk stops at a compressed batch and hands it back
 * packed (its compressed records as bytes), so Python decompresses it piece by piece and feeds the
 * pieces to records_begin / records_feed / records_end (a record cut by a piece's end carried).
 * add_records and walk take a batch only when every one of its records reads cleanly, exactly as
 * record_batch.iter_records reads them (varint sizes and bounds, headers, the record's size, the
 * batch's end), checked before any is added (no array of the records is made: a batch at the
 * decompression cap holds 38 million); a batch that would give an error or a note is left
 * untouched and handed back, and the Python path reads it, so every note comes from one
 * implementation. records_feed adds the records as they come and stops at the first one
 * iter_records raises for, keeping its bytes (the Python path reads that record alone for the
 * note; copy() and swap() let the caller put the fold back when the stream fails later). walk also hands back legacy entries, framing that the Python walker would
 * stop on, batches larger than MAX_BATCH_BYTES and read errors.
 *
 * Byte layouts: DefaultRecordBatch.java / DefaultRecord.java (auditor/formats/record_batch.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "_record_batch.h"
#include "_record_reading.h"
#include "_legacy_message.h"

#define SIZE_BUCKETS 33
#define ID_BITS 64
#define WINDOW_BYTES (1024 * 1024)
/* The first read of a walk call: the caller comes back after each batch it reads itself. */
#define FIRST_WINDOW_BYTES (16 * 1024)
/* Larger batches go to the Python path (which reads up to its own max_batch_bytes). */
#define MAX_BATCH_BYTES (16 * 1024 * 1024)

/* ----------------------------------------------------------------------------------------------
 * BLAKE2b (RFC 7693), unkeyed, 8-byte digest: the id of a key (hashlib.blake2b(key, digest_size=8)). */
static const uint64_t BLAKE2B_IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t BLAKE2B_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};
#define BLAKE2B_BLOCK 128
#define BLAKE2B_ROUNDS 12
#define BLAKE2B_DIGEST_BYTES 8
/* parameter block word 0: digest length, key length 0, fanout 1, depth 1 */
#define BLAKE2B_PARAM0 (0x01010000ULL | BLAKE2B_DIGEST_BYTES)

static inline uint64_t rotr64(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

#define G(a, b, c, d, x, y)              \
    do {                                 \
        a = a + b + (x);                 \
        d = rotr64(d ^ a, 32);           \
        c = c + d;                       \
        b = rotr64(b ^ c, 24);           \
        a = a + b + (y);                 \
        d = rotr64(d ^ a, 16);           \
        c = c + d;                       \
        b = rotr64(b ^ c, 63);           \
    } while (0)

static void blake2b_compress(uint64_t h[8], const unsigned char *block, uint64_t counter, int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = le64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = BLAKE2B_IV[i];
    }
    v[12] ^= counter; /* the high half of the 128-bit counter stays 0: keys are < 2^64 bytes */
    if (last) v[14] = ~v[14];
    for (int r = 0; r < BLAKE2B_ROUNDS; r++) {
        const uint8_t *s = BLAKE2B_SIGMA[r];
        G(v[0], v[4], v[8], v[12], m[s[0]], m[s[1]]);
        G(v[1], v[5], v[9], v[13], m[s[2]], m[s[3]]);
        G(v[2], v[6], v[10], v[14], m[s[4]], m[s[5]]);
        G(v[3], v[7], v[11], v[15], m[s[6]], m[s[7]]);
        G(v[0], v[5], v[10], v[15], m[s[8]], m[s[9]]);
        G(v[1], v[6], v[11], v[12], m[s[10]], m[s[11]]);
        G(v[2], v[7], v[8], v[13], m[s[12]], m[s[13]]);
        G(v[3], v[4], v[9], v[14], m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

/* int.from_bytes(blake2b(key, digest_size=8).digest(), "big") */
static uint64_t key_id(const unsigned char *key, int64_t n) {
    uint64_t h[8];
    memcpy(h, BLAKE2B_IV, sizeof h);
    h[0] ^= BLAKE2B_PARAM0;
    uint64_t counter = 0;
    while (n > BLAKE2B_BLOCK) {
        counter += BLAKE2B_BLOCK;
        blake2b_compress(h, key, counter, 0);
        key += BLAKE2B_BLOCK;
        n -= BLAKE2B_BLOCK;
    }
    unsigned char last[BLAKE2B_BLOCK] = {0};
    if (n > 0) memcpy(last, key, (size_t)n);
    counter += (uint64_t)n;
    blake2b_compress(h, last, counter, 1);
    /* the digest is h[0]'s little-endian bytes; read big-endian */
    return __builtin_bswap64(h[0]);
}

/* ----------------------------------------------------------------------------------------------
 * Tables keyed by 64-bit ids (already uniform hashes: the low bits index the table). */
/* Where a key was first counted (KeyStats.first_seen / _first_pending): a record's offset and
 * timestamp, the timestamp possibly None (a record read in Python may have none). */
typedef struct {
    int64_t offset, ts;
    int ts_none;
} seen_at_t;

typedef struct {
    uint64_t id;
    int64_t count, bytes;
    int64_t key_at; /* offset of the pending key bytes in the arena, -1: none */
    int64_t key_len;
    int64_t first_offset, first_ts; /* KeyStats._first_pending[id], when `first` is not FIRST_NONE */
    uint8_t first;
    uint8_t used; /* (flat, one-byte fields: a slot is 64 bytes, one cache line) */
} counter_t;

_Static_assert(sizeof(counter_t) == 64, "a buffer slot is one cache line");

enum { FIRST_NONE, FIRST_AT, FIRST_AT_NO_TIMESTAMP };

static inline void set_first(counter_t *s, const seen_at_t *at) {
    s->first_offset = at->offset;
    s->first_ts = at->ts;
    s->first = at->ts_none ? FIRST_AT_NO_TIMESTAMP : FIRST_AT;
}

static inline seen_at_t first_of(const counter_t *s) {
    return (seen_at_t){s->first_offset, s->first_ts, s->first == FIRST_AT_NO_TIMESTAMP};
}

typedef struct {
    counter_t *slots;
    int64_t mask, n;
} counter_table_t;

typedef struct {
    uint64_t id;
    PyObject *key; /* its KeyInfo (info_factory(key bytes)) */
    int used;
} info_t;

typedef struct {
    info_t *slots;
    int64_t mask, n;
} info_table_t;

typedef struct {
    uint64_t id;
    int64_t count, bytes;
} entry_t;

/* KeyStats.first_seen: id -> where it was first counted, for kept ids only (rebuilt at each fold). */
typedef struct {
    uint64_t id;
    seen_at_t at;
    int used;
} seen_t;

typedef struct {
    seen_t *slots;
    int64_t mask, n;
} seen_table_t;

static int64_t table_size_for(int64_t n) {
    int64_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
}

static int counters_init(counter_table_t *t, int64_t n) {
    int64_t size = table_size_for(n);
    t->slots = calloc((size_t)size, sizeof(counter_t));
    if (t->slots == NULL) return -1;
    t->mask = size - 1;
    t->n = 0;
    return 0;
}

/* The slot of id (used or the free one where it goes). */
static inline counter_t *counters_slot(counter_table_t *t, uint64_t id) {
    int64_t i = (int64_t)(id & (uint64_t)t->mask);
    while (t->slots[i].used && t->slots[i].id != id) i = (i + 1) & t->mask;
    return &t->slots[i];
}

static int counters_grow(counter_table_t *t) {
    counter_table_t bigger;
    if (counters_init(&bigger, 2 * (t->mask + 1)) < 0) return -1;
    for (int64_t i = 0; i <= t->mask; i++) {
        if (t->slots[i].used) {
            *counters_slot(&bigger, t->slots[i].id) = t->slots[i];
            bigger.n++;
        }
    }
    free(t->slots);
    *t = bigger;
    return 0;
}

static int infos_init(info_table_t *t, int64_t n) {
    int64_t size = table_size_for(n);
    t->slots = calloc((size_t)size, sizeof(info_t));
    if (t->slots == NULL) return -1;
    t->mask = size - 1;
    t->n = 0;
    return 0;
}

static inline info_t *infos_slot(info_table_t *t, uint64_t id) {
    int64_t i = (int64_t)(id & (uint64_t)t->mask);
    while (t->slots[i].used && t->slots[i].id != id) i = (i + 1) & t->mask;
    return &t->slots[i];
}

static int seens_init(seen_table_t *t, int64_t n) {
    int64_t size = table_size_for(n);
    t->slots = calloc((size_t)size, sizeof(seen_t));
    if (t->slots == NULL) return -1;
    t->mask = size - 1;
    t->n = 0;
    return 0;
}

static inline seen_t *seens_slot(seen_table_t *t, uint64_t id) {
    int64_t i = (int64_t)(id & (uint64_t)t->mask);
    while (t->slots[i].used && t->slots[i].id != id) i = (i + 1) & t->mask;
    return &t->slots[i];
}

/* KeyStats._keep_first_seen's step: `at` for id unless an earlier offset is there (the earliest
 * wins, an equal one keeps the first). 0, -1 when out of memory. */
static int seens_keep(seen_table_t *t, uint64_t id, const seen_at_t *at) {
    if (2 * (t->n + 1) > t->mask + 1) {
        seen_table_t bigger;
        if (seens_init(&bigger, 2 * (t->mask + 1)) < 0) return -1;
        for (int64_t i = 0; i <= t->mask; i++) {
            if (t->slots[i].used) {
                *seens_slot(&bigger, t->slots[i].id) = t->slots[i];
                bigger.n++;
            }
        }
        free(t->slots);
        *t = bigger;
    }
    seen_t *s = seens_slot(t, id);
    if (!s->used) {
        s->used = 1;
        s->id = id;
        s->at = *at;
        t->n++;
    } else if (at->offset < s->at.offset) {
        s->at = *at;
    }
    return 0;
}

static void infos_free(info_table_t *t) {
    if (t->slots == NULL) return;
    for (int64_t i = 0; i <= t->mask; i++) Py_CLEAR(t->slots[i].key);
    free(t->slots);
    t->slots = NULL;
}

/* Insert (stealing `key`, which may be NULL); an id already there keeps its first value. */
static int infos_put(info_table_t *t, uint64_t id, PyObject *key) {
    if (2 * (t->n + 1) > t->mask + 1) {
        info_table_t bigger;
        if (infos_init(&bigger, 2 * (t->mask + 1)) < 0) {
            Py_XDECREF(key);
            return -1;
        }
        for (int64_t i = 0; i <= t->mask; i++) {
            if (t->slots[i].used) {
                *infos_slot(&bigger, t->slots[i].id) = t->slots[i];
                bigger.n++;
            }
        }
        free(t->slots);
        *t = bigger;
    }
    info_t *s = infos_slot(t, id);
    if (s->used) {
        Py_XDECREF(key);
        return 0;
    }
    s->used = 1;
    s->id = id;
    s->key = key;
    t->n++;
    return 0;
}

/* ----------------------------------------------------------------------------------------------
 * The KeyFold object. */

/* The timestamps of a batch's records, as iter_records gives them: baseTimestamp + timestampDelta,
 * or the batch's maxTimestamp for every record of a LogAppendTime batch. */
typedef struct {
    int64_t base, log_append;
    int is_log_append;
} batch_times_t;

/* The records of one (decompressed) batch handed over in pieces, added as they complete: a record
 * cut by a piece's end is carried (its head copied to `carry`, completed from the next piece(s) by
 * exactly the bytes it lacks), so memory is one record, never the batch. The caller has already
 * checked that the first `left` records read cleanly (the scan's RecordFold over the same stream):
 * a record this reader refuses among them is a disagreement (`stopped`: never seen), and the caller
 * reads the rest in Python from that record (its index and stream position). */
typedef struct {
    int active, stopped;
    int64_t left, added, first, last, base_offset;
    batch_times_t times;
    int64_t fed;                     /* bytes fed: the stream position of the next piece's first byte */
    int64_t next_at;                 /* the stream position of the next record to add */
    int64_t limit;                   /* records_feed's: add no more than this many (the check's count so far) */
    unsigned char *carry;
    int64_t carry_len, carry_cap;
    unsigned char *kept;             /* stopped: the refused record's bytes, as many as iter_records reads of it */
    int64_t kept_len, kept_cap;
} records_stream_t;
typedef struct {
    PyObject_HEAD
    PyObject *info_factory;
    int precision;
    int64_t capacity, sample_size, buffer_keys, buffer_max_bytes;
    int64_t records, null_keys, empty_keys, key_bytes, record_bytes, max_key_bytes;
    int64_t histogram[SIZE_BUCKETS];
    uint8_t *registers;
    counter_table_t buffer;
    unsigned char *arena; /* bytes of the pending keys */
    int64_t arena_len, arena_cap, pending_bytes;
    entry_t *heavy;
    int64_t heavy_n, decrement;
    entry_t *sample; /* sorted by id */
    int64_t sample_n;
    info_table_t info;
    seen_table_t first_seen;
    /* one batch's records fed in pieces (records_begin / records_feed / records_end) */
    records_stream_t stream;
    /* the walk's read window */
    unsigned char *win;
    int64_t win_cap;
} KeyFold;

/* The pending key bytes at `at` (an empty key may sit in a still unallocated arena). */
static inline const char *arena_at(KeyFold *f, int64_t at) { return f->arena ? (const char *)f->arena + at : ""; }

static int sample_add(KeyFold *f, uint64_t id, int64_t nbytes) {
    entry_t *s = f->sample;
    int64_t n = f->sample_n;
    if (n == f->sample_size && id > s[n - 1].id) return 0; /* above the sample's threshold */
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (s[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    if (lo < n && s[lo].id == id) {
        s[lo].count += 1;
        s[lo].bytes += nbytes;
        return 0;
    }
    /* insert at lo; the array holds sample_size + 1 entries, the largest drops when over */
    memmove(&s[lo + 1], &s[lo], (size_t)(n - lo) * sizeof(entry_t));
    s[lo].id = id;
    s[lo].count = 1;
    s[lo].bytes = nbytes;
    f->sample_n = n + 1 > f->sample_size ? f->sample_size : n + 1;
    return 0;
}

static int cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static inline int kept_has(const uint64_t *ids, const uint8_t *used, int64_t mask, uint64_t id) {
    int64_t i = (int64_t)(id & (uint64_t)mask);
    while (used[i]) {
        if (ids[i] == id) return 1;
        i = (i + 1) & mask;
    }
    return 0;
}

static inline void kept_put(uint64_t *ids, uint8_t *used, int64_t mask, uint64_t id, int64_t *n) {
    int64_t i = (int64_t)(id & (uint64_t)mask);
    while (used[i]) {
        if (ids[i] == id) return;
        i = (i + 1) & mask;
    }
    used[i] = 1;
    ids[i] = id;
    (*n)++;
}

/* KeyStats._fold: the buffer into the heavy hitters (merge_counts), KeyInfo sources for the kept
 * pending ids, the info set trimmed to the kept ids when larger. 0, or -1 with an exception set. */
static int fold_buffer(KeyFold *f) {
    counter_table_t *b = &f->buffer;
    /* merge_counts: the heavy hitters' counters added into the buffer's table (same sums) */
    for (int64_t i = 0; i < f->heavy_n; i++) {
        if (2 * (b->n + 1) > b->mask + 1 && counters_grow(b) < 0) goto nomem;
        counter_t *s = counters_slot(b, f->heavy[i].id);
        if (s->used) {
            s->count += f->heavy[i].count;
            s->bytes += f->heavy[i].bytes;
        } else {
            s->used = 1;
            s->id = f->heavy[i].id;
            s->count = f->heavy[i].count;
            s->bytes = f->heavy[i].bytes;
            s->key_at = -1;
            s->first = FIRST_NONE;
            b->n++;
        }
    }
    int64_t cut = 0;
    int cutting = b->n > f->capacity;
    if (cutting) {
        int64_t *counts = malloc((size_t)b->n * sizeof(int64_t));
        if (counts == NULL) goto nomem;
        int64_t k = 0;
        for (int64_t i = 0; i <= b->mask; i++)
            if (b->slots[i].used) counts[k++] = b->slots[i].count;
        qsort(counts, (size_t)k, sizeof(int64_t), cmp_desc);
        cut = counts[f->capacity];
        free(counts);
        f->decrement += cut;
    }
    entry_t *heavy = malloc((size_t)(b->n > 0 ? b->n : 1) * sizeof(entry_t));
    if (heavy == NULL) goto nomem;
    int64_t hn = 0;
    for (int64_t i = 0; i <= b->mask; i++) {
        counter_t *s = &b->slots[i];
        if (s->used && (!cutting || s->count > cut)) {
            heavy[hn].id = s->id;
            heavy[hn].count = s->count - cut;
            heavy[hn].bytes = s->bytes;
            hn++;
        }
    }
    free(f->heavy);
    f->heavy = heavy;
    f->heavy_n = hn;
    /* kept = heavy ids | sample ids */
    int64_t kmask = table_size_for(hn + f->sample_n) - 1, kn = 0;
    uint64_t *kids = malloc((size_t)(kmask + 1) * sizeof(uint64_t));
    uint8_t *kused = calloc((size_t)(kmask + 1), 1);
    if (kids == NULL || kused == NULL) {
        free(kids);
        free(kused);
        goto nomem;
    }
    for (int64_t i = 0; i < hn; i++) kept_put(kids, kused, kmask, heavy[i].id, &kn);
    for (int64_t i = 0; i < f->sample_n; i++) kept_put(kids, kused, kmask, f->sample[i].id, &kn);
    int rc = 0;
    for (int64_t i = 0; i <= b->mask && rc == 0; i++) {
        counter_t *s = &b->slots[i];
        if (s->used && s->key_at >= 0 && kept_has(kids, kused, kmask, s->id)) {
            PyObject *key = PyBytes_FromStringAndSize(arena_at(f, s->key_at), (Py_ssize_t)s->key_len);
            PyObject *info = key == NULL ? NULL : PyObject_CallOneArg(f->info_factory, key);
            Py_XDECREF(key);
            rc = info == NULL ? -1 : infos_put(&f->info, s->id, info);
        }
    }
    if (rc == 0 && f->info.n > kn) { /* the info set trimmed to the kept ids */
        info_table_t trimmed;
        if (infos_init(&trimmed, kn) < 0) {
            rc = -1;
            PyErr_NoMemory();
        } else {
            for (int64_t i = 0; i <= f->info.mask; i++) {
                info_t *s = &f->info.slots[i];
                if (s->used && kept_has(kids, kused, kmask, s->id)) {
                    *infos_slot(&trimmed, s->id) = *s;
                    trimmed.n++;
                    s->key = NULL;
                }
            }
            infos_free(&f->info);
            f->info = trimmed;
        }
    }
    if (rc == 0) { /* _keep_first_seen(_first_pending, kept): the kept ids' first records */
        seen_table_t seen;
        if (seens_init(&seen, kn) < 0) {
            rc = -1;
        } else {
            seen_table_t *old = &f->first_seen;
            for (int64_t i = 0; i <= old->mask && rc == 0; i++)
                if (old->slots[i].used && kept_has(kids, kused, kmask, old->slots[i].id))
                    rc = seens_keep(&seen, old->slots[i].id, &old->slots[i].at);
            for (int64_t i = 0; i <= b->mask && rc == 0; i++) {
                counter_t *s = &b->slots[i];
                if (s->used && s->first != FIRST_NONE && kept_has(kids, kused, kmask, s->id)) {
                    seen_at_t at = first_of(s);
                    rc = seens_keep(&seen, s->id, &at);
                }
            }
            if (rc == 0) {
                free(old->slots);
                *old = seen;
            } else {
                free(seen.slots);
            }
        }
        if (rc < 0) PyErr_NoMemory();
    }
    free(kids);
    free(kused);
    memset(b->slots, 0, (size_t)(b->mask + 1) * sizeof(counter_t));
    b->n = 0;
    f->arena_len = 0;
    f->pending_bytes = 0;
    return rc;
nomem:
    PyErr_NoMemory();
    return -1;
}

static inline int first_seen_has(KeyFold *f, uint64_t id) {
    seen_table_t *t = &f->first_seen;
    int64_t i = (int64_t)(id & (uint64_t)t->mask);
    while (t->slots[i].used) {
        if (t->slots[i].id == id) return 1;
        i = (i + 1) & t->mask;
    }
    return 0;
}

static inline int info_has(KeyFold *f, uint64_t id) {
    info_table_t *t = &f->info;
    int64_t i = (int64_t)(id & (uint64_t)t->mask);
    while (t->slots[i].used) {
        if (t->slots[i].id == id) return 1;
        i = (i + 1) & t->mask;
    }
    return 0;
}

/* A pending key's bytes into the arena; -1 when out of memory. */
static int arena_put(KeyFold *f, const unsigned char *key, int64_t size, int64_t *at) {
    if (size == 0) {
        *at = f->arena_len;
        return 0;
    }
    if (f->arena_len + size > f->arena_cap) {
        int64_t cap = f->arena_cap ? f->arena_cap : 64 * 1024;
        while (cap < f->arena_len + size) cap *= 2;
        unsigned char *grown = realloc(f->arena, (size_t)cap);
        if (grown == NULL) return -1;
        f->arena = grown;
        f->arena_cap = cap;
    }
    memcpy(f->arena + f->arena_len, key, (size_t)size);
    *at = f->arena_len;
    f->arena_len += size;
    return 0;
}

/* KeyStats.add(None, value_size) */
static inline void add_null(KeyFold *f, int64_t value_size) {
    f->records++;
    f->null_keys++;
    f->record_bytes += value_size > 0 ? value_size : 0;
}

/* KeyStats.add(key, value_size, offset, timestamp_ms) for a key of `size` bytes; `at` NULL: no
 * offset given. 0, or -1 with an exception set. */
static int add_key(KeyFold *f, const unsigned char *key, int64_t size, int64_t value_size, const seen_at_t *at) {
    int64_t nbytes = (value_size > 0 ? value_size : 0) + size;
    f->records++;
    f->record_bytes += nbytes;
    f->key_bytes += size;
    int bucket = size == 0 ? 0 : 64 - __builtin_clzll((uint64_t)size);
    f->histogram[bucket < SIZE_BUCKETS ? bucket : SIZE_BUCKETS - 1]++;
    if (size > f->max_key_bytes) f->max_key_bytes = size;
    if (size == 0) f->empty_keys++;
    uint64_t id = key_id(key, size);
    int rest_bits = ID_BITS - f->precision;
    uint64_t rest = id & ((1ULL << rest_bits) - 1);
    int rank = rest_bits - (rest ? 64 - __builtin_clzll(rest) : 0) + 1;
    uint64_t index = id >> rest_bits;
    if (rank > f->registers[index]) f->registers[index] = (uint8_t)rank;
    counter_table_t *b = &f->buffer;
    counter_t *s = counters_slot(b, id);
    if (!s->used) {
        s->used = 1;
        s->id = id;
        s->count = 1;
        s->bytes = nbytes;
        s->key_at = -1;
        s->key_len = 0;
        s->first = FIRST_NONE;
        b->n++;
        if (at != NULL && !first_seen_has(f, id)) set_first(s, at);
        if (!info_has(f, id)) {
            if (arena_put(f, key, size, &s->key_at) < 0) {
                PyErr_NoMemory();
                return -1;
            }
            s->key_len = size;
            f->pending_bytes += size;
        }
        if (2 * (b->n + 1) > b->mask + 1 && counters_grow(b) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    } else {
        s->count += 1;
        s->bytes += nbytes;
    }
    sample_add(f, id, nbytes);
    if (b->n > f->buffer_keys || f->pending_bytes > f->buffer_max_bytes) return fold_buffer(f);
    return 0;
}

/* ----------------------------------------------------------------------------------------------
 * Records of one v2 batch, read as record_batch.iter_records reads them. */

/* One record's fields that the fold takes: key position (-1: null key), key size, value size,
 * offset, timestamp. */
typedef struct {
    int64_t key_at, key_size, value_size, offset, ts;
} record_t;

/* The record whose body is d[pos, body_end) (after its length varint), read with iter_records'
 * checks: 1 and *r filled, or 0 (iter_records would raise for it). */
static int parse_one(const unsigned char *d, int64_t pos, int64_t body_end, int64_t base_offset,
                     const batch_times_t *times, record_t *r) {
    int64_t ts_delta, off_delta, key_size, value_size, nheaders;
    pos += 1; /* attributes */
    if (!read_varlong(d, &pos, body_end, &ts_delta)) return 0;
    if (!read_varint(d, &pos, body_end, &off_delta)) return 0;
    if (!read_varint(d, &pos, body_end, &key_size)) return 0;
    int64_t key_at = pos;
    if (key_size > 0) {
        if (key_size > body_end - pos) return 0; /* the next varint would run past the record */
        pos += key_size;
    }
    if (!read_varint(d, &pos, body_end, &value_size)) return 0;
    if (value_size > 0) {
        if (value_size > body_end - pos) return 0;
        pos += value_size;
    }
    if (!read_varint(d, &pos, body_end, &nheaders)) return 0;
    if (nheaders < 0) return 0;
    for (int64_t h = 0; h < nheaders; h++) {
        int64_t hk, hv;
        if (!read_varint(d, &pos, body_end, &hk)) return 0;
        if (hk < 0 || hk > body_end - pos) return 0;
        pos += hk;
        if (!read_varint(d, &pos, body_end, &hv)) return 0;
        if (hv > 0) {
            if (hv > body_end - pos) return 0;
            pos += hv;
        }
    }
    if (pos != body_end) return 0;
    r->key_at = key_size >= 0 ? key_at : -1;
    r->key_size = key_size;
    r->value_size = value_size;
    r->offset = wrap_add(base_offset, off_delta);
    r->ts = times->is_log_append ? times->log_append : wrap_add(times->base, ts_delta);
    return 1;
}

/* The record at d[*pos, end): its length varint and body (1, *pos past it, *r filled), or 0. */
static inline int next_record(const unsigned char *d, int64_t *pos, int64_t end, int64_t base_offset,
                              const batch_times_t *times, record_t *r) {
    int64_t length;
    if (!read_varint(d, pos, end, &length)) return 0;
    if (length < 0 || length > end - *pos) return 0;
    int64_t body = *pos;
    *pos = body + length;
    return parse_one(d, body, body + length, base_offset, times, r);
}

/* Add one parsed record; 0, or -1 with an exception set. */
static inline int add_record(KeyFold *f, const unsigned char *d, const record_t *r) {
    if (r->key_at < 0) {
        add_null(f, r->value_size);
        return 0;
    }
    seen_at_t at = {r->offset, r->ts, 0};
    return add_key(f, d + r->key_at, r->key_size, r->value_size, &at);
}

/* Do the `count` records in d[start, end) read cleanly (every one, and no byte after the last)? 1
 * or 0 (the Python path must read the batch: it would raise or note something). Nothing is kept:
 * add_checked then reads them again to add them, so no array of the records' fields is ever made
 * (38 million records of a batch at the decompression cap would take 1.5 GB). */
static int records_read_cleanly(const unsigned char *d, int64_t start, int64_t end, int64_t count,
                                int64_t base_offset, const batch_times_t *times) {
    if (count < 0 || count > end - start) return 0; /* every record takes >= 1 byte */
    int64_t pos = start;
    record_t r;
    for (int64_t i = 0; i < count; i++)
        if (!next_record(d, &pos, end, base_offset, times, &r)) return 0;
    return pos == end;
}

/* Add the `count` records of d[start, end) that records_read_cleanly accepted; their first and last
 * offsets into *first, *last (count > 0). 0, or -1 with an exception set. */
static int add_checked(KeyFold *f, const unsigned char *d, int64_t start, int64_t end, int64_t count,
                       int64_t base_offset, const batch_times_t *times, int64_t *first, int64_t *last) {
    int64_t pos = start;
    record_t r = {0};
    for (int64_t i = 0; i < count; i++) {
        next_record(d, &pos, end, base_offset, times, &r); /* (read cleanly before) */
        if (i == 0) *first = r.offset;
        *last = r.offset;
        if (add_record(f, d, &r) < 0) return -1;
    }
    return 0;
}

/* ----------------------------------------------------------------------------------------------
 * Python methods. */
static int KeyFold_init(KeyFold *f, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"precision", "capacity", "sample_size", "buffer_keys", "buffer_max_bytes", "info_factory",
                             NULL};
    int precision;
    long long capacity, sample_size, buffer_keys, buffer_max_bytes;
    PyObject *factory;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iLLLLO", kwlist, &precision, &capacity, &sample_size, &buffer_keys,
                                     &buffer_max_bytes, &factory))
        return -1;
    if (!PyCallable_Check(factory)) {
        PyErr_SetString(PyExc_TypeError, "KeyFold: info_factory must be callable");
        return -1;
    }
    if (precision < 4 || precision > 18 || capacity < 1 || sample_size < 1 || buffer_keys < 1 || buffer_max_bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "KeyFold: precision 4..18, capacity, sample_size and buffer_keys >= 1");
        return -1;
    }
    if (f->registers != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "KeyFold: already initialised");
        return -1;
    }
    f->info_factory = Py_NewRef(factory);
    f->precision = precision;
    f->capacity = capacity;
    f->sample_size = sample_size;
    f->buffer_keys = buffer_keys;
    f->buffer_max_bytes = buffer_max_bytes;
    f->registers = calloc((size_t)1 << precision, 1);
    f->sample = malloc((size_t)(sample_size + 1) * sizeof(entry_t));
    if (f->registers == NULL || f->sample == NULL || counters_init(&f->buffer, buffer_keys + capacity + 2) < 0 ||
        infos_init(&f->info, capacity + sample_size) < 0 || seens_init(&f->first_seen, capacity + sample_size) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void KeyFold_dealloc(KeyFold *f) {
    Py_XDECREF(f->info_factory);
    free(f->registers);
    free(f->buffer.slots);
    free(f->arena);
    free(f->heavy);
    free(f->sample);
    infos_free(&f->info);
    free(f->first_seen.slots);
    free(f->stream.carry);
    free(f->stream.kept);
    free(f->win);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static int check_ready(KeyFold *f) {
    if (f->registers == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "KeyFold: not initialised");
        return -1;
    }
    return 0;
}

/* An int or None (-> *none = 1); 0, -1 with an exception set. */
static int int64_or_none(PyObject *o, int64_t *out, int *none) {
    *none = o == Py_None;
    *out = 0;
    if (*none) return 0;
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

static PyObject *KeyFold_add(KeyFold *f, PyObject *args) {
    PyObject *key, *offset = Py_None, *timestamp = Py_None;
    long long value_size;
    if (!PyArg_ParseTuple(args, "OL|OO", &key, &value_size, &offset, &timestamp) || check_ready(f) < 0) return NULL;
    seen_at_t at;
    int no_offset;
    if (int64_or_none(offset, &at.offset, &no_offset) < 0 || int64_or_none(timestamp, &at.ts, &at.ts_none) < 0)
        return NULL;
    if (key == Py_None) {
        add_null(f, value_size);
        Py_RETURN_NONE;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(key, &view, PyBUF_SIMPLE) < 0) return NULL;
    int rc = add_key(f, view.buf, view.len, value_size, no_offset ? NULL : &at);
    PyBuffer_Release(&view);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *offsets_result(int64_t count, int64_t first, int64_t last) {
    if (count == 0) return Py_BuildValue("(nOO)", (Py_ssize_t)0, Py_None, Py_None);
    return Py_BuildValue("(nLL)", (Py_ssize_t)count, (long long)first, (long long)last);
}

static PyObject *KeyFold_add_records(KeyFold *f, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start;
    long long count, base_offset, base_timestamp;
    PyObject *log_append_timestamp;
    if (!PyArg_ParseTuple(args, "y*nLLLO", &view, &start, &count, &base_offset, &base_timestamp,
                          &log_append_timestamp))
        return NULL;
    PyObject *out = NULL;
    batch_times_t times = {base_timestamp, 0, 0};
    int not_log_append;
    if (check_ready(f) < 0 || int64_or_none(log_append_timestamp, &times.log_append, &not_log_append) < 0) goto done;
    times.is_log_append = !not_log_append;
    if (start < 0 || start > view.len) {
        PyErr_Format(PyExc_ValueError, "start = %zd, expected 0..%zd", start, view.len);
        goto done;
    }
    if (!records_read_cleanly(view.buf, start, view.len, count, base_offset, &times)) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    int64_t first = 0, last = 0;
    if (add_checked(f, view.buf, start, view.len, count, base_offset, &times, &first, &last) == 0)
        out = offsets_result(count, first, last);
done:
    PyBuffer_Release(&view);
    return out;
}

/* add_legacy(data, count, base, relative, log_append_timestamp | None) -> (records, first_offset,
 * last_offset): the inner messages of one legacy compressed wrapper, as legacy.iter_records gives
 * them to the Python loop (KeyStats.add(key, value_size, offset, timestamp)): data is the set
 * _cwalk.legacy_frames counted `count` well-formed messages in (legacy.walk_inner), offsets plus
 * `base` when `relative` (a magic 1 wrapper), timestamps -1 for magic 0, the wrapper's
 * LogAppendTime when given, else the message's own. A wrapper of 26-byte messages at the 256 MiB cap
 * is 10 million records: one Python call each was ~35 s. */
static PyObject *KeyFold_add_legacy(KeyFold *f, PyObject *args) {
    Py_buffer view;
    long long count;
    unsigned long long base;
    int relative;
    PyObject *log_append_timestamp;
    if (!PyArg_ParseTuple(args, "y*LKpO", &view, &count, &base, &relative, &log_append_timestamp)) return NULL;
    PyObject *out = NULL;
    int64_t log_append = 0;
    int not_log_append;
    if (check_ready(f) < 0 || int64_or_none(log_append_timestamp, &log_append, &not_log_append) < 0) goto done;
    const unsigned char *b = view.buf;
    int64_t n = view.len, p = 0, first = 0, last = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t step = n - p >= LEGACY_LOG_OVERHEAD ? legacy_inner_size(b, p, n) : -1;
        if (step <= 0) {   /* not the set legacy_frames counted */
            PyErr_SetString(PyExc_ValueError, "add_legacy: fewer well-formed inner messages than count");
            goto done;
        }
        unsigned char magic = b[p + LEGACY_MAGIC_AT];
        seen_at_t at = {.offset = be64(b + p), .ts_none = 0};
        if (relative) at.offset = (int64_t)((uint64_t)at.offset + base);   /* Java long arithmetic */
        at.ts = magic == 0 ? -1 : !not_log_append ? log_append : be64(b + p + LEGACY_TIMESTAMP_AT);
        int64_t q = p + LEGACY_KEY_SIZE_AT[magic];
        int64_t key_size = be32(b + q);
        q += 4 + (key_size > 0 ? key_size : 0);
        int64_t value_size = be32(b + q);
        if (key_size < 0)
            add_null(f, value_size);
        else if (add_key(f, b + q - key_size, key_size, value_size, &at) < 0)
            goto done;
        if (i == 0) first = at.offset;
        last = at.offset;
        p += step;
    }
    out = offsets_result(count, first, last);
done:
    PyBuffer_Release(&view);
    return out;
}

/* ---- records_begin / records_feed / records_end: one batch's records in pieces ---------------- */

/* The bytes the carried record still lacks: its length varint complete, exactly the rest of its
 * body; else one byte (the varint's next); -1 when the carry already shows it unreadable. */
static int64_t stream_carry_lacks(const records_stream_t *st) {
    int64_t body = 0, length;
    if (!read_varint(st->carry, &body, st->carry_len, &length)) return st->carry_len < MAX_VARINT_BYTES ? 1 : -1;
    if (length < 0) return -1;
    return body + length - st->carry_len; /* may be 0: complete */
}

/* b[0, n) into the refused record's kept bytes, as many as it still lacks: 0, -1 out of memory. */
static int keep_more(records_stream_t *st, const unsigned char *b, int64_t n) {
    return keep_record_bytes(&st->kept, &st->kept_len, &st->kept_cap, b, n);
}

/* This reader refuses the record at next_at, whose bytes so far are a[0, a_len) then b[0, b_len)
 * (the carry, then the piece; either may be empty): kept as iter_records will read them, so that
 * its error is read from that record alone. 0, -1 out of memory. */
static int stream_stop(records_stream_t *st, const unsigned char *a, int64_t a_len, const unsigned char *b,
                       int64_t b_len) {
    st->stopped = 1;
    st->kept_len = 0;
    int rc = keep_more(st, a, a_len);
    if (rc == 0) rc = keep_more(st, b, b_len);
    st->carry_len = 0;
    return rc;
}

/* Add one record read from d (a piece or the carry), the next one starting at stream position `at`;
 * 0, or -1 with an exception set. */
static int stream_add(KeyFold *f, records_stream_t *st, const unsigned char *d, const record_t *r, int64_t at) {
    if (st->added == 0) st->first = r->offset;
    st->last = r->offset;
    st->added++;
    st->left--;
    st->next_at = at;
    return add_record(f, d, r);
}

/* One piece at stream position st->fed: 0, or -1 with an exception set. */
static int stream_feed(KeyFold *f, records_stream_t *st, const unsigned char *b, int64_t n) {
    int64_t pos = 0;
    record_t r;
    while (st->carry_len > 0 && pos < n && st->left > 0 && st->added < st->limit) { /* the carried record first */
        int64_t lacks = stream_carry_lacks(st);
        if (lacks < 0) return stream_stop(st, st->carry, st->carry_len, b + pos, n - pos);
        int64_t take = lacks < n - pos ? lacks : n - pos;
        if (grow_append(&st->carry, &st->carry_len, &st->carry_cap, b + pos, take) < 0) return -1;
        pos += take;
        lacks = stream_carry_lacks(st);
        if (lacks > 0) continue; /* the varint completed, the body still short: take more */
        int64_t at = 0;
        if (lacks < 0 || !next_record(st->carry, &at, st->carry_len, st->base_offset, &st->times, &r))
            return stream_stop(st, st->carry, st->carry_len, b + pos, n - pos);
        st->carry_len = 0; /* (add_key copies what it keeps: the carry may be reused) */
        if (stream_add(f, st, st->carry, &r, st->fed + pos) < 0) return -1;
    }
    while (st->left > 0 && st->added < st->limit && pos < n) {
        int64_t body = pos, length;
        if (!read_varint(b, &body, n, &length)) {
            if (n - pos < MAX_VARINT_BYTES) break; /* cut by the piece's end: carried */
            return stream_stop(st, b + pos, n - pos, NULL, 0);
        }
        if (length < 0) return stream_stop(st, b + pos, n - pos, NULL, 0);
        if (length > n - body) break; /* carried */
        if (!parse_one(b, body, body + length, st->base_offset, &st->times, &r))
            return stream_stop(st, b + pos, body + length - pos, NULL, 0);
        pos = body + length;
        if (stream_add(f, st, b, &r, st->fed + pos) < 0) return -1;
    }
    if (st->left > 0 && pos < n && grow_append(&st->carry, &st->carry_len, &st->carry_cap, b + pos, n - pos) < 0)
        return -1;
    return 0;
}

/* records_begin(count, base_offset, base_timestamp, log_append_timestamp | None) */
static PyObject *KeyFold_records_begin(KeyFold *f, PyObject *args) {
    long long count, base_offset, base_timestamp;
    PyObject *log_append_timestamp;
    if (!PyArg_ParseTuple(args, "LLLO", &count, &base_offset, &base_timestamp, &log_append_timestamp) ||
        check_ready(f) < 0)
        return NULL;
    records_stream_t *st = &f->stream;
    int not_log_append;
    batch_times_t times = {base_timestamp, 0, 0};
    if (int64_or_none(log_append_timestamp, &times.log_append, &not_log_append) < 0) return NULL;
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "count = %lld, expected >= 0", count);
        return NULL;
    }
    times.is_log_append = !not_log_append;
    st->active = 1;
    st->stopped = 0;
    st->left = count;
    st->added = st->first = st->last = st->fed = st->next_at = 0;
    st->limit = count;
    st->base_offset = base_offset;
    st->times = times;
    st->carry_len = 0;
    Py_RETURN_NONE;
}

static int check_stream(KeyFold *f) {
    if (check_ready(f) < 0) return -1;
    if (!f->stream.active) {
        PyErr_SetString(PyExc_RuntimeError, "KeyFold: records_feed / records_end without records_begin");
        return -1;
    }
    return 0;
}

/* records_feed(piece, limit=count) -> bool: True while records are still wanted. */
static PyObject *KeyFold_records_feed(KeyFold *f, PyObject *args) {
    PyObject *piece;
    long long limit = -1;
    if (!PyArg_ParseTuple(args, "O|L", &piece, &limit) || check_stream(f) < 0) return NULL;
    records_stream_t *st = &f->stream;
    if (limit >= 0) st->limit = limit;
    Py_buffer view;
    if (PyObject_GetBuffer(piece, &view, PyBUF_SIMPLE) < 0) return NULL;
    int rc = 0;
    if (st->stopped)
        rc = keep_more(st, view.buf, view.len);
    else if (st->left > 0)
        rc = stream_feed(f, st, view.buf, view.len);
    st->fed += view.len;
    PyBuffer_Release(&view);
    if (rc < 0) {
        st->stopped = 1; /* (the fold is broken past repair anyway: the exception says why) */
        return NULL;
    }
    return PyBool_FromLong(!st->stopped && st->left > 0);
}

/* records_end() -> (added, first_offset, last_offset, next_at, fed, refused): next_at is the stream
 * position of the record after the last one added, fed the bytes fed (the stream's end), refused
 * the bytes kept of the record this reader refused (or that the stream ended in or before: the
 * carry), None when count records were added. */
static PyObject *KeyFold_records_end(KeyFold *f, PyObject *unused) {
    (void)unused;
    if (check_stream(f) < 0) return NULL;
    records_stream_t *st = &f->stream;
    st->active = 0;
    if (!st->stopped && st->left > 0 && stream_stop(st, st->carry, st->carry_len, NULL, 0) < 0) return NULL;
    st->carry_len = 0;
    if (st->carry_cap > WINDOW_BYTES) { /* a long record's carry is not kept */
        free(st->carry);
        st->carry = NULL;
        st->carry_cap = 0;
    }
    PyObject *refused = st->stopped ? PyBytes_FromStringAndSize(st->kept_len ? (const char *)st->kept : "",
                                                                (Py_ssize_t)st->kept_len)
                                    : Py_NewRef(Py_None);
    if (refused == NULL) return NULL;
    if (st->added == 0)
        return Py_BuildValue("(nOOLLN)", (Py_ssize_t)0, Py_None, Py_None, (long long)st->next_at, (long long)st->fed,
                             refused);
    return Py_BuildValue("(nLLLLN)", (Py_ssize_t)st->added, (long long)st->first, (long long)st->last,
                         (long long)st->next_at, (long long)st->fed, refused);
}

/* copy() -> a new KeyFold of the same parameters holding this one's state (state() then load()). */
static PyObject *KeyFold_state(KeyFold *f, PyObject *unused);
static PyObject *KeyFold_load(KeyFold *f, PyObject *args);

static PyObject *KeyFold_copy(KeyFold *f, PyObject *unused) {
    (void)unused;
    if (check_ready(f) < 0) return NULL;
    PyObject *state = KeyFold_state(f, NULL);
    if (state == NULL) return NULL;
    PyObject *copy = PyObject_CallFunction((PyObject *)Py_TYPE(f), "iLLLLO", f->precision, (long long)f->capacity,
                                           (long long)f->sample_size, (long long)f->buffer_keys,
                                           (long long)f->buffer_max_bytes, f->info_factory);
    PyObject *args = copy ? PyTuple_Pack(1, state) : NULL;
    PyObject *loaded = args ? KeyFold_load((KeyFold *)copy, args) : NULL;
    Py_XDECREF(args);
    Py_DECREF(state);
    if (loaded == NULL) {
        Py_XDECREF(copy);
        return NULL;
    }
    Py_DECREF(loaded);
    return copy;
}

/* swap(other): this fold and `other` exchange their whole states (a copy() taken before a batch
 * puts the fold back as it was when the batch turns out unreadable after records were added). */
static PyObject *KeyFold_swap(KeyFold *f, PyObject *other) {
    if (!PyObject_TypeCheck(other, Py_TYPE(f))) {
        PyErr_SetString(PyExc_TypeError, "KeyFold.swap: another KeyFold expected");
        return NULL;
    }
    KeyFold *g = (KeyFold *)other;
    const size_t at = offsetof(KeyFold, info_factory), n = sizeof(KeyFold) - offsetof(KeyFold, info_factory);
    unsigned char tmp[sizeof(KeyFold)];
    memcpy(tmp, (char *)f + at, n);
    memcpy((char *)f + at, (char *)g + at, n);
    memcpy((char *)g + at, tmp, n);
    Py_RETURN_NONE;
}

/* The window holds [*buf_start, *buf_end) of the file; make it hold [pos, pos + need) (need <= size - pos),
 * reading `want` bytes (at least need) at pos. 0, -1 on a read error or short read, -2 out of memory. */
static int refill(KeyFold *f, int fd, int64_t pos, int64_t need, int64_t want, int64_t size, int64_t *buf_start,
                  int64_t *buf_end) {
    if (want < need) want = need;
    if (want > size - pos) want = size - pos;
    if (want > f->win_cap) {
        unsigned char *grown = realloc(f->win, (size_t)want);
        if (grown == NULL) return -2;
        f->win = grown;
        f->win_cap = want;
    }
    if (read_window(fd, f->win, want, pos) < 0) return -1;
    *buf_start = pos;
    *buf_end = pos + want;
    return 0;
}

/* walk(fd, start, size, cut) -> (stop, scanned_bytes, records, first_offset, last_offset, packed) */
static PyObject *KeyFold_walk(KeyFold *f, PyObject *args) {
    int fd;
    long long start, size, cut;
    if (!PyArg_ParseTuple(args, "iLLL", &fd, &start, &size, &cut) || check_ready(f) < 0) return NULL;
    if (start < 0 || start > size) {
        PyErr_Format(PyExc_ValueError, "start = %lld, expected 0..%lld", start, size);
        return NULL;
    }
    int64_t pos = start, buf_start = start, buf_end = start, scanned = 0, records = 0;
    int64_t first_offset = 0, last_offset = 0;
    int64_t window = FIRST_WINDOW_BYTES; /* small first: the caller may come back after one batch */
    PyObject *packed = NULL;
    int rc = 0;
    /* the Python walker's framing rules (log_reader._walk); anything else is handed back at pos */
    while (size - pos >= RECORD_BATCH_OVERHEAD) {
        if (pos + RECORD_BATCH_OVERHEAD > buf_end) {
            if ((rc = refill(f, fd, pos, RECORD_BATCH_OVERHEAD, window, size, &buf_start, &buf_end)) < 0) break;
            window = WINDOW_BYTES;
        }
        const unsigned char *h = f->win + (pos - buf_start);
        int32_t length = be32(h + LENGTH_OFFSET);
        if (length < MIN_BATCH_LENGTH || length > MAX_SIZE_FIELD) break;
        if (pos > size - LOG_OVERHEAD - (int64_t)length) break;
        if (h[MAGIC_OFFSET] != 2) break;
        int64_t total = LOG_OVERHEAD + (int64_t)length;
        if (pos + total <= cut) { /* wholly older than the sample */
            pos += total;
            continue;
        }
        uint16_t attrs = be16(h + ATTRIBUTES_OFFSET);
        if (attrs & CONTROL_FLAG_MASK) { /* Kafka's keys, not the producers': counted as read */
            scanned += total;
            pos += total;
            continue;
        }
        if (total > MAX_BATCH_BYTES) break;
        if (pos + total > buf_end) {
            if ((rc = refill(f, fd, pos, total, window, size, &buf_start, &buf_end)) < 0) break;
            window = WINDOW_BYTES;
            h = f->win;
        }
        batch_times_t times = {be64(h + BASE_TIMESTAMP_OFFSET), be64(h + MAX_TIMESTAMP_OFFSET),
                               (attrs & TIMESTAMP_TYPE_MASK) != 0};
        if (attrs & CODEC_MASK) { /* its records compressed: handed back packed, for Python to decompress */
            PyObject *log_append = times.is_log_append ? PyLong_FromLongLong(times.log_append) : Py_NewRef(Py_None);
            if (log_append != NULL)
                packed = Py_BuildValue("(LiLLLy#LN)", (long long)pos, (int)(attrs & CODEC_MASK),
                                       (long long)be32(h + RECORDS_COUNT_OFFSET),
                                       (long long)be64(h + BASE_OFFSET_OFFSET), (long long)total, (const char *)h + RECORD_BATCH_OVERHEAD,
                                       (Py_ssize_t)(total - RECORD_BATCH_OVERHEAD), (long long)times.base, log_append);
            if (packed == NULL) rc = -3;
            break;
        }
        int64_t n = be32(h + RECORDS_COUNT_OFFSET), batch_base = be64(h + BASE_OFFSET_OFFSET);
        if (!records_read_cleanly(h, RECORD_BATCH_OVERHEAD, total, n, batch_base, &times)) break;
        int64_t first = 0, last = 0;
        if (add_checked(f, h, RECORD_BATCH_OVERHEAD, total, n, batch_base, &times, &first, &last) < 0) {
            rc = -3;
            break;
        }
        if (n > 0) {
            if (records == 0) first_offset = first;
            last_offset = last;
        }
        records += n;
        scanned += total;
        pos += total;
    }
    if (f->win_cap > WINDOW_BYTES) { /* a large batch's window is not kept */
        free(f->win);
        f->win = NULL;
        f->win_cap = 0;
    }
    if (rc == -2) PyErr_NoMemory();
    if (rc <= -2) return NULL;
    PyObject *out;
    if (records == 0)
        out = Py_BuildValue("(LLLOOO)", (long long)pos, (long long)scanned, 0LL, Py_None, Py_None,
                            packed ? packed : Py_None);
    else
        out = Py_BuildValue("(LLLLLO)", (long long)pos, (long long)scanned, (long long)records,
                            (long long)first_offset, (long long)last_offset, packed ? packed : Py_None);
    Py_XDECREF(packed);
    return out;
}

/* ----------------------------------------------------------------------------------------------
 * The state, as a tuple KeyStats reads back (and loads: load(state())). */
static PyObject *entries_list(const entry_t *e, int64_t n) {
    PyObject *out = PyList_New((Py_ssize_t)n);
    if (out == NULL) return NULL;
    for (int64_t i = 0; i < n; i++) {
        PyObject *item = Py_BuildValue("(KLL)", (unsigned long long)e[i].id, (long long)e[i].count, (long long)e[i].bytes);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    return out;
}

/* (id, offset, timestamp | None) appended to list; 0, -1 with an exception set. */
static int append_seen(PyObject *list, uint64_t id, const seen_at_t *at) {
    PyObject *ts = at->ts_none ? Py_NewRef(Py_None) : PyLong_FromLongLong(at->ts);
    PyObject *item = ts == NULL ? NULL : Py_BuildValue("(KLN)", (unsigned long long)id, (long long)at->offset, ts);
    if (item == NULL || PyList_Append(list, item) < 0) {
        Py_XDECREF(item);
        return -1;
    }
    Py_DECREF(item);
    return 0;
}

static PyObject *KeyFold_state(KeyFold *f, PyObject *unused) {
    (void)unused;
    if (check_ready(f) < 0) return NULL;
    PyObject *hist = PyList_New(SIZE_BUCKETS);
    PyObject *heavy = entries_list(f->heavy, f->heavy_n);
    PyObject *sample = entries_list(f->sample, f->sample_n);
    PyObject *info = PyList_New(0), *buffer = PyList_New(0), *pending = PyList_New(0);
    PyObject *first_seen = PyList_New(0), *first_pending = PyList_New(0);
    PyObject *out = NULL;
    if (!hist || !heavy || !sample || !info || !buffer || !pending || !first_seen || !first_pending) goto done;
    for (int64_t i = 0; i <= f->first_seen.mask; i++) {
        seen_t *s = &f->first_seen.slots[i];
        if (s->used && append_seen(first_seen, s->id, &s->at) < 0) goto done;
    }
    for (int i = 0; i < SIZE_BUCKETS; i++) {
        PyObject *v = PyLong_FromLongLong(f->histogram[i]);
        if (v == NULL) goto done;
        PyList_SET_ITEM(hist, i, v);
    }
    for (int64_t i = 0; i <= f->info.mask; i++) {
        info_t *s = &f->info.slots[i];
        if (!s->used) continue;
        PyObject *item = Py_BuildValue("(KO)", (unsigned long long)s->id, s->key);
        if (item == NULL || PyList_Append(info, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    for (int64_t i = 0; i <= f->buffer.mask; i++) {
        counter_t *s = &f->buffer.slots[i];
        if (!s->used) continue;
        PyObject *item = Py_BuildValue("(KLL)", (unsigned long long)s->id, (long long)s->count, (long long)s->bytes);
        if (item == NULL || PyList_Append(buffer, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
        if (s->key_at >= 0) {
            item = Py_BuildValue("(Ky#)", (unsigned long long)s->id, arena_at(f, s->key_at), (Py_ssize_t)s->key_len);
            if (item == NULL || PyList_Append(pending, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        }
        if (s->first != FIRST_NONE) {
            seen_at_t at = first_of(s);
            if (append_seen(first_pending, s->id, &at) < 0) goto done;
        }
    }
    out = Py_BuildValue("(LLLLLLOy#LOOOOOLOO)", (long long)f->records, (long long)f->null_keys,
                        (long long)f->empty_keys, (long long)f->key_bytes, (long long)f->record_bytes,
                        (long long)f->max_key_bytes, hist, (const char *)f->registers, (Py_ssize_t)1 << f->precision,
                        (long long)f->decrement, heavy, sample, info, buffer, pending, (long long)f->pending_bytes,
                        first_seen, first_pending);
done:
    Py_XDECREF(first_seen);
    Py_XDECREF(first_pending);
    Py_XDECREF(hist);
    Py_XDECREF(heavy);
    Py_XDECREF(sample);
    Py_XDECREF(info);
    Py_XDECREF(buffer);
    Py_XDECREF(pending);
    return out;
}

/* One (id, count, bytes) item of a state list. */
static int entry_of(PyObject *item, entry_t *e) {
    unsigned long long id;
    long long count, nbytes;
    if (!PyArg_ParseTuple(item, "KLL", &id, &count, &nbytes)) return -1;
    e->id = id;
    e->count = count;
    e->bytes = nbytes;
    return 0;
}

static int cmp_entry_id(const void *a, const void *b) {
    uint64_t x = ((const entry_t *)a)->id, y = ((const entry_t *)b)->id;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* One (id, offset, timestamp | None) item of a state list. */
static int seen_of(PyObject *item, uint64_t *id, seen_at_t *at) {
    unsigned long long ident;
    long long offset;
    PyObject *ts;
    if (!PyArg_ParseTuple(item, "KLO", &ident, &offset, &ts) || int64_or_none(ts, &at->ts, &at->ts_none) < 0) return -1;
    *id = ident;
    at->offset = offset;
    return 0;
}

/* load(state): the state of an empty KeyFold set to `state` (the tuple state() returns). */
static PyObject *KeyFold_load(KeyFold *f, PyObject *args) {
    long long records, null_keys, empty_keys, key_bytes, record_bytes, max_key_bytes, decrement, pending_bytes;
    PyObject *hist, *heavy, *sample, *info, *buffer, *pending, *first_seen, *first_pending;
    const char *registers;
    Py_ssize_t nregisters;
    if (!PyArg_ParseTuple(args, "(LLLLLLO!y#LO!O!O!O!O!LO!O!)", &records, &null_keys, &empty_keys, &key_bytes,
                          &record_bytes, &max_key_bytes, &PyList_Type, &hist, &registers, &nregisters, &decrement,
                          &PyList_Type, &heavy, &PyList_Type, &sample, &PyList_Type, &info, &PyList_Type, &buffer,
                          &PyList_Type, &pending, &pending_bytes, &PyList_Type, &first_seen, &PyList_Type,
                          &first_pending) ||
        check_ready(f) < 0)
        return NULL;
    if (f->records || f->heavy_n || f->sample_n || f->buffer.n || f->info.n || f->first_seen.n) {
        PyErr_SetString(PyExc_RuntimeError, "KeyFold.load: the fold is not empty");
        return NULL;
    }
    if (nregisters != (Py_ssize_t)1 << f->precision || PyList_GET_SIZE(hist) != SIZE_BUCKETS ||
        PyList_GET_SIZE(sample) > f->sample_size) {
        PyErr_SetString(PyExc_ValueError, "KeyFold.load: registers, histogram or sample of another shape");
        return NULL;
    }
    for (int i = 0; i < SIZE_BUCKETS; i++) {
        f->histogram[i] = PyLong_AsLongLong(PyList_GET_ITEM(hist, i));
        if (f->histogram[i] == -1 && PyErr_Occurred()) return NULL;
    }
    memcpy(f->registers, registers, (size_t)nregisters);
    Py_ssize_t hn = PyList_GET_SIZE(heavy);
    f->heavy = malloc((size_t)(hn > 0 ? hn : 1) * sizeof(entry_t));
    if (f->heavy == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < hn; i++)
        if (entry_of(PyList_GET_ITEM(heavy, i), &f->heavy[i]) < 0) return NULL;
    f->heavy_n = hn;
    Py_ssize_t sn = PyList_GET_SIZE(sample);
    for (Py_ssize_t i = 0; i < sn; i++)
        if (entry_of(PyList_GET_ITEM(sample, i), &f->sample[i]) < 0) return NULL;
    qsort(f->sample, (size_t)sn, sizeof(entry_t), cmp_entry_id);
    f->sample_n = sn;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(info); i++) {
        unsigned long long id;
        PyObject *key;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(info, i), "KO", &id, &key)) return NULL;
        if (infos_put(&f->info, id, Py_NewRef(key)) < 0) return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(buffer); i++) {
        entry_t e;
        if (entry_of(PyList_GET_ITEM(buffer, i), &e) < 0) return NULL;
        if (2 * (f->buffer.n + 1) > f->buffer.mask + 1 && counters_grow(&f->buffer) < 0) return PyErr_NoMemory();
        counter_t *s = counters_slot(&f->buffer, e.id);
        if (!s->used) f->buffer.n++;
        *s = (counter_t){.id = e.id, .count = e.count, .bytes = e.bytes, .key_at = -1, .used = 1};
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pending); i++) {
        unsigned long long id;
        const char *key;
        Py_ssize_t n;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(pending, i), "Ky#", &id, &key, &n)) return NULL;
        counter_t *s = counters_slot(&f->buffer, id);
        if (!s->used) {
            PyErr_SetString(PyExc_ValueError, "KeyFold.load: a pending key outside the buffer");
            return NULL;
        }
        if (arena_put(f, (const unsigned char *)key, n, &s->key_at) < 0) return PyErr_NoMemory();
        s->key_len = n;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(first_seen); i++) {
        uint64_t id;
        seen_at_t at;
        if (seen_of(PyList_GET_ITEM(first_seen, i), &id, &at) < 0) return NULL;
        if (seens_keep(&f->first_seen, id, &at) < 0) return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(first_pending); i++) {
        uint64_t id;
        seen_at_t at;
        if (seen_of(PyList_GET_ITEM(first_pending, i), &id, &at) < 0) return NULL;
        counter_t *s = counters_slot(&f->buffer, id);
        if (!s->used) {
            PyErr_SetString(PyExc_ValueError, "KeyFold.load: a first-seen pending id outside the buffer");
            return NULL;
        }
        set_first(s, &at);
    }
    f->records = records;
    f->null_keys = null_keys;
    f->empty_keys = empty_keys;
    f->key_bytes = key_bytes;
    f->record_bytes = record_bytes;
    f->max_key_bytes = max_key_bytes;
    f->decrement = decrement;
    f->pending_bytes = pending_bytes;
    Py_RETURN_NONE;
}

static PyObject *KeyFold_key_id(PyObject *cls, PyObject *arg) {
    (void)cls;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint64_t id = key_id(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(id);
}

static PyMethodDef KeyFold_methods[] = {
    {"add", (PyCFunction)KeyFold_add, METH_VARARGS,
     "add(key | None, value_size, offset=None, timestamp_ms=None): one record (KeyStats.add)."},
    {"add_legacy", (PyCFunction)KeyFold_add_legacy, METH_VARARGS,
     "add_legacy(data, count, base, relative, log_append_timestamp | None) -> (records, first_offset, last_offset): "
     "the count inner messages of one legacy compressed wrapper (legacy.walk_inner's set), as legacy.iter_records "
     "gives them (offsets + base when relative; timestamps -1 for magic 0, else log_append_timestamp when not None, "
     "else the message's)."},
    {"add_records", (PyCFunction)KeyFold_add_records, METH_VARARGS,
     "add_records(data, start, count, base_offset, base_timestamp, log_append_timestamp | None) -> (records, "
     "first_offset, last_offset) | None: the count records of one v2 batch laid out in data from start to its end "
     "(timestamps: base_timestamp + timestampDelta, or log_append_timestamp for every record when not None: a "
     "LogAppendTime batch's maxTimestamp); None (nothing added) when record_batch.iter_records would raise on them."},
    {"records_begin", (PyCFunction)KeyFold_records_begin, METH_VARARGS,
     "records_begin(count, base_offset, base_timestamp, log_append_timestamp | None): the records of one v2 batch "
     "follow in pieces (records_feed), as add_records takes them whole; the caller has checked (or checks as "
     "the pieces come: limit) that the records added read cleanly (the scan's RecordFold over the same stream)."},
    {"records_feed", (PyCFunction)KeyFold_records_feed, METH_VARARGS,
     "records_feed(piece, limit=count) -> bool: the next bytes of the records, each record added once complete "
     "(one cut by the piece's end is carried), no more than limit records in all; False once count records are "
     "added or this reader refused one."},
    {"records_end", (PyCFunction)KeyFold_records_end, METH_NOARGS,
     "records_end() -> (added, first_offset, last_offset, next_at, fed, refused): next_at is the stream position "
     "of the record after the last one added, fed the bytes fed; refused None when count records were added, "
     "else the bytes of the record refused (or that the stream ended in), as many as iter_records reads of it."},
    {"copy", (PyCFunction)KeyFold_copy, METH_NOARGS, "copy() -> a new KeyFold holding this one's state."},
    {"swap", (PyCFunction)KeyFold_swap, METH_O, "swap(other): exchange the whole states of two KeyFolds."},
    {"walk", (PyCFunction)KeyFold_walk, METH_VARARGS,
     "walk(fd, start, size, cut) -> (stop, scanned_bytes, records, first_offset, last_offset, packed): the plain "
     "v2 batches of a .log from byte start (batches ending at or before cut skipped, control batches counted as "
     "scanned); stop is the first entry the Python path must read (== size at a clean end). When that entry is a "
     "well-framed compressed v2 batch, packed = (position, codec id, recordsCount, baseOffset, size, compressed "
     "records, baseTimestamp, maxTimestamp if LogAppendTime else None) to decompress and give to add_records; "
     "else None."},
    {"state", (PyCFunction)KeyFold_state, METH_NOARGS,
     "state() -> tuple: (records, null_keys, empty_keys, key_bytes, record_bytes, max_key_bytes, histogram, "
     "registers, decrement, heavy, sample, info, buffer, pending, pending_bytes, first_seen, first_pending); "
     "first_seen and first_pending: lists of (id, offset, timestamp | None)."},
    {"load", (PyCFunction)KeyFold_load, METH_VARARGS, "load(state): set an empty fold to a state() tuple."},
    {"key_id", (PyCFunction)KeyFold_key_id, METH_O | METH_STATIC, "key_id(key) -> the 64-bit BLAKE2b id of a key."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject KeyFoldType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "auditor.keys._ckeys.KeyFold",
    .tp_doc = "KeyFold(precision, capacity, sample_size, buffer_keys, buffer_max_bytes, info_factory): KeyStats's state "
               "in C; info_factory(key bytes) makes the KeyInfo of a key that is kept.",
    .tp_basicsize = sizeof(KeyFold),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)KeyFold_init,
    .tp_dealloc = (destructor)KeyFold_dealloc,
    .tp_methods = KeyFold_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_ckeys", .m_size = -1};

PyMODINIT_FUNC PyInit__ckeys(void) {
    if (PyType_Ready(&KeyFoldType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "KeyFold", (PyObject *)&KeyFoldType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
