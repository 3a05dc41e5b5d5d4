/* supervisor/core/ckpt.c — see ckpt.h.
 *
 * One request per checkpoint in flight; a task has at most one, because its job is paused
 * from the frame that sent it until its record is appended.  The worker writes the blob
 * through blobs_write, which is safe on a worker thread; everything else (the store's
 * byte count, the task, the record, the job) is done in the done callback on the loop.
 *
 * A blob is shared by content, so while it is being written another task's superseded copy of
 * the same bytes may be deleted after a commit, or a compaction may collect the temp file or
 * the new, not yet referenced blob.  The done callback therefore checks that the blob exists
 * before the record names it, and writes it again (a few times at most) if it does not. */
#include "supervisor/core/ckpt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/blob.h"
#include "supervisor/core/job.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/workers.h"

#define CKPT_TRIES 3   /* writes of one checkpoint whose blob vanished before it was recorded */

struct ckpt_req {
	struct supervisor *sv;
	struct task *t;
	struct job *j;
	const void *src;            /* in j's frame, kept while j is paused */
	void *data;                 /* the task's copy, made by the worker */
	size_t len;
	int64_t seq;
	ckpt_done_fn done;
	const struct blobs *bs;
	char hex[BLOB_HEX_LEN + 1];
	int added;                  /* the last write made a new file */
	int rc;                     /* the last write's result */
	int tries;
};

/* malloc'd copy of len bytes (at least 1 byte, so an empty checkpoint is not NULL). */
static void *dup_bytes(const void *p, size_t len)
{
	void *d = malloc(len ? len : 1);
	if (d && len)
		memcpy(d, p, len);
	return d;
}

/* The inline path: stored (a large one as a blob), recorded and applied to the task in this
 * turn (persist_checkpoint_rec). */
static void store_now(struct supervisor *sv, struct task *t, const void *src, size_t len, int64_t seq,
                      ckpt_done_fn done)
{
	done(t, len, seq, persist_checkpoint_rec(sv->persist, t, src, len, seq, loop_wall_ms(), NULL, NULL));
}

/* Worker thread: write and sync the blob, then make the task's copy; nothing but the request
 * (and the frame bytes it points to) is touched. */
static void write_run(struct workers *w, void *arg)
{
	struct ckpt_req *r = arg;
	(void)w;
	r->added = 0;
	r->rc = blobs_write(r->bs, r->src, r->len, r->hex, &r->added);
	if (r->rc == 0 && !r->data && !(r->data = dup_bytes(r->src, r->len)))
		r->rc = -ENOMEM;
}

/* Record a written checkpoint (rc 0) or give up on it, tell the owner, let the job go on
 * (which ends the life of the frame r->src points into). */
static void record(struct ckpt_req *r, int rc)
{
	struct persist *p = r->sv->persist;
	if (rc == 0) {
		/* The task takes the worker's copy (no second copy on the loop). */
		rc = persist_checkpoint_rec(p, r->t, r->data, r->len, r->seq, loop_wall_ms(), r->hex, r->data);
		r->data = NULL;
	}
	free(r->data);
	r->done(r->t, r->len, r->seq, rc);
	job_resume(r->j);
	free(r);
}

/* Loop thread, after a write: account for the new file, then record the checkpoint, drop it
 * (the task ended meanwhile, or the server is stopping), or write it again (its blob was
 * deleted before anything referred to it). */
static void write_done(void *arg, int ran)
{
	struct ckpt_req *r = arg;
	struct persist *p = r->sv->persist;
	struct task *t = r->t;
	if (ran && r->added)
		blobs_added(persist_blobs(p), r->len);
	if (!ran || TASK_TERMINAL(t->status) || t->result_held || t->result_pending) {
		/* Nothing names the blob: the next compaction collects it. */
		free(r->data);
		job_resume(r->j);
		free(r);
		return;
	}
	int rc = r->rc;
	if (rc == 0 && !blobs_exists(r->bs, r->hex))
		rc = -ENOENT;
	if (rc == -ENOENT && ++r->tries < CKPT_TRIES &&
	    workers_submit(r->sv->workers, write_run, write_done, r) == 0)
		return;
	record(r, rc);
}

void ckpt_store(struct supervisor *sv, struct task *t, struct job *j, const void *data, size_t len,
                int64_t seq, ckpt_done_fn done)
{
	struct persist *p = sv->persist;
	if (!p || !sv->workers || !j || len <= PERSIST_INLINE_CHECKPOINT) {
		store_now(sv, t, data, len, seq, done);
		return;
	}
	int rc = persist_budget(p, len);
	if (rc < 0) {
		done(t, len, seq, rc);
		return;
	}
	struct ckpt_req *r = calloc(1, sizeof *r);
	if (!r) {
		store_now(sv, t, data, len, seq, done);
		return;
	}
	*r = (struct ckpt_req){ .sv = sv, .t = t, .j = j, .src = data, .len = len, .seq = seq,
	                        .done = done, .bs = persist_blobs(p) };
	if (workers_submit(sv->workers, write_run, write_done, r) < 0) {
		free(r);
		store_now(sv, t, data, len, seq, done);
		return;
	}
	job_pause(j);
}
