/* supervisor/core/task_expiry.h — expiry of finished tasks and the tombstones they leave.
 *
 * A finished task whose TTL has passed is forgotten once its EXPIRE record is appended: its
 * blobs go after the next commit, its folder at once, and its id becomes a tombstone answered
 * with `expired` for as long again as it lived (at least an hour, at most a week), then
 * `unknown_task`.  While commits fail, nothing expires (the record could not be kept). */
#ifndef FP_TASK_EXPIRY_H
#define FP_TASK_EXPIRY_H

#include <stddef.h>
#include <stdint.h>
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tombs.h"

/* Drop tombstones past their time, then expire the finished tasks of ts past theirs (their
 * records go to sv->persist).  Returns how many tasks expired. */
size_t task_expiry_collect(struct supervisor *sv, struct tasks *ts, struct tombs *tb, int64_t now);

#endif
