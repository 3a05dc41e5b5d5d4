/* memfd_bomb — hold more memory than memoryMB (argv[1]) where RLIMIT_AS does not look: memfd
 * pages and System V shared memory, neither mapped.  Holding more than the limit is the escape;
 * being refused or killed is containment.  Tries 4 times the limit, in 4 MiB steps. */
#include "attempt.h"
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>

#define STEP (4L << 20)

int main(int argc, char **argv)
{
	long limit = atol(attempt_arg(argc, argv)) << 20;
	long want = limit * 4, held = 0;
	static char chunk[1 << 16];
	memset(chunk, 'm', sizeof chunk);
	int fd = (int)syscall(SYS_memfd_create, "bomb", 0U);
	if (fd < 0)
		printf("memfd_create: %s\n", strerror(errno));
	while (fd >= 0 && held < want / 2) {
		long i;
		for (i = 0; i < STEP; i += (long)sizeof chunk)
			if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk)
				break;
		held += i;
		if (i < STEP) {
			printf("memfd write: %s\n", strerror(errno));
			break;
		}
	}
	while (held < want) {
		int id = shmget(IPC_PRIVATE, (size_t)STEP, IPC_CREAT | 0600);
		if (id < 0) {
			printf("shmget: %s\n", strerror(errno));
			break;
		}
		char *p = shmat(id, NULL, 0);
		if (p == (void *)-1) {
			printf("shmat: %s\n", strerror(errno));
			break;
		}
		memset(p, 's', (size_t)STEP);
		shmdt(p);
		held += STEP;
	}
	if (held > limit)
		escaped("held %ld MiB outside the address-space limit of %ld MiB", held >> 20, limit >> 20);
	contained("held only %ld MiB (limit %ld MiB)", held >> 20, limit >> 20);
}
