/* crc32c.c: CRC-32C (Castagnoli), the checksum of every checkpoint file and
 * tensor (lib/train/checkpoint.c, docs/checkpoints.md).
 *
 * Reflected polynomial 0x82F63B78 (0x1EDC6F41 unreflected), initial value
 * and final XOR 0xFFFFFFFF, as iSCSI, ext4 and SSE4.2's crc32 instruction;
 * check value: dt_crc32c("123456789", 9) == 0xE3069283.
 *
 * Table driven, slicing by 8: eight 256-entry tables built once (thread
 * safe through pthread_once); t[0] is the classic byte-at-a-time table and
 * t[k][b] the CRC of byte b followed by k zero bytes, so eight bytes fold in
 * one step. Invariant: dt_crc32c_update(dt_crc32c_update(0, a), b) equals
 * the CRC of a followed by b (the state passed between calls is the
 * finished CRC, un- and re-inverted inside). */
#include "dt_checkpoint.h"

#include <pthread.h>
#include <string.h>

#define DT__CRC32C_POLY 0x82F63B78u

static uint32_t dt__crc32c_table[8][256];
static pthread_once_t dt__crc32c_once = PTHREAD_ONCE_INIT;

static void dt__crc32c_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ DT__CRC32C_POLY : c >> 1;
        dt__crc32c_table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = dt__crc32c_table[0][b];
        for (int k = 1; k < 8; k++) {
            c = dt__crc32c_table[0][c & 0xffu] ^ (c >> 8);
            dt__crc32c_table[k][b] = c;
        }
    }
}

uint32_t dt_crc32c_update(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&dt__crc32c_once, dt__crc32c_init);
    const uint32_t(*t)[256] = (const uint32_t(*)[256])dt__crc32c_table;
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n >= 8) { /* little-endian word order of the bytes, whatever the host */
        const uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        const uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        c = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^ t[5][(lo >> 16) & 0xffu] ^ t[4][lo >> 24] ^ t[3][hi & 0xffu] ^
            t[2][(hi >> 8) & 0xffu] ^ t[1][(hi >> 16) & 0xffu] ^ t[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = t[0][(c ^ *p++) & 0xffu] ^ (c >> 8);
    return ~c;
}

uint32_t dt_crc32c(const void *data, size_t n) { return dt_crc32c_update(0, data, n); }
