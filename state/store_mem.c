/* state/store_mem.c — the in-memory backend of the task store (store.h), for unit tests and
 * fuzzers: records are deep copies (store_rec_dup) in a medium that outlives each store, so a
 * new store on the same medium replays what the last one committed, as after a restart.
 * Append and commit faults can be injected (store_mem_fail) to test that nothing failed is
 * acknowledged. */
#include "state/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/journal.h"

struct recs {
	struct store_rec **v;
	size_t n, cap;
};

struct store_mem_medium {
	struct recs committed;
	int fail_err[2];
	unsigned fail_count[2];
};

struct store_mem {
	struct store base;
	struct store_mem_medium *m;
	struct recs pending;
	struct recs snap;        /* the new base being written, valid while in_snapshot */
	int in_snapshot;
	int replayed;
	uint64_t replayed_n;
	size_t pending_bytes;
};

/* Each record is one store_rec_dup block, so one free() per entry releases it whole. */
static void recs_clear(struct recs *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i]);
	free(r->v);
	memset(r, 0, sizeof *r);
}

static int recs_push(struct recs *r, struct store_rec *x)
{
	if (r->n == r->cap) {
		size_t c = r->cap ? r->cap * 2 : 64;
		struct store_rec **v = realloc(r->v, c * sizeof *v);
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = c;
	}
	r->v[r->n++] = x;
	return 0;
}

/* Move all of src to the end of dst; src is left empty.  -ENOMEM leaves both as they were.
 * The room is made before anything moves, so a failed commit keeps the whole batch pending
 * (store.h: the next commit retries it) instead of committing half of it. */
static int recs_move(struct recs *dst, struct recs *src)
{
	if (dst->n + src->n > dst->cap) {
		size_t c = dst->cap ? dst->cap : 64;
		while (c < dst->n + src->n)
			c *= 2;
		struct store_rec **v = realloc(dst->v, c * sizeof *v);
		if (!v)
			return -ENOMEM;
		dst->v = v;
		dst->cap = c;
	}
	memcpy(dst->v + dst->n, src->v, src->n * sizeof *src->v);
	dst->n += src->n;
	free(src->v);
	memset(src, 0, sizeof *src);
	return 0;
}

/* The injected fault for op, if one is armed: -errno, counting it down.  Checked before any
 * state changes in the callers, so an injected failure behaves like a real one: nothing of
 * the failed operation is kept. */
static int take_fault(struct store_mem_medium *m, enum store_mem_op op)
{
	if (!m->fail_count[op])
		return 0;
	m->fail_count[op]--;
	return -m->fail_err[op];
}

/* Hands over only what was committed on the medium: pending records of an earlier store were
 * lost with it, as in a crash.  A callback that stops the replay gets -ECANCELED with the
 * record's position, the same contract the journal keeps. */
static int sm_replay(struct store *s, store_replay_cb cb, store_log_cb log, void *arg, char *err, size_t errlen)
{
	struct store_mem *sm = (struct store_mem *)s;
	(void)log;
	if (sm->replayed) {
		snprintf(err, errlen, "the store was replayed already");
		return -EALREADY;
	}
	sm->replayed = 1;
	for (size_t i = 0; i < sm->m->committed.n; i++) {
		char msg[512] = "";
		if (cb(arg, sm->m->committed.v[i], msg, sizeof msg) < 0) {
			snprintf(err, errlen, "memory store: record %zu: %s", i + 1, msg);
			return -ECANCELED;
		}
		sm->replayed_n++;
	}
	return 0;
}

/* The record limit is the journal's, measured on the copy (about the size the record takes
 * encoded), so a test sees the same refusals from both backends. */
static int sm_append(struct store *s, const struct store_rec *r)
{
	struct store_mem *sm = (struct store_mem *)s;
	if (!sm->replayed)
		return -EINVAL;
	if (r->raw)
		return -ENOTSUP;   /* nothing here decodes the journal's encoding */
	int rc = take_fault(sm->m, STORE_MEM_APPEND);
	if (rc < 0)
		return rc;
	size_t n = store_rec_size(r);
	if (n > JOURNAL_MAX_RECORD + sizeof *r)
		return -EMSGSIZE;
	struct store_rec *d = store_rec_dup(r);
	if (!d)
		return -ENOMEM;
	rc = recs_push(sm->in_snapshot ? &sm->snap : &sm->pending, d);
	if (rc < 0) {
		free(d);
		return rc;
	}
	sm->pending_bytes += n;
	return 0;
}

/* An empty batch commits without consuming an armed fault, so a test that arms one commit
 * failure sees it on the first commit that has something to lose. */
static int sm_commit(struct store *s)
{
	struct store_mem *sm = (struct store_mem *)s;
	if (sm->in_snapshot)
		return -EBUSY;
	if (!sm->pending.n)
		return 0;
	int rc = take_fault(sm->m, STORE_MEM_COMMIT);
	if (rc == 0)
		rc = recs_move(&sm->m->committed, &sm->pending);
	if (rc == 0)
		sm->pending_bytes = 0;
	return rc;
}

/* What is pending is committed first: the records appended from here on go to the new base,
 * and anything older that was still pending would otherwise be lost when it replaces the
 * committed records. */
static int sm_snapshot_begin(struct store *s)
{
	struct store_mem *sm = (struct store_mem *)s;
	if (sm->in_snapshot)
		return -EBUSY;
	int rc = sm_commit(s);
	if (rc < 0)
		return rc;
	sm->in_snapshot = 1;
	return 0;
}

/* The new base replaces the committed records in one step, or not at all: a fault (armed as a
 * commit fault, since this is the snapshot's commit) drops the new base and leaves the old
 * records authoritative, as snapshot_abort would. */
static int sm_snapshot_end(struct store *s)
{
	struct store_mem *sm = (struct store_mem *)s;
	if (!sm->in_snapshot)
		return -EINVAL;
	int rc = take_fault(sm->m, STORE_MEM_COMMIT);
	if (rc < 0) {
		recs_clear(&sm->snap);
		sm->in_snapshot = 0;
		return rc;
	}
	recs_clear(&sm->m->committed);
	sm->m->committed = sm->snap;
	memset(&sm->snap, 0, sizeof sm->snap);
	sm->in_snapshot = 0;
	return 0;
}

static void sm_snapshot_abort(struct store *s)
{
	struct store_mem *sm = (struct store_mem *)s;
	recs_clear(&sm->snap);
	sm->in_snapshot = 0;
}

static size_t sm_pending(const struct store *s)
{
	return ((const struct store_mem *)s)->pending_bytes;
}

/* Byte figures are only an estimate here (records times the struct size): nothing is
 * encoded, so there is no exact size to report. */
static void sm_stats(const struct store *s, struct store_stats *out)
{
	const struct store_mem *sm = (const struct store_mem *)s;
	out->total_bytes = sm->m->committed.n * sizeof(struct store_rec);
	out->records_replayed = sm->replayed_n;
}

/* The medium is not touched: what was committed survives for the next store, what was
 * pending is dropped, as in a crash. */
static void sm_close(struct store *s)
{
	struct store_mem *sm = (struct store_mem *)s;
	recs_clear(&sm->pending);
	recs_clear(&sm->snap);
	free(sm);
}

static const struct store_ops mem_ops = {
	.name = "memory",
	.replay = sm_replay, .append = sm_append, .commit = sm_commit,
	.snapshot_begin = sm_snapshot_begin, .snapshot_end = sm_snapshot_end,
	.snapshot_abort = sm_snapshot_abort, .pending = sm_pending, .stats = sm_stats,
	.close = sm_close,
};

struct store_mem_medium *store_mem_medium_new(void)
{
	return calloc(1, sizeof(struct store_mem_medium));
}

void store_mem_medium_free(struct store_mem_medium *m)
{
	if (!m)
		return;
	recs_clear(&m->committed);
	free(m);
}

void store_mem_fail(struct store_mem_medium *m, enum store_mem_op op, int err, unsigned count)
{
	m->fail_err[op] = err;
	m->fail_count[op] = count;
}

size_t store_mem_records(const struct store_mem_medium *m)
{
	return m->committed.n;
}

int store_mem_new(struct store_mem_medium *m, struct store **out)
{
	struct store_mem *sm = calloc(1, sizeof *sm);
	if (!sm)
		return -ENOMEM;
	sm->m = m;
	sm->base.ops = &mem_ops;
	*out = &sm->base;
	return 0;
}
