/* supervisor/core/task_apply.h — the one place where a task's durable fields change.
 *
 * Every durable change to a struct task is a record (state/store.h): the live path builds the
 * record, appends it to the store (and changes nothing when that fails), then applies it here;
 * replay decodes the same record from the store and applies it here too.  So a task rebuilt by
 * replay has exactly the fields the live task had, and the lifecycle is written once.
 *
 * Durable fields: tool_name, args, status, attempt, retries_used, was_running, not_before,
 * created/updated/started/finished/expires_ms, progress_msg, fraction, the question, answers,
 * checkpoint (bytes, seq, blob name), result (value, blob name, size, summary, mcp), error,
 * artifacts, sandbox.  Everything else in struct task is runtime state (tasks.c). */
#ifndef FP_TASK_APPLY_H
#define FP_TASK_APPLY_H

#include <stddef.h>
#include "state/store.h"
#include "supervisor/core/tasks.h"

/* Apply r to t.  CREATE and SNAP_TASK expect a blank task (task_alloc) with r's id; EXPIRE and
 * SNAP_TOMB concern the table, not a task, and change nothing here; of the file transfer
 * records only X_ARTSHA (an artifact's digest, for the task it names) is a task's, the others
 * are refused.
 * 0, or -EBADMSG (a JSON value that does not parse, a missing tool or arguments, an unknown or
 * misplaced status, an unknown type) or -ENOMEM, with a message in err naming the task.  On
 * failure t may be partly changed: replay then refuses the journal, and the live path only
 * applies records it built itself. */
int task_apply(struct task *t, const struct store_rec *r, char *err, size_t errlen);
/* A CHECKPOINT record's ckpt.owned buffer is the task's after task_apply, also on failure
 * (then freed): the live path may hand over a copy instead of having it made again. */

/* JSON text of v for a record: *out NULL for a NULL v (stored as null), else a malloc'd
 * string.  0 or -ENOMEM (never "null" for a value that could not be printed). */
int task_json_text(const cJSON *v, char **out);

#endif
