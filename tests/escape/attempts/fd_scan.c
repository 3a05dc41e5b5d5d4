/* fd_scan — look for inherited descriptors: only 0 (/dev/null), 1 and 2 (the output pipe)
 * and 3 (the job socket) may be open.  Anything else, the supervisor's MCP stdout above all,
 * would be a way out; it would be written to. */
#include "attempt.h"
#include <fcntl.h>
#include <sys/stat.h>

int main(void)
{
	struct stat st;
	if (fstat(0, &st) < 0 || !S_ISCHR(st.st_mode))
		escaped("fd 0 is not /dev/null");
	if (fstat(1, &st) < 0 || !S_ISFIFO(st.st_mode))
		escaped("fd 1 is not the output pipe");
	if (fstat(3, &st) < 0 || !S_ISSOCK(st.st_mode))
		escaped("fd 3 is not the job socket");
	for (int fd = 4; fd < 65536; fd++) {
		if (fcntl(fd, F_GETFD) < 0)
			continue;
		(void)!write(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"pwned\"}\n", 35);
		escaped("inherited fd %d", fd);
	}
	contained("only fds 0-3 are open");
}
