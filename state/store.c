/* state/store.c — the store's dispatch, record names and record copies; see store.h. */
#include "state/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The public entry points are thin dispatchers to the backend's ops table: the supervisor only
 * ever sees struct store, so a journal or an in-memory backend can be swapped without touching
 * it.  Each one forwards the backend's return value unchanged; the contracts are in store.h. */
int store_replay(struct store *s, store_replay_cb cb, store_log_cb log, void *arg, char *err, size_t errlen)
{
	return s->ops->replay(s, cb, log, arg, err, errlen);
}

int store_append(struct store *s, const struct store_rec *r)
{
	return s->ops->append(s, r);
}

int store_commit(struct store *s)
{
	return s->ops->commit(s);
}

int store_snapshot_begin(struct store *s)
{
	return s->ops->snapshot_begin(s);
}

int store_snapshot_end(struct store *s)
{
	return s->ops->snapshot_end(s);
}

void store_snapshot_abort(struct store *s)
{
	s->ops->snapshot_abort(s);
}

size_t store_pending(const struct store *s)
{
	return s->ops->pending(s);
}

/* Zeroed first so that a backend which does not count something reports 0 rather than
 * whatever the caller's stack held. */
void store_stats(const struct store *s, struct store_stats *out)
{
	memset(out, 0, sizeof *out);
	s->ops->stats(s, out);
}

/* NULL is accepted so that cleanup paths can close a store that was never opened. */
void store_close(struct store *s)
{
	if (s)
		s->ops->close(s);
}

/* Names used in logs and diagnostics.  Any other number (an EXT type or a corrupted byte)
 * gets "unknown" instead of NULL, so callers can print the result without a check. */
const char *store_rec_type_name(int type)
{
	switch (type) {
	case STORE_REC_CREATE: return "created";
	case STORE_REC_START: return "started";
	case STORE_REC_PROGRESS: return "progress";
	case STORE_REC_CHECKPOINT: return "checkpoint";
	case STORE_REC_ASK: return "asked";
	case STORE_REC_ANSWER: return "answered";
	case STORE_REC_FINISH: return "finished";
	case STORE_REC_RETRY: return "retry";
	case STORE_REC_EXPIRE: return "expired";
	case STORE_REC_SNAP_TASK: return "snapshot";
	case STORE_REC_SNAP_TOMB: return "tombstone";
	default: return "unknown";
	}
}

/* ---- deep copies ----------------------------------------------------------------------------- */

/* A copy is made in two passes over the same code: the first (base NULL) only measures, the
 * second copies into one block of the measured size.  One allocation per record keeps the
 * memory backend simple (free() releases it) and makes measuring and copying impossible to
 * disagree. */
struct cur {
	char *base;
	size_t off;
};

/* Reserve n bytes (rounded up to 8 so every piece stays aligned for any member type) and,
 * on the copying pass, copy them.  On the measuring pass the returned pointer is a non-NULL
 * dummy that is never dereferenced: it only keeps "present" distinct from "absent" (NULL). */
static const void *cp(struct cur *c, const void *p, size_t n)
{
	if (!p)
		return NULL;
	void *d = c->base ? c->base + c->off : (void *)(uintptr_t)1;
	if (c->base && n)
		memcpy(d, p, n);
	c->off += (n + 7) & ~(size_t)7;
	return d;
}

static const char *cps(struct cur *c, const char *s)
{
	return s ? cp(c, s, strlen(s) + 1) : NULL;
}

/* owned is dropped: it belongs to the live caller and must never be freed through a copy.
 * Inline data of length 0 still gets a (non-NULL) pointer, so has_data stays meaningful. */
static void cp_ckpt(struct cur *c, struct store_checkpoint *k)
{
	k->owned = NULL;
	if (k->has_data)
		k->data = cp(c, k->data ? k->data : "", k->len);
	else
		k->data = NULL;
	k->blob = cps(c, k->blob);
}

static void cp_result(struct cur *c, struct store_result *r)
{
	r->text = cps(c, r->text);
	r->blob = cps(c, r->blob);
	r->summary = cps(c, r->summary);
}

/* Copy every string of the snapshot record s (already a shallow copy) into c. */
static void cp_snap(struct cur *c, struct store_task *s)
{
	const char **str[] = { &s->tool, &s->args, &s->status, &s->sandbox, &s->artifacts, &s->error,
	                       &s->msg, &s->qid, &s->prompt, &s->choices };
	for (size_t i = 0; i < sizeof str / sizeof *str; i++)
		*str[i] = cps(c, *str[i]);
	const struct store_answer *src = s->answers;
	struct store_answer *a = s->nanswers ? (struct store_answer *)cp(c, src, s->nanswers * sizeof *src) : NULL;
	for (size_t i = 0; a && i < s->nanswers; i++) {
		const char *q = cps(c, src[i].qid), *r = cps(c, src[i].response);
		if (c->base) {
			a[i].qid = q;
			a[i].response = r;
		}
	}
	/* The answer array itself is copied first, then its strings; the pointers are only
	 * written on the copying pass, when a points into the block. */
	s->answers = a;
	cp_ckpt(c, &s->ckpt);
	cp_result(c, &s->result);
}

static void cp_xfer(struct cur *c, struct store_xfer *x)
{
	const char **str[] = { &x->h, &x->dir, &x->path, &x->want, &x->sha, &x->id.fh, &x->pub.fh, &x->psha,
	                       &x->state, &x->msg, &x->task, &x->name, &x->status };
	for (size_t i = 0; i < sizeof str / sizeof *str; i++)
		*str[i] = cps(c, *str[i]);
}

/* Point every string of d (a shallow copy of a record) into c.  Every record type must be
 * listed here: a type that is missed keeps pointers into the caller's memory, which append
 * is allowed to free at once.  raw (a payload already in the journal encoding) is copied
 * for all types. */
static void cp_rec(struct cur *c, struct store_rec *d)
{
	switch (d->type) {
	case STORE_REC_CREATE:
		d->u.create.tool = cps(c, d->u.create.tool);
		d->u.create.args = cps(c, d->u.create.args);
		break;
	case STORE_REC_START:
		d->u.start.sandbox = cps(c, d->u.start.sandbox);
		break;
	case STORE_REC_PROGRESS:
		d->u.progress.msg = cps(c, d->u.progress.msg);
		break;
	case STORE_REC_CHECKPOINT:
		cp_ckpt(c, &d->u.checkpoint.ckpt);
		break;
	case STORE_REC_ASK:
		d->u.ask.qid = cps(c, d->u.ask.qid);
		d->u.ask.prompt = cps(c, d->u.ask.prompt);
		d->u.ask.choices = cps(c, d->u.ask.choices);
		break;
	case STORE_REC_ANSWER:
		d->u.answer.qid = cps(c, d->u.answer.qid);
		d->u.answer.response = cps(c, d->u.answer.response);
		break;
	case STORE_REC_FINISH:
		d->u.finish.status = cps(c, d->u.finish.status);
		d->u.finish.artifacts = cps(c, d->u.finish.artifacts);
		d->u.finish.error = cps(c, d->u.finish.error);
		cp_result(c, &d->u.finish.result);
		break;
	case STORE_REC_RETRY:
		d->u.retry.msg = cps(c, d->u.retry.msg);
		break;
	case STORE_REC_SNAP_TASK:
		cp_snap(c, &d->u.snap);
		break;
	default:
		if (STORE_REC_IS_EXT(d->type))
			cp_xfer(c, &d->u.xfer);
		break;
	}
	if (d->raw)
		d->raw = cp(c, d->raw, d->raw_len);
}

/* The measuring pass works on a shallow copy, so r is never written through. */
size_t store_rec_size(const struct store_rec *r)
{
	struct store_rec probe = *r;
	struct cur c = { NULL, (sizeof probe + 7) & ~(size_t)7 };
	cp_rec(&c, &probe);
	return c.off;
}

/* One malloc'd block holding the record and all its strings: the caller frees it with a
 * single free().  NULL only on allocation failure. */
struct store_rec *store_rec_dup(const struct store_rec *r)
{
	struct cur c;
	char *block = malloc(store_rec_size(r));
	if (!block)
		return NULL;
	struct store_rec *d = (struct store_rec *)(void *)block;
	*d = *r;
	c.base = block;
	c.off = (sizeof *d + 7) & ~(size_t)7;
	cp_rec(&c, d);
	return d;
}
