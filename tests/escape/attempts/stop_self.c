/* stop_self — stop itself with SIGSTOP and never continue: only a SIGKILL on the deadline,
 * which works on stopped processes, ends it. */
#include "attempt.h"
#include <signal.h>

int main(void)
{
	raise(SIGSTOP);
	for (;;)
		pause();
}
