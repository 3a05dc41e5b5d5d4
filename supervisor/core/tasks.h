/* supervisor/core/tasks.h — the task table and each task's lifecycle:
 *
 *   create → queued (status working, no job) → running (working) ⇄ input_required
 *          → completed | failed | cancelled        (terminal: never left, never re-entered)
 *
 * The tasks module (tasks.c: table and transitions; task_sched.c: queue and jobs;
 * task_frames.c: the job protocol; task_env.c, task_table.c, task_expiry.c) owns every struct
 * task and every transition; other modules read task fields and call the functions below.
 * Every change to a durable field is a store record (state/store.h), appended first and then
 * applied by task_apply() (task_apply.h), the same function replay uses; a change whose record
 * cannot be appended is not made.  Observers (the MCP server) hear of changes through the hook
 * set with tasks_set_observer. */
#ifndef FP_TASKS_H
#define FP_TASKS_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>
#include "supervisor/core/supervisor.h"

enum task_status {
	TASK_WORKING, TASK_INPUT_REQUIRED, TASK_COMPLETED, TASK_FAILED, TASK_CANCELLED
};
#define TASK_TERMINAL(s) ((s) >= TASK_COMPLETED)

struct job;

struct task_answer {
	char *question_id;
	cJSON *response;
	struct task_answer *next;
};

struct task {
	char id[33];                  /* 128 random bits, lowercase hex */
	char *tool_name;
	const struct tool_cfg *tool;  /* NULL if the tool is no longer in the config */
	cJSON *args;                  /* validated, defaults applied */
	size_t args_packed_len;       /* bytes of args packed as msgpack + 1; 0 until measured */
	enum task_status status;
	int queued;                   /* working, waiting for a free slot */
	int attempt;                  /* runs started so far (1 during the first) */
	int retries_used;             /* re-runs after the job failed (bounded by tool->retries) */
	int was_running;              /* replay: a job was running when the journal ended */
	int64_t not_before;           /* wall ms: queued for a retry, not to start before this */
	int64_t created_ms, updated_ms, started_ms, finished_ms, expires_ms;  /* wall clock */
	char *progress_msg;           /* may be NULL */
	double fraction;              /* < 0: unknown */
	uint64_t progress_seq;        /* bumps on every progress change */
	char *question_id, *question_prompt;
	cJSON *question_choices;      /* array of strings or NULL */
	struct task_answer *answers;  /* every answer given, replayed to a job that re-asks */
	cJSON *result;                /* completed: the job's value, or an explicit MCP result */
	int result_is_mcp;
	cJSON *error;                 /* failed/cancelled: the envelope {code,message,retryable,recoveryHint} */
	cJSON *artifacts;             /* completed: [{name,size,sha256,uri}] from work/outputs, or NULL */
	void *checkpoint; size_t checkpoint_len; int64_t checkpoint_seq;
	char checkpoint_blob[65];     /* sha256 name when stored as a blob, else "" */
	char result_blob[65];         /* same, for a large result; then result is NULL and the
	                                 text stays in the blob, never in memory */
	uint64_t result_bytes;        /* with result_blob: the size of the result's JSON text */
	char *result_summary;         /* with result_blob: "an object with keys: …", or NULL */
	int result_lost;              /* with result_blob: the blob is missing or damaged */
	char *result_pending;         /* a large result whose blob could not be written yet */
	size_t result_pending_len;
	int result_pending_mcp;
	int result_store_tries;
	char pending_blob[65];        /* result_pending stored as this blob, not yet in a FINISH record */
	uint64_t pending_blob_bytes;
	char *pending_summary;        /* the large result's description, for its FINISH record */
	struct loop_timer *store_timer;   /* the next attempt to store result_pending */
	int cancel_requested;
	char *cancel_reason;
	cJSON *sandbox;               /* the effective sandbox of the latest run, or NULL */
	/* runtime */
	struct tasks *owner;
	struct job *job;
	int64_t job_started_mono;
	struct loop_timer *timeout_timer;
	struct loop_timer *retry_timer;
	int progress_dirty;           /* progress not yet journaled */
	uint64_t journal_gen;         /* persist: the latest record about this task (see persist_task_durable) */
	cJSON *pending_error;         /* a retryable failure reported by the job, decided at exit */
	int result_held;              /* the job's result is in; the task completes once its tree is dead */
	cJSON *pending_result;        /* that result (NULL when it is in result_blob) */
	int pending_result_mcp;
	unsigned char *held; size_t held_len;   /* frames for the job, sent after the commit */
	struct task *held_next;       /* on the tasks' held list */
	int on_held;
	struct task *next, *prev;     /* all tasks, newest first */
	struct task *qnext;           /* run queue */
	int qpos;                     /* position in it, valid unless the queue has changed */
};

enum task_event { TASK_EV_PROGRESS, TASK_EV_STATUS };
typedef void (*task_observer)(void *arg, struct task *t, enum task_event ev);

struct tasks *tasks_new(struct supervisor *sv);
/* Kill every running job (their tasks stay as they are) and free everything. */
void tasks_free(struct tasks *ts);
void tasks_set_observer(struct tasks *ts, task_observer fn, void *arg);

/* Create a task for tool with validated args (consumed) and start or queue it.
 * Returns 0 and *out, -ENOBUFS when the queue is full, or another -errno. */
int tasks_create(struct tasks *ts, const struct tool_cfg *tool, cJSON *args, struct task **out);
struct task *tasks_find(struct tasks *ts, const char *id);
struct task *tasks_newest(struct tasks *ts);
size_t tasks_count(const struct tasks *ts);
/* 1-based position in the run queue, 0 if not queued. */
int tasks_queue_position(struct tasks *ts, const struct task *t);

/* Answer the pending question.  0, -EINVAL (not waiting for input), or -errno. */
int tasks_respond(struct tasks *ts, struct task *t, const cJSON *response);
/* Request cancellation: queued tasks end at once; running jobs get a cancel frame and their
 * tree is killed after the grace period.  The task is cancelled from now on. 0, or -EALREADY
 * if it was already terminal. */
int tasks_cancel(struct tasks *ts, struct task *t, const char *reason);

const char *task_status_name(enum task_status s);
int task_status_parse(const char *name);   /* -1 if unknown */

/* Frames queued for jobs during this turn may go out now (after the journal commit). */
void tasks_release(struct tasks *ts);

/* ---- restoring from the journal (persist.c, through task_apply) ---------------------------- */
/* A blank task with the given id, not yet in the table. */
struct task *task_alloc(const char *id);
void task_free(struct task *t);
/* Forget t's pending question (id, prompt, choices). */
void task_clear_question(struct task *t);
/* Insert a restored task (the list stays ordered by created_ms, newest first). */
int tasks_insert(struct tasks *ts, struct task *t);
/* After replay: requeue queued tasks and apply each tool's resume policy to interrupted ones. */
void tasks_recover(struct tasks *ts);
/* Drop a task from the table and free it (expiry). */
void tasks_remove(struct tasks *ts, struct task *t);
/* Tombstones: ids of expired tasks, answered with `expired` until `until` (wall ms). */
int tasks_tombstone_add(struct tasks *ts, const char *id, int64_t until);
int64_t tasks_tombstone_find(const struct tasks *ts, const char *id);   /* 0 if none */
/* Call fn for every live tombstone. */
void tasks_tombstone_each(struct tasks *ts, void (*fn)(void *arg, const char *id, int64_t until), void *arg);
/* Expire finished tasks whose TTL has passed; returns how many. */
size_t tasks_collect(struct tasks *ts, int64_t now_wall);

/* A fresh failure envelope {code, message, retryable, recoveryHint}. */
cJSON *task_envelope(const char *code, const char *message, int retryable, const char *hint);

#endif
