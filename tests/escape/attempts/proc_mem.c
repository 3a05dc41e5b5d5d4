/* proc_mem — open the supervisor's /proc/PID/mem (and environ) for reading and writing. */
#include "attempt.h"
#include <fcntl.h>

int main(int argc, char **argv)
{
	const char *pid = attempt_arg(argc, argv);
	const char *files[] = { "mem", "environ", "cmdline" };
	for (size_t i = 0; i < 3; i++) {
		char p[128];
		snprintf(p, sizeof p, "/proc/%s/%s", pid, files[i]);
		int fd = open(p, i == 0 ? O_RDWR | O_CLOEXEC : O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			escaped("opened %s", p);
		printf("%s: %s\n", p, strerror(errno));
	}
	contained("the supervisor's /proc entries are out of reach");
}
