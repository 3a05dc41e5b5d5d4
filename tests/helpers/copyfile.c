/* tests/helpers/copyfile.c — a plain job that consumes a file and produces one: it copies INPUT
 * to outputs/NAME in its work folder ($FORKPOINT_WORKDIR), reversing the bytes of each 4 KiB
 * block when asked, so a test can tell the output was computed rather than passed through.
 *
 *   copyfile INPUT NAME [reverse|copy] [MARKER...]
 *
 * Prints "copied N bytes" and exits 0; exits 1 with a message on stderr on any error. */
#include "proto/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 4096

int main(int argc, char **argv)
{
	unsigned char buf[BLOCK];
	char out[4096];
	long long total = 0;
	int in = -1, fd = -1, rc = 1;
	if (argc < 3) {
		fprintf(stderr, "usage: copyfile INPUT NAME [reverse|copy]\n");
		return 2;
	}
	int reverse = argc > 3 && strcmp(argv[3], "reverse") == 0;
	const char *work = getenv("FORKPOINT_WORKDIR");
	snprintf(out, sizeof out, "%s/outputs/%s", work ? work : ".", argv[2]);
	in = open(argv[1], O_RDONLY | O_CLOEXEC);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (in < 0 || fd < 0) {
		fprintf(stderr, "copyfile: %s: %s\n", in < 0 ? argv[1] : out, strerror(errno));
		goto out;
	}
	for (;;) {
		/* Whole blocks, so "reverse" means the same thing however read() splits the file. */
		ssize_t n = io_read_upto(in, buf, BLOCK);
		if (n < 0) {
			fprintf(stderr, "copyfile: read: %s\n", strerror((int)-n));
			goto out;
		}
		size_t got = (size_t)n;
		if (got == 0)
			break;
		if (reverse)
			for (size_t i = 0; i < got / 2; i++) {
				unsigned char c = buf[i];
				buf[i] = buf[got - 1 - i];
				buf[got - 1 - i] = c;
			}
		int wrc = io_write_full(fd, buf, got);
		if (wrc < 0) {
			fprintf(stderr, "copyfile: write: %s\n", strerror(-wrc));
			goto out;
		}
		total += (long long)got;
		if (got < BLOCK)
			break;
	}
	if (fsync(fd) < 0) {
		fprintf(stderr, "copyfile: fsync: %s\n", strerror(errno));
		goto out;
	}
	printf("copied %lld bytes\n", total);
	rc = 0;
out:
	if (in >= 0)
		close(in);
	if (fd >= 0)
		close(fd);
	return rc;
}
