/* tests/unit/test_joblib.c — libforkpoint and the forkpoint-job helper against a fake
 * supervisor: the test process plays the supervisor on one end of a socketpair, a forked
 * child plays the job with FORKPOINT_FD naming the other end.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "runner/lib/forkpoint.h"
#include "proto/frame.h"
#include "proto/io.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* In a job child: report the first failed expectation on stderr and exit 1. */
#define JOB_EXPECT(cond)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "# job side: %s failed (line %d)\n", #cond, __LINE__); \
			_exit(1);                                                     \
		}                                                                     \
	} while (0)

/* ---- the fake supervisor's side ---------------------------------------------------------- */

struct start_opts {
	const char *task_id;
	const char *tool;
	int attempt;
	const char *args;      /* JSON object text */
	const char *ckpt;      /* NULL: none */
	size_t ckpt_len;
	int64_t seq;           /* 0: key absent */
	int cancelled;
	int version;
};

static int send_buf(int fd, msgpack_sbuffer *s)
{
	int rc = frame_finish(s);
	if (rc == 0)
		rc = io_write_full(fd, s->data, s->size);
	msgpack_sbuffer_destroy(s);
	return rc;
}

static int send_start(int fd, const struct start_opts *o)
{
	msgpack_sbuffer s;
	msgpack_packer pk;
	cJSON *a = cJSON_Parse(o->args ? o->args : "{}");
	frame_begin(&s, &pk);
	msgpack_pack_map(&pk, 6 + (o->ckpt != NULL) + (o->seq != 0) + (o->cancelled != 0) -
				  (o->task_id == NULL));
	frame_pack_kv_str(&pk, "type", "start");
	frame_pack_kv_int(&pk, "version", o->version ? o->version : 1);
	if (o->task_id)
		frame_pack_kv_str(&pk, "taskId", o->task_id);
	frame_pack_kv_str(&pk, "tool", o->tool ? o->tool : "demo");
	frame_pack_kv_int(&pk, "attempt", o->attempt ? o->attempt : 1);
	frame_pack_str(&pk, "arguments");
	frame_pack_json(&pk, a);
	if (o->ckpt)
		frame_pack_kv_bin(&pk, "checkpoint", o->ckpt, o->ckpt_len);
	if (o->seq)
		frame_pack_kv_int(&pk, "checkpointSeq", o->seq);
	if (o->cancelled)
		frame_pack_kv_bool(&pk, "cancelled", 1);
	cJSON_Delete(a);
	return send_buf(fd, &s);
}

/* A frame {type, key: string value} (key NULL: just the type). */
static int send_str(int fd, const char *type, const char *key, const char *val)
{
	msgpack_sbuffer s;
	msgpack_packer pk;
	frame_begin(&s, &pk);
	msgpack_pack_map(&pk, key ? 2 : 1);
	frame_pack_kv_str(&pk, "type", type);
	if (key)
		frame_pack_kv_str(&pk, key, val);
	return send_buf(fd, &s);
}

static int send_answer(int fd, const char *id, const char *response)
{
	msgpack_sbuffer s;
	msgpack_packer pk;
	frame_begin(&s, &pk);
	msgpack_pack_map(&pk, 3);
	frame_pack_kv_str(&pk, "type", "answer");
	frame_pack_kv_str(&pk, "id", id);
	frame_pack_kv_str(&pk, "response", response);
	return send_buf(fd, &s);
}

static int send_checkpointed(int fd, int64_t seq)
{
	msgpack_sbuffer s;
	msgpack_packer pk;
	frame_begin(&s, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", "checkpointed");
	frame_pack_kv_int(&pk, "seq", seq);
	return send_buf(fd, &s);
}

/* Wait up to 5 s for a frame; its type goes to type[] ("" on timeout or error). */
static int recv_typed(int fd, struct frame *f, char *type, size_t tlen)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	type[0] = '\0';
	memset(f, 0, sizeof *f);
	if (poll(&p, 1, 5000) != 1)
		return -ETIMEDOUT;
	int rc = frame_read(fd, FRAME_MAX_DEFAULT, f);
	if (rc == 0)
		frame_type(f, type, tlen);
	return rc;
}

/* 1 if nothing arrives within ms. */
static int quiet_for(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 0;
}

static int str_is(const struct frame *f, const char *key, const char *want)
{
	const char *s;
	size_t len;
	return frame_get_str(&f->root, key, &s, &len) == 0 && len == strlen(want) &&
	       memcmp(s, want, len) == 0;
}

static int int_is(const struct frame *f, const char *key, int64_t want)
{
	int64_t v;
	return frame_get_int(&f->root, key, &v) == 0 && v == want;
}

static int json_is(const struct frame *f, const char *key, const char *want_text)
{
	const msgpack_object *o = frame_get(&f->root, key);
	cJSON *got = o ? frame_to_json(o) : NULL;
	cJSON *want = cJSON_Parse(want_text);
	int ok = got && want && cJSON_Compare(got, want, 1);
	cJSON_Delete(got);
	cJSON_Delete(want);
	return ok;
}

/* ---- running a job ---------------------------------------------------------------------- */

typedef void (*job_fn)(void);

/* Fork a job child running fn with FORKPOINT_FD set; *sup gets the supervisor's end.
 * pre, if given, is sent before the child starts. */
static pid_t start_job(job_fn fn, int *sup, const struct start_opts *pre)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	if (pre)
		send_start(sv[0], pre);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		char num[16];
		alarm(20);
		signal(SIGPIPE, SIG_DFL);    /* the library must not need SIGPIPE ignored */
		close(sv[0]);
		snprintf(num, sizeof num, "%d", sv[1]);
		setenv("FORKPOINT_FD", num, 1);
		fn();
		_exit(0);
	}
	close(sv[1]);
	*sup = sv[0];
	return pid;
}

/* Exit status of the job child, or -1 if it did not exit normally. */
static int reap(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static const struct start_opts basic = { .task_id = "t-1", .tool = "demo", .attempt = 1,
					 .args = "{\"topic\":\"x\",\"n\":3}" };

/* ---- scenarios (job side) ---------------------------------------------------------------- */

static void job_start_checkpoint(void)
{
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(!fp_detached(job));
	JOB_EXPECT(strcmp(fp_task_id(job), "t-1") == 0);
	JOB_EXPECT(strcmp(fp_tool(job), "demo") == 0);
	JOB_EXPECT(fp_attempt(job) == 2);
	cJSON *a = cJSON_Parse(fp_args_json(job));
	cJSON *want = cJSON_Parse("{\"topic\":\"x\",\"n\":3}");
	JOB_EXPECT(a && cJSON_Compare(a, want, 1));
	cJSON_Delete(a);
	cJSON_Delete(want);
	const void *ck;
	size_t len;
	JOB_EXPECT(fp_restore(job, &ck, &len) == 0 && len == 3 && memcmp(ck, "abc", 3) == 0);
	JOB_EXPECT(fp_checkpoint(job, "def", 3) == 0);
	JOB_EXPECT(fp_log(job, "info", "after checkpoint") == 0);
	fp_close(job);
}

static void job_progress(void)
{
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_progress(job, 0.5, "half %d", 5) == 0);
	JOB_EXPECT(fp_progress(job, -1, NULL) == 0);
	JOB_EXPECT(fp_progress(job, 1.5, "over") == 0);
	JOB_EXPECT(fp_progress(job, 0.25, "bad \xff utf8") == 0);
	fp_close(job);
}

static void job_ask(void)
{
	static const char *const yes_no[] = { "yes", "no", NULL };
	char *ans = NULL;
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_restore(job, &(const void *){ NULL }, &(size_t){ 0 }) == -ENOENT);
	JOB_EXPECT(fp_ask(job, "q1", "Continue?", yes_no, &ans) == 0 && strcmp(ans, "no") == 0);
	free(ans);
	JOB_EXPECT(fp_ask(job, NULL, "Same prompt", NULL, &ans) == 0 && strcmp(ans, "free text") == 0);
	free(ans);
	JOB_EXPECT(fp_ask(job, NULL, "Same prompt", NULL, &ans) == 0 && strcmp(ans, "again") == 0);
	free(ans);
	JOB_EXPECT(fp_ask(job, "bad\xff", "x", NULL, &ans) == -EINVAL);
	fp_close(job);
}

static void job_cancel_in_ask(void)
{
	static const char *const yes_no[] = { "yes", "no", NULL };
	char *ans = NULL;
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_cancelled(job) == 0);
	JOB_EXPECT(fp_ask(job, "q1", "Continue?", yes_no, &ans) == -ECANCELED && ans == NULL);
	JOB_EXPECT(fp_cancelled(job) == 1);
	JOB_EXPECT(strcmp(fp_cancel_reason(job), "user asked") == 0);
	JOB_EXPECT(fp_checkpoint(job, "x", 1) == -ECANCELED);
	JOB_EXPECT(fp_ask(job, "q2", "More?", NULL, &ans) == -ECANCELED);
	JOB_EXPECT(fp_fail(job, "cancelled", "stopped", 0, NULL) == 0);
	fp_close(job);
}

static void job_cancel_in_checkpoint(void)
{
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_checkpoint(job, "x", 1) == -ECANCELED);
	fp_close(job);
}

/* Arguments large enough that a checkpoint must be smaller than FP_CHECKPOINT_MAX to fit
 * beside them in a start frame. */
#define BIG_ARGS_PAD 20000

static cJSON *big_args(void)
{
	char *pad = malloc(BIG_ARGS_PAD + 1);
	cJSON *a = cJSON_CreateObject();
	if (!pad || !a)
		return NULL;
	memset(pad, 'x', BIG_ARGS_PAD);
	pad[BIG_ARGS_PAD] = 0;
	cJSON_AddStringToObject(a, "pad", pad);
	free(pad);
	return a;
}

/* The room the supervisor leaves a checkpoint beside big_args() (tasks.c: on_checkpoint). */
static size_t big_args_room(void)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	cJSON *a = big_args();
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	int rc = a ? frame_pack_json(&pk, a) : -1;
	size_t alen = sb.size;
	msgpack_sbuffer_destroy(&sb);
	cJSON_Delete(a);
	return rc == 0 ? FRAME_MAX_DEFAULT - FRAME_START_FIELDS_MAX - alen : 0;
}

static void job_checkpoint_room(void)
{
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	size_t room = big_args_room();
	JOB_EXPECT(room > 0 && room < FP_CHECKPOINT_MAX);
	char *buf = calloc(1, room + 1);
	JOB_EXPECT(buf != NULL);
	JOB_EXPECT(fp_checkpoint(job, buf, room + 1) == -EMSGSIZE);
	JOB_EXPECT(fp_checkpoint(job, buf, room) == 0);
	free(buf);
	fp_close(job);
}

static void job_results(void)
{
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_result_json(job, "not json") == -EINVAL);
	JOB_EXPECT(fp_result_json(job, "{\"a\":1} trailing") == -EINVAL);
	JOB_EXPECT(fp_result_json(job, "\"\xc0\x80\"") == -EINVAL);
	JOB_EXPECT(fp_result_mcp(job, "{\"x\":1}") == -EINVAL);
	JOB_EXPECT(fp_result_mcp(job, "{\"content\":[{\"text\":\"no type\"}]}") == -EINVAL);
	/* 1.1 M values in 2.2 MB: within the bytes, over a frame's value budget. */
	size_t nz = 1100000;
	char *zeros = malloc(2 * nz + 2);
	JOB_EXPECT(zeros != NULL);
	zeros[0] = '[';
	for (size_t i = 0; i < nz; i++) {
		zeros[1 + 2 * i] = '0';
		zeros[2 + 2 * i] = i + 1 < nz ? ',' : ']';
	}
	zeros[2 * nz + 1] = '\0';
	JOB_EXPECT(fp_result_json(job, zeros) == -EMSGSIZE);
	free(zeros);
	JOB_EXPECT(fp_result_json(job, "{\"a\":[1,2.5,\"x\"],\"b\":null}") == 0);
	JOB_EXPECT(fp_result_json(job, "{}") == -EALREADY);
	JOB_EXPECT(fp_fail(job, NULL, "late", 0, NULL) == -EALREADY);
	fp_close(job);
}

static void job_result_mcp(void)
{
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_result_mcp(job, "{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
				      "\"structuredContent\":{\"n\":2},\"isError\":true}") == 0);
	fp_close(job);
}

static void job_fail_and_log(void)
{
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_log(job, "loud", "x") == -EINVAL);
	JOB_EXPECT(fp_log(job, "warning", "disk %d%% full", 93) == 0);
	JOB_EXPECT(fp_fail(job, NULL, NULL, 0, NULL) == -EINVAL);
	JOB_EXPECT(fp_fail(job, "", "x", 0, NULL) == -EINVAL);
	JOB_EXPECT(fp_fail(job, NULL, "boom", 1, "try later") == 0);
	fp_close(job);
}

static void job_open_only(void)
{
	fp_job *job = fp_open();
	int e = errno;
	if (!job)
		_exit(e > 0 && e < 250 ? e : 250);
	_exit(fp_cancelled(job) ? 251 : 0);
}

static void job_supervisor_gone(void)
{
	char *ans = NULL;
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	/* The test closes its end right after the start frame. */
	struct timespec ts = { 0, 100 * 1000000L };
	nanosleep(&ts, NULL);
	int rc = fp_progress(job, 0.1, "anyone?");
	JOB_EXPECT(rc == -EPIPE || rc == 0);     /* the first send may still land in a buffer */
	JOB_EXPECT(fp_ask(job, "q", "hello?", NULL, &ans) == -EPIPE);
	JOB_EXPECT(fp_cancelled(job) == 1);
	JOB_EXPECT(fp_progress(job, 0.2, NULL) == -EPIPE);
	fp_close(job);
}

static void job_shared_refresh(void)
{
	fp_job *job = fp_open_shared();
	JOB_EXPECT(job != NULL);
	/* The initial start, an ack and an unknown frame were drained; no cancel among them. */
	JOB_EXPECT(fp_cancelled(job) == 0);
	JOB_EXPECT(fp_refresh(job) == 0);
	const void *ck;
	size_t len;
	JOB_EXPECT(fp_restore(job, &ck, &len) == 0 && len == 3 && memcmp(ck, "ck2", 3) == 0);
	JOB_EXPECT(fp_cancelled(job) == 1);
	JOB_EXPECT(strcmp(fp_args_json(job), "{\"k\":\"v\"}") == 0);
	fp_close(job);
}

/* The shared handle's restore fetches the start frame itself; the test closes its end
 * right after the hello, as a supervisor that dies in that window would. */
static void job_shared_restore_gone(void)
{
	const void *ck;
	size_t len;
	fp_job *job = fp_open_shared();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_restore(job, &ck, &len) == -EPIPE);
	JOB_EXPECT(fp_restore(job, &ck, &len) == -EPIPE);
	JOB_EXPECT(fp_cancelled(job) == 1);
	fp_close(job);
}

static void job_shared_restore_none(void)
{
	const void *ck;
	size_t len;
	fp_job *job = fp_open_shared();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_restore(job, &ck, &len) == -ENOENT);
	fp_close(job);
}

/* A start frame with a checkpoint was received, then the connection died: the data is not
 * handed out, the job is told to stop. */
static void job_restore_after_loss(void)
{
	const void *ck;
	size_t len;
	fp_job *job = fp_open();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_restore(job, &ck, &len) == 0 && len == 3);
	char *ans = NULL;
	JOB_EXPECT(fp_ask(job, "q", "anyone?", NULL, &ans) == -EPIPE);
	JOB_EXPECT(fp_restore(job, &ck, &len) == -EPIPE);
	fp_close(job);
}

static void job_shared_checkpoint(void)
{
	fp_job *job = fp_open_shared();
	JOB_EXPECT(job != NULL);
	JOB_EXPECT(fp_checkpoint(job, "zz", 2) == 0);
	fp_close(job);
}

/* ---- scenarios (supervisor side) --------------------------------------------------------- */

static void test_start_checkpoint(struct tally *t)
{
	struct frame f;
	char type[32];
	int sup;
	struct start_opts o = basic;
	o.attempt = 2;
	o.ckpt = "abc";
	o.ckpt_len = 3;
	o.seq = 7;
	pid_t pid = start_job(job_start_checkpoint, &sup, &o);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "checkpoint") == 0,
	      "checkpoint frame arrives");
	const void *d;
	size_t len;
	CHECK(t, int_is(&f, "seq", 8), "checkpoint seq continues after the start frame's checkpointSeq");
	CHECK(t, frame_get_bin(&f.root, "data", &d, &len) == 0 && len == 3 && memcmp(d, "def", 3) == 0,
	      "checkpoint data");
	frame_release(&f);
	CHECK(t, quiet_for(sup, 150), "job blocks until the checkpoint is acknowledged");
	send_str(sup, "some-future-frame", "x", "y");
	send_checkpointed(sup, 7);    /* an older ack does not release the wait */
	CHECK(t, quiet_for(sup, 100), "unknown frames and older acks do not end the wait");
	send_checkpointed(sup, 8);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "log") == 0 &&
		 str_is(&f, "level", "info") && str_is(&f, "message", "after checkpoint"),
	      "job continues after the ack");
	frame_release(&f);
	CHECK(t, reap(pid) == 0, "job side: start, args, restore, checkpoint all as expected");
	close(sup);
}

static void test_progress(struct tally *t)
{
	struct frame f;
	char type[32];
	int sup;
	double d;
	pid_t pid = start_job(job_progress, &sup, &basic);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "progress") == 0 &&
		 str_is(&f, "message", "half 5") && frame_get_double(&f.root, "fraction", &d) == 0 &&
		 d == 0.5, "progress with message and fraction");
	frame_release(&f);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "progress") == 0 &&
		 !frame_get(&f.root, "message") && !frame_get(&f.root, "fraction"),
	      "progress without either omits both keys");
	frame_release(&f);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 &&
		 frame_get_double(&f.root, "fraction", &d) == 0 && d == 1.0, "fraction above 1 is clamped");
	frame_release(&f);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 &&
		 str_is(&f, "message", "bad \xef\xbf\xbd utf8"), "invalid UTF-8 in a message becomes U+FFFD");
	frame_release(&f);
	CHECK(t, reap(pid) == 0, "job side: progress calls succeed");
	close(sup);
}

static void test_ask(struct tally *t)
{
	struct frame f;
	char type[32], id1[32] = "", id2[32] = "";
	const char *s;
	size_t len;
	int sup;
	pid_t pid = start_job(job_ask, &sup, &basic);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "ask") == 0 &&
		 str_is(&f, "id", "q1") && str_is(&f, "prompt", "Continue?") &&
		 json_is(&f, "choices", "[\"yes\",\"no\"]"), "ask frame with id, prompt, choices");
	frame_release(&f);
	send_answer(sup, "other", "yes");          /* someone else's answer: ignored */
	send_answer(sup, "q1", "no");
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "ask") == 0 &&
		 !frame_get(&f.root, "choices") && frame_get_str(&f.root, "id", &s, &len) == 0 &&
		 len < sizeof id1, "free-form ask has no choices");
	if (frame_get_str(&f.root, "id", &s, &len) == 0 && len < sizeof id1)
		memcpy(id1, s, len);
	frame_release(&f);
	send_answer(sup, id1, "free text");
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 &&
		 frame_get_str(&f.root, "id", &s, &len) == 0 && len < sizeof id2, "second ask arrives");
	if (frame_get_str(&f.root, "id", &s, &len) == 0 && len < sizeof id2)
		memcpy(id2, s, len);
	frame_release(&f);
	char want[24];
	fp_question_id("Same prompt", want, sizeof want);
	CHECK(t, strncmp(id1, "q-", 2) == 0 && strlen(id1) == 18 && strcmp(id1, id2) == 0 &&
		 strcmp(id1, want) == 0, "default question id is stable and derived from the prompt");
	send_answer(sup, id2, "again");
	CHECK(t, reap(pid) == 0, "job side: answers matched by id");
	close(sup);
}

static void test_cancel(struct tally *t)
{
	struct frame f;
	char type[32];
	int sup, rb = -1;
	pid_t pid = start_job(job_cancel_in_ask, &sup, &basic);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "ask") == 0, "ask sent");
	frame_release(&f);
	send_str(sup, "cancel", "reason", "user asked");
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "fail") == 0 &&
		 str_is(&f, "code", "cancelled") && str_is(&f, "message", "stopped") &&
		 frame_get_bool(&f.root, "retryable", &rb) == 0 && rb == 0 && !frame_get(&f.root, "hint"),
	      "after a cancel the next frame is the job's fail (no checkpoint or ask sent)");
	frame_release(&f);
	CHECK(t, reap(pid) == 0, "job side: cancel during a blocking ask returns -ECANCELED");
	close(sup);

	pid = start_job(job_cancel_in_checkpoint, &sup, &basic);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "checkpoint") == 0,
	      "checkpoint sent");
	frame_release(&f);
	send_str(sup, "cancel", NULL, NULL);
	CHECK(t, reap(pid) == 0, "job side: cancel while waiting for an ack returns -ECANCELED");
	close(sup);
}

static void test_results(struct tally *t)
{
	struct frame f;
	char type[32];
	int sup, rb = 0;
	pid_t pid = start_job(job_results, &sup, &basic);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "result") == 0 &&
		 json_is(&f, "value", "{\"a\":[1,2.5,\"x\"],\"b\":null}") && !frame_get(&f.root, "mcp"),
	      "result.value carries the JSON; invalid results sent nothing");
	frame_release(&f);
	CHECK(t, reap(pid) == 0, "job side: invalid JSON -EINVAL, second result -EALREADY");
	char c;
	CHECK(t, recv(sup, &c, 1, MSG_DONTWAIT) == 0, "nothing after the result but EOF");
	close(sup);

	pid = start_job(job_result_mcp, &sup, &basic);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "result") == 0 &&
		 json_is(&f, "mcp", "{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
				    "\"structuredContent\":{\"n\":2},\"isError\":true}") &&
		 !frame_get(&f.root, "value"), "result.mcp carries the CallToolResult");
	frame_release(&f);
	CHECK(t, reap(pid) == 0, "job side: MCP result accepted");
	close(sup);

	pid = start_job(job_fail_and_log, &sup, &basic);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "log") == 0 &&
		 str_is(&f, "level", "warning") && str_is(&f, "message", "disk 93% full"), "log frame");
	frame_release(&f);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "fail") == 0 &&
		 str_is(&f, "code", "job_failed") && str_is(&f, "message", "boom") &&
		 frame_get_bool(&f.root, "retryable", &rb) == 0 && rb == 1 && str_is(&f, "hint", "try later"),
	      "fail frame: default code, retryable, hint");
	frame_release(&f);
	CHECK(t, reap(pid) == 0, "job side: bad level and missing message refused");
	close(sup);
}

/* With large arguments, fp_checkpoint refuses what the supervisor would refuse (a protocol
 * violation that kills the job) and sends what it takes. */
static void test_checkpoint_room(struct tally *t)
{
	struct frame f;
	char type[32];
	int sup;
	cJSON *a = big_args();
	char *args = a ? cJSON_PrintUnformatted(a) : NULL;
	cJSON_Delete(a);
	if (!args)
		check_die("big_args");
	struct start_opts o = basic;
	o.args = args;
	pid_t pid = start_job(job_checkpoint_room, &sup, &o);
	const void *d;
	size_t len = 0;
	int ok = recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "checkpoint") == 0 &&
	         frame_get_bin(&f.root, "data", &d, &len) == 0;
	CHECKF(t, ok && len == big_args_room(), "checkpoint of %zu bytes, room %zu", len, big_args_room());
	CHECK(t, ok && len == big_args_room() && int_is(&f, "seq", 1),
	      "checkpoint room: only the checkpoint that fits beside the arguments is sent");
	if (ok)
		frame_release(&f);
	send_checkpointed(sup, 1);
	CHECK(t, reap(pid) == 0, "job side: one byte more is -EMSGSIZE, the room itself is stored");
	close(sup);
	free(args);
}

static void test_open_errors(struct tally *t)
{
	int sup;
	struct start_opts o = basic;
	pid_t pid;

	o.version = 2;
	pid = start_job(job_open_only, &sup, &o);
	CHECK(t, reap(pid) == EPROTONOSUPPORT, "start with version 2: EPROTONOSUPPORT");
	close(sup);

	o = basic;
	o.task_id = NULL;
	pid = start_job(job_open_only, &sup, &o);
	CHECK(t, reap(pid) == EPROTO, "start without taskId: EPROTO");
	close(sup);

	pid = start_job(job_open_only, &sup, NULL);
	io_write_full(sup, "\xff\xff\xff\xff", 4);
	CHECK(t, reap(pid) == EPROTO, "declared length 2^32-1: EPROTO");
	close(sup);

	pid = start_job(job_open_only, &sup, NULL);
	io_write_full(sup, "\x00\x00\x00\x02\x91\xc0", 6);
	CHECK(t, reap(pid) == EPROTO, "non-map payload: EPROTO");
	close(sup);

	pid = start_job(job_open_only, &sup, NULL);
	close(sup);
	CHECK(t, reap(pid) == EPIPE, "EOF before the start frame: EPIPE");

	pid = start_job(job_open_only, &sup, NULL);
	send_str(sup, "cancel", "reason", "early");
	send_start(sup, &basic);
	CHECK(t, reap(pid) == 251, "a cancel before the start frame is remembered");
	close(sup);

	pid = start_job(job_supervisor_gone, &sup, &basic);
	close(sup);
	CHECK(t, reap(pid) == 0, "supervisor gone: -EPIPE, no SIGPIPE, fp_cancelled says stop");

	/* FORKPOINT_FD that is not an open fd */
	static const char *const bad[] = { "abc", "250", "-1", "3x" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			setenv("FORKPOINT_FD", bad[i], 1);
			job_open_only();
		}
		char what[64];
		snprintf(what, sizeof what, "FORKPOINT_FD=%s: EBADF", bad[i]);
		CHECK(t, reap(pid) == EBADF, what);
	}
}

static void test_shared(struct tally *t)
{
	struct frame f;
	char type[32];
	int sup;
	pid_t pid;
	struct start_opts o = basic;

	/* Stale frames around the start frame; the shared handle drains or skips them whole. */
	pid = start_job(job_shared_refresh, &sup, &o);
	send_checkpointed(sup, 99);
	send_str(sup, "some-future-frame", NULL, NULL);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
	      "fp_refresh sends hello");
	frame_release(&f);
	o.args = "{\"k\":\"v\"}";
	o.ckpt = "ck2";
	o.ckpt_len = 3;
	o.seq = 4;
	o.cancelled = 1;
	send_start(sup, &o);
	CHECK(t, reap(pid) == 0, "job side: fresh start frame replaces task data, carries cancelled");
	close(sup);

	o = basic;
	pid = start_job(job_shared_checkpoint, &sup, &o);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
	      "a shared handle asks for the last checkpoint seq before checkpointing");
	frame_release(&f);
	o.seq = 4;
	send_start(sup, &o);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "checkpoint") == 0 &&
		 int_is(&f, "seq", 5), "and then uses the next seq");
	frame_release(&f);
	send_checkpointed(sup, 5);
	CHECK(t, reap(pid) == 0, "job side: shared checkpoint acknowledged");
	close(sup);
}

static void test_restore_gone(struct tally *t)
{
	struct frame f;
	char type[32];
	int sup;
	pid_t pid;
	struct start_opts o = basic;

	pid = start_job(job_shared_restore_gone, &sup, NULL);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
	      "shared fp_restore asks for a start frame");
	frame_release(&f);
	close(sup);
	CHECK(t, reap(pid) == 0, "job side: supervisor gone before the start frame: -EPIPE, not -ENOENT");

	pid = start_job(job_shared_restore_none, &sup, NULL);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
	      "shared fp_restore without a checkpoint asks too");
	frame_release(&f);
	send_start(sup, &basic);
	CHECK(t, reap(pid) == 0, "job side: a start frame without a checkpoint: -ENOENT");
	close(sup);

	o.ckpt = "abc";
	o.ckpt_len = 3;
	o.seq = 1;
	pid = start_job(job_restore_after_loss, &sup, &o);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "ask") == 0,
	      "job asks, then the supervisor goes");
	frame_release(&f);
	close(sup);
	CHECK(t, reap(pid) == 0, "job side: after the connection died fp_restore says -EPIPE");
}

static void test_detached(struct tally *t)
{
	static const char *const abc[] = { "a", "b", NULL };
	char *ans = NULL;
	const void *ck;
	size_t len;

	unsetenv("FORKPOINT_FD");
	setenv("FORKPOINT_ARGS", "{ \"x\": 1 }", 1);
	setenv("FORKPOINT_TASK_ID", "by-hand", 1);
	setenv("FORKPOINT_ATTEMPT", "3", 1);
	fp_job *job = fp_open();
	CHECK(t, job && fp_detached(job), "no FORKPOINT_FD: a detached handle");
	CHECK(t, job && strcmp(fp_args_json(job), "{\"x\":1}") == 0 && fp_attempt(job) == 3 &&
		 strcmp(fp_task_id(job), "by-hand") == 0, "detached: args, attempt, task id from the environment");
	CHECK(t, job && fp_restore(job, &ck, &len) == -ENOENT, "detached: no checkpoint");
	CHECK(t, job && fp_progress(job, 0.3, "x") == 0 && fp_checkpoint(job, "x", 1) == 0 &&
		 fp_log(job, "info", "x") == 0 && fp_refresh(job) == 0, "detached: sends are no-ops that succeed");
	CHECK(t, job && fp_ask(job, "q", "Pick", abc, &ans) == 0 && strcmp(ans, "a") == 0,
	      "detached: ask answers the first choice");
	free(ans);
	CHECK(t, job && fp_ask(job, NULL, "Say", NULL, &ans) == 0 && strcmp(ans, "") == 0,
	      "detached: free-form ask answers \"\"");
	free(ans);
	CHECK(t, job && fp_cancelled(job) == 0, "detached: never cancelled");
	CHECK(t, job && fp_log(job, "loud", "x") == -EINVAL && fp_result_json(job, "{") == -EINVAL,
	      "detached: arguments are still validated");
	CHECK(t, job && fp_result_json(job, "[1]") == 0 && fp_result_json(job, "[1]") == -EALREADY,
	      "detached: result accepted once");
	fp_close(job);

	setenv("FORKPOINT_ARGS", "[1]", 1);
	errno = 0;
	job = fp_open();
	CHECK(t, !job && errno == EINVAL, "detached: FORKPOINT_ARGS that is not an object is an error");
	fp_close(job);
	unsetenv("FORKPOINT_ARGS");
	job = fp_open();
	CHECK(t, job && strcmp(fp_args_json(job), "{}") == 0, "detached: no FORKPOINT_ARGS means {}");
	fp_close(job);
	unsetenv("FORKPOINT_TASK_ID");
	unsetenv("FORKPOINT_ATTEMPT");
}

/* ---- the forkpoint-job helper, several processes over one socket -------------------------- */

struct helper_run {
	pid_t pid;
	int out;     /* read end of its stdout */
};

static struct helper_run run_helper(const char *path, int fd, const char *input, char *const argv[])
{
	struct helper_run h = { -1, -1 };
	int out[2], in[2];
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(in, O_CLOEXEC) < 0)
		return h;
	fflush(stdout);
	h.pid = fork();
	if (h.pid == 0) {
		char num[16];
		dup2(in[0], 0);
		dup2(out[1], 1);
		snprintf(num, sizeof num, "%d", fd);
		setenv("FORKPOINT_FD", num, 1);
		signal(SIGPIPE, SIG_DFL);
		execv(path, argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	if (input)
		io_write_full(in[1], input, strlen(input));
	close(in[1]);
	h.out = out[0];
	return h;
}

/* Collect the helper's stdout and exit status. */
static int finish_helper(struct helper_run *h, char *buf, size_t len)
{
	size_t got = 0;
	for (;;) {
		ssize_t n = read(h->out, buf + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == len - 1)
			break;
	}
	buf[got] = '\0';
	close(h->out);
	return reap(h->pid);
}

static void test_helper_gone(struct tally *t, const char *path);

static void test_helper(struct tally *t)
{
	char path[PATH_MAX], out[4096], type[32];
	struct frame f;
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
	if (n <= 0) {
		CHECK(t, 0, "locate the test binary");
		return;
	}
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	strcpy(slash, "/../forkpoint-job");
	if (access(path, X_OK) != 0) {
		char why[PATH_MAX + 64];
		snprintf(why, sizeof why, "forkpoint-job not built next to the tests (%s)", path);
		check_skip(t, why);
		return;
	}
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	fcntl(sv[0], F_SETFD, FD_CLOEXEC);
	int sup = sv[0], fd = sv[1];
	struct helper_run h;

	/* The initial start frame is sent at once, with a 64 KiB checkpoint: the first helper
	 * run must drain all of it and leave the stream aligned for the next one. */
	char *big = malloc(65536);
	memset(big, 'c', 65536);
	struct start_opts o = basic;
	o.ckpt = big;
	o.ckpt_len = 65536;
	o.seq = 3;
	send_start(sup, &o);
	free(big);

	char *progress[] = { "forkpoint-job", "progress", "0.5", "hello", "there", NULL };
	h = run_helper(path, fd, NULL, progress);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "progress") == 0 &&
		 str_is(&f, "message", "hello there"), "helper progress: message joined from arguments");
	frame_release(&f);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0, "helper progress: exit 0");

	send_checkpointed(sup, 1);            /* stale frames for the next run to drain */
	send_str(sup, "some-future-frame", "x", "y");
	char *args[] = { "forkpoint-job", "args", NULL };
	h = run_helper(path, fd, NULL, args);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
	      "helper args: sends hello");
	frame_release(&f);
	o = basic;
	o.args = "{\"k\":\"v\"}";
	send_start(sup, &o);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0 && strcmp(out, "{\"k\":\"v\"}\n") == 0,
	      "helper args: prints the arguments");

	char *restore[] = { "forkpoint-job", "restore", NULL };
	h = run_helper(path, fd, NULL, restore);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
	      "helper restore: sends hello");
	frame_release(&f);
	o = basic;
	o.ckpt = "42";
	o.ckpt_len = 2;
	o.seq = 3;
	send_start(sup, &o);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0 && strcmp(out, "42") == 0,
	      "helper restore: prints the checkpoint bytes");
	h = run_helper(path, fd, NULL, restore);
	recv_typed(sup, &f, type, sizeof type);
	frame_release(&f);
	send_start(sup, &basic);
	CHECK(t, finish_helper(&h, out, sizeof out) == 4 && out[0] == '\0',
	      "helper restore without a checkpoint: exit 4, no output");
	/* A task cancelled after a crash may have lost its checkpoint with the cancel: restore
	 * must say "cancelled" (3), never "none" (4), or the idiom starts over. */
	h = run_helper(path, fd, NULL, restore);
	recv_typed(sup, &f, type, sizeof type);
	frame_release(&f);
	struct start_opts gone = basic;
	gone.cancelled = 1;
	send_start(sup, &gone);
	CHECK(t, finish_helper(&h, out, sizeof out) == 3 && out[0] == '\0',
	      "helper restore of a cancelled task without a checkpoint: exit 3, not 4");

	char *checkpoint[] = { "forkpoint-job", "checkpoint", NULL };
	h = run_helper(path, fd, "7", checkpoint);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
	      "helper checkpoint: asks for the last seq");
	frame_release(&f);
	send_start(sup, &o);    /* checkpointSeq 3 */
	const void *d;
	size_t len;
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "checkpoint") == 0 &&
		 int_is(&f, "seq", 4) && frame_get_bin(&f.root, "data", &d, &len) == 0 && len == 1 &&
		 memcmp(d, "7", 1) == 0, "helper checkpoint: stdin as data, next seq");
	frame_release(&f);
	CHECK(t, quiet_for(h.out, 100), "helper checkpoint: waits for the ack");
	send_checkpointed(sup, 4);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0, "helper checkpoint: exit 0 after the ack");

	char *ask[] = { "forkpoint-job", "ask", "Continue?", "yes", "no", NULL };
	h = run_helper(path, fd, NULL, ask);
	char want_id[24];
	fp_question_id("Continue?", want_id, sizeof want_id);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "ask") == 0 &&
		 str_is(&f, "id", want_id) && json_is(&f, "choices", "[\"yes\",\"no\"]"),
	      "helper ask: id derived from the prompt, choices");
	frame_release(&f);
	send_answer(sup, want_id, "yes");
	CHECK(t, finish_helper(&h, out, sizeof out) == 0 && strcmp(out, "yes\n") == 0,
	      "helper ask: prints the answer");

	char *cancelled[] = { "forkpoint-job", "cancelled", NULL };
	h = run_helper(path, fd, NULL, cancelled);
	recv_typed(sup, &f, type, sizeof type);
	CHECK(t, strcmp(type, "hello") == 0, "helper cancelled: asks the supervisor");
	frame_release(&f);
	send_start(sup, &basic);
	CHECK(t, finish_helper(&h, out, sizeof out) == 1, "helper cancelled: exit 1 when not cancelled");

	h = run_helper(path, fd, NULL, cancelled);
	recv_typed(sup, &f, type, sizeof type);
	frame_release(&f);
	o = basic;
	o.cancelled = 1;
	send_start(sup, &o);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0,
	      "helper cancelled: exit 0 when the start frame says cancelled");

	send_str(sup, "cancel", "reason", "user");
	h = run_helper(path, fd, NULL, cancelled);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0 && quiet_for(sup, 50),
	      "helper cancelled: a pending cancel frame answers without a hello");

	send_str(sup, "cancel", "reason", "user");
	char *progress2[] = { "forkpoint-job", "progress", "-", "still going", NULL };
	h = run_helper(path, fd, NULL, progress2);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "progress") == 0 &&
		 !frame_get(&f.root, "fraction"), "helper progress '-': no fraction");
	frame_release(&f);
	CHECK(t, finish_helper(&h, out, sizeof out) == 3, "helper progress that saw a cancel: exit 3");

	send_str(sup, "cancel", NULL, NULL);
	h = run_helper(path, fd, NULL, ask);
	CHECK(t, finish_helper(&h, out, sizeof out) == 3 && quiet_for(sup, 50),
	      "helper ask after a cancel: exit 3, nothing asked");

	char *log[] = { "forkpoint-job", "log", "warning", "disk", "full", NULL };
	h = run_helper(path, fd, NULL, log);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "log") == 0 &&
		 str_is(&f, "level", "warning") && str_is(&f, "message", "disk full"), "helper log");
	frame_release(&f);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0, "helper log: exit 0");

	char *bad_result[] = { "forkpoint-job", "result", "{oops", NULL };
	h = run_helper(path, fd, NULL, bad_result);
	CHECK(t, finish_helper(&h, out, sizeof out) == 2 && quiet_for(sup, 50),
	      "helper result with invalid JSON: exit 2, nothing sent");
	char *bad_usage[] = { "forkpoint-job", "progress", "1.5", NULL };
	h = run_helper(path, fd, NULL, bad_usage);
	CHECK(t, finish_helper(&h, out, sizeof out) == 2, "helper progress 1.5: usage error");

	char *fail[] = { "forkpoint-job", "fail", "--code", "disk_full", "--retryable", "--hint",
			 "free space", "no", "room", NULL };
	h = run_helper(path, fd, NULL, fail);
	int rb = 0;
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "fail") == 0 &&
		 str_is(&f, "code", "disk_full") && str_is(&f, "message", "no room") &&
		 str_is(&f, "hint", "free space") && frame_get_bool(&f.root, "retryable", &rb) == 0 && rb,
	      "helper fail: code, retryable, hint, message");
	frame_release(&f);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0, "helper fail: exit 0");

	char *result[] = { "forkpoint-job", "result", "-", NULL };
	h = run_helper(path, fd, "{\"steps\": 5}", result);
	CHECK(t, recv_typed(sup, &f, type, sizeof type) == 0 && strcmp(type, "result") == 0 &&
		 json_is(&f, "value", "{\"steps\":5}"), "helper result from stdin");
	frame_release(&f);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0, "helper result: exit 0");

	close(sup);
	close(fd);
	test_helper_gone(t, path);
}

/* A socket for helper runs: the job's end survives exec (a shell passes it on), the fake
 * supervisor's does not, so closing it here is an EOF there. */
static void gone_pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || fcntl(sv[0], F_SETFD, FD_CLOEXEC) < 0) {
		perror("socketpair");
		exit(2);
	}
}

/* The helper when the supervisor dies: before it runs, and in the window between its hello
 * and the start frame.  Each case gets its own socket, closed by the fake supervisor. */
static void test_helper_gone(struct tally *t, const char *path)
{
	char out[4096], type[32], script[PATH_MAX + 200];
	struct frame f;
	struct helper_run h;
	int sv[2];
	char *restore[] = { "forkpoint-job", "restore", NULL };
	char *cancelled[] = { "forkpoint-job", "cancelled", NULL };
	char *progress[] = { "forkpoint-job", "progress", "0.5", NULL };

	/* The documented idiom: no checkpoint means step 0, anything else stops the script. */
	snprintf(script, sizeof script,
		 "step=$('%s' restore) || case $? in 4) step=0 ;; *) exit 1 ;; esac; echo \"step=$step\"",
		 path);
	char *idiom[] = { "sh", "-c", script, NULL };

	for (int window = 0; window < 2; window++) {
		gone_pair(sv);
		h = run_helper(path, sv[1], NULL, restore);
		if (window) {
			CHECK(t, recv_typed(sv[0], &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
			      "helper restore: hello sent, then the supervisor dies");
			frame_release(&f);
		}
		close(sv[0]);
		int st = finish_helper(&h, out, sizeof out);
		CHECK(t, st == 1 && out[0] == '\0', window ? "helper restore, supervisor gone after the hello: exit 1 (not 4), no output"
							  : "helper restore, supervisor gone before the run: exit 1, no output");
		close(sv[1]);
	}

	for (int gone = 0; gone < 2; gone++) {
		gone_pair(sv);
		h = run_helper("/bin/sh", sv[1], NULL, idiom);
		CHECK(t, recv_typed(sv[0], &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
		      "the restore idiom asks for the start frame");
		frame_release(&f);
		if (!gone)
			send_start(sv[0], &basic);
		close(sv[0]);
		int st = finish_helper(&h, out, sizeof out);
		if (gone)
			CHECKF(t, st == 1 && out[0] == '\0', "idiom, supervisor gone: exit %d, output '%s'", st, out);
		else
			CHECKF(t, st == 0 && strcmp(out, "step=0\n") == 0, "idiom, no checkpoint: exit %d, '%s'", st, out);
		close(sv[1]);
	}

	gone_pair(sv);
	h = run_helper(path, sv[1], NULL, cancelled);
	CHECK(t, recv_typed(sv[0], &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
	      "helper cancelled asks, then the supervisor dies");
	frame_release(&f);
	close(sv[0]);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0, "helper cancelled, supervisor gone: exit 0 (stop)");
	h = run_helper(path, sv[1], NULL, cancelled);
	CHECK(t, finish_helper(&h, out, sizeof out) == 0, "helper cancelled on a closed socket: exit 0");
	h = run_helper(path, sv[1], NULL, progress);
	CHECK(t, finish_helper(&h, out, sizeof out) == 1, "helper progress on a closed socket: exit 1");
	close(sv[1]);

	/* The blocking commands: the supervisor dies while they wait for its answer. */
	char *checkpoint[] = { "forkpoint-job", "checkpoint", NULL };
	char *ask[] = { "forkpoint-job", "ask", "Go on?", "yes", "no", NULL };
	for (int which = 0; which < 2; which++) {
		gone_pair(sv);
		h = run_helper(path, sv[1], which ? NULL : "data", which ? ask : checkpoint);
		if (!which) {
			CHECK(t, recv_typed(sv[0], &f, type, sizeof type) == 0 && strcmp(type, "hello") == 0,
			      "helper checkpoint asks for the last seq");
			frame_release(&f);
			send_start(sv[0], &basic);
		}
		CHECK(t, recv_typed(sv[0], &f, type, sizeof type) == 0 &&
			 strcmp(type, which ? "ask" : "checkpoint") == 0,
		      which ? "helper ask sent, then the supervisor dies" : "helper checkpoint sent, then the supervisor dies");
		frame_release(&f);
		close(sv[0]);
		int st = finish_helper(&h, out, sizeof out);
		CHECK(t, st == 1 && out[0] == '\0', which ? "helper ask, supervisor gone: exit 1, no answer printed"
						     : "helper checkpoint, supervisor gone before the ack: exit 1");
		close(sv[1]);
	}

	/* Run by hand: no checkpoint, exit 4 as under forkpoint. */
	gone_pair(sv);
	snprintf(script, sizeof script, "unset FORKPOINT_FD; exec '%s' restore", path);
	char *detached[] = { "sh", "-c", script, NULL };
	h = run_helper("/bin/sh", sv[1], NULL, detached);
	CHECK(t, finish_helper(&h, out, sizeof out) == 4 && out[0] == '\0', "detached helper restore: exit 4");
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	struct tally t = { 0, 0 };
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	alarm(120);
	test_start_checkpoint(&t);
	test_progress(&t);
	test_ask(&t);
	test_cancel(&t);
	test_results(&t);
	test_checkpoint_room(&t);
	test_open_errors(&t);
	test_shared(&t);
	test_restore_gone(&t);
	test_detached(&t);
	test_helper(&t);
	return check_done(&t);
}
