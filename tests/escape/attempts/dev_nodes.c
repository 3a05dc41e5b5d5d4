/* dev_nodes — change the host's device nodes through the jail's /dev: chmod to the mode they
 * already have and set their times (both harmless in effect, both proof that the inode can be
 * changed), then open one for writing, which a job is allowed to do. */
#include "attempt.h"
#include <fcntl.h>
#include <sys/stat.h>

int main(void)
{
	static const char *const nodes[] = { "/dev/null", "/dev/zero", "/dev/full", "/dev/urandom", NULL };
	for (size_t i = 0; nodes[i]; i++) {
		struct stat st;
		if (stat(nodes[i], &st) < 0) {
			printf("%s: %s\n", nodes[i], strerror(errno));
			continue;
		}
		if (chmod(nodes[i], st.st_mode & 07777) == 0)
			escaped("chmod %s worked", nodes[i]);
		printf("chmod %s: %s\n", nodes[i], strerror(errno));
		if (utimensat(AT_FDCWD, nodes[i], NULL, 0) == 0)
			escaped("touched %s", nodes[i]);
		printf("touch %s: %s\n", nodes[i], strerror(errno));
	}
	int fd = open("/dev/null", O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || write(fd, "x", 1) != 1)
		escaped("the jail broke /dev/null for writing: %s", strerror(errno));
	close(fd);
	contained("the device nodes cannot be changed, /dev/null still takes writes");
}
