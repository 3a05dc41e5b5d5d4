/* write_paths — try to create a file at each ';'-separated path in argv[1].  Whether it
 * reached the host is for the battery to check (a private /tmp may accept it harmlessly). */
#include "attempt.h"
#include <fcntl.h>

int main(int argc, char **argv)
{
	char *list = strdup(attempt_arg(argc, argv));
	for (char *save = NULL, *p = strtok_r(list, ";", &save); p; p = strtok_r(NULL, ";", &save)) {
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			printf("%s: %s\n", p, strerror(errno));
			continue;
		}
		(void)!write(fd, "pwned\n", 6);
		close(fd);
		printf("%s: created (inside the jail)\n", p);
	}
	contained("attempted; the battery checks the host side");
}
