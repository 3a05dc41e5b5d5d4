/* tmp_fill — fill /tmp with 4 MB files until it refuses.  The job's /tmp is a private tmpfs
 * of a fixed size; argv[1] is the size in MB.  The files are named after the marker so the
 * battery can check none reached the host's /tmp. */
#include "attempt.h"
#include <fcntl.h>

int main(int argc, char **argv)
{
	long limit = atol(attempt_arg(argc, argv));
	const char *mark = argc > 2 ? argv[argc - 1] : "tmpfill";
	static char buf[1u << 20];
	memset(buf, 'y', sizeof buf);
	long total = 0;
	for (int i = 0;; i++) {
		char p[512];
		snprintf(p, sizeof p, "/tmp/%s-%d", mark, i);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			contained("/tmp refused a new file after %ld MB: %s", total, strerror(errno));
		for (int k = 0; k < 4; k++) {
			if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
				contained("/tmp full after %ld MB: %s", total, strerror(errno));
			total++;
		}
		close(fd);
		if (total > limit * 4)
			escaped("wrote %ld MB into /tmp, limit %ld MB", total, limit);
	}
}
