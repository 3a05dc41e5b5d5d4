/* keyctl_add — put a key into the session keyring (shared with the supervisor's session
 * outside a jail). */
#include "attempt.h"
#include <sys/syscall.h>

int main(void)
{
	long k = syscall(SYS_add_key, "user", "forkpoint-escape", "x", 1, -3 /* session */);
	if (k >= 0)
		escaped("add_key gave key %ld", k);
	contained("add_key: %s", strerror(errno));
}
