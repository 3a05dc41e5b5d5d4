/* tests/helpers/badframes.c — a hostile job that abuses the frame protocol on FORKPOINT_FD, to
 * show that the supervisor survives it, ends the task with an error and keeps serving others.
 *
 *   badframes MODE [MARKER...]
 *
 * MODE:
 *   garbage     a frame header followed by bytes that are not msgpack, then more noise
 *   oversize    a header declaring 2^31 bytes, then a trickle of bytes
 *   array32     a 5-byte payload: an array32 header claiming 2^27 elements (not a map either)
 *   array32map  a map whose "message" is an array32 header claiming 2^27 elements
 *   deep        a map whose "message" is nested 1000 arrays deep
 *   flood       well-formed progress frames as fast as the socket takes them, forever
 *   bigout      100 MB on stdout as fast as possible, then exit 0 (no protocol abuse at all)
 *
 * After the abuse the job naps for up to 60 s: the supervisor is expected to kill it long
 * before.  Exit status 3 means "the supervisor let me finish", 2 a usage or setup error. */
#include "wire.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Send one frame: 4-byte big-endian length, then the payload as given. */
static int send_frame(int fd, const unsigned char *payload, size_t len)
{
	unsigned char hdr[4];

	wire_put_be32(hdr, (uint32_t)len);
	if (wire_write_full(fd, hdr, sizeof hdr) < 0)
		return -1;
	return wire_write_full(fd, payload, len);
}

/* The fixed prefix of a two-entry map {"type":"progress","message": <value follows>}. */
static size_t progress_prefix(unsigned char *p)
{
	static const unsigned char pre[] = {
		0x82, 0xa4, 't', 'y', 'p', 'e', 0xa8, 'p', 'r', 'o', 'g', 'r', 'e', 's', 's',
		0xa7, 'm', 'e', 's', 's', 'a', 'g', 'e',
	};

	memcpy(p, pre, sizeof pre);
	return sizeof pre;
}

static void nap_then_exit(void)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	for (int i = 0; i < 600; i++)
		nanosleep(&ts, NULL);
	exit(3);
}

static int mode_garbage(int fd)
{
	unsigned char buf[4096];
	uint32_t seed = 0x9e3779b9u;

	/* 0xc1 is the one byte msgpack never uses, so the first payload byte alone is invalid. */
	for (size_t i = 0; i < sizeof buf; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (unsigned char)(seed >> 16);
	}
	buf[0] = 0xc1;
	if (send_frame(fd, buf, 64) < 0)
		return -1;
	for (int i = 0; i < 16; i++)
		if (wire_write_full(fd, buf, sizeof buf) < 0)
			return -1;
	return 0;
}

static int mode_oversize(int fd)
{
	unsigned char hdr[4];

	wire_put_be32(hdr, 0x80000000u);
	if (wire_write_full(fd, hdr, sizeof hdr) < 0)
		return -1;
	for (int i = 0; i < 64; i++)
		if (wire_write_full(fd, "\x81\xa4type", 6) < 0)
			return -1;
	return 0;
}

static int mode_array32(int fd)
{
	static const unsigned char p[] = { 0xdd, 0x08, 0x00, 0x00, 0x00 };

	return send_frame(fd, p, sizeof p);
}

static int mode_array32map(int fd)
{
	unsigned char p[64];
	size_t n = progress_prefix(p);

	memcpy(p + n, "\xdd\x08\x00\x00\x00", 5);
	return send_frame(fd, p, n + 5);
}

static int mode_deep(int fd)
{
	unsigned char p[1100];
	size_t n = progress_prefix(p);

	memset(p + n, 0x91, 1000);   /* fixarray of one element, 1000 times */
	n += 1000;
	p[n++] = 0xc0;               /* nil at the bottom */
	return send_frame(fd, p, n);
}

static int mode_flood(int fd)
{
	/* {"type":"progress","message":"flood","fraction":0.5} */
	static const unsigned char p[] = {
		0x83, 0xa4, 't', 'y', 'p', 'e', 0xa8, 'p', 'r', 'o', 'g', 'r', 'e', 's', 's',
		0xa7, 'm', 'e', 's', 's', 'a', 'g', 'e', 0xa5, 'f', 'l', 'o', 'o', 'd',
		0xa8, 'f', 'r', 'a', 'c', 't', 'i', 'o', 'n',
		0xcb, 0x3f, 0xe0, 0, 0, 0, 0, 0, 0,
	};
	unsigned char batch[64 * (4 + sizeof p)];
	size_t n = 0;

	for (int i = 0; i < 64; i++) {
		wire_put_be32(batch + n, (uint32_t)sizeof p);
		memcpy(batch + n + 4, p, sizeof p);
		n += 4 + sizeof p;
	}
	for (;;)
		if (wire_write_full(fd, batch, n) < 0)
			return -1;
}

static int mode_bigout(void)
{
	static char chunk[65536];

	for (size_t i = 0; i < sizeof chunk; i++)
		chunk[i] = (i % 64 == 63) ? '\n' : (char)('a' + i % 26);
	for (int i = 0; i < 1600; i++)   /* 1600 * 64 KiB = 100 MiB */
		if (wire_write_full(STDOUT_FILENO, chunk, sizeof chunk) < 0)
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *fdenv = getenv("FORKPOINT_FD");
	int fd, rc;

	signal(SIGPIPE, SIG_IGN);
	if (strcmp(mode, "bigout") == 0)
		return mode_bigout() < 0 ? 1 : 0;
	if (!fdenv || !*fdenv) {
		fprintf(stderr, "badframes: FORKPOINT_FD is not set\n");
		return 2;
	}
	fd = atoi(fdenv);
	if (strcmp(mode, "garbage") == 0)
		rc = mode_garbage(fd);
	else if (strcmp(mode, "oversize") == 0)
		rc = mode_oversize(fd);
	else if (strcmp(mode, "array32") == 0)
		rc = mode_array32(fd);
	else if (strcmp(mode, "array32map") == 0)
		rc = mode_array32map(fd);
	else if (strcmp(mode, "deep") == 0)
		rc = mode_deep(fd);
	else if (strcmp(mode, "flood") == 0)
		rc = mode_flood(fd);
	else {
		fprintf(stderr, "badframes: unknown mode '%s'\n", mode);
		return 2;
	}
	/* A write error means the supervisor hung up on us, which is the expected outcome;
	 * either way, wait to be killed rather than exit on our own. */
	fprintf(stderr, "badframes: %s sent (rc %d)\n", mode, rc);
	nap_then_exit();
}
