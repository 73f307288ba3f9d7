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

/* ---- StreamFold: one compressed batch's records, decompressed by the caller and fed in pieces ---- */

/* A compressed batch used to be read by offsets_records.iter_key_values: the whole stream in one
 * buffer and a Python tuple per record (a gzip batch at the 256 MiB cap of 38 million null-key
 * records: ~38 CPU s, and a note each). StreamFold takes the decompressed stream in pieces and
 * folds each complete record as fold_records_into does: store[key] = (offset, timestamp_ms, value |
 * None, transactional, where), OffsetCommitKey v0 keys under the v1 bytes; a record whose key is
 * null or shorter than 2 bytes is counted (the offsets of the first BAD_KEYS_NOTED, then how many
 * more, and the first and last offset of those). A record cut by a piece's end is carried (copied
 * to `carry`, completed from the next piece). At a record iter_key_values would raise for, or whose
 * offset or timestamp does not fit in an int64 (Python's ints do), the fold stops: result() says
 * which record and where, and the Python loop reads the stream from there (so every error text is
 * the Python one): from that record's bytes alone (refused_bytes(): its length varint and body, as
 * many as the loop reads before it raises; the pieces after it are still taken, not kept, so that
 * fed is the stream's end), or, for an int64 overflow the loop reads past, from the whole stream. */
#define BAD_KEYS_NOTED 3

typedef struct {
    PyObject_HEAD
    PyObject *store, *where, *transactional;
    int64_t count, left, base_offset, base_ts, log_append;
    int has_log_append, refused;
    int whole;               /* refused where the Python loop reads on past the record: it needs the whole stream */
    int64_t fed, refused_at; /* bytes fed; the stream position of the refused record */
    unsigned char *kept;     /* refused: that record's bytes, as many as the Python loop reads before it raises */
    int64_t kept_len, kept_cap;
    int64_t first_bad[BAD_KEYS_NOTED];
    int nfirst_bad;
    int64_t more_bad, more_first, more_last;
    unsigned char *carry;
    int64_t carry_len, carry_cap;
} StreamFold;

static void stream_fold_dealloc(StreamFold *self) {
    Py_XDECREF(self->store);
    Py_XDECREF(self->where);
    Py_XDECREF(self->transactional);
    free(self->carry);
    free(self->kept);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int stream_fold_init(StreamFold *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"count", "base_offset", "base_ts", "log_append_ts", "store", "transactional", "where",
                             NULL};
    long long count, base_offset, base_ts;
    PyObject *log_append, *store, *where;
    int transactional;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "LLLOO!pO:StreamFold", kwlist, &count, &base_offset, &base_ts,
                                     &log_append, &PyDict_Type, &store, &transactional, &where))
        return -1;
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "count = %lld, expected >= 0", count);
        return -1;
    }
    self->has_log_append = log_append != Py_None;
    if (self->has_log_append) {
        self->log_append = PyLong_AsLongLong(log_append);
        if (self->log_append == -1 && PyErr_Occurred()) return -1;
    }
    Py_XSETREF(self->store, Py_NewRef(store));
    Py_XSETREF(self->where, Py_NewRef(where));
    Py_XSETREF(self->transactional, Py_NewRef(transactional ? Py_True : Py_False));
    self->count = self->left = count;
    self->base_offset = base_offset;
    self->base_ts = base_ts;
    self->refused = self->whole = 0;
    self->fed = self->refused_at = 0;
    self->kept_len = 0;
    self->nfirst_bad = 0;
    self->more_bad = self->more_first = self->more_last = 0;
    self->carry_len = 0;
    return 0;
}

/* One record's body d[pos, body_end) read as iter_key_values reads it: 1 (the fields filled), or 0
 * where that loop raises. */
static int parse_key_value(const unsigned char *d, int64_t pos, int64_t body_end, rec_t *r, int64_t *off_delta,
                           int64_t *ts_delta) {
    int64_t key_size, value_size;
    pos += 1; /* attributes */
    if (!read_varlong(d, &pos, body_end, ts_delta)) return 0;
    if (!read_varint(d, &pos, body_end, off_delta)) return 0;
    if (!read_varint(d, &pos, body_end, &key_size)) return 0;
    r->key_at = pos;
    r->key_size = key_size;
    if (key_size >= 0) {
        if (key_size > body_end - pos) return 0;
        pos += key_size;
    }
    if (!read_varint(d, &pos, body_end, &value_size)) return 0;
    r->value_at = pos;
    r->value_size = value_size < 0 ? -1 : value_size;
    if (value_size >= 0) {
        if (value_size > body_end - pos) return 0;
        pos += value_size;
    }
    if (pos < body_end && d[pos] == 0) {
        pos += 1; /* headersCount 0: the usual case */
    } else {
        int64_t nheaders;
        if (!read_varint(d, &pos, body_end, &nheaders) || nheaders < 0) return 0;
        for (int64_t h = 0; h < nheaders; h++) { /* bounded by the bytes: each read takes one at least */
            int64_t hk, hv;
            if (!read_varint(d, &pos, body_end, &hk) || hk < 0) return 0;
            pos += hk; /* past body_end: the next read fails, as in Python */
            if (!read_varint(d, &pos, body_end, &hv)) return 0;
            if (hv > 0) pos += hv;
        }
    }
    return pos == body_end;
}

/* b[0, n) into the refused record's kept bytes, as many as it still lacks (record_lacks), nothing
 * after recordsCount records (the loop then names the bytes after the last record, and the stream's
 * end, fed, says how many): 0, -1 out of memory. */
static int keep_more(StreamFold *self, const unsigned char *b, int64_t n) {
    if (self->left == 0) return 0;
    return keep_record_bytes(&self->kept, &self->kept_len, &self->kept_cap, b, n);
}

/* The record at stream position `at` is refused; its bytes so far are a[0, a_len) then b[0, b_len)
 * (the carry, then the piece; either may be empty): kept as the Python loop will read them.
 * whole: the Python loop would read this record (an offset or timestamp past int64) and go on, so
 * it gets the whole stream instead. 0, -1 out of memory. */
static int stream_refuse(StreamFold *self, int64_t at, const unsigned char *a, int64_t a_len,
                         const unsigned char *b, int64_t b_len, int whole) {
    self->refused = 1;
    self->refused_at = at;
    self->whole = whole;
    self->kept_len = 0;
    int rc = whole ? 0 : keep_more(self, a, a_len);
    if (rc == 0 && !whole) rc = keep_more(self, b, b_len);
    self->carry_len = 0;
    return rc;
}

/* The record d[start, body_end), its body from `body`, at stream position `at`: folded (0), refused
 * (0, self->refused set), or -1 with a Python exception set. */
static int stream_record(StreamFold *self, const unsigned char *d, int64_t start, int64_t body, int64_t body_end,
                         int64_t at) {
    rec_t r;
    int64_t off_delta, ts_delta;
    if (!parse_key_value(d, body, body_end, &r, &off_delta, &ts_delta))
        return stream_refuse(self, at, d + start, body_end - start, NULL, 0, 0);
    if (__builtin_add_overflow(self->base_offset, off_delta, &r.offset) ||
        (!self->has_log_append && __builtin_add_overflow(self->base_ts, ts_delta, &r.timestamp_ms)))
        return stream_refuse(self, at, NULL, 0, NULL, 0, 1);
    if (self->has_log_append) r.timestamp_ms = self->log_append;
    self->left--;
    if (r.key_size < KEY_VERSION_LENGTH) { /* null or too short: counted for the notes */
        if (self->nfirst_bad < BAD_KEYS_NOTED) {
            self->first_bad[self->nfirst_bad++] = r.offset;
        } else {
            if (self->more_bad == 0) self->more_first = r.offset;
            self->more_bad++;
            self->more_last = r.offset;
        }
        return 0;
    }
    PyObject *key = PyBytes_FromStringAndSize((const char *)d + r.key_at, (Py_ssize_t)r.key_size);
    if (key == NULL) return -1;
    char *k = PyBytes_AS_STRING(key);
    if (k[0] == 0 && k[1] == 0) k[1] = 1; /* OffsetCommitKey v0 -> the v1 bytes (same layout) */
    PyObject *value = r.value_size >= 0 ? PyBytes_FromStringAndSize((const char *)d + r.value_at,
                                                                    (Py_ssize_t)r.value_size)
                                        : Py_NewRef(Py_None);
    PyObject *rec = value ? Py_BuildValue("(LLOOO)", (long long)r.offset, (long long)r.timestamp_ms, value,
                                          self->transactional, self->where)
                          : NULL;
    int rc = rec ? PyDict_SetItem(self->store, key, rec) : -1;
    Py_XDECREF(rec);
    Py_XDECREF(value);
    Py_DECREF(key);
    return rc < 0 ? -1 : 0;
}

static int stream_carry_append(StreamFold *self, const unsigned char *b, int64_t n) {
    if (n == 0) return 0;
    if (self->carry_len + n > self->carry_cap) {
        int64_t cap = self->carry_cap ? self->carry_cap : 4096;
        while (cap < self->carry_len + n) cap *= 2;
        unsigned char *grown = realloc(self->carry, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->carry = grown;
        self->carry_cap = cap;
    }
    memcpy(self->carry + self->carry_len, b, (size_t)n);
    self->carry_len += n;
    return 0;
}

/* The bytes the carried record still lacks (its length varint complete: the rest of its body; else
 * one more byte); -1 when the carry already shows it unreadable. */
static int64_t stream_carry_lacks(const StreamFold *self) {
    int64_t body = 0, length;
    if (!read_varint(self->carry, &body, self->carry_len, &length))
        return self->carry_len < MAX_VARINT_BYTES ? 1 : -1;
    if (length < 0) return -1;
    return body + length - self->carry_len;
}

/* One piece at stream position self->fed: 0, or -1 with a Python exception set. */
static int stream_feed(StreamFold *self, const unsigned char *b, int64_t n) {
    int64_t pos = 0;
    int64_t carry_at = self->fed - self->carry_len;
    while (self->carry_len > 0 && pos < n && !self->refused) { /* complete the carried record first */
        int64_t lacks = stream_carry_lacks(self);
        if (lacks < 0) return stream_refuse(self, carry_at, self->carry, self->carry_len, b + pos, n - pos, 0);
        int64_t take = lacks < n - pos ? lacks : n - pos;
        if (stream_carry_append(self, b + pos, take) < 0) return -1;
        pos += take;
        lacks = stream_carry_lacks(self);
        if (lacks > 0) continue;
        int64_t body = 0, length;
        if (lacks < 0 || !read_varint(self->carry, &body, self->carry_len, &length))
            return stream_refuse(self, carry_at, self->carry, self->carry_len, b + pos, n - pos, 0);
        if (stream_record(self, self->carry, 0, body, body + length, carry_at) < 0) return -1;
        self->carry_len = 0;
        carry_at = self->fed + pos;
    }
    while (!self->refused && pos < n) {
        if (self->left == 0) /* bytes after the last record */
            return stream_refuse(self, self->fed + pos, NULL, 0, NULL, 0, 0);
        int64_t body = pos, length;
        if (!read_varint(b, &body, n, &length)) {
            if (n - pos < MAX_VARINT_BYTES) break; /* cut by the piece's end: carried */
            return stream_refuse(self, self->fed + pos, b + pos, n - pos, NULL, 0, 0);
        }
        if (length < 0) return stream_refuse(self, self->fed + pos, b + pos, n - pos, NULL, 0, 0);
        if (length > n - body) break; /* carried */
        if (stream_record(self, b, pos, body, body + length, self->fed + pos) < 0) return -1;
        if (!self->refused) pos = body + length;
    }
    if (!self->refused && pos < n) return stream_carry_append(self, b + pos, n - pos);
    return 0;
}

/* StreamFold.feed(piece) -> bool: False once a record was refused. */
static PyObject *stream_fold_feed(StreamFold *self, PyObject *arg) {
    if (self->store == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "StreamFold: not initialised");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int rc = !self->refused ? stream_feed(self, view.buf, view.len)
                            : self->whole ? 0 : keep_more(self, view.buf, view.len);
    self->fed += view.len;
    PyBuffer_Release(&view);
    if (rc < 0) return NULL;
    return PyBool_FromLong(!self->refused);
}

/* StreamFold.result() -> (records folded, first bad-key offsets, more bad keys, their first offset,
 * their last offset, refused): refused None when recordsCount records filled the stream exactly,
 * else (record index, stream position) where the Python loop must read on. */
static PyObject *stream_fold_result(StreamFold *self, PyObject *unused) {
    (void)unused;
    if (self->store == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "StreamFold: not initialised");
        return NULL;
    }
    if (!self->refused && (self->left > 0 || self->carry_len > 0) && /* the stream ended inside or before a record */
        stream_refuse(self, self->fed - self->carry_len, self->carry, self->carry_len, NULL, 0, 0) < 0)
        return NULL;
    PyObject *first = PyList_New(self->nfirst_bad);
    if (first == NULL) return NULL;
    for (int i = 0; i < self->nfirst_bad; i++) {
        PyObject *o = PyLong_FromLongLong(self->first_bad[i]);
        if (o == NULL) {
            Py_DECREF(first);
            return NULL;
        }
        PyList_SET_ITEM(first, i, o);
    }
    PyObject *refused = self->refused ? Py_BuildValue("(LL)", (long long)(self->count - self->left),
                                                      (long long)self->refused_at)
                                      : Py_NewRef(Py_None);
    if (refused == NULL) {
        Py_DECREF(first);
        return NULL;
    }
    if (self->more_bad == 0)
        return Py_BuildValue("(LNLOON)", (long long)(self->count - self->left), first, 0LL, Py_None, Py_None,
                             refused);
    return Py_BuildValue("(LNLLLN)", (long long)(self->count - self->left), first, (long long)self->more_bad,
                         (long long)self->more_first, (long long)self->more_last, refused);
}

/* StreamFold.refused_bytes() -> the refused record's kept bytes, or None (none refused, or the
 * Python loop needs the whole stream). */
static PyObject *stream_fold_refused_bytes(StreamFold *self, PyObject *unused) {
    (void)unused;
    if (!self->refused || self->whole) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(self->kept_len ? (const char *)self->kept : "", (Py_ssize_t)self->kept_len);
}

static PyObject *stream_fold_fed(StreamFold *self, void *closure) {
    (void)closure;
    return PyLong_FromLongLong(self->fed);
}

static PyGetSetDef stream_fold_getset[] = {
    {"fed", (getter)stream_fold_fed, NULL, "bytes fed so far (after the last piece: the stream's end)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef stream_fold_methods[] = {
    {"feed", (PyCFunction)stream_fold_feed, METH_O, "feed(piece) -> bool: the next decompressed bytes."},
    {"refused_bytes", (PyCFunction)stream_fold_refused_bytes, METH_NOARGS,
     "refused_bytes() -> bytes | None: the refused record's bytes, as many as the Python loop reads before it "
     "raises (None: nothing refused, or a record the Python loop reads on from: it needs the whole stream)."},
    {"result", (PyCFunction)stream_fold_result, METH_NOARGS,
     "result() -> (records, first_bad_offsets, more_bad, more_first, more_last, refused (index, position) | None)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StreamFoldType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "auditor.formats._coffsets.StreamFold",
    .tp_basicsize = sizeof(StreamFold),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)stream_fold_init,
    .tp_dealloc = (destructor)stream_fold_dealloc,
    .tp_methods = stream_fold_methods,
    .tp_getset = stream_fold_getset,
    .tp_doc = "StreamFold(count, base_offset, base_ts, log_append_ts, store, transactional, where): the records of "
              "one compressed __consumer_offsets batch folded into store as offsets_records.fold_records_into "
              "does, the decompressed stream fed in pieces.",
};

static PyMethodDef methods[] = {
    {"fold_plain", fold_plain, METH_VARARGS,
     "fold_plain(fd, start, size, store, label[, max_bytes]) -> (stop_position, records): replay the plain "
     "v2 batches from byte start into store (key -> (offset, timestamp_ms, value, False, (label, batch "
     "position))); stop_position is where the Python path must take over (== size at a clean end), or, "
     "with max_bytes > 0, the first batch boundary at least max_bytes after start."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_coffsets", NULL, -1, methods};

PyMODINIT_FUNC PyInit__coffsets(void) {
    if (PyType_Ready(&StreamFoldType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "StreamFold", (PyObject *)&StreamFoldType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
