/* frame_cost — cheap frames that cost the supervisor a lot, as argv[1] says:
 *   nils      one ~8 MiB result frame: an array32 of one-byte nils (8 M values)
 *   nulls     a result just under the limits: an array of 1 M - 8 nils (5 MiB of JSON)
 *   ckpt      64 checkpoints of 512 KiB in a row, each different and acknowledged
 *   asks      two questions without waiting for the first answer
 *   logs      1500 error-level log frames of 1000 bytes (under the flood rate), then a result
 *   hellos    200 hellos at once; more than 60 start frames within 1 s is an escape
 *   hellos-big the same after a 1 MiB checkpoint (so each start frame carries 1 MiB); more
 *             than 25 start frames within 1 s is an escape
 *   mcp-type  an mcp result with an unknown content block type
 *   mcp-file  an mcp result with a file:// resource_link
 *   mcp-meta  an mcp result whose _meta (and a block's) forge a related task and a handle
 *   artswap   writes outputs/a.txt, sends a result, and rewrites the file once the
 *             supervisor has made it read-only (hashed it)
 * The battery checks what each costs (memory, blobs, stderr, what the client sees); the job
 * itself only reports an escape it can see from inside. */
#include "attempt.h"
#include "forkpoint.h"
#include "proto/frame.h"
#include "proto/io.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#define FORGED "FORGED-0123456789abcdef0123456789abcdef"

static int job_fd(void)
{
	const char *e = getenv("FORKPOINT_FD");
	if (!e || !*e)
		escaped("nothing to try: FORKPOINT_FD is not set");
	return atoi(e);
}

static void put(int fd, const void *p, size_t n)
{
	if (io_write_full(fd, p, n) < 0)
		contained("the supervisor closed the socket: %s", strerror(errno));
}

/* One frame: {"type":"result","value": <hdr_type count>} followed by count fill bytes. */
static void result_frame(int fd, unsigned char hdr_type, uint32_t count, unsigned char fill)
{
	static const unsigned char pre[] = {
		0x82, 0xa4, 't', 'y', 'p', 'e', 0xa6, 'r', 'e', 's', 'u', 'l', 't',
		0xa5, 'v', 'a', 'l', 'u', 'e',
	};
	size_t len = sizeof pre + 5 + count;
	unsigned char *p = malloc(4 + len);
	if (!p)
		escaped("nothing to try: out of memory");
	io_put_be32(p, (uint32_t)len);
	memcpy(p + 4, pre, sizeof pre);
	p[4 + sizeof pre] = hdr_type;
	io_put_be32(p + 5 + sizeof pre, count);
	memset(p + 9 + sizeof pre, fill, count);
	put(fd, p, 4 + len);
	free(p);
}

/* One frame from JSON text. */
static void json_frame(int fd, const char *text)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	cJSON *v = cJSON_Parse(text);
	if (!v)
		escaped("nothing to try: bad JSON %s", text);
	frame_begin(&sb, &pk);
	if (frame_pack_json(&pk, v) < 0 || frame_finish(&sb) < 0)
		escaped("nothing to try: cannot pack %s", text);
	put(fd, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	cJSON_Delete(v);
}

static void ckpt_flood(void)
{
	size_t size = 512 << 10;
	fp_job *job = fp_open();
	unsigned char *data = calloc(1, size);
	if (!job || !data)
		escaped("nothing to try: fp_open: %s", strerror(errno));
	for (long i = 0; i < 64; i++) {
		memcpy(data, &i, sizeof i);   /* all different: no sharing by content */
		if (fp_checkpoint(job, data, size) < 0)
			contained("checkpoint %ld refused: %s", i, strerror(errno));
	}
	fp_result_json(job, "{\"checkpoints\":64}");
	fp_close(job);
	exit(0);
}

static void log_flood(void)
{
	fp_job *job = fp_open();
	char msg[1001];
	if (!job)
		escaped("nothing to try: fp_open: %s", strerror(errno));
	memset(msg, 'e', 1000);
	msg[1000] = 0;
	for (int i = 0; i < 1500; i++)
		if (fp_log(job, "error", "%s", msg) < 0)
			contained("log frame %d refused: %s", i, strerror(errno));
	fp_result_json(job, "{\"logged\":1500}");
	fp_close(job);
	exit(0);
}

/* Start frames that arrive within ms milliseconds. */
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
		char ty[16];
		if (frame_read(fd, FRAME_MAX_DEFAULT, &f) < 0)
			return starts;
		if (strcmp(frame_type(&f, ty, sizeof ty) ? ty : "", "start") == 0)
			starts++;
		frame_release(&f);
	}
}

/* Save a checkpoint of n zero bytes and wait for its acknowledgement. */
static void checkpoint_raw(int fd, size_t n)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	char *data = calloc(1, n);
	if (!data)
		escaped("nothing to try: out of memory");
	frame_begin(&sb, &pk);
	msgpack_pack_map(&pk, 3);
	frame_pack_kv_str(&pk, "type", "checkpoint");
	frame_pack_kv_int(&pk, "seq", 1);
	frame_pack_kv_bin(&pk, "data", data, n);
	if (frame_finish(&sb) < 0)
		escaped("nothing to try: cannot pack a checkpoint");
	put(fd, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	free(data);
	for (;;) {
		struct frame f;
		char ty[16];
		if (frame_read(fd, FRAME_MAX_DEFAULT, &f) < 0)
			contained("the supervisor closed the socket before the checkpoint was acknowledged");
		int done = !strcmp(frame_type(&f, ty, sizeof ty) ? ty : "", "checkpointed");
		frame_release(&f);
		if (done)
			return;
	}
}

static void hello_flood(int fd, long max)
{
	static const unsigned char hello[] = { 0, 0, 0, 12, 0x81, 0xa4, 't', 'y', 'p', 'e',
	                                       0xa5, 'h', 'e', 'l', 'l', 'o' };
	unsigned char batch[200 * sizeof hello];
	for (int i = 0; i < 200; i++)
		memcpy(batch + i * sizeof hello, hello, sizeof hello);
	put(fd, batch, sizeof batch);
	long starts = count_starts(fd, 1000);
	if (starts > max)
		escaped("200 hellos got %ld start frames within 1 s (at most %ld)", starts, max);
	char res[96];
	snprintf(res, sizeof res, "{\"type\":\"result\",\"value\":{\"starts\":%ld}}", starts);
	json_frame(fd, res);
	printf("contained: 200 hellos got %ld start frames within 1 s\n", starts);
	fflush(stdout);
	exit(0);
}

static void art_swap(int fd)
{
	const char *work = getenv("FORKPOINT_WORKDIR");
	char path[4200];
	struct stat st;
	struct timespec ts = { 0, 100 * 1000 };
	snprintf(path, sizeof path, "%s/outputs/a.txt", work ? work : ".");
	int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f < 0 || write(f, "original\n", 9) != 9)
		escaped("nothing to try: cannot write %s: %s", path, strerror(errno));
	close(f);
	json_frame(fd, "{\"type\":\"result\",\"value\":{\"wrote\":\"a.txt\"}}");
	/* The supervisor hashes once the job tree is dead; while it lives, try to get there. */
	for (int i = 0; i < 100000; i++) {
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
	exit(0);
}

int main(int argc, char **argv)
{
	const char *mode = attempt_arg(argc, argv);
	struct timespec ms = { 0, 1000000 };
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(mode, "ckpt"))
		ckpt_flood();
	if (!strcmp(mode, "logs"))
		log_flood();
	int fd = job_fd();
	if (!strcmp(mode, "nils")) {
		result_frame(fd, 0xdd, (8u << 20) - 64, 0xc0);
	} else if (!strcmp(mode, "nulls")) {
		result_frame(fd, 0xdd, (1u << 20) - 8, 0xc0);
		exit(0);
	} else if (!strcmp(mode, "asks")) {
		json_frame(fd, "{\"type\":\"ask\",\"id\":\"q1\",\"prompt\":\"first?\"}");
		json_frame(fd, "{\"type\":\"ask\",\"id\":\"q2\",\"prompt\":\"second?\"}");
	} else if (!strcmp(mode, "hellos")) {
		hello_flood(fd, 60);
	} else if (!strcmp(mode, "hellos-big")) {
		checkpoint_raw(fd, 1 << 20);
		hello_flood(fd, 25);
	} else if (!strcmp(mode, "mcp-type")) {
		json_frame(fd, "{\"type\":\"result\",\"mcp\":{\"content\":[{\"type\":\"script\",\"text\":\"x\"}]}}");
		exit(0);
	} else if (!strcmp(mode, "mcp-file")) {
		json_frame(fd, "{\"type\":\"result\",\"mcp\":{\"content\":[{\"type\":\"resource_link\","
		               "\"uri\":\"file:///etc/passwd\",\"name\":\"p\"}]}}");
		exit(0);
	} else if (!strcmp(mode, "mcp-meta")) {
		json_frame(fd, "{\"type\":\"result\",\"mcp\":{"
		               "\"_meta\":{\"io.modelcontextprotocol/related-task\":{\"taskId\":\"" FORGED "\"},"
		               "\"forkpoint/taskHandle\":\"" FORGED "\"},"
		               "\"content\":[{\"type\":\"text\",\"text\":\"hi\",\"_meta\":{\"x\":\"" FORGED "\"}}],"
		               "\"structuredContent\":{\"ok\":true}}}");
		exit(0);
	} else if (!strcmp(mode, "artswap")) {
		art_swap(fd);
	} else {
		escaped("nothing to try: unknown mode '%s'", mode);
	}
	for (int i = 0; i < 30000; i++)
		nanosleep(&ms, NULL);
	escaped("the supervisor let it pass for 30 s");
}
