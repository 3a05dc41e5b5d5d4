/* state/blob.h — the blob store: immutable byte strings named by the sha256 of their content
 * (64 lowercase hex digits), behind an ops table so the backend can change (a database or an
 * object store later) without touching its callers.  Identical content is stored once.
 *
 * Contract of every backend (all calls return 0 or -errno unless said otherwise):
 *   put       stores the bytes durably before it returns and writes their name into hex;
 *             *added (may be NULL) is 1 when new content was stored, 0 for a dedupe hit.
 *             The byte count (stats) grows by len when *added.
 *   write     put for a worker thread: safe to call from any thread while the owner uses the
 *             store, and it leaves the byte count alone; the owner counts a new blob
 *             (*added == 1) afterwards with blobs_added.
 *   open      gives a read-only fd positioned at 0 and the blob's size, for streaming reads;
 *             the content is not verified (the reader checks the digest itself).  A backend
 *             that does not keep blobs as files may copy the blob into an unlinked temp file:
 *             nothing may assume a blob is a file unless it asked open() for an fd.
 *   get       the whole blob in a malloc'd buffer (non-NULL even when empty), its sha256
 *             verified: -EBADMSG on a mismatch.
 *   size      the size without reading the content; -ENOENT when there is no such blob,
 *             -EBADMSG when what the backend holds under the name is not a blob.
 *   remove    deletes one blob (the caller knows nothing refers to it); 0 also when it was
 *             already gone.
 *   gc        deletes every blob whose name is not in keep (n names, sorted in strcmp order;
 *             -EINVAL otherwise) and the leftovers of interrupted writes; *removed (may be
 *             NULL) gets the count.  The byte count is recounted.
 *   stats     the bytes held.
 *   close     frees the handle; stored blobs stay.
 * open, get, size and exists take a NULL store as one that holds nothing (-ENOENT, 0).
 * A name that is not 64 lowercase hex digits is refused with -EINVAL before any lookup, so a
 * caller-supplied name can never reach outside the store.
 *
 * Faults: a test may set the head's fault hook.  The backend calls it before each step of put
 * and write that touches the medium ("write", "fsync", "rename"); a negative errno from it
 * makes that step fail with it and nothing is stored.  NULL in the server. */
#ifndef FP_BLOB_H
#define FP_BLOB_H

#include <stddef.h>
#include <stdint.h>

#define BLOB_HEX_LEN 64

struct blobs;

struct blob_stats {
	uint64_t bytes;             /* content bytes the store holds */
	int count_err;              /* 0, or the -errno that kept the backend from counting them
	                               when it was opened (bytes then starts from 0) */
};

typedef int (*blob_fault_fn)(void *arg, const char *step);

struct blob_ops {
	const char *name;
	int (*put)(struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1], int *added);
	int (*write)(const struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1],
	             int *added);
	void (*added)(struct blobs *b, uint64_t len);
	int (*open)(const struct blobs *b, const char *hex, int *fd, uint64_t *size);
	int (*get)(const struct blobs *b, const char *hex, void **data, size_t *len);
	int (*size)(const struct blobs *b, const char *hex, uint64_t *size);
	int (*remove)(struct blobs *b, const char *hex);
	int (*gc)(struct blobs *b, const char *const *keep, size_t n, size_t *removed);
	void (*stats)(const struct blobs *b, struct blob_stats *out);
	void (*close)(struct blobs *b);
};

/* Every backend's handle starts with this. */
struct blobs {
	const struct blob_ops *ops;
	blob_fault_fn fault;        /* tests only; must be thread-safe when write is used */
	void *fault_arg;
};

int blobs_put(struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1], int *added);
int blobs_write(const struct blobs *b, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1],
                int *added);
/* Count len more bytes for a blob that blobs_write stored (*added == 1); owner's thread. */
void blobs_added(struct blobs *b, uint64_t len);
int blobs_open(const struct blobs *b, const char *hex, int *fd, uint64_t *size);
int blobs_get(const struct blobs *b, const char *hex, void **data, size_t *len);
int blobs_size(const struct blobs *b, const char *hex, uint64_t *size);
/* 1 if the store holds the blob, 0 if not (or on any error). */
int blobs_exists(const struct blobs *b, const char *hex);
int blobs_remove(struct blobs *b, const char *hex);
int blobs_gc(struct blobs *b, const char *const *keep, size_t n, size_t *removed);
void blobs_stats(const struct blobs *b, struct blob_stats *out);
void blobs_close(struct blobs *b);   /* NULL is fine */

/* 1 if hex is a blob name: 64 lowercase hex digits and a NUL. */
int blob_hex_valid(const char *hex);
/* sha256 of a buffer as hex (OpenSSL EVP; the digest is fetched once per process). */
void blob_sha256_hex(const void *data, size_t len, char hex[BLOB_HEX_LEN + 1]);
/* sha256 of the first len bytes of fd as hex, read with pread (the file position is left
 * alone).  0, -EIO if the file is shorter than len, or -errno. */
int blob_sha256_fd(int fd, uint64_t len, char hex[BLOB_HEX_LEN + 1]);

/* ---- backends ------------------------------------------------------------------------------ */

/* The file system: <state_dir>/blobs/<first 2 hex>/<all 64 hex>.  put writes a temp file in the
 * same directory, fdatasyncs it, renames it into place and fsyncs the directory, so a crash
 * leaves nothing, a temp file (collected by gc) or the whole blob.  open gives the blob file
 * itself.  gc leaves alone any file it did not write.  state_dir must outlive the handle.
 * read_only: nothing is counted at open, and put/write/remove/gc fail -EROFS.
 * 0, -EINVAL or -ENOMEM (a failure to count is in stats.count_err). */
int blob_fs_new(const char *state_dir, int read_only, struct blobs **out);

/* In memory, for unit tests: the same semantics, nothing durable; open gives an unlinked temp
 * file holding a copy.  Thread-safe (a mutex), so write may be used from workers. */
int blob_mem_new(struct blobs **out);

#endif
