/* tests/bench/baseline.h — the cost floors the benchmark figures are divided by, measured on
 * the same machine in the same run: raw appends with fdatasync, a raw scan of journal bytes,
 * and a plain posix_spawn loop.  None of them touches forkpoint code except crc32c.
 *
 * All functions return 0 or -errno and write their result through the out pointers. */
#ifndef FP_BENCH_BASELINE_H
#define FP_BENCH_BASELINE_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic seconds. */
double base_now(void);

/* Append records of rec_bytes to a fresh file in dir, one write() each and one fdatasync per
 * per_sync records, for about `seconds`.  *rate: records made durable per second. */
int base_append_rate(const char *dir, size_t rec_bytes, unsigned per_sync, double seconds,
                     double *rate);

/* Read every segment file of <state_dir>/journal with read() and check each record's CRC32C
 * (the journal's framing, nothing decoded).  *records and *bytes: what was seen. */
int base_scan_journal(const char *state_dir, uint64_t *records, uint64_t *bytes, double *secs);

/* Run argv (stdout/stderr to /dev/null) `total` times with up to `inflight` at once, using
 * posix_spawn and pidfds (the caller may have other children).  *rate: programs per second. */
int base_spawn_rate(char *const argv[], unsigned total, unsigned inflight, double *rate);

#endif
