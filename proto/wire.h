/* proto/wire.h — byte-level helpers shared by the supervisor and the job library:
 * full reads/writes that survive EINTR and short I/O, and a growable byte buffer.
 * All functions return 0 (or a byte count) on success and -errno on failure; none print. */
#ifndef FP_WIRE_H
#define FP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write all of buf to a blocking fd.  Returns 0 or -errno. */
int wire_write_full(int fd, const void *buf, size_t len);
/* Read exactly len bytes from a blocking fd.  Returns 0, -EPIPE on EOF before len, or -errno. */
int wire_read_full(int fd, void *buf, size_t len);

static inline void wire_put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);  p[3] = (unsigned char)v;
}
static inline uint32_t wire_get_be32(const unsigned char *p)
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
