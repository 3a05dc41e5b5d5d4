/* perf_event — open a software perf event on itself. */
#include "attempt.h"
#include <linux/perf_event.h>
#include <sys/syscall.h>

int main(void)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof a;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.exclude_kernel = 1;
	long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	if (fd >= 0)
		escaped("perf_event_open gave fd %ld", fd);
	contained("perf_event_open: %s", strerror(errno));
}
