/* tests/unit/test_job.c — supervisor/core/job.c with real children: this binary, run again in
 * a child mode ("child MODE"), speaks the job protocol over the socket job_start() hands it as
 * fd 3, under the sandbox profile none (the profiles themselves are test_sandbox's).
 *   frames in and out   the child's hello reaches on_frame; a frame job_send() queues reaches
 *                       the child, which answers it; its exit code and output tail (made
 *                       well-formed UTF-8, controls replaced) come to on_exit; the raw output
 *                       is in the log file;
 *   long output         the tail keeps the last 4 KiB, from a whole character on;
 *   buffered at exit    frames and output written just before the child exits all arrive
 *                       before on_exit;
 *   hostile frames      an oversized header, a payload that is not a map, and a frame that
 *                       on_frame refuses each kill the job with the violation named;
 *   EOF and exit        a child that closes its socket and later exits is reaped normally;
 *                       a silent one is killed by job_kill_after; one that never runs
 *                       (exec fails) reports start_error and its errno.
 * The loop runs until the awaited callback has happened, with a 20 s bound so that a bug
 * fails the test instead of hanging it.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "check.h"
#include "proto/frame.h"
#include "proto/io.h"
#include "proto/utf8.h"
#include "runner/sandbox/sandbox.h"
#include "supervisor/core/job.h"
#include "supervisor/core/supervisor.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SOCK_FD 3

/* ---- child modes ---------------------------------------------------------------------- */

static int send_frame(const char *type, int64_t n)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	frame_begin(&sb, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", type);
	frame_pack_kv_int(&pk, "n", n);
	int rc = frame_finish(&sb) == 0 ? io_write_full(SOCK_FD, sb.data, sb.size) : -1;
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

/* hello, then answer one ping with a pong carrying its n, print, exit 7. */
static int child_echo(void)
{
	struct frame f;
	int64_t n = -1;
	if (send_frame("hello", 0) < 0 || frame_read(SOCK_FD, FRAME_MAX_DEFAULT, &f) < 0)
		return 2;
	frame_get_int(&f.root, "n", &n);
	frame_release(&f);
	if (send_frame("pong", n) < 0)
		return 3;
	/* A control character, an overlong '/', a surrogate, a cut-off euro sign, and text. */
	static const char out[] = "out \x1b[2J \xc0\xaf \xed\xa0\x80 \xe2\x82 caf\xc3\xa9\n";
	if (io_write_full(1, out, sizeof out - 1) < 0)
		return 4;
	return 7;
}

/* Many frames and some output, then exit at once: nothing may be lost. */
static int child_burst(void)
{
	for (int i = 0; i < 50; i++)
		if (send_frame("progress", i) < 0)
			return 2;
	printf("burst done\n");
	fflush(stdout);
	return 0;
}

/* A header declaring a frame far larger than any limit, then wait to be killed. */
static int child_huge(void)
{
	unsigned char h[4];
	io_put_be32(h, 0x7fffff00u);
	if (io_write_full(SOCK_FD, h, 4) < 0)
		return 2;
	pause();
	return 3;
}

/* A well-framed payload that is not a msgpack map (an array of one nil). */
static int child_notmap(void)
{
	unsigned char b[6] = { 0, 0, 0, 2, 0x91, 0xc0 };
	if (io_write_full(SOCK_FD, b, sizeof b) < 0)
		return 2;
	pause();
	return 3;
}

/* A frame the owner refuses ("bad"), then wait. */
static int child_bad(void)
{
	if (send_frame("bad", 1) < 0)
		return 2;
	pause();
	return 3;
}

/* Close the socket, say so on stdout, then exit 5 once stdin (/dev/null) reads EOF. */
static int child_eof(void)
{
	close(SOCK_FD);
	printf("socket closed\n");
	fflush(stdout);
	char c;
	return read(0, &c, 1) == 0 ? 5 : 6;
}

/* More output than the tail keeps, so that the tail starts inside a character. */
static int child_long(void)
{
	for (int i = 0; i < 2099; i++)
		if (io_write_full(1, "\xc3\xa9", 2) < 0)
			return 2;
	return io_write_full(1, "\n", 1) < 0 ? 2 : 0;
}

static int child_silent(void)
{
	pause();
	return 3;
}

static int child_main(const char *mode)
{
	if (strcmp(mode, "echo") == 0)
		return child_echo();
	if (strcmp(mode, "burst") == 0)
		return child_burst();
	if (strcmp(mode, "huge") == 0)
		return child_huge();
	if (strcmp(mode, "notmap") == 0)
		return child_notmap();
	if (strcmp(mode, "bad") == 0)
		return child_bad();
	if (strcmp(mode, "eof") == 0)
		return child_eof();
	if (strcmp(mode, "long") == 0)
		return child_long();
	if (strcmp(mode, "silent") == 0)
		return child_silent();
	return 100;
}

/* ---- the supervisor side ------------------------------------------------------------------ */

/* The whole of a small file into a malloc'd buffer; 0 or -1. */
static int slurp(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	char *buf = malloc(1 << 16);
	size_t n = buf ? fread(buf, 1, 1 << 16, f) : 0;
	fclose(f);
	if (!buf)
		return -1;
	*out = buf;
	*len = n;
	return 0;
}

struct run {
	struct supervisor sv;
	char dir[256], log[320], self[PATH_MAX];
	struct job *job;
	int frames;             /* frames seen by on_frame */
	int64_t last_n;
	char types[256];        /* the frames' types, space-separated */
	int exited;
	struct job_exit x;
	char tail[4200], violation[320], start_error[320];
};

static int on_frame(void *owner, struct job *j, const struct frame *f, const char **why)
{
	struct run *r = owner;
	char type[32];
	frame_type(f, type, sizeof type);
	r->frames++;
	frame_get_int(&f->root, "n", &r->last_n);
	size_t used = strlen(r->types);
	snprintf(r->types + used, sizeof r->types - used, "%s%s", used ? " " : "", type);
	if (strcmp(type, "bad") == 0) {
		*why = "protocol violation: a frame of type bad";
		return -1;
	}
	if (strcmp(type, "hello") == 0) {
		msgpack_sbuffer sb;
		msgpack_packer pk;
		frame_begin(&sb, &pk);
		msgpack_pack_map(&pk, 2);
		frame_pack_kv_str(&pk, "type", "ping");
		frame_pack_kv_int(&pk, "n", 42);
		int rc = frame_finish(&sb) == 0 ? job_send(j, sb.data, sb.size) : -1;
		msgpack_sbuffer_destroy(&sb);
		if (rc < 0) {
			*why = "job_send failed";
			return -1;
		}
	}
	return 0;
}

/* The exit's strings live only during the callback: keep copies. */
static void on_exit_cb(void *owner, struct job *j, const struct job_exit *x)
{
	struct run *r = owner;
	(void)j;
	r->exited = 1;
	r->x = *x;
	snprintf(r->tail, sizeof r->tail, "%s", x->tail ? x->tail : "");
	snprintf(r->violation, sizeof r->violation, "%s", x->violation ? x->violation : "");
	snprintf(r->start_error, sizeof r->start_error, "%s", x->start_error ? x->start_error : "");
	r->x.tail = r->x.violation = r->x.start_error = NULL;
}

static const struct job_callbacks callbacks = { on_frame, on_exit_cb };

static void run_init(struct run *r, const char *name)
{
	memset(r, 0, sizeof *r);
	check_tmpdir(r->dir, sizeof r->dir, name);
	snprintf(r->log, sizeof r->log, "%s/job.log", r->dir);
	ssize_t n = readlink("/proc/self/exe", r->self, sizeof r->self - 1);
	if (n <= 0)
		check_die("readlink /proc/self/exe");
	r->self[n] = 0;
	fplog_init(&r->sv.log, 2, FPLOG_CRITICAL);
	if (!(r->sv.loop = loop_new()))
		check_die("loop_new");
}

/* Start a child in mode (or argv0 instead of this binary); 0 or job_start's error. */
static int run_start(struct run *r, const char *mode, const char *argv0, char *err, size_t errlen)
{
	static const struct sandbox_policy none = { .profile = "none" };
	char *argv[] = { (char *)(argv0 ? argv0 : r->self), (char *)"child", (char *)mode, NULL };
	char *envp[] = { (char *)"FORKPOINT_FD=3", NULL };
	struct job_spec spec = {
		.task_id = "t-job", .argv = argv, .envp = envp, .cwd = r->dir, .log_path = r->log,
		.log_max_bytes = 1 << 20, .max_frame = FRAME_MAX_DEFAULT, .sandbox = &none,
		.work_dir = r->dir,
	};
	return job_start(&r->sv, &spec, &callbacks, r, &r->job, err, errlen);
}

/* Turn the loop until on_exit has run: 1, or 0 after 20 s. */
static int run_until_exit(struct run *r)
{
	double end = check_now() + 20;
	while (!r->exited && check_now() < end)
		loop_run_once(r->sv.loop, 100);
	return r->exited;
}

static void run_done(struct run *r)
{
	job_free(r->job);
	r->job = NULL;
	sandbox_free(r->sv.sandbox);
	loop_free(r->sv.loop);
	check_rm_rf(r->dir);
}

static void test_echo(struct tally *t)
{
	struct run r;
	char err[512] = "";
	run_init(&r, "job-echo");
	int rc = run_start(&r, "echo", NULL, err, sizeof err);
	CHECKF(t, rc == 0, "job_start: %d %s", rc, err);
	CHECK(t, rc == 0 && run_until_exit(&r), "echo: the child ran and on_exit came");
	CHECKF(t, strcmp(r.types, "hello pong") == 0 && r.last_n == 42, "frames: '%s', n %lld",
	       r.types, (long long)r.last_n);
	CHECK(t, strcmp(r.types, "hello pong") == 0 && r.last_n == 42,
	      "echo: the hello came in, the ping went out, its answer came back");
	CHECKF(t, r.x.exited == 1 && r.x.status == 7 && !r.x.killed_by_us && !r.violation[0],
	       "exit: exited %d status %d killed %d violation '%s'", r.x.exited, r.x.status,
	       r.x.killed_by_us, r.violation);
	CHECK(t, r.x.exited == 1 && r.x.status == 7 && !r.x.killed_by_us, "echo: exit code 7, not killed");
	const char *want = "out ?[2J ?? ??? ?? caf\xc3\xa9\n";
	CHECKF(t, strcmp(r.tail, want) == 0, "tail '%s'", r.tail);
	CHECK(t, strcmp(r.tail, want) == 0 && utf8_valid(r.tail, strlen(r.tail)),
	      "echo: the tail is well-formed UTF-8 (overlong, surrogate, cut-off bytes and ESC as '?')");
	char *log = NULL;
	size_t len = 0;
	int ok = slurp(r.log, &log, &len) == 0 && len > 4 && memmem(log, len, "\xc0\xaf", 2);
	CHECK(t, ok, "echo: the log file has the output as it was written");
	free(log);
	run_done(&r);
}

/* 4199 bytes of output: the 4096 the tail keeps begin with the second byte of an 'é', which is
 * dropped, not shown as '?'. */
static void test_long_tail(struct tally *t)
{
	struct run r;
	char err[512] = "", want[4200];
	run_init(&r, "job-long");
	int rc = run_start(&r, "long", NULL, err, sizeof err);
	size_t o = 0;
	for (int i = 0; i < 2047; i++, o += 2)
		memcpy(want + o, "\xc3\xa9", 2);
	memcpy(want + o, "\n", 2);
	CHECK(t, rc == 0 && run_until_exit(&r) && r.x.status == 0 && strcmp(r.tail, want) == 0,
	      "long output: the tail begins at a whole character");
	run_done(&r);
}

static void test_burst(struct tally *t)
{
	struct run r;
	char err[512] = "";
	run_init(&r, "job-burst");
	int rc = run_start(&r, "burst", NULL, err, sizeof err);
	CHECK(t, rc == 0 && run_until_exit(&r), "burst: on_exit came");
	CHECKF(t, r.frames == 50 && r.last_n == 49, "frames %d, last n %lld", r.frames, (long long)r.last_n);
	CHECK(t, r.frames == 50 && r.last_n == 49 && strstr(r.tail, "burst done") &&
	      r.x.exited == 1 && r.x.status == 0,
	      "burst: all 50 frames and the output written just before exit came before on_exit");
	run_done(&r);
}

/* A child whose frame is hostile: killed by us (SIGKILL), with want in the violation. */
static void hostile(struct tally *t, const char *mode, const char *want)
{
	struct run r;
	char err[512] = "", what[200];
	run_init(&r, "job-hostile");
	int rc = run_start(&r, mode, NULL, err, sizeof err);
	snprintf(what, sizeof what, "%s: killed by the supervisor, violation '%s'", mode, want);
	int ok = rc == 0 && run_until_exit(&r);
	CHECKF(t, ok && strstr(r.violation, want), "%s: violation '%s'", mode, r.violation);
	CHECK(t, ok && strstr(r.violation, want) && r.x.killed_by_us && r.x.exited == 0 &&
	      r.x.status == SIGKILL, what);
	run_done(&r);
}

static void test_hostile(struct tally *t)
{
	hostile(t, "huge", "protocol violation: frame larger than the limit");
	hostile(t, "notmap", "protocol violation: malformed frame");
	hostile(t, "bad", "protocol violation: a frame of type bad");
}

static void test_eof_exit(struct tally *t)
{
	struct run r;
	char err[512] = "";
	run_init(&r, "job-eof");
	int rc = run_start(&r, "eof", NULL, err, sizeof err);
	CHECK(t, rc == 0 && run_until_exit(&r) && r.x.exited == 1 && r.x.status == 5 &&
	      !r.x.killed_by_us && !r.violation[0] && strstr(r.tail, "socket closed") && r.frames == 0,
	      "eof: a child that closes its socket first is reaped with its own exit code");
	run_done(&r);

	run_init(&r, "job-silent");
	rc = run_start(&r, "silent", NULL, err, sizeof err);
	if (rc == 0)
		job_kill_after(r.job, 50);
	CHECK(t, rc == 0 && run_until_exit(&r) && r.x.killed_by_us && r.x.exited == 0 &&
	      r.x.status == SIGKILL && !r.violation[0],
	      "silent: job_kill_after kills it, with no violation");
	run_done(&r);

	run_init(&r, "job-noexec");
	char missing[300];
	snprintf(missing, sizeof missing, "%s/no-such-program", r.dir);
	rc = run_start(&r, "echo", missing, err, sizeof err);
	/* Either job_start refuses at once, or the child reports the exec failure. */
	int ok = rc < 0 ? strstr(err, "no-such-program") != NULL || rc == -ENOENT
	                : run_until_exit(&r) && r.start_error[0] && r.x.start_errno == ENOENT;
	CHECKF(t, ok, "noexec: rc %d err '%s' start_error '%s' errno %d", rc, err, r.start_error,
	       r.x.start_errno);
	CHECK(t, ok, "noexec: a program that cannot be executed is reported with ENOENT");
	run_done(&r);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return child_main(argv[2]);
	signal(SIGPIPE, SIG_IGN);
	struct tally t = { 0, 0 };
	test_echo(&t);
	test_long_tail(&t);
	test_burst(&t);
	test_hostile(&t);
	test_eof_exit(&t);
	return check_done(&t);
}
