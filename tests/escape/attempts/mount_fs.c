/* mount_fs — mount a tmpfs over /tmp, and remount the root read-write. */
#include "attempt.h"
#include <sys/mount.h>

int main(void)
{
	if (mount("none", "/tmp", "tmpfs", 0, NULL) == 0)
		escaped("mounted a tmpfs");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL) == 0)
		escaped("remounted / read-write");
	contained("mount: %s", strerror(errno));
}
