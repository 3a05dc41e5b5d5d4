/* ptrace_sv — attach to the supervisor (pid in argv[1]) with ptrace. */
#include "attempt.h"
#include <sys/ptrace.h>

int main(int argc, char **argv)
{
	pid_t pid = (pid_t)atol(attempt_arg(argc, argv));
	if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0)
		escaped("attached to %d", (int)pid);
	contained("ptrace(PTRACE_ATTACH, %d): %s", (int)pid, strerror(errno));
}
