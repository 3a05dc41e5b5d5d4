/* proc_sysctl — open the kernel's global knobs for writing: sysctls (core_pattern is the
 * classic route to host root), the sysrq trigger.  Nothing is written: being able to open one
 * for writing is the escape. */
#include "attempt.h"
#include <fcntl.h>

int main(void)
{
	static const char *const knobs[] = {
		"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches",
		"/proc/sysrq-trigger", "/proc/sys/fs/suid_dumpable", NULL,
	};
	int tried = 0;
	for (size_t i = 0; knobs[i]; i++) {
		int fd = open(knobs[i], O_WRONLY | O_CLOEXEC);
		tried++;
		if (fd >= 0)
			escaped("%s is open for writing", knobs[i]);
		printf("%s: %s\n", knobs[i], strerror(errno));
	}
	contained("none of the %d global knobs could be opened for writing", tried);
}
