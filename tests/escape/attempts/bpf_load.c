/* bpf_load — create a BPF map. */
#include "attempt.h"
#include <linux/bpf.h>
#include <sys/syscall.h>

int main(void)
{
	union bpf_attr a;
	memset(&a, 0, sizeof a);
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 1;
	long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a);
	if (fd >= 0)
		escaped("bpf map created");
	contained("bpf: %s", strerror(errno));
}
