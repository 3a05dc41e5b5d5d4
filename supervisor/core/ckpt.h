/* supervisor/core/ckpt.h — storing a job's checkpoint without blocking the event loop.
 *
 * A checkpoint larger than PERSIST_INLINE_CHECKPOINT becomes a blob: sha256, write, fdatasync,
 * rename and a directory fsync, which for megabytes takes tens of milliseconds that every client
 * and job would wait through.  ckpt_store does that on the worker pool (workers.h) and keeps
 * the promises the inline path keeps:
 *   - the checkpoint record is appended only once its blob is durable, and the job hears
 *     "checkpointed" only after the commit that makes the record durable (the frame goes
 *     through the caller's done callback, which holds it until the commit as before);
 *   - the job's later frames, and its end, wait (job_pause) until the checkpoint is recorded,
 *     so nothing the job sent afterwards overtakes it;
 *   - until then the task keeps its previous checkpoint, in memory and on disk, so a
 *     compaction or a restart meanwhile sees the old one, never a blob not yet written.
 * Small checkpoints, a server without a journal, or one without a pool take the inline path
 * (persist_checkpoint) and done runs before ckpt_store returns.
 *
 * Loop thread only.  The task and its job must outlive the request: workers_free (which runs
 * or drops every pending request) comes before tasks_free. */
#ifndef FP_CKPT_H
#define FP_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/core/supervisor.h"

struct task;
struct job;

/* The outcome for the task's owner: rc 0 (t->checkpoint holds the new bytes, recorded; the
 * acknowledgement may be queued), -EDQUOT (over server.stateDirMaxMB) or another -errno
 * (nothing was recorded and nothing may be acknowledged: the owner ends the attempt; on the
 * inline path t->checkpoint may already hold the new bytes, as before).  Not called when the
 * task ended while its checkpoint was being written (the checkpoint is dropped, as a frame
 * arriving after the end would be), nor at shutdown. */
typedef void (*ckpt_done_fn)(struct task *t, size_t len, int64_t seq, int rc);

/* Make a copy of data (len bytes) the checkpoint seq of t; called from j's on_frame for the
 * frame that holds data (the caller has checked its size), which job_pause keeps valid while
 * a worker reads it, so the 8 MiB a checkpoint may have are copied off the loop too.  done
 * runs at most once, as above; -ENOMEM when the copy cannot be made. */
void ckpt_store(struct supervisor *sv, struct task *t, struct job *j, const void *data, size_t len,
                int64_t seq, ckpt_done_fn done);

#endif
