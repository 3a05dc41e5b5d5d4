/* state/blob_mem.c — the in-memory blob backend (see blob.h), for unit tests: a sorted array
 * of (name, bytes) under one mutex, so a worker thread may write while the owner reads.
 * open hands out an unlinked temp file holding a copy, as any backend that does not keep
 * blobs as files would.  The fault hook runs at the same steps as the file system's, so the
 * same tests drive both.  Every function returns 0 / -errno and prints nothing. */
#include "state/blob.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/io.h"

struct mem_blob {
	char hex[BLOB_HEX_LEN + 1];
	unsigned char *data;
	size_t len;
};

struct blob_mem {
	struct blobs head;
	pthread_mutex_t mu;
	struct mem_blob *v;         /* sorted by hex */
	size_t n, cap;
	uint64_t bytes;
};

#define MEM(b) ((struct blob_mem *)(b))

/* Index of hex in m (found: *hit = 1), or where it would go.  Caller holds mu.  Returning
 * the insertion point lets mem_write insert without a second search, which keeps the array
 * sorted for the binary search itself and for gc. */
static size_t find(const struct blob_mem *m, const char *hex, int *hit)
{
	size_t lo = 0, hi = m->n;
	*hit = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->v[mid].hex, hex);
		if (c == 0) {
			*hit = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int fault_at(const struct blobs *b, const char *step)
{
	return b->fault ? b->fault(b->fault_arg, step) : 0;
}

/* The faults run before anything is stored, as on disk: a failed step leaves no blob.
 * The copy is made outside the mutex so a large write never blocks the owner's reads; the
 * lookup is therefore repeated under the lock, because another thread may have stored the
 * same content in between, and a second entry would break the sorted, unique array. */
static int mem_write(const struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1],
                     int *added)
{
	struct blob_mem *m = MEM(b);   /* the mutex makes the const handle safe to change */
	unsigned char *copy;
	size_t at;
	int hit, rc;

	*added = 0;
	if (hex == NULL || (data == NULL && len > 0))
		return -EINVAL;
	blob_sha256_hex(data, len, hex);
	if (!blob_hex_valid(hex))
		return -EIO;
	pthread_mutex_lock(&m->mu);
	find(m, hex, &hit);
	pthread_mutex_unlock(&m->mu);
	if (hit)
		return 0;
	if ((rc = fault_at(b, "write")) < 0 || (rc = fault_at(b, "fsync")) < 0 ||
	    (rc = fault_at(b, "rename")) < 0)
		return rc;
	if ((copy = malloc(len ? len : 1)) == NULL)
		return -ENOMEM;
	if (len)
		memcpy(copy, data, len);
	pthread_mutex_lock(&m->mu);
	at = find(m, hex, &hit);
	if (hit) {
		pthread_mutex_unlock(&m->mu);
		free(copy);
		return 0;
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct mem_blob *v = realloc(m->v, cap * sizeof *v);
		if (v == NULL) {
			pthread_mutex_unlock(&m->mu);
			free(copy);
			return -ENOMEM;
		}
		m->v = v;
		m->cap = cap;
	}
	memmove(&m->v[at + 1], &m->v[at], (m->n - at) * sizeof *m->v);
	memcpy(m->v[at].hex, hex, sizeof m->v[at].hex);
	m->v[at].data = copy;
	m->v[at].len = len;
	m->n++;
	pthread_mutex_unlock(&m->mu);
	*added = 1;
	return 0;
}

/* The byte count is under the mutex too: unlike the file system backend it shares the lock
 * with the array, so stats from the owner never see a torn value. */
static void mem_added(struct blobs *b, uint64_t len)
{
	pthread_mutex_lock(&MEM(b)->mu);
	MEM(b)->bytes += len;
	pthread_mutex_unlock(&MEM(b)->mu);
}

static int mem_put(struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1], int *added)
{
	int rc = mem_write(b, data, len, hex, added);
	if (*added)
		mem_added(b, len);
	return rc;
}

/* A copy of the blob (data non-NULL) or its size only.  A copy, never a pointer into the
 * array: a concurrent write may realloc it as soon as the mutex is released.  One spare byte
 * keeps the buffer non-NULL for an empty blob (blob.h).  No digest check is needed, since the
 * bytes never leave memory between write and read. */
static int lookup(const struct blobs *b, const char *hex, void **data, size_t *len)
{
	struct blob_mem *m = MEM(b);
	int hit, rc = 0;

	pthread_mutex_lock(&m->mu);
	size_t at = find(m, hex, &hit);
	if (!hit) {
		rc = -ENOENT;
	} else {
		*len = m->v[at].len;
		if (data != NULL && (*data = malloc(*len + 1)) == NULL)
			rc = -ENOMEM;
		else if (data != NULL)
			memcpy(*data, m->v[at].data, *len);
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static int mem_get(const struct blobs *b, const char *hex, void **data, size_t *len)
{
	return lookup(b, hex, data, len);
}

static int mem_size(const struct blobs *b, const char *hex, uint64_t *size)
{
	size_t len;
	int rc = lookup(b, hex, NULL, &len);
	if (rc == 0)
		*size = len;
	return rc;
}

/* An unlinked temp file with a copy: the caller gets an fd like any other backend's, so the
 * code that streams blobs through open() is tested without assuming blobs are files.
 * O_TMPFILE means nothing is left behind when the fd is closed, even after a crash. */
static int mem_open(const struct blobs *b, const char *hex, int *fd, uint64_t *size)
{
	const char *dir = getenv("TMPDIR");
	void *data = NULL;
	size_t len;
	int rc = lookup(b, hex, &data, &len);

	if (rc < 0)
		return rc;
	int f = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (f < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = io_write_full(f, data, len)) < 0 || (lseek(f, 0, SEEK_SET) < 0 && (rc = -errno))) {
		close(f);
		goto fail;
	}
	*fd = f;
	*size = len;
fail:
	free(data);
	return rc;
}

/* Removing a missing blob succeeds, as blob.h requires of every backend; the count is kept
 * from going below 0 like the file system's. */
static int mem_remove(struct blobs *b, const char *hex)
{
	struct blob_mem *m = MEM(b);
	int hit;

	pthread_mutex_lock(&m->mu);
	size_t at = find(m, hex, &hit);
	if (hit) {
		m->bytes = m->bytes > m->v[at].len ? m->bytes - m->v[at].len : 0;
		free(m->v[at].data);
		memmove(&m->v[at], &m->v[at + 1], (m->n - at - 1) * sizeof *m->v);
		m->n--;
	}
	pthread_mutex_unlock(&m->mu);
	return 0;
}

static int keep_cmp(const void *key, const void *elem)
{
	return strcmp((const char *)key, *(const char *const *)elem);
}

/* Keep the listed blobs, drop the rest, recount.  keep is sorted (blob.c checks it before
 * calling), which is what makes the bsearch valid.  The array is compacted in place, so the
 * order stays sorted with no allocation that could fail half way. */
static int mem_gc(struct blobs *b, const char *const *keep, size_t n, size_t *removed)
{
	struct blob_mem *m = MEM(b);
	size_t out = 0, count = 0;

	pthread_mutex_lock(&m->mu);
	m->bytes = 0;
	for (size_t i = 0; i < m->n; i++) {
		if (n > 0 && bsearch(m->v[i].hex, keep, n, sizeof *keep, keep_cmp) != NULL) {
			m->bytes += m->v[i].len;
			m->v[out++] = m->v[i];
		} else {
			free(m->v[i].data);
			count++;
		}
	}
	m->n = out;
	pthread_mutex_unlock(&m->mu);
	if (removed != NULL)
		*removed = count;
	return 0;
}

/* count_err is left as the caller zeroed it: there is nothing to count at open. */
static void mem_stats(const struct blobs *b, struct blob_stats *out)
{
	pthread_mutex_lock(&MEM(b)->mu);
	out->bytes = MEM(b)->bytes;
	pthread_mutex_unlock(&MEM(b)->mu);
}

/* Unlike the file system's close, this one loses the blobs: the memory backend has no medium
 * that outlives the handle, which is all a unit test needs. */
static void mem_close(struct blobs *b)
{
	struct blob_mem *m = MEM(b);
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].data);
	free(m->v);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static const struct blob_ops mem_ops = {
	.name = "memory", .put = mem_put, .write = mem_write, .added = mem_added, .open = mem_open,
	.get = mem_get, .size = mem_size, .remove = mem_remove, .gc = mem_gc, .stats = mem_stats,
	.close = mem_close,
};

int blob_mem_new(struct blobs **out)
{
	struct blob_mem *m = calloc(1, sizeof *m);

	*out = NULL;
	if (m == NULL)
		return -ENOMEM;
	m->head.ops = &mem_ops;
	pthread_mutex_init(&m->mu, NULL);
	*out = &m->head;
	return 0;
}
