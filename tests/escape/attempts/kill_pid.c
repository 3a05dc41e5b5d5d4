/* kill_pid — signal the supervisor by its pid (argv[1]): SIGSTOP, SIGTERM, SIGKILL, to the
 * pid, its process group and through a pidfd.  The battery checks the supervisor lives on. */
#include "attempt.h"
#include <signal.h>
#include <sys/syscall.h>

int main(int argc, char **argv)
{
	pid_t pid = (pid_t)atol(attempt_arg(argc, argv));
	if (pid <= 1)
		escaped("nothing to try: bad argument");
	int sigs[] = { SIGSTOP, SIGTERM, SIGKILL };
	for (size_t i = 0; i < 3; i++) {
		int a = kill(pid, sigs[i]), b = kill(-pid, sigs[i]);
		printf("kill(%d, %d) = %d, kill(-%d) = %d\n", (int)pid, sigs[i], a, (int)pid, b);
	}
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pfd >= 0 && syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0)
		printf("pidfd_send_signal succeeded\n");
	contained("signals sent; the battery checks the supervisor");
}
