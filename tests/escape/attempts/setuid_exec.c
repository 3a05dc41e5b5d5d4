/* setuid_exec — run a setuid binary owned by another user (path in argv[1]) and see whether
 * it gained that user's identity. */
#include "attempt.h"
#include <sys/wait.h>

int main(int argc, char **argv)
{
	const char *probe = attempt_arg(argc, argv);
	int p[2];
	if (pipe(p) < 0)
		contained("pipe: %s", strerror(errno));
	pid_t c = fork();
	if (c == 0) {
		dup2(p[1], 1);
		char *av[] = { (char *)probe, NULL };
		execv(probe, av);
		printf("exec: %s\n", strerror(errno));
		_exit(1);
	}
	close(p[1]);
	char buf[128] = "";
	ssize_t n = read(p[0], buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = 0;
	waitpid(c, NULL, 0);
	unsigned uid, euid;
	if (sscanf(buf, "uid=%u euid=%u", &uid, &euid) != 2)
		contained("the probe did not run: %s", buf);
	if (uid != euid)
		escaped("setuid worked: %s", buf);
	contained("the setuid bit had no effect: %s", buf);
}
