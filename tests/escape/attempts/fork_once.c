/* fork_once — start one child process; the strict profile allows threads, not processes. */
#include "attempt.h"
#include <sys/wait.h>

int main(void)
{
	pid_t c = fork();
	if (c == 0)
		_exit(0);
	if (c > 0) {
		waitpid(c, NULL, 0);
		escaped("fork worked under the strict profile");
	}
	contained("fork: %s", strerror(errno));
}
