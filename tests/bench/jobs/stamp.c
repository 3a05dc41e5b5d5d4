/* tests/bench/jobs/stamp.c — the job behind the bench's latency figures: the first thing it
 * does is read CLOCK_MONOTONIC and print it (nanoseconds, one line), then it exits 0.
 *
 *   stamp
 *
 * The sandbox profiles the bench uses share the host's clock (no time namespace), so the
 * stamp minus the moment the client sent `tools/call` (or the moment a launcher was started)
 * is the time to the job's first instruction of its own.  It links nothing but libc, so no
 * dynamic linking of other libraries sits inside the measured time. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <time.h>

int main(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	printf("%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
	return fflush(stdout) == 0 ? 0 : 1;
}
