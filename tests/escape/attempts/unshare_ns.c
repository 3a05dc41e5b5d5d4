/* unshare_ns — make a new user namespace (the way to fresh capabilities). */
#include "attempt.h"
#include <sched.h>

int main(void)
{
	if (unshare(CLONE_NEWUSER) == 0)
		escaped("unshare(CLONE_NEWUSER) worked");
	contained("unshare: %s", strerror(errno));
}
