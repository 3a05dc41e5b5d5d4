/* tests/helpers/sleeper.c — a plain job that knows nothing of forkpoint: it records its pid and
 * then sleeps, so tests can check that cancellation, timeouts and shutdown really end it.
 *
 *   sleeper SECONDS [PIDFILE] [MARKER...]
 *
 * SECONDS <= 0 sleeps forever.  PIDFILE (optional, "-" for none) receives "PID\n"; writing it
 * may fail inside a sandbox that hides the path, which is not an error here: tests find the
 * process by the MARKER words in its command line instead.  Exits 0 when the time is up. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void write_pidfile(const char *path)
{
	char buf[32];
	int fd, n;

	if (!path || strcmp(path, "-") == 0)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (write(fd, buf, (size_t)n) != n)
		fprintf(stderr, "sleeper: short write to %s\n", path);
	close(fd);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? strtod(argv[1], NULL) : 0;
	struct timespec end, now, ts = { 0, 50 * 1000 * 1000 };

	write_pidfile(argc > 2 ? argv[2] : NULL);
	printf("sleeper %ld started\n", (long)getpid());
	fflush(stdout);

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)seconds;
	end.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	for (;;) {
		/* Short naps rather than one long sleep keep the loop honest about signals. */
		while (nanosleep(&ts, NULL) < 0 && errno == EINTR)
			;
		if (seconds <= 0)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			break;
	}
	printf("sleeper done\n");
	return 0;
}
