/* pidfd_getfd — take a file descriptor (its MCP stdout, fd 1) out of the supervisor. */
#include "attempt.h"
#include <sys/syscall.h>

int main(int argc, char **argv)
{
	pid_t pid = (pid_t)atol(attempt_arg(argc, argv));
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	long fd = syscall(SYS_pidfd_getfd, pfd, 1, 0);
	if (fd >= 0)
		escaped("took fd 1 of %d", (int)pid);
	contained("pidfd_getfd: %s", strerror(errno));
}
