/* tests/bench/jobs/progress.c — a job that reports progress through the job protocol every
 * INTERVAL_MS milliseconds until it has done COUNT reports (0: until it is cancelled), for
 * the bench's "get while jobs emit progress" figure.
 *
 *   progress INTERVAL_MS COUNT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "forkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long interval = argc > 1 ? strtol(argv[1], NULL, 10) : 10;
	long count = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	if (interval < 1 || interval > 60000 || count < 0) {
		fprintf(stderr, "usage: progress INTERVAL_MS COUNT\n");
		return 2;
	}
	fp_job *job = fp_open();
	if (!job) {
		perror("progress: fp_open");
		return 1;
	}
	struct timespec ts = { interval / 1000, (interval % 1000) * 1000000L };
	for (long i = 0; count == 0 || i < count; i++) {
		if (fp_cancelled(job) || fp_progress(job, count ? (double)i / (double)count : -1, "step %ld", i + 1) < 0)
			break;   /* cancelled, or the supervisor is gone */
		struct timespec left = ts;
		while (nanosleep(&left, &left) < 0 && errno == EINTR)
			;
	}
	int rc = fp_result_json(job, "{\"ok\":true}");
	fp_close(job);
	return rc < 0;
}
