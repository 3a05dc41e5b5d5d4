/* supervisor/core/inputs.c — see inputs.h. */
#include "supervisor/core/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/io.h"
#include "state/layout.h"
#include "supervisor/core/artifacts.h"
#include "supervisor/core/transfer.h"

#define IO_BUF (1 << 20)

/* Copy src (size bytes) to dirfd/name as a read-only file, atomically: copy_file_range where
 * the kernel offers it, plain reads and writes through a buffer of our own otherwise. */
static int copy_in(int src, int64_t size, int dirfd, const char *name)
{
	char tmp[NAME_MAX + 16];
	unsigned char *buf = NULL;
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
			if (!(buf = malloc(IO_BUF))) {
				rc = -ENOMEM;
				goto fail;
			}
			while (in_off < size) {
				ssize_t r = io_pread_upto(src, buf, IO_BUF, in_off);
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
	free(buf);
	return 0;
fail:
	close(out);
	unlinkat(dirfd, tmp, 0);
	free(buf);
	return rc;
}

static int mkdir_at(int dirfd, const char *name)
{
	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* The one file an earlier attempt placed in an argument's input folder.  0 and its name. */
static int placed_before(int pd, char *name, size_t len)
{
	int d = fcntl(pd, F_DUPFD_CLOEXEC, 0), found = 0;
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	struct dirent *de;
	if (!dir) {
		if (d >= 0)
			close(d);
		return -ENOENT;
	}
	while ((de = readdir(dir))) {
		struct stat st;
		if (de->d_name[0] == '.' || fstatat(pd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		snprintf(name, len, "%s", de->d_name);
		found++;
	}
	closedir(dir);
	return found == 1 ? 0 : -ENOENT;
}

/* One argument marked forkpoint-upload: its file copied into inputs/<arg>/ (in: that folder's
 * parent, inputs its path) and the argument replaced by the copy's path.  0, or -1 with e
 * filled (naming the argument). */
static int place_input(struct transfers *tr, int in, const char *inputs, const char *arg, cJSON *args,
                       const char *v, struct transfer_error *e)
{
	char base[NAME_MAX + 1], dest[PATH_MAX + NAME_MAX + 300];
	int pd = -1, src = -1, rc = -1;
	int64_t size = 0;
	/* A name per argument: two arguments may name files with the same base name. */
	if (!artifacts_name_ok(arg) || mkdir_at(in, arg) < 0 ||
	    (pd = openat(in, arg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		transfer_error_set(e, "internal_error", 1, "Call the tool again.", "Cannot prepare the input folder for "
		          "argument %s.", arg);
		goto out;
	}
	size_t il = strlen(inputs);
	if (strncmp(v, inputs, il) == 0 && v[il] == '/') {
		rc = 0;   /* already placed by an earlier attempt of the same task */
		goto out;
	}
	if (transfer_open_input(tr, v, &src, &size, base, sizeof base, e) < 0) {
		/* A retry or resume after the upload's record expired: an earlier attempt of this
		 * task already holds the file. */
		int gone = strcmp(e->code, "unknown_transfer") == 0 || strcmp(e->code, "transfer_expired") == 0;
		if (!(gone && placed_before(pd, base, sizeof base) == 0)) {
			snprintf(e->param, sizeof e->param, "%s", arg);
			goto out;
		}
	} else if ((rc = copy_in(src, size, pd, base)) < 0) {
		transfer_error_set(e, "internal_error", 1, "Call the tool again; if it keeps failing, tell the operator.",
		          "The file for argument %s could not be copied into the job's folder: %s.", arg,
		          strerror(-rc));
		rc = -1;
		goto out;
	}
	snprintf(dest, sizeof dest, "%s/%s/%s", inputs, arg, base);
	cJSON_ReplaceItemInObject(args, arg, cJSON_CreateString(dest));
	rc = 0;
out:
	if (src >= 0)
		close(src);
	if (pd >= 0)
		close(pd);
	return rc;
}

/* inputs/ and outputs/ first (the job finds both), then every marked argument's file. */
int inputs_prepare(struct transfers *tr, const cJSON *schema, cJSON *args, const char *work_dir,
                   cJSON **err)
{
	char inputs[PATH_MAX];
	const cJSON *props = cJSON_GetObjectItem(schema, "properties");
	const cJSON *p;
	struct transfer_error e;
	int wd = -1, in = -1, rc = 0;
	*err = NULL;
	wd = open(work_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wd < 0 || mkdir_at(wd, LAYOUT_INPUTS) < 0 || mkdir_at(wd, LAYOUT_OUTPUTS) < 0 ||
	    (in = openat(wd, LAYOUT_INPUTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		transfer_error_set(&e, "internal_error", 1, "Call the tool again; if it keeps failing, tell the operator.",
		          "The job's work folder %s could not be prepared: %s.", work_dir, strerror(errno));
		rc = -1;
		goto out;
	}
	snprintf(inputs, sizeof inputs, "%s/" LAYOUT_INPUTS, work_dir);
	cJSON_ArrayForEach(p, props) {
		const cJSON *fmt = cJSON_GetObjectItem(p, "format");
		if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "forkpoint-upload") != 0)
			continue;
		cJSON *v = cJSON_GetObjectItem(args, p->string);
		if (cJSON_IsString(v) && (rc = place_input(tr, in, inputs, p->string, args, v->valuestring, &e)) < 0)
			goto out;
	}
out:
	if (rc < 0)
		*err = transfer_error_envelope(&e, transfers_roots(tr));
	if (in >= 0)
		close(in);
	if (wd >= 0)
		close(wd);
	return rc;
}
