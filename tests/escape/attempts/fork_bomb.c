/* fork_bomb — every process forks for ever.  Contained when the tree stays within
 * maxProcesses (pids cgroup, or RLIMIT_NPROC in the job's user namespace) and the deadline
 * ends all of it; the battery counts the processes while it runs. */
#include "attempt.h"
#include <time.h>

int main(void)
{
	struct timespec ms = { 0, 1000000 };
	for (;;) {
		/* Back off briefly when refused, so the machine stays usable for the checks. */
		if (fork() < 0)
			nanosleep(&ms, NULL);
	}
}
