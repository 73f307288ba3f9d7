/* Readers shared by the C extensions that read records (_coffsets.c, auditor/keys/_ckeys.c): Kafka's
 * zigzag varints inside a bound (ByteUtils.readVarint / readVarlong; auditor/formats/varint.py), and
 * an exact pread (never mmap, never a write). Include after Python.h (the pread releases the GIL). */
#ifndef KLA_RECORD_READING_H
#define KLA_RECORD_READING_H

#include <errno.h>
#include <stdint.h>
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

#endif
