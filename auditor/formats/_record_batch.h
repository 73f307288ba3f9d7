/* The v2 record batch header, shared by the C extensions that walk .log files (_cwalk.c,
 * _coffsets.c). Byte layout: DefaultRecordBatch.java, the same offsets as
 * auditor/formats/record_batch.py; big-endian readers for its fields. */
#ifndef KLA_RECORD_BATCH_H
#define KLA_RECORD_BATCH_H

#include <stdint.h>

#define BASE_OFFSET_OFFSET 0
#define LENGTH_OFFSET 8
#define LOG_OVERHEAD 12
#define MAGIC_OFFSET 16
#define ATTRIBUTES_OFFSET 21
#define LAST_OFFSET_DELTA_OFFSET 23
#define BASE_TIMESTAMP_OFFSET 27
#define MAX_TIMESTAMP_OFFSET 35
#define RECORDS_COUNT_OFFSET 57
#define RECORD_BATCH_OVERHEAD 61
#define MIN_BATCH_LENGTH (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)
#define MAX_SIZE_FIELD (INT32_MAX - LOG_OVERHEAD)

#define CODEC_MASK 0x07
#define TIMESTAMP_TYPE_MASK 0x08
#define TRANSACTIONAL_FLAG_MASK 0x10
#define CONTROL_FLAG_MASK 0x20
#define DELETE_HORIZON_FLAG_MASK 0x40

static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)p[0] << 56) | ((uint64_t)p[1] << 48) | ((uint64_t)p[2] << 40) |
                     ((uint64_t)p[3] << 32) | ((uint64_t)p[4] << 24) | ((uint64_t)p[5] << 16) |
                     ((uint64_t)p[6] << 8) | (uint64_t)p[7]);
}

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

/* a + b as Java's long arithmetic gives it (wraps at 64 bits: auditor/formats/java_long.py), without
 * C's undefined signed overflow: lastOffset = baseOffset + lastOffsetDelta on a corrupt baseOffset */
static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

static inline uint16_t be16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }

#endif
