/* state/blob.c — the blob store's dispatch (see blob.h) and what every backend shares: the
 * name check and sha256.  Every function returns 0 / -errno and prints nothing. */
#include "state/blob.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "proto/io.h"

#define HASH_BUF (1u << 20)   /* blob_sha256_fd reads this much at a time */

int blob_hex_valid(const char *hex)
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

/* ---- dispatch ---------------------------------------------------------------------- */

int blobs_put(struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1], int *added)
{
	int a = 0;
	int rc = b->ops->put(b, data, len, hex, &a);
	if (added)
		*added = a;
	return rc;
}

int blobs_write(const struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1],
                int *added)
{
	int a = 0;
	int rc = b->ops->write(b, data, len, hex, &a);
	if (added)
		*added = a;
	return rc;
}

void blobs_added(struct blobs *b, uint64_t len)
{
	b->ops->added(b, len);
}

int blobs_open(const struct blobs *b, const char *hex, int *fd, uint64_t *size)
{
	*fd = -1;
	if (!blob_hex_valid(hex))
		return -EINVAL;
	return b ? b->ops->open(b, hex, fd, size) : -ENOENT;
}

int blobs_get(const struct blobs *b, const char *hex, void **data, size_t *len)
{
	if (data == NULL || len == NULL || !blob_hex_valid(hex))
		return -EINVAL;
	return b ? b->ops->get(b, hex, data, len) : -ENOENT;
}

int blobs_size(const struct blobs *b, const char *hex, uint64_t *size)
{
	if (!blob_hex_valid(hex))
		return -EINVAL;
	return b ? b->ops->size(b, hex, size) : -ENOENT;
}

int blobs_exists(const struct blobs *b, const char *hex)
{
	uint64_t size;
	return blobs_size(b, hex, &size) == 0;
}

int blobs_remove(struct blobs *b, const char *hex)
{
	return blob_hex_valid(hex) ? b->ops->remove(b, hex) : -EINVAL;
}

int blobs_gc(struct blobs *b, const char *const *keep, size_t n, size_t *removed)
{
	if (removed != NULL)
		*removed = 0;
	if (keep == NULL && n > 0)
		return -EINVAL;
	/* An unsorted list would make a lookup miss live blobs and delete them: refuse it. */
	for (size_t i = 0; i < n; i++) {
		if (!blob_hex_valid(keep[i]) || (i > 0 && strcmp(keep[i - 1], keep[i]) > 0))
			return -EINVAL;
	}
	return b->ops->gc(b, keep, n, removed);
}

void blobs_stats(const struct blobs *b, struct blob_stats *out)
{
	memset(out, 0, sizeof *out);
	b->ops->stats(b, out);
}

void blobs_close(struct blobs *b)
{
	if (b)
		b->ops->close(b);
}
