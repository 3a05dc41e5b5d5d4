/* userfault — open a userfaultfd (a classic exploit helper). */
#include "attempt.h"
#include <fcntl.h>
#include <sys/syscall.h>

int main(void)
{
	long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (fd >= 0)
		escaped("userfaultfd gave fd %ld", fd);
	contained("userfaultfd: %s", strerror(errno));
}
