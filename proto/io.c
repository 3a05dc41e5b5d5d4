/* proto/io.c — see io.h. */
#include "proto/io.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* write() may return short on a pipe, a socket or a signal-interrupted call; a caller that
 * assumed otherwise would corrupt the frame stream.  EINTR is retried here so no caller has
 * to: the job library runs inside programs whose signal handlers it does not control. */
int io_write_full(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* EOF before len is -EPIPE, not a short count: every caller reads a fixed-size unit (a frame
 * header, a record) where half of one is as good as none, and a peer that hung up mid-unit is
 * a broken connection. */
int io_read_full(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* read or, with off >= 0, pread: both stop early only at end of file.  A short read from a
 * regular file can happen on a signal, or on a network file system, without meaning end of
 * file; looping until 0 makes "fewer bytes than asked" mean exactly that.  off is signed so
 * that -1 selects read() without a second function. */
static ssize_t read_upto(int fd, void *buf, size_t len, int64_t off)
{
	unsigned char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = off < 0 ? read(fd, p + got, len - got)
		                    : pread(fd, p + got, len - got, (off_t)(off + (int64_t)got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

ssize_t io_read_upto(int fd, void *buf, size_t len)
{
	return read_upto(fd, buf, len, -1);
}

/* Offsets beyond INT64_MAX cannot be an off_t: refused rather than wrapped negative. */
ssize_t io_pread_upto(int fd, void *buf, size_t len, uint64_t off)
{
	if (off > INT64_MAX)
		return -EINVAL;
	return read_upto(fd, buf, len, (int64_t)off);
}

int io_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const unsigned char *p = buf;
	if (off > INT64_MAX)
		return -EINVAL;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* Only a file that cannot grow answers 0; retrying would spin. */
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Hex, not base64, for ids and digests: the text is safe in file names, URLs and logs
 * without escaping. */
void io_hex(const void *bytes, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = bytes;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* getrandom() with flags 0 blocks only until the kernel's pool is first initialised, and
 * reads of up to 256 bytes are then never short (getrandom(2)); the loop is for the EINTR
 * that can still come while it blocks at boot. */
int io_random_hex(char out[33])
{
	unsigned char raw[16];
	size_t got = 0;
	while (got < sizeof raw) {
		ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	io_hex(raw, sizeof raw, out);
	return 0;
}

/* Capacity doubles, so appending n bytes one at a time costs O(n) in total; the overflow check
 * refuses a size that doubling would wrap. */
static int wbuf_reserve(struct wbuf *b, size_t n)
{
	if (b->cap - b->len >= n)
		return 0;
	/* Compact before growing: a long-lived output queue is mostly consumed bytes. */
	if (b->off > 0) {
		memmove(b->data, b->data + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->cap - b->len >= n)
			return 0;
	}
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	unsigned char *d = realloc(b->data, cap);
	if (!d)
		return -ENOMEM;
	b->data = d;
	b->cap = cap;
	return 0;
}

int wbuf_append(struct wbuf *b, const void *p, size_t n)
{
	int rc = wbuf_reserve(b, n);
	if (rc < 0)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/* Formats twice (measure, then write) instead of into a stack buffer, so a long line is never
 * cut.  The NUL vsnprintf writes lands in reserved space but is not counted in len. */
int wbuf_printf(struct wbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	int rc = wbuf_reserve(b, (size_t)n + 1);
	if (rc < 0)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

/* Consuming everything resets the offsets, so an output queue that keeps draining never needs
 * the memmove in wbuf_reserve. */
void wbuf_consume(struct wbuf *b, size_t n)
{
	if (n >= b->len - b->off) {
		b->off = b->len = 0;
		return;
	}
	b->off += n;
}

void wbuf_free(struct wbuf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}
