/* path_swap — argv[1] is "swap;DIR;TARGET": in a writePath, replace the folder DIR that another
 * tool reads by a symlink to TARGET, so that the next job of that tool would get TARGET mounted.
 * "read;FILE;WORD": read FILE and report whether it holds the secret WORD. */
#include "attempt.h"
#include <fcntl.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
	char *a = strdup(attempt_arg(argc, argv)), *save = NULL;
	char *mode = strtok_r(a, ";", &save), *path = strtok_r(NULL, ";", &save);
	char *third = strtok_r(NULL, ";", &save);
	if (!mode || !path || !third)
		escaped("bad argument");
	if (strcmp(mode, "read") == 0) {
		char buf[256] = "";
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		buf[n > 0 ? n : 0] = 0;
		if (strstr(buf, third))
			escaped("read the secret through the swapped path %s", path);
		contained("%s: %s", path, n < 0 ? strerror(errno) : "no secret in it");
	}
	char old[4200];
	snprintf(old, sizeof old, "%s.old", path);
	if (rename(path, old) < 0 && errno != ENOENT)
		contained("rename %s: %s", path, strerror(errno));
	if (symlink(third, path) < 0)
		contained("symlink %s: %s", path, strerror(errno));
	contained("swapped %s for a symlink to %s; the next job shows whether it is followed", path, third);
}
