/* clone_ns — clone into new user and network namespaces, with clone and with clone3. */
#include "attempt.h"
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>

int main(int argc, char **argv)
{
	int use3 = strcmp(attempt_arg(argc, argv), "clone3") == 0;
	long pid;
	if (use3) {
		struct clone_args ca;
		memset(&ca, 0, sizeof ca);
		ca.flags = CLONE_NEWUSER | CLONE_NEWNET;
		ca.exit_signal = SIGCHLD;
		pid = syscall(SYS_clone3, &ca, sizeof ca);
	} else {
		pid = syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD), 0UL, 0UL, 0UL, 0UL);
	}
	if (pid == 0)
		_exit(0);
	if (pid > 0) {
		waitpid((pid_t)pid, NULL, 0);
		escaped("%s made new namespaces", use3 ? "clone3" : "clone");
	}
	contained("%s: %s", use3 ? "clone3" : "clone", strerror(errno));
}
