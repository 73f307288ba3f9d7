/* Readers shared by the C extensions that read records (_coffsets.c, auditor/keys/_ckeys.c): Kafka's
 * zigzag varints inside a bound (ByteUtils.readVarint / readVarlong; auditor/formats/varint.py), and
 * an exact pread (never mmap, never a write). Include after Python.h (the pread releases the GIL). */
#ifndef KLA_RECORD_READING_H
#define KLA_RECORD_READING_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_VARINT_BYTES 5
#define MAX_VARLONG_BYTES 10

/* Unsigned LEB128 of at most max_bytes, inside [*pos, end); 0 when incomplete or too long. */
static inline int read_unsigned(const unsigned char *d, int64_t *pos, int64_t end, int max_bytes, uint64_t *out) {
    uint64_t raw = 0;
    int64_t p = *pos;
    for (int i = 0; i < max_bytes; i++, p++) {
        if (p >= end) return 0;
        unsigned b = d[p];
        raw |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *pos = p + 1;
            *out = raw;
            return 1;
        }
    }
    return 0;
}

/* A zigzag int32 varint (32 bits of the raw value kept, as ByteUtils.readVarint). */
static inline int read_varint(const unsigned char *d, int64_t *pos, int64_t end, int64_t *out) {
    uint64_t raw;
    if (*pos < end && !(d[*pos] & 0x80)) { /* one byte: most sizes and deltas */
        unsigned b = d[(*pos)++];
        *out = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        return 1;
    }
    if (!read_unsigned(d, pos, end, MAX_VARINT_BYTES, &raw)) return 0;
    uint32_t r = (uint32_t)raw;
    *out = (int64_t)(int32_t)((r >> 1) ^ (uint32_t)(-(int32_t)(r & 1)));
    return 1;
}

/* A zigzag int64 varlong (ByteUtils.readVarlong). */
static inline int read_varlong(const unsigned char *d, int64_t *pos, int64_t end, int64_t *out) {
    uint64_t raw;
    if (!read_unsigned(d, pos, end, MAX_VARLONG_BYTES, &raw)) return 0;
    *out = (int64_t)((raw >> 1) ^ (uint64_t)(-(int64_t)(raw & 1)));
    return 1;
}

/* Exactly `want` bytes at `pos`, or -1 (read error, or the file shrank under us). */
static inline int read_window(int fd, unsigned char *buf, int64_t want, int64_t pos) {
    int64_t got = 0;
    while (got < want) {
        ssize_t r;
        Py_BEGIN_ALLOW_THREADS
        r = pread(fd, buf + got, (size_t)(want - got), (off_t)(pos + got));
        Py_END_ALLOW_THREADS
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += r;
    }
    return 0;
}

/* The bytes of a refused v2 record kept for the Python loop's note (the key scan's and the
 * __consumer_offsets replay's stream folds): appended in pieces as they come. */

/* b[0, n) appended to *buf (of *len bytes, *cap allocated), grown by doubling: 0, -1 out of memory
 * (exception set). */
static int grow_append(unsigned char **buf, int64_t *len, int64_t *cap, const unsigned char *b, int64_t n) {
    if (n == 0) return 0;
    if (*len + n > *cap) {
        int64_t c = *cap ? *cap : 4096;
        while (c < *len + n) c *= 2;
        unsigned char *grown = realloc(*buf, (size_t)c);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *buf = grown;
        *cap = c;
    }
    memcpy(*buf + *len, b, (size_t)n);
    *len += n;
    return 0;
}

/* What a refused record, of which kept[0, kept_len) is known, still lacks of the bytes
 * iter_records reads before it raises: its length varint (up to MAX_VARINT_BYTES), then, when that
 * is a length >= 0, its body (whose reads stay inside it). */
static int64_t record_lacks(const unsigned char *kept, int64_t kept_len) {
    int64_t body = 0, length;
    if (!read_varint(kept, &body, kept_len, &length))
        return kept_len < MAX_VARINT_BYTES ? MAX_VARINT_BYTES - kept_len : 0;
    if (length < 0 || body + length <= kept_len) return 0;
    return body + length - kept_len;
}

/* b[0, n) into a refused record's kept bytes, as many as it still lacks: 0, -1 out of memory. */
static int keep_record_bytes(unsigned char **kept, int64_t *len, int64_t *cap, const unsigned char *b, int64_t n) {
    int64_t lacks;
    while (n > 0 && (lacks = record_lacks(*kept, *len)) > 0) {
        int64_t take = lacks < n ? lacks : n;
        if (grow_append(kept, len, cap, b, take) < 0) return -1;
        b += take;
        n -= take;
    }
    return 0;
}

#endif
