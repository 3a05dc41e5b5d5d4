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
 * Modes that take their parameters from the call's arguments (FORKPOINT_ARGS):
 *   send        the frames in "frames" (JSON objects, packed as msgpack) in order; then exit 0
 *               if "exit" is true, else nap.  A number N as a frame's value.pad becomes a
 *               string of N bytes (arguments travel in the environment, which holds less)
 *   asks        "count" ask frames with distinct ids and "promptBytes"-byte prompts, no waiting
 *   logflood    "count" log frames of level "error" with 1000-byte messages, then a result
 *   exactout    exactly "bytes" bytes on stdout; once the supervisor has read them all (the
 *               pipe is empty), "after\n"; then exit 0
 *   hellos      a checkpoint of "ckptBytes" bytes (if given, so that start frames are that
 *               big), then "count" hello frames at once; counts the start frames that arrive
 *               within "ms" milliseconds and sends {starts: N} as its result
 *   gated       progress "before"; once the file go exists in its work dir, "count" progress
 *               frames "after-go N", a log frame and the file sent; once finish exists, a
 *               result
 *   artswap     writes outputs/a.txt, sends a result, and as soon as the supervisor makes the
 *               file read-only (it hashed it) makes it writable again and rewrites it
 *
 * After the abuse the job naps for up to 60 s: the supervisor is expected to kill it long
 * before.  Exit status 3 means "the supervisor let me finish", 2 a usage or setup error. */
#include "proto/frame.h"
#include "proto/io.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
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

	io_put_be32(hdr, (uint32_t)len);
	if (io_write_full(fd, hdr, sizeof hdr) < 0)
		return -1;
	return io_write_full(fd, payload, len);
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
		if (io_write_full(fd, buf, sizeof buf) < 0)
			return -1;
	return 0;
}

static int mode_oversize(int fd)
{
	unsigned char hdr[4];

	io_put_be32(hdr, 0x80000000u);
	if (io_write_full(fd, hdr, sizeof hdr) < 0)
		return -1;
	for (int i = 0; i < 64; i++)
		if (io_write_full(fd, "\x81\xa4type", 6) < 0)
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
		io_put_be32(batch + n, (uint32_t)sizeof p);
		memcpy(batch + n + 4, p, sizeof p);
		n += 4 + sizeof p;
	}
	for (;;)
		if (io_write_full(fd, batch, n) < 0)
			return -1;
}

static int mode_bigout(void)
{
	static char chunk[65536];

	for (size_t i = 0; i < sizeof chunk; i++)
		chunk[i] = (i % 64 == 63) ? '\n' : (char)('a' + i % 26);
	for (int i = 0; i < 1600; i++)   /* 1600 * 64 KiB = 100 MiB */
		if (io_write_full(STDOUT_FILENO, chunk, sizeof chunk) < 0)
			return -1;
	return 0;
}

static cJSON *job_args(void)
{
	const char *a = getenv("FORKPOINT_ARGS");
	cJSON *v = a ? cJSON_Parse(a) : NULL;
	return v ? v : cJSON_CreateObject();
}

static long arg_long(const cJSON *args, const char *key, long dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
	return cJSON_IsNumber(v) ? (long)v->valuedouble : dflt;
}

static int send_json(int fd, const cJSON *v)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	frame_begin(&sb, &pk);
	int rc = frame_pack_json(&pk, v);
	if (rc == 0)
		rc = frame_finish(&sb);
	if (rc == 0)
		rc = io_write_full(fd, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

/* Parse text as JSON and send it as one frame. */
static int send_text(int fd, const char *text)
{
	cJSON *v = cJSON_Parse(text);
	int rc = v ? send_json(fd, v) : -1;
	cJSON_Delete(v);
	return rc;
}

static void expand_pad(cJSON *frame)
{
	cJSON *value = cJSON_GetObjectItemCaseSensitive(frame, "value");
	cJSON *pad = cJSON_GetObjectItemCaseSensitive(value, "pad");
	if (!cJSON_IsNumber(pad) || pad->valuedouble < 0 || pad->valuedouble > (8 << 20))
		return;
	size_t n = (size_t)pad->valuedouble;
	char *s = malloc(n + 1);
	if (!s)
		return;
	memset(s, 'r', n);
	s[n] = 0;
	cJSON_ReplaceItemInObjectCaseSensitive(value, "pad", cJSON_CreateString(s));
	free(s);
}

static int mode_send(int fd, const cJSON *args)
{
	cJSON *f;
	cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(args, "frames")) {
		expand_pad(f);
		if (send_json(fd, f) < 0)
			return -1;
	}
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "exit")))
		exit(0);
	return 0;
}

static int mode_asks(int fd, const cJSON *args)
{
	long count = arg_long(args, "count", 3000), pb = arg_long(args, "promptBytes", 1000);
	char *prompt = malloc((size_t)pb + 1);
	if (!prompt)
		return -1;
	memset(prompt, 'q', (size_t)pb);
	prompt[pb] = 0;
	for (long i = 0; i < count; i++) {
		char id[32];
		snprintf(id, sizeof id, "q-%ld", i);
		cJSON *a = cJSON_CreateObject();
		cJSON_AddStringToObject(a, "type", "ask");
		cJSON_AddStringToObject(a, "id", id);
		cJSON_AddStringToObject(a, "prompt", prompt);
		int rc = send_json(fd, a);
		cJSON_Delete(a);
		if (rc < 0)
			break;
	}
	free(prompt);
	return 0;
}

static int mode_logflood(int fd, const cJSON *args)
{
	long count = arg_long(args, "count", 3000);
	char msg[1001];
	memset(msg, 'e', 1000);
	msg[1000] = 0;
	for (long i = 0; i < count; i++) {
		cJSON *l = cJSON_CreateObject();
		cJSON_AddStringToObject(l, "type", "log");
		cJSON_AddStringToObject(l, "level", "error");
		cJSON_AddStringToObject(l, "message", msg);
		int rc = send_json(fd, l);
		cJSON_Delete(l);
		if (rc < 0)
			return -1;
	}
	if (send_text(fd, "{\"type\":\"result\",\"value\":{\"logged\":true}}") < 0)
		return -1;
	exit(0);
}

/* The supervisor has read everything written to our stdout pipe (FIONREAD works on either
 * end of a pipe). */
static void wait_stdout_drained(void)
{
	struct timespec ts = { 0, 2 * 1000 * 1000 };
	int n = 1;
	for (int i = 0; i < 5000 && ioctl(STDOUT_FILENO, FIONREAD, &n) == 0 && n > 0; i++)
		nanosleep(&ts, NULL);
}

static int mode_exactout(const cJSON *args)
{
	long bytes = arg_long(args, "bytes", 4096);
	char *buf = malloc((size_t)bytes);
	if (!buf)
		return -1;
	memset(buf, 'x', (size_t)bytes);
	int rc = io_write_full(STDOUT_FILENO, buf, (size_t)bytes);
	free(buf);
	if (rc < 0)
		return -1;
	wait_stdout_drained();
	if (io_write_full(STDOUT_FILENO, "after\n", 6) < 0)
		return -1;
	exit(0);
}

/* Count the start frames that arrive before the deadline (monotonic ms). */
static long count_starts(int fd, long ms)
{
	struct timespec t0, now;
	long starts = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return starts;
		struct frame f;
		if (frame_read(fd, FRAME_MAX_DEFAULT, &f) < 0)
			return starts;
		char ty[16];
		if (strcmp(frame_type(&f, ty, sizeof ty) ? ty : "", "start") == 0)
			starts++;
		frame_release(&f);
	}
}

/* Save a checkpoint of n bytes and wait until it is acknowledged. */
static int checkpoint_of(int fd, size_t n)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	char *data = calloc(1, n ? n : 1);
	if (!data)
		return -1;
	frame_begin(&sb, &pk);
	msgpack_pack_map(&pk, 3);
	frame_pack_kv_str(&pk, "type", "checkpoint");
	frame_pack_kv_int(&pk, "seq", 1);
	frame_pack_kv_bin(&pk, "data", data, n);
	int rc = frame_finish(&sb) == 0 ? io_write_full(fd, sb.data, sb.size) : -1;
	msgpack_sbuffer_destroy(&sb);
	free(data);
	while (rc == 0) {
		struct frame f;
		char ty[16];
		if (frame_read(fd, FRAME_MAX_DEFAULT, &f) < 0)
			return -1;
		int done = strcmp(frame_type(&f, ty, sizeof ty) ? ty : "", "checkpointed") == 0;
		frame_release(&f);
		if (done)
			break;
	}
	return rc;
}

static int mode_hellos(int fd, const cJSON *args)
{
	long count = arg_long(args, "count", 200), ms = arg_long(args, "ms", 1000);
	long ck = arg_long(args, "ckptBytes", -1);
	if (ck >= 0 && checkpoint_of(fd, (size_t)ck) < 0)
		return -1;
	static const unsigned char hello[] = { 0x81, 0xa4, 't', 'y', 'p', 'e', 0xa5, 'h', 'e', 'l', 'l', 'o' };
	for (long i = 0; i < count; i++)
		if (send_frame(fd, hello, sizeof hello) < 0)
			return -1;
	long starts = count_starts(fd, ms);
	char res[96];
	snprintf(res, sizeof res, "{\"type\":\"result\",\"value\":{\"starts\":%ld}}", starts);
	if (send_text(fd, res) < 0)
		return -1;
	exit(0);
}

/* Wait (up to 60 s) until FORKPOINT_WORKDIR/name exists. */
static int wait_file(const char *name)
{
	const char *work = getenv("FORKPOINT_WORKDIR");
	char path[4200];
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	snprintf(path, sizeof path, "%s/%s", work ? work : ".", name);
	for (int i = 0; i < 12000; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		nanosleep(&ts, NULL);
	}
	return -1;
}

static int mode_gated(int fd, const cJSON *args)
{
	long count = arg_long(args, "count", 50);
	const char *work = getenv("FORKPOINT_WORKDIR");
	char path[4200], text[128];
	if (send_text(fd, "{\"type\":\"progress\",\"fraction\":0.1,\"message\":\"before\"}") < 0 || wait_file("go") < 0)
		return -1;
	for (long i = 0; i < count; i++) {
		snprintf(text, sizeof text, "{\"type\":\"progress\",\"fraction\":%.4f,\"message\":\"after-go %ld\"}",
		         0.2 + 0.7 * (double)i / (double)count, i);
		if (send_text(fd, text) < 0)
			return -1;
	}
	if (send_text(fd, "{\"type\":\"log\",\"level\":\"info\",\"message\":\"while congested\"}") < 0)
		return -1;
	snprintf(path, sizeof path, "%s/sent", work ? work : ".");
	int f = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (f < 0)
		return -1;
	close(f);
	if (wait_file("finish") < 0 || send_text(fd, "{\"type\":\"result\",\"value\":{\"gated\":true}}") < 0)
		return -1;
	exit(0);
}

static int mode_artswap(int fd)
{
	const char *work = getenv("FORKPOINT_WORKDIR");
	char path[4200];
	struct stat st;
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	snprintf(path, sizeof path, "%s/outputs/a.txt", work ? work : ".");
	int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f < 0 || io_write_full(f, "original\n", 9) < 0)
		return -1;
	close(f);
	if (send_text(fd, "{\"type\":\"result\",\"value\":{\"wrote\":\"a.txt\"}}") < 0)
		return -1;
	for (int i = 0; i < 2000; i++) {
		if (stat(path, &st) == 0 && !(st.st_mode & 0200)) {
			chmod(path, 0644);
			f = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
			if (f >= 0) {
				(void)!write(f, "swapped!\n", 9);
				close(f);
			}
			break;
		}
		nanosleep(&ts, NULL);
	}
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
	cJSON *args = job_args();
	if (strcmp(mode, "exactout") == 0)
		rc = mode_exactout(args);
	else if (strcmp(mode, "send") == 0)
		rc = mode_send(fd, args);
	else if (strcmp(mode, "asks") == 0)
		rc = mode_asks(fd, args);
	else if (strcmp(mode, "logflood") == 0)
		rc = mode_logflood(fd, args);
	else if (strcmp(mode, "hellos") == 0)
		rc = mode_hellos(fd, args);
	else if (strcmp(mode, "gated") == 0)
		rc = mode_gated(fd, args);
	else if (strcmp(mode, "artswap") == 0)
		rc = mode_artswap(fd);
	else if (strcmp(mode, "garbage") == 0)
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
	cJSON_Delete(args);
	nap_then_exit();
}
