/* state/blob_fs.c — the file-system blob backend (see blob.h).  A blob is durable once its
 * final name exists: the bytes are written under a temp name in the same directory, fsynced,
 * renamed into place and the directory fsynced, so a crash leaves either nothing, a leftover
 * temp file (collected by gc) or the complete blob.  blob.c checks names before any call
 * reaches here, so no path is built from a name that could leave blobs/.
 * Every function returns 0 / -errno and prints nothing. */
#include "state/blob.h"
#include "state/layout.h"

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

#define BLOB_DIR LAYOUT_BLOBS
#define TMP_PREFIX ".tmp-"

struct blob_fs {
	struct blobs head;
	const char *state_dir;
	int read_only;
	uint64_t bytes;
	int count_err;
};

#define FS(b) ((struct blob_fs *)(b))
#define CFS(b) ((const struct blob_fs *)(b))

/* ---- paths --------------------------------------------------------------------- */

/* <state>/blobs/<first two>/<all 64> */
static int blob_path(const char *state_dir, const char *hex, char *out, size_t outlen)
{
	return layout_blob(out, outlen, state_dir, hex);
}

/* A rename or a new entry is only durable once the directory holding it is fsynced; without
 * this a crash could lose a blob whose name the journal already refers to. */
static int fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* mkdir that is durable: a new directory entry is only safe once its parent is fsynced. */
static int mkdir_durable(const char *path, const char *parent)
{
	if (mkdir(path, 0700) == 0)
		return fsync_dir(parent);
	return errno == EEXIST ? 0 : -errno;
}

/* ---- put / get / exists ----------------------------------------------------------- */

/* A test's fault for one step, or 0. */
static int fault_at(const struct blobs *b, const char *step)
{
	return b->fault ? b->fault(b->fault_arg, step) : 0;
}

/* Store one blob; reads the handle only, so a worker thread may call it.  The fault hook is
 * consulted before each disk step, and *added says whether a new file now exists (a dedup hit
 * adds nothing).  Too long to split well: each step's cleanup is the same temp file. */
static int fs_write(const struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1],
                    int *added)
{
	const char *state_dir = CFS(b)->state_dir;
	char top[PATH_MAX], sub[PATH_MAX], final[PATH_MAX], tmp[PATH_MAX];
	struct stat st;
	int fd = -1;
	int rc;

	*added = 0;
	if (CFS(b)->read_only)
		return -EROFS;
	if (hex == NULL || (data == NULL && len > 0))
		return -EINVAL;
	blob_sha256_hex(data, len, hex);
	if (!blob_hex_valid(hex))
		return -EIO;
	rc = blob_path(state_dir, hex, final, sizeof final);
	if (rc < 0)
		return rc;
	/* Same name and same size: the content is already here (a damaged copy of the same
	 * size is caught by blob_get's digest check, never silently returned). */
	if (stat(final, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len)
		return 0;

	if ((rc = layout_dir(top, sizeof top, state_dir, BLOB_DIR)) < 0)
		return rc;
	if ((size_t)snprintf(sub, sizeof sub, "%s/%.2s", top, hex) >= sizeof sub ||
	    (size_t)snprintf(tmp, sizeof tmp, "%s/" TMP_PREFIX "XXXXXX", sub) >= sizeof tmp)
		return -ENAMETOOLONG;
	/* Both levels are made durable before the temp file exists: a blob renamed into a
	 * directory whose own entry was never fsynced could vanish with it in a crash. */
	rc = mkdir_durable(top, state_dir);
	if (rc < 0)
		return rc;
	rc = mkdir_durable(sub, top);
	if (rc < 0)
		return rc;

	/* The temp file lives in the final directory so that the rename below never crosses a
	 * file system and is atomic: readers see no blob or the whole blob, never a prefix. */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if ((rc = fault_at(b, "write")) < 0 || (rc = io_write_full(fd, data, len)) < 0)
		goto fail;
	if ((rc = fault_at(b, "fsync")) < 0)
		goto fail;
	if (fdatasync(fd) < 0) {
		rc = -errno;
		goto fail;
	}
	if (close(fd) < 0) {
		fd = -1;
		rc = -errno;
		goto fail;
	}
	fd = -1;
	if ((rc = fault_at(b, "rename")) < 0)
		goto fail;
	if (rename(tmp, final) < 0) {
		rc = -errno;
		goto fail;
	}
	*added = 1;
	return fsync_dir(sub);

fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return rc;
}

/* The owner's put: fs_write plus the byte count, which only the owner thread may update
 * (blob.h).  *added is counted even when the final directory fsync failed, since the file is
 * there and gc would count it anyway. */
static int fs_put(struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1], int *added)
{
	int rc = fs_write(b, data, len, hex, added);
	if (*added)
		FS(b)->bytes += len;
	return rc;
}

static void fs_added(struct blobs *b, uint64_t len)
{
	FS(b)->bytes += len;
}

/* O_NOFOLLOW and the regular-file check keep a symlink or a directory planted under a blob's
 * name from being read as its content: a symlink fails the open (-ELOOP), anything else that
 * is not a regular file reports -EBADMSG (not a blob), so neither is taken for the blob. */
static int fs_open(const struct blobs *b, const char *hex, int *fd, uint64_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	if ((rc = blob_path(CFS(b)->state_dir, hex, path, sizeof path)) < 0)
		return rc;
	int f = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (f < 0)
		return -errno;
	if (fstat(f, &st) < 0) {
		rc = -errno;
		close(f);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(f);
		return -EBADMSG;
	}
	*fd = f;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* lstat, not stat, for the same reason fs_open refuses symlinks: the size reported must be
 * the size of what open would read. */
static int fs_size(const struct blobs *b, const char *hex, uint64_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	if ((rc = blob_path(CFS(b)->state_dir, hex, path, sizeof path)) < 0)
		return rc;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADMSG;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* The whole file, then its digest: a blob damaged on disk is never handed out as content. */
static int fs_get(const struct blobs *b, const char *hex, void **data, size_t *len)
{
	char got[BLOB_HEX_LEN + 1];
	unsigned char *buf = NULL;
	uint64_t size;
	ssize_t have;
	int fd = -1;
	int rc = fs_open(b, hex, &fd, &size);

	if (rc < 0)
		return rc;
	/* +1 so an empty blob still gets a non-NULL buffer the caller can free. */
	if (size >= SIZE_MAX || (buf = malloc((size_t)size + 1)) == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	/* The digest is taken over what was actually read, so a file that shrank since fstat
	 * fails the check rather than returning a short buffer as the blob. */
	have = io_read_upto(fd, buf, (size_t)size);
	if (have < 0) {
		rc = (int)have;
		goto fail;
	}
	blob_sha256_hex(buf, (size_t)have, got);
	if (strcmp(got, hex) != 0) {
		rc = -EBADMSG;
		goto fail;
	}
	close(fd);
	*data = buf;
	*len = (size_t)have;
	return 0;

fail:
	free(buf);
	close(fd);
	return rc;
}

/* ---- garbage collection --------------------------------------------------------------- */

static int keep_cmp(const void *key, const void *elem)
{
	return strcmp((const char *)key, *(const char *const *)elem);
}

/* Only the two-digit fan-out directories are walked (by gc and by the count), so nothing
 * else that happens to sit in blobs/ is ever counted or deleted. */
static int is_hex2(const char *s)
{
	for (int i = 0; i < 2; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[2] == '\0';
}

/* Collect one blobs/<xx>/ directory.  Names that are neither a blob of this directory nor
 * one of our temp files are left alone: nothing is deleted that this module did not write. */
static int gc_subdir(int topfd, const char *name, const char *const *keep, size_t n,
		     size_t *removed)
{
	int fd = openat(topfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = NULL;
	struct dirent *e;
	int rc = 0;

	if (fd < 0)
		return errno == ENOTDIR || errno == ENOENT ? 0 : -errno;
	d = fdopendir(fd);
	if (d == NULL) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((errno = 0, e = readdir(d)) != NULL) {
		int drop = 0;
		if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0)
			drop = 1;
		else if (blob_hex_valid(e->d_name) && memcmp(e->d_name, name, 2) == 0)
			drop = n == 0 ||
			       bsearch(e->d_name, keep, n, sizeof *keep, keep_cmp) == NULL;
		if (!drop)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			(*removed)++;
		else if (errno != ENOENT && rc == 0)
			rc = -errno;
	}
	if (errno != 0 && rc == 0)
		rc = -errno;
	closedir(d);
	return rc;
}

/* ---- the backend --------------------------------------------------------------- */

/* Bytes of every regular file under blobs/<xx>/.  Unreadable subdirectories are skipped
 * rather than failing: the figure feeds the stats, and a store that cannot be counted
 * exactly must still open (blob_fs_new keeps the error in count_err instead). */
static int count_bytes(const char *state_dir, uint64_t *bytes)
{
	char top[PATH_MAX];
	struct dirent *e, *f;
	struct stat st;

	*bytes = 0;
	if (layout_dir(top, sizeof top, state_dir, BLOB_DIR) < 0)
		return -ENAMETOOLONG;
	DIR *d = opendir(top);
	if (d == NULL)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	while ((e = readdir(d)) != NULL) {
		if (!is_hex2(e->d_name))
			continue;
		int sfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *d2 = sfd >= 0 ? fdopendir(sfd) : NULL;
		if (d2 == NULL) {
			if (sfd >= 0)
				close(sfd);
			continue;
		}
		while ((f = readdir(d2)) != NULL)
			if (fstatat(dirfd(d2), f->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
				*bytes += (uint64_t)st.st_size;
		closedir(d2);
	}
	closedir(d);
	return 0;
}

/* Walk blobs/<xx>/ (blob.c has checked keep); then recount, as deletions may have failed half way. */
static int fs_gc(struct blobs *b, const char *const *keep, size_t n, size_t *removed)
{
	const char *state_dir = CFS(b)->state_dir;
	char top[PATH_MAX];
	DIR *d = NULL;
	struct dirent *e;
	size_t count = 0;
	int topfd;
	int rc = 0;

	if (CFS(b)->read_only)
		return -EROFS;
	if (layout_dir(top, sizeof top, state_dir, BLOB_DIR) < 0)
		return -ENAMETOOLONG;
	topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (topfd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(topfd);
	if (d == NULL) {
		rc = -errno;
		close(topfd);
		return rc;
	}
	while ((errno = 0, e = readdir(d)) != NULL) {
		if (!is_hex2(e->d_name))
			continue;
		int r = gc_subdir(dirfd(d), e->d_name, keep, n, &count);
		if (r < 0 && rc == 0)
			rc = r;
	}
	if (errno != 0 && rc == 0)
		rc = -errno;
	closedir(d);
	if (removed != NULL)
		*removed = count;
	uint64_t bytes;
	if (count_bytes(state_dir, &bytes) == 0)
		FS(b)->bytes = bytes;
	return rc;
}

/* Removing a blob that is already gone succeeds (blob.h), so a retried cleanup after a crash
 * does not fail.  The byte count never goes below 0, because it may have started from an
 * incomplete count (count_err). */
static int fs_remove(struct blobs *b, const char *hex)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	if (CFS(b)->read_only)
		return -EROFS;
	if ((rc = blob_path(CFS(b)->state_dir, hex, path, sizeof path)) < 0)
		return rc;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (unlink(path) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISREG(st.st_mode))
		FS(b)->bytes = FS(b)->bytes > (uint64_t)st.st_size ? FS(b)->bytes - (uint64_t)st.st_size : 0;
	return 0;
}

static void fs_stats(const struct blobs *b, struct blob_stats *out)
{
	out->bytes = CFS(b)->bytes;
	out->count_err = CFS(b)->count_err;
}

static void fs_close(struct blobs *b)
{
	free(b);
}

static const struct blob_ops fs_ops = {
	.name = "fs", .put = fs_put, .write = fs_write, .added = fs_added, .open = fs_open,
	.get = fs_get, .size = fs_size, .remove = fs_remove, .gc = fs_gc, .stats = fs_stats,
	.close = fs_close,
};

/* state_dir is borrowed, not copied: it must outlive the store.  The bytes are counted at
 * open so that the stats (and any limit on them) start from what is on disk; a read-only
 * store skips the walk, since it never adds or removes blobs. */
int blob_fs_new(const char *state_dir, int read_only, struct blobs **out)
{
	struct blob_fs *fs;

	*out = NULL;
	if (state_dir == NULL)
		return -EINVAL;
	if ((fs = calloc(1, sizeof *fs)) == NULL)
		return -ENOMEM;
	fs->head.ops = &fs_ops;
	fs->state_dir = state_dir;
	fs->read_only = read_only;
	if (!read_only)
		fs->count_err = count_bytes(state_dir, &fs->bytes);
	*out = &fs->head;
	return 0;
}
