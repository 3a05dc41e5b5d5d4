/* sigsys_self — die of SIGSYS without any forbidden call, to make the supervisor blame its own
 * filter (a forged sandbox_violation).  Runs one forbidden-looking but allowed call first. */
#include "attempt.h"
#include <signal.h>

int main(void)
{
	printf("raising SIGSYS myself\n");
	fflush(stdout);
	signal(SIGSYS, SIG_DFL);
	raise(SIGSYS);
	escaped("still alive after SIGSYS");
}
