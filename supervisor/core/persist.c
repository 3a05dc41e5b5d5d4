/* supervisor/core/persist.c — see persist.h. */
#include "supervisor/core/persist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/blob.h"
#include "proto/frame.h"
#include "state/journal.h"
#include "supervisor/core/task_apply.h"
#include "supervisor/core/transfer.h"

#define PROGRESS_FLUSH_MS  2000           /* progress alone is written at most this often */
#define COMPACT_MIN_BYTES  (8ull << 20)
#define COMPACT_BACKOFF_MS     1000       /* first retry after a failed compaction ... */
#define COMPACT_BACKOFF_MAX_MS 300000     /* ... doubling up to this */

struct persist {
	struct supervisor *sv;
	struct store *s;
	int read_only;
	char (*dirty)[33];                    /* ids with progress not yet journaled */
	size_t ndirty, capdirty;
	int64_t last_progress_flush;
	struct loop_timer *progress_timer;
	uint64_t snapshot_bytes;
	/* failed compactions: retried with exponential backoff, logged once per episode */
	int64_t compact_next;                 /* loop_now() before which none is tried */
	int64_t compact_backoff;              /* 0: the last one worked */
	unsigned compact_failures;
	uint64_t gen;                         /* records appended so far (this process) */
	uint64_t durable_gen;                 /* gen at the last successful commit */
	int fault;                            /* -errno of the last failed commit, 0 when healthy */
	struct blobs *blobs;         /* NULL until persist_open_store has opened it */
	char (*release)[BLOB_HEX_LEN + 1];    /* superseded blobs, deleted after the next commit */
	size_t nrelease, caprelease;
	uint64_t compact_min;                 /* server.compactMinBytes */
};

/* ---- appending ------------------------------------------------------------------------------ */

static void write_progress(struct persist *p, const struct task *t);

/* Why a FINISH first writes the task's coalesced progress: progress of a terminal task is
 * never written at commit, so progress applied in the same batch as the outcome would be in
 * the live task and lost from the replayed one. */
int persist_record(struct persist *p, struct task *t, const struct store_rec *r)
{
	if (t && t->progress_dirty && r->type == STORE_REC_FINISH && !p->read_only) {
		t->progress_dirty = 0;
		write_progress(p, t);
	}
	int rc = p->read_only ? -EROFS : store_append(p->s, r);
	if (rc < 0) {
		fplog(&p->sv->log, FPLOG_ERROR, t ? t->id : NULL, "journal append of a %s record failed: %s",
		      store_rec_type_name(r->type), strerror(-rc));
		return rc;
	}
	p->gen++;
	if (t)
		t->journal_gen = p->gen;
	return 0;
}

int persist_append(struct persist *p, uint8_t type, const void *payload, size_t len)
{
	if (p->read_only)
		return -EROFS;
	if (!STORE_REC_IS_EXT(type))
		return -EINVAL;
	struct store_rec r = { .type = (enum store_rec_type)type, .raw = payload ? payload : "", .raw_len = len };
	return persist_append_rec(p, &r);
}

int persist_append_rec(struct persist *p, const struct store_rec *r)
{
	if (p->read_only)
		return -EROFS;
	if (!STORE_REC_IS_EXT(r->type))
		return -EINVAL;
	int rc = store_append(p->s, r);
	if (rc == 0)
		p->gen++;
	return rc;
}

struct store *persist_store(struct persist *p)
{
	return p->s;
}

int persist_fault(const struct persist *p)
{
	return p && !p->read_only ? p->fault : 0;
}

int persist_task_durable(const struct persist *p, const struct task *t)
{
	return !p || p->read_only || t->journal_gen <= p->durable_gen;
}

/* A record about t with its id; the caller fills the rest. */
static void rec_init(struct store_rec *r, enum store_rec_type type, const struct task *t, int64_t at)
{
	memset(r, 0, sizeof *r);
	r->type = type;
	memcpy(r->task_id, t->id, sizeof r->task_id);
	r->at = at;
}

/* The JSON texts a record borrows, freed together once it is appended. */
struct texts {
	char *v[8];
	int n;
};

/* Text of v kept in tx; -ENOMEM when it cannot be printed (never "null" in its place). */
static int text_of(struct texts *tx, const cJSON *v, const char **out)
{
	char *s;
	int rc = task_json_text(v, &s);
	if (rc == 0)
		tx->v[tx->n++] = s;
	*out = s;
	return rc;
}

static void texts_free(struct texts *tx)
{
	for (int i = 0; i < tx->n; i++)
		free(tx->v[i]);
	tx->n = 0;
}

int persist_created(struct persist *p, struct task *t)
{
	struct store_rec r;
	struct texts tx = { .n = 0 };
	rec_init(&r, STORE_REC_CREATE, t, t->created_ms);
	r.u.create.tool = t->tool_name;
	int rc = text_of(&tx, t->args, &r.u.create.args);
	if (rc == 0)
		rc = persist_record(p, t, &r);
	texts_free(&tx);
	return rc;
}

int persist_started(struct persist *p, struct task *t)
{
	struct store_rec r;
	struct texts tx = { .n = 0 };
	rec_init(&r, STORE_REC_START, t, t->started_ms);
	r.u.start.attempt = t->attempt;
	int rc = text_of(&tx, t->sandbox, &r.u.start.sandbox);   /* the sandbox this attempt got */
	if (rc == 0)
		rc = persist_record(p, t, &r);
	texts_free(&tx);
	return rc;
}

/* The progress record of t's current fields.  Not a promise: a lost one is harmless, and a
 * read need not wait for it (no task mark). */
static void write_progress(struct persist *p, const struct task *t)
{
	struct store_rec r;
	rec_init(&r, STORE_REC_PROGRESS, t, t->updated_ms);
	r.u.progress.msg = t->progress_msg;
	r.u.progress.fraction = t->fraction;
	r.u.progress.has_fraction = 1;
	persist_record(p, NULL, &r);
}

static void progress_timer_cb(struct loop *l, void *arg)
{
	struct persist *p = arg;
	(void)l;
	/* Nothing to do here: waking the loop makes the turn hook run persist_commit(). */
	p->progress_timer = NULL;
}

void persist_progress(struct persist *p, struct task *t)
{
	if (t->progress_dirty)
		return;
	if (p->ndirty == p->capdirty) {
		size_t n = p->capdirty ? p->capdirty * 2 : 64;
		void *d = realloc(p->dirty, n * sizeof *p->dirty);
		if (!d)
			return;   /* progress is not a promise: dropping one update is harmless */
		p->dirty = d;
		p->capdirty = n;
	}
	memcpy(p->dirty[p->ndirty++], t->id, 33);
	t->progress_dirty = 1;
	if (!p->progress_timer && p->sv->loop)
		p->progress_timer = loop_timer_in(p->sv->loop, PROGRESS_FLUSH_MS, progress_timer_cb, p);
}

uint64_t persist_disk_bytes(const struct persist *p)
{
	struct store_stats st;
	struct blob_stats bst = { 0 };
	store_stats(p->s, &st);
	if (p->blobs)
		blobs_stats(p->blobs, &bst);
	return bst.bytes + st.total_bytes;
}

struct blobs *persist_blobs(struct persist *p)
{
	return p ? p->blobs : NULL;
}

/* -EDQUOT if len more bytes would take the state dir over its budget. */
static int budget_check(const struct persist *p, size_t len)
{
	long mb = p->sv->cfg ? p->sv->cfg->server.state_max_mb : 0;
	if (mb <= 0)
		return 0;
	return persist_disk_bytes(p) + len > (uint64_t)mb << 20 ? -EDQUOT : 0;
}

int persist_blob_put(struct persist *p, const void *data, size_t len, char hex[65])
{
	int rc = budget_check(p, len);
	if (rc == 0)
		rc = blobs_put(p->blobs, data, len, hex, NULL);
	if (rc < 0)
		hex[0] = 0;
	return rc;
}

/* Remember a blob that a newer record no longer needs; persist_commit deletes it. */
void persist_release_blob(struct persist *p, const char *hex)
{
	if (p->nrelease == p->caprelease) {
		size_t n = p->caprelease ? p->caprelease * 2 : 16;
		void *d = realloc(p->release, n * sizeof *p->release);
		if (!d)
			return;   /* the blob stays until the next compaction collects it */
		p->release = d;
		p->caprelease = n;
	}
	memcpy(p->release[p->nrelease++], hex, BLOB_HEX_LEN + 1);
}

static int cmp_hex(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* After a successful commit: delete the superseded blobs no task refers to any more (blobs are
 * shared by content, so another task, or the same one again, may).  One pass over the tasks
 * for the whole batch, with the names sorted and made unique for bsearch. */
static void release_blobs(struct persist *p)
{
	if (!p->nrelease)
		return;
	qsort(p->release, p->nrelease, sizeof *p->release, cmp_hex);
	size_t n = 1;
	for (size_t i = 1; i < p->nrelease; i++)
		if (strcmp(p->release[i], p->release[n - 1]) != 0)
			memcpy(p->release[n++], p->release[i], sizeof *p->release);
	unsigned char *keep = calloc(n, 1);
	if (!keep)
		return;   /* tried again after the next commit */
	for (struct task *t = tasks_newest(p->sv->tasks); t; t = t->next) {
		const char *refs[2] = { t->checkpoint_blob, t->result_blob };
		for (int i = 0; i < 2; i++) {
			char (*hit)[BLOB_HEX_LEN + 1] = refs[i][0] ?
				bsearch(refs[i], p->release, n, sizeof *p->release, cmp_hex) : NULL;
			if (hit)
				keep[hit - p->release] = 1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		int rc = keep[i] ? 0 : blobs_remove(p->blobs, p->release[i]);
		if (rc < 0)
			fplog(&p->sv->log, FPLOG_WARNING, NULL, "could not delete superseded blob %s: %s",
			      p->release[i], strerror(-rc));
	}
	free(keep);
	p->nrelease = 0;
}

int persist_budget(const struct persist *p, size_t len)
{
	return budget_check(p, len);
}

int persist_checkpoint_stored(struct persist *p, struct task *t, const char *hex)
{
	return persist_checkpoint_rec(p, t, t->checkpoint, t->checkpoint_len, t->checkpoint_seq,
	                              t->updated_ms, hex, NULL);
}

/* Why one function for the live checkpoint: the blob (stored by now), the record, the change
 * to the task (task_apply) and the release of the blob it replaces must stay in this order
 * whichever path stored the bytes (inline, or on the worker pool, ckpt.c). */
int persist_checkpoint_rec(struct persist *p, struct task *t, const void *data, size_t len, int64_t seq,
                           int64_t at, const char *hex, void *owned)
{
	char old[BLOB_HEX_LEN + 1], blob[BLOB_HEX_LEN + 1] = "", err[256];
	memcpy(old, t->checkpoint_blob, sizeof old);
	int rc = 0;
	if (hex)
		snprintf(blob, sizeof blob, "%s", hex);
	else if (len > PERSIST_INLINE_CHECKPOINT)
		rc = persist_blob_put(p, data, len, blob);
	struct store_rec r;
	rec_init(&r, STORE_REC_CHECKPOINT, t, at);
	r.u.checkpoint.seq = seq;
	r.u.checkpoint.ckpt.data = data;
	r.u.checkpoint.ckpt.len = len;
	r.u.checkpoint.ckpt.has_data = 1;
	r.u.checkpoint.ckpt.blob = blob[0] ? blob : NULL;
	r.u.checkpoint.ckpt.owned = owned;
	if (rc == 0)
		rc = persist_record(p, t, &r);
	if (rc == 0)
		rc = task_apply(t, &r, err, sizeof err);   /* takes owned */
	else
		free(owned);
	/* Only a record in the batch can supersede the old one. */
	if (rc == 0 && old[0] && strcmp(old, blob) != 0)
		persist_release_blob(p, old);
	return rc;
}

int persist_checkpoint(struct persist *p, struct task *t)
{
	char old[BLOB_HEX_LEN + 1];
	memcpy(old, t->checkpoint_blob, sizeof old);
	t->checkpoint_blob[0] = 0;
	if (t->checkpoint_len > PERSIST_INLINE_CHECKPOINT) {
		int rc = persist_blob_put(p, t->checkpoint, t->checkpoint_len, t->checkpoint_blob);
		if (rc < 0)
			return rc;
	}
	struct store_rec r;
	rec_init(&r, STORE_REC_CHECKPOINT, t, t->updated_ms);
	r.u.checkpoint.seq = t->checkpoint_seq;
	r.u.checkpoint.ckpt.blob = t->checkpoint_blob[0] ? t->checkpoint_blob : NULL;
	r.u.checkpoint.ckpt.data = t->checkpoint;
	r.u.checkpoint.ckpt.len = t->checkpoint_len;
	r.u.checkpoint.ckpt.has_data = 1;
	int rc = persist_record(p, t, &r);
	/* Only a record in the batch can supersede the old one. */
	if (rc == 0 && old[0] && strcmp(old, t->checkpoint_blob) != 0)
		persist_release_blob(p, old);
	return rc;
}

int persist_asked(struct persist *p, struct task *t)
{
	struct store_rec r;
	struct texts tx = { .n = 0 };
	rec_init(&r, STORE_REC_ASK, t, t->updated_ms);
	r.u.ask.qid = t->question_id;
	r.u.ask.prompt = t->question_prompt;
	int rc = text_of(&tx, t->question_choices, &r.u.ask.choices);
	if (rc == 0)
		rc = persist_record(p, t, &r);
	texts_free(&tx);
	return rc;
}

int persist_answered(struct persist *p, struct task *t, const char *qid, const cJSON *response)
{
	struct store_rec r;
	struct texts tx = { .n = 0 };
	rec_init(&r, STORE_REC_ANSWER, t, loop_wall_ms());
	r.u.answer.qid = qid;
	int rc = text_of(&tx, response, &r.u.answer.response);
	if (rc == 0)
		rc = persist_record(p, t, &r);
	texts_free(&tx);
	return rc;
}

int persist_store_result(struct persist *p, struct task *t, const char *text, size_t len)
{
	int rc = persist_blob_put(p, text, len, t->result_blob);
	if (rc < 0)
		return rc;
	t->result_bytes = len;
	t->result_lost = 0;
	return 0;
}

int persist_result_rec(struct persist *p, const cJSON *result, const struct task *t, char **text,
                       char hex[65], struct store_result *out)
{
	memset(out, 0, sizeof *out);
	*text = NULL;
	hex[0] = 0;
	if (!result && t->result_blob[0]) {
		out->blob = t->result_blob;
		out->bytes = (int64_t)t->result_bytes;
		out->summary = t->result_summary ? t->result_summary : "a JSON value";
		return 0;
	}
	int rc = task_json_text(result, text);
	if (rc < 0 || !*text)
		return rc;
	size_t n = strlen(*text);
	out->text = *text;
	/* Without a config (ops commands, tests), the config's default applies. */
	long inline_max = p->sv->cfg ? p->sv->cfg->server.result_inline_bytes : 64L << 10;
	if ((long)n > inline_max) {
		if ((rc = blobs_put(p->blobs, *text, n, hex, NULL)) < 0)
			return rc;
		out->blob = hex;
		out->bytes = (int64_t)n;
		out->summary = t->result_summary ? t->result_summary : "a JSON value";
		out->text = NULL;
	}
	return 0;
}

int persist_finished(struct persist *p, struct task *t)
{
	struct store_rec r;
	struct texts tx = { .n = 0 };
	char *text = NULL, hex[BLOB_HEX_LEN + 1] = "";
	rec_init(&r, STORE_REC_FINISH, t, t->finished_ms);
	r.u.finish.status = task_status_name(t->status);
	r.u.finish.expires = t->expires_ms;
	int rc = persist_result_rec(p, t->result, t, &text, hex, &r.u.finish.result);
	r.u.finish.result.mcp = t->result_is_mcp;
	if (rc == 0)
		rc = text_of(&tx, t->artifacts, &r.u.finish.artifacts);
	if (rc == 0)
		rc = text_of(&tx, t->error, &r.u.finish.error);
	if (rc == 0)
		rc = persist_record(p, t, &r);
	if (rc == 0 && hex[0]) {
		memcpy(t->result_blob, hex, sizeof hex);
		t->result_bytes = (uint64_t)r.u.finish.result.bytes;
	}
	texts_free(&tx);
	free(text);
	/* A finished task never resumes: its checkpoint goes once the outcome is durable. */
	if (rc == 0 && t->checkpoint_blob[0]) {
		persist_release_blob(p, t->checkpoint_blob);
		t->checkpoint_blob[0] = 0;
	}
	if (rc == 0) {
		free(t->checkpoint);
		t->checkpoint = NULL;
		t->checkpoint_len = 0;
	}
	return rc;
}

int persist_retry(struct persist *p, struct task *t)
{
	struct store_rec r;
	rec_init(&r, STORE_REC_RETRY, t, t->updated_ms);
	r.u.retry.retries = t->retries_used;
	r.u.retry.not_before = t->not_before;
	r.u.retry.msg = t->progress_msg;
	return persist_record(p, t, &r);
}

int persist_expired(struct persist *p, const char *id, int64_t until)
{
	struct store_rec r = { .type = STORE_REC_EXPIRE };
	snprintf(r.task_id, sizeof r.task_id, "%s", id);
	r.u.expire.until = until;
	return persist_record(p, NULL, &r);
}

void persist_release(struct persist *p, const struct task *t)
{
	if (t->checkpoint_blob[0])
		persist_release_blob(p, t->checkpoint_blob);
	if (t->result_blob[0])
		persist_release_blob(p, t->result_blob);
}

/* The answers of t for a snapshot record: an array (*out, newest first) whose responses are
 * JSON texts.  s->nanswers counts the filled ones, also on failure (-ENOMEM). */
static int snap_answers(const struct task *t, struct store_task *s, struct store_answer **out)
{
	size_t n = 0, i = 0;
	*out = NULL;
	for (const struct task_answer *a = t->answers; a; a = a->next)
		n++;
	if (!n)
		return 0;
	struct store_answer *v = calloc(n, sizeof *v);
	if (!v)
		return -ENOMEM;
	*out = v;
	s->answers = v;
	for (const struct task_answer *a = t->answers; a; a = a->next, i++) {
		char *text;
		s->nanswers = i;
		if (task_json_text(a->response, &text) < 0)
			return -ENOMEM;
		v[i].qid = a->question_id;
		v[i].response = text;
	}
	s->nanswers = n;
	return 0;
}

static void snap_answers_free(struct store_task *s, struct store_answer *v)
{
	for (size_t i = 0; v && i < s->nanswers; i++)
		free((char *)v[i].response);
	free(v);
}

/* A whole task, for snapshots.  A failure is the compaction's, reported once by its caller:
 * logging it here would print one line per task. */
static int snap_task(struct persist *p, struct task *t)
{
	struct store_rec r;
	struct texts tx = { .n = 0 };
	char *text = NULL, hex[BLOB_HEX_LEN + 1] = "";
	struct store_answer *ans = NULL;
	int rc = 0;
	rec_init(&r, STORE_REC_SNAP_TASK, t, 0);
	struct store_task *s = &r.u.snap;
	if (TASK_TERMINAL(t->status))
		rc = persist_result_rec(p, t->result, t, &text, hex, &s->result);
	s->result.mcp = t->result_is_mcp;
	if (rc == 0 && (rc = text_of(&tx, t->sandbox, &s->sandbox)) == 0 &&
	    (rc = text_of(&tx, t->artifacts, &s->artifacts)) == 0 &&
	    (rc = text_of(&tx, t->args, &s->args)) == 0)
		rc = text_of(&tx, t->error, &s->error);
	if (rc == 0 && t->question_id) {
		s->has_question = 1;
		s->qid = t->question_id;
		s->prompt = t->question_prompt;
		rc = text_of(&tx, t->question_choices, &s->choices);
	}
	if (rc == 0)
		rc = snap_answers(t, s, &ans);
	if (rc < 0)
		goto out;
	s->tool = t->tool_name;
	s->status = task_status_name(t->status);
	s->attempt = t->attempt;
	s->retries = t->retries_used;
	s->running = t->job != NULL || t->was_running;
	s->not_before = t->not_before;
	s->created = t->created_ms;
	s->updated = t->updated_ms;
	s->started = t->started_ms;
	s->finished = t->finished_ms;
	s->expires = t->expires_ms;
	s->msg = t->progress_msg;
	s->fraction = t->fraction;
	s->has_fraction = 1;
	if (t->checkpoint && t->checkpoint_blob[0]) {
		s->ckpt.blob = t->checkpoint_blob;
	} else if (t->checkpoint) {
		s->ckpt.has_data = 1;
		s->ckpt.data = t->checkpoint;
		s->ckpt.len = t->checkpoint_len;
	}
	s->seq = t->checkpoint_seq;
	rc = store_append(p->s, &r);
	if (rc == 0 && hex[0]) {
		memcpy(t->result_blob, hex, sizeof hex);
		t->result_bytes = (uint64_t)s->result.bytes;
	}
out:
	snap_answers_free(s, ans);
	texts_free(&tx);
	free(text);
	return rc;
}

/* ---- commit and compaction -------------------------------------------------------------------- */

int persist_commit(struct persist *p)
{
	if (p->read_only)
		return 0;
	int64_t now = loop_now();
	if (p->ndirty && (store_pending(p->s) > 0 || now - p->last_progress_flush >= PROGRESS_FLUSH_MS)) {
		for (size_t i = 0; i < p->ndirty; i++) {
			struct task *t = tasks_find(p->sv->tasks, p->dirty[i]);
			if (t && t->progress_dirty) {
				t->progress_dirty = 0;
				if (!TASK_TERMINAL(t->status))
					write_progress(p, t);
			}
		}
		p->ndirty = 0;
		p->last_progress_flush = now;
	}
	if (store_pending(p->s) == 0) {
		p->durable_gen = p->gen;
		p->fault = 0;
		return 0;
	}
	int rc = store_commit(p->s);
	if (rc == 0) {
		p->durable_gen = p->gen;
		release_blobs(p);
	}
	/* A compaction's -EBUSY is the journal's own business, not a storage fault. */
	if (rc != -EBUSY)
		p->fault = rc;
	return rc;
}

size_t persist_pending(const struct persist *p)
{
	return p->read_only ? 0 : store_pending(p->s);
}

uint64_t persist_records_replayed(const struct persist *p)
{
	struct store_stats st;
	store_stats(p->s, &st);
	return st.records_replayed;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

struct snapctx {
	struct persist *p;
	int rc;
};

static void snap_tomb(void *arg, const char *id, int64_t until)
{
	struct snapctx *c = arg;
	if (c->rc < 0)
		return;
	struct store_rec r = { .type = STORE_REC_SNAP_TOMB };
	snprintf(r.task_id, sizeof r.task_id, "%s", id);
	r.u.expire.until = until;
	c->rc = store_append(c->p->s, &r);
}

/* One compaction attempt; logs success only (failures are the caller's to report). */
static int compact_once(struct persist *p)
{
	int rc = persist_commit(p);
	if (rc < 0)
		return rc;
	rc = store_snapshot_begin(p->s);
	if (rc < 0)
		return rc;
	/* Oldest first, so a replay rebuilds the list in the same order cheaply. */
	struct task *last = tasks_newest(p->sv->tasks);
	while (last && last->next)
		last = last->next;
	size_t nblobs = 0, cap = 0;
	const char **keep = NULL;
	for (struct task *t = last; t; t = t->prev) {
		if ((rc = snap_task(p, t)) < 0)
			break;
		if (nblobs + 2 > cap) {
			cap = cap ? cap * 2 : 256;
			const char **k = realloc(keep, cap * sizeof *k);
			if (!k) {
				rc = -ENOMEM;
				break;
			}
			keep = k;
		}
		if (t->checkpoint_blob[0])
			keep[nblobs++] = t->checkpoint_blob;
		if (t->result_blob[0])
			keep[nblobs++] = t->result_blob;
	}
	struct snapctx c = { p, 0 };
	if (rc == 0) {
		tasks_tombstone_each(p->sv->tasks, snap_tomb, &c);
		rc = c.rc;
	}
	if (rc == 0 && p->sv->transfers)
		rc = transfer_snapshot(p->sv->transfers);
	if (rc == 0)
		rc = store_snapshot_end(p->s);
	else
		store_snapshot_abort(p->s);   /* the old segments stay authoritative; commits resume */
	if (rc == 0) {
		size_t removed = 0;
		if (nblobs)
			qsort(keep, nblobs, sizeof *keep, cmp_str);
		blobs_gc(p->blobs, keep, nblobs, &removed);
		struct store_stats st;
		store_stats(p->s, &st);
		p->snapshot_bytes = st.total_bytes;
		fplog(&p->sv->log, FPLOG_INFO, NULL, "journal compacted: %zu tasks, %llu bytes, %zu blobs collected",
		      tasks_count(p->sv->tasks), (unsigned long long)p->snapshot_bytes, removed);
	}
	free(keep);
	return rc;
}

/* Why a backoff: a compaction rewrites the whole live state, so retrying a failing one (full
 * disk, I/O error) on every loop turn would cost every request that much and flood the log.
 * The first failure of an episode is logged with its cause, later ones only at debug level;
 * the first success after them says how many failed. */
int persist_compact(struct persist *p)
{
	int rc = compact_once(p);
	if (rc == 0) {
		if (p->compact_failures > 0)
			fplog(&p->sv->log, FPLOG_NOTICE, NULL, "journal compaction works again (after %u failed attempts)",
			      p->compact_failures);
		p->compact_failures = 0;
		p->compact_backoff = 0;
		p->compact_next = 0;
		return 0;
	}
	p->compact_backoff = p->compact_backoff ? p->compact_backoff * 2 : COMPACT_BACKOFF_MS;
	if (p->compact_backoff > COMPACT_BACKOFF_MAX_MS)
		p->compact_backoff = COMPACT_BACKOFF_MAX_MS;
	p->compact_next = loop_now() + p->compact_backoff;
	fplog(&p->sv->log, p->compact_failures ? FPLOG_DEBUG : FPLOG_ERROR, NULL,
	      "journal compaction failed: %s; retrying with backoff (next in %lld ms, at most every %d s)",
	      strerror(-rc), (long long)p->compact_backoff, COMPACT_BACKOFF_MAX_MS / 1000);
	p->compact_failures++;
	return rc;
}

int persist_maybe_compact(struct persist *p)
{
	if (p->read_only)
		return 0;
	struct store_stats st;
	store_stats(p->s, &st);
	uint64_t total = st.total_bytes;
	if (total < p->compact_min + 2 * p->snapshot_bytes)
		return 0;
	if (p->compact_next && loop_now() < p->compact_next)
		return 0;
	return persist_compact(p);
}

/* ---- replay --------------------------------------------------------------------------------- */

struct replay {
	struct persist *p;
	persist_tap tap;
	void *tap_arg;
};

const char *persist_type_name(int type)
{
	return store_rec_type_name(type);
}

/* t fails with task_lost: a blob its record names is missing or damaged.  The change goes
 * through task_apply like any other; it is not appended (the next commit of the task records
 * it, and a replay reaches the same verdict from the same missing blob). */
static void mark_lost(struct persist *p, struct task *t, const char *blob)
{
	char *etext = NULL, err[256];
	cJSON *e = task_envelope("task_lost", "The task's stored checkpoint is missing or damaged.",
	                         0, "Call the tool again; `forkpoint fsck` reports what is damaged.");
	if (e)
		cJSON_AddStringToObject(e, "blob", blob);
	struct store_rec r;
	rec_init(&r, STORE_REC_FINISH, t, t->updated_ms);
	r.u.finish.status = task_status_name(TASK_FAILED);
	r.u.finish.expires = t->updated_ms + 86400000;
	r.u.finish.artifacts = NULL;
	cJSON *art = t->artifacts;
	int rc = task_json_text(e, &etext);
	char *atext = NULL;
	if (rc == 0)
		rc = task_json_text(art, &atext);
	r.u.finish.error = etext;
	r.u.finish.artifacts = atext;
	if (rc == 0)
		rc = task_apply(t, &r, err, sizeof err);
	if (rc < 0)
		fplog(&p->sv->log, FPLOG_ERROR, t->id, "could not mark the task lost: %s", strerror(-rc));
	free(etext);
	free(atext);
	cJSON_Delete(e);
}

/* After replay: read the checkpoint of every task that may run again, and check that every
 * result blob is there with its recorded size (its content is verified when it is read).  A
 * missing or damaged blob is said on the task, whose record is kept. */
static void load_blobs(struct persist *p)
{
	for (struct task *t = tasks_newest(p->sv->tasks); t; t = t->next) {
		if (t->result_blob[0]) {
			uint64_t size = 0;
			int rc = blobs_size(p->blobs, t->result_blob, &size);
			if (rc == 0 && t->result_bytes == 0)
				t->result_bytes = size;   /* a record from before sizes were kept */
			if (rc < 0 || size != t->result_bytes) {
				t->result_lost = 1;
				/* "<kind> blob <sha256>: <reason>", as `forkpoint fsck` names it. */
				fplog(&p->sv->log, FPLOG_ERROR, t->id, "result blob %s: %s", t->result_blob,
				      rc < 0 ? strerror(-rc) : "damaged (its size is not the recorded one)");
			}
		}
		if (TASK_TERMINAL(t->status))
			t->checkpoint_blob[0] = 0;   /* never needed again: compaction collects it */
		if (!t->checkpoint_blob[0] || t->checkpoint)
			continue;
		void *d;
		size_t len;
		int rc = blobs_get(p->blobs, t->checkpoint_blob, &d, &len);
		if (rc == 0) {
			t->checkpoint = d;
			t->checkpoint_len = len;
			continue;
		}
		fplog(&p->sv->log, FPLOG_ERROR, t->id, "checkpoint blob %s: %s", t->checkpoint_blob,
		      rc == -EBADMSG ? "content does not match its sha256" : strerror(-rc));
		char blob[BLOB_HEX_LEN + 1];
		memcpy(blob, t->checkpoint_blob, sizeof blob);
		mark_lost(p, t, blob);
	}
}

/* A file transfer record: the transfers' business (without a transfers table, as in ops
 * commands, only the part that changes tasks). */
static int replay_ext(struct persist *p, const struct store_rec *r, char *err, size_t errlen)
{
	return p->sv->transfers ? transfer_replay(p->sv->transfers, (int)r->type, &r->u.xfer, err, errlen)
	                        : transfer_replay_tasks(p->sv, (int)r->type, &r->u.xfer);
}

/* A record that makes a task: it must be new, and complete (task_apply says). */
static int replay_create(struct persist *p, const struct store_rec *r, char *err, size_t errlen)
{
	struct tasks *ts = p->sv->tasks;
	if (tasks_find(ts, r->task_id)) {
		snprintf(err, errlen, "task %s created twice", r->task_id);
		return -1;
	}
	struct task *t = task_alloc(r->task_id);
	if (!t)
		return -1;
	if (task_apply(t, r, err, errlen) < 0 || tasks_insert(ts, t) < 0) {
		task_free(t);
		return -1;
	}
	return 0;
}

/* Why the table-level cases live here and not in task_apply: creating, expiring and naming
 * the task a record is about are the table's business; what a record does to a task is
 * task_apply's, the same as on the live path. */
static int replay_cb(void *arg, const struct store_rec *r, char *err, size_t errlen)
{
	struct replay *rp = arg;
	struct persist *p = rp->p;
	struct tasks *ts = p->sv->tasks;
	if (STORE_REC_IS_EXT(r->type))
		return replay_ext(p, r, err, errlen);
	if (rp->tap)
		rp->tap(rp->tap_arg, r);
	struct task *t = tasks_find(ts, r->task_id);
	if (r->type == STORE_REC_SNAP_TOMB || r->type == STORE_REC_EXPIRE) {
		if (t)
			tasks_remove(ts, t);
		tasks_tombstone_add(ts, r->task_id, r->u.expire.until);
		return 0;
	}
	if (r->type == STORE_REC_CREATE || r->type == STORE_REC_SNAP_TASK)
		return replay_create(p, r, err, errlen);
	if (!t) {
		snprintf(err, errlen, "record of type %u for unknown task %s", (unsigned)r->type, r->task_id);
		return -1;
	}
	return task_apply(t, r, err, errlen) < 0 ? -1 : 0;
}

/* The store passes the record callback's argument to the log callback too. */
static void journal_log(void *arg, const char *msg)
{
	struct replay *rp = arg;
	fplog(&rp->p->sv->log, FPLOG_WARNING, NULL, "journal: %s", msg);
}

int persist_open(struct supervisor *sv, int read_only, struct persist **out, char *err, size_t errlen)
{
	return persist_open_tap(sv, read_only, NULL, NULL, out, err, errlen);
}

int persist_open_tap(struct supervisor *sv, int read_only, persist_tap tap, void *tap_arg,
                     struct persist **out, char *err, size_t errlen)
{
	/* ls/show/fsck may run without a config: the journal's defaults then apply. */
	struct journal_opts o = { .read_only = read_only };
	if (sv->cfg)
		o.segment_bytes = (uint64_t)sv->cfg->server.journal_segment_bytes;
	struct store *s;
	int rc = store_journal_new(sv->state_dir, &o, &s);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	return persist_open_store(sv, s, read_only, tap, tap_arg, out, err, errlen);
}

int persist_open_store(struct supervisor *sv, struct store *s, int read_only, persist_tap tap,
                       void *tap_arg, struct persist **out, char *err, size_t errlen)
{
	struct persist *p = calloc(1, sizeof *p);
	if (!p) {
		store_close(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->sv = sv;
	p->s = s;
	p->read_only = read_only;
	p->compact_min = sv->cfg ? (uint64_t)sv->cfg->server.compact_min_bytes : COMPACT_MIN_BYTES;
	/* Blobs live beside the journal in the state dir; without one (unit tests) in memory. */
	int rc = sv->state_dir ? blob_fs_new(sv->state_dir, read_only, &p->blobs) : blob_mem_new(&p->blobs);
	if (rc < 0) {
		store_close(s);
		free(p);
		snprintf(err, errlen, "cannot open the blob store: %s", strerror(-rc));
		return rc;
	}
	struct replay rp = { .p = p, .tap = tap, .tap_arg = tap_arg };
	rc = store_replay(s, replay_cb, journal_log, &rp, err, errlen);
	if (rc < 0) {
		store_close(s);
		blobs_close(p->blobs);
		free(p);
		return rc;
	}
	/* Relative to the snapshot the journal starts from, not to everything replayed: otherwise
	 * each restart would raise the threshold and the journal would grow without bound. */
	struct store_stats st;
	store_stats(s, &st);
	p->snapshot_bytes = st.snapshot_bytes;
	p->last_progress_flush = loop_now();
	if (!read_only && sv->state_dir) {
		struct blob_stats bst;
		load_blobs(p);
		blobs_stats(p->blobs, &bst);
		if (bst.count_err < 0)
			fplog(&sv->log, FPLOG_WARNING, NULL, "cannot count the blob store's bytes: %s",
			      strerror(-bst.count_err));
	}
	*out = p;
	return 0;
}

void persist_close(struct persist *p)
{
	if (!p)
		return;
	if (p->progress_timer)
		loop_timer_cancel(p->sv->loop, p->progress_timer);
	store_close(p->s);
	blobs_close(p->blobs);
	free(p->dirty);
	free(p->release);
	free(p);
}
