/* sibling — not an attempt: the well-behaved task that runs beside each attempt.  It beats
 * (a progress message with a counter, and the counter in a file in its work dir) every 50 ms
 * until cancelled; the battery checks the beat went on while the attempt ran. */
#include "attempt.h"
#include "forkpoint.h"
#include <fcntl.h>
#include <time.h>

int main(void)
{
	fp_job *job = fp_open();
	struct timespec t = { 0, 50000000 };
	if (!job) {
		printf("fp_open: %s\n", strerror(errno));
		return 1;
	}
	for (long n = 1; !fp_cancelled(job); n++) {
		char buf[32];
		int len = snprintf(buf, sizeof buf, "%ld\n", n);
		int fd = open("heartbeat", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, buf, (size_t)len) != len) {
			fp_fail(job, NULL, "cannot write the heartbeat", 0, NULL);
			return 1;
		}
		close(fd);
		fp_progress(job, -1, "beat %ld", n);
		nanosleep(&t, NULL);
	}
	fp_close(job);
	return 0;
}
