/* state/blob.c — the content-addressed blob store (see blob.h).  A blob is durable once its
 * final name exists: the bytes are written under a temp name in the same directory, fsynced,
 * renamed into place and the directory fsynced, so a crash leaves either nothing, a leftover
 * temp file (collected by blob_gc) or the complete blob.  Names are checked before any path is
 * built from them, so a caller-supplied name can never reach outside blobs/.
 * Every function returns 0 / -errno (blob_exists: 1 / 0) and prints nothing. */
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

#include <openssl/evp.h>

#include "proto/io.h"

#define BLOB_DIR LAYOUT_BLOBS
#define TMP_PREFIX ".tmp-"
#define HASH_BUF (1u << 20)   /* blob_sha256_fd reads this much at a time */

/* ---- sha256 ------------------------------------------------------------------ */

/* Fetching an algorithm walks OpenSSL's provider tables; doing it once per process instead of
 * per call keeps hashing small blobs cheap.  The first caller to publish wins; a thread that
 * lost the race frees its own copy. */
static const EVP_MD *sha256_md(void)
{
	static const EVP_MD *md;
	const EVP_MD *m = __atomic_load_n(&md, __ATOMIC_ACQUIRE);
	const EVP_MD *expected = NULL;
	EVP_MD *fetched;

	if (m != NULL)
		return m;
	fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (fetched == NULL)
		m = EVP_sha256();   /* a static object, never freed */
	else
		m = fetched;
	if (!__atomic_compare_exchange_n(&md, &expected, m, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		EVP_MD_free(fetched);
		m = expected;
	}
	return m;
}

void blob_sha256_hex(const void *data, size_t len, char hex[BLOB_HEX_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (EVP_Digest(data, len, md, &mdlen, sha256_md(), NULL) != 1 || mdlen != 32) {
		/* Only reachable when the library is broken; a name that no blob can have
		 * makes every later lookup fail instead of matching the wrong content. */
		memset(hex, '-', BLOB_HEX_LEN);
		hex[BLOB_HEX_LEN] = '\0';
		return;
	}
	io_hex(md, 32, hex);
}

/* Hashed from the descriptor with pread in HASH_BUF pieces, so a file of any size hashes in
 * bounded memory and the file position of a shared fd is left alone.  A file shorter than len
 * is -EIO: the caller stated the size it expects, and a digest of fewer bytes would name
 * different content. */
int blob_sha256_fd(int fd, uint64_t len, char hex[BLOB_HEX_LEN + 1])
{
	unsigned char *buf = malloc(HASH_BUF), md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int rc = -ENOMEM;

	if (buf == NULL || ctx == NULL || EVP_DigestInit_ex(ctx, sha256_md(), NULL) != 1)
		goto fail;
	for (uint64_t off = 0; off < len;) {
		size_t want = len - off < HASH_BUF ? (size_t)(len - off) : HASH_BUF;
		ssize_t n = io_pread_upto(fd, buf, want, off);
		if (n < 0) {
			rc = (int)n;
			goto fail;
		}
		if ((size_t)n < want) {
			rc = -EIO;
			goto fail;
		}
		if (EVP_DigestUpdate(ctx, buf, want) != 1)
			goto fail;
		off += want;
	}
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32)
		goto fail;
	io_hex(md, 32, hex);
	rc = 0;
fail:
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}

/* ---- paths --------------------------------------------------------------------- */

/* Every name that reaches a path is checked first: exactly 64 lowercase hex digits, so a
 * name from a record or a client can never carry a '/' or ".." into blobs/. */
static int hex_valid(const char *hex)
{
	if (hex == NULL)
		return 0;
	for (int i = 0; i < BLOB_HEX_LEN; i++) {
		char c = hex[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return hex[BLOB_HEX_LEN] == '\0';
}

/* <state>/blobs/<first two>/<all 64> */
static int blob_path(const char *state_dir, const char *hex, char *out, size_t outlen)
{
	return layout_blob(out, outlen, state_dir, hex);
}

/* A rename or a new entry is durable only once the directory holding it is fsynced; the file's
 * own fdatasync does not cover its name. */
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
static int fault_at(const struct blob_store *bs, const char *step)
{
	return bs && bs->fault ? bs->fault(bs->fault_arg, step) : 0;
}

/* blob_put with an optional store (read only, so a worker thread may call it): its fault hook is consulted before each disk step, and
 * *added says whether a new file now exists (a dedup hit adds nothing).
 * Order: hash, dedup check, directories, temp file, write, fdatasync, rename, fsync of the
 * directory.  The temp name lives in the final directory so the rename never crosses a file
 * system, and a crash leaves either no blob or a whole one (a stray temp file at worst, which
 * gc removes). */
static int put_impl(const struct blob_store *bs, const char *state_dir, const void *data, size_t len,
		    char hex[BLOB_HEX_LEN + 1], int *added)
{
	char top[PATH_MAX], sub[PATH_MAX], final[PATH_MAX], tmp[PATH_MAX];
	struct stat st;
	int fd = -1;
	int rc;

	*added = 0;
	if (state_dir == NULL || hex == NULL || (data == NULL && len > 0))
		return -EINVAL;
	blob_sha256_hex(data, len, hex);
	if (!hex_valid(hex))
		return -EIO;
	rc = blob_path(state_dir, hex, final, sizeof final);
	if (rc < 0)
		return rc;
	/* Same name and same size: the content is already here (a damaged copy of the same
	 * size is caught by blob_get's digest check, never silently returned). */
	if (stat(final, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len)
		return 0;

	if ((size_t)snprintf(top, sizeof top, "%s/" BLOB_DIR, state_dir) >= sizeof top ||
	    (size_t)snprintf(sub, sizeof sub, "%s/%.2s", top, hex) >= sizeof sub ||
	    (size_t)snprintf(tmp, sizeof tmp, "%s/" TMP_PREFIX "XXXXXX", sub) >= sizeof tmp)
		return -ENAMETOOLONG;
	rc = mkdir_durable(top, state_dir);
	if (rc < 0)
		return rc;
	rc = mkdir_durable(sub, top);
	if (rc < 0)
		return rc;

	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if ((rc = fault_at(bs, "write")) < 0 || (rc = io_write_full(fd, data, len)) < 0)
		goto fail;
	if ((rc = fault_at(bs, "fsync")) < 0)
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
	if ((rc = fault_at(bs, "rename")) < 0)
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

int blob_put(const char *state_dir, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1])
{
	int added;
	return put_impl(NULL, state_dir, data, len, hex, &added);
}

/* O_NOFOLLOW and the regular-file check: a name under blobs/ that is a link or a device is
 * damage, reported as -EBADMSG, never followed. */
int blob_open(const char *state_dir, const char *hex, int *fd, uint64_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	*fd = -1;
	if (state_dir == NULL || !hex_valid(hex))
		return -EINVAL;
	if ((rc = blob_path(state_dir, hex, path, sizeof path)) < 0)
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

/* lstat, for the same reason as blob_open's O_NOFOLLOW. */
int blob_size(const char *state_dir, const char *hex, uint64_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	if (state_dir == NULL || !hex_valid(hex))
		return -EINVAL;
	if ((rc = blob_path(state_dir, hex, path, sizeof path)) < 0)
		return rc;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADMSG;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* The digest is verified on every read: the name promises the content, and a disk that
 * returned different bytes must make the read fail, not hand a job the wrong checkpoint. */
int blob_get(const char *state_dir, const char *hex, void **data, size_t *len)
{
	char path[PATH_MAX], got[BLOB_HEX_LEN + 1];
	unsigned char *buf = NULL;
	struct stat st;
	ssize_t have;
	int fd = -1;
	int rc;

	if (state_dir == NULL || data == NULL || len == NULL || !hex_valid(hex))
		return -EINVAL;
	rc = blob_path(state_dir, hex, path, sizeof path);
	if (rc < 0)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < 0) {
		rc = -EBADMSG;
		goto fail;
	}
	/* +1 so an empty blob still gets a non-NULL buffer the caller can free. */
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	have = io_read_upto(fd, buf, (size_t)st.st_size);
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
	if (fd >= 0)
		close(fd);
	return rc;
}

int blob_exists(const char *state_dir, const char *hex)
{
	char path[PATH_MAX];
	struct stat st;

	if (state_dir == NULL || !hex_valid(hex) || blob_path(state_dir, hex, path, sizeof path) < 0)
		return 0;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? 1 : 0;
}

/* ---- garbage collection --------------------------------------------------------------- */

static int keep_cmp(const void *key, const void *elem)
{
	return strcmp((const char *)key, *(const char *const *)elem);
}

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
		else if (hex_valid(e->d_name) && memcmp(e->d_name, name, 2) == 0)
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

/* One bad subdirectory does not stop the collection: the first error is kept and returned
 * after every other subdirectory has been tried, so a single unreadable folder cannot make
 * the store grow without bound. */
int blob_gc(const char *state_dir, const char *const *keep, size_t n, size_t *removed)
{
	char top[PATH_MAX];
	DIR *d = NULL;
	struct dirent *e;
	size_t count = 0;
	int topfd;
	int rc = 0;

	if (removed != NULL)
		*removed = 0;
	if (state_dir == NULL || (keep == NULL && n > 0))
		return -EINVAL;
	/* An unsorted list would make bsearch miss live blobs and delete them: refuse it. */
	for (size_t i = 0; i < n; i++) {
		if (!hex_valid(keep[i]) || (i > 0 && strcmp(keep[i - 1], keep[i]) > 0))
			return -EINVAL;
	}
	if ((size_t)snprintf(top, sizeof top, "%s/" BLOB_DIR, state_dir) >= sizeof top)
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
	return rc;
}

/* ---- the server's store --------------------------------------------------------------- */

/* Bytes of every regular file under blobs/<xx>/.
 * Counted by walking the tree once, at start, rather than stored: the files themselves are
 * the only record of what the store holds. */
static int count_bytes(const char *state_dir, uint64_t *bytes)
{
	char top[PATH_MAX];
	struct dirent *e, *f;
	struct stat st;

	*bytes = 0;
	if ((size_t)snprintf(top, sizeof top, "%s/" BLOB_DIR, state_dir) >= sizeof top)
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

int blob_store_init(struct blob_store *bs, const char *state_dir)
{
	memset(bs, 0, sizeof *bs);
	bs->state_dir = state_dir;
	return state_dir ? count_bytes(state_dir, &bs->bytes) : -EINVAL;
}

int blob_store_put(struct blob_store *bs, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1],
                   int *added)
{
	int a = 0;
	int rc = put_impl(bs, bs->state_dir, data, len, hex, &a);
	if (a)
		bs->bytes += len;
	if (added)
		*added = a;
	return rc;
}

/* The byte count is not touched here: this runs on a worker thread while the loop owns bs;
 * the loop adds the bytes with blob_store_added() when it hears of completion. */
int blob_store_write(const struct blob_store *bs, const void *data, size_t len,
                     char hex[BLOB_HEX_LEN + 1], int *added)
{
	int a = 0;
	int rc = put_impl(bs, bs->state_dir, data, len, hex, &a);
	if (added)
		*added = a;
	return rc;
}

void blob_store_added(struct blob_store *bs, uint64_t len)
{
	bs->bytes += len;
}

/* A blob already gone is success: what the caller wants (no such blob) holds either way. */
int blob_store_remove(struct blob_store *bs, const char *hex)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	if (!hex_valid(hex))
		return -EINVAL;
	if ((rc = blob_path(bs->state_dir, hex, path, sizeof path)) < 0)
		return rc;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (unlink(path) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISREG(st.st_mode))
		bs->bytes = bs->bytes > (uint64_t)st.st_size ? bs->bytes - (uint64_t)st.st_size : 0;
	return 0;
}

/* The count is taken afresh after gc instead of adjusted file by file: gc also removes temp
 * files, and a recount cannot drift from what is on disk. */
int blob_store_gc(struct blob_store *bs, const char *const *keep, size_t n, size_t *removed)
{
	int rc = blob_gc(bs->state_dir, keep, n, removed);
	uint64_t b;
	if (count_bytes(bs->state_dir, &b) == 0)
		bs->bytes = b;
	return rc;
}
