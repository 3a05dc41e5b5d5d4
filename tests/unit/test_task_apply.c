/* tests/unit/test_task_apply.c — live and replay build the same task.  Random record sequences
 * of the kinds the crash test produces (create, start, progress, checkpoints inline and in
 * blobs, ask and answer, retry, finish as completed / failed / cancelled with inline and blob
 * results, artifact digests recorded after the finish, expiry, compactions and restarts) are applied live the way the supervisor applies
 * them (append to the store, then task_apply); at every restart the store is closed, replayed
 * into a fresh table through persist's replay, and every durable field of every task, and
 * every tombstone, must equal the live one.  Run over the journal and the memory backend.
 * Also: a record whose JSON value cannot be printed (out of memory) fails with -ENOMEM and
 * appends nothing, instead of storing "null".
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "check.h"
#include "state/blob.h"
#include "state/store.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/task_apply.h"
#include "supervisor/core/tasks.h"

#include <math.h>

struct env {
	char dir[256];
	struct supervisor sv;
	struct store_mem_medium *medium;   /* NULL: the journal backend */
};

static void env_open(struct env *e)
{
	char err[512];
	e->sv.loop = e->sv.loop ? e->sv.loop : loop_new();
	e->sv.tasks = e->sv.loop ? tasks_new(&e->sv) : NULL;
	if (!e->sv.tasks)
		check_die("tasks_new");
	int rc;
	if (e->medium) {
		struct store *s;
		if (store_mem_new(e->medium, &s) < 0)
			check_die("store_mem_new");
		rc = persist_open_store(&e->sv, s, 0, NULL, NULL, &e->sv.persist, err, sizeof err);
	} else {
		rc = persist_open(&e->sv, 0, &e->sv.persist, err, sizeof err);
	}
	if (rc < 0) {
		fprintf(stderr, "persist_open: %s\n", err);
		exit(2);
	}
}

static void env_close(struct env *e)
{
	persist_close(e->sv.persist);
	tasks_free(e->sv.tasks);
	e->sv.persist = NULL;
	e->sv.tasks = NULL;
}

/* ---- comparing tasks ------------------------------------------------------------------------- */

static int s_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int j_eq(const cJSON *a, const cJSON *b)
{
	return (!a && !b) || (a && b && cJSON_Compare(a, b, 1));
}

/* Every durable field (task_apply.h lists them); the first that differs is named. */
static const char *task_diff(const struct task *a, const struct task *b)
{
	if (!s_eq(a->tool_name, b->tool_name)) return "tool_name";
	if (!j_eq(a->args, b->args)) return "args";
	if (a->status != b->status) return "status";
	if (a->attempt != b->attempt) return "attempt";
	if (a->retries_used != b->retries_used) return "retries_used";
	if (a->was_running != b->was_running) return "was_running";
	if (a->not_before != b->not_before) return "not_before";
	if (a->created_ms != b->created_ms) return "created_ms";
	if (a->updated_ms != b->updated_ms) return "updated_ms";
	if (a->started_ms != b->started_ms) return "started_ms";
	if (a->finished_ms != b->finished_ms) return "finished_ms";
	if (a->expires_ms != b->expires_ms) return "expires_ms";
	if (!s_eq(a->progress_msg, b->progress_msg)) return "progress_msg";
	if (a->fraction != b->fraction) return "fraction";
	if (!s_eq(a->question_id, b->question_id)) return "question_id";
	if (!s_eq(a->question_prompt, b->question_prompt)) return "question_prompt";
	if (!j_eq(a->question_choices, b->question_choices)) return "question_choices";
	const struct task_answer *x = a->answers, *y = b->answers;
	for (; x && y; x = x->next, y = y->next)
		if (!s_eq(x->question_id, y->question_id) || !j_eq(x->response, y->response))
			return "answers";
	if (x || y) return "answers (count)";
	if (a->checkpoint_len != b->checkpoint_len || (!a->checkpoint) != (!b->checkpoint) ||
	    (a->checkpoint_len && memcmp(a->checkpoint, b->checkpoint, a->checkpoint_len) != 0))
		return "checkpoint";
	if (a->checkpoint_seq != b->checkpoint_seq) return "checkpoint_seq";
	if (strcmp(a->checkpoint_blob, b->checkpoint_blob) != 0) return "checkpoint_blob";
	if (!j_eq(a->result, b->result)) return "result";
	if (strcmp(a->result_blob, b->result_blob) != 0) return "result_blob";
	if (a->result_bytes != b->result_bytes) return "result_bytes";
	if (!s_eq(a->result_summary, b->result_summary)) return "result_summary";
	if (a->result_is_mcp != b->result_is_mcp) return "result_is_mcp";
	if (a->result_lost != b->result_lost) return "result_lost";
	if (!j_eq(a->error, b->error)) return "error";
	if (!j_eq(a->artifacts, b->artifacts)) return "artifacts";
	if (!j_eq(a->sandbox, b->sandbox)) return "sandbox";
	return NULL;
}

/* ---- the generator ----------------------------------------------------------------------------- */

#define MAX_IDS 64

struct gen {
	uint64_t rng;
	struct env *e;
	char ids[MAX_IDS][33];        /* every id ever created */
	int expired[MAX_IDS];
	size_t nids;
	int64_t clock;
	unsigned restarts, snapshots, records;
	const char *failure;          /* the first difference found */
};

static unsigned pick(struct gen *g, unsigned n)
{
	return (unsigned)(check_rand(&g->rng) % n);
}

static void rec_for(struct gen *g, struct store_rec *r, enum store_rec_type type, const struct task *t)
{
	memset(r, 0, sizeof *r);
	r->type = type;
	memcpy(r->task_id, t->id, 33);
	g->clock += 1 + pick(g, 1000);
	r->at = g->clock;
}

/* The live path: append, then apply. */
static void live(struct gen *g, struct task *t, const struct store_rec *r)
{
	char err[256];
	if (persist_record(g->e->sv.persist, t, r) < 0 || task_apply(t, r, err, sizeof err) < 0) {
		if (!g->failure)
			g->failure = "a live record failed";
		return;
	}
	g->records++;
}

static void op_create(struct gen *g)
{
	if (g->nids == MAX_IDS)
		return;
	char *id = g->ids[g->nids];
	for (int i = 0; i < 32; i++)
		id[i] = "0123456789abcdef"[pick(g, 16)];
	id[32] = 0;
	struct task *t = task_alloc(id);
	struct store_rec r;
	char args[64];
	rec_for(g, &r, STORE_REC_CREATE, t);
	snprintf(args, sizeof args, "{\"n\":%u,\"s\":\"x\\u00e9\"}", pick(g, 100));
	r.u.create.tool = pick(g, 2) ? "report" : "plain";
	r.u.create.args = args;
	live(g, t, &r);
	if (tasks_insert(g->e->sv.tasks, t) < 0)
		check_die("tasks_insert");
	g->expired[g->nids++] = 0;
}

static void op_checkpoint(struct gen *g, struct task *t)
{
	struct store_rec r;
	size_t len = pick(g, 3) == 0 ? 1500 + pick(g, 3000) : pick(g, 64);
	unsigned char *data = malloc(len + 1);
	char hex[65] = "";
	for (size_t i = 0; i < len; i++)
		data[i] = (unsigned char)pick(g, 256);
	rec_for(g, &r, STORE_REC_CHECKPOINT, t);
	r.u.checkpoint.seq = t->checkpoint_seq + 1;
	r.u.checkpoint.ckpt.data = data;
	r.u.checkpoint.ckpt.len = len;
	r.u.checkpoint.ckpt.has_data = 1;
	if (len > PERSIST_INLINE_CHECKPOINT) {
		if (persist_blob_put(g->e->sv.persist, data, len, hex) < 0)
			check_die("persist_blob_put");
		r.u.checkpoint.ckpt.blob = hex;
	}
	live(g, t, &r);
	free(data);
}

static void op_finish(struct gen *g, struct task *t)
{
	static const char *const st[] = { "completed", "failed", "cancelled" };
	struct store_rec r;
	char text[3000], hex[65] = "";
	rec_for(g, &r, STORE_REC_FINISH, t);
	unsigned k = pick(g, 3);
	r.u.finish.status = st[k];
	r.u.finish.expires = r.at + 3600000;
	r.u.finish.result.mcp = k == 0 && pick(g, 2);
	if (k == 0 && pick(g, 3) == 0) {
		/* A large result: its blob first, then the record naming it. */
		size_t n = (size_t)snprintf(text, sizeof text, "{\"big\":\"%0*d\"}", 2000, 7);
		if (persist_blob_put(g->e->sv.persist, text, n, hex) < 0)
			check_die("persist_blob_put");
		r.u.finish.result.blob = hex;
		r.u.finish.result.bytes = (int64_t)n;
		r.u.finish.result.summary = "an object with keys: big";
	} else if (k == 0) {
		snprintf(text, sizeof text, "{\"exitCode\":0,\"output\":\"%u\"}", pick(g, 1000));
		r.u.finish.result.text = text;
	}
	if (k == 0 && pick(g, 2))
		r.u.finish.artifacts = "[{\"name\":\"out.txt\",\"size\":3}]";
	if (k > 0)
		r.u.finish.error = k == 1 ? "{\"code\":\"job_failed\",\"retryable\":false}"
		                          : "{\"code\":\"cancelled\",\"message\":\"by the client\"}";
	live(g, t, &r);
}

/* Expiry as the collector does it: the record, then the table forgets the task. */
static void op_expire(struct gen *g, struct task *t)
{
	int64_t until = g->clock + 3600000;
	if (persist_expired(g->e->sv.persist, t->id, until) < 0) {
		g->failure = "expire record failed";
		return;
	}
	for (size_t i = 0; i < g->nids; i++)
		if (strcmp(g->ids[i], t->id) == 0)
			g->expired[i] = 1;
	tasks_tombstone_add(g->e->sv.tasks, t->id, until);
	tasks_remove(g->e->sv.tasks, t);
}

/* One step on task t, chosen among what its state allows (the job's side of the protocol). */
static void op_task(struct gen *g, struct task *t)
{
	struct store_rec r;
	char buf[128];
	if (TASK_TERMINAL(t->status)) {
		if (t->artifacts && pick(g, 2)) {
			/* An artifact's digest, computed after the task ended (a transfer record). */
			struct store_rec x = { .type = STORE_REC_X_ARTSHA };
			char err[200];
			x.u.xfer.task = t->id;
			x.u.xfer.name = "out.txt";
			x.u.xfer.size = 3;
			x.u.xfer.sha = pick(g, 2) ? "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" : "";
			x.u.xfer.status = x.u.xfer.sha[0] ? "" : "skipped";
			if (persist_append_rec(g->e->sv.persist, &x) < 0 || task_apply(t, &x, err, sizeof err) < 0)
				g->failure = "artifact digest";
			return;
		}
		if (pick(g, 3) == 0)
			op_expire(g, t);
		return;
	}
	if (t->status == TASK_INPUT_REQUIRED) {
		rec_for(g, &r, STORE_REC_ANSWER, t);
		r.u.answer.qid = t->question_id;
		snprintf(buf, sizeof buf, pick(g, 2) ? "\"yes %u\"" : "{\"pick\":%u}", pick(g, 9));
		r.u.answer.response = buf;
		live(g, t, &r);
		return;
	}
	if (!t->was_running) {   /* queued: it starts, or is cancelled */
		if (pick(g, 8) == 0) {
			op_finish(g, t);
			return;
		}
		rec_for(g, &r, STORE_REC_START, t);
		r.u.start.attempt = t->attempt + 1;
		r.u.start.sandbox = pick(g, 2) ? "{\"profile\":\"strict\",\"network\":false}" : NULL;
		live(g, t, &r);
		return;
	}
	switch (pick(g, 8)) {
	case 0: case 1:
		rec_for(g, &r, STORE_REC_PROGRESS, t);
		snprintf(buf, sizeof buf, "Section %u", pick(g, 10));
		r.u.progress.msg = pick(g, 5) ? buf : "";
		r.u.progress.fraction = pick(g, 4) ? (double)pick(g, 101) / 100.0 : -1;
		r.u.progress.has_fraction = 1;
		live(g, t, &r);
		break;
	case 2: case 3:
		op_checkpoint(g, t);
		break;
	case 4:
		rec_for(g, &r, STORE_REC_ASK, t);
		snprintf(buf, sizeof buf, "q%d", t->attempt * 10 + (int)pick(g, 10));
		r.u.ask.qid = buf;
		r.u.ask.prompt = "Continue?";
		r.u.ask.choices = pick(g, 2) ? "[\"yes\",\"no\"]" : NULL;
		live(g, t, &r);
		break;
	case 5:
		rec_for(g, &r, STORE_REC_RETRY, t);
		r.u.retry.retries = t->retries_used + 1;
		r.u.retry.not_before = r.at + 1000;
		r.u.retry.msg = "Attempt failed; retrying from the last checkpoint.";
		live(g, t, &r);
		break;
	default:
		op_finish(g, t);
		break;
	}
}

/* Commit, close, replay into a fresh table: it must hold exactly the live tasks. */
static void op_restart(struct gen *g)
{
	struct env *e = g->e;
	if (persist_commit(e->sv.persist) < 0)
		check_die("persist_commit");
	/* The live tasks, kept while the store is replayed into a new table. */
	struct tasks *live_tasks = e->sv.tasks;
	persist_close(e->sv.persist);
	e->sv.persist = NULL;
	e->sv.tasks = NULL;
	env_open(e);
	g->restarts++;
	if (tasks_count(live_tasks) != tasks_count(e->sv.tasks) && !g->failure)
		g->failure = "task count";
	for (struct task *a = tasks_newest(live_tasks); a && !g->failure; a = a->next) {
		struct task *b = tasks_find(e->sv.tasks, a->id);
		const char *d = b ? task_diff(a, b) : "missing after replay";
		if (d) {
			static char msg[200];
			snprintf(msg, sizeof msg, "task %.8s: %s", a->id, d);
			g->failure = msg;
		}
	}
	for (size_t i = 0; i < g->nids && !g->failure; i++)
		if (g->expired[i] && (tasks_tombstone_find(live_tasks, g->ids[i]) !=
		                      tasks_tombstone_find(e->sv.tasks, g->ids[i]) || tasks_find(e->sv.tasks, g->ids[i])))
			g->failure = "tombstone";
	tasks_free(live_tasks);
}

static void run_sequence(struct gen *g, int steps)
{
	for (int i = 0; i < steps && !g->failure; i++) {
		unsigned k = pick(g, 20);
		if (k < 3 || tasks_count(g->e->sv.tasks) == 0) {
			op_create(g);
		} else if (k == 3) {
			op_restart(g);
		} else if (k == 4) {
			if (persist_commit(g->e->sv.persist) < 0 || persist_compact(g->e->sv.persist) < 0)
				g->failure = "compaction";
			g->snapshots++;
		} else {
			/* A random live task. */
			size_t n = pick(g, (unsigned)tasks_count(g->e->sv.tasks));
			struct task *t = tasks_newest(g->e->sv.tasks);
			while (n-- && t->next)
				t = t->next;
			op_task(g, t);
		}
	}
	if (!g->failure)
		op_restart(g);
}

static void test_equivalence(struct tally *t, int memory, int seqs, int steps)
{
	unsigned restarts = 0, snapshots = 0, records = 0;
	int failed = 0;
	for (int s = 0; s < seqs && !failed; s++) {
		struct env e;
		memset(&e, 0, sizeof e);
		check_tmpdir(e.dir, sizeof e.dir, "apply");
		fplog_init(&e.sv.log, 2, FPLOG_CRITICAL);
		e.sv.state_dir = e.dir;
		if (memory && !(e.medium = store_mem_medium_new()))
			check_die("medium");
		env_open(&e);
		struct gen g = { .rng = 0x9e3779b97f4a7c15ull + (uint64_t)s, .e = &e, .clock = 1700000000000 };
		run_sequence(&g, steps);
		if (g.failure) {
			failed = 1;
			fprintf(stderr, "# %s, sequence %d: %s\n", memory ? "memory" : "journal", s, g.failure);
		}
		restarts += g.restarts;
		snapshots += g.snapshots;
		records += g.records;
		env_close(&e);
		loop_free(e.sv.loop);
		store_mem_medium_free(e.medium);
		check_rm_rf(e.dir);
	}
	char what[200];
	snprintf(what, sizeof what, "%s: %d sequences, %u records, %u restarts, %u snapshots: replay rebuilds "
	         "every live task field for field", memory ? "memory" : "journal", seqs, records, restarts, snapshots);
	CHECK(t, !failed && restarts > (unsigned)seqs && snapshots > 0, what);
}

/* ---- out of memory while printing a record's JSON ------------------------------------------- */

static int fail_alloc;

static void *test_malloc(size_t n)
{
	return fail_alloc ? NULL : malloc(n);
}

/* Before, an args value that could not be printed was stored as "null": the create record was
 * acknowledged, and the next replay refused the whole journal ("record without tool or
 * arguments").  Now the append fails and nothing is pending. */
static void test_json_oom(struct tally *t)
{
	struct env e;
	memset(&e, 0, sizeof e);
	check_tmpdir(e.dir, sizeof e.dir, "apply-oom");
	fplog_init(&e.sv.log, 2, FPLOG_CRITICAL);
	e.sv.state_dir = e.dir;
	env_open(&e);
	struct task *tk = task_alloc("00000000000000000000000000000001");
	tk->tool_name = strdup("t");
	tk->args = cJSON_Parse("{\"a\":[1,2,3]}");
	tk->created_ms = 1;
	size_t before = persist_pending(e.sv.persist);
	cJSON_Hooks hooks = { test_malloc, free };
	cJSON_InitHooks(&hooks);
	fail_alloc = 1;
	int rc = persist_created(e.sv.persist, tk);
	fail_alloc = 0;
	cJSON_InitHooks(NULL);
	CHECK(t, rc == -ENOMEM, "a create whose arguments cannot be printed fails with -ENOMEM");
	CHECK(t, persist_pending(e.sv.persist) == before, "and appends nothing");
	CHECK(t, persist_created(e.sv.persist, tk) == 0 && persist_commit(e.sv.persist) == 0, "with memory it is recorded");
	task_free(tk);
	env_close(&e);
	env_open(&e);
	CHECK(t, tasks_count(e.sv.tasks) == 1, "and the journal replays");
	env_close(&e);
	loop_free(e.sv.loop);
	check_rm_rf(e.dir);
}

/* Progress is coalesced (applied now, written at a later commit, and never for a terminal
 * task): progress applied in the same batch as the task's FINISH must still reach the store,
 * or the replayed task shows the progress before it. */
static void test_progress_then_finish(struct tally *t, int memory)
{
	struct env e;
	memset(&e, 0, sizeof e);
	check_tmpdir(e.dir, sizeof e.dir, "apply-progress");
	fplog_init(&e.sv.log, 2, FPLOG_CRITICAL);
	e.sv.state_dir = e.dir;
	if (memory && !(e.medium = store_mem_medium_new()))
		check_die("medium");
	env_open(&e);
	struct gen g = { .rng = 7, .e = &e, .clock = 1700000000000 };
	op_create(&g);
	struct task *tk = tasks_newest(e.sv.tasks);
	struct store_rec r;
	rec_for(&g, &r, STORE_REC_START, tk);
	r.u.start.attempt = 1;
	live(&g, tk, &r);
	persist_commit(e.sv.persist);
	rec_for(&g, &r, STORE_REC_PROGRESS, tk);
	r.u.progress.msg = "Section 9";
	r.u.progress.fraction = 0.9;
	r.u.progress.has_fraction = 1;
	char err[256];
	task_apply(tk, &r, err, sizeof err);   /* the coalesced path: applied, journaled later */
	persist_progress(e.sv.persist, tk);
	rec_for(&g, &r, STORE_REC_FINISH, tk);
	r.u.finish.status = "completed";
	r.u.finish.result.text = "1";
	live(&g, tk, &r);
	op_restart(&g);
	char what[120];
	snprintf(what, sizeof what, "%s: progress applied in the batch of the outcome is replayed too (%s)",
	         memory ? "memory" : "journal", g.failure ? g.failure : "equal");
	CHECK(t, !g.failure, what);
	env_close(&e);
	loop_free(e.sv.loop);
	store_mem_medium_free(e.medium);
	check_rm_rf(e.dir);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_json_oom(&t);
	test_progress_then_finish(&t, 0);
	test_progress_then_finish(&t, 1);
	test_equivalence(&t, 0, 25, 80);
	test_equivalence(&t, 1, 60, 80);
	return check_done(&t);
}
