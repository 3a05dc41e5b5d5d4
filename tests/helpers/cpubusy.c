/* tests/helpers/cpubusy.c — a plain job that keeps one CPU busy for SECONDS of wall time, so
 * tests can check that the supervisor stays responsive while jobs compete for the machine.
 *
 *   cpubusy SECONDS [MARKER...]
 *
 * Exits 0 and prints how many rounds it managed. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? strtod(argv[1], NULL) : 1;
	double end = now_seconds() + seconds;
	volatile unsigned long x = 1;
	unsigned long rounds = 0;

	while (now_seconds() < end) {
		/* Pure arithmetic between clock reads: no syscalls, so the scheduler sees a spinner. */
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
		rounds++;
	}
	printf("cpubusy rounds=%lu\n", rounds);
	return 0;
}
