/* cpu_spin — burn CPU for ever: RLIMIT_CPU (SIGXCPU) or the deadline must end it. */
#include "attempt.h"

int main(void)
{
	volatile unsigned long n = 0;
	for (;;)
		n++;
}
