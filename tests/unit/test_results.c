/* tests/unit/test_results.c — how the journal keeps checkpoints and results in the blob store
 * (supervisor/persist.c), on a supervisor built by hand (loop, config, task table, journal in
 * a temp state dir), with "crashes" that drop what was appended but not committed:
 *
 * a superseded checkpoint blob stays until the commit that carries the newer record, and a
 * crash before that commit replays the older checkpoint from its blob; one is deleted after
 * that commit unless another task holds the same content; a finished task's checkpoint goes;
 * a large result is a blob the task only names (size and summary survive a restart, the text
 * is never loaded); a missing or resized result blob marks the task, which keeps its record
 * and its expiry; blob write faults and the disk budget come back as errors.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/blob.h"
#include "supervisor/core/config.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/tasks.h"

#include "check.h"

struct sv {
	struct supervisor s;
};

static void sv_start(struct sv *v, const char *top, const char *state, long budget_mb)
{
	char cfg[600], err[512];
	memset(v, 0, sizeof *v);
	fplog_init(&v->s.log, 2, FPLOG_CRITICAL);
	snprintf(cfg, sizeof cfg, "{\"server\":{\"stateDirMaxMB\":%ld},\"tools\":[{\"name\":\"t\","
	         "\"inputSchema\":{\"type\":\"object\"},\"command\":[\"/bin/true\"]}]}", budget_mb);
	if (config_parse(cfg, strlen(cfg), top, &v->s.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "config: %s\n", err);
		exit(2);
	}
	v->s.state_dir = strdup(state);
	v->s.loop = loop_new();
	v->s.tasks = tasks_new(&v->s);
	if (!v->s.state_dir || !v->s.loop || !v->s.tasks)
		check_die("setup");
	if (persist_open(&v->s, 0, &v->s.persist, err, sizeof err) < 0) {
		fprintf(stderr, "persist_open: %s\n", err);
		exit(2);
	}
}

/* A crash: whatever was appended but not committed is lost. */
static void sv_stop(struct sv *v)
{
	persist_close(v->s.persist);
	tasks_free(v->s.tasks);
	loop_free(v->s.loop);
	config_free(v->s.cfg);
	free(v->s.state_dir);
}

static struct task *new_task(struct sv *v, char c)
{
	char id[33];
	memset(id, c, 32);
	id[32] = 0;
	struct task *t = task_alloc(id);
	if (!t || !(t->tool_name = strdup("t")) || !(t->args = cJSON_CreateObject()))
		check_die("task");
	t->created_ms = t->updated_ms = 1000 + c;
	if (tasks_insert(v->s.tasks, t) < 0)
		check_die("insert");
	persist_created(v->s.persist, t);
	return t;
}

/* Give t a checkpoint of n bytes of c and journal it. */
static int checkpoint(struct sv *v, struct task *t, char c, size_t n, int64_t seq)
{
	free(t->checkpoint);
	t->checkpoint = malloc(n);
	if (!t->checkpoint)
		check_die("malloc");
	memset(t->checkpoint, c, n);
	t->checkpoint_len = n;
	t->checkpoint_seq = seq;
	return persist_checkpoint(v->s.persist, t);
}

static void hex_of(char c, size_t n, char hex[BLOB_HEX_LEN + 1])
{
	char *b = malloc(n);
	memset(b, c, n);
	blob_sha256_hex(b, n, hex);
	free(b);
}

/* 1 if the file-system store holds blob hex under state (checked from outside the store). */
static int on_disk(const char *state, const char *hex)
{
	char path[900];
	struct stat st;
	snprintf(path, sizeof path, "%s/blobs/%.2s/%s", state, hex, hex);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void test_checkpoints(struct tally *t, const char *top, const char *state)
{
	struct sv v;
	char a[BLOB_HEX_LEN + 1], b[BLOB_HEX_LEN + 1], c[BLOB_HEX_LEN + 1];
	hex_of('a', 4096, a);
	hex_of('b', 4096, b);
	hex_of('c', 4096, c);

	sv_start(&v, top, state, 0);
	struct task *x = new_task(&v, '1');
	CHECK(t, checkpoint(&v, x, 'a', 4096, 1) == 0 && persist_commit(v.s.persist) == 0, "checkpoint A committed");
	CHECK(t, checkpoint(&v, x, 'b', 4096, 2) == 0, "checkpoint B appended");
	CHECK(t, on_disk(state, a) && on_disk(state, b), "before the commit both blobs are there");
	sv_stop(&v);   /* crash before B's record is durable */

	sv_start(&v, top, state, 0);
	x = tasks_find(v.s.tasks, "11111111111111111111111111111111");
	CHECK(t, x && x->checkpoint_seq == 1 && strcmp(x->checkpoint_blob, a) == 0 && x->checkpoint &&
	         x->checkpoint_len == 4096 && ((char *)x->checkpoint)[0] == 'a',
	      "after the crash the task resumes from A, read from its blob");
	CHECK(t, checkpoint(&v, x, 'b', 4096, 2) == 0 && persist_commit(v.s.persist) == 0, "B again, committed");
	CHECK(t, !on_disk(state, a) && on_disk(state, b), "after the commit A is deleted");

	/* A second task holds B's content: superseding it in the first keeps the blob. */
	struct task *y = new_task(&v, '2');
	CHECK(t, checkpoint(&v, y, 'b', 4096, 1) == 0 && persist_commit(v.s.persist) == 0, "task 2 holds B too");
	CHECK(t, checkpoint(&v, x, 'c', 4096, 3) == 0 && persist_commit(v.s.persist) == 0, "task 1 moves to C");
	CHECK(t, on_disk(state, b) && on_disk(state, c), "B is kept for task 2");
	/* A small checkpoint is inline: C goes too. */
	CHECK(t, checkpoint(&v, x, 'd', 100, 4) == 0 && persist_commit(v.s.persist) == 0 && !on_disk(state, c),
	      "an inline checkpoint supersedes a blob");
	/* Task 2 finishes: its checkpoint is never needed again. */
	y->status = TASK_FAILED;
	y->finished_ms = y->updated_ms;
	y->expires_ms = y->finished_ms + 3600000;
	CHECK(t, persist_finished(v.s.persist, y) == 0 && on_disk(state, b), "finish appended; B still there");
	CHECK(t, persist_commit(v.s.persist) == 0 && !on_disk(state, b), "after its commit B is deleted");
	sv_stop(&v);

	sv_start(&v, top, state, 0);
	y = tasks_find(v.s.tasks, "22222222222222222222222222222222");
	x = tasks_find(v.s.tasks, "11111111111111111111111111111111");
	CHECK(t, y && y->status == TASK_FAILED && !y->checkpoint_blob[0], "the finished task refers to no blob");
	CHECK(t, x && x->checkpoint_len == 100 && !x->checkpoint_blob[0], "task 1 has its inline checkpoint");
	sv_stop(&v);
}

static int fault_enospc(void *arg, const char *step)
{
	(void)arg;
	return strcmp(step, "write") == 0 ? -ENOSPC : 0;
}

static void test_results(struct tally *t, const char *top, const char *state)
{
	struct sv v;
	char path[900];
	static const char text[] = "[\"a large result, or so the test says\"]";
	size_t n = sizeof text - 1;

	sv_start(&v, top, state, 0);
	struct task *r = new_task(&v, '3');
	persist_blobs(v.s.persist)->fault = fault_enospc;
	CHECK(t, persist_store_result(v.s.persist, r, text, n) == -ENOSPC && !r->result_blob[0],
	      "a failed blob write is an error, and the task names no blob");
	persist_blobs(v.s.persist)->fault = NULL;
	CHECK(t, persist_store_result(v.s.persist, r, text, n) == 0 && r->result_blob[0] && r->result_bytes == n,
	      "stored once the store works");
	r->result_summary = strdup("an array of 1 items");
	r->status = TASK_COMPLETED;
	r->finished_ms = r->updated_ms;
	r->expires_ms = loop_wall_ms() + 3600000;
	int64_t expires = r->expires_ms;
	char hex[BLOB_HEX_LEN + 1];
	memcpy(hex, r->result_blob, sizeof hex);
	CHECK(t, persist_finished(v.s.persist, r) == 0 && persist_commit(v.s.persist) == 0, "finished");
	sv_stop(&v);

	sv_start(&v, top, state, 0);
	r = tasks_find(v.s.tasks, "33333333333333333333333333333333");
	CHECK(t, r && r->status == TASK_COMPLETED && !r->result && strcmp(r->result_blob, hex) == 0 &&
	         r->result_bytes == n && r->result_summary && strcmp(r->result_summary, "an array of 1 items") == 0 &&
	         !r->result_lost, "after a restart: the blob's name, size and summary, and no text in memory");
	sv_stop(&v);

	/* The blob goes missing: the task is kept, completed, with its expiry, and marked lost. */
	snprintf(path, sizeof path, "%s/blobs/%.2s/%s", state, hex, hex);
	unlink(path);
	sv_start(&v, top, state, 0);
	r = tasks_find(v.s.tasks, "33333333333333333333333333333333");
	CHECK(t, r && r->status == TASK_COMPLETED && r->result_lost && r->expires_ms == expires,
	      "a missing result blob: the task stays, completed, marked lost, same expiry");
	CHECK(t, tasks_collect(v.s.tasks, loop_wall_ms()) == 0 && tasks_find(v.s.tasks, r->id), "and is not expired");
	sv_stop(&v);

	/* Same name, other size: damaged. */
	check_put(path, "short", 5);
	sv_start(&v, top, state, 0);
	r = tasks_find(v.s.tasks, "33333333333333333333333333333333");
	CHECK(t, r && r->result_lost, "a result blob of the wrong size is marked lost");
	sv_stop(&v);
}

static void test_budget(struct tally *t, const char *top, const char *state)
{
	struct sv v;
	sv_start(&v, top, state, 1);
	struct task *x = new_task(&v, '4');
	CHECK(t, checkpoint(&v, x, 'e', 600 << 10, 1) == 0 && persist_commit(v.s.persist) == 0, "600 KiB within 1 MiB");
	uint64_t before = persist_disk_bytes(v.s.persist);
	CHECK(t, checkpoint(&v, x, 'f', 600 << 10, 2) == -EDQUOT, "another 600 KiB before the first is freed: -EDQUOT");
	CHECK(t, persist_disk_bytes(v.s.persist) == before && !x->checkpoint_blob[0], "nothing written");
	CHECK(t, persist_store_result(v.s.persist, x, "x", 1) == 0, "a small blob still fits");
	sv_stop(&v);
}

int main(void)
{
	struct tally t = { 0, 0 };
	char top[512], state[600];
	setvbuf(stdout, NULL, _IOLBF, 0);
	check_tmpdir(top, sizeof top, "results");
	snprintf(state, sizeof state, "%s/state", top);
	check_mkdir(state);
	test_checkpoints(&t, top, state);
	check_rm_rf(state);
	check_mkdir(state);
	test_results(&t, top, state);
	check_rm_rf(state);
	check_mkdir(state);
	test_budget(&t, top, state);
	check_rm_rf(top);
	return check_done(&t);
}
