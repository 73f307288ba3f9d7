/*
 * _cwalk: the happy path of the 'headers' depth in C.
 *
 * walk_v2(fd, start, size) walks consecutive v2 record batch headers of one .log file from byte
 * `start`, reading windows with pread (never mmap: a segment truncated by the broker under a
 * mapping would SIGBUS the process; never a write), and folds them into per-segment totals,
 * with the position of the last batch folded (an incremental scan checks that batch's header
 * next run before continuing after it: auditor/scan/resume.py).
 *
 * It stops, and returns the position, at the first entry that is not a well-formed v2 batch
 * that fits in the file: fewer than 61 bytes left, a size field below 49 or above
 * INT32_MAX - 12, an entry running past the end, a magic other than 2, or a read error or
 * short read. The Python walker (auditor/formats/log_reader.py) then continues from that
 * position, so every stop reason, note and legacy entry is handled by the one Python
 * implementation that the conformance tests compare with DumpLogSegments. This module only
 * makes the common case fast; it decides nothing the Python walker would decide differently.
 *
 * index_ends(log, index, timeindex, base_offset) is the 'index' depth of one segment in one call:
 * lstat of the three files, the last valid entry of each index (binary search over a
 * preallocated zero tail, as auditor/formats/_fixed_index.py _read_tail), the first batch
 * header and the batches after the last offset-index entry. It returns None whenever the Python
 * path would write a note or stop early (a file missing or not regular, an index size that is
 * not a multiple of its entry, an entry out of order or with a negative relative offset, a
 * short read, the index pointing past the log, a first entry or tail that is not well-formed v2,
 * an empty .timeindex beside a non-empty .log), and scan.py then scans the segment in Python.
 *
 * fold_records(...) is the 'deep' depth's fold over the records of one v2 batch (its record bytes,
 * decompressed by the caller): record count, control markers, min / running max timestamp and the
 * largest step back in time, each with its offset, exactly as auditor/scan/segment.py folds
 * record_batch.iter_records' records (the step back in time as uint64: two int64 timestamps can be
 * 2^64 - 1 apart, and Python's ints have no bound). At the first record iter_records raises for
 * (a varint too long or past its record, a negative length, a record size that does not add up,
 * bytes after the last record, a control key under 4 bytes) the fold stops and says which record
 * and where: the Python path reads that record alone to write the note (record_batch.
 * refused_record_error), never the records before it again. A decompression bomb at the cap
 * (256 MiB of 7-byte records: 38 million) is a fraction of a second here, against minutes through
 * Python objects, and so is one whose last record is broken (263 s when Python read it again).
 *
 * Byte layouts: DefaultRecordBatch.java (the same offsets as auditor/formats/record_batch.py),
 * OffsetIndex.java and TimeIndex.java (auditor/formats/offset_index.py, time_index.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "_record_batch.h"

#define NO_TIMESTAMP (-1)

/* Window policy: small batches are read a 256 KiB window at a time (many headers per pread);
 * after a batch of LARGE_BATCH_BYTES or more only a 4 KiB probe is read at the next header, so
 * big batches cost one small pread each instead of copying their payload. */
#define CHUNK_BYTES (256 * 1024)
#define LARGE_BATCH_BYTES (16 * 1024)
#define HEADER_PROBE_BYTES 4096

typedef struct {
    int64_t stop;
    int64_t batches, records, transactional;
    int64_t first_base_offset, first_max_ts, last_offset, last_max_ts, last_pos;
    int64_t max_ts, min_first_ts;
    int has_max_ts, has_min_first_ts;
    unsigned codec_mask, timestamp_type_mask;
    int64_t *control_positions;
    Py_ssize_t controls, controls_cap;
    int out_of_memory;
} totals_t;

/* Exactly `want` bytes at `pos`, or -1 (read error, or the file shrank under us). */
static ssize_t read_window(int fd, unsigned char *buf, size_t want, int64_t pos) {
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(fd, buf + got, want - got, (off_t)(pos + (int64_t)got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* max_batches: stop after that many (0: no limit); first_window: the first pread's size. */
static void walk(int fd, int64_t pos, int64_t size, unsigned char *buf, totals_t *t, int64_t max_batches,
                 int64_t first_window) {
    int64_t buf_start = pos, buf_end = pos, last_size = 0;
    for (;;) {
        if (max_batches && t->batches >= max_batches) break;
        if (size - pos < RECORD_BATCH_OVERHEAD) break;
        if (pos + RECORD_BATCH_OVERHEAD > buf_end) {
            int64_t want = last_size < LARGE_BATCH_BYTES ? CHUNK_BYTES : HEADER_PROBE_BYTES;
            if (buf_end == buf_start && first_window) want = first_window;
            if (want > size - pos) want = size - pos;
            if (read_window(fd, buf, (size_t)want, pos) < 0) break;
            buf_start = pos;
            buf_end = pos + want;
        }
        const unsigned char *h = buf + (pos - buf_start);
        int32_t length = be32(h + LENGTH_OFFSET);
        if (length < MIN_BATCH_LENGTH || length > MAX_SIZE_FIELD) break;
        if (pos > size - LOG_OVERHEAD - (int64_t)length) break;
        if (h[MAGIC_OFFSET] != 2) break;

        int64_t base_offset = be64(h + BASE_OFFSET_OFFSET);
        unsigned attrs = be16(h + ATTRIBUTES_OFFSET);
        int64_t last = wrap_add(base_offset, be32(h + LAST_OFFSET_DELTA_OFFSET));
        int64_t base_ts = be64(h + BASE_TIMESTAMP_OFFSET);
        int64_t max_ts = be64(h + MAX_TIMESTAMP_OFFSET);
        int32_t count = be32(h + RECORDS_COUNT_OFFSET);

        if (t->batches == 0) {
            t->first_base_offset = base_offset;
            t->first_max_ts = max_ts;
        }
        t->last_offset = last;
        t->last_max_ts = max_ts;
        t->last_pos = pos;
        t->batches++;
        t->records += count;
        if (max_ts != NO_TIMESTAMP && (!t->has_max_ts || max_ts > t->max_ts)) {
            t->max_ts = max_ts;
            t->has_max_ts = 1;
        }
        /* the batch's first-record timestamp, as scan.py folds it */
        int64_t first_ts;
        if (attrs & TIMESTAMP_TYPE_MASK) first_ts = max_ts;
        else if ((attrs & DELETE_HORIZON_FLAG_MASK) || count == 0) first_ts = NO_TIMESTAMP;
        else first_ts = base_ts;
        if (first_ts != NO_TIMESTAMP && (!t->has_min_first_ts || first_ts < t->min_first_ts)) {
            t->min_first_ts = first_ts;
            t->has_min_first_ts = 1;
        }
        t->codec_mask |= 1u << (attrs & CODEC_MASK);
        t->timestamp_type_mask |= 1u << ((attrs & TIMESTAMP_TYPE_MASK) >> 3);
        if (attrs & TRANSACTIONAL_FLAG_MASK) t->transactional++;
        if (attrs & CONTROL_FLAG_MASK) {
            if (t->controls == t->controls_cap) {
                Py_ssize_t cap = t->controls_cap ? t->controls_cap * 2 : 16;
                int64_t *grown = realloc(t->control_positions, (size_t)cap * sizeof(int64_t));
                if (grown == NULL) { t->out_of_memory = 1; break; }
                t->control_positions = grown;
                t->controls_cap = cap;
            }
            t->control_positions[t->controls++] = pos;
        }
        last_size = LOG_OVERHEAD + (int64_t)length;
        pos += last_size;
    }
    t->stop = pos;
}

static PyObject *opt_int(int present, int64_t value) {
    if (!present) Py_RETURN_NONE;
    return PyLong_FromLongLong(value);
}

static PyObject *walk_v2(PyObject *self, PyObject *args) {
    int fd;
    long long start, size;
    if (!PyArg_ParseTuple(args, "iLL", &fd, &start, &size)) return NULL;
    if (start < 0 || start > size) {
        PyErr_Format(PyExc_ValueError, "start = %lld, expected 0..%lld", start, size);
        return NULL;
    }
    unsigned char *buf = malloc(CHUNK_BYTES);
    if (buf == NULL) return PyErr_NoMemory();
    totals_t t = {0};
    Py_BEGIN_ALLOW_THREADS
    walk(fd, (int64_t)start, (int64_t)size, buf, &t, 0, 0);
    Py_END_ALLOW_THREADS
    free(buf);
    if (t.out_of_memory) {
        free(t.control_positions);
        return PyErr_NoMemory();
    }
    PyObject *controls = PyList_New(t.controls);
    if (controls == NULL) { free(t.control_positions); return NULL; }
    for (Py_ssize_t i = 0; i < t.controls; i++) {
        PyObject *p = PyLong_FromLongLong(t.control_positions[i]);
        if (p == NULL) { Py_DECREF(controls); free(t.control_positions); return NULL; }
        PyList_SET_ITEM(controls, i, p);
    }
    free(t.control_positions);
    int any = t.batches > 0;
    return Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:N,s:N,s:N,s:N,s:N,s:N,s:I,s:I,s:N,s:N}",
        "stop_position", (long long)t.stop,
        "batch_count", (long long)t.batches,
        "record_count", (long long)t.records,
        "transactional_batches", (long long)t.transactional,
        "first_base_offset", opt_int(any, t.first_base_offset),
        "first_max_timestamp_ms", opt_int(any, t.first_max_ts),
        "last_offset", opt_int(any, t.last_offset),
        "last_max_timestamp_ms", opt_int(any, t.last_max_ts),
        "max_timestamp_ms", opt_int(t.has_max_ts, t.max_ts),
        "min_first_timestamp_ms", opt_int(t.has_min_first_ts, t.min_first_ts),
        "codec_mask", t.codec_mask,
        "timestamp_type_mask", t.timestamp_type_mask,
        "control_positions", controls,
        "last_position", opt_int(any, t.last_pos));
}

/* ---- index depth ------------------------------------------------------------------------ */

#define OFFSET_INDEX_ENTRY 8     /* relativeOffset int32, position int32 */
#define TIME_INDEX_ENTRY 12      /* timestamp int64, relativeOffset int32 */

typedef struct {
    int time_index;
    int64_t n;                   /* valid entries: a prefix of the slots */
    int64_t first, second;       /* the last valid entry: (offset, position) or (timestamp, offset) */
} index_tail_t;

/* One entry: its raw fields and the pair it reports, (offset, position) or (timestamp, offset). */
typedef struct {
    int64_t key, rel, first, second;
} entry_t;

/* `count` (1 or 2) consecutive entries from slot i in one pread; 0 on a short read. */
static int read_entries(int fd, int time_index, int64_t i, int count, int64_t base, entry_t *out) {
    unsigned char buf[2 * TIME_INDEX_ENTRY];
    int es = time_index ? TIME_INDEX_ENTRY : OFFSET_INDEX_ENTRY;
    if (read_window(fd, buf, (size_t)(es * count), i * es) < 0) return 0;
    for (int j = 0; j < count; j++) {
        const unsigned char *e = buf + j * es;
        entry_t *x = &out[j];
        if (time_index) {
            x->key = be64(e);
            x->rel = be32(e + 8);
            x->first = x->key;
            x->second = wrap_add(base, x->rel);
        } else {
            x->rel = be32(e);
            x->key = be32(e + 4);
            x->first = wrap_add(base, x->rel);
            x->second = x->key;
        }
    }
    return 1;
}

static int zero_tail_entry(int64_t i, const entry_t *e) { return i > 0 ? e->rel == 0 : (e->rel == 0 && e->key == 0); }

/* Kafka's ordering rules between two entries (offset_index.py / time_index.py _check_order). */
static int out_of_order(int time_index, const entry_t *prev, const entry_t *cur) {
    if (cur->first <= prev->first) return 1;
    return time_index ? cur->second < prev->second : cur->second <= prev->second;
}

/* 1 with the tail in *t, 0 when the Python reader must look (it would write a problem).
 * A trimmed index (every closed segment) costs two preads: entry 0 and the last two entries. */
static int index_tail(int fd, int64_t size, int time_index, int64_t base, index_tail_t *t) {
    int64_t es = time_index ? TIME_INDEX_ENTRY : OFFSET_INDEX_ENTRY;
    int64_t slots = size / es;
    entry_t first, ends[2], probe;
    t->time_index = time_index;
    t->n = 0;
    if (size % es) return 0;
    if (slots == 0) return 1;
    if (!read_entries(fd, time_index, 0, 1, base, &first)) return 0;
    if (zero_tail_entry(0, &first)) return 1;
    /* ends[]: entries n-2 (when n >= 2) and n-1 */
    int count = slots >= 2 ? 2 : 1;
    if (!read_entries(fd, time_index, slots - count, count, base, ends)) return 0;
    int64_t n = slots;
    if (zero_tail_entry(slots - 1, &ends[count - 1])) {
        int64_t lo = 0, hi = slots - 1;
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            if (!read_entries(fd, time_index, mid, 1, base, &probe)) return 0;
            if (!zero_tail_entry(mid, &probe)) lo = mid; else hi = mid;
        }
        n = hi;
        count = n >= 2 ? 2 : 1;
        if (!read_entries(fd, time_index, n - count, count, base, ends)) return 0;
    }
    const entry_t *last = &ends[count - 1];
    if (last->rel < 0) return 0;
    if (n >= 2 && out_of_order(time_index, &ends[0], last)) return 0;
    if (n > 2 && out_of_order(time_index, &first, last)) return 0;
    t->n = n;
    t->first = last->first;
    t->second = last->second;
    return 1;
}

typedef struct {
    struct stat st[3];           /* .log, .index, .timeindex as lstat saw them */
    index_tail_t idx[2];
    totals_t head, tail;
    int64_t log_size;            /* fstat of the open .log: what the walk covers */
} segment_t;

/* 1 when the segment is on the common path and *g is filled; 0 to hand over to Python. */
static int index_segment(const char *paths[3], int64_t base, unsigned char *buf, segment_t *g) {
    for (int k = 0; k < 3; k++)
        if (lstat(paths[k], &g->st[k]) != 0 || !S_ISREG(g->st[k].st_mode)) return 0;
    if (g->st[2].st_size == 0 && g->st[0].st_size > 0) return 0;  /* noted by scan.py */
    for (int k = 1; k < 3; k++) {
        int fd = open(paths[k], O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) return 0;
        struct stat st;
        int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                 index_tail(fd, (int64_t)st.st_size, k == 2, base, &g->idx[k - 1]);
        close(fd);
        if (!ok) return 0;
    }
    int fd = open(paths[0], O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (ok) {
        g->log_size = (int64_t)st.st_size;
        walk(fd, 0, g->log_size, buf, &g->head, 1, HEADER_PROBE_BYTES);
        ok = g->head.batches == 1 && !g->head.out_of_memory;
    }
    if (ok) {
        int64_t start = g->idx[0].n ? g->idx[0].second : 0;
        ok = start < g->log_size;
        if (ok) {
            walk(fd, start, g->log_size, buf, &g->tail, 0, HEADER_PROBE_BYTES);
            ok = g->tail.stop == g->log_size && g->tail.batches > 0 && !g->tail.out_of_memory;
        }
    }
    free(g->head.control_positions);
    free(g->tail.control_positions);
    close(fd);
    return ok;
}

/* st's mtime in nanoseconds, as decimal text into out[MTIME_TEXT_BYTES]: os.stat's st_mtime_ns. It
 * need not fit an int64 (a file dated after 2262 or before 1678: seconds * 10^9 overflowed, undefined
 * behaviour, and disagreed with Python's int), so it is computed in 128 bits. */
#define MTIME_TEXT_BYTES 48
static void mtime_ns_text(const struct stat *st, char *out) {
    __int128 v = (__int128)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
    char digits[MTIME_TEXT_BYTES];
    int n = 0;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    char *p = out;
    if (v < 0) *p++ = '-';
    while (n) *p++ = digits[--n];
    *p = '\0';
}

static PyObject *mtime_ns(const struct stat *st) {
    long long ns;
    if (!__builtin_mul_overflow((long long)st->st_mtim.tv_sec, 1000000000LL, &ns) &&
        !__builtin_add_overflow(ns, (long long)st->st_mtim.tv_nsec, &ns))
        return PyLong_FromLongLong(ns);
    char text[MTIME_TEXT_BYTES];
    mtime_ns_text(st, text);
    return PyLong_FromString(text, NULL, 10);
}

static PyObject *opt_ts(int64_t value) { return opt_int(value != NO_TIMESTAMP, value); }

static PyObject *index_ends(PyObject *self, PyObject *args) {
    PyObject *encoded[3] = {NULL, NULL, NULL};
    long long base;
    if (!PyArg_ParseTuple(args, "O&O&O&L", PyUnicode_FSConverter, &encoded[0], PyUnicode_FSConverter, &encoded[1],
                          PyUnicode_FSConverter, &encoded[2], &base)) {
        for (int k = 0; k < 3; k++) Py_XDECREF(encoded[k]);
        return NULL;
    }
    const char *paths[3];
    for (int k = 0; k < 3; k++) paths[k] = PyBytes_AS_STRING(encoded[k]);
    unsigned char *buf = malloc(CHUNK_BYTES);
    if (buf == NULL) {
        for (int k = 0; k < 3; k++) Py_DECREF(encoded[k]);
        return PyErr_NoMemory();
    }
    segment_t g;
    memset(&g, 0, sizeof g);
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = index_segment(paths, (int64_t)base, buf, &g);
    Py_END_ALLOW_THREADS
    free(buf);
    for (int k = 0; k < 3; k++) Py_DECREF(encoded[k]);
    if (!ok) Py_RETURN_NONE;

    /* the largest record timestamp: the time index's last entry, every batch after it, the first */
    int has = g.idx[1].n > 0;
    int64_t max_ts = g.idx[1].first;
    if (g.tail.has_max_ts && (!has || g.tail.max_ts > max_ts)) { max_ts = g.tail.max_ts; has = 1; }
    if (g.head.first_max_ts != NO_TIMESTAMP && (!has || g.head.first_max_ts > max_ts)) {
        max_ts = g.head.first_max_ts;
        has = 1;
    }
    return Py_BuildValue(
        "(LNLNLNLNNLNNLNLNN)",
        (long long)g.st[0].st_size, mtime_ns(&g.st[0]),
        (long long)g.st[1].st_size, mtime_ns(&g.st[1]),
        (long long)g.st[2].st_size, mtime_ns(&g.st[2]),
        (long long)g.idx[0].n, opt_int(g.idx[0].n > 0, g.idx[0].first), opt_int(g.idx[0].n > 0, g.idx[0].second),
        (long long)g.idx[1].n, opt_int(g.idx[1].n > 0, g.idx[1].first), opt_int(g.idx[1].n > 0, g.idx[1].second),
        (long long)g.head.first_base_offset, opt_ts(g.head.first_max_ts),
        (long long)g.tail.last_offset, opt_ts(g.tail.last_max_ts),
        opt_int(has, max_ts));
}

/* ---- incremental scans: a closed segment's proof ---------------------------------------- */

/* segment_proof(log, index, timeindex, txnindex) -> str or None: what proves a closed segment
 * unchanged (auditor/scan/state.py segment_proof, whose text this is byte for byte): lstat of
 * the .log (device, inode, size, mtime ns) and of each index (size, mtime ns, "-" when None).
 * None when the .log is None, or a file cannot be lstat-ed or is not a regular file. */
static PyObject *segment_proof(PyObject *self, PyObject *args) {
    PyObject *objs[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objs[0], &objs[1], &objs[2], &objs[3])) return NULL;
    char out[512];   /* 4 files x (dev, inode, size, mtime up to 29 digits): < 300 bytes */
    size_t len = 0;
    for (int k = 0; k < 4; k++) {
        if (k > 0) out[len++] = '|';
        if (objs[k] == Py_None) {
            if (k == 0) Py_RETURN_NONE;
            out[len++] = '-';
            continue;
        }
        PyObject *encoded = NULL;
        if (!PyUnicode_FSConverter(objs[k], &encoded)) return NULL;
        struct stat st;
        int ok = lstat(PyBytes_AS_STRING(encoded), &st) == 0 && S_ISREG(st.st_mode);
        Py_DECREF(encoded);
        if (!ok) Py_RETURN_NONE;
        char mtime[MTIME_TEXT_BYTES];
        mtime_ns_text(&st, mtime);
        int n;
        if (k == 0)
            n = snprintf(out + len, sizeof out - len, "%llu:%llu:%lld:%s", (unsigned long long)st.st_dev,
                         (unsigned long long)st.st_ino, (long long)st.st_size, mtime);
        else
            n = snprintf(out + len, sizeof out - len, "%lld:%s", (long long)st.st_size, mtime);
        if (n < 0 || (size_t)n >= sizeof out - len - 2) {
            PyErr_SetString(PyExc_OverflowError, "segment proof longer than its buffer");
            return NULL;
        }
        len += (size_t)n;
    }
    return PyUnicode_FromStringAndSize(out, (Py_ssize_t)len);
}

/* ---- incremental scans: an active segment with nothing appended ------------------------ */

/* 1 with st[] (lstat of .log, .index, .timeindex), the index tails and the RECORD_BATCH_OVERHEAD
 * header bytes at `pos` of the open .log; 0 to hand over to Python (a file missing or not
 * regular, an empty .timeindex beside a non-empty .log, an index the Python reader would write
 * a problem about, the .log open being another file or size than the one lstat-ed, a short read). */
static int quiet_segment(const char *paths[3], int64_t base, int64_t pos, struct stat st[3], index_tail_t idx[2],
                         unsigned char *head) {
    for (int k = 0; k < 3; k++)
        if (lstat(paths[k], &st[k]) != 0 || !S_ISREG(st[k].st_mode)) return 0;
    if (st[2].st_size == 0 && st[0].st_size > 0) return 0;  /* noted by scan.py */
    for (int k = 1; k < 3; k++) {
        int fd = open(paths[k], O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) return 0;
        struct stat fst;
        int ok = fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode) &&
                 index_tail(fd, (int64_t)fst.st_size, k == 2, base, &idx[k - 1]);
        close(fd);
        if (!ok) return 0;
    }
    if (pos < 0 || pos > (int64_t)st[0].st_size - RECORD_BATCH_OVERHEAD) return 0;   /* (pos + 61 may overflow) */
    int fd = open(paths[0], O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return 0;
    struct stat fst;
    int ok = fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode) && fst.st_dev == st[0].st_dev &&
             fst.st_ino == st[0].st_ino && fst.st_size == st[0].st_size &&
             read_window(fd, head, RECORD_BATCH_OVERHEAD, pos) == RECORD_BATCH_OVERHEAD;
    close(fd);
    return ok;
}

/* quiet_facts(log, index, timeindex, base_offset, pos) -> tuple or None: what proves an active
 * segment unchanged since the last run's walk ended (auditor/scan/resume.py quiet_facts_py, whose
 * tuple this is: QUIET_FIELDS) in one call. */
static PyObject *quiet_facts(PyObject *self, PyObject *args) {
    PyObject *encoded[3] = {NULL, NULL, NULL};
    long long base, pos;
    if (!PyArg_ParseTuple(args, "O&O&O&LL", PyUnicode_FSConverter, &encoded[0], PyUnicode_FSConverter, &encoded[1],
                          PyUnicode_FSConverter, &encoded[2], &base, &pos)) {
        for (int k = 0; k < 3; k++) Py_XDECREF(encoded[k]);
        return NULL;
    }
    const char *paths[3];
    for (int k = 0; k < 3; k++) paths[k] = PyBytes_AS_STRING(encoded[k]);
    struct stat st[3];
    index_tail_t idx[2];
    unsigned char head[RECORD_BATCH_OVERHEAD];
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = quiet_segment(paths, (int64_t)base, (int64_t)pos, st, idx, head);
    Py_END_ALLOW_THREADS
    for (int k = 0; k < 3; k++) Py_DECREF(encoded[k]);
    if (!ok) Py_RETURN_NONE;
    return Py_BuildValue(
        "(KKLNKKLNKKLNLNNLNNy#)",
        (unsigned long long)st[0].st_dev, (unsigned long long)st[0].st_ino, (long long)st[0].st_size, mtime_ns(&st[0]),
        (unsigned long long)st[1].st_dev, (unsigned long long)st[1].st_ino, (long long)st[1].st_size, mtime_ns(&st[1]),
        (unsigned long long)st[2].st_dev, (unsigned long long)st[2].st_ino, (long long)st[2].st_size, mtime_ns(&st[2]),
        (long long)idx[0].n, opt_int(idx[0].n > 0, idx[0].first), opt_int(idx[0].n > 0, idx[0].second),
        (long long)idx[1].n, opt_int(idx[1].n > 0, idx[1].first), opt_int(idx[1].n > 0, idx[1].second),
        (const char *)head, (Py_ssize_t)RECORD_BATCH_OVERHEAD);
}

/* ---- deep depth: the records of one v2 batch -------------------------------------------- */

#define MAX_VARINT_BYTES 5
#define MAX_VARLONG_BYTES 10
#define CONTROL_KEY_SIZE 4
#define CONTROL_ABORT 0
#define CONTROL_COMMIT 1
#define FOLD_STATE_FIELDS 6

/* A zigzag varint (max_bytes 5, int32: only 32 bits of a 5-byte one kept) or varlong (10) at *pp,
 * before end, as auditor/formats/varint.py reads it; -1 where that raises (it runs past end, or
 * more continuation bytes than max_bytes). */
static int read_zigzag(const unsigned char *b, Py_ssize_t *pp, Py_ssize_t end, int max_bytes, int64_t *out) {
    uint64_t raw = 0;
    Py_ssize_t pos = *pp;
    for (int i = 0; i < max_bytes; i++) {
        if (pos >= end) return -1;
        unsigned char c = b[pos++];
        raw |= (uint64_t)(c & 0x7F) << (7 * i);
        if (!(c & 0x80)) {
            if (max_bytes == MAX_VARINT_BYTES) raw &= 0xFFFFFFFFu;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pp = pos;
            return 0;
        }
    }
    return -1;
}

typedef struct {
    int present[FOLD_STATE_FIELDS];
    int64_t value[FOLD_STATE_FIELDS];   /* min ts, its offset, running max ts, its offset, (unused), its offset */
    uint64_t jump;                      /* the largest step back: running max - ts of two int64, so up to 2^64 - 1 */
    int64_t records, aborts, commits;
} fold_t;

enum { MIN_TS, MIN_OFF, MAX_TS, MAX_OFF, JUMP, JUMP_OFF };

/* An optional int of the fold state into f (field k; the step back as uint64, the others int64):
 * 1, 0 when it does not fit (the Python fold takes the batch), -1 with an error set when it is
 * not an int or None. */
static int opt_state(PyObject *o, fold_t *f, int k) {
    f->present[k] = o != Py_None;
    f->value[k] = 0;
    if (!f->present[k]) return 1;
    if (!PyLong_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "fold_records: the state holds ints or None");
        return -1;
    }
    if (k == JUMP) {
        unsigned long long v = PyLong_AsUnsignedLongLong(o);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
            PyErr_Clear();   /* negative or beyond 2^64 - 1 */
            return 0;
        }
        f->jump = v;
        return 1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    f->value[k] = v;
    return overflow ? 0 : 1;
}

/* One record's timestamp into the fold, as scan/segment.py _fold_record_timestamp (whose ints
 * have no bound: the step back between two int64 is kept as uint64, exact). */
static void fold_timestamp(fold_t *f, int64_t ts, int64_t offset) {
    if (!f->present[MIN_TS] || ts < f->value[MIN_TS]) {
        f->present[MIN_TS] = f->present[MIN_OFF] = 1;
        f->value[MIN_TS] = ts;
        f->value[MIN_OFF] = offset;
    }
    if (!f->present[MAX_TS] || ts > f->value[MAX_TS]) {
        f->present[MAX_TS] = f->present[MAX_OFF] = 1;
        f->value[MAX_TS] = ts;
        f->value[MAX_OFF] = offset;
    } else if (ts < f->value[MAX_TS]) {
        uint64_t jump = (uint64_t)f->value[MAX_TS] - (uint64_t)ts;   /* max > ts: exact in [1, 2^64 - 1] */
        if (jump > (f->present[JUMP] ? f->jump : 0)) {
            f->present[JUMP] = f->present[JUMP_OFF] = 1;
            f->jump = jump;
            f->value[JUMP_OFF] = offset;
        }
    }
}

/* The batch's fixed facts and the fold so far: what fold_records takes in one call, and RecordFold
 * across the chunks of a decompressed payload. */
typedef struct {
    fold_t f;
    int64_t count;                       /* recordsCount */
    int64_t left;                        /* records still to read (recordsCount minus those folded) */
    int64_t base_offset, base_ts, log_append;
    int has_log_append, control;
} batch_fold_t;

/* One record whose bytes are b[pos, body_end) after its length varint (record_batch.iter_records'
 * checks, same order), folded into c->f: 0, or -1 (nothing folded) at anything iter_records would
 * raise for. A record's fields are varints of at least one byte each: the loops are bounded by the
 * bytes. */
static int fold_one_record(const unsigned char *b, Py_ssize_t pos, Py_ssize_t body_end, batch_fold_t *c) {
    int64_t ts_delta, off_delta, key_size, value_size, nheaders;
    pos += 1;   /* attributes: int8, unused */
    if (read_zigzag(b, &pos, body_end, MAX_VARLONG_BYTES, &ts_delta) < 0 ||
        read_zigzag(b, &pos, body_end, MAX_VARINT_BYTES, &off_delta) < 0 ||
        read_zigzag(b, &pos, body_end, MAX_VARINT_BYTES, &key_size) < 0)
        return -1;
    Py_ssize_t key_at = pos;
    if (key_size > 0) pos += (Py_ssize_t)key_size;   /* past body_end: the next read fails */
    if (read_zigzag(b, &pos, body_end, MAX_VARINT_BYTES, &value_size) < 0) return -1;
    if (value_size > 0) pos += (Py_ssize_t)value_size;
    if (read_zigzag(b, &pos, body_end, MAX_VARINT_BYTES, &nheaders) < 0 || nheaders < 0) return -1;
    for (int64_t h = 0; h < nheaders; h++) {
        int64_t hk, hv;
        if (read_zigzag(b, &pos, body_end, MAX_VARINT_BYTES, &hk) < 0 || hk < 0) return -1;
        pos += (Py_ssize_t)hk;
        if (read_zigzag(b, &pos, body_end, MAX_VARINT_BYTES, &hv) < 0) return -1;
        if (hv > 0) pos += (Py_ssize_t)hv;
    }
    if (pos != body_end) return -1;
    if (c->control) {
        if (key_size < CONTROL_KEY_SIZE) return -1;
        int16_t type = (int16_t)be16(b + key_at + 2);
        c->f.aborts += type == CONTROL_ABORT;
        c->f.commits += type == CONTROL_COMMIT;
    }
    int64_t ts = c->has_log_append ? c->log_append : wrap_add(c->base_ts, ts_delta);
    if (ts != NO_TIMESTAMP) fold_timestamp(&c->f, ts, wrap_add(c->base_offset, off_delta));
    c->f.records++;
    return 0;
}

/* The complete records of b[*pp, avail) folded while any are left; *pp moves past them. final:
 * avail is the end of the records, and every record must have been read with no byte after the
 * last. Not final: a record running past avail waits for the next chunk (a length varint still
 * unreadable with MAX_VARINT_BYTES in hand is too long: -1, as with all the bytes). 0, or -1 at
 * anything iter_records would raise for, with *pp at the start of the record it raises for
 * (record count - left; recordsCount itself for bytes after the last record): the fold holds the
 * records before it, as the Python loop's state does when it raises. */
static int fold_available(const unsigned char *b, Py_ssize_t *pp, Py_ssize_t avail, int final, batch_fold_t *c) {
    Py_ssize_t pos = *pp;
    int refused = 0;
    while (c->left > 0 && !refused) {
        Py_ssize_t body = pos;
        int64_t length;
        if (read_zigzag(b, &body, avail, MAX_VARINT_BYTES, &length) < 0) {
            if (!final && avail - pos < MAX_VARINT_BYTES) break;
            refused = 1;
        } else if (length < 0) {
            refused = 1;
        } else if (length > avail - body) {
            if (!final) break;
            refused = 1;
        } else if (fold_one_record(b, body, body + (Py_ssize_t)length, c) < 0) {
            refused = 1;
        } else {
            pos = body + (Py_ssize_t)length;
            c->left--;
        }
    }
    *pp = pos;
    if (refused) return -1;
    return c->left == 0 && pos != avail ? -1 : 0;   /* bytes after the last record (final: left is 0 here) */
}

/* The fold state arguments (six optional ints, then the log-append timestamp) into c: 1, 0 when
 * one does not fit (the Python fold takes the batch), -1 with an error set. */
static int parse_fold_state(PyObject *state[FOLD_STATE_FIELDS], PyObject *log_append_obj, batch_fold_t *c) {
    int fits = 1;
    for (int k = 0; k < FOLD_STATE_FIELDS && fits > 0; k++) fits = opt_state(state[k], &c->f, k);
    if (fits > 0) {
        fold_t log_append = {{0}};
        fits = opt_state(log_append_obj, &log_append, MIN_TS);
        c->has_log_append = log_append.present[MIN_TS];
        c->log_append = log_append.value[MIN_TS];
    }
    return fits;
}

/* (the six fold fields, records, aborts, commits, refused): refused None when every record was
 * folded, else (index, position) of the record iter_records raises for (index recordsCount: the
 * bytes after the last record, at position); the fold then holds the records before it. */
static PyObject *fold_result(const batch_fold_t *c, int refused, int64_t refused_at) {
    const fold_t *f = &c->f;
    PyObject *items[FOLD_STATE_FIELDS + 4];
    for (int k = 0; k < FOLD_STATE_FIELDS; k++)
        items[k] = k == JUMP ? (f->present[JUMP] ? PyLong_FromUnsignedLongLong(f->jump) : Py_NewRef(Py_None))
                             : opt_int(f->present[k], f->value[k]);
    items[FOLD_STATE_FIELDS] = PyLong_FromLongLong(f->records);
    items[FOLD_STATE_FIELDS + 1] = PyLong_FromLongLong(f->aborts);
    items[FOLD_STATE_FIELDS + 2] = PyLong_FromLongLong(f->commits);
    items[FOLD_STATE_FIELDS + 3] = refused ? Py_BuildValue("(LL)", (long long)(c->count - c->left),
                                                           (long long)refused_at)
                                           : Py_NewRef(Py_None);
    PyObject *out = PyTuple_New(FOLD_STATE_FIELDS + 4);
    for (int k = 0; k < FOLD_STATE_FIELDS + 4; k++) {
        if (out && items[k]) {
            PyTuple_SET_ITEM(out, k, items[k]);
        } else {
            Py_XDECREF(items[k]);
            Py_CLEAR(out);
        }
    }
    return out;
}

/* fold_records(data, start, count, base_offset, base_ts, log_append_ts, control, *state) -> tuple or None */
static PyObject *fold_records(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t start;
    long long count, base_offset, base_ts;
    int control;
    PyObject *log_append_obj, *state[FOLD_STATE_FIELDS];
    if (!PyArg_ParseTuple(args, "y*nLLLOpOOOOOO:fold_records", &view, &start, &count, &base_offset, &base_ts,
                          &log_append_obj, &control, &state[0], &state[1], &state[2], &state[3], &state[4], &state[5]))
        return NULL;
    batch_fold_t c = {.count = count, .left = count, .base_offset = base_offset, .base_ts = base_ts,
                      .control = control};
    int fits = parse_fold_state(state, log_append_obj, &c);
    Py_ssize_t pos = start;
    int rc = 0;
    if (fits > 0 && start >= 0 && start <= view.len && count >= 0)
        rc = fold_available((const unsigned char *)view.buf, &pos, view.len, 1, &c);
    else
        fits = fits < 0 ? -1 : 0;
    PyBuffer_Release(&view);
    if (fits < 0) return NULL;
    if (fits == 0) Py_RETURN_NONE;
    return fold_result(&c, rc < 0, pos);
}

/* ---- deep depth: the inner messages of a legacy (magic 0/1) compressed wrapper ----------- */

#include "_legacy_message.h"

/* legacy_frames(data) -> (count, first_offset, last_offset, stop) */
static PyObject *legacy_frames(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*:legacy_frames", &view)) return NULL;
    const unsigned char *b = view.buf;
    int64_t n = view.len, p = 0, count = 0, first = 0, last = 0, stop = -1;
    Py_BEGIN_ALLOW_THREADS
    while (n - p >= LEGACY_LOG_OVERHEAD) {
        int64_t step = legacy_inner_size(b, p, n);
        if (step < 0) stop = p;
        if (step <= 0) break;
        last = be64(b + p);
        if (count++ == 0) first = last;
        p += step;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(LLLN)", (long long)count, (long long)first, (long long)last, opt_int(stop >= 0, stop));
}

/* legacy_fold(data, count, base, relative, log_append_ts, *state) -> fold_records' tuple */
static PyObject *legacy_fold(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    long long count;
    unsigned long long base;
    int relative;
    PyObject *log_append_obj, *state[FOLD_STATE_FIELDS];
    if (!PyArg_ParseTuple(args, "y*LKpOOOOOOO:legacy_fold", &view, &count, &base, &relative, &log_append_obj,
                          &state[0], &state[1], &state[2], &state[3], &state[4], &state[5]))
        return NULL;
    batch_fold_t c = {.count = count, .left = 0};
    int fits = parse_fold_state(state, log_append_obj, &c);
    const unsigned char *b = view.buf;
    int64_t n = view.len, p = 0;
    for (int64_t i = 0; fits > 0 && i < count; i++) {
        int64_t step = n - p >= LEGACY_LOG_OVERHEAD ? legacy_inner_size(b, p, n) : -1;
        if (step <= 0) {   /* not the set legacy_frames counted */
            PyErr_SetString(PyExc_ValueError, "legacy_fold: fewer well-formed inner messages than count");
            fits = -1;
            break;
        }
        unsigned char magic = b[p + LEGACY_MAGIC_AT];
        int64_t ts = magic == 0 ? NO_TIMESTAMP
                     : c.has_log_append ? c.log_append : be64(b + p + LEGACY_TIMESTAMP_AT);
        int64_t offset = be64(b + p);
        if (relative) offset = (int64_t)((uint64_t)offset + base);   /* Java long arithmetic */
        if (ts != NO_TIMESTAMP) fold_timestamp(&c.f, ts, offset);
        c.f.records++;
        p += step;
    }
    PyBuffer_Release(&view);
    if (fits < 0) return NULL;
    if (fits == 0) Py_RETURN_NONE;
    return fold_result(&c, 0, 0);
}

/* ---- RecordFold: the same fold over a decompressed payload handed over in chunks ---------- */

/* A bomb at the 256 MiB cap is 38 million records: decompressed chunk by chunk (zlib's 1 MiB
 * pieces, lz4's blocks) and folded as the chunks come, it never lives in memory whole (no 256 MiB
 * buffer to fault in, zero and copy) and each chunk is folded while still in the CPU's cache. A
 * record cut by a chunk's end is carried: its head is copied to `carry`, completed from the next
 * chunk(s) by exactly the bytes it lacks, folded there, and the fold goes on in the chunk itself.
 * So every byte is copied at most once, whatever the record and chunk sizes.
 *
 * At a record iter_records would raise for, the fold stops there (its index and stream position:
 * result()) and `carry` keeps that record's bytes from its start, as many as iter_records reads
 * before it raises (refused_bytes()): the Python note is then written from them alone, never by
 * reading the 38 million records before it again. The chunks after are still taken (their total is
 * the stream's end, which the note may name) but not kept. */
enum { FOLD_BROKEN, FOLD_FOLDING, FOLD_REFUSED };

typedef struct {
    PyObject_HEAD
    batch_fold_t c;
    unsigned char *carry;
    Py_ssize_t carry_len, carry_cap;
    long long fed;          /* bytes fed so far: the stream position of the next chunk's first byte */
    long long refused_at;   /* FOLD_REFUSED: the stream position of the refused record (carry[0]) */
    int state;              /* FOLD_BROKEN: a state argument does not fit (result() None: Python folds) */
} RecordFoldObject;

static void record_fold_dealloc(RecordFoldObject *self) {
    free(self->carry);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int record_fold_init(RecordFoldObject *self, PyObject *args, PyObject *kwds) {
    long long count, base_offset, base_ts;
    int control;
    PyObject *log_append_obj, *state[FOLD_STATE_FIELDS];
    static char *kwlist[] = {"count", "base_offset", "base_ts", "log_append_ts", "control", "min_ts", "min_offset",
                             "max_ts", "max_offset", "jump", "jump_offset", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "LLLOpOOOOOO:RecordFold", kwlist, &count, &base_offset, &base_ts,
                                     &log_append_obj, &control, &state[0], &state[1], &state[2], &state[3],
                                     &state[4], &state[5]))
        return -1;
    batch_fold_t c = {.count = count, .left = count, .base_offset = base_offset, .base_ts = base_ts,
                      .control = control};
    int fits = parse_fold_state(state, log_append_obj, &c);
    if (fits < 0) return -1;
    self->c = c;
    self->carry_len = 0;
    self->fed = self->refused_at = 0;
    self->state = fits > 0 && count >= 0 ? FOLD_FOLDING : FOLD_BROKEN;
    return 0;
}

/* The bytes the record at the carry's start still lacks: its length varint complete, exactly the
 * rest of its body; else one byte (the varint's next: never a byte past the record); -1 when the
 * carry already shows it unreadable. */
static Py_ssize_t carry_lacks(const RecordFoldObject *self) {
    Py_ssize_t body = 0;
    int64_t length;
    if (read_zigzag(self->carry, &body, self->carry_len, MAX_VARINT_BYTES, &length) < 0)
        return self->carry_len < MAX_VARINT_BYTES ? 1 : -1;
    if (length < 0) return -1;
    return body + (Py_ssize_t)length - self->carry_len;   /* may be 0: complete */
}

/* What the refused record still lacks of the bytes iter_records reads before it raises: its
 * length varint (up to MAX_VARINT_BYTES), then, when that is a length >= 0, its body (whose
 * reads stay inside it); nothing after recordsCount records (the note then counts the bytes
 * after the last record, and the stream's end says how many). */
static Py_ssize_t refused_lacks(const RecordFoldObject *self) {
    if (self->c.left == 0) return 0;
    Py_ssize_t body = 0;
    int64_t length;
    if (read_zigzag(self->carry, &body, self->carry_len, MAX_VARINT_BYTES, &length) < 0)
        return self->carry_len < MAX_VARINT_BYTES ? MAX_VARINT_BYTES - self->carry_len : 0;
    if (length < 0 || body + (Py_ssize_t)length <= self->carry_len) return 0;
    return body + (Py_ssize_t)length - self->carry_len;
}

static int carry_append(RecordFoldObject *self, const unsigned char *b, Py_ssize_t n) {
    if (n == 0) return 0;   /* (carry may still be NULL: no pointer arithmetic on it) */
    if (self->carry_len + n > self->carry_cap) {
        Py_ssize_t cap = self->carry_cap ? self->carry_cap : 4096;
        while (cap < self->carry_len + n) cap *= 2;
        unsigned char *grown = realloc(self->carry, (size_t)cap);
        if (grown == NULL) return -1;
        self->carry = grown;
        self->carry_cap = cap;
    }
    memcpy(self->carry + self->carry_len, b, (size_t)n);
    self->carry_len += n;
    return 0;
}

/* The refused record's bytes from b[0, n) into the carry, as many as it still lacks: 0, -1 out of memory. */
static int keep_refused(RecordFoldObject *self, const unsigned char *b, Py_ssize_t n) {
    Py_ssize_t pos = 0, lacks;
    while (pos < n && (lacks = refused_lacks(self)) > 0) {
        Py_ssize_t take = lacks < n - pos ? lacks : n - pos;
        if (carry_append(self, b + pos, take) < 0) return -1;
        pos += take;
    }
    return 0;
}

/* The fold refuses the record at stream position `at`, whose bytes so far are the carry's (0: none
 * yet): the carry keeps it from there on. */
static void refuse(RecordFoldObject *self, long long at) {
    self->state = FOLD_REFUSED;
    self->refused_at = at;
}

/* One chunk, at stream position self->fed, into the fold: 0, -1 out of memory. */
static int feed_chunk(RecordFoldObject *self, const unsigned char *b, Py_ssize_t n) {
    Py_ssize_t pos = 0;
    long long carry_at = self->fed - self->carry_len;   /* the carry: the last bytes fed */
    while (self->carry_len > 0 && pos < n) {   /* complete the carried record first */
        Py_ssize_t lacks = carry_lacks(self);
        if (lacks < 0) {
            refuse(self, carry_at);
            return keep_refused(self, b + pos, n - pos);
        }
        Py_ssize_t take = lacks < n - pos ? lacks : n - pos;
        if (carry_append(self, b + pos, take) < 0) return -1;
        pos += take;
        lacks = carry_lacks(self);
        if (lacks > 0) continue;   /* the varint completed, the body still short: take more */
        Py_ssize_t done = 0;
        if (lacks < 0 || fold_available(self->carry, &done, self->carry_len, 0, &self->c) < 0) {
            refuse(self, carry_at);   /* (a record alone in the carry: refused at its start, done == 0) */
            return keep_refused(self, b + pos, n - pos);
        }
        self->carry_len = 0;
        carry_at = self->fed + pos;
    }
    if (pos == n) return 0;
    if (fold_available(b, &pos, n, 0, &self->c) < 0) {
        refuse(self, self->fed + pos);
        return keep_refused(self, b + pos, n - pos);
    }
    return carry_append(self, b + pos, n - pos);
}

/* RecordFold.feed(chunk) -> bool: False once a record is one iter_records would refuse. */
static PyObject *record_fold_feed(RecordFoldObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    if (self->state == FOLD_FOLDING)
        rc = feed_chunk(self, (const unsigned char *)view.buf, view.len);
    else if (self->state == FOLD_REFUSED)
        rc = keep_refused(self, (const unsigned char *)view.buf, view.len);
    self->fed += view.len;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc < 0) return PyErr_NoMemory();
    return PyBool_FromLong(self->state == FOLD_FOLDING);
}

/* RecordFold.result() -> fold_records' tuple for all the chunks fed, or None. */
static PyObject *record_fold_result(RecordFoldObject *self, PyObject *unused) {
    (void)unused;
    if (self->state == FOLD_FOLDING) {
        Py_ssize_t done = 0;
        long long carry_at = self->fed - self->carry_len;
        if (fold_available(self->carry ? self->carry : (const unsigned char *)"", &done, self->carry_len, 1,
                           &self->c) < 0) {
            /* the record at done (0: the carry holds one record at most) lacks bytes the stream
             * does not have, or none is left; after recordsCount records nothing is kept */
            refuse(self, carry_at + done);
            if (self->c.left == 0) self->carry_len = 0;
        } else {
            self->carry_len = 0;
        }
    }
    if (self->state == FOLD_BROKEN) Py_RETURN_NONE;
    return fold_result(&self->c, self->state == FOLD_REFUSED, self->refused_at);
}

/* RecordFold.refused_bytes() -> bytes or None. */
static PyObject *record_fold_refused_bytes(RecordFoldObject *self, PyObject *unused) {
    (void)unused;
    if (self->state != FOLD_REFUSED) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(self->carry_len ? (const char *)self->carry : "", self->carry_len);
}

static PyObject *record_fold_fed(RecordFoldObject *self, void *closure) {
    (void)closure;
    return PyLong_FromLongLong(self->fed);
}

static PyGetSetDef record_fold_getset[] = {
    {"fed", (getter)record_fold_fed, NULL, "bytes fed so far (after the last chunk: the records' end)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef record_fold_methods[] = {
    {"feed", (PyCFunction)record_fold_feed, METH_O,
     "feed(chunk) -> bool: the next bytes of the records (any buffer; not kept after the call). False once "
     "a record is one record_batch.iter_records would refuse (the fold stops there; feed the rest all the same: "
     "fed counts it, and the refused record's bytes are kept)."},
    {"result", (PyCFunction)record_fold_result, METH_NOARGS,
     "result() -> fold_records' tuple over all the chunks fed (the records must end exactly there; refused: "
     "(index, stream position) of the record iter_records raises for, None when none), or None when a state "
     "argument does not fit (the Python path then reads the batch)."},
    {"refused_bytes", (PyCFunction)record_fold_refused_bytes, METH_NOARGS,
     "refused_bytes() -> bytes or None: after result(), the refused record's bytes from its start, as many as "
     "iter_records reads before it raises (its length varint; its body when that length is >= 0)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RecordFoldType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "auditor.formats._cwalk.RecordFold",
    .tp_basicsize = sizeof(RecordFoldObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RecordFold(count, base_offset, base_ts, log_append_ts, control, min_ts, min_offset, max_ts, "
              "max_offset, jump, jump_offset): fold_records over a payload fed in chunks (feed, then result).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)record_fold_init,
    .tp_dealloc = (destructor)record_fold_dealloc,
    .tp_methods = record_fold_methods,
    .tp_getset = record_fold_getset,
};

static PyMethodDef methods[] = {
    {"walk_v2", walk_v2, METH_VARARGS,
     "walk_v2(fd, start, size) -> dict: fold consecutive well-formed v2 batch headers from byte "
     "start; stop_position is where the Python walker must take over (== size at a clean end), "
     "last_position the last folded batch's (None when none)."},
    {"index_ends", index_ends, METH_VARARGS,
     "index_ends(log, index, timeindex, base_offset) -> tuple or None: one segment's 'index' depth "
     "facts (see scan.py INDEX_ENDS_FIELDS), None when the Python path must scan it."},
    {"segment_proof", segment_proof, METH_VARARGS,
     "segment_proof(log, index, timeindex, txnindex) -> str or None: a closed segment's proof for "
     "incremental scans (auditor/scan/state.py segment_proof), from lstat alone."},
    {"quiet_facts", quiet_facts, METH_VARARGS,
     "quiet_facts(log, index, timeindex, base_offset, pos) -> tuple or None: lstat of the three files, "
     "the index tails and the batch header at pos, for an active segment's quiet check "
     "(auditor/scan/resume.py QUIET_FIELDS)."},
    {"fold_records", fold_records, METH_VARARGS,
     "fold_records(data, start, count, base_offset, base_ts, log_append_ts, control, min_ts, min_offset, "
     "max_ts, max_offset, jump, jump_offset) -> (the six updated, records, aborts, commits, refused): the 'deep' "
     "depth's record fold (auditor/scan/segment.py) over the records of one v2 batch, from byte start of data. "
     "refused: None when every record was read, else (index, position in data) of the record "
     "record_batch.iter_records raises for (index recordsCount: bytes after the last record), the fold "
     "holding the records before it. None when a state argument does not fit (the Python path reads the batch)."},
    {"legacy_frames", legacy_frames, METH_VARARGS,
     "legacy_frames(data) -> (count, first_offset, last_offset, stop): the decompressed inner message set of a "
     "legacy wrapper walked as legacy._inner_entries walks it: the messages read, the first and last offset "
     "fields as stored, and stop: None at the set's end (under 12 bytes left, or an incomplete trailing "
     "entry), else the position of the first inner message that loop raises for."},
    {"legacy_fold", legacy_fold, METH_VARARGS,
     "legacy_fold(data, count, base, relative, log_append_ts, min_ts, min_offset, max_ts, max_offset, jump, "
     "jump_offset) -> fold_records' tuple (no markers, refused None): the 'deep' fold over the first count inner "
     "messages of a set legacy_frames read (offsets + base as Java longs when relative; the wrapper's "
     "LogAppendTime for magic 1 inner messages when given; magic 0 ones have no timestamp). None when a state "
     "argument does not fit."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cwalk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__cwalk(void) {
    if (PyType_Ready(&RecordFoldType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&RecordFoldType);
    if (PyModule_AddObject(m, "RecordFold", (PyObject *)&RecordFoldType) < 0) {
        Py_DECREF(&RecordFoldType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
