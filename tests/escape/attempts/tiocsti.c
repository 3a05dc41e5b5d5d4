/* tiocsti — push a command into a terminal's input queue. */
#include "attempt.h"
#include <sys/ioctl.h>

int main(void)
{
	char c = 'x';
	for (int fd = 0; fd < 3; fd++)
		if (ioctl(fd, TIOCSTI, &c) == 0)
			escaped("TIOCSTI on fd %d", fd);
	contained("TIOCSTI: %s", strerror(errno));
}
