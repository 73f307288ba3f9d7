/* The inner messages of a legacy (magic 0/1) compressed wrapper, shared by the C extensions that
 * read them (_cwalk.c's 'deep' fold, auditor/keys/_ckeys.c's key statistics). Include after
 * _record_batch.h (be32). */
#ifndef KLA_LEGACY_MESSAGE_H
#define KLA_LEGACY_MESSAGE_H

#include <stdint.h>

/* The inner message set's layout (LegacyRecord.java; auditor/formats/legacy.py's constants):
 * offset:int64 size:int32 | crc:uint32 magic:int8 attributes:int8 [timestamp:int64, magic 1]
 * keyLength:int32 key valueLength:int32 value. */
#define LEGACY_LOG_OVERHEAD 12
#define LEGACY_MAGIC_AT 16
#define LEGACY_ATTRIBUTES_AT 17
#define LEGACY_TIMESTAMP_AT 18
#define LEGACY_CODEC_MASK 0x07
static const int64_t LEGACY_RECORD_OVERHEAD[2] = {14, 22};
static const int64_t LEGACY_KEY_SIZE_AT[2] = {LEGACY_LOG_OVERHEAD + 6, LEGACY_LOG_OVERHEAD + 14};

/* The size of the inner message at b[p] (n - p >= 12) when legacy._inner_entries' loop reads it
 * (legacy._message_fields' checks, then an uncompressed message): > 0; 0 for an incomplete
 * trailing entry (the end of the set, as Kafka's DataLogInputStream); -1 where that loop raises. */
static int64_t legacy_inner_size(const unsigned char *b, int64_t p, int64_t n) {
    int64_t size = be32(b + p + 8);
    if (size < LEGACY_RECORD_OVERHEAD[0]) return -1;
    if (n - p < LEGACY_LOG_OVERHEAD + size) return 0;
    int64_t end = p + LEGACY_LOG_OVERHEAD + size;
    unsigned char magic = b[p + LEGACY_MAGIC_AT];
    if (magic > 1 || size < LEGACY_RECORD_OVERHEAD[magic]) return -1;
    int64_t q = p + LEGACY_KEY_SIZE_AT[magic];
    int64_t key_size = be32(b + q);
    q += 4;
    if (key_size > 0) q += key_size;
    if (key_size < -1 || q + 4 > end) return -1;
    int64_t value_size = be32(b + q);
    q += 4;
    if (value_size < -1 || q + (value_size > 0 ? value_size : 0) != end) return -1;
    if (b[p + LEGACY_ATTRIBUTES_AT] & LEGACY_CODEC_MASK) return -1;   /* inner messages are never compressed */
    return LEGACY_LOG_OVERHEAD + size;
}

#endif
