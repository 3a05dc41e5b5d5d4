/* supervisor/core/tasks_int.h — what the files of the tasks module share and nobody else
 * may use: the table's struct and the transitions (tasks.c) that the job-protocol side
 * (task_frames.c) drives.  Internal functions are prefixed tasks__ (two underscores). */
#ifndef FP_TASKS_INT_H
#define FP_TASKS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>
#include "proto/frame.h"
#include "state/store.h"
#include "supervisor/core/job.h"
#include "supervisor/core/tasks.h"

#define MAX_QUESTION_ID   200
#define MAX_PROMPT        (64u << 10)
#define MAX_CHOICES       64
#define MAX_PROGRESS_MSG  4096
#define E2BIG_HINT        "An argument placed in the tool's command line is too long (the kernel allows " \
                          "128 KiB per word); call the tool with a shorter value."

struct tasks {
	struct supervisor *sv;
	struct task *head;           /* newest first */
	size_t count;
	struct task_table *tab;      /* id → task */
	struct task *qhead, *qtail;
	size_t qlen;
	int qpos_dirty;              /* a task left the queue from the head or the middle */
	int running;
	task_observer observer;
	void *observer_arg;
	struct task *held;           /* tasks with frames waiting for the commit */
	struct tombs *tombs;    /* expired ids */
};

/* ---- tasks.c: transitions (see the why paragraphs there) --------------------------------- */
void tasks__notify(struct tasks *ts, struct task *t, enum task_event ev);
/* A record about t with its id and the time of the change; the caller fills the rest. */
void tasks__rec_init(struct store_rec *r, enum store_rec_type type, const struct task *t);
/* task_apply for a record the live path built; a failure (out of memory) is logged. */
int tasks__apply_live(struct tasks *ts, struct task *t, const struct store_rec *r);
/* Append r, then apply it.  0, or the append's -errno with nothing changed. */
int tasks__change(struct tasks *ts, struct task *t, const struct store_rec *r);
/* New progress (msg NULL: the current one), applied now; journal: written with the next batch. */
void tasks__set_progress(struct tasks *ts, struct task *t, const char *msg, double fraction, int journal);
/* The single way into a terminal state (takes result and error). */
void tasks__finish(struct tasks *ts, struct task *t, enum task_status st, cJSON *result, int is_mcp,
                   cJSON *error);
void tasks__fail(struct tasks *ts, struct task *t, const char *code, const char *msg, int retryable,
                 const char *hint);
/* resource_limit naming the config key and its value. */
void tasks__fail_limit(struct tasks *ts, struct task *t, const char *msg, const char *limit, long value);

/* ---- task_sched.c: the run queue and jobs -------------------------------------------------- */
/* Start queued tasks whose records are durable while slots are free; how many started. */
size_t tasks__start_next(struct tasks *ts);
void tasks__enqueue(struct tasks *ts, struct task *t);   /* at the tail */
void tasks__dequeue(struct tasks *ts, struct task *t);   /* wherever it stands */
/* Back in the queue, at once or when its backoff (not_before) has passed. */
void tasks__schedule(struct tasks *ts, struct task *t);

/* ---- task_frames.c: the job protocol ------------------------------------------------------ */
/* Frames for the job, held until the turn's commit (tasks_release).  0 or -errno. */
int task_frames_send_start(struct task *t);
int task_frames_send_answer(struct task *t, const char *qid, const cJSON *response);
int task_frames_send_cancel(struct task *t, const char *reason);
/* A frame from t's job (job_callbacks.on_frame): 0, or -1 with why (a protocol violation). */
int task_frames_on_frame(void *owner, struct job *j, const struct frame *f, const char **why);
/* The result held while the job lingered, now that it is gone: the task completes. */
void task_frames_complete_held(struct tasks *ts, struct task *t);

#endif
