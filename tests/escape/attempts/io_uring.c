/* io_uring — set up an io_uring (a large, oft-broken kernel surface). */
#include "attempt.h"
#include <sys/syscall.h>

int main(void)
{
	unsigned char params[120];
	memset(params, 0, sizeof params);
	long fd = syscall(SYS_io_uring_setup, 4, params);
	if (fd >= 0)
		escaped("io_uring_setup gave fd %ld", fd);
	contained("io_uring_setup: %s", strerror(errno));
}
