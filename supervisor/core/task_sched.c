/* supervisor/core/task_sched.c — the run queue and the life of a job: tasks wait in FIFO
 * order for a free slot (maxConcurrent) and for their records to be durable, start (folders,
 * argv, environment, sandboxed spawn, START record), time out, and on exit are decided:
 * completed, failed, or retried from their checkpoint with exponential backoff. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state/layout.h"
#include "supervisor/core/inputs.h"
#include "supervisor/core/job.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/task_env.h"
#include "supervisor/core/tasks_int.h"
#include "supervisor/core/transfer.h"
#include "supervisor/core/workers.h"

/* Positions are kept on the tasks: appending at the tail knows its position, and only a
 * departure makes them stale, so they are recomputed at most once per departure, when asked —
 * never a walk of the whole queue per call (a queue of 10,000 answered by every create). */
int tasks_queue_position(struct tasks *ts, const struct task *t)
{
	if (!t->queued || t->retry_timer)
		return 0;
	if (ts->qpos_dirty) {
		int pos = 1;
		for (struct task *q = ts->qhead; q; q = q->qnext)
			q->qpos = pos++;
		ts->qpos_dirty = 0;
	}
	/* The first tasks of the queue that fit in the free slots only wait for this turn's
	 * commit (start_next): they start now, and are not reported as queued. */
	int free_slots = ts->sv->cfg->server.max_concurrent - ts->running;
	return t->qpos > free_slots ? t->qpos - (free_slots > 0 ? free_slots : 0) : 0;
}

/* Take t off the run queue, wherever it stands in it. */
void tasks__dequeue(struct tasks *ts, struct task *t)
{
	struct task **pp = &ts->qhead, *prev = NULL;
	while (*pp && *pp != t) {
		prev = *pp;
		pp = &(*pp)->qnext;
	}
	if (*pp) {
		*pp = t->qnext;
		if (ts->qtail == t)
			ts->qtail = prev;
		ts->qlen--;
		ts->qpos_dirty = 1;
	}
	t->qnext = NULL;
	t->queued = 0;
}

void tasks__enqueue(struct tasks *ts, struct task *t);

static void on_retry_timer(struct loop *l, void *arg)
{
	struct task *t = arg;
	(void)l;
	t->retry_timer = NULL;
	tasks__enqueue(t->owner, t);
	tasks__start_next(t->owner);
}

/* Put t back in the queue, at once or when its backoff has passed. */
void tasks__schedule(struct tasks *ts, struct task *t)
{
	int64_t wait = t->not_before - loop_wall_ms();
	if (wait > 0) {
		t->queued = 1;   /* shows as queued while it waits; not on the run queue yet */
		t->retry_timer = loop_timer_in(ts->sv->loop, wait, on_retry_timer, t);
		if (t->retry_timer)
			return;
	}
	tasks__enqueue(ts, t);
}

/* The job failed but may be run again: back off exponentially, keep the checkpoint.  Takes
 * ownership of why.  1 if a retry was scheduled. */
static int try_retry(struct tasks *ts, struct task *t, cJSON *why)
{
	if (!t->tool || t->retries_used >= t->tool->retries || t->cancel_requested) {
		cJSON_Delete(why);
		return 0;
	}
	int retries = t->retries_used + 1;
	int64_t delay = 1000LL << (retries - 1 > 6 ? 6 : retries - 1);
	char msg[600];
	snprintf(msg, sizeof msg, "Attempt %d failed (%s); retrying from the last checkpoint in %lld s.",
	         t->attempt, cJSON_GetStringValue(cJSON_GetObjectItem(why, "message")), (long long)(delay / 1000));
	cJSON_Delete(why);
	struct store_rec r;
	tasks__rec_init(&r, STORE_REC_RETRY, t);
	r.u.retry.retries = retries;
	r.u.retry.not_before = r.at + delay;
	r.u.retry.msg = msg;
	/* Not refused when it cannot be recorded: the job is gone and the retry is the only way
	 * on; a restart then resumes the task as interrupted. */
	if (persist_record(ts->sv->persist, t, &r) < 0)
		fplog(&ts->sv->log, FPLOG_ERROR, t->id, "the retry could not be recorded; after a restart "
		      "the task resumes as interrupted");
	tasks__apply_live(ts, t, &r);
	fplog(&ts->sv->log, FPLOG_NOTICE, t->id, "%s", msg);
	tasks__schedule(ts, t);
	tasks__notify(ts, t, TASK_EV_PROGRESS);
	return 1;
}

/* The outcome of a job that ended without a result: its start error, its protocol violation,
 * its own failure report, the sandbox's verdict, or its exit status (retried while the tool has
 * retries left). */
static void decide_exit(struct tasks *ts, struct task *t, const struct job_exit *x)
{
	char msg[512];
	cJSON *pending = t->pending_error;
	t->pending_error = NULL;
	if (x->start_error && x->start_errno == E2BIG) {
		/* The arguments, not the server: the same call would fail the same way. */
		cJSON_Delete(pending);
		snprintf(msg, sizeof msg, "The job could not be started: %s.", x->start_error);
		tasks__fail(ts, t, "invalid_arguments", msg, 0, E2BIG_HINT);
	} else if (x->start_error) {
		cJSON_Delete(pending);
		snprintf(msg, sizeof msg, "The job could not be started: %s.", x->start_error);
		tasks__fail(ts, t, "job_failed", msg, 1,
		     "This is a problem with the server's setup, not the arguments; tell the operator, or retry later.");
	} else if (x->violation) {
		cJSON_Delete(pending);
		snprintf(msg, sizeof msg, "The job was stopped: %s.", x->violation);
		tasks__fail(ts, t, "job_failed", msg, 0,
		     "The job broke the frame protocol (docs/job-protocol.md); fix the job, then call the tool again.");
	} else if (pending) {
		if (!try_retry(ts, t, cJSON_Duplicate(pending, 1)))
			tasks__finish(ts, t, TASK_FAILED, NULL, 0, cJSON_Duplicate(pending, 1));
		cJSON_Delete(pending);
	} else if (x->sandbox_code) {
		cJSON *e = task_envelope(x->sandbox_code, x->sandbox_message, 0, x->limit
			? "The job needs more than its sandbox allows: call the tool again with less work, or raise the limit named in error.limit (sandbox section of the config)."
			: "The job tried something its sandbox forbids (docs/sandbox.md); fix the job, or give the tool a profile that allows it.");
		if (x->limit) {
			cJSON_AddStringToObject(e, "limit", x->limit);
			cJSON_AddNumberToObject(e, "limitValue", (double)x->limit_value);
		}
		cJSON_AddStringToObject(e, "output", x->tail);
		tasks__finish(ts, t, TASK_FAILED, NULL, 0, e);
	} else if (x->exited && x->status == 0) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddNumberToObject(r, "exitCode", 0);
		cJSON_AddStringToObject(r, "output", x->tail);
		tasks__finish(ts, t, TASK_COMPLETED, r, 0, NULL);
	} else {
		if (x->exited)
			snprintf(msg, sizeof msg, "The job exited with status %d.", x->status);
		else
			snprintf(msg, sizeof msg, "The job was killed by signal %d (%s).", x->status,
			         strsignal(x->status));
		cJSON *e = task_envelope("job_failed", msg, 0,
			"Read error.output (the end of the job's output) and forkpoint logs; fix the input and call the tool again.");
		if (x->exited)
			cJSON_AddNumberToObject(e, "exitCode", x->status);
		else
			cJSON_AddNumberToObject(e, "signal", x->status);
		cJSON_AddStringToObject(e, "output", x->tail);
		if (!try_retry(ts, t, cJSON_Duplicate(e, 1)))
			tasks__finish(ts, t, TASK_FAILED, NULL, 0, e);
		else
			cJSON_Delete(e);
	}
}

/* A finished task never runs again, so our copy of its large arguments and the folders its
 * job left empty (work/inputs, work/outputs, work) are removed at once: a directory costs a
 * block, and a trivial task would otherwise keep ~16 KiB on disk until it expires.  Only
 * empty ones go (rmdir), so whatever the job left, artifacts included, stays until the task's
 * expiry removes it all. */
static void prune_work_dir(struct tasks *ts, const struct task *t)
{
	static const enum layout_task_part sub[] = { LAYOUT_TASK_INPUTS, LAYOUT_TASK_OUTPUTS, LAYOUT_TASK_WORK };
	char path[4300];
	if (layout_task(path, sizeof path, ts->sv->state_dir, t->id, LAYOUT_TASK_ARGS) == 0)
		unlink(path);   /* our copy of the arguments, if they were too large for the environment */
	for (size_t i = 0; i < sizeof sub / sizeof *sub; i++)
		if (layout_task(path, sizeof path, ts->sv->state_dir, t->id, sub[i]) == 0)
			rmdir(path);   /* ENOTEMPTY or ENOENT: nothing to do */
}

static void on_exit_cb(void *owner, struct job *j, const struct job_exit *x)
{
	struct task *t = owner;
	struct tasks *ts = t->owner;
	t->job = NULL;
	ts->running--;
	if (t->timeout_timer) {
		loop_timer_cancel(ts->sv->loop, t->timeout_timer);
		t->timeout_timer = NULL;
	}
	if (t->result_held) {
		/* The job sent its result; how it ended after that does not matter. */
		task_frames_complete_held(ts, t);
	} else if (t->result_pending) {
		/* The job delivered its result; only storing it is left (store_result). */
		cJSON_Delete(t->pending_error);
		t->pending_error = NULL;
	} else if (!TASK_TERMINAL(t->status)) {
		decide_exit(ts, t, x);
	}
	fplog(&ts->sv->log, FPLOG_DEBUG, t->id, "job exited (%s %d)", x->exited ? "status" : "signal", x->status);
	job_free(j);
	if (TASK_TERMINAL(t->status))
		prune_work_dir(ts, t);
	tasks__start_next(ts);
}

static const struct job_callbacks job_cb = { .on_frame = task_frames_on_frame, .on_exit = on_exit_cb };

/* ---- starting jobs ---------------------------------------------------------------------- */

/* The job could not be started (rc, err say why): the task fails with what fits the cause. */
static void start_failed(struct tasks *ts, struct task *t, int rc, const char *err)
{
	char msg[4500];
	snprintf(msg, sizeof msg, "The job could not be started: %s.", err);
	if (rc == -ENOTSUP)   /* sandbox.require cannot be met: refuse rather than run weaker */
		tasks__fail(ts, t, "sandbox_violation", msg, 0,
		     "The tool demands a sandbox this server cannot provide; tell the operator "
		     "(forkpoint sandbox-check shows what the host supports).");
	else if (rc == -E2BIG)   /* the arguments, not the server: the same call fails again */
		tasks__fail(ts, t, "invalid_arguments", msg, 0, E2BIG_HINT);
	else
		tasks__fail(ts, t, "job_failed", msg, 1,
		     "This is a problem with the server's setup, not the arguments; tell the operator, or retry later.");
}

static void on_timeout(struct loop *l, void *arg)
{
	struct task *t = arg;
	struct tasks *ts = t->owner;
	char msg[160];
	(void)l;
	t->timeout_timer = NULL;
	if (t->result_held) {
		/* It has delivered its result and only lingers: end it, the task completes. */
		if (t->job)
			job_kill(t->job, NULL);
		return;
	}
	snprintf(msg, sizeof msg, "The job ran longer than timeoutSeconds (%g s) and was stopped.",
	         t->tool->timeout_seconds);
	tasks__fail(ts, t, "timeout", msg, 1,
	     "Call the tool again with less work (a smaller input), or raise timeoutSeconds in the config.");
	if (t->job)
		job_kill(t->job, NULL);
}

static int spawn_job(struct tasks *ts, struct task *t);

/* The input files of a task are in place (or not): its job starts now, in the slot it held. */
static void inputs_copied(void *arg, const char *id, int rc, cJSON *env)
{
	struct tasks *ts = arg;
	struct task *t = tasks_find(ts, id);
	ts->running--;
	if (rc == -ECANCELED || (ts->sv->workers && workers_stopping(ts->sv->workers))) {
		cJSON_Delete(env);
		return;   /* the server is stopping: the task starts again at the next run */
	}
	if (!t || TASK_TERMINAL(t->status))
		cJSON_Delete(env);   /* cancelled meanwhile */
	else if (rc < 0)
		tasks__finish(ts, t, TASK_FAILED, NULL, 0, env);
	else
		spawn_job(ts, t);
	tasks__start_next(ts);
}

static int start_job(struct tasks *ts, struct task *t)
{
	struct supervisor *sv = ts->sv;
	const struct tool_cfg *tool = t->tool;
	char work[4200], err[4400];
	int rc;

	t->queued = 0;
	if (!tool) {
		tasks__fail(ts, t, "internal_error", "The tool of this task is no longer in the server's config.", 0,
		     "Ask the operator to restore the tool, or call another tool.");
		return -ENOENT;
	}
	layout_task(work, sizeof work, sv->state_dir, t->id, LAYOUT_TASK_WORK);
	if ((rc = task_env_mkdir_p(work, 0700)) < 0) {
		snprintf(err, sizeof err, "cannot create %s: %s", work, strerror(-rc));
		start_failed(ts, t, rc, err);
		return rc;
	}
	if (sv->transfers) {
		/* Uploaded files named in the arguments are placed read-only in work/inputs/; large
		 * copies are made on the worker pool, and the job starts once they are done. */
		cJSON *env = NULL;
		struct inputs *later = NULL;
		if (inputs_prepare_later(sv->transfers, tool->input_schema, t->args, work,
		                         sv->workers ? &later : NULL, &env) < 0) {
			tasks__finish(ts, t, TASK_FAILED, NULL, 0, env ? env : task_envelope("invalid_arguments",
			       "An input file could not be placed in the job's work area.", 1, "Check the file handles."));
			return -EINVAL;
		}
		if (later) {
			ts->running++;   /* the task holds its slot while its files are copied */
			inputs_run(sv, later, t->id, inputs_copied, ts);
			return 0;
		}
	}
	return spawn_job(ts, t);
}

/* The rest of a start: argv and environment, the process, its START record and its start
 * frame (held until the commit). */
static int spawn_job(struct tasks *ts, struct task *t)
{
	struct supervisor *sv = ts->sv;
	const struct tool_cfg *tool = t->tool;
	char dir[4096], work[4200], logp[4200], err[4400];
	char **argv = NULL, **envp = NULL;
	int rc;
	int attempt = t->attempt + 1;   /* counted once its START record is in */

	layout_task(dir, sizeof dir, sv->state_dir, t->id, LAYOUT_TASK_DIR);
	layout_task(work, sizeof work, sv->state_dir, t->id, LAYOUT_TASK_WORK);
	layout_task(logp, sizeof logp, sv->state_dir, t->id, LAYOUT_TASK_LOG);
	if ((rc = task_env_argv(tool, t->args, &argv)) < 0) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	if ((rc = task_env_build(sv, t, attempt, work, &envp, err, sizeof err)) < 0)
		goto fail;
	struct job_spec spec = {
		.task_id = t->id, .argv = argv, .envp = envp,
		.cwd = tool->cwd ? tool->cwd : work, .log_path = logp,
		.log_max_bytes = sv->cfg->server.log_max_bytes,
		.max_frame = (size_t)sv->cfg->server.max_frame_bytes,
		.sandbox = &tool->sandbox, .work_dir = work,
	};
	rc = job_start(sv, &spec, &job_cb, t, &t->job, err, sizeof err);
	if (rc < 0)
		goto fail;
	ts->running++;
	t->job_started_mono = loop_now();
	if (tool->timeout_seconds > 0)
		t->timeout_timer = loop_timer_in(sv->loop, (int64_t)(tool->timeout_seconds * 1000.0), on_timeout, t);
	struct store_rec r;
	tasks__rec_init(&r, STORE_REC_START, t);
	r.u.start.attempt = attempt;
	r.u.start.sandbox = job_sandbox_json(t->job);   /* the sandbox this attempt really got */
	if ((rc = tasks__change(ts, t, &r)) < 0) {
		/* The attempt is not on record: it must not run.  Its start frame is still held, so
		 * the job has done nothing yet. */
		char msg[200];
		snprintf(msg, sizeof msg, "The job's start could not be recorded: %s.", strerror(-rc));
		tasks__fail(ts, t, "internal_error", msg, 1, "The server's storage failed; retry the call later.");
		job_kill(t->job, NULL);
		goto out;
	}
	fplog(&sv->log, FPLOG_INFO, t->id, "started %s (attempt %d, pid %d)%s", tool->name, t->attempt,
	      (int)job_pid(t->job), t->checkpoint ? " from its checkpoint" : "");
	if (task_frames_send_start(t) < 0) {
		/* The arguments and checkpoint do not fit in one frame: the job could never start. */
		tasks__fail(ts, t, "internal_error", "The job's start frame (arguments and checkpoint) is larger than a "
		     "frame may be (8 MiB, 1048576 values).", 0,
		     "Call the tool with smaller arguments; a job's checkpoint must stay well under 8 MiB.");
		job_kill(t->job, NULL);
	}
out:
	task_env_free_strv(argv);
	task_env_free_strv(envp);
	return 0;
fail:
	task_env_free_strv(argv);
	task_env_free_strv(envp);
	t->queued = 0;
	start_failed(ts, t, rc, err);
	return rc;
}

void tasks__enqueue(struct tasks *ts, struct task *t)
{
	t->queued = 1;
	t->qnext = NULL;
	if (ts->qtail)
		ts->qtail->qnext = t;
	else
		ts->qhead = t;
	ts->qtail = t;
	ts->qlen++;
	t->qpos = (int)ts->qlen;
}

/* Why the durability check: a job acts on the world, so it must never start for a task whose
 * records (its creation, the answer or retry that requeued it) a crash could still lose; the
 * head of the queue waits for the turn's commit (tasks_release), and FIFO order is kept. */
size_t tasks__start_next(struct tasks *ts)
{
	size_t n = 0;
	while (ts->qhead && ts->running < ts->sv->cfg->server.max_concurrent &&
	       persist_task_durable(ts->sv->persist, ts->qhead)) {
		struct task *t = ts->qhead;
		ts->qhead = t->qnext;
		if (!ts->qhead)
			ts->qtail = NULL;
		t->qnext = NULL;
		ts->qlen--;
		ts->qpos_dirty = 1;
		start_job(ts, t);
		n++;
	}
	return n;
}

