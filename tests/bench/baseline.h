/* tests/bench/baseline.h — the cost floors the benchmark figures are divided by, measured on
 * the same machine in the same run: raw appends with fdatasync, a raw scan of journal bytes,
 * a plain posix_spawn loop and a bubblewrap command line for the same program, the time from
 * a launch to the program's first instruction, the memory of a plain process, and base64 +
 * sha256 over a file's bytes in memory; plus the tools to measure them honestly (quantiles, a
 * program's own peak RSS).  None of them touches forkpoint code except crc32c, base64 and the
 * sha256 wrapper, which are the floors themselves.  (The pipe round-trip floor is echo.h.)
 *
 * All functions return 0 or -errno and write their result through the out pointers, unless
 * said otherwise. */
#ifndef FP_BENCH_BASELINE_H
#define FP_BENCH_BASELINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Monotonic seconds. */
double base_now(void);

/* The p-quantile (0 < p <= 1) of n > 0 values by nearest rank: the smallest value with at
 * least p·n values at or below it.  v is sorted in place. */
double base_quantile(double *v, size_t n, double p);

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

/* Direct children of pid (from /proc/<pid>/stat of every process): up to max of them in out,
 * *n how many there are (may exceed max). */
int base_children(pid_t pid, pid_t *out, size_t max, size_t *n);

/* Private memory of a process (Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup): what
 * the system gets back when it exits, KiB. */
int base_private_kb(pid_t pid, long *kb);

/* Start argv with posix_spawn, let it run settle_ms, read its private memory, then kill and
 * reap it. */
int base_spawned_private_kb(char *const argv[], int settle_ms, long *kb);

/* The work an upload cannot avoid: decode n base64 texts (one file's chunks, in order) into one
 * buffer of `size` bytes and hash it with sha256.  *rate: bytes per second; hex: the digest
 * (-EBADMSG if a text is not base64 or the total is not size). */
int base_b64_decode_sha256(char *const *texts, const size_t *lens, size_t n, size_t size, double *rate,
                           char hex[65]);

/* The work a download cannot avoid: sha256 over len bytes and base64 of them in chunks of
 * `chunk` bytes.  *rate: bytes per second. */
int base_b64_encode_sha256(const void *data, size_t len, size_t chunk, double *rate);

/* Start argv with posix_spawn (stdout a pipe, stderr to /dev/null) and read the one line it
 * prints: a CLOCK_MONOTONIC time in nanoseconds (tests/bench/jobs/stamp).  *secs: from just
 * before posix_spawn to that time, i.e. to the program's first instruction of its own.  The
 * program must exit 0 (-ECHILD otherwise). */
int base_spawn_stamp(char *const argv[], double *secs);

/* Run argv to its end with stdout to /dev/null and stderr to errpath (NULL: /dev/null).
 * *secs: spawn to reaped; *maxrss_kb (may be NULL): its peak RSS as the kernel reports it,
 * which includes the caller's own RSS (see base_run_peak); *status: its wait status. */
int base_run(char *const argv[], const char *errpath, double *secs, long *maxrss_kb, int *status);

/* The peak RSS of argv alone.  The kernel folds the memory a process had before its exec into
 * its peak, and a posix_spawn child shares the caller's memory until then, so base_run's peak
 * is at least the caller's RSS.  This runs argv through `self --peak-rss FILE argv...`, a
 * freshly exec'd small process (whose main calls base_peak_main) that forks and execs argv:
 * the child's peak starts from that small process, not from the caller.
 * *secs: the program's own run time (fork to reaped); tmpfile: a scratch file for the answer. */
int base_run_peak(const char *self, char *const argv[], const char *tmpfile, double *secs, long *maxrss_kb,
                  int *status);
/* The intermediate's side: argv[0] the answer file, argv[1..] the program.  Returns its exit
 * status (0: the answer was written). */
int base_peak_main(char *const argv[]);

/* A bubblewrap command line running prog with the namespaces of forkpoint's `default`
 * profile (user, pid, mount, net, ipc, uts) and a root like it: /usr and the merged-/usr
 * links read-only, the program's folder read-only, a fresh /proc, a minimal /dev, a tmpfs
 * /tmp.  prog is copied by pointer; out->argv ends with NULL. */
struct base_bwrap {
	char dir[4096];
	char links[4][256];
	char *argv[64];
};
int base_bwrap_cmd(const char *bwrap, char *const prog[], struct base_bwrap *out);

#endif
