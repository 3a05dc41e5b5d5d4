/* proto/io.h — byte-level helpers shared by the supervisor and the job library:
 * full reads/writes that survive EINTR and short I/O, hex text, random identifiers, and a
 * growable byte buffer.
 * All functions return 0 (or a byte count) on success and -errno on failure; none print. */
#ifndef FP_IO_H
#define FP_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write all of buf to a blocking fd.  Returns 0 or -errno. */
int io_write_full(int fd, const void *buf, size_t len);
/* Read exactly len bytes from a blocking fd.  Returns 0, -EPIPE on EOF before len, or -errno. */
int io_read_full(int fd, void *buf, size_t len);
/* Read until len bytes or end of file.  Returns the count (short only at end of file) or -errno. */
ssize_t io_read_upto(int fd, void *buf, size_t len);
/* The same at a file offset (pread); the file position is left alone. */
ssize_t io_pread_upto(int fd, void *buf, size_t len, uint64_t off);
/* Write all of buf at a file offset (pwrite).  Returns 0, -EIO if the file takes no more
 * bytes, or -errno. */
int io_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);

/* n bytes as 2n lowercase hex digits and a NUL (out holds 2n + 1). */
void io_hex(const void *bytes, size_t n, char *out);
/* A fresh identifier: 128 bits from getrandom() as 32 lowercase hex digits and a NUL.
 * Returns 0 or -errno. */
int io_random_hex(char out[33]);

static inline void io_put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);  p[3] = (unsigned char)v;
}
static inline uint32_t io_get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A growable byte buffer with a read offset, used for non-blocking I/O queues. */
struct wbuf {
	unsigned char *data;
	size_t off;  /* first unread byte */
	size_t len;  /* one past the last written byte */
	size_t cap;
};

int wbuf_append(struct wbuf *b, const void *p, size_t n);   /* 0 or -ENOMEM */
int wbuf_printf(struct wbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline size_t wbuf_pending(const struct wbuf *b) { return b->len - b->off; }
void wbuf_consume(struct wbuf *b, size_t n);   /* drop n bytes from the front */
void wbuf_free(struct wbuf *b);

#endif
