/* runner/examples/plain-count.c — a plain program that knows nothing of forkpoint, for the
 * "any program is a job" path: `plain-count N [EXIT]` prints "line i" for i = 1..N (one
 * flushed line every 10 ms), writes "done" to stderr and exits with EXIT (default 0). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* nanosleep, even when built with -std=c11 outside the project */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	long n, code = 0;
	if (argc < 2 || argc > 3 || parse_long(argv[1], 0, 100000000L, &n) < 0 ||
	    (argc == 3 && parse_long(argv[2], 0, 255, &code) < 0)) {
		fprintf(stderr, "usage: plain-count N [EXIT]   (N >= 0, EXIT 0..255)\n");
		return 2;
	}
	for (long i = 1; i <= n; i++) {
		printf("line %ld\n", i);
		/* Flushed per line so a reader of the task's log sees it grow while it runs. */
		fflush(stdout);
		if (i < n) {
			struct timespec ts = { 0, 10 * 1000000L };
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
	}
	fputs("done\n", stderr);
	return (int)code;
}
