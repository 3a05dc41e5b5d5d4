/* memory_bomb — allocate and touch memory until something stops it.  argv[1] is the
 * configured memoryMB: more than four times that means the limit did not hold. */
#include "attempt.h"

int main(int argc, char **argv)
{
	long limit = atol(attempt_arg(argc, argv));
	size_t mb = 0;
	for (;;) {
		char *p = malloc(1u << 20);
		if (!p)
			contained("malloc failed after %zu MB (limit %ld MB)", mb, limit);
		memset(p, 0x5a, 1u << 20);
		if (++mb > (size_t)(limit > 0 ? limit : 256) * 4)
			escaped("allocated %zu MB with a limit of %ld MB", mb, limit);
	}
}
