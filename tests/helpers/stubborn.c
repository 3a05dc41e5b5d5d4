/* tests/helpers/stubborn.c — a job that refuses to stop: it ignores the cancel frame (it never
 * reads its socket), ignores SIGTERM/SIGINT/SIGHUP, and leaves behind a grandchild that escaped
 * its process group and session by a double fork and setsid().  Only a forced kill of the whole
 * job tree (PID namespace, cgroup.kill or equivalent) ends both.
 *
 *   stubborn [PIDFILE] [MARKER...]
 *
 * PIDFILE ("-" for none) receives "PARENT GRANDCHILD\n" once both run.  The grandchild keeps the
 * parent's argv, so a test can find both processes by MARKER in /proc/PID/cmdline. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void ignore_polite_signals(void)
{
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
}

static void nap_forever(void)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	for (;;)
		nanosleep(&ts, NULL);
}

/* Double fork: the middle child exits at once so the grandchild is orphaned and re-parented
 * away from this process.  Returns the grandchild's pid (as seen here) or -1. */
static pid_t spawn_escapee(void)
{
	int pfd[2];
	pid_t mid, gc = -1;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	mid = fork();
	if (mid < 0)
		goto out;
	if (mid == 0) {
		pid_t g;

		close(pfd[0]);
		g = fork();
		if (g == 0) {
			close(pfd[1]);
			setsid();
			nap_forever();
		}
		if (write(pfd[1], &g, sizeof g) != (ssize_t)sizeof g)
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	pfd[1] = -1;
	if (read(pfd[0], &gc, sizeof gc) != (ssize_t)sizeof gc)
		gc = -1;
	while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
		;
out:
	close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	return gc;
}

int main(int argc, char **argv)
{
	const char *pidfile = argc > 1 ? argv[1] : "-";
	pid_t gc;

	ignore_polite_signals();   /* inherited by the grandchild across fork */
	gc = spawn_escapee();
	if (gc < 0) {
		fprintf(stderr, "stubborn: could not fork the grandchild\n");
		return 1;
	}
	if (strcmp(pidfile, "-") != 0) {
		FILE *f = fopen(pidfile, "we");

		if (f) {
			fprintf(f, "%ld %ld\n", (long)getpid(), (long)gc);
			fclose(f);
		}
	}
	printf("stubborn %ld grandchild %ld\n", (long)getpid(), (long)gc);
	fflush(stdout);
	nap_forever();
}
