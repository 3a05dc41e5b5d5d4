/* setsid_escape — leave a grandchild behind in its own session (double fork + setsid), say
 * "ready" through the protocol, then ignore everything.  The battery cancels the task and
 * checks that no process with the marker outlives it. */
#include "attempt.h"
#include "forkpoint.h"
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static void nap_forever(void)
{
	struct timespec t = { 0, 100000000 };
	for (;;)
		nanosleep(&t, NULL);
}

int main(void)
{
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	pid_t mid = fork();
	if (mid == 0) {
		if (fork() == 0) {
			setsid();
			nap_forever();
		}
		_exit(0);
	}
	waitpid(mid, NULL, 0);
	fp_job *job = fp_open();
	if (!job)
		contained("no job socket: %s", strerror(errno));
	fp_progress(job, 0.5, "ready");
	nap_forever();
}
