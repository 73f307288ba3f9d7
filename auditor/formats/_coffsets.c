/*
 * _coffsets: the happy path of replaying __consumer_offsets in C.
 *
 * fold_plain(fd, start, size, store, label[, max_bytes]) walks consecutive v2 record batches of one .log file
 * from byte `start` (windowed pread only: never mmap, never a write) and, for every batch it can
 * replay exactly as auditor/formats/offsets_records.py fold_records_into does, stores each record
 * in `store` (a dict): store[key] = (record offset, timestamp_ms, value bytes | None, False,
 * (label, batch position)), in record order, so the last record per key stays. OffsetCommitKey
 * version 0 keys are stored under the version-1 bytes (same layout). It returns
 * (stop_position, records folded): stop_position == size at a clean end, else the start of the
 * first entry it did not fold, which the Python path (auditor/cluster/consumer_groups.py) then
 * reads, so every note, stop reason and edge case comes from the one Python implementation.
 * With max_bytes > 0 it also returns at the first batch boundary at least max_bytes after start
 * (the caller paces its reads there: --max-read-rate); such a stop is always >= start + max_bytes,
 * a hand-over always below it.
 *
 * It folds a batch only when the Python walker would yield it as a v2 batch and the Python fold
 * would store every one of its records without a note or an error:
 *   - framing: at least 61 bytes left, 49 <= batchLength <= INT32_MAX - 12, the entry inside the
 *     file, magic 2, the whole entry at most WINDOW_BYTES (larger ones: Python);
 *   - attributes: codec none, CreateTime, neither transactional nor control (the delete-horizon
 *     bit is allowed: it changes nothing in the fold);
 *   - recordsCount >= 0 and exactly that many records filling the batch to its last byte;
 *   - each record: its varints complete inside the record (at most 5 bytes, 10 for the
 *     timestampDelta, 32 / 64 bits kept as Kafka does), key and value inside the record, a key
 *     of at least 2 bytes (a shorter or null key is a note: Python), no headers (headersCount
 *     byte 0 as the record's last byte; any other ending: Python), offset and timestamp sums
 *     that fit in an int64.
 * A batch is parsed completely before any of its records is stored, so a batch handed back has
 * left the store untouched. A read error or short read also hands back (Python reports it).
 *
 * Byte layout: DefaultRecordBatch.java / DefaultRecord.java, the offsets of
 * auditor/formats/record_batch.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "_record_batch.h"
#include "_record_reading.h"

#define NOT_FOLDED_ATTRIBUTES (CODEC_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK)

/* Coordinator keys start with an int16 version (the record type). */
#define KEY_VERSION_LENGTH 2

/* Window policy: the first read after a hand-over is small (the Python path may hand back after
 * a batch or two: a transaction), later ones WINDOW_BYTES. */
#define WINDOW_BYTES (1024 * 1024)
#define FIRST_WINDOW_BYTES (64 * 1024)

typedef struct {
    int64_t key_at, value_at; /* positions inside the batch */
    int64_t key_size, value_size; /* value_size < 0: null (a tombstone) */
    int64_t offset, timestamp_ms;
} rec_t;

typedef struct {
    rec_t *recs;
    int64_t cap;
} scratch_t;

/* Parse every record of one batch (d = the whole entry, n = its size) into s->recs.
 * Returns the record count, -1 when the batch must go to Python, -2 when out of memory. */
static int64_t parse_batch(const unsigned char *d, int64_t n, scratch_t *s) {
    int32_t count = be32(d + RECORDS_COUNT_OFFSET);
    if (count < 0 || count > n - RECORD_BATCH_OVERHEAD) return -1; /* every record takes >= 1 byte */
    if (count > s->cap) {
        int64_t cap = s->cap ? s->cap : 64;
        while (cap < count) cap *= 2;
        rec_t *grown = realloc(s->recs, (size_t)cap * sizeof(rec_t));
        if (grown == NULL) return -2;
        s->recs = grown;
        s->cap = cap;
    }
    int64_t base_offset = be64(d + BASE_OFFSET_OFFSET);
    int64_t base_ts = be64(d + BASE_TIMESTAMP_OFFSET);
    int64_t pos = RECORD_BATCH_OVERHEAD;
    for (int32_t i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta, key_size, value_size;
        if (!read_varint(d, &pos, n, &length)) return -1;
        if (length < 0 || length > n - pos) return -1;
        int64_t body_end = pos + length;
        pos += 1; /* attributes */
        if (!read_varlong(d, &pos, body_end, &ts_delta)) return -1;
        if (!read_varint(d, &pos, body_end, &off_delta)) return -1;
        if (!read_varint(d, &pos, body_end, &key_size)) return -1;
        if (key_size < KEY_VERSION_LENGTH || key_size > body_end - pos) return -1; /* null/short key: a note */
        rec_t *r = &s->recs[i];
        r->key_at = pos;
        r->key_size = key_size;
        pos += key_size;
        if (!read_varint(d, &pos, body_end, &value_size)) return -1;
        if (value_size >= 0) {
            if (value_size > body_end - pos) return -1;
            r->value_at = pos;
            pos += value_size;
        } else {
            r->value_at = 0;
            value_size = -1;
        }
        r->value_size = value_size;
        if (pos + 1 != body_end || d[pos] != 0) return -1; /* headers, or a size mismatch: Python */
        pos = body_end;
        if (__builtin_add_overflow(base_offset, off_delta, &r->offset)) return -1;
        if (__builtin_add_overflow(base_ts, ts_delta, &r->timestamp_ms)) return -1;
    }
    return pos == n ? count : -1;
}

/* Store the parsed records of one batch. 0 on success, -1 with a Python exception set. */
static int store_batch(const unsigned char *d, const rec_t *recs, int64_t count, PyObject *store, PyObject *where) {
    for (int64_t i = 0; i < count; i++) {
        const rec_t *r = &recs[i];
        PyObject *key = PyBytes_FromStringAndSize((const char *)d + r->key_at, (Py_ssize_t)r->key_size);
        if (key == NULL) return -1;
        char *k = PyBytes_AS_STRING(key);
        if (k[0] == 0 && k[1] == 0) k[1] = 1; /* OffsetCommitKey v0 -> the v1 bytes (same layout) */
        PyObject *value;
        if (r->value_size >= 0) {
            value = PyBytes_FromStringAndSize((const char *)d + r->value_at, (Py_ssize_t)r->value_size);
            if (value == NULL) { Py_DECREF(key); return -1; }
        } else {
            value = Py_NewRef(Py_None);
        }
        PyObject *off = PyLong_FromLongLong(r->offset);
        PyObject *ts = PyLong_FromLongLong(r->timestamp_ms);
        PyObject *rec = (off && ts) ? PyTuple_New(5) : NULL;
        if (rec == NULL) {
            Py_XDECREF(off);
            Py_XDECREF(ts);
            Py_DECREF(value);
            Py_DECREF(key);
            return -1;
        }
        PyTuple_SET_ITEM(rec, 0, off);
        PyTuple_SET_ITEM(rec, 1, ts);
        PyTuple_SET_ITEM(rec, 2, value);
        PyTuple_SET_ITEM(rec, 3, Py_NewRef(Py_False));
        PyTuple_SET_ITEM(rec, 4, Py_NewRef(where));
        int rc = PyDict_SetItem(store, key, rec);
        Py_DECREF(key);
        Py_DECREF(rec);
        if (rc < 0) return -1;
    }
    return 0;
}

typedef struct {
    int fd;
    int64_t size;
    PyObject *store, *label;
    unsigned char *buf;
    scratch_t scratch;
    int64_t pos, records, max_bytes;
} fold_t;

/* The whole walk. 0 on success (f->pos = where it stopped), -1 with a Python exception set. */
static int walk(fold_t *f) {
    int64_t buf_start = f->pos, buf_end = f->pos;
    int64_t window = FIRST_WINDOW_BYTES, start = f->pos;
    while (f->size - f->pos >= RECORD_BATCH_OVERHEAD) {
        int64_t pos = f->pos;
        if (f->max_bytes > 0 && pos - start >= f->max_bytes) return 0;
        if (pos + RECORD_BATCH_OVERHEAD > buf_end) {
            int64_t want = window < f->size - pos ? window : f->size - pos;
            if (read_window(f->fd, f->buf, want, pos) < 0) return 0;
            buf_start = pos;
            buf_end = pos + want;
            window = WINDOW_BYTES;
        }
        const unsigned char *h = f->buf + (pos - buf_start);
        int32_t length = be32(h + LENGTH_OFFSET);
        if (length < MIN_BATCH_LENGTH || length > MAX_SIZE_FIELD) return 0;
        if (pos > f->size - LOG_OVERHEAD - (int64_t)length) return 0;
        if (h[MAGIC_OFFSET] != 2) return 0;
        int64_t total = LOG_OVERHEAD + (int64_t)length;
        if (total > WINDOW_BYTES) return 0;
        if (pos + total > buf_end) {
            int64_t want = WINDOW_BYTES < f->size - pos ? WINDOW_BYTES : f->size - pos;
            if (read_window(f->fd, f->buf, want, pos) < 0) return 0;
            buf_start = pos;
            buf_end = pos + want;
            h = f->buf;
        }
        if (be16(h + ATTRIBUTES_OFFSET) & NOT_FOLDED_ATTRIBUTES) return 0;
        int64_t count = parse_batch(h, total, &f->scratch);
        if (count == -2) {
            PyErr_NoMemory();
            return -1;
        }
        if (count < 0) return 0;
        if (count > 0) {
            PyObject *where = Py_BuildValue("(OL)", f->label, (long long)pos);
            if (where == NULL) return -1;
            int rc = store_batch(h, f->scratch.recs, count, f->store, where);
            Py_DECREF(where);
            if (rc < 0) return -1;
        }
        f->records += count;
        f->pos = pos + total;
    }
    return 0;
}

static PyObject *fold_plain(PyObject *self, PyObject *args) {
    fold_t f = {0};
    long long start, size, max_bytes = 0;
    if (!PyArg_ParseTuple(args, "iLLO!U|L", &f.fd, &start, &size, &PyDict_Type, &f.store, &f.label, &max_bytes))
        return NULL;
    if (start < 0 || start > size) {
        PyErr_Format(PyExc_ValueError, "start = %lld, expected 0..%lld", start, size);
        return NULL;
    }
    f.pos = start;
    f.size = size;
    f.max_bytes = max_bytes;
    /* every read is of at most min(WINDOW_BYTES, size - pos) bytes: a file smaller than the window
     * gets a buffer of its own size (a read past it is then a sanitizer report in the fuzz build,
     * and the fuzzer's many small files do not each map and fault in a megabyte) */
    f.buf = malloc(size - start >= WINDOW_BYTES ? WINDOW_BYTES : size > start ? (size_t)(size - start) : 1);
    if (f.buf == NULL) return PyErr_NoMemory();
    int rc = walk(&f);
    free(f.buf);
    free(f.scratch.recs);
    if (rc < 0) return NULL;
    return Py_BuildValue("(LL)", (long long)f.pos, (long long)f.records);
}

static PyMethodDef methods[] = {
    {"fold_plain", fold_plain, METH_VARARGS,
     "fold_plain(fd, start, size, store, label[, max_bytes]) -> (stop_position, records): replay the plain "
     "v2 batches from byte start into store (key -> (offset, timestamp_ms, value, False, (label, batch "
     "position))); stop_position is where the Python path must take over (== size at a clean end), or, "
     "with max_bytes > 0, the first batch boundary at least max_bytes after start."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_coffsets", NULL, -1, methods};

PyMODINIT_FUNC PyInit__coffsets(void) { return PyModule_Create(&module); }
