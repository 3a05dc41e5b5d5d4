/* supervisor/persist.c — see persist.h. */
#include "supervisor/core/persist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/blob.h"
#include "proto/frame.h"
#include "state/journal.h"
#include "supervisor/core/transfer.h"

#define INLINE_CHECKPOINT  PERSIST_INLINE_CHECKPOINT   /* larger ones go to the blob store */
#define PROGRESS_FLUSH_MS  2000           /* progress alone is written at most this often */
#define COMPACT_MIN_BYTES  (8ull << 20)
#define COMPACT_BACKOFF_MS     1000       /* first retry after a failed compaction ... */
#define COMPACT_BACKOFF_MAX_MS 300000     /* ... doubling up to this */

struct persist {
	struct supervisor *sv;
	struct journal *j;
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
	struct blob_store blobs;
	char (*release)[BLOB_HEX_LEN + 1];    /* superseded blobs, deleted after the next commit */
	size_t nrelease, caprelease;
	uint64_t compact_min;                 /* server.compactMinBytes */
};

/* ---- encoding ------------------------------------------------------------------------------ */

static void kv_str(struct frame_map *r, const char *k, const char *v)
{
	frame_pack_kv_str(&r->pk, k, v ? v : "");
}

static void kv_int(struct frame_map *r, const char *k, int64_t v)
{
	frame_pack_kv_int(&r->pk, k, v);
}

/* JSON values travel as JSON text (see persist.h). */
static void kv_json(struct frame_map *r, const char *k, const cJSON *v)
{
	char *s = v ? cJSON_PrintUnformatted(v) : NULL;
	frame_pack_kv_str(&r->pk, k, s ? s : "null");
	free(s);
}

static void kv_bin(struct frame_map *r, const char *k, const void *p, size_t n)
{
	frame_pack_str(&r->pk, k);
	msgpack_pack_bin(&r->pk, n);
	msgpack_pack_bin_body(&r->pk, p, n);
}

static void kv_double(struct frame_map *r, const char *k, double v)
{
	frame_pack_kv_double(&r->pk, k, v);
}

/* Append the record built in r (and free it).  The caller acts on the result: a record that
 * could not be appended is a promise that must not be made, so the change it describes is not
 * made either.  A successful append marks the task (when there is one) as depending on the
 * next commit, for persist_task_durable(). */
static int rec_end(struct persist *p, struct frame_map *r, uint8_t type, struct task *t)
{
	int rc = p->read_only ? -EROFS : journal_append(p->j, type, r->sb.data, r->sb.size);
	if (rc < 0) {
		fplog(&p->sv->log, FPLOG_ERROR, t ? t->id : NULL, "journal append of a %s record (%zu bytes) failed: %s",
		      persist_type_name(type), (size_t)r->sb.size, strerror(-rc));
	} else {
		p->gen++;
		if (t)
			t->journal_gen = p->gen;
	}
	msgpack_sbuffer_destroy(&r->sb);
	return rc;
}

int persist_append(struct persist *p, uint8_t type, const void *payload, size_t len)
{
	if (p->read_only)
		return -EROFS;
	if (type < REC_EXT_FIRST || type > REC_EXT_LAST)
		return -EINVAL;
	int rc = journal_append(p->j, type, payload, len);
	if (rc == 0)
		p->gen++;
	return rc;
}

int persist_fault(const struct persist *p)
{
	return p && !p->read_only ? p->fault : 0;
}

int persist_task_durable(const struct persist *p, const struct task *t)
{
	return !p || p->read_only || t->journal_gen <= p->durable_gen;
}

int persist_created(struct persist *p, struct task *t)
{
	struct frame_map r;
	frame_map_begin(&r, 4);
	kv_str(&r, "id", t->id);
	kv_str(&r, "tool", t->tool_name);
	kv_json(&r, "args", t->args);
	kv_int(&r, "at", t->created_ms);
	return rec_end(p, &r, REC_CREATE, t);
}

int persist_started(struct persist *p, struct task *t)
{
	struct frame_map r;
	frame_map_begin(&r, 4);
	kv_str(&r, "id", t->id);
	kv_int(&r, "attempt", t->attempt);
	kv_int(&r, "at", t->started_ms);
	kv_json(&r, "sandbox", t->sandbox);   /* the sandbox this attempt really got */
	return rec_end(p, &r, REC_START, t);
}

static void write_progress(struct persist *p, const struct task *t)
{
	struct frame_map r;
	frame_map_begin(&r, 4);
	kv_str(&r, "id", t->id);
	kv_str(&r, "msg", t->progress_msg);
	kv_double(&r, "fraction", t->fraction);
	kv_int(&r, "at", t->updated_ms);
	/* Not a promise: a lost one is harmless, and a read need not wait for it (no task mark). */
	rec_end(p, &r, REC_PROGRESS, NULL);
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
	if (!p->progress_timer)
		p->progress_timer = loop_timer_in(p->sv->loop, PROGRESS_FLUSH_MS, progress_timer_cb, p);
}

uint64_t persist_disk_bytes(const struct persist *p)
{
	return p->blobs.bytes + journal_total_bytes(p->j);
}

struct blob_store *persist_blob_store(struct persist *p)
{
	return &p->blobs;
}

/* -EDQUOT if len more bytes would take the state dir over its budget. */
static int budget_check(const struct persist *p, size_t len)
{
	long mb = p->sv->cfg ? p->sv->cfg->server.state_max_mb : 0;
	if (mb <= 0)
		return 0;
	return persist_disk_bytes(p) + len > (uint64_t)mb << 20 ? -EDQUOT : 0;
}

/* Remember a blob that a newer record no longer needs; persist_commit deletes it. */
static void release_later(struct persist *p, const char *hex)
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
		int rc = keep[i] ? 0 : blob_store_remove(&p->blobs, p->release[i]);
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

static int checkpoint_record(struct persist *p, struct task *t, const char *old);

int persist_checkpoint_stored(struct persist *p, struct task *t, const char *hex)
{
	char old[BLOB_HEX_LEN + 1];
	memcpy(old, t->checkpoint_blob, sizeof old);
	snprintf(t->checkpoint_blob, sizeof t->checkpoint_blob, "%s", hex);
	return checkpoint_record(p, t, old);
}

int persist_checkpoint(struct persist *p, struct task *t)
{
	char old[BLOB_HEX_LEN + 1];
	memcpy(old, t->checkpoint_blob, sizeof old);
	t->checkpoint_blob[0] = 0;
	if (t->checkpoint_len > INLINE_CHECKPOINT) {
		int rc = budget_check(p, t->checkpoint_len);
		if (rc == 0)
			rc = blob_store_put(&p->blobs, t->checkpoint, t->checkpoint_len, t->checkpoint_blob, NULL);
		if (rc < 0) {
			t->checkpoint_blob[0] = 0;
			return rc;
		}
	}
	return checkpoint_record(p, t, old);
}

/* The checkpoint record for t, whose blob (if any) is stored; old is the blob it replaces. */
static int checkpoint_record(struct persist *p, struct task *t, const char *old)
{
	struct frame_map r;
	frame_map_begin(&r, 4);
	kv_str(&r, "id", t->id);
	kv_int(&r, "seq", t->checkpoint_seq);
	if (t->checkpoint_blob[0])
		kv_str(&r, "blob", t->checkpoint_blob);
	else
		kv_bin(&r, "data", t->checkpoint, t->checkpoint_len);
	kv_int(&r, "at", t->updated_ms);
	int rc = rec_end(p, &r, REC_CHECKPOINT, t);
	/* Only a record in the batch can supersede the old one. */
	if (rc == 0 && old[0] && strcmp(old, t->checkpoint_blob) != 0)
		release_later(p, old);
	return rc;
}

int persist_asked(struct persist *p, struct task *t)
{
	struct frame_map r;
	frame_map_begin(&r, 5);
	kv_str(&r, "id", t->id);
	kv_str(&r, "qid", t->question_id);
	kv_str(&r, "prompt", t->question_prompt);
	kv_json(&r, "choices", t->question_choices);
	kv_int(&r, "at", t->updated_ms);
	return rec_end(p, &r, REC_ASK, t);
}

int persist_answered(struct persist *p, struct task *t, const char *qid, const cJSON *response)
{
	struct frame_map r;
	frame_map_begin(&r, 4);
	kv_str(&r, "id", t->id);
	kv_str(&r, "qid", qid);
	kv_json(&r, "response", response);
	kv_int(&r, "at", loop_wall_ms());
	return rec_end(p, &r, REC_ANSWER, t);
}

int persist_store_result(struct persist *p, struct task *t, const char *text, size_t len)
{
	int rc = budget_check(p, len);
	if (rc == 0)
		rc = blob_store_put(&p->blobs, text, len, t->result_blob, NULL);
	if (rc < 0) {
		t->result_blob[0] = 0;
		return rc;
	}
	t->result_bytes = len;
	t->result_lost = 0;
	return 0;
}

/* The result as record text: none, a blob already stored (t->result is then NULL), or
 * t->result printed, stored as a blob when it is large. */
static int result_to_blob(struct persist *p, struct task *t, char **text)
{
	*text = NULL;
	if (!t->result)
		return 0;
	t->result_blob[0] = 0;
	*text = cJSON_PrintUnformatted(t->result);
	if (!*text)
		return -ENOMEM;
	size_t n = strlen(*text);
	if ((long)n > p->sv->cfg->server.result_inline_bytes) {
		int rc = blob_store_put(&p->blobs, *text, n, t->result_blob, NULL);
		if (rc < 0)
			return rc;
		t->result_bytes = n;
	}
	return 0;
}

/* The result fields of FINISH and snapshot records: 3 pairs. */
static void kv_result(struct frame_map *r, const struct task *t, const char *text)
{
	if (t->result_blob[0]) {
		kv_str(r, "resultBlob", t->result_blob);
		kv_int(r, "resultBytes", (int64_t)t->result_bytes);
		kv_str(r, "resultSummary", t->result_summary ? t->result_summary : "a JSON value");
	} else {
		kv_str(r, "result", text ? text : "null");
		frame_pack_str(&r->pk, "resultBytes");
		msgpack_pack_nil(&r->pk);
		frame_pack_str(&r->pk, "resultSummary");
		msgpack_pack_nil(&r->pk);
	}
}

int persist_finished(struct persist *p, struct task *t)
{
	char *text = NULL;
	int rc = result_to_blob(p, t, &text);
	if (rc < 0) {
		free(text);
		return rc;
	}
	struct frame_map r;
	frame_map_begin(&r, 10);
	kv_str(&r, "id", t->id);
	kv_str(&r, "status", task_status_name(t->status));
	kv_json(&r, "artifacts", t->artifacts);
	kv_result(&r, t, text);
	kv_int(&r, "mcp", t->result_is_mcp);
	kv_json(&r, "error", t->error);
	kv_int(&r, "at", t->finished_ms);
	kv_int(&r, "expires", t->expires_ms);
	rc = rec_end(p, &r, REC_FINISH, t);
	free(text);
	/* A finished task never resumes: its checkpoint goes once the outcome is durable. */
	if (rc == 0 && t->checkpoint_blob[0]) {
		release_later(p, t->checkpoint_blob);
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
	struct frame_map r;
	frame_map_begin(&r, 5);
	kv_str(&r, "id", t->id);
	kv_int(&r, "retries", t->retries_used);
	kv_int(&r, "notBefore", t->not_before);
	kv_str(&r, "msg", t->progress_msg);
	kv_int(&r, "at", t->updated_ms);
	return rec_end(p, &r, REC_RETRY, t);
}

int persist_expired(struct persist *p, const char *id, int64_t until)
{
	struct frame_map r;
	frame_map_begin(&r, 2);
	kv_str(&r, "id", id);
	kv_int(&r, "until", until);
	return rec_end(p, &r, REC_EXPIRE, NULL);
}

void persist_release(struct persist *p, const struct task *t)
{
	if (t->checkpoint_blob[0])
		release_later(p, t->checkpoint_blob);
	if (t->result_blob[0])
		release_later(p, t->result_blob);
}

/* A snapshot record.  A failure is the compaction's, reported once by its caller: logging it
 * here would print one line per task. */
static int snap_end(struct persist *p, struct frame_map *r, uint8_t type)
{
	int rc = journal_append(p->j, type, r->sb.data, r->sb.size);
	msgpack_sbuffer_destroy(&r->sb);
	return rc;
}

/* A whole task, for snapshots. */
static int snap_task(struct persist *p, struct task *t)
{
	char *text = NULL;
	int rc = 0;
	if (TASK_TERMINAL(t->status) && (rc = result_to_blob(p, t, &text)) < 0) {
		free(text);
		return rc;
	}
	size_t n = 0;
	for (struct task_answer *a = t->answers; a; a = a->next)
		n++;
	struct frame_map r;
	frame_map_begin(&r, 26);
	kv_json(&r, "sandbox", t->sandbox);
	kv_json(&r, "artifacts", t->artifacts);
	kv_str(&r, "id", t->id);
	kv_str(&r, "tool", t->tool_name);
	kv_json(&r, "args", t->args);
	kv_str(&r, "status", task_status_name(t->status));
	kv_int(&r, "attempt", t->attempt);
	kv_int(&r, "retries", t->retries_used);
	kv_int(&r, "running", t->job != NULL || t->was_running);
	kv_int(&r, "notBefore", t->not_before);
	kv_int(&r, "created", t->created_ms);
	kv_int(&r, "updated", t->updated_ms);
	kv_int(&r, "started", t->started_ms);
	kv_int(&r, "finished", t->finished_ms);
	kv_int(&r, "expires", t->expires_ms);
	kv_str(&r, "msg", t->progress_msg);
	kv_double(&r, "fraction", t->fraction);
	frame_pack_str(&r.pk, "question");
	if (t->question_id) {
		msgpack_pack_map(&r.pk, 3);
		kv_str(&r, "qid", t->question_id);
		kv_str(&r, "prompt", t->question_prompt);
		kv_json(&r, "choices", t->question_choices);
	} else {
		msgpack_pack_nil(&r.pk);
	}
	frame_pack_str(&r.pk, "answers");
	msgpack_pack_array(&r.pk, n);
	for (struct task_answer *a = t->answers; a; a = a->next) {
		msgpack_pack_map(&r.pk, 2);
		kv_str(&r, "qid", a->question_id);
		kv_json(&r, "response", a->response);
	}
	frame_pack_str(&r.pk, "checkpoint");
	if (!t->checkpoint) {
		msgpack_pack_nil(&r.pk);
	} else if (t->checkpoint_blob[0]) {
		frame_pack_str(&r.pk, t->checkpoint_blob);
	} else {
		msgpack_pack_bin(&r.pk, t->checkpoint_len);
		msgpack_pack_bin_body(&r.pk, t->checkpoint, t->checkpoint_len);
	}
	kv_int(&r, "seq", t->checkpoint_seq);
	kv_result(&r, t, text);
	kv_int(&r, "mcp", t->result_is_mcp);
	kv_json(&r, "error", t->error);
	rc = snap_end(p, &r, REC_SNAP_TASK);
	free(text);
	return rc;
}

/* ---- commit and compaction -------------------------------------------------------------------- */

int persist_commit(struct persist *p)
{
	if (p->read_only)
		return 0;
	int64_t now = loop_now();
	if (p->ndirty && (journal_pending_bytes(p->j) > 0 || now - p->last_progress_flush >= PROGRESS_FLUSH_MS)) {
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
	if (journal_pending_bytes(p->j) == 0) {
		p->durable_gen = p->gen;
		p->fault = 0;
		return 0;
	}
	int rc = journal_commit(p->j);
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
	return p->read_only ? 0 : journal_pending_bytes(p->j);
}

uint64_t persist_records_replayed(const struct persist *p)
{
	return journal_records_replayed(p->j);
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
	struct frame_map r;
	if (c->rc < 0)
		return;
	frame_map_begin(&r, 2);
	kv_str(&r, "id", id);
	kv_int(&r, "until", until);
	c->rc = snap_end(c->p, &r, REC_SNAP_TOMB);
}

/* One compaction attempt; logs success only (failures are the caller's to report). */
static int compact_once(struct persist *p)
{
	int rc = persist_commit(p);
	if (rc < 0)
		return rc;
	rc = journal_rewrite_begin(p->j);
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
		rc = journal_rewrite_end(p->j);
	else
		journal_rewrite_abort(p->j);   /* the old segments stay authoritative; commits resume */
	if (rc == 0) {
		size_t removed = 0;
		if (nblobs)
			qsort(keep, nblobs, sizeof *keep, cmp_str);
		blob_store_gc(&p->blobs, keep, nblobs, &removed);
		p->snapshot_bytes = journal_total_bytes(p->j);
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
	uint64_t total = journal_total_bytes(p->j);
	if (total < p->compact_min + 2 * p->snapshot_bytes)
		return 0;
	if (p->compact_next && loop_now() < p->compact_next)
		return 0;
	return persist_compact(p);
}

/* ---- replay --------------------------------------------------------------------------------- */

struct replay {
	struct persist *p;
	char *err;
	size_t errlen;
	persist_tap tap;
	void *tap_arg;
};

const char *persist_type_name(int type)
{
	switch (type) {
	case REC_CREATE: return "created";
	case REC_START: return "started";
	case REC_PROGRESS: return "progress";
	case REC_CHECKPOINT: return "checkpoint";
	case REC_ASK: return "asked";
	case REC_ANSWER: return "answered";
	case REC_FINISH: return "finished";
	case REC_RETRY: return "retry";
	case REC_EXPIRE: return "expired";
	case REC_SNAP_TASK: return "snapshot";
	case REC_SNAP_TOMB: return "tombstone";
	default: return "unknown";
	}
}

/* A JSON-text field parsed back; NULL for "null" or absent. */
static cJSON *get_json(const msgpack_object *m, const char *k, int *bad)
{
	const char *s;
	size_t n;
	if (frame_get_str(m, k, &s, &n) < 0)
		return NULL;
	cJSON *v = cJSON_ParseWithLength(s, n);
	if (!v) {
		*bad = 1;
		return NULL;
	}
	if (cJSON_IsNull(v)) {
		cJSON_Delete(v);
		return NULL;
	}
	return v;
}

static int64_t get_i(const msgpack_object *m, const char *k)
{
	int64_t v = 0;
	frame_get_int(m, k, &v);
	return v;
}

/* A progress message; an empty one means none. */
static char *get_progress_msg(const msgpack_object *m)
{
	char *s = frame_get_strdup(m, "msg");
	if (s && !s[0]) {
		free(s);
		s = NULL;
	}
	return s;
}

/* t's pending question from m ({qid, prompt, choices}). */
static void set_question(struct task *t, const msgpack_object *m, int *bad)
{
	task_clear_question(t);
	t->question_id = frame_get_strdup(m, "qid");
	t->question_prompt = frame_get_strdup(m, "prompt");
	t->question_choices = get_json(m, "choices", bad);
}

/* Put the answer in m ({qid, response}) in front of t's answers.  0 or -1 (out of memory). */
static int add_answer(struct task *t, const msgpack_object *m, int *bad)
{
	struct task_answer *a = calloc(1, sizeof *a);
	if (!a)
		return -1;
	a->question_id = frame_get_strdup(m, "qid");
	a->response = get_json(m, "response", bad);
	if (!a->response)
		a->response = cJSON_CreateNull();
	a->next = t->answers;
	t->answers = a;
	return 0;
}

static int load_checkpoint(struct persist *p, struct task *t, const msgpack_object *m, const char *binkey,
                           const char *blobkey)
{
	const void *data;
	size_t len;
	free(t->checkpoint);
	t->checkpoint = NULL;
	t->checkpoint_len = 0;
	t->checkpoint_blob[0] = 0;
	const msgpack_object *o = frame_get(m, binkey);
	if (o && o->type == MSGPACK_OBJECT_BIN && frame_get_bin(m, binkey, &data, &len) == 0) {
		t->checkpoint = malloc(len ? len : 1);
		if (!t->checkpoint)
			return -ENOMEM;
		memcpy(t->checkpoint, data, len);
		t->checkpoint_len = len;
		return 0;
	}
	char *hex = NULL;
	if (blobkey)
		hex = frame_get_strdup(m, blobkey);
	else if (o && o->type == MSGPACK_OBJECT_STR)
		hex = frame_get_strdup(m, binkey);
	if (!hex)
		return 0;
	snprintf(t->checkpoint_blob, sizeof t->checkpoint_blob, "%s", hex);
	free(hex);
	(void)p;
	/* Only the name: a later record may supersede this one, and its blob may then have been
	 * deleted already.  load_blobs() reads the last one once replay is over. */
	return 0;
}

/* A result in a blob stays there: the task keeps its name, size and summary, and the text
 * is read when a client asks for it (a restart never loads or parses it). */
static int load_result(struct persist *p, struct task *t, const msgpack_object *m, int *bad)
{
	char *hex = frame_get_strdup(m, "resultBlob");
	cJSON_Delete(t->result);
	t->result = NULL;
	free(t->result_summary);
	t->result_summary = NULL;
	t->result_blob[0] = 0;
	t->result_bytes = 0;
	(void)p;
	if (hex) {
		snprintf(t->result_blob, sizeof t->result_blob, "%s", hex);
		free(hex);
		int64_t n = get_i(m, "resultBytes");
		t->result_bytes = n > 0 ? (uint64_t)n : 0;
		t->result_summary = frame_get_strdup(m, "resultSummary");
	} else {
		t->result = get_json(m, "result", bad);
	}
	t->result_is_mcp = get_i(m, "mcp") != 0;
	return 0;
}

/* After replay: read the checkpoint of every task that may run again, and check that every
 * result blob is there with its recorded size (its content is verified when it is read).  A
 * missing or damaged blob is said on the task, whose record is kept. */
static void load_blobs(struct persist *p)
{
	for (struct task *t = tasks_newest(p->sv->tasks); t; t = t->next) {
		if (t->result_blob[0]) {
			uint64_t size = 0;
			int rc = blob_size(p->sv->state_dir, t->result_blob, &size);
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
		int rc = blob_get(p->sv->state_dir, t->checkpoint_blob, &d, &len);
		if (rc == 0) {
			t->checkpoint = d;
			t->checkpoint_len = len;
			continue;
		}
		fplog(&p->sv->log, FPLOG_ERROR, t->id, "checkpoint blob %s: %s", t->checkpoint_blob,
		      rc == -EBADMSG ? "content does not match its sha256" : strerror(-rc));
		t->status = TASK_FAILED;
		cJSON_Delete(t->error);
		t->error = task_envelope("task_lost", "The task's stored checkpoint is missing or damaged.",
		                         0, "Call the tool again; `forkpoint fsck` reports what is damaged.");
		if (t->error)
			cJSON_AddStringToObject(t->error, "blob", t->checkpoint_blob);
		t->finished_ms = t->updated_ms;
		t->expires_ms = t->finished_ms + 86400000;
		t->was_running = 0;
	}
}

static int apply(struct replay *rp, uint8_t type, const msgpack_object *m)
{
	struct persist *p = rp->p;
	struct tasks *ts = p->sv->tasks;
	char id[33];
	const char *s;
	size_t n;
	int bad = 0, rc = 0, result = 0;
	if (frame_get_str(m, "id", &s, &n) < 0 || n != 32) {
		snprintf(rp->err, rp->errlen, "record of type %u has no valid task id", type);
		return -1;
	}
	memcpy(id, s, 32);
	id[32] = 0;
	struct task *t = tasks_find(ts, id);

	if (type == REC_SNAP_TOMB || type == REC_EXPIRE) {
		if (t)
			tasks_remove(ts, t);
		tasks_tombstone_add(ts, id, get_i(m, "until"));
		return 0;
	}
	if (type == REC_CREATE || type == REC_SNAP_TASK) {
		if (t) {
			snprintf(rp->err, rp->errlen, "task %s created twice", id);
			return -1;
		}
		t = task_alloc(id);
		if (!t)
			return -1;
		t->tool_name = frame_get_strdup(m, "tool");
		t->args = get_json(m, "args", &bad);
		if (!t->tool_name || !t->args) {
			task_free(t);
			snprintf(rp->err, rp->errlen, "task %s: record without tool or arguments", id);
			return -1;
		}
		t->created_ms = t->updated_ms = get_i(m, type == REC_CREATE ? "at" : "created");
		if (tasks_insert(ts, t) < 0) {
			task_free(t);
			return -1;
		}
		if (type == REC_CREATE)
			return 0;
		/* A full snapshot of the task. */
		int st = -1;
		char *sts = frame_get_strdup(m, "status");
		st = task_status_parse(sts);
		free(sts);
		if (st < 0) {
			snprintf(rp->err, rp->errlen, "task %s: unknown status", id);
			return -1;
		}
		t->status = (enum task_status)st;
		t->attempt = (int)get_i(m, "attempt");
		t->retries_used = (int)get_i(m, "retries");
		t->was_running = get_i(m, "running") != 0;
		t->not_before = get_i(m, "notBefore");
		t->updated_ms = get_i(m, "updated");
		t->started_ms = get_i(m, "started");
		t->finished_ms = get_i(m, "finished");
		t->expires_ms = get_i(m, "expires");
		t->progress_msg = get_progress_msg(m);
		frame_get_double(m, "fraction", &t->fraction);
		const msgpack_object *q = frame_get(m, "question");
		if (q && q->type == MSGPACK_OBJECT_MAP)
			set_question(t, q, &bad);
		const msgpack_object *ans = frame_get(m, "answers");
		if (ans && ans->type == MSGPACK_OBJECT_ARRAY) {
			for (uint32_t i = ans->via.array.size; i-- > 0;) {
				const msgpack_object *a = &ans->via.array.ptr[i];
				if (add_answer(t, a, &bad) < 0)
					return -1;
			}
		}
		t->sandbox = get_json(m, "sandbox", &bad);
		t->artifacts = get_json(m, "artifacts", &bad);
		if ((rc = load_checkpoint(p, t, m, "checkpoint", NULL)) < 0)
			goto blob_fail;
		t->checkpoint_seq = get_i(m, "seq");
		if (TASK_TERMINAL(t->status)) {
			if ((rc = load_result(p, t, m, &bad)) < 0) {
				result = 1;
				goto blob_fail;
			}
			t->error = get_json(m, "error", &bad);
		}
		goto done;
	}
	if (!t) {
		snprintf(rp->err, rp->errlen, "record of type %u for unknown task %s", type, id);
		return -1;
	}
	switch (type) {
	case REC_START:
		t->attempt = (int)get_i(m, "attempt");
		t->started_ms = t->updated_ms = get_i(m, "at");
		t->was_running = 1;
		t->not_before = 0;
		cJSON_Delete(t->sandbox);
		t->sandbox = get_json(m, "sandbox", &bad);
		break;
	case REC_PROGRESS:
		free(t->progress_msg);
		t->progress_msg = get_progress_msg(m);
		frame_get_double(m, "fraction", &t->fraction);
		t->updated_ms = get_i(m, "at");
		break;
	case REC_CHECKPOINT:
		if ((rc = load_checkpoint(p, t, m, "data", frame_get(m, "blob") ? "blob" : NULL)) < 0)
			goto blob_fail;
		t->checkpoint_seq = get_i(m, "seq");
		t->updated_ms = get_i(m, "at");
		break;
	case REC_ASK:
		set_question(t, m, &bad);
		t->status = TASK_INPUT_REQUIRED;
		t->updated_ms = get_i(m, "at");
		break;
	case REC_ANSWER:
		if (add_answer(t, m, &bad) < 0)
			return -1;
		task_clear_question(t);
		if (t->status == TASK_INPUT_REQUIRED)
			t->status = TASK_WORKING;
		t->updated_ms = get_i(m, "at");
		break;
	case REC_FINISH: {
		char *sts = frame_get_strdup(m, "status");
		int st = task_status_parse(sts);
		free(sts);
		if (st < TASK_COMPLETED) {
			snprintf(rp->err, rp->errlen, "task %s: finish record with a non-terminal status", id);
			return -1;
		}
		t->status = (enum task_status)st;
		if ((rc = load_result(p, t, m, &bad)) < 0) {
			result = 1;
			goto blob_fail;
		}
		cJSON_Delete(t->error);
		t->error = get_json(m, "error", &bad);
		cJSON_Delete(t->artifacts);
		t->artifacts = get_json(m, "artifacts", &bad);
		t->finished_ms = t->updated_ms = get_i(m, "at");
		t->expires_ms = get_i(m, "expires");
		t->was_running = 0;
		task_clear_question(t);
		/* Its checkpoint blob was released after this record was durable. */
		free(t->checkpoint);
		t->checkpoint = NULL;
		t->checkpoint_len = 0;
		t->checkpoint_blob[0] = 0;
		break;
	}
	case REC_RETRY:
		t->retries_used = (int)get_i(m, "retries");
		t->not_before = get_i(m, "notBefore");
		free(t->progress_msg);
		t->progress_msg = frame_get_strdup(m, "msg");
		t->updated_ms = get_i(m, "at");
		t->was_running = 0;
		break;
	default:
		snprintf(rp->err, rp->errlen, "unknown record type %u (written by a newer forkpoint?)", type);
		return -1;
	}
done:
	if (bad) {
		snprintf(rp->err, rp->errlen, "task %s: a JSON value in a record of type %u does not parse", id, type);
		return -1;
	}
	return 0;
blob_fail:
	/* The record is intact but the blob it names is gone or damaged: the task cannot resume.
	 * Say so on the task rather than refusing to serve every other task. */
	/* Worded as `forkpoint fsck` reports it, so both name the same blob. */
	fplog(&p->sv->log, FPLOG_ERROR, id, "%s blob %s: %s", result ? "result" : "checkpoint",
	      result ? t->result_blob : t->checkpoint_blob,
	      rc == -EBADMSG ? "content does not match its sha256" : strerror(-rc));
	if (!TASK_TERMINAL(t->status)) {
		t->status = TASK_FAILED;
		t->error = task_envelope("task_lost", "The task's stored checkpoint or result is missing or damaged.",
		                         0, "Call the tool again; `forkpoint fsck` reports what is damaged.");
		t->finished_ms = t->updated_ms;
		t->expires_ms = t->finished_ms + 86400000;
	}
	return 0;
}

static int replay_cb(void *arg, uint8_t type, const void *payload, size_t len, char *err, size_t errlen)
{
	struct replay *rp = arg;
	if (type == JOURNAL_SNAPSHOT_BEGIN || type == JOURNAL_SNAPSHOT_END)
		return 0;
	struct frame f;
	if (frame_decode(payload, len, &f) < 0) {
		snprintf(err, errlen, "record of type %u is not a msgpack map", type);
		return -1;
	}
	rp->err = err;
	rp->errlen = errlen;
	if (type >= REC_EXT_FIRST && type <= REC_EXT_LAST) {
		int r = rp->p->sv->transfers ? transfer_replay(rp->p->sv->transfers, type, &f.root, err, errlen)
		                             : transfer_replay_tasks(rp->p->sv, type, &f.root);
		frame_release(&f);
		return r;
	}
	if (rp->tap) {
		const char *id;
		size_t n;
		char idbuf[33] = "";
		if (frame_get_str(&f.root, "id", &id, &n) == 0 && n == 32) {
			memcpy(idbuf, id, 32);
			rp->tap(rp->tap_arg, type, idbuf, &f.root);
		}
	}
	int rc = apply(rp, type, &f.root);
	frame_release(&f);
	return rc;
}

/* journal_open passes the record callback's argument to the log callback too. */
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
	struct persist *p = calloc(1, sizeof *p);
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->sv = sv;
	p->read_only = read_only;
	/* ls/show/fsck may run without a config: the journal's defaults then apply. */
	struct journal_opts o = { .read_only = read_only };
	p->compact_min = COMPACT_MIN_BYTES;
	if (sv->cfg) {
		o.segment_bytes = (uint64_t)sv->cfg->server.journal_segment_bytes;
		p->compact_min = (uint64_t)sv->cfg->server.compact_min_bytes;
	}
	struct replay rp = { .p = p, .tap = tap, .tap_arg = tap_arg };
	int rc = journal_open(sv->state_dir, &o, replay_cb, journal_log, &rp, &p->j, err, errlen);
	if (rc < 0) {
		free(p);
		return rc;
	}
	/* Relative to the snapshot the journal starts from, not to everything replayed: otherwise
	 * each restart would raise the threshold and the journal would grow without bound. */
	p->snapshot_bytes = journal_snapshot_bytes(p->j);
	p->last_progress_flush = loop_now();
	if (!read_only) {
		load_blobs(p);
		if ((rc = blob_store_init(&p->blobs, sv->state_dir)) < 0)
			fplog(&sv->log, FPLOG_WARNING, NULL, "cannot count the blob store's bytes: %s", strerror(-rc));
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
	journal_close(p->j);
	free(p->dirty);
	free(p->release);
	free(p);
}
