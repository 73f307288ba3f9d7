/*
 * _cmessage: Kafka ApiMessages decoded in C by interpreting a program built from the generated
 * spec tables (auditor/formats/message_program.py), and the record framing of KRaft metadata
 * batches.
 *
 * Decoder(program, exact, fallback) compiles one (message, version) program into C arrays once.
 * Called like the Python reader of auditor/formats/kafka_message.py, f(buf, pos=0, end=None,
 * file=None, base=0), it returns the same dict (same keys, same order, same value types: int,
 * float, bool, str, bytes, None, list, dict; uuids as Kafka's Uuid.toString(); absent tagged
 * fields with their spec default, unknown tagged fields as {tag: bytes} under
 * "_unknownTaggedFields"), or (dict, end position) when not exact. It decodes only what is
 * regular: every length, count, varint (at most 5 bytes) and fixed-width read inside [pos, end),
 * non-nullable lengths >= 0, flexible string lengths <= 0x7fff, every string valid UTF-8, a
 * tagged value filling its size exactly, an exact message ending at `end`. On anything else it
 * calls `fallback` (the Python reader) with the very arguments it was given, so every error and
 * note is the Python one, word for word. No error is ever decided here.
 *
 * metadata_batch(...) frames the records of one uncompressed v2 batch exactly as
 * metadata_records._fast_records does (one- or two-byte varints, no headers, nothing after the
 * last record). It returns None when the framing is irregular (the Python reader then takes the
 * whole batch), else an iterator that decodes the records one by one as they are asked for:
 * a value whose frame is the usual three bytes (frame version 1, api key < 128, version < 128)
 * of a known (api key, version) through its Decoder, giving factory(label, position, offset,
 * timestamp, False, type, version, fields); any other record (another frame, an unknown type or
 * version, an irregular body) goes to fallback(offset, timestamp, key, value), the Python path,
 * whose entry it gives (None: skipped).
 *
 * Encoding (Kafka's MessageDataGenerator; kafka_message.py's docstring): fields in spec order;
 * big-endian fixed widths; in flexible versions lengths are unsigned varints + 1 (0 = null),
 * else int16 (strings) / int32 (bytes, arrays) with negative = null; a nullable non-tagged
 * struct starts with an int8 marker (negative = null); each struct of a flexible version ends
 * with its tagged fields (count, then tag, size, value).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>

/* the kinds of message_program.KINDS / STRUCT / ARRAY */
enum kind {
    K_BOOL, K_INT8, K_INT16, K_UINT16, K_INT32, K_UINT32, K_INT64, K_FLOAT64, K_UUID,
    K_STRING, K_BYTES, K_STRUCT, K_ARRAY, K_COUNT
};
static const int WIDTH[K_COUNT] = {1, 1, 2, 2, 4, 4, 8, 8, 16, 0, 0, 0, 0};

/* Kafka strings are at most 0x7fff bytes (readString's bound), an unsigned varint 5 bytes. */
#define MAX_STRING_BYTES 0x7FFF
#define MAX_UVARINT_BYTES 5
/* record batch v2: the records start after the 61-byte header (record_batch.RECORDS_OFFSET) */
#define RECORDS_OFFSET 61
/* the usual metadata frame: (api key << 7 | version), both below 128 */
#define FRAME_TABLE_SIZE (128 * 128)
#define METADATA_FRAME_VERSION 1

typedef struct SProg SProg;

typedef struct {
    PyObject *key;        /* interned str */
    int kind;
    int elem;             /* K_ARRAY: element kind */
    int nullable;         /* K_STRUCT: starts with an int8 null marker */
    int flex;             /* lengths as unsigned varints */
    uint64_t tag;
    SProg *sub;           /* K_STRUCT, or K_ARRAY of K_STRUCT */
} FieldOp;

struct SProg {
    int flexible;
    Py_ssize_t nplain, ntagged, ndefaults;
    FieldOp *plain;
    FieldOp *tagged;
    PyObject **dkeys;     /* interned str */
    PyObject **dvals;
};

static PyObject *UNKNOWN_TAGGED;   /* "_unknownTaggedFields" */
static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* ------------------------------------------------------------------------------------------ */
/* programs                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static void free_struct(SProg *p);

static void free_field(FieldOp *f) {
    Py_CLEAR(f->key);
    if (f->sub) {
        free_struct(f->sub);
        f->sub = NULL;
    }
}

static void free_struct(SProg *p) {
    if (!p) return;
    for (Py_ssize_t i = 0; i < p->nplain; i++) free_field(&p->plain[i]);
    for (Py_ssize_t i = 0; i < p->ntagged; i++) free_field(&p->tagged[i]);
    for (Py_ssize_t i = 0; i < p->ndefaults; i++) {
        Py_XDECREF(p->dkeys[i]);
        Py_XDECREF(p->dvals[i]);
    }
    PyMem_Free(p->plain);
    PyMem_Free(p->tagged);
    PyMem_Free(p->dkeys);
    PyMem_Free(p->dvals);
    PyMem_Free(p);
}

static int bad_program(const char *what) {
    PyErr_Format(PyExc_ValueError, "_cmessage: bad program: %s", what);
    return -1;
}

static SProg *compile_struct(PyObject *t);

static PyObject *interned_key(PyObject *k) {
    if (!PyUnicode_CheckExact(k)) {
        bad_program("a field key that is not a str");
        return NULL;
    }
    Py_INCREF(k);
    PyUnicode_InternInPlace(&k);
    return k;
}

/* (key, kind, nullable, flex, sub) */
static int compile_field(PyObject *t, FieldOp *f) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) return bad_program("a field that is not a 5-tuple");
    f->key = interned_key(PyTuple_GET_ITEM(t, 0));
    if (!f->key) return -1;
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
    if (kind < 0 || kind >= K_COUNT) return PyErr_Occurred() ? -1 : bad_program("an unknown kind");
    f->kind = (int)kind;
    f->nullable = PyObject_IsTrue(PyTuple_GET_ITEM(t, 2));
    f->flex = PyObject_IsTrue(PyTuple_GET_ITEM(t, 3));
    if (f->nullable < 0 || f->flex < 0) return -1;
    PyObject *sub = PyTuple_GET_ITEM(t, 4);
    if (kind == K_STRUCT) {
        f->sub = compile_struct(sub);
        return f->sub ? 0 : -1;
    }
    if (kind == K_ARRAY) {
        if (!PyTuple_Check(sub) || PyTuple_GET_SIZE(sub) != 2) return bad_program("an array without (elem, struct)");
        long elem = PyLong_AsLong(PyTuple_GET_ITEM(sub, 0));
        if (elem < 0 || elem > K_STRUCT) return PyErr_Occurred() ? -1 : bad_program("an unknown element kind");
        f->elem = (int)elem;
        if (elem == K_STRUCT) {
            f->sub = compile_struct(PyTuple_GET_ITEM(sub, 1));
            return f->sub ? 0 : -1;
        }
    }
    return 0;
}

/* (flexible, plain fields, tagged (tag, field), defaults (key, value)) */
static SProg *compile_struct(PyObject *t) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
        bad_program("a struct that is not a 4-tuple");
        return NULL;
    }
    PyObject *plain = PyTuple_GET_ITEM(t, 1), *tagged = PyTuple_GET_ITEM(t, 2), *defs = PyTuple_GET_ITEM(t, 3);
    if (!PyTuple_Check(plain) || !PyTuple_Check(tagged) || !PyTuple_Check(defs)) {
        bad_program("struct parts that are not tuples");
        return NULL;
    }
    SProg *p = PyMem_Calloc(1, sizeof(SProg));
    if (!p) return (SProg *)PyErr_NoMemory();
    p->flexible = PyObject_IsTrue(PyTuple_GET_ITEM(t, 0));
    Py_ssize_t np = PyTuple_GET_SIZE(plain), nt = PyTuple_GET_SIZE(tagged), nd = PyTuple_GET_SIZE(defs);
    p->plain = PyMem_Calloc(np ? np : 1, sizeof(FieldOp));
    p->tagged = PyMem_Calloc(nt ? nt : 1, sizeof(FieldOp));
    p->dkeys = PyMem_Calloc(nd ? nd : 1, sizeof(PyObject *));
    p->dvals = PyMem_Calloc(nd ? nd : 1, sizeof(PyObject *));
    if (p->flexible < 0 || !p->plain || !p->tagged || !p->dkeys || !p->dvals) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < np; i++) {
        p->nplain = i + 1;
        if (compile_field(PyTuple_GET_ITEM(plain, i), &p->plain[i]) < 0) goto fail;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *e = PyTuple_GET_ITEM(tagged, i);
        p->ntagged = i + 1;
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2) {
            bad_program("a tagged field that is not (tag, field)");
            goto fail;
        }
        unsigned long long tag = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(e, 0));
        if (PyErr_Occurred()) goto fail;
        p->tagged[i].tag = tag;
        if (compile_field(PyTuple_GET_ITEM(e, 1), &p->tagged[i]) < 0) goto fail;
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        PyObject *e = PyTuple_GET_ITEM(defs, i);
        p->ndefaults = i + 1;
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2) {
            bad_program("a default that is not (key, value)");
            goto fail;
        }
        p->dkeys[i] = interned_key(PyTuple_GET_ITEM(e, 0));
        if (!p->dkeys[i]) goto fail;
        p->dvals[i] = Py_NewRef(PyTuple_GET_ITEM(e, 1));
    }
    return p;
fail:
    free_struct(p);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* decoding: every function returns a new reference, or NULL: "irregular" when no exception is */
/* set (the caller hands the message to the Python reader), an error when one is               */
/* ------------------------------------------------------------------------------------------ */

static inline uint32_t be32(const uint8_t *s) {
    return (uint32_t)s[0] << 24 | (uint32_t)s[1] << 16 | (uint32_t)s[2] << 8 | (uint32_t)s[3];
}

static inline uint64_t be64(const uint8_t *s) { return (uint64_t)be32(s) << 32 | be32(s + 4); }

static int read_uvarint(const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end, uint64_t *out) {
    Py_ssize_t pos = *pp, start = pos;
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
        if (pos >= end) return -1;
        uint8_t x = b[pos++];
        v |= (uint64_t)(x & 0x7F) << shift;
        if (x < 0x80) break;
        shift += 7;
        if (pos - start >= MAX_UVARINT_BYTES) return -1;
    }
    *pp = pos;
    *out = v;
    return 0;
}

/* the length of a string (width 2 when not flexible), bytes or array (width 4); -1.. = null */
static int read_length(int flex, int width, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end, int64_t *n) {
    if (flex) {
        uint64_t u;
        if (read_uvarint(b, pp, end, &u) < 0) return -1;
        *n = (int64_t)u - 1;
        return 0;
    }
    Py_ssize_t pos = *pp;
    if (end - pos < width) return -1;
    *n = width == 2 ? (int64_t)(int16_t)(b[pos] << 8 | b[pos + 1]) : (int64_t)(int32_t)be32(b + pos);
    *pp = pos + width;
    return 0;
}

/* recent uuid strings by their 16 bytes (direct-mapped): a topic or directory ID recurs in record
 * after record, and a str is immutable, so the same object is handed out again */
#define UUID_CACHE_SIZE 1024
static struct {
    uint8_t raw[16];
    PyObject *str;
} uuid_cache[UUID_CACHE_SIZE];

static PyObject *uuid_str(const uint8_t *s) {
    uint64_t h0, h1;
    memcpy(&h0, s, 8);
    memcpy(&h1, s + 8, 8);
    size_t slot = (size_t)(((h0 ^ (h1 * 0x9E3779B97F4A7C15ULL)) * 0x9E3779B97F4A7C15ULL) >> 54) % UUID_CACHE_SIZE;
    if (uuid_cache[slot].str && memcmp(uuid_cache[slot].raw, s, 16) == 0) return Py_NewRef(uuid_cache[slot].str);
    PyObject *u = PyUnicode_New(22, 127);
    if (!u) return NULL;
    Py_UCS1 *d = PyUnicode_1BYTE_DATA(u);
    for (int i = 0; i < 15; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *d++ = B64URL[v >> 18];
        *d++ = B64URL[(v >> 12) & 63];
        *d++ = B64URL[(v >> 6) & 63];
        *d++ = B64URL[v & 63];
    }
    *d++ = B64URL[s[15] >> 2];
    *d = B64URL[(s[15] & 3) << 4];
    memcpy(uuid_cache[slot].raw, s, 16);
    Py_XSETREF(uuid_cache[slot].str, Py_NewRef(u));
    return u;
}

/* one fixed-width value at s (the caller checked the width) */
static PyObject *fixed_value(int kind, const uint8_t *s) {
    switch (kind) {
    case K_BOOL: return Py_NewRef(s[0] ? Py_True : Py_False);
    case K_INT8: return PyLong_FromLong((int8_t)s[0]);
    case K_INT16: return PyLong_FromLong((int16_t)(s[0] << 8 | s[1]));
    case K_UINT16: return PyLong_FromLong((long)(s[0] << 8 | s[1]));
    case K_INT32: return PyLong_FromLong((int32_t)be32(s));
    case K_UINT32: return PyLong_FromUnsignedLong(be32(s));
    case K_INT64: return PyLong_FromLongLong((long long)(int64_t)be64(s));
    case K_FLOAT64: {
        uint64_t u = be64(s);
        double d;
        memcpy(&d, &u, 8);
        return PyFloat_FromDouble(d);
    }
    case K_UUID: return uuid_str(s);
    }
    return NULL;
}

/* a string or bytes value: length, bounds, then the value (NULL + no error: irregular) */
static PyObject *variable_value(int kind, int nullable, int flex, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end) {
    int64_t n;
    if (read_length(flex, kind == K_STRING ? 2 : 4, b, pp, end, &n) < 0) return NULL;
    Py_ssize_t pos = *pp;
    if (n < 0) {
        if (!nullable) return NULL;
        return Py_NewRef(Py_None);
    }
    if (n > end - pos) return NULL;
    if (kind == K_STRING && flex && n > MAX_STRING_BYTES) return NULL;
    *pp = pos + (Py_ssize_t)n;
    if (kind == K_STRING) return PyUnicode_DecodeUTF8((const char *)b + pos, (Py_ssize_t)n, NULL);
    return PyBytes_FromStringAndSize((const char *)b + pos, (Py_ssize_t)n);
}

static PyObject *dec_struct(const SProg *p, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end);

static PyObject *dec_array(const FieldOp *f, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end) {
    int64_t n;
    if (read_length(f->flex, 4, b, pp, end, &n) < 0) return NULL;
    Py_ssize_t pos = *pp;
    if (n < 0) {
        if (!f->nullable) return NULL;
        return Py_NewRef(Py_None);
    }
    if (n > end - pos) return NULL;
    int elem = f->elem;
    if (elem < K_STRING && (int64_t)WIDTH[elem] * n > end - pos) return NULL;
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
        PyObject *v;
        if (elem < K_STRING) {
            v = fixed_value(elem, b + pos);
            pos += WIDTH[elem];
        } else if (elem == K_STRUCT) {
            v = dec_struct(f->sub, b, &pos, end);
        } else {
            v = variable_value(elem, 0, f->flex, b, &pos, end);
        }
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, v);
    }
    *pp = pos;
    return list;
}

static PyObject *dec_value(const FieldOp *f, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end) {
    int kind = f->kind;
    if (kind < K_STRING) {
        Py_ssize_t pos = *pp;
        if (end - pos < WIDTH[kind]) return NULL;
        *pp = pos + WIDTH[kind];
        return fixed_value(kind, b + pos);
    }
    if (kind == K_STRING || kind == K_BYTES) return variable_value(kind, f->nullable, f->flex, b, pp, end);
    if (kind == K_ARRAY) return dec_array(f, b, pp, end);
    /* a struct: a nullable non-tagged one starts with an int8 marker, negative = null */
    if (f->nullable) {
        if (*pp >= end) return NULL;
        if (b[(*pp)++] >= 128) return Py_NewRef(Py_None);
    }
    return dec_struct(f->sub, b, pp, end);
}

/* a fresh copy of a default (lists and dicts are new objects for every message, as in Python) */
static PyObject *fresh(PyObject *d) {
    if (PyList_CheckExact(d)) {
        Py_ssize_t n = PyList_GET_SIZE(d);
        PyObject *l = PyList_New(n);
        if (!l) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = fresh(PyList_GET_ITEM(d, i));
            if (!v) {
                Py_DECREF(l);
                return NULL;
            }
            PyList_SET_ITEM(l, i, v);
        }
        return l;
    }
    if (PyDict_CheckExact(d)) {
        PyObject *o = PyDict_New(), *k, *v;
        Py_ssize_t it = 0;
        if (!o) return NULL;
        while (PyDict_Next(d, &it, &k, &v)) {
            PyObject *c = fresh(v);
            if (!c || PyDict_SetItem(o, k, c) < 0) {
                Py_XDECREF(c);
                Py_DECREF(o);
                return NULL;
            }
            Py_DECREF(c);
        }
        return o;
    }
    return Py_NewRef(d);
}

static int set_new(PyObject *o, PyObject *key, PyObject *v) {   /* steals v */
    int r = PyDict_SetItem(o, key, v);
    Py_DECREF(v);
    return r;
}

/* the tagged fields at the end of a flexible struct; 0 ok, -1 irregular or error */
static int tagged_section(const SProg *p, PyObject *o, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end) {
    uint64_t nt;
    if (read_uvarint(b, pp, end, &nt) < 0) return -1;
    if (nt == 0) return 0;
    if (nt > (uint64_t)(end - *pp)) return -1;
    for (uint64_t k = 0; k < nt; k++) {
        uint64_t tag, size;
        if (read_uvarint(b, pp, end, &tag) < 0 || read_uvarint(b, pp, end, &size) < 0) return -1;
        if (size > (uint64_t)(end - *pp)) return -1;
        Py_ssize_t tend = *pp + (Py_ssize_t)size;
        const FieldOp *f = NULL;
        for (Py_ssize_t i = 0; i < p->ntagged; i++)
            if (p->tagged[i].tag == tag) {
                f = &p->tagged[i];
                break;
            }
        if (f) {
            PyObject *v = dec_value(f, b, pp, end);
            if (!v) return -1;
            if (*pp != tend) {
                Py_DECREF(v);
                return -1;
            }
            if (set_new(o, f->key, v) < 0) return -1;
            continue;
        }
        PyObject *unknown = PyDict_GetItemWithError(o, UNKNOWN_TAGGED);   /* borrowed */
        if (!unknown) {
            if (PyErr_Occurred()) return -1;
            unknown = PyDict_New();
            if (!unknown || set_new(o, UNKNOWN_TAGGED, unknown) < 0) return -1;
        }
        PyObject *t = PyLong_FromUnsignedLongLong(tag);
        PyObject *raw = PyBytes_FromStringAndSize((const char *)b + *pp, (Py_ssize_t)size);
        int r = (t && raw) ? PyDict_SetItem(unknown, t, raw) : -1;
        Py_XDECREF(t);
        Py_XDECREF(raw);
        if (r < 0) return -1;
        *pp = tend;
    }
    return 0;
}

static PyObject *dec_struct(const SProg *p, const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end) {
    PyObject *o = _PyDict_NewPresized(p->nplain + p->ndefaults);
    if (!o) return NULL;
    for (Py_ssize_t i = 0; i < p->nplain; i++) {
        PyObject *v = dec_value(&p->plain[i], b, pp, end);
        if (!v || set_new(o, p->plain[i].key, v) < 0) goto fail;
    }
    for (Py_ssize_t i = 0; i < p->ndefaults; i++) {
        PyObject *v = fresh(p->dvals[i]);
        if (!v || set_new(o, p->dkeys[i], v) < 0) goto fail;
    }
    if (p->flexible && tagged_section(p, o, b, pp, end) < 0) goto fail;
    return o;
fail:
    Py_DECREF(o);
    return NULL;
}

/* NULL with no exception: irregular. An invalid UTF-8 string counts as irregular (the Python
 * reader decodes it as Java does, with replacement characters); other exceptions are errors. */
static int irregular(void) {
    if (!PyErr_Occurred()) return 1;
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Decoder                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    SProg *prog;
    int exact;
    PyObject *fallback;
    PyObject *program;
} Decoder;

static PyTypeObject DecoderType;
static PyObject *Decoder_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static PyObject *Decoder_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *program, *fallback;
    int exact;
    static char *kwlist[] = {"program", "exact", "fallback", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OpO:Decoder", kwlist, &program, &exact, &fallback)) return NULL;
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "Decoder: fallback must be callable");
        return NULL;
    }
    SProg *prog = compile_struct(program);
    if (!prog) return NULL;
    Decoder *d = (Decoder *)type->tp_alloc(type, 0);
    if (!d) {
        free_struct(prog);
        return NULL;
    }
    d->prog = prog;
    d->exact = exact;
    d->fallback = Py_NewRef(fallback);
    d->program = Py_NewRef(program);
    d->vectorcall = Decoder_vectorcall;   /* tp_vectorcall_offset points here */
    return (PyObject *)d;
}

static int Decoder_traverse(Decoder *d, visitproc visit, void *arg) {
    Py_VISIT(d->fallback);
    Py_VISIT(d->program);
    return 0;
}

static int Decoder_clear(Decoder *d) {
    Py_CLEAR(d->fallback);
    Py_CLEAR(d->program);
    return 0;
}

static void Decoder_dealloc(Decoder *d) {
    PyObject_GC_UnTrack(d);
    Decoder_clear(d);
    free_struct(d->prog);
    d->prog = NULL;
    Py_TYPE(d)->tp_free((PyObject *)d);
}

/* decode buf[pos:end] in C: the result (dict, or (dict, end position) when not exact), or NULL:
 * irregular (no exception) or an error */
static PyObject *decode_span(Decoder *d, const uint8_t *b, Py_ssize_t pos, Py_ssize_t end) {
    PyObject *o = dec_struct(d->prog, b, &pos, end);
    if (!o) return NULL;
    if (d->exact) {
        if (pos == end) return o;
        Py_DECREF(o);
        return NULL;
    }
    PyObject *r = Py_BuildValue("(Nn)", o, pos);
    return r;
}

/* the C decode of (buf, pos, end) given as Python objects; NULL + no error: irregular */
static PyObject *decode_objects(Decoder *d, PyObject *buf, PyObject *pos_obj, PyObject *end_obj) {
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return NULL;
    }
    Py_ssize_t pos = 0, end = view.len;
    PyObject *r = NULL;
    if (pos_obj) {
        pos = PyLong_AsSsize_t(pos_obj);
        if (pos == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto done;
        }
    }
    if (end_obj && end_obj != Py_None) {
        end = PyLong_AsSsize_t(end_obj);
        if (end == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto done;
        }
    }
    if (pos < 0 || end > view.len || pos > end) goto done;
    r = decode_span(d, (const uint8_t *)view.buf, pos, end);
done:
    PyBuffer_Release(&view);
    return r;
}

static const char *const ARG_NAMES[] = {"buf", "pos", "end", "file", "base"};

static PyObject *Decoder_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Decoder *d = (Decoder *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *a[5] = {NULL, NULL, NULL, NULL, NULL};
    if (nargs > 5) goto fallback;
    for (Py_ssize_t i = 0; i < nargs; i++) a[i] = args[i];
    if (kwnames) {
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
            const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
            int idx = -1;
            if (!name) {
                PyErr_Clear();
                goto fallback;
            }
            for (int j = 0; j < 5; j++)
                if (strcmp(name, ARG_NAMES[j]) == 0) idx = j;
            if (idx < 0 || a[idx]) goto fallback;
            a[idx] = args[nargs + k];
        }
    }
    if (!a[0]) goto fallback;
    PyObject *r = decode_objects(d, a[0], a[1], a[2]);
    if (r) return r;
    if (!irregular()) return NULL;
fallback:
    return PyObject_Vectorcall(d->fallback, args, nargsf, kwnames);
}

static PyObject *Decoder_c_decode(Decoder *d, PyObject *args, PyObject *kwds) {
    PyObject *buf, *pos = NULL, *end = NULL;
    static char *kwlist[] = {"buf", "pos", "end", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OO:c_decode", kwlist, &buf, &pos, &end)) return NULL;
    PyObject *r = decode_objects(d, buf, pos, end);
    if (r) return r;
    if (!irregular()) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef Decoder_methods[] = {
    {"c_decode", (PyCFunction)(void (*)(void))Decoder_c_decode, METH_VARARGS | METH_KEYWORDS,
     "c_decode(buf, pos=0, end=None): the C decode alone: the result, or None where the Python reader "
     "would be asked (irregular input)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Decoder_members[] = {
    {"fallback", T_OBJECT, offsetof(Decoder, fallback), READONLY, "the Python reader"},
    {"program", T_OBJECT, offsetof(Decoder, program), READONLY, "the program it was built from"},
    {"exact", T_BOOL, offsetof(Decoder, exact), READONLY, "the message must end exactly at end"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "auditor.formats._cmessage.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_vectorcall_offset = offsetof(Decoder, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Decoder(program, exact, fallback): one (message, version) of the spec tables, decoded in C; "
              "called like the Python reader it falls back to.",
    .tp_traverse = (traverseproc)Decoder_traverse,
    .tp_clear = (inquiry)Decoder_clear,
    .tp_methods = Decoder_methods,
    .tp_members = Decoder_members,
    .tp_new = Decoder_new,
};

/* ------------------------------------------------------------------------------------------ */
/* metadata batches                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* a zigzag varint of one or two bytes (as metadata_records._varint2); -1: irregular */
static inline int varint2(const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end, int64_t *out) {
    Py_ssize_t pos = *pp;
    if (pos >= end) return -1;
    uint32_t u = b[pos];
    if (u < 0x80) {
        *pp = pos + 1;
    } else {
        if (pos + 1 >= end || b[pos + 1] >= 0x80) return -1;
        u = (u & 0x7F) | (uint32_t)b[pos + 1] << 7;
        *pp = pos + 2;
    }
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 0;
}

typedef struct {
    Py_ssize_t key_pos, value_pos;   /* -1: null */
    int64_t key_size, value_size;
    int64_t offset, timestamp;
} Framed;

/* one record's framing at *pp, as _fast_records (0 ok, -1 irregular) */
static int frame_record(const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end, int64_t base_offset, int64_t base_ts,
                        int has_log_append, int64_t log_append, Framed *r) {
    Py_ssize_t pos = *pp;
    int64_t length, ts_delta, off_delta, size;
    r->key_size = r->value_size = 0;
    if (varint2(b, &pos, end, &length) < 0) return -1;
    Py_ssize_t body_end = pos + length;
    if (length < 0 || length > end - pos) return -1;
    pos += 1;                                         /* attributes */
    if (varint2(b, &pos, body_end, &ts_delta) < 0 || varint2(b, &pos, body_end, &off_delta) < 0) return -1;
    if (pos < body_end && b[pos] == 1) {              /* keyLength -1: null */
        r->key_pos = -1;
        pos += 1;
    } else {
        if (varint2(b, &pos, body_end, &size) < 0) return -1;
        if (size >= 0) {
            if (size > body_end - pos) return -1;
            r->key_pos = pos;
            r->key_size = size;
            pos += size;
        } else {
            r->key_pos = -1;
        }
    }
    if (varint2(b, &pos, body_end, &size) < 0) return -1;
    if (size >= 0) {
        if (size > body_end - pos) return -1;
        r->value_pos = pos;
        r->value_size = size;
        pos += size;
    } else {
        r->value_pos = -1;
    }
    if (pos + 1 != body_end || b[pos] != 0) return -1;   /* headersCount 0, then the end of the record */
    if (off_delta < 0) return -1;   /* below the batch's baseOffset (corrupt): the Python path notes it */
    if (__builtin_add_overflow(base_offset, off_delta, &r->offset)) return -1;
    if (has_log_append) {
        r->timestamp = log_append;
    } else if (__builtin_add_overflow(base_ts, ts_delta, &r->timestamp)) {
        return -1;
    }
    *pp = body_end;
    return 0;
}

static PyObject *slice_or_none(const uint8_t *b, Py_ssize_t pos, int64_t size) {
    if (pos < 0) return Py_NewRef(Py_None);
    return PyBytes_FromStringAndSize((const char *)b + pos, (Py_ssize_t)size);
}

/* the entry of one framed record, or NULL + no error when Python must read it */
static PyObject *decoded_entry(const uint8_t *b, const Framed *r, PyObject *table, PyObject *factory,
                               PyObject *label, PyObject *position, PyObject *offset, PyObject *ts) {
    if (r->value_pos < 0 || r->value_size <= 2) return NULL;
    const uint8_t *v = b + r->value_pos;
    if (v[0] != METADATA_FRAME_VERSION || v[1] >= 0x80 || v[2] >= 0x80) return NULL;
    if (PyList_GET_SIZE(table) != FRAME_TABLE_SIZE) return NULL;
    PyObject *hit = PyList_GET_ITEM(table, v[1] << 7 | v[2]);
    if (hit == Py_None || !PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 3) return NULL;
    PyObject *dec = PyTuple_GET_ITEM(hit, 2);
    if (Py_TYPE(dec) != &DecoderType || !((Decoder *)dec)->exact) return NULL;
    Py_INCREF(hit);   /* held while the factory (Python code) runs */
    Py_ssize_t vend = r->value_pos + (Py_ssize_t)r->value_size;
    PyObject *data = decode_span((Decoder *)dec, b, r->value_pos + 3, vend), *entry = NULL;
    if (data) {
        PyObject *args[8] = {label, position, offset, ts, Py_False, PyTuple_GET_ITEM(hit, 0),
                             PyTuple_GET_ITEM(hit, 1), data};
        entry = PyObject_Vectorcall(factory, args, 8, NULL);
        Py_DECREF(data);
    }
    Py_DECREF(hit);
    return entry;
}

/* the records of one batch, framed up front, decoded one by one as they are asked for (so that
 * each entry can die young: no batch-long list of decoded records for the collector to walk) */
typedef struct {
    PyObject_HEAD
    Py_buffer view;
    Framed *recs;
    Py_ssize_t n, next, fallbacks;
    long long start_offset;
    PyObject *table, *factory, *fallback, *label, *position;
} BatchIter;

static PyTypeObject BatchIterType;

static int BatchIter_traverse(BatchIter *it, visitproc visit, void *arg) {
    Py_VISIT(it->table);
    Py_VISIT(it->factory);
    Py_VISIT(it->fallback);
    Py_VISIT(it->label);
    Py_VISIT(it->position);
    return 0;
}

static int BatchIter_clear(BatchIter *it) {
    Py_CLEAR(it->table);
    Py_CLEAR(it->factory);
    Py_CLEAR(it->fallback);
    Py_CLEAR(it->label);
    Py_CLEAR(it->position);
    return 0;
}

static void BatchIter_dealloc(BatchIter *it) {
    PyObject_GC_UnTrack(it);
    BatchIter_clear(it);
    if (it->view.obj) PyBuffer_Release(&it->view);
    PyMem_Free(it->recs);
    Py_TYPE(it)->tp_free((PyObject *)it);
}

/* the next entry: decoded here, or what fallback(offset, timestamp, key, value) makes of the
 * record (None: skipped, the Python path noted why) */
static PyObject *BatchIter_next(BatchIter *it) {
    const uint8_t *b = (const uint8_t *)it->view.buf;
    while (it->next < it->n) {
        const Framed *r = &it->recs[it->next++];
        if (r->offset < it->start_offset) continue;
        PyObject *offset = PyLong_FromLongLong(r->offset), *ts = PyLong_FromLongLong(r->timestamp), *item = NULL;
        if (offset && ts) {
            item = decoded_entry(b, r, it->table, it->factory, it->label, it->position, offset, ts);
            if (!item && irregular()) {
                PyObject *key = slice_or_none(b, r->key_pos, r->key_size);
                PyObject *value = slice_or_none(b, r->value_pos, r->value_size);
                if (key && value) {
                    PyObject *args[4] = {offset, ts, key, value};
                    item = PyObject_Vectorcall(it->fallback, args, 4, NULL);
                }
                Py_XDECREF(key);
                Py_XDECREF(value);
                it->fallbacks++;
            }
        }
        Py_XDECREF(offset);
        Py_XDECREF(ts);
        if (item != Py_None) return item;   /* an entry, or NULL with the error set */
        Py_DECREF(item);
    }
    return NULL;
}

static PyMemberDef BatchIter_members[] = {
    {"fallbacks", T_PYSSIZET, offsetof(BatchIter, fallbacks), READONLY, "records handed to fallback so far"},
    {"count", T_PYSSIZET, offsetof(BatchIter, n), READONLY, "records in the batch"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BatchIterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "auditor.formats._cmessage.BatchIter",
    .tp_basicsize = sizeof(BatchIter),
    .tp_dealloc = (destructor)BatchIter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The entries of one metadata batch (metadata_batch).",
    .tp_traverse = (traverseproc)BatchIter_traverse,
    .tp_clear = (inquiry)BatchIter_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)BatchIter_next,
    .tp_members = BatchIter_members,
};

/* frame every record of the batch (as _fast_records): 0, or -1 when the framing is irregular */
static int frame_batch(BatchIter *it, long long count, long long base_offset, long long base_ts, int has_log_append,
                       long long log_append) {
    const uint8_t *b = (const uint8_t *)it->view.buf;
    Py_ssize_t pos = RECORDS_OFFSET, end = it->view.len;
    /* a record takes at least 7 bytes: a count the bytes cannot hold is irregular (and bounds the array) */
    if (count < 0 || end < RECORDS_OFFSET || count > (end - RECORDS_OFFSET) / 7) return -1;
    it->recs = PyMem_Calloc(count ? (size_t)count : 1, sizeof(Framed));
    if (!it->recs) {
        PyErr_NoMemory();
        return -2;
    }
    for (long long k = 0; k < count; k++)
        if (frame_record(b, &pos, end, base_offset, base_ts, has_log_append, log_append, &it->recs[k]) < 0) return -1;
    it->n = (Py_ssize_t)count;
    return pos == end ? 0 : -1;
}

static PyObject *metadata_batch(PyObject *mod, PyObject *args) {
    (void)mod;
    long long count, base_offset, base_ts, start_offset, log_append = 0;
    PyObject *data, *log_append_obj, *table, *factory, *fallback, *label, *position;
    if (!PyArg_ParseTuple(args, "OLLLOLO!OOOO:metadata_batch", &data, &count, &base_offset, &base_ts, &log_append_obj,
                          &start_offset, &PyList_Type, &table, &factory, &fallback, &label, &position))
        return NULL;
    if (PyList_GET_SIZE(table) != FRAME_TABLE_SIZE) {
        PyErr_SetString(PyExc_ValueError, "metadata_batch: the frame table must have 128 * 128 entries");
        return NULL;
    }
    int has_log_append = log_append_obj != Py_None;
    if (has_log_append) {
        log_append = PyLong_AsLongLong(log_append_obj);
        if (log_append == -1 && PyErr_Occurred()) return NULL;
    }
    BatchIter *it = PyObject_GC_New(BatchIter, &BatchIterType);
    if (!it) return NULL;
    memset(&it->view, 0, sizeof(Py_buffer));
    it->recs = NULL;
    it->n = it->next = it->fallbacks = 0;
    it->start_offset = start_offset;
    it->table = Py_NewRef(table);
    it->factory = Py_NewRef(factory);
    it->fallback = Py_NewRef(fallback);
    it->label = Py_NewRef(label);
    it->position = Py_NewRef(position);
    PyObject_GC_Track(it);
    if (PyObject_GetBuffer(data, &it->view, PyBUF_SIMPLE) < 0) {
        it->view.obj = NULL;
        Py_DECREF(it);
        return NULL;
    }
    int rc = frame_batch(it, count, base_offset, base_ts, has_log_append, log_append);
    if (rc == 0) return (PyObject *)it;
    Py_DECREF(it);
    if (rc == -2) return NULL;
    Py_RETURN_NONE;   /* the Python reader takes the whole batch */
}

static PyMethodDef methods[] = {
    {"metadata_batch", metadata_batch, METH_VARARGS,
     "metadata_batch(data, count, base_offset, base_ts, log_append_ts, start_offset, table, factory, fallback, "
     "label, position): an iterator over the entries of one uncompressed v2 batch of metadata records, None "
     "when its framing needs the Python reader."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cmessage", NULL, -1, methods};

PyMODINIT_FUNC PyInit__cmessage(void) {
    if (PyType_Ready(&DecoderType) < 0 || PyType_Ready(&BatchIterType) < 0) return NULL;
    UNKNOWN_TAGGED = PyUnicode_InternFromString("_unknownTaggedFields");
    if (!UNKNOWN_TAGGED) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Decoder", (PyObject *)&DecoderType) < 0 ||
        PyModule_AddIntConstant(m, "FRAME_TABLE_SIZE", FRAME_TABLE_SIZE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
