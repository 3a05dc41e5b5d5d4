/* supervisor/tasks.c — see tasks.h. */
#include "supervisor/core/tasks.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <ftw.h>
#include <unistd.h>

#include "proto/frame.h"
#include "state/layout.h"
#include "supervisor/core/artifacts.h"
#include "supervisor/core/job.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/task_apply.h"
#include "supervisor/core/task_env.h"
#include "supervisor/core/task_table.h"
#include "supervisor/core/task_expiry.h"
#include "supervisor/core/transfer.h"
#include "proto/io.h"

#include "supervisor/core/tasks_int.h"



struct task *tasks_find(struct tasks *ts, const char *id)
{
	return task_table_find(ts->tab, id);
}

struct task *tasks_newest(struct tasks *ts)
{
	return ts->head;
}

size_t tasks_count(const struct tasks *ts)
{
	return ts->count;
}

static const char *const status_names[] = { "working", "input_required", "completed", "failed", "cancelled" };

const char *task_status_name(enum task_status s)
{
	return (unsigned)s < 5 ? status_names[s] : "unknown";
}

int task_status_parse(const char *name)
{
	for (int i = 0; name && i < 5; i++)
		if (strcmp(name, status_names[i]) == 0)
			return i;
	return -1;
}

cJSON *task_envelope(const char *code, const char *message, int retryable, const char *hint)
{
	cJSON *e = cJSON_CreateObject();
	if (!e)
		return NULL;
	cJSON_AddStringToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", message);
	cJSON_AddBoolToObject(e, "retryable", retryable);
	cJSON_AddStringToObject(e, "recoveryHint", hint ? hint : "");
	return e;
}

void tasks_set_observer(struct tasks *ts, task_observer fn, void *arg)
{
	ts->observer = fn;
	ts->observer_arg = arg;
}

void tasks__notify(struct tasks *ts, struct task *t, enum task_event ev)
{
	if (ts->observer)
		ts->observer(ts->observer_arg, t, ev);
}

struct tasks *tasks_new(struct supervisor *sv)
{
	struct tasks *ts = calloc(1, sizeof *ts);
	if (!ts)
		return NULL;
	ts->sv = sv;
	if (!(ts->tab = task_table_new()) || !(ts->tombs = tombs_new())) {
		task_table_free(ts->tab);
		free(ts);
		return NULL;
	}
	return ts;
}

struct task *task_alloc(const char *id)
{
	struct task *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	snprintf(t->id, sizeof t->id, "%s", id);
	t->fraction = -1;
	t->status = TASK_WORKING;
	return t;
}

void task_free(struct task *t)
{
	free(t->tool_name);
	free(t->held);
	cJSON_Delete(t->args);
	free(t->progress_msg);
	task_clear_question(t);
	for (struct task_answer *a = t->answers, *n; a; a = n) {
		n = a->next;
		free(a->question_id);
		cJSON_Delete(a->response);
		free(a);
	}
	cJSON_Delete(t->result);
	free(t->result_summary);
	free(t->pending_summary);
	free(t->result_pending);
	cJSON_Delete(t->error);
	cJSON_Delete(t->pending_error);
	cJSON_Delete(t->pending_result);
	cJSON_Delete(t->sandbox);
	cJSON_Delete(t->artifacts);
	free(t->checkpoint);
	free(t->cancel_reason);
	free(t);
}

void task_clear_question(struct task *t)
{
	free(t->question_id);
	free(t->question_prompt);
	cJSON_Delete(t->question_choices);
	t->question_id = t->question_prompt = NULL;
	t->question_choices = NULL;
}

/* At shutdown: end every job; one that had sent its result (and only lingered) completes its
 * task now that its tree is gone, durably, instead of being run again by the next start. */
static void end_jobs(struct tasks *ts)
{
	int done = 0;
	for (struct task *t = ts->head; t; t = t->next) {
		if (!t->job)
			continue;
		job_free(t->job);
		t->job = NULL;
		if (t->result_held && !TASK_TERMINAL(t->status)) {
			task_frames_complete_held(ts, t);
			done = 1;
		}
	}
	if (done && persist_commit(ts->sv->persist) < 0)
		fplog(&ts->sv->log, FPLOG_ERROR, NULL, "could not store the results of jobs ended at shutdown");
}

void tasks_free(struct tasks *ts)
{
	if (!ts)
		return;
	end_jobs(ts);
	for (struct task *t = ts->head, *n; t; t = n) {
		n = t->next;
		if (t->job)
			job_free(t->job);
		if (t->timeout_timer)
			loop_timer_cancel(ts->sv->loop, t->timeout_timer);
		if (t->retry_timer)
			loop_timer_cancel(ts->sv->loop, t->retry_timer);
		if (t->store_timer)
			loop_timer_cancel(ts->sv->loop, t->store_timer);
		task_free(t);
	}
	tombs_free(ts->tombs);
	task_table_free(ts->tab);
	free(ts);
}

/* ---- transitions ---------------------------------------------------------------- */

/* A record about t with its id and the time of the change; the caller fills the rest. */
void tasks__rec_init(struct store_rec *r, enum store_rec_type type, const struct task *t)
{
	memset(r, 0, sizeof *r);
	r->type = type;
	memcpy(r->task_id, t->id, sizeof r->task_id);
	r->at = loop_wall_ms();
}

/* Apply a record the live path built: it cannot be malformed, so a failure is out of memory,
 * logged (the task keeps what task_apply managed to set). */
int tasks__apply_live(struct tasks *ts, struct task *t, const struct store_rec *r)
{
	char err[256];
	int rc = task_apply(t, r, err, sizeof err);
	if (rc < 0)
		fplog(&ts->sv->log, FPLOG_ERROR, t->id, "%s", err);
	return rc;
}

/* The live path of every promise: the record goes to the store first, and only once it is
 * appended does the task change (task_apply, as replay will).  0, or the append's -errno and
 * nothing changed. */
int tasks__change(struct tasks *ts, struct task *t, const struct store_rec *r)
{
	int rc = persist_record(ts->sv->persist, t, r);
	return rc < 0 ? rc : tasks__apply_live(ts, t, r);
}

/* New progress (msg NULL: the current one), which is not a promise: applied now, journaled
 * with the next batch. */
void tasks__set_progress(struct tasks *ts, struct task *t, const char *msg, double fraction, int journal)
{
	struct store_rec r;
	tasks__rec_init(&r, STORE_REC_PROGRESS, t);
	r.u.progress.msg = msg ? msg : t->progress_msg;
	r.u.progress.fraction = fraction;
	r.u.progress.has_fraction = 1;
	tasks__apply_live(ts, t, &r);
	t->progress_seq++;
	if (journal)
		persist_progress(ts->sv->persist, t);
}

/* A large result still waiting for its blob is dropped once the task ends another way
 * (cancel, timeout), or once it is stored. */
static void drop_pending_result(struct tasks *ts, struct task *t)
{
	if (t->store_timer) {
		loop_timer_cancel(ts->sv->loop, t->store_timer);
		t->store_timer = NULL;
	}
	free(t->result_pending);
	t->result_pending = NULL;
	t->result_pending_len = 0;
}

/* The FINISH record of an outcome: status, result (printed; a large one goes to a blob now, a
 * NULL one is the blob already stored for t, if any), error and artifacts as JSON text, kept
 * in texts[] for the caller to free.  0, or -errno when a value could not be printed or
 * stored: the record then carries what could be (an inline result, or none). */
static int finish_rec(struct tasks *ts, struct task *t, enum task_status st, const cJSON *result,
                      int is_mcp, const cJSON *error, const cJSON *artifacts, struct store_rec *r,
                      char *texts[3], char hex[65])
{
	tasks__rec_init(r, STORE_REC_FINISH, t);
	r->u.finish.status = task_status_name(st);
	r->u.finish.expires = r->at + (int64_t)((t->tool ? t->tool->ttl_seconds : 86400.0) * 1000.0);
	int rc = 0;
	if (!result && t->pending_blob[0] && st == TASK_COMPLETED) {
		/* A large result, stored already (task_frames.c store_result). */
		memset(&r->u.finish.result, 0, sizeof r->u.finish.result);
		r->u.finish.result.blob = t->pending_blob;
		r->u.finish.result.bytes = (int64_t)t->pending_blob_bytes;
		r->u.finish.result.summary = t->pending_summary ? t->pending_summary : "a JSON value";
	} else {
		rc = persist_result_rec(ts->sv->persist, result, t, &texts[0], hex, &r->u.finish.result);
	}
	if (rc < 0 && texts[0]) {
		memset(&r->u.finish.result, 0, sizeof r->u.finish.result);
		r->u.finish.result.text = texts[0];   /* kept in memory at least */
	}
	r->u.finish.result.mcp = is_mcp;
	int rc2 = task_json_text(error, &texts[1]);
	if (rc2 == 0)
		rc2 = task_json_text(artifacts, &texts[2]);
	r->u.finish.error = texts[1];
	r->u.finish.artifacts = texts[2];
	return rc < 0 ? rc : rc2;
}

/* The single place a task enters a terminal state.  The outcome is applied even when its
 * record cannot be stored (the job is gone; the task must end): that is logged, and while
 * commits fail nothing that depends on it is answered. */
void tasks__finish(struct tasks *ts, struct task *t, enum task_status st, cJSON *result,
                   int is_mcp, cJSON *error)
{
	if (TASK_TERMINAL(t->status)) {
		cJSON_Delete(result);
		cJSON_Delete(error);
		return;
	}
	drop_pending_result(ts, t);
	cJSON *artifacts = NULL;
	if (st == TASK_COMPLETED && ts->sv->transfers) {
		/* Files the job left in outputs/ become the task's artifacts, listed with its result. */
		char work[4200];
		layout_task(work, sizeof work, ts->sv->state_dir, t->id, LAYOUT_TASK_WORK);
		artifacts = artifacts_collect(ts->sv->transfers, t, work);
	}
	struct store_rec r;
	char *texts[3] = { NULL, NULL, NULL }, hex[65] = "", old_ckpt[65];
	memcpy(old_ckpt, t->checkpoint_blob, sizeof old_ckpt);
	int rc = finish_rec(ts, t, st, result, is_mcp, error, st == TASK_COMPLETED ? artifacts : t->artifacts,
	                    &r, texts, hex);
	if (rc == 0)
		rc = persist_record(ts->sv->persist, t, &r);
	tasks__apply_live(ts, t, &r);
	/* A finished task never resumes: its checkpoint blob goes once the outcome is durable. */
	if (rc == 0 && old_ckpt[0])
		persist_release_blob(ts->sv->persist, old_ckpt);
	for (int i = 0; i < 3; i++)
		free(texts[i]);
	t->pending_blob[0] = 0;
	free(t->pending_summary);
	t->pending_summary = NULL;
	cJSON_Delete(result);
	cJSON_Delete(artifacts);
	if (rc < 0)
		fplog(&ts->sv->log, FPLOG_ERROR, t->id, "could not store the outcome durably");
	if (t->timeout_timer) {
		loop_timer_cancel(ts->sv->loop, t->timeout_timer);
		t->timeout_timer = NULL;
	}
	if (t->retry_timer) {
		loop_timer_cancel(ts->sv->loop, t->retry_timer);
		t->retry_timer = NULL;
	}
	fplog(&ts->sv->log, st == TASK_COMPLETED ? FPLOG_INFO : FPLOG_NOTICE, t->id, "%s%s%s",
	      task_status_name(st), error ? ": " : "",
	      error ? cJSON_GetStringValue(cJSON_GetObjectItem(error, "message")) : "");
	cJSON_Delete(error);
	tasks__notify(ts, t, TASK_EV_STATUS);
}

void tasks__fail(struct tasks *ts, struct task *t, const char *code, const char *msg,
                 int retryable, const char *hint)
{
	tasks__finish(ts, t, TASK_FAILED, NULL, 0, task_envelope(code, msg, retryable, hint));
}

/* resource_limit for a limit the supervisor enforces itself (checkpoint quota, result size,
 * disk budget): the envelope names the config key and its value, as the sandbox's limits do. */
void tasks__fail_limit(struct tasks *ts, struct task *t, const char *msg, const char *limit, long value)
{
	cJSON *e = task_envelope("resource_limit", msg, 0,
		"The job stores more than the server allows: call the tool again with less work, or raise "
		"the limit named in error.limit in the config.");
	if (e) {
		cJSON_AddStringToObject(e, "limit", limit);
		cJSON_AddNumberToObject(e, "limitValue", (double)value);
	}
	tasks__finish(ts, t, TASK_FAILED, NULL, 0, e);
	if (t->job)
		job_kill(t->job, NULL);
}

/* Why the task is in the table before its record is appended: the id must be unique among
 * live and expired ones while it is chosen.  Why it is not started here: its job may run only
 * once the create record is durable (start_next, after the turn's commit). */
int tasks_create(struct tasks *ts, const struct tool_cfg *tool, cJSON *args, struct task **out)
{
	int rc;
	if (ts->qlen >= (size_t)ts->sv->cfg->server.max_queue &&
	    ts->running >= ts->sv->cfg->server.max_concurrent) {
		cJSON_Delete(args);
		return -ENOBUFS;
	}
	struct task *t = task_alloc("");
	if (!t) {
		cJSON_Delete(args);
		return -ENOMEM;
	}
	/* 128 bits from the OS: a collision with a live or expired id is practically impossible,
	 * but checking costs nothing. */
	do {
		rc = io_random_hex(t->id);
	} while (rc == 0 && (tasks_find(ts, t->id) || tasks_tombstone_find(ts, t->id)));
	struct store_rec r;
	char *text = NULL;
	if (rc == 0 && (rc = task_json_text(args, &text)) == 0 && (rc = task_table_put(ts->tab, t)) == 0) {
		tasks__rec_init(&r, STORE_REC_CREATE, t);
		r.u.create.tool = tool->name;
		r.u.create.args = text;
		/* The create record comes first: a task whose creation is not in the journal must
		 * not exist at all, or its later records would name a task replay has never heard
		 * of. */
		if ((rc = tasks__change(ts, t, &r)) < 0)
			task_table_del(ts->tab, t);
	}
	free(text);
	cJSON_Delete(args);
	if (rc < 0) {
		task_free(t);
		return rc;
	}
	t->owner = ts;
	t->tool = tool;
	t->next = ts->head;
	if (ts->head)
		ts->head->prev = t;
	ts->head = t;
	ts->count++;
	tasks__enqueue(ts, t);
	fplog(&ts->sv->log, FPLOG_INFO, t->id, "created %s", tool->name);
	*out = t;
	return 0;
}

int tasks_respond(struct tasks *ts, struct task *t, const cJSON *response)
{
	if (t->status != TASK_INPUT_REQUIRED || !t->question_id)
		return -EINVAL;
	struct store_rec r;
	char *text = NULL;
	int rc = task_json_text(response, &text);
	if (rc < 0)
		return rc;
	tasks__rec_init(&r, STORE_REC_ANSWER, t);
	r.u.answer.qid = t->question_id;
	r.u.answer.response = text ? text : "null";
	/* Not recorded, so not accepted: the task still waits for its answer. */
	rc = tasks__change(ts, t, &r);
	free(text);
	if (rc < 0)
		return rc;
	const struct task_answer *a = t->answers;   /* the one just applied */
	if (t->job)
		task_frames_send_answer(t, a->question_id, a->response);
	/* Asked before a restart: no job is waiting for the answer.  Run it again from its
	 * checkpoint; when it asks the same question the recorded answer is replayed to it. */
	if (!t->job && !t->queued) {
		tasks__enqueue(ts, t);
		tasks__start_next(ts);
	}
	fplog(&ts->sv->log, FPLOG_INFO, t->id, "answered %s", a->question_id);
	tasks__notify(ts, t, TASK_EV_STATUS);
	return 0;
}

int tasks_cancel(struct tasks *ts, struct task *t, const char *reason)
{
	if (TASK_TERMINAL(t->status))
		return -EALREADY;
	if (t->result_held) {
		/* The result is in; the task completes as soon as the lingering job is gone. */
		if (t->job)
			job_kill(t->job, NULL);
		return -EALREADY;
	}
	t->cancel_requested = 1;
	free(t->cancel_reason);
	t->cancel_reason = strdup(reason ? reason : "cancelled by the client");
	if (t->queued)
		tasks__dequeue(ts, t);
	if (t->retry_timer) {
		loop_timer_cancel(ts->sv->loop, t->retry_timer);
		t->retry_timer = NULL;
	}
	tasks__finish(ts, t, TASK_CANCELLED, NULL, 0,
	       task_envelope("cancelled", t->cancel_reason, 0, "The task was cancelled; call the tool again to start over."));
	if (t->job) {
		task_frames_send_cancel(t, t->cancel_reason);
		job_kill_after(t->job, (long)(ts->sv->cfg->server.cancel_grace_seconds * 1000.0));
	}
	tasks__start_next(ts);
	return 0;
}

/* ---- restore, expiry ------------------------------------------------------------------------ */

int tasks_insert(struct tasks *ts, struct task *t)
{
	int rc = task_table_put(ts->tab, t);
	if (rc < 0)
		return rc;
	t->owner = ts;
	/* Keep newest-first order; replay mostly inserts in creation order, so this is O(1). */
	struct task *after = NULL, *cur = ts->head;
	while (cur && cur->created_ms > t->created_ms) {
		after = cur;
		cur = cur->next;
	}
	t->prev = after;
	t->next = cur;
	if (cur)
		cur->prev = t;
	if (after)
		after->next = t;
	else
		ts->head = t;
	ts->count++;
	return 0;
}

void tasks_remove(struct tasks *ts, struct task *t)
{
	if (t->job)
		return;   /* never while a process runs; the collector tries again later */
	if (t->queued && !t->retry_timer)
		tasks__dequeue(ts, t);   /* one waiting for its retry timer is not on the run queue */
	if (t->on_held) {
		for (struct task **pp = &ts->held; *pp; pp = &(*pp)->held_next)
			if (*pp == t) {
				*pp = t->held_next;
				break;
			}
	}
	if (t->retry_timer)
		loop_timer_cancel(ts->sv->loop, t->retry_timer);
	if (t->timeout_timer)
		loop_timer_cancel(ts->sv->loop, t->timeout_timer);
	if (t->store_timer)
		loop_timer_cancel(ts->sv->loop, t->store_timer);
	task_table_del(ts->tab, t);
	if (t->prev)
		t->prev->next = t->next;
	else
		ts->head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	ts->count--;
	task_free(t);
}

/* A restart from scratch (resume policy "restart"): the job gets no checkpoint in its start
 * frame.  Applied as an empty checkpoint, not appended: the policy is applied again after
 * every replay, so the journal need not say it. */
static void drop_checkpoint(struct tasks *ts, struct task *t)
{
	struct store_rec r;
	tasks__rec_init(&r, STORE_REC_CHECKPOINT, t);
	r.at = t->updated_ms;
	r.u.checkpoint.seq = t->checkpoint_seq;
	tasks__apply_live(ts, t, &r);
}

void tasks_recover(struct tasks *ts)
{
	/* Oldest first, so the queue keeps creation order. */
	struct task *last = ts->head;
	while (last && last->next)
		last = last->next;
	for (struct task *t = last; t; t = t->prev) {
		t->tool = config_tool(ts->sv->cfg, t->tool_name);
		if (TASK_TERMINAL(t->status))
			continue;
		if (t->status == TASK_INPUT_REQUIRED) {
			/* Still shows its question; answering it re-runs the job (tasks_respond), from
			 * its checkpoint unless the tool says to restart from scratch.  Either way the
			 * recorded answers are replayed, so the question is not asked twice. */
			t->was_running = 0;
			if (t->tool && t->tool->resume == RESUME_RESTART) {
				drop_checkpoint(ts, t);
			}
			continue;
		}
		if (t->was_running) {
			enum tool_resume policy = t->tool ? t->tool->resume : RESUME_FAIL;
			t->was_running = 0;
			if (policy == RESUME_FAIL) {
				tasks__fail(ts, t, "interrupted", "The server stopped while the job was running.", 1,
				     "Call the tool again to start over.");
				continue;
			}
			if (policy == RESUME_RESTART) {
				drop_checkpoint(ts, t);
			}
			fplog(&ts->sv->log, FPLOG_NOTICE, t->id, "resuming after a restart (%s)",
			      policy == RESUME_CHECKPOINT && t->checkpoint ? "from its last checkpoint" : "from the start");
		}
		tasks__schedule(ts, t);
	}
	tasks__start_next(ts);
}

int tasks_tombstone_add(struct tasks *ts, const char *id, int64_t until)
{
	return tombs_add(ts->tombs, id, until);
}

int64_t tasks_tombstone_find(const struct tasks *ts, const char *id)
{
	return tombs_find(ts->tombs, id);
}

void tasks_tombstone_each(struct tasks *ts, void (*fn)(void *arg, const char *id, int64_t until), void *arg)
{
	tombs_each(ts->tombs, fn, arg);
}

size_t tasks_collect(struct tasks *ts, int64_t now)
{
	return task_expiry_collect(ts->sv, ts, ts->tombs, now);
}
