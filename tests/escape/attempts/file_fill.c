/* file_fill — grow one file in the work dir without end: RLIMIT_FSIZE (SIGXFSZ) must stop
 * it at maxFileMB.  argv[1] is the configured maxFileMB. */
#include "attempt.h"
#include <fcntl.h>

int main(int argc, char **argv)
{
	long limit = atol(attempt_arg(argc, argv));
	static char buf[1u << 20];
	memset(buf, 'x', sizeof buf);
	int fd = open("fill", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		contained("cannot create a file in the work dir: %s", strerror(errno));
	for (long mb = 0;; mb++) {
		if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
			contained("write failed after %ld MB: %s", mb, strerror(errno));
		if (mb > limit * 4)
			escaped("wrote %ld MB with maxFileMB %ld", mb, limit);
	}
}
