/* tests/unit/test_store.c — the task store's contract (state/store.h), one suite run over both
 * backends, the journal and the in-memory one: every record type survives append, commit and
 * replay field for field; what was not committed is gone after a close; a snapshot replaces
 * everything before it and an aborted one changes nothing; a record over the limit and a
 * failed commit are never replayed, and a retried commit is; a refusing replay callback stops
 * the replay with its message.  Faults: the memory backend injects -ENOSPC on append and -EIO
 * on commit; the journal's commit is made to fail with RLIMIT_FSIZE (-EFBIG).
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "check.h"
#include "state/journal.h"
#include "state/store.h"
#include "proto/frame.h"

#include <signal.h>
#include <sys/resource.h>

struct fixture {
	const char *backend;          /* "journal" or "memory" */
	char dir[256];
	struct store_mem_medium *medium;
};

static struct store *fx_open(struct fixture *f)
{
	struct store *s = NULL;
	int rc = strcmp(f->backend, "journal") == 0 ? store_journal_new(f->dir, NULL, &s)
	                                            : store_mem_new(f->medium, &s);
	if (rc < 0)
		check_die("store open");
	return s;
}

/* The records a replay delivered, copied. */
struct got {
	struct store_rec *v[64];
	size_t n;
	int refuse_at;                /* 1-based index of a record the callback refuses, 0: none */
};

static int collect(void *arg, const struct store_rec *r, char *err, size_t errlen)
{
	struct got *g = arg;
	if (g->refuse_at && (int)g->n + 1 == g->refuse_at) {
		snprintf(err, errlen, "refused on purpose");
		return -1;
	}
	if (g->n < sizeof g->v / sizeof *g->v)
		g->v[g->n++] = store_rec_dup(r);
	return 0;
}

static void got_free(struct got *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->v[i]);
	g->n = 0;
}

/* Open a store on f and replay it into g.  The store, or NULL when the replay failed (err). */
static struct store *fx_replay(struct fixture *f, struct got *g, char *err, size_t errlen)
{
	struct store *s = fx_open(f);
	if (store_replay(s, collect, NULL, g, err, errlen) < 0) {
		store_close(s);
		return NULL;
	}
	return s;
}

static const struct store_answer answers[] = { { "q2", "\"second\"" }, { "q1", "{\"a\":1}" } };
static const unsigned char ckbytes[] = { 0, 1, 2, 250, 255 };
#define HEX "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID  "0123456789abcdef0123456789abcdef"
#define SNAP_TASK_I 11   /* indexes in samples() */
#define SNAP_TOMB_I 12

/* One file transfer record of every type, with the fields it carries (store.h). */
static size_t xfer_samples(struct store_rec *r)
{
	static const enum store_rec_type types[] = { STORE_REC_X_OPEN, STORE_REC_X_SNAP, STORE_REC_X_INTENT,
		STORE_REC_X_CHUNK, STORE_REC_X_END, STORE_REC_X_CURSOR, STORE_REC_X_GONE, STORE_REC_X_TOMB,
		STORE_REC_X_ARTSHA };
	size_t n = sizeof types / sizeof *types;
	memset(r, 0, n * sizeof *r);
	for (size_t i = 0; i < n; i++) {
		struct store_xfer *x = &r[i].u.xfer;
		r[i].type = types[i];
		x->h = ID;
		switch (types[i]) {
		case STORE_REC_X_SNAP:
			x->has_intent = 1;
			x->pub.dev = 7; x->pub.ino = 8; x->pub.fsid = 9; x->pub.fh = "0102"; x->psha = HEX;
			x->touched = 11; x->has_touched = 1; x->finished = 12; x->cursor = 13; x->loff = 14;
			x->llen = 15; x->state = "completed"; x->msg = "";
			__attribute__((fallthrough));   /* the open fields too */
		case STORE_REC_X_OPEN:
			x->dir = "upload"; x->path = "/srv/in/a.bin"; x->size = 4096; x->has_size = 1;
			x->want = ""; x->ow = 1; x->at = 10; x->has_at = 1; x->sha = HEX;
			x->id.dev = 1; x->id.ino = 2; x->id.fsid = 3; x->id.fh = "ab01";
			break;
		case STORE_REC_X_INTENT:
			x->has_intent = 1;
			x->pub.dev = 4; x->pub.ino = 5; x->pub.fsid = 6; x->pub.fh = ""; x->psha = HEX;
			break;
		case STORE_REC_X_CHUNK:
			x->off = 65536; x->len = 16384; x->at = 20; x->has_at = 1;
			break;
		case STORE_REC_X_END:
			x->state = "failed"; x->sha = ""; x->size = 5; x->has_size = 1; x->msg = "sha256 mismatch";
			x->at = 30; x->has_at = 1;
			break;
		case STORE_REC_X_CURSOR:
			x->cursor = 999; x->at = 40; x->has_at = 1;
			break;
		case STORE_REC_X_GONE:
		case STORE_REC_X_TOMB:
			x->until = 50 + (int64_t)i;
			break;
		default:   /* ARTSHA */
			x->h = NULL; x->task = ID; x->name = "out.txt"; x->size = 3; x->has_size = 1; x->sha = HEX;
			x->status = "";
			break;
		}
	}
	return n;
}

/* One record of every type, every field set (the journal writes absent strings as "" or
 * "null", so the round trip is exact only for present ones). */
static size_t samples(struct store_rec *r)
{
	size_t n = 0;
	memset(r, 0, 13 * sizeof *r);
	for (int i = 0; i < 13; i++) {
		memcpy(r[i].task_id, ID, 33);
		r[i].at = 1000 + i;
	}
	r[n].type = STORE_REC_CREATE;
	r[n].u.create.tool = "report";
	r[n++].u.create.args = "{\"sections\":3,\"s\":\"\\u00e9\"}";
	r[n].type = STORE_REC_START;
	r[n].u.start.attempt = 2;
	r[n++].u.start.sandbox = "{\"network\":false}";
	r[n].type = STORE_REC_PROGRESS;
	r[n].u.progress.msg = "Section 2";
	r[n].u.progress.fraction = 0.5;
	r[n++].u.progress.has_fraction = 1;
	r[n].type = STORE_REC_CHECKPOINT;
	r[n].u.checkpoint.seq = 7;
	r[n].u.checkpoint.ckpt.data = ckbytes;
	r[n].u.checkpoint.ckpt.len = sizeof ckbytes;
	r[n++].u.checkpoint.ckpt.has_data = 1;
	r[n].type = STORE_REC_CHECKPOINT;
	r[n].u.checkpoint.seq = 8;
	r[n++].u.checkpoint.ckpt.blob = HEX;
	r[n].type = STORE_REC_ASK;
	r[n].u.ask.qid = "q1";
	r[n].u.ask.prompt = "Go on?";
	r[n++].u.ask.choices = "[\"yes\",\"no\"]";
	r[n].type = STORE_REC_ANSWER;
	r[n].u.answer.qid = "q1";
	r[n++].u.answer.response = "\"yes\"";
	r[n].type = STORE_REC_RETRY;
	r[n].u.retry.retries = 1;
	r[n].u.retry.not_before = 99999;
	r[n++].u.retry.msg = "Attempt 1 failed";
	r[n].type = STORE_REC_FINISH;
	r[n].u.finish.status = "completed";
	r[n].u.finish.artifacts = "[{\"name\":\"a.txt\"}]";
	r[n].u.finish.error = "null";
	r[n].u.finish.result.text = "{\"ok\":true}";
	r[n].u.finish.result.mcp = 1;
	r[n++].u.finish.expires = 5000;
	r[n].type = STORE_REC_FINISH;
	r[n].u.finish.status = "failed";
	r[n].u.finish.artifacts = "null";
	r[n].u.finish.error = "{\"code\":\"job_failed\"}";
	r[n].u.finish.result.blob = HEX;
	r[n].u.finish.result.bytes = 123456;
	r[n].u.finish.result.summary = "an object with keys: a";
	r[n++].u.finish.expires = 6000;
	r[n].type = STORE_REC_EXPIRE;
	r[n].at = 0;
	r[n++].u.expire.until = 777;
	struct store_task *s = &r[n].u.snap;
	r[n].type = STORE_REC_SNAP_TASK;
	r[n].at = 0;
	s->tool = "report"; s->args = "{}"; s->status = "input_required"; s->sandbox = "{}";
	s->artifacts = "null"; s->error = "null"; s->msg = "waiting";
	s->attempt = 3; s->retries = 1; s->running = 1; s->not_before = 4; s->created = 5;
	s->updated = 6; s->started = 7; s->finished = 0; s->expires = 9; s->seq = 10;
	s->fraction = 0.25; s->has_fraction = 1;
	s->has_question = 1; s->qid = "q3"; s->prompt = "Which?"; s->choices = "null";
	s->answers = answers; s->nanswers = 2;
	s->ckpt.data = ckbytes; s->ckpt.len = sizeof ckbytes; s->ckpt.has_data = 1;
	s->result.text = "null";
	n++;
	r[n].type = STORE_REC_SNAP_TOMB;
	r[n].at = 0;
	r[n++].u.expire.until = 888;
	return n + xfer_samples(r + n);
}

static int str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static int ckpt_eq(const struct store_checkpoint *a, const struct store_checkpoint *b)
{
	if (!str_eq(a->blob, b->blob))
		return 0;
	if (a->blob)
		return 1;   /* the bytes live in the blob; a backend may keep a copy or not */
	return a->has_data == b->has_data && a->len == b->len && (!a->len || memcmp(a->data, b->data, a->len) == 0);
}

static int result_eq(const struct store_result *a, const struct store_result *b)
{
	if (!str_eq(a->blob, b->blob) || a->mcp != b->mcp)
		return 0;
	return a->blob ? a->bytes == b->bytes && str_eq(a->summary, b->summary) : str_eq(a->text, b->text);
}

static int snap_eq(const struct store_task *a, const struct store_task *b)
{
	int ok = str_eq(a->tool, b->tool) && str_eq(a->args, b->args) && str_eq(a->status, b->status) &&
	         str_eq(a->sandbox, b->sandbox) && str_eq(a->artifacts, b->artifacts) &&
	         str_eq(a->error, b->error) && str_eq(a->msg, b->msg) && a->attempt == b->attempt &&
	         a->retries == b->retries && a->running == b->running && a->not_before == b->not_before &&
	         a->created == b->created && a->updated == b->updated && a->started == b->started &&
	         a->finished == b->finished && a->expires == b->expires && a->seq == b->seq &&
	         a->fraction == b->fraction && a->has_question == b->has_question &&
	         str_eq(a->qid, b->qid) && str_eq(a->prompt, b->prompt) && str_eq(a->choices, b->choices) &&
	         a->nanswers == b->nanswers && ckpt_eq(&a->ckpt, &b->ckpt) && result_eq(&a->result, &b->result);
	for (size_t i = 0; ok && i < a->nanswers; i++)
		ok = str_eq(a->answers[i].qid, b->answers[i].qid) && str_eq(a->answers[i].response, b->answers[i].response);
	return ok;
}

static int fid_eq(const struct store_fid *a, const struct store_fid *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->fsid == b->fsid && str_eq(a->fh, b->fh);
}

static int xfer_eq(const struct store_xfer *a, const struct store_xfer *b)
{
	return str_eq(a->h, b->h) && str_eq(a->dir, b->dir) && str_eq(a->path, b->path) &&
	       str_eq(a->want, b->want) && str_eq(a->sha, b->sha) && a->size == b->size &&
	       a->ow == b->ow && a->at == b->at && a->has_size == b->has_size && a->has_at == b->has_at &&
	       fid_eq(&a->id, &b->id) && a->has_intent == b->has_intent && fid_eq(&a->pub, &b->pub) &&
	       str_eq(a->psha, b->psha) && a->touched == b->touched && a->finished == b->finished &&
	       a->cursor == b->cursor && a->loff == b->loff && a->llen == b->llen &&
	       a->has_touched == b->has_touched && str_eq(a->state, b->state) && str_eq(a->msg, b->msg) &&
	       a->off == b->off && a->len == b->len && a->until == b->until && str_eq(a->task, b->task) &&
	       str_eq(a->name, b->name) && str_eq(a->status, b->status);
}

/* Why field by field: a backend that drops or renames one field must fail here, not in a
 * replay weeks later. */
static int rec_eq(const struct store_rec *a, const struct store_rec *b)
{
	if (a->type != b->type || strcmp(a->task_id, b->task_id) != 0 || a->at != b->at)
		return 0;
	switch (a->type) {
	case STORE_REC_CREATE:
		return str_eq(a->u.create.tool, b->u.create.tool) && str_eq(a->u.create.args, b->u.create.args);
	case STORE_REC_START:
		return a->u.start.attempt == b->u.start.attempt && str_eq(a->u.start.sandbox, b->u.start.sandbox);
	case STORE_REC_PROGRESS:
		return str_eq(a->u.progress.msg, b->u.progress.msg) && a->u.progress.fraction == b->u.progress.fraction &&
		       a->u.progress.has_fraction == b->u.progress.has_fraction;
	case STORE_REC_CHECKPOINT:
		return a->u.checkpoint.seq == b->u.checkpoint.seq && ckpt_eq(&a->u.checkpoint.ckpt, &b->u.checkpoint.ckpt);
	case STORE_REC_ASK:
		return str_eq(a->u.ask.qid, b->u.ask.qid) && str_eq(a->u.ask.prompt, b->u.ask.prompt) &&
		       str_eq(a->u.ask.choices, b->u.ask.choices);
	case STORE_REC_ANSWER:
		return str_eq(a->u.answer.qid, b->u.answer.qid) && str_eq(a->u.answer.response, b->u.answer.response);
	case STORE_REC_FINISH:
		return str_eq(a->u.finish.status, b->u.finish.status) && str_eq(a->u.finish.artifacts, b->u.finish.artifacts) &&
		       str_eq(a->u.finish.error, b->u.finish.error) && a->u.finish.expires == b->u.finish.expires &&
		       result_eq(&a->u.finish.result, &b->u.finish.result);
	case STORE_REC_RETRY:
		return a->u.retry.retries == b->u.retry.retries && a->u.retry.not_before == b->u.retry.not_before &&
		       str_eq(a->u.retry.msg, b->u.retry.msg);
	case STORE_REC_EXPIRE:
	case STORE_REC_SNAP_TOMB:
		return a->u.expire.until == b->u.expire.until;
	case STORE_REC_SNAP_TASK:
		return snap_eq(&a->u.snap, &b->u.snap);
	default:
		return xfer_eq(&a->u.xfer, &b->u.xfer);
	}
}

static char what[800];
#define W(...) (snprintf(what, sizeof what, __VA_ARGS__), what)

/* Every record type: appended, committed, replayed equal, in order. */
static void test_round_trip(struct tally *t, struct fixture *f)
{
	struct store_rec r[32];
	struct got g = { .n = 0 };
	char err[512] = "";
	size_t n = samples(r);
	struct store *s = fx_open(f);
	struct store_rec early = r[0];
	CHECK(t, store_append(s, &early) == -EINVAL, W("%s: append before replay is refused", f->backend));
	CHECK(t, store_replay(s, collect, NULL, &g, err, sizeof err) == 0 && g.n == 0, W("%s: an empty store replays nothing", f->backend));
	CHECK(t, store_replay(s, collect, NULL, &g, err, sizeof err) == -EALREADY, W("%s: a second replay is refused", f->backend));
	int bad = 0;
	for (size_t i = 0; i < n; i++)
		bad |= store_append(s, &r[i]) != 0;
	CHECK(t, !bad && store_pending(s) > 0, W("%s: %zu records appended, pending", f->backend, n));
	CHECK(t, store_commit(s) == 0 && store_pending(s) == 0, W("%s: committed", f->backend));
	/* Not committed: gone after the close, as after a crash. */
	CHECK(t, store_append(s, &r[2]) == 0, W("%s: one more appended, never committed", f->backend));
	store_close(s);

	s = fx_replay(f, &g, err, sizeof err);
	CHECK(t, s && g.n == n, W("%s: replayed %zu of %zu records (%.300s)", f->backend, g.n, n, err));
	int same = g.n == n;
	for (size_t i = 0; same && i < n; i++)
		if (!rec_eq(&r[i], g.v[i])) {
			same = 0;
			fprintf(stderr, "# %s: record %zu (%s) differs\n", f->backend, i, store_rec_type_name(r[i].type));
		}
	CHECK(t, same, W("%s: every record comes back field for field, in order", f->backend));
	struct store_stats st;
	if (s)
		store_stats(s, &st);
	CHECK(t, s && st.records_replayed >= n, W("%s: stats count the replayed records", f->backend));
	got_free(&g);
	store_close(s);
}

/* A snapshot replaces everything before it; an aborted one changes nothing; no commit while one
 * is open. */
static void test_snapshot(struct tally *t, struct fixture *f)
{
	struct store_rec r[32];
	struct got g = { .n = 0 };
	char err[512] = "";
	size_t n = samples(r);
	struct store *s = fx_replay(f, &g, err, sizeof err);
	got_free(&g);
	if (!s) {
		CHECK(t, 0, W("%s: open for the snapshot test: %.300s", f->backend, err));
		return;
	}
	CHECK(t, store_snapshot_begin(s) == 0 && store_append(s, &r[SNAP_TASK_I]) == 0, W("%s: snapshot begun", f->backend));
	CHECK(t, store_commit(s) == -EBUSY, W("%s: no commit while a snapshot is open", f->backend));
	store_snapshot_abort(s);
	CHECK(t, store_commit(s) == 0, W("%s: commits work again after the abort", f->backend));
	store_close(s);
	s = fx_replay(f, &g, err, sizeof err);
	CHECK(t, s && g.n == n, W("%s: an aborted snapshot changed nothing (%zu records)", f->backend, g.n));
	got_free(&g);

	int rc = store_snapshot_begin(s);
	rc = rc ? rc : store_append(s, &r[SNAP_TASK_I]);   /* the task */
	rc = rc ? rc : store_append(s, &r[SNAP_TOMB_I]);   /* the tombstone */
	rc = rc ? rc : store_snapshot_end(s);
	CHECK(t, rc == 0, W("%s: snapshot of 2 records written: %d", f->backend, rc));
	CHECK(t, store_append(s, &r[0]) == 0 && store_commit(s) == 0, W("%s: a record after it", f->backend));
	store_close(s);
	s = fx_replay(f, &g, err, sizeof err);
	CHECK(t, s && g.n == 3 && rec_eq(g.v[0], &r[SNAP_TASK_I]) && rec_eq(g.v[1], &r[SNAP_TOMB_I]) && rec_eq(g.v[2], &r[0]),
	      W("%s: the replay starts from the snapshot (%zu records)", f->backend, g.n));
	got_free(&g);
	store_close(s);
}

/* The journal's commit fails on the file size limit; the memory backend's on an injected EIO. */
static int fail_commit(struct fixture *f, struct store *s)
{
	if (f->medium) {
		store_mem_fail(f->medium, STORE_MEM_COMMIT, EIO, 1);
		return store_commit(s);
	}
	struct rlimit old, lim;
	struct sigaction ign = { .sa_handler = SIG_IGN }, prev;
	char path[400];
	snprintf(path, sizeof path, "%s/journal", f->dir);
	getrlimit(RLIMIT_FSIZE, &old);
	sigaction(SIGXFSZ, &ign, &prev);
	lim = old;
	lim.rlim_cur = 1;   /* below every segment's size: the write fails */
	setrlimit(RLIMIT_FSIZE, &lim);
	int rc = store_commit(s);
	setrlimit(RLIMIT_FSIZE, &old);
	sigaction(SIGXFSZ, &prev, NULL);
	return rc;
}

/* Nothing that failed is ever replayed; a retried commit is. */
static void test_faults(struct tally *t, struct fixture *f)
{
	struct store_rec r[32];
	struct got g = { .n = 0 };
	char err[512] = "";
	samples(r);
	struct store *s = fx_replay(f, &g, err, sizeof err);
	size_t base = g.n;
	got_free(&g);
	if (!s) {
		CHECK(t, 0, W("%s: open for the fault test: %.300s", f->backend, err));
		return;
	}
	/* Over the record limit: refused by both. */
	char *big = malloc(JOURNAL_MAX_RECORD + 64);
	struct store_rec huge = r[0];
	if (big) {
		memset(big, '1', JOURNAL_MAX_RECORD + 63);
		big[JOURNAL_MAX_RECORD + 63] = 0;
	}
	huge.u.create.args = big;
	size_t pend = store_pending(s);
	CHECK(t, big && store_append(s, &huge) == -EMSGSIZE && store_pending(s) == pend,
	      W("%s: a record over the limit is refused and nothing is pending", f->backend));
	free(big);
	if (f->medium) {
		store_mem_fail(f->medium, STORE_MEM_APPEND, ENOSPC, 1);
		CHECK(t, store_append(s, &r[0]) == -ENOSPC && store_pending(s) == pend,
		      W("%s: an append that fails (ENOSPC) leaves nothing pending", f->backend));
	}
	CHECK(t, store_append(s, &r[1]) == 0, W("%s: the next append works", f->backend));
	int rc = fail_commit(f, s);
	CHECK(t, rc < 0 && store_pending(s) > 0, W("%s: a failed commit (%s) keeps the batch pending", f->backend, strerror(-rc)));
	store_close(s);   /* a crash while commits fail */
	s = fx_replay(f, &g, err, sizeof err);
	CHECK(t, s && g.n == base, W("%s: nothing of the failed batch is replayed (%zu, %zu before)", f->backend, g.n, base));
	got_free(&g);
	if (!s)
		return;
	CHECK(t, store_append(s, &r[1]) == 0 && fail_commit(f, s) < 0, W("%s: failed again", f->backend));
	CHECK(t, store_commit(s) == 0 && store_pending(s) == 0, W("%s: the retried commit succeeds", f->backend));
	store_close(s);
	s = fx_replay(f, &g, err, sizeof err);
	CHECK(t, s && g.n == base + 1 && rec_eq(g.v[base], &r[1]), W("%s: the retried batch is replayed once", f->backend));
	got_free(&g);
	store_close(s);

	/* A callback that refuses a record stops the replay with its message. */
	g.refuse_at = 1;
	s = fx_replay(f, &g, err, sizeof err);
	CHECK(t, !s && strstr(err, "refused on purpose"), W("%s: a refusing callback fails the replay: %.300s", f->backend, err));
	got_free(&g);
}

static void run_suite(struct tally *t, const char *backend)
{
	struct fixture f = { .backend = backend };
	check_tmpdir(f.dir, sizeof f.dir, "store");
	if (strcmp(backend, "memory") == 0 && !(f.medium = store_mem_medium_new()))
		check_die("medium");
	test_round_trip(t, &f);
	test_snapshot(t, &f);
	test_faults(t, &f);
	store_mem_medium_free(f.medium);
	check_rm_rf(f.dir);
}

/* A read-only journal store replays but never appends. */
static void test_read_only(struct tally *t)
{
	char dir[256], err[512] = "";
	check_tmpdir(dir, sizeof dir, "store-ro");
	struct journal_opts o = { .read_only = 0 };
	struct store *s = NULL;
	struct got g = { .n = 0 };
	struct store_rec r[32];
	samples(r);
	store_journal_new(dir, &o, &s);
	int rc = s ? store_replay(s, collect, NULL, &g, err, sizeof err) : -1;
	rc = rc ? rc : store_append(s, &r[0]);
	rc = rc ? rc : store_commit(s);
	store_close(s);
	o.read_only = 1;
	store_journal_new(dir, &o, &s);
	rc = rc ? rc : store_replay(s, collect, NULL, &g, err, sizeof err);
	CHECK(t, rc == 0 && g.n == 1, "journal, read-only: replays what is there");
	CHECK(t, store_append(s, &r[1]) == -EROFS, "journal, read-only: append is refused (-EROFS)");
	got_free(&g);
	store_close(s);
	check_rm_rf(dir);
}

/* A copy owns all of its strings: the original's memory may go at once. */
static void test_dup(struct tally *t)
{
	struct store_rec r[32];
	size_t n = samples(r);
	int ok = 1;
	for (size_t i = 0; i < n; i++) {
		struct store_rec *d = store_rec_dup(&r[i]);
		ok &= d && rec_eq(d, &r[i]) && store_rec_size(&r[i]) >= sizeof *d;
		if (d && r[i].type == STORE_REC_SNAP_TASK)
			ok &= d->u.snap.answers != r[i].u.snap.answers && d->u.snap.tool != r[i].u.snap.tool;
		free(d);
	}
	CHECK(t, ok, "store_rec_dup copies every record type whole");
}

/* 1 if the bytes of m occur in a segment file under dir/journal. */
static int in_journal(const char *dir, const struct frame_map *m)
{
	char path[400];
	int found = 0;
	snprintf(path, sizeof path, "%s/journal", dir);
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && !found && (e = readdir(d))) {
		if (!strstr(e->d_name, ".seg"))
			continue;
		char f[700];
		snprintf(f, sizeof f, "%s/%s", path, e->d_name);
		FILE *fp = fopen(f, "rb");
		static char buf[1 << 16];
		size_t n = fp ? fread(buf, 1, sizeof buf, fp) : 0;
		if (fp)
			fclose(fp);
		found = memmem(buf, n, m->sb.data, m->sb.size) != NULL;
	}
	if (d)
		closedir(d);
	return found;
}

/* The journal backend writes the payloads earlier versions wrote, byte for byte: each
 * expected map below is packed in the order the old writers (persist.c, transfer.c) used. */
static void test_bytes(struct tally *t)
{
	char dir[256], err[512] = "";
	struct store_rec r[32];
	struct got g = { .n = 0 };
	samples(r);
	check_tmpdir(dir, sizeof dir, "store-bytes");
	struct store *s = NULL;
	store_journal_new(dir, NULL, &s);
	int rc = s ? store_replay(s, collect, NULL, &g, err, sizeof err) : -1;
	for (int i = 0; rc == 0 && i < 22; i++)
		rc = store_append(s, &r[i]);
	rc = rc ? rc : store_commit(s);
	store_close(s);
	CHECK(t, rc == 0, "journal: every sample written");

	struct frame_map m;
	frame_map_begin(&m, 4);   /* CREATE */
	frame_pack_kv_str(&m.pk, "id", ID);
	frame_pack_kv_str(&m.pk, "tool", "report");
	frame_pack_kv_str(&m.pk, "args", r[0].u.create.args);
	frame_pack_kv_int(&m.pk, "at", 1000);
	CHECK(t, in_journal(dir, &m), "a create record is written as before");
	msgpack_sbuffer_destroy(&m.sb);

	frame_map_begin(&m, 10);   /* FINISH with a blob result */
	frame_pack_kv_str(&m.pk, "id", ID);
	frame_pack_kv_str(&m.pk, "status", "failed");
	frame_pack_kv_str(&m.pk, "artifacts", "null");
	frame_pack_kv_str(&m.pk, "resultBlob", HEX);
	frame_pack_kv_int(&m.pk, "resultBytes", 123456);
	frame_pack_kv_str(&m.pk, "resultSummary", "an object with keys: a");
	frame_pack_kv_int(&m.pk, "mcp", 0);
	frame_pack_kv_str(&m.pk, "error", "{\"code\":\"job_failed\"}");
	frame_pack_kv_int(&m.pk, "at", 1009);
	frame_pack_kv_int(&m.pk, "expires", 6000);
	CHECK(t, in_journal(dir, &m), "a finish record is written as before");
	msgpack_sbuffer_destroy(&m.sb);

	frame_map_begin(&m, 12);   /* X_OPEN */
	frame_pack_kv_str(&m.pk, "h", ID);
	frame_pack_kv_str(&m.pk, "dir", "upload");
	frame_pack_kv_str(&m.pk, "path", "/srv/in/a.bin");
	frame_pack_kv_int(&m.pk, "size", 4096);
	frame_pack_kv_str(&m.pk, "want", "");
	frame_pack_kv_int(&m.pk, "ow", 1);
	frame_pack_kv_int(&m.pk, "at", 10);
	frame_pack_kv_int(&m.pk, "dev", 1);
	frame_pack_kv_int(&m.pk, "ino", 2);
	frame_pack_kv_int(&m.pk, "fsid", 3);
	frame_pack_kv_str(&m.pk, "fh", "ab01");
	frame_pack_kv_str(&m.pk, "sha", HEX);
	CHECK(t, in_journal(dir, &m), "a transfer open record is written as before");
	msgpack_sbuffer_destroy(&m.sb);

	frame_map_begin(&m, 6);   /* X_END */
	frame_pack_kv_str(&m.pk, "h", ID);
	frame_pack_kv_str(&m.pk, "state", "failed");
	frame_pack_kv_str(&m.pk, "sha", "");
	frame_pack_kv_int(&m.pk, "size", 5);
	frame_pack_kv_str(&m.pk, "msg", "sha256 mismatch");
	frame_pack_kv_int(&m.pk, "at", 30);
	CHECK(t, in_journal(dir, &m), "a transfer end record is written as before");
	msgpack_sbuffer_destroy(&m.sb);

	frame_map_begin(&m, 5);   /* X_ARTSHA */
	frame_pack_kv_str(&m.pk, "t", ID);
	frame_pack_kv_str(&m.pk, "name", "out.txt");
	frame_pack_kv_int(&m.pk, "size", 3);
	frame_pack_kv_str(&m.pk, "sha", HEX);
	frame_pack_kv_str(&m.pk, "status", "");
	CHECK(t, in_journal(dir, &m), "an artifact digest record is written as before");
	msgpack_sbuffer_destroy(&m.sb);
	got_free(&g);
	check_rm_rf(dir);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_dup(&t);
	test_bytes(&t);
	run_suite(&t, "journal");
	run_suite(&t, "memory");
	test_read_only(&t);
	return check_done(&t);
}
