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
/* sha256 of a buffer as hex (OpenSSL EVP; the digest is fetched once per process). */
void blob_sha256_hex(const void *data, size_t len, char hex[BLOB_HEX_LEN + 1]);
/* sha256 of the first len bytes of fd as hex, read with pread (the file position is left
 * alone).  0, -EIO if the file is shorter than len, or -errno. */
int blob_sha256_fd(int fd, uint64_t len, char hex[BLOB_HEX_LEN + 1]);

#endif
