/* proto/wire.c — see wire.h. */
#include "wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int wire_write_full(int fd, const void *buf, size_t len)
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

int wire_read_full(int fd, void *buf, size_t len)
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
