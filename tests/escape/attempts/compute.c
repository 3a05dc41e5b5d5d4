/* compute — not an attempt: pure computation that must work under the strict profile
 * (threads, memory, files in the work dir, progress and a result through the job library). */
#include "attempt.h"
#include "forkpoint.h"
#include <fcntl.h>
#include <pthread.h>

static void *work(void *arg)
{
	unsigned long *sum = arg;
	for (unsigned long i = 0; i < 1000000; i++)
		*sum += i % 7;
	return NULL;
}

int main(void)
{
	fp_job *job = fp_open();
	if (!job) {
		printf("fp_open: %s\n", strerror(errno));
		return 1;
	}
	unsigned long sum = 0;
	pthread_t t;
	if (pthread_create(&t, NULL, work, &sum) != 0 || pthread_join(t, NULL) != 0) {
		fp_fail(job, NULL, "pthread failed", 0, NULL);
		return 1;
	}
	fp_progress(job, 0.5, "half way");
	int fd = open("out.txt", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, "ok\n", 3) != 3) {
		fp_fail(job, NULL, "cannot write to the work dir", 0, NULL);
		return 1;
	}
	close(fd);
	char json[64];
	snprintf(json, sizeof json, "{\"sum\":%lu}", sum);
	fp_result_json(job, json);
	fp_close(job);
	return 0;
}
