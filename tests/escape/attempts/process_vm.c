/* process_vm — read the supervisor's memory with process_vm_readv. */
#include "attempt.h"
#include <sys/uio.h>

int main(int argc, char **argv)
{
	pid_t pid = (pid_t)atol(attempt_arg(argc, argv));
	char buf[16];
	struct iovec local = { buf, sizeof buf }, remote = { (void *)0x400000, sizeof buf };
	if (process_vm_readv(pid, &local, 1, &remote, 1, 0) >= 0)
		escaped("read the memory of %d", (int)pid);
	contained("process_vm_readv: %s", strerror(errno));
}
