/* supervisor/core/inputs.c — see inputs.h. */
#include "supervisor/core/inputs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/io.h"

int inputs_copy_file(int src, int64_t size, int dirfd, const char *name, unsigned char *buf, size_t buflen)
{
	char tmp[NAME_MAX + 16];
	int out = -1, rc = 0;
	snprintf(tmp, sizeof tmp, ".%.200s.tmp", name);
	unlinkat(dirfd, tmp, 0);
	out = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	loff_t in_off = 0;
	while (in_off < size) {
		ssize_t n = copy_file_range(src, &in_off, out, NULL, (size_t)(size - in_off), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && errno != EXDEV && errno != ENOSYS && errno != EOPNOTSUPP && errno != EINVAL) {
				rc = -errno;
				goto fail;
			}
			/* No copy offload here (or a short source): plain reads and writes. */
			while (in_off < size) {
				ssize_t r = io_pread_upto(src, buf, buflen, in_off);
				if (r <= 0) {
					rc = r < 0 ? (int)r : -EIO;
					goto fail;
				}
				if ((rc = io_pwrite_full(out, buf, (size_t)r, in_off)) < 0)
					goto fail;
				in_off += r;
			}
			break;
		}
	}
	if (fchmod(out, 0444) < 0 || renameat(dirfd, tmp, dirfd, name) < 0) {
		rc = -errno;
		goto fail;
	}
	close(out);
	return 0;
fail:
	close(out);
	unlinkat(dirfd, tmp, 0);
	return rc;
}

