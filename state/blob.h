/* state/blob.h — content-addressed blob store in <state>/blobs/: a blob's name is the sha256 of
 * its bytes (64 lowercase hex digits), stored as blobs/<first 2 hex>/<all 64 hex>.  Writes are
 * atomic and durable before blob_put returns: temp file, fsync, rename, fsync of the directory.
 * Identical content is stored once.  Returns 0 / -errno. */
#ifndef FP_BLOB_H
#define FP_BLOB_H

#include <stddef.h>
#include <stdint.h>

#define BLOB_HEX_LEN 64

/* Store data; writes its name into hex (NUL-terminated). */
int blob_put(const char *state_dir, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1]);
/* Read a whole blob into a malloc'd buffer, verifying its sha256 (-EBADMSG on mismatch). */
int blob_get(const char *state_dir, const char *hex, void **data, size_t *len);
/* 1 if the blob exists, 0 if not. */
int blob_exists(const char *state_dir, const char *hex);
/* Delete every blob whose name is not in keep (sorted array of n hex names, strcmp order).
 * *removed gets the count. */
int blob_gc(const char *state_dir, const char *const *keep, size_t n, size_t *removed);
/* Open a blob for reading (O_RDONLY | O_CLOEXEC) and give its size; the content is not
 * verified (a reader that streams it checks the digest itself).  0, -ENOENT, or -errno. */
int blob_open(const char *state_dir, const char *hex, int *fd, uint64_t *size);
/* Size of a blob without reading it.  0, -ENOENT, -EBADMSG (not a regular file) or -errno. */
int blob_size(const char *state_dir, const char *hex, uint64_t *size);

/* One state dir's store, for the server: the same operations, plus the bytes the store holds
 * (counted once by blob_store_init, then kept by put / remove / gc) and a fault hook for tests.
 * The hook is called before each step that touches the disk in blob_store_put ("write",
 * "fsync", "rename"); a negative errno from it makes that step fail with it.  NULL in the
 * server: a hook can only be set by code that holds the struct. */
typedef int (*blob_fault_fn)(void *arg, const char *step);
struct blob_store {
	const char *state_dir;
	uint64_t bytes;
	blob_fault_fn fault;
	void *fault_arg;
};
/* Count what blobs/ holds now (a missing blobs/ holds 0 bytes).  0 or -errno. */
int blob_store_init(struct blob_store *bs, const char *state_dir);
/* blob_put through the store; *added (may be NULL) is 1 if a new file was written. */
int blob_store_put(struct blob_store *bs, const void *data, size_t len, char hex[BLOB_HEX_LEN + 1],
                   int *added);
/* blob_store_put for a worker thread: it reads only bs's state_dir and fault hook (which must
 * then be thread-safe) and never its byte count, so the loop may use bs meanwhile.  The loop
 * adds the bytes of a new file (*added == 1) afterwards with blob_store_added.  A blob that
 * existed already counts as stored (*added == 0).  0 or -errno. */
int blob_store_write(const struct blob_store *bs, const void *data, size_t len,
                     char hex[BLOB_HEX_LEN + 1], int *added);
/* Count len more bytes, for a new file that blob_store_write wrote (loop thread). */
void blob_store_added(struct blob_store *bs, uint64_t len);
/* Delete one blob (the caller knows nothing refers to it).  0 (also when it was already
 * gone) or -errno. */
int blob_store_remove(struct blob_store *bs, const char *hex);
/* blob_gc, then recount the bytes. */
int blob_store_gc(struct blob_store *bs, const char *const *keep, size_t n, size_t *removed);

/* sha256 of a buffer as hex (OpenSSL EVP; the digest is fetched once per process). */
void blob_sha256_hex(const void *data, size_t len, char hex[BLOB_HEX_LEN + 1]);
/* sha256 of the first len bytes of fd as hex, read with pread (the file position is left
 * alone).  0, -EIO if the file is shorter than len, or -errno. */
int blob_sha256_fd(int fd, uint64_t len, char hex[BLOB_HEX_LEN + 1]);

#endif
