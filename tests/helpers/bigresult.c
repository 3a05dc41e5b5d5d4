/* tests/helpers/bigresult.c — a job that sends results and checkpoints chosen to cost the
 * supervisor as much as possible, to show that what it keeps and serves stays bounded.
 *
 *   bigresult nils BYTES         one result frame of BYTES bytes: an array32 of one-byte nils
 *                                (far more values than a frame may hold)
 *   bigresult nullarray N        a result that is an array of N nils (5 bytes of JSON each)
 *   bigresult string N BYTE      a result that is one string of N copies of BYTE (a number:
 *                                120 is 'x'; 1 is a control character, 6 bytes of JSON each)
 *   bigresult checkpoints N SIZE N checkpoints of SIZE bytes, each different and each waited
 *                                for, then the result {"checkpoints": N}
 *   bigresult hold SIZE          one checkpoint of SIZE bytes (the same bytes as the first of
 *                                `checkpoints`), then wait to be cancelled
 *
 * Raw frames are written by hand (the supervisor must survive them whatever libforkpoint
 * would send); checkpoints go through libforkpoint so each one is acknowledged.  Exit 0 once
 * everything is sent, 1 if the supervisor hung up, 2 on a usage error. */
#include "forkpoint.h"
#include "proto/io.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* {"type":"result","value": <value follows>} */
static const unsigned char result_prefix[] = {
	0x82, 0xa4, 't', 'y', 'p', 'e', 0xa6, 'r', 'e', 's', 'u', 'l', 't',
	0xa5, 'v', 'a', 'l', 'u', 'e',
};

/* Send one frame whose payload is result_prefix, a 5-byte container or string header, and
 * `count` copies of `fill`. */
static int send_result(int fd, unsigned char hdr_type, uint32_t count, unsigned char fill)
{
	size_t len = sizeof result_prefix + 5 + count;
	unsigned char *p = malloc(4 + len);
	if (!p)
		return -1;
	io_put_be32(p, (uint32_t)len);
	memcpy(p + 4, result_prefix, sizeof result_prefix);
	p[4 + sizeof result_prefix] = hdr_type;
	io_put_be32(p + 5 + sizeof result_prefix, count);
	memset(p + 9 + sizeof result_prefix, fill, count);
	int rc = io_write_full(fd, p, 4 + len);
	free(p);
	return rc;
}

static int hold(long size)
{
	fp_job *job = fp_open();
	unsigned char *data = calloc(1, (size_t)size + 8);
	if (!job || !data || fp_checkpoint(job, data, (size_t)size) < 0)
		return 1;
	while (!fp_cancelled(job))
		pause();
	fp_close(job);
	free(data);
	return 0;
}

static int checkpoints(long n, long size)
{
	fp_job *job = fp_open();
	unsigned char *data = calloc(1, (size_t)size + 8);
	int rc = 1;
	if (!job || !data)
		goto out;
	for (long i = 0; i < n; i++) {
		memcpy(data, &i, sizeof i);   /* every checkpoint differs: no sharing by content */
		if (fp_checkpoint(job, data, (size_t)size) < 0)
			goto out;
	}
	char json[64];
	snprintf(json, sizeof json, "{\"checkpoints\":%ld}", n);
	rc = fp_result_json(job, json) < 0;
out:
	fp_close(job);
	free(data);
	return rc;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *fdenv = getenv("FORKPOINT_FD");
	long a = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	long b = argc > 3 ? strtol(argv[3], NULL, 10) : 0;

	signal(SIGPIPE, SIG_IGN);
	if (!fdenv || !*fdenv || a <= 0 || a > (64L << 20)) {
		fprintf(stderr, "usage: bigresult nils|nullarray|string|checkpoints N [ARG] under forkpoint\n");
		return 2;
	}
	if (strcmp(mode, "checkpoints") == 0)
		return checkpoints(a, b);
	if (strcmp(mode, "hold") == 0)
		return hold(a);
	int fd = atoi(fdenv), rc;
	if (strcmp(mode, "nils") == 0)
		rc = send_result(fd, 0xdd, (uint32_t)(a - (long)sizeof result_prefix - 5), 0xc0);
	else if (strcmp(mode, "nullarray") == 0)
		rc = send_result(fd, 0xdd, (uint32_t)a, 0xc0);
	else if (strcmp(mode, "string") == 0)
		rc = send_result(fd, 0xdb, (uint32_t)a, (unsigned char)b);
	else {
		fprintf(stderr, "bigresult: unknown mode '%s'\n", mode);
		return 2;
	}
	return rc < 0 ? 1 : 0;
}
