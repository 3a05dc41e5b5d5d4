/* fd_exhaust — open descriptors until refused; the cap must be the sandbox's openFiles. */
#include "attempt.h"
#include <fcntl.h>

int main(void)
{
	long n = 0;
	for (;;) {
		if (open("/dev/null", O_RDONLY) < 0)
			break;
		if (++n > 100000)
			escaped("opened %ld descriptors", n);
	}
	if (n > 4096)
		escaped("opened %ld descriptors before %s", n, strerror(errno));
	contained("refused after %ld descriptors: %s", n, strerror(errno));
}
