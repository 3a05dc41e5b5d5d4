/* supervisor/core/persist.h — the supervisor's durable state: the task store (state/store.h)
 * opened on the state dir, replayed into the task table through task_apply(), plus what the
 * store does not know: blobs (large checkpoints and results), the state dir's budget, progress
 * coalescing, the storage fault that refuses new promises, and compaction.
 *
 * The promises (task accepted, answer recorded, checkpoint stored, cancel requested, terminal
 * state) are appended with persist_record() in the same loop turn as the change, before the
 * change is applied to the task (task_apply), and the turn's responses and job frames are held
 * back until persist_commit() has made them durable.  A record that cannot be appended is
 * reported to the caller, which then does not make the change -- except a job's outcome
 * (FINISH) and a retry (RETRY), which are applied in memory anyway because the job is gone;
 * that is logged as an error.  While commits fail
 * (persist_fault), the held answers stay held until a retry succeeds, and new changes are
 * refused by the callers.  Progress is not a promise: it is coalesced per task and written
 * with the next batch. */
#ifndef FP_PERSIST_H
#define FP_PERSIST_H

#include <stddef.h>
#include <stdint.h>
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"
#include "state/store.h"
#include "proto/frame.h"

/* Record types (the journal's type byte). */
enum {
	REC_CREATE = STORE_REC_CREATE, REC_START = STORE_REC_START, REC_PROGRESS = STORE_REC_PROGRESS,
	REC_CHECKPOINT = STORE_REC_CHECKPOINT, REC_ASK = STORE_REC_ASK, REC_ANSWER = STORE_REC_ANSWER,
	REC_FINISH = STORE_REC_FINISH, REC_RETRY = STORE_REC_RETRY, REC_EXPIRE = STORE_REC_EXPIRE,
	REC_SNAP_TASK = STORE_REC_SNAP_TASK, REC_SNAP_TOMB = STORE_REC_SNAP_TOMB,
	/* 64..95 belong to file transfers (transfer.c): appended with persist_append, replayed
	 * through transfer_replay(), written into snapshots by transfer_snapshot(). */
	REC_EXT_FIRST = STORE_REC_EXT_FIRST, REC_EXT_LAST = STORE_REC_EXT_LAST,
};

/* Checkpoints larger than this go to the blob store. */
#define PERSIST_INLINE_CHECKPOINT 1024

/* Append a record of file transfers (types REC_EXT_FIRST..REC_EXT_LAST): persist_append_rec
 * a typed one (transfer.c), persist_append one already encoded as the journal encodes it (a
 * msgpack map: tests writing odd records; the journal backend only).  Not logged here; a
 * failure is the caller's to report.  0 or -errno. */
int persist_append(struct persist *p, uint8_t type, const void *payload, size_t len);
int persist_append_rec(struct persist *p, const struct store_rec *r);

struct persist;

/* Open the journal in sv->state_dir and replay it into sv->tasks (which must exist, empty).
 * read_only: for ls/show/logs — no lock, nothing written.  0, or -errno with a message. */
int persist_open(struct supervisor *sv, int read_only, struct persist **out, char *err, size_t errlen);
/* The same, calling tap for every task record before it is applied (forkpoint show's timeline). */
typedef void (*persist_tap)(void *arg, const struct store_rec *rec);
int persist_open_tap(struct supervisor *sv, int read_only, persist_tap tap, void *tap_arg,
                     struct persist **out, char *err, size_t errlen);
/* The same over any store (the memory backend in unit tests and fuzzers); takes s, also on
 * failure.  Blobs still live in sv->state_dir (which may be NULL: then none can be stored). */
int persist_open_store(struct supervisor *sv, struct store *s, int read_only, persist_tap tap,
                       void *tap_arg, struct persist **out, char *err, size_t errlen);
struct store *persist_store(struct persist *p);

/* Append r (about t, or NULL) to the store: the live path's first step, before task_apply().
 * 0, or -errno (logged; then the change must not be made).  A successful append marks t as
 * depending on the next commit (persist_task_durable). */
int persist_record(struct persist *p, struct task *t, const struct store_rec *r);
/* Store bytes as a blob, durably, within server.stateDirMaxMB: hex gets its name.  0,
 * -EDQUOT over the budget, or -errno. */
int persist_blob_put(struct persist *p, const void *data, size_t len, char hex[65]);
/* A blob a newer record no longer needs: deleted after the next successful commit, unless a
 * task refers to it then. */
void persist_release_blob(struct persist *p, const char *hex);
/* Name of a record type, for humans. */
const char *persist_type_name(int type);
void persist_close(struct persist *p);
uint64_t persist_records_replayed(const struct persist *p);

/* The record writers below append one record each describing t's current fields (tools that
 * build journals by hand, tests).  The supervisor's own changes go through persist_record()
 * and task_apply() instead.  They return 0, or -errno when the record could not be appended (-EMSGSIZE over
 * the journal's record limit, -ENOMEM, -EROFS): then nothing about it may be promised, and
 * the caller must not make (or must undo) the change in memory. */
int persist_created(struct persist *p, struct task *t);
int persist_started(struct persist *p, struct task *t);
void persist_progress(struct persist *p, struct task *t);   /* marks dirty; coalesced */
/* Store checkpoint bytes (large ones as a blob, durably) and record it.  The blob of the
 * checkpoint it replaces is deleted after the commit that makes this record durable (never
 * before: until then a crash replays the old one), unless another task refers to it.
 * 0, -EDQUOT over server.stateDirMaxMB, or -errno. */
int persist_checkpoint(struct persist *p, struct task *t);
/* Checkpoints larger than this are stored as blobs. */
/* persist_checkpoint for a checkpoint whose blob hex was already stored durably (ckpt.h, on
 * a worker thread): only the record is written.  0 or -errno. */
int persist_checkpoint_stored(struct persist *p, struct task *t, const char *hex);
/* -EDQUOT if len more bytes would take the state dir over server.stateDirMaxMB, else 0. */
int persist_budget(const struct persist *p, size_t len);
/* The live path of a new checkpoint seq of t (data, len; at: when it came): its blob (hex, if
 * it is stored already; else a large one is stored now), its record, then task_apply, then
 * the replaced blob released after the commit.  owned, if not NULL, is a malloc'd copy of
 * data the task takes instead of copying (freed on failure).  0, -EDQUOT, or -errno with the
 * task unchanged. */
int persist_checkpoint_rec(struct persist *p, struct task *t, const void *data, size_t len, int64_t seq,
                           int64_t at, const char *hex, void *owned);
int persist_asked(struct persist *p, struct task *t);
int persist_answered(struct persist *p, struct task *t, const char *qid, const cJSON *response);
/* Store a large result's JSON text as a blob, durably, before any record names it: sets
 * t->result_blob and t->result_bytes.  0, -EDQUOT over server.stateDirMaxMB, or -errno (the
 * task then keeps the text and tries again). */
int persist_store_result(struct persist *p, struct task *t, const char *text, size_t len);
/* Bytes the state dir holds in blobs and journal segments (what stateDirMaxMB bounds). */
uint64_t persist_disk_bytes(const struct persist *p);
/* The blob store beside the journal (state/blob.h): the file system under the state dir, in
 * memory without one.  Read-only when p is (put and gc fail -EROFS).  NULL when p is NULL.
 * Tests set its fault hook; the server never does. */
struct blobs;
struct blobs *persist_blobs(struct persist *p);
/* The result fields of a FINISH or snapshot record for result (NULL: t's stored blob, if
 * any): inline JSON text (*text, the caller frees it), or, over server.resultInlineBytes, a
 * blob written now (hex names it).  The caller sets out->mcp.  0 or -errno. */
int persist_result_rec(struct persist *p, const cJSON *result, const struct task *t, char **text,
                       char hex[65], struct store_result *out);
/* Terminal state (a result already in t->result_blob is referenced, a large one in t->result
 * goes to a blob).  0 or -errno. */
int persist_finished(struct persist *p, struct task *t);
int persist_retry(struct persist *p, struct task *t);
int persist_expired(struct persist *p, const char *id, int64_t until);
/* The blobs of a task that is going away (after its EXPIRE record): deleted after the next
 * commit, unless another task refers to them. */
void persist_release(struct persist *p, const struct task *t);

/* 0 while commits succeed; -errno of the last failed commit while they fail (ENOSPC, EIO):
 * then new promises must be refused up front (storage_unavailable), as they could not be
 * kept.  Cleared by the first commit that succeeds. */
int persist_fault(const struct persist *p);
/* 1 if every record appended about t is durable: a read of t may then be answered at once,
 * even while a later batch is still waiting for its commit. */
int persist_task_durable(const struct persist *p, const struct task *t);

/* Make everything appended durable (one write + one fdatasync).  0, or -errno (the batch stays
 * and is retried on the next call; nothing that depends on it may be released). */
int persist_commit(struct persist *p);
/* Bytes waiting for commit (0: nothing to hold back). */
size_t persist_pending(const struct persist *p);
/* Compact if the journal has grown past its threshold (8 MiB plus twice the snapshot it
 * starts from, also after a restart): snapshot of the live state, old segments removed,
 * unreferenced blobs collected.  After a failed compaction, maybe_compact waits (1 s, doubling
 * up to 5 min) before the next attempt; the first failure of such an episode is logged as an
 * error, the first success after it as a notice.  persist_compact tries now.  0 or -errno. */
int persist_maybe_compact(struct persist *p);
int persist_compact(struct persist *p);

#endif
