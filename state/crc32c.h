/* state/crc32c.h — CRC32C (Castagnoli), with the SSE4.2 crc32 instruction where the CPU has it
 * and a slicing-by-8 table fallback elsewhere; both give identical results. */
#ifndef FP_CRC32C_H
#define FP_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extend crc with buf.  Start with crc = 0. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
/* The software path, exposed for tests and benchmarks. */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* 1 if the hardware path is in use. */
int crc32c_hw_available(void);
/* Masked form stored on disk (as LevelDB does), so a CRC of data that embeds CRCs stays strong. */
static inline uint32_t crc32c_mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

#endif
