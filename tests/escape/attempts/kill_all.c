/* kill_all — kill(-1, SIGKILL): every process we may signal.  The battery checks that the
 * supervisor and the sibling task survived. */
#include "attempt.h"
#include <signal.h>

int main(void)
{
	int r = kill(-1, SIGKILL);
	contained("kill(-1, SIGKILL) = %d (%s); only the job's own namespace could be reached",
	          r, r < 0 ? strerror(errno) : "ok");
}
