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
#include "supervisor/core/job.h"
#include "supervisor/mcp/mcpresult.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/task_apply.h"
#include "supervisor/core/task_env.h"
#include "supervisor/core/task_table.h"
#include "supervisor/core/task_expiry.h"
#include "supervisor/core/transfer.h"
#include "proto/io.h"

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
	struct task_tombs *tombs;    /* expired ids */
};


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

static void notify(struct tasks *ts, struct task *t, enum task_event ev)
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
	if (!(ts->tab = task_table_new()) || !(ts->tombs = task_tombs_new())) {
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

static void complete_held(struct tasks *ts, struct task *t);

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
			complete_held(ts, t);
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
	task_tombs_free(ts->tombs);
	task_table_free(ts->tab);
	free(ts);
}

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

/* ---- transitions ---------------------------------------------------------------- */

/* A record about t with its id and the time of the change; the caller fills the rest. */
static void rec_init(struct store_rec *r, enum store_rec_type type, const struct task *t)
{
	memset(r, 0, sizeof *r);
	r->type = type;
	memcpy(r->task_id, t->id, sizeof r->task_id);
	r->at = loop_wall_ms();
}

/* Apply a record the live path built: it cannot be malformed, so a failure is out of memory,
 * logged (the task keeps what task_apply managed to set). */
static int apply_live(struct tasks *ts, struct task *t, const struct store_rec *r)
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
static int change(struct tasks *ts, struct task *t, const struct store_rec *r)
{
	int rc = persist_record(ts->sv->persist, t, r);
	return rc < 0 ? rc : apply_live(ts, t, r);
}

/* New progress (msg NULL: the current one), which is not a promise: applied now, journaled
 * with the next batch. */
static void set_progress(struct tasks *ts, struct task *t, const char *msg, double fraction, int journal)
{
	struct store_rec r;
	rec_init(&r, STORE_REC_PROGRESS, t);
	r.u.progress.msg = msg ? msg : t->progress_msg;
	r.u.progress.fraction = fraction;
	r.u.progress.has_fraction = 1;
	apply_live(ts, t, &r);
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
	rec_init(r, STORE_REC_FINISH, t);
	r->u.finish.status = task_status_name(st);
	r->u.finish.expires = r->at + (int64_t)((t->tool ? t->tool->ttl_seconds : 86400.0) * 1000.0);
	int rc = persist_result_rec(ts->sv->persist, result, t, &texts[0], hex, &r->u.finish.result);
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
static void finish(struct tasks *ts, struct task *t, enum task_status st, cJSON *result,
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
		snprintf(work, sizeof work, "%s/tasks/%s/work", ts->sv->state_dir, t->id);
		artifacts = transfer_collect_artifacts(ts->sv->transfers, t, work);
	}
	struct store_rec r;
	char *texts[3] = { NULL, NULL, NULL }, hex[65] = "", old_ckpt[65];
	memcpy(old_ckpt, t->checkpoint_blob, sizeof old_ckpt);
	int rc = finish_rec(ts, t, st, result, is_mcp, error, st == TASK_COMPLETED ? artifacts : t->artifacts,
	                    &r, texts, hex);
	if (rc == 0)
		rc = persist_record(ts->sv->persist, t, &r);
	apply_live(ts, t, &r);
	/* A finished task never resumes: its checkpoint blob goes once the outcome is durable. */
	if (rc == 0 && old_ckpt[0])
		persist_release_blob(ts->sv->persist, old_ckpt);
	for (int i = 0; i < 3; i++)
		free(texts[i]);
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
	notify(ts, t, TASK_EV_STATUS);
}

static void fail(struct tasks *ts, struct task *t, const char *code, const char *msg,
                 int retryable, const char *hint)
{
	finish(ts, t, TASK_FAILED, NULL, 0, task_envelope(code, msg, retryable, hint));
}

/* resource_limit for a limit the supervisor enforces itself (checkpoint quota, result size,
 * disk budget): the envelope names the config key and its value, as the sandbox's limits do. */
static void fail_limit(struct tasks *ts, struct task *t, const char *msg, const char *limit, long value)
{
	cJSON *e = task_envelope("resource_limit", msg, 0,
		"The job stores more than the server allows: call the tool again with less work, or raise "
		"the limit named in error.limit in the config.");
	if (e) {
		cJSON_AddStringToObject(e, "limit", limit);
		cJSON_AddNumberToObject(e, "limitValue", (double)value);
	}
	finish(ts, t, TASK_FAILED, NULL, 0, e);
	if (t->job)
		job_kill(t->job, NULL);
}

/* ---- frames to the job -------------------------------------------------------------- */

/* Frames to a job are held until the turn's journal commit: the job must never act on a
 * checkpoint ack or an answer the supervisor could still forget. */
static int send_frame(struct task *t, msgpack_sbuffer *sb)
{
	int rc = frame_finish(sb);
	if (rc == 0 && t->job) {
		unsigned char *h = realloc(t->held, t->held_len + sb->size);
		if (!h) {
			rc = -ENOMEM;
		} else {
			memcpy(h + t->held_len, sb->data, sb->size);
			t->held = h;
			t->held_len += sb->size;
			if (!t->on_held) {
				struct tasks *ts = t->owner;
				t->on_held = 1;
				t->held_next = ts->held;
				ts->held = t;
			}
		}
	}
	msgpack_sbuffer_destroy(sb);
	return rc;
}

static size_t start_next(struct tasks *ts);

/* Send the frames held for jobs (the commit they waited for has succeeded). */
static void release_held(struct tasks *ts)
{
	struct task *t = ts->held;
	ts->held = NULL;
	while (t) {
		struct task *n = t->held_next;
		if (t->job && t->held_len)
			job_send(t->job, t->held, t->held_len);
		free(t->held);
		t->held = NULL;
		t->held_len = 0;
		t->held_next = NULL;
		t->on_held = 0;
		t = n;
	}
}

/* Why a second commit here: the tasks whose records have just become durable may start now,
 * and each start appends its START record and holds its start frame; committing at once lets
 * those frames go out in this turn instead of waiting for the next event to wake the loop.  If
 * that commit fails, the frames stay held and the next turn's commit retries it. */
void tasks_release(struct tasks *ts)
{
	release_held(ts);
	if (start_next(ts) > 0 && persist_commit(ts->sv->persist) == 0)
		release_held(ts);
}

static int send_start(struct task *t)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	frame_begin(&sb, &pk);
	int n = 6 + (t->checkpoint ? 2 : 0) + (t->cancel_requested ? 1 : 0);
	msgpack_pack_map(&pk, (size_t)n);
	frame_pack_kv_str(&pk, "type", "start");
	frame_pack_kv_int(&pk, "version", FRAME_VERSION);
	frame_pack_kv_str(&pk, "taskId", t->id);
	frame_pack_kv_str(&pk, "tool", t->tool->name);
	frame_pack_kv_int(&pk, "attempt", t->attempt);
	frame_pack_str(&pk, "arguments");
	frame_pack_json(&pk, t->args);
	if (t->checkpoint) {
		frame_pack_str(&pk, "checkpoint");
		msgpack_pack_bin(&pk, t->checkpoint_len);
		msgpack_pack_bin_body(&pk, t->checkpoint, t->checkpoint_len);
		frame_pack_kv_int(&pk, "checkpointSeq", t->checkpoint_seq);
	}
	if (t->cancel_requested) {
		frame_pack_str(&pk, "cancelled");
		msgpack_pack_true(&pk);
	}
	size_t len = sb.size;
	int rc = send_frame(t, &sb);
	if (rc == 0 && t->job)
		job_hello_sent(t->job, len);
	return rc;
}

/* A hello's answer, when the job's hello rate allows it (job_hello). */
static int resend_start(void *arg)
{
	return send_start(arg);
}

static int send_answer(struct task *t, const char *qid, const cJSON *response)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	frame_begin(&sb, &pk);
	msgpack_pack_map(&pk, 3);
	frame_pack_kv_str(&pk, "type", "answer");
	frame_pack_kv_str(&pk, "id", qid);
	frame_pack_str(&pk, "response");
	frame_pack_json(&pk, response);
	return send_frame(t, &sb);
}

static int send_cancel(struct task *t, const char *reason)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	frame_begin(&sb, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", "cancel");
	frame_pack_kv_str(&pk, "reason", reason ? reason : "cancelled");
	return send_frame(t, &sb);
}

static int send_checkpointed(struct task *t, int64_t seq)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	frame_begin(&sb, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", "checkpointed");
	frame_pack_kv_int(&pk, "seq", seq);
	return send_frame(t, &sb);
}

/* ---- frames from the job ------------------------------------------------------------ */

static char *dup_str(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

/* Frame strings may contain anything; the ones we keep must be safe C strings and valid
 * UTF-8, since they end up in JSON sent to clients. */
static int clean_str(const char *s, size_t n)
{
	return memchr(s, '\0', n) == NULL && frame_utf8_valid(s, n);
}

static int on_progress(struct tasks *ts, struct task *t, const msgpack_object *m, const char **why)
{
	const char *msg;
	char *d = NULL;
	size_t len;
	double f;
	int rc = frame_get_str(m, "message", &msg, &len);
	if (rc == -EINVAL || (rc == 0 && !clean_str(msg, len))) {
		*why = "protocol violation: progress.message must be a string";
		return -1;
	}
	if (rc == 0) {
		if (len > MAX_PROGRESS_MSG) {
			/* Cut on a character boundary so the message stays valid UTF-8. */
			len = MAX_PROGRESS_MSG;
			while (len > 0 && ((unsigned char)msg[len] & 0xC0) == 0x80)
				len--;
		}
		d = dup_str(msg, len);
	}
	rc = frame_get_double(m, "fraction", &f);
	if (rc == -EINVAL) {
		free(d);
		*why = "protocol violation: progress.fraction must be a number";
		return -1;
	}
	double fraction = t->fraction;
	if (rc == 0 && isfinite(f))
		fraction = f < 0 ? 0 : f > 1 ? 1 : f;
	set_progress(ts, t, d, fraction, 1);
	free(d);
	notify(ts, t, TASK_EV_PROGRESS);
	return 0;
}

/* Bytes the start frame needs besides the arguments and the checkpoint's bytes: its keys, the
 * task id, the tool name (at most 64), the counters (send_start). */
#define START_FIELDS_MAX 512

/* The arguments' size as they are packed into a start frame, measured once per task (a job
 * that checkpoints often must not make each checkpoint pack them again).  Packed msgpack, not
 * JSON text: a float takes 9 bytes there whatever its text. */
static size_t args_packed_len(struct task *t)
{
	if (!t->args_packed_len) {
		msgpack_sbuffer sb;
		msgpack_packer pk;
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		int rc = frame_pack_json(&pk, t->args);
		/* Unpackable arguments leave no room: send_start would fail the task anyway. */
		t->args_packed_len = rc == 0 && sb.data ? sb.size + 1 : FRAME_MAX_DEFAULT + 1;
		msgpack_sbuffer_destroy(&sb);
	}
	return t->args_packed_len - 1;
}

/* A checkpoint is a promise to the job: stored (a large one as a blob, durably, first), then
 * recorded, then applied; the blob it replaces goes after the commit.  0 or -errno (-EDQUOT
 * over the state dir's budget), nothing changed on failure. */
static int record_checkpoint(struct tasks *ts, struct task *t, const void *data, size_t len, int64_t seq)
{
	struct store_rec r;
	char hex[65] = "", old[65];
	memcpy(old, t->checkpoint_blob, sizeof old);
	if (len > PERSIST_INLINE_CHECKPOINT) {
		int rc = persist_blob_put(ts->sv->persist, data, len, hex);
		if (rc < 0)
			return rc;
	}
	rec_init(&r, STORE_REC_CHECKPOINT, t);
	r.u.checkpoint.seq = seq;
	r.u.checkpoint.ckpt.data = data;
	r.u.checkpoint.ckpt.len = len;
	r.u.checkpoint.ckpt.has_data = 1;
	r.u.checkpoint.ckpt.blob = hex[0] ? hex : NULL;
	int rc = change(ts, t, &r);
	/* Only a record in the batch can supersede the old one. */
	if (rc == 0 && old[0] && strcmp(old, hex) != 0)
		persist_release_blob(ts->sv->persist, old);
	return rc;
}

static int on_checkpoint(struct tasks *ts, struct task *t, const msgpack_object *m, const char **why)
{
	const void *data;
	size_t len;
	int64_t seq;
	if (frame_get_int(m, "seq", &seq) < 0 || frame_get_bin(m, "data", &data, &len) < 0) {
		*why = "protocol violation: checkpoint needs seq (int) and data (bin)";
		return -1;
	}
	if (t->result_pending)
		return 0;   /* the result came first and stands */
	/* The tool's quota first: the job is told which limit it hit. */
	long qmb = t->tool && t->tool->sandbox.max_checkpoint_mb ? t->tool->sandbox.max_checkpoint_mb : 8;
	size_t quota = (size_t)qmb << 20;
	if (quota > FRAME_CHECKPOINT_MAX)
		quota = FRAME_CHECKPOINT_MAX;
	if (len > quota) {
		char msg[200];
		snprintf(msg, sizeof msg, "The job's checkpoint of %zu bytes is larger than the tool allows "
		         "(maxCheckpointMB %ld: at most %zu bytes).", len, qmb, quota);
		fail_limit(ts, t, msg, "maxCheckpointMB", qmb);
		return 0;
	}
	/* A checkpoint goes back to the job in a start frame, with the arguments: accept only what
	 * will fit there, or a resumed job could never be started. */
	size_t alen = args_packed_len(t);
	size_t room = alen < FRAME_MAX_DEFAULT - START_FIELDS_MAX ? FRAME_MAX_DEFAULT - START_FIELDS_MAX - alen : 0;
	if (len > room) {
		*why = "checkpoint too large: with the task's arguments it must fit in one 8 MiB start frame";
		return -1;
	}
	int rc = record_checkpoint(ts, t, data, len, seq);
	if (rc == -EDQUOT) {
		char msg[200];
		long mb = ts->sv->cfg->server.state_max_mb;
		snprintf(msg, sizeof msg, "The checkpoint of %zu bytes would take the state dir over its "
		         "disk budget (stateDirMaxMB %ld).", len, mb);
		fail_limit(ts, t, msg, "stateDirMaxMB", mb);
		return 0;
	}
	if (rc < 0) {
		/* Never tell the job a checkpoint is safe when it is not. */
		char msg[200];
		snprintf(msg, sizeof msg, "The checkpoint could not be stored: %s.", strerror(-rc));
		fail(ts, t, "internal_error", msg, 1, "The server's disk may be full; retry the call later.");
		job_kill(t->job, NULL);
		return 0;
	}
	send_checkpointed(t, seq);
	return 0;
}

static const struct task_answer *find_answer(const struct task *t, const char *qid)
{
	for (const struct task_answer *a = t->answers; a; a = a->next)
		if (strcmp(a->question_id, qid) == 0)
			return a;
	return NULL;
}

static int on_ask(struct tasks *ts, struct task *t, const msgpack_object *m, const char **why)
{
	const char *id, *prompt;
	size_t idlen, plen;
	*why = "protocol violation: ask needs id and prompt (strings) and optional choices (strings)";
	if (frame_get_str(m, "id", &id, &idlen) < 0 || frame_get_str(m, "prompt", &prompt, &plen) < 0 ||
	    idlen == 0 || idlen > MAX_QUESTION_ID || plen > MAX_PROMPT ||
	    !clean_str(id, idlen) || !clean_str(prompt, plen))
		return -1;
	const msgpack_object *ch = frame_get(m, "choices");
	cJSON *choices = NULL;
	if (ch && ch->type != MSGPACK_OBJECT_NIL) {
		if (ch->type != MSGPACK_OBJECT_ARRAY || ch->via.array.size > MAX_CHOICES)
			return -1;
		for (uint32_t i = 0; i < ch->via.array.size; i++) {
			const msgpack_object *c = &ch->via.array.ptr[i];
			if (c->type != MSGPACK_OBJECT_STR || !clean_str(c->via.str.ptr, c->via.str.size))
				return -1;
		}
		choices = frame_to_json(ch);
		if (!choices)
			return -1;
	}
	if (TASK_TERMINAL(t->status) || t->result_pending) {
		cJSON_Delete(choices);
		return 0;
	}
	/* One open question per task: each one becomes a prompt for a person (and an elicitation
	 * request per client), so a job must wait for its answer before it asks again. */
	if (t->status == TASK_INPUT_REQUIRED) {
		cJSON_Delete(choices);
		*why = "protocol violation: ask while a question is still open (one question at a time; wait for its answer)";
		return -1;
	}
	char *qid = dup_str(id, idlen);
	if (!qid) {
		cJSON_Delete(choices);
		*why = "out of memory";
		return -1;
	}
	/* A resumed job asking a question it already had answered gets the recorded answer. */
	const struct task_answer *a = find_answer(t, qid);
	if (a) {
		send_answer(t, qid, a->response);
		free(qid);
		cJSON_Delete(choices);
		return 0;
	}
	struct store_rec r;
	char *ptext = dup_str(prompt, plen), *ctext = NULL;
	rec_init(&r, STORE_REC_ASK, t);
	r.u.ask.qid = qid;
	r.u.ask.prompt = ptext;
	int rc = ptext ? task_json_text(choices, &ctext) : -ENOMEM;
	r.u.ask.choices = ctext;
	if (rc == 0)
		rc = change(ts, t, &r);
	free(qid);
	free(ptext);
	free(ctext);
	cJSON_Delete(choices);
	if (rc < 0) {
		/* A question nobody could answer durably: end the attempt rather than wait on it. */
		char msg[200];
		snprintf(msg, sizeof msg, "The job's question could not be recorded: %s.", strerror(-rc));
		fail(ts, t, "internal_error", msg, 1, "The server's storage failed; retry the call later.");
		job_kill(t->job, NULL);
		return 0;
	}
	fplog(&ts->sv->log, FPLOG_INFO, t->id, "input required: %s", t->question_prompt ? t->question_prompt : "");
	notify(ts, t, TASK_EV_STATUS);
	return 0;
}

/* A short description of a large result for the summary that replaces it: its keys, or
 * its length.  Keys are cut on a character boundary (they were checked as UTF-8). */
static char *describe_result(const msgpack_object *v)
{
	char buf[1200];
	size_t o = 0;
	if (v->type == MSGPACK_OBJECT_MAP) {
		o = (size_t)snprintf(buf, sizeof buf, "an object with keys: ");
		for (uint32_t i = 0; i < v->via.map.size && o + 70 < sizeof buf; i++) {
			const msgpack_object *k = &v->via.map.ptr[i].key;
			if (i == 20) {
				o += (size_t)snprintf(buf + o, sizeof buf - o, ", …");
				break;
			}
			size_t n = k->via.str.size < 60 ? k->via.str.size : 60;
			while (n > 0 && n < k->via.str.size && ((unsigned char)k->via.str.ptr[n] & 0xC0) == 0x80)
				n--;
			o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%.*s", i ? ", " : "", (int)n,
			                      k->via.str.ptr ? k->via.str.ptr : "");
		}
	} else if (v->type == MSGPACK_OBJECT_ARRAY) {
		snprintf(buf, sizeof buf, "an array of %u items", (unsigned)v->via.array.size);
	} else if (v->type == MSGPACK_OBJECT_STR || v->type == MSGPACK_OBJECT_BIN) {
		snprintf(buf, sizeof buf, "a string of %u bytes", (unsigned)v->via.str.size);
	} else {
		snprintf(buf, sizeof buf, "a JSON value");
	}
	return strdup(buf);
}

static void store_result(struct tasks *ts, struct task *t);

static void on_store_timer(struct loop *l, void *arg)
{
	struct task *t = arg;
	(void)l;
	t->store_timer = NULL;
	store_result(t->owner, t);
}

/* The task completes when the job's whole tree is dead (on_exit_cb): until then the job could
 * still change the files in outputs/ that become its artifacts.  A result that arrives (or is
 * stored) while the job runs is held, r NULL when it lives in its blob; the progress message
 * says so.  The job should exit now; it has the grace period to do so. */
static void complete(struct tasks *ts, struct task *t, cJSON *r, int is_mcp)
{
	if (!t->job) {
		finish(ts, t, TASK_COMPLETED, r, is_mcp, NULL);
		return;
	}
	cJSON_Delete(t->pending_result);
	t->pending_result = r;
	t->pending_result_mcp = is_mcp;
	t->result_held = 1;
	set_progress(ts, t, "The job has sent its result; the task completes once the job has exited.",
	             t->fraction, 0);
	notify(ts, t, TASK_EV_PROGRESS);
}

/* The held result, now that the job is gone. */
static void complete_held(struct tasks *ts, struct task *t)
{
	cJSON *r = t->pending_result;
	t->pending_result = NULL;
	t->result_held = 0;
	cJSON_Delete(t->pending_error);
	t->pending_error = NULL;
	finish(ts, t, TASK_COMPLETED, r, t->pending_result_mcp, NULL);
}

/* A job-supplied CallToolResult as JSON text, cleaned (mcpresult.h) and printed again in place
 * of *text.  0; -EINVAL with why, or -ENOMEM, and *text is left as it was (the caller's). */
static int clean_mcp_text(struct task *t, char **text, size_t *len, char *why, size_t whylen)
{
	cJSON *r = cJSON_ParseWithLength(*text, *len);
	if (!r)
		return -ENOMEM;
	if (mcpresult_clean(r, t->id, why, whylen) < 0) {
		cJSON_Delete(r);
		return -EINVAL;
	}
	char *s = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	if (!s)
		return -ENOMEM;
	free(*text);
	*text = s;
	*len = strlen(s);
	return 0;
}

/* A large result counts only once its blob is durable: until then the task stays working (it
 * is not reported completed, and no FINISH record promises a result that a crash would lose).
 * A failed write (ENOSPC, EIO) is tried again after 1, 2, 4 … 32 s and said in the task's
 * progress; the job's exit meanwhile decides nothing.  Over the disk budget the job fails. */
static void store_result(struct tasks *ts, struct task *t)
{
	struct persist *p = ts->sv->persist;
	int rc = persist_store_result(p, t, t->result_pending, t->result_pending_len);
	if (rc == -EDQUOT) {
		char msg[200];
		long mb = ts->sv->cfg->server.state_max_mb;
		snprintf(msg, sizeof msg, "The result of %zu bytes would take the state dir over its disk "
		         "budget (stateDirMaxMB %ld).", t->result_pending_len, mb);
		fail_limit(ts, t, msg, "stateDirMaxMB", mb);
		return;
	}
	if (rc < 0) {
		int n = t->result_store_tries++;
		int64_t delay = 1000LL << (n > 5 ? 5 : n);
		char msg[300];
		snprintf(msg, sizeof msg, "The job's result (%zu bytes) could not be stored yet (%s); "
		         "retrying in %lld s.", t->result_pending_len, strerror(-rc), (long long)(delay / 1000));
		fplog(&ts->sv->log, FPLOG_WARNING, t->id, "%s", msg);
		set_progress(ts, t, msg, t->fraction, 1);
		t->store_timer = loop_timer_in(ts->sv->loop, delay, on_store_timer, t);
		if (!t->store_timer) {
			fail(ts, t, "internal_error", "Out of memory while the job's result waited to be stored.", 1,
			     "Call the tool again later.");
			return;
		}
		notify(ts, t, TASK_EV_PROGRESS);
		return;
	}
	complete(ts, t, NULL, t->result_pending_mcp);
}

static int on_result(struct tasks *ts, struct task *t, const msgpack_object *m, const char **why)
{
	const msgpack_object *v = frame_get(m, "value");
	const msgpack_object *mcp = frame_get(m, "mcp");
	if ((v == NULL) == (mcp == NULL)) {
		*why = "protocol violation: result needs exactly one of value or mcp";
		return -1;
	}
	if (mcp) {
		const msgpack_object *content = frame_get(mcp, "content");
		if (mcp->type != MSGPACK_OBJECT_MAP || !content || content->type != MSGPACK_OBJECT_ARRAY) {
			*why = "protocol violation: an mcp result needs a content array";
			return -1;
		}
	}
	/* Straight to JSON text, bounded: no tree of the whole value is ever built. */
	long max = ts->sv->cfg->server.result_max_bytes;
	char *text;
	size_t len;
	int rc = frame_to_json_text(v ? v : mcp, (size_t)max, &text, &len);
	if (rc == -EMSGSIZE) {
		char msg[200];
		snprintf(msg, sizeof msg, "The job's result is larger than the server keeps (resultMaxBytes %ld "
		         "bytes of JSON).", max);
		fail_limit(ts, t, msg, "resultMaxBytes", max);
		return 0;
	}
	if (rc < 0) {
		*why = rc == -ENOMEM ? "out of memory reading the job's result"
		                     : "protocol violation: result is not representable as JSON";
		return -1;
	}
	if (TASK_TERMINAL(t->status) || t->result_pending || t->result_held) {
		free(text);
		return 0;
	}
	if (mcp) {
		/* Forwarded to clients as the tool's result: only valid blocks, none of the job's _meta. */
		char reason[240], msg[300];
		rc = clean_mcp_text(t, &text, &len, reason, sizeof reason);
		if (rc < 0)
			free(text);
		if (rc == -EINVAL) {
			snprintf(msg, sizeof msg, "protocol violation: invalid mcp result: %s", reason);
			job_kill(t->job, msg);   /* copies msg; the frames after this one are not read */
			return 0;
		}
		if (rc < 0) {
			*why = "out of memory reading the job's result";
			return -1;
		}
	}
	if ((long)len <= ts->sv->cfg->server.result_inline_bytes) {
		cJSON *r = cJSON_ParseWithLength(text, len);
		free(text);
		if (!r) {
			*why = "out of memory reading the job's result";
			return -1;
		}
		complete(ts, t, r, mcp != NULL);
	} else {
		free(t->result_summary);
		t->result_summary = describe_result(v ? v : mcp);
		t->result_pending = text;
		t->result_pending_len = len;
		t->result_pending_mcp = mcp != NULL;
		t->result_store_tries = 0;
		store_result(ts, t);
	}
	/* The job should exit now; give it the grace period to do so. */
	if (t->job)
		job_kill_after(t->job, (long)(ts->sv->cfg->server.cancel_grace_seconds * 1000.0));
	return 0;
}

static int on_fail(struct tasks *ts, struct task *t, const msgpack_object *m, const char **why)
{
	const char *code = "job_failed", *msg = "the job reported a failure", *hint = NULL;
	size_t clen = strlen(code), mlen = strlen(msg), hlen = 0;
	int64_t r = 0;
	const msgpack_object *ro = frame_get(m, "retryable");
	if (t->result_pending)
		return 0;   /* the result came first and stands */
	*why = "protocol violation: fail needs message (string), optional code, hint (strings), retryable (bool)";
	if (frame_get_str(m, "message", &msg, &mlen) < 0 || !clean_str(msg, mlen))
		return -1;
	int rc = frame_get_str(m, "code", &code, &clen);
	if (rc == -EINVAL || (rc == 0 && (clen == 0 || clen > 64 || !clean_str(code, clen))))
		return -1;
	if (rc == -ENOENT) {
		code = "job_failed";
		clen = strlen(code);
	}
	rc = frame_get_str(m, "hint", &hint, &hlen);
	if (rc == -EINVAL || (rc == 0 && !clean_str(hint, hlen)))
		return -1;
	if (ro) {
		if (ro->type != MSGPACK_OBJECT_BOOLEAN)
			return -1;
		r = ro->via.boolean;
	}
	char *c = dup_str(code, clen), *mm = dup_str(msg, mlen > 8192 ? 8192 : mlen);
	char *h = hint ? dup_str(hint, hlen > 4096 ? 4096 : hlen) : NULL;
	const char *hh = h ? h : "Read the message; fix the arguments or the input and call the tool again.";
	if (c && mm && r && t->tool && t->retries_used < t->tool->retries && !t->cancel_requested) {
		/* Retryable and retries left: the job is re-run from its checkpoint once it exits. */
		cJSON_Delete(t->pending_error);
		t->pending_error = task_envelope(c, mm, 1, hh);
	} else if (c && mm) {
		fail(ts, t, c, mm, (int)r, hh);
	}
	free(c);
	free(mm);
	free(h);
	if (t->job)
		job_kill_after(t->job, (long)(ts->sv->cfg->server.cancel_grace_seconds * 1000.0));
	return 0;
}

static int on_log(struct job *j, const msgpack_object *m, const char **why)
{
	const char *lv = "info", *msg;
	size_t lvlen = 4, mlen;
	if (frame_get_str(m, "message", &msg, &mlen) < 0 || !clean_str(msg, mlen) ||
	    frame_get_str(m, "level", &lv, &lvlen) == -EINVAL) {
		*why = "protocol violation: log needs message and level strings (UTF-8)";
		return -1;
	}
	char level[16];
	snprintf(level, sizeof level, "%.*s", (int)(lvlen < 15 ? lvlen : 15), lv);
	int l = fplog_level_parse(level);
	if (l < 0 || l > FPLOG_ERROR)
		l = FPLOG_INFO;
	job_log_line(j, (enum fplog_level)l, fplog_level_name((enum fplog_level)l), msg, mlen);
	return 0;
}

static int on_frame(void *owner, struct job *j, const struct frame *f, const char **why)
{
	struct task *t = owner;
	struct tasks *ts = t->owner;
	const char *ty;
	size_t tylen;
	char type[16] = "";
	if (frame_get_str(&f->root, "type", &ty, &tylen) < 0 || tylen == 0) {
		*why = "protocol violation: frame without a type";
		return -1;
	}
	/* Every known type is short; a longer one is an unknown (newer) type and is ignored. */
	if (tylen >= sizeof type)
		return 0;
	memcpy(type, ty, tylen);
	if (strcmp(type, "hello") == 0) {
		if (job_hello(j, resend_start, t) < 0) {
			*why = "the start frame could not be sent again (too large, or the job does not read)";
			return -1;
		}
		return 0;
	}
	/* After the terminal state (or the result) only hello and log matter; late frames are
	 * ignored, not errors. */
	if ((TASK_TERMINAL(t->status) || t->result_held) && strcmp(type, "log") != 0)
		return 0;
	if (strcmp(type, "progress") == 0)
		return on_progress(ts, t, &f->root, why);
	if (strcmp(type, "checkpoint") == 0)
		return on_checkpoint(ts, t, &f->root, why);
	if (strcmp(type, "ask") == 0)
		return on_ask(ts, t, &f->root, why);
	if (strcmp(type, "result") == 0)
		return on_result(ts, t, &f->root, why);
	if (strcmp(type, "fail") == 0)
		return on_fail(ts, t, &f->root, why);
	if (strcmp(type, "log") == 0)
		return on_log(j, &f->root, why);
	return 0;   /* unknown types: newer protocol minor versions, ignored */
}

/* Take t off the run queue, wherever it stands in it. */
static void dequeue(struct tasks *ts, struct task *t)
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

static void enqueue(struct tasks *ts, struct task *t);

static void on_retry_timer(struct loop *l, void *arg)
{
	struct task *t = arg;
	(void)l;
	t->retry_timer = NULL;
	enqueue(t->owner, t);
	start_next(t->owner);
}

/* Put t back in the queue, at once or when its backoff has passed. */
static void schedule(struct tasks *ts, struct task *t)
{
	int64_t wait = t->not_before - loop_wall_ms();
	if (wait > 0) {
		t->queued = 1;   /* shows as queued while it waits; not on the run queue yet */
		t->retry_timer = loop_timer_in(ts->sv->loop, wait, on_retry_timer, t);
		if (t->retry_timer)
			return;
	}
	enqueue(ts, t);
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
	rec_init(&r, STORE_REC_RETRY, t);
	r.u.retry.retries = retries;
	r.u.retry.not_before = r.at + delay;
	r.u.retry.msg = msg;
	/* Not refused when it cannot be recorded: the job is gone and the retry is the only way
	 * on; a restart then resumes the task as interrupted. */
	if (persist_record(ts->sv->persist, t, &r) < 0)
		fplog(&ts->sv->log, FPLOG_ERROR, t->id, "the retry could not be recorded; after a restart "
		      "the task resumes as interrupted");
	apply_live(ts, t, &r);
	fplog(&ts->sv->log, FPLOG_NOTICE, t->id, "%s", msg);
	schedule(ts, t);
	notify(ts, t, TASK_EV_PROGRESS);
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
		fail(ts, t, "invalid_arguments", msg, 0, E2BIG_HINT);
	} else if (x->start_error) {
		cJSON_Delete(pending);
		snprintf(msg, sizeof msg, "The job could not be started: %s.", x->start_error);
		fail(ts, t, "job_failed", msg, 1,
		     "This is a problem with the server's setup, not the arguments; tell the operator, or retry later.");
	} else if (x->violation) {
		cJSON_Delete(pending);
		snprintf(msg, sizeof msg, "The job was stopped: %s.", x->violation);
		fail(ts, t, "job_failed", msg, 0,
		     "The job broke the frame protocol (docs/job-protocol.md); fix the job, then call the tool again.");
	} else if (pending) {
		if (!try_retry(ts, t, cJSON_Duplicate(pending, 1)))
			finish(ts, t, TASK_FAILED, NULL, 0, cJSON_Duplicate(pending, 1));
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
		finish(ts, t, TASK_FAILED, NULL, 0, e);
	} else if (x->exited && x->status == 0) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddNumberToObject(r, "exitCode", 0);
		cJSON_AddStringToObject(r, "output", x->tail);
		finish(ts, t, TASK_COMPLETED, r, 0, NULL);
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
			finish(ts, t, TASK_FAILED, NULL, 0, e);
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
	static const char *const sub[] = { "work/inputs", "work/outputs", "work" };
	char path[4300];
	snprintf(path, sizeof path, "%s/tasks/%s/work/" TASK_ENV_ARGS_FILE, ts->sv->state_dir, t->id);
	unlink(path);   /* our copy of the arguments, if they were too large for the environment */
	for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
		snprintf(path, sizeof path, "%s/tasks/%s/%s", ts->sv->state_dir, t->id, sub[i]);
		rmdir(path);   /* ENOTEMPTY or ENOENT: nothing to do */
	}
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
		complete_held(ts, t);
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
	start_next(ts);
}

static const struct job_callbacks job_cb = { .on_frame = on_frame, .on_exit = on_exit_cb };

/* ---- starting jobs ---------------------------------------------------------------------- */

/* The job could not be started (rc, err say why): the task fails with what fits the cause. */
static void start_failed(struct tasks *ts, struct task *t, int rc, const char *err)
{
	char msg[4500];
	snprintf(msg, sizeof msg, "The job could not be started: %s.", err);
	if (rc == -ENOTSUP)   /* sandbox.require cannot be met: refuse rather than run weaker */
		fail(ts, t, "sandbox_violation", msg, 0,
		     "The tool demands a sandbox this server cannot provide; tell the operator "
		     "(forkpoint sandbox-check shows what the host supports).");
	else if (rc == -E2BIG)   /* the arguments, not the server: the same call fails again */
		fail(ts, t, "invalid_arguments", msg, 0, E2BIG_HINT);
	else
		fail(ts, t, "job_failed", msg, 1,
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
	fail(ts, t, "timeout", msg, 1,
	     "Call the tool again with less work (a smaller input), or raise timeoutSeconds in the config.");
	if (t->job)
		job_kill(t->job, NULL);
}

static int start_job(struct tasks *ts, struct task *t)
{
	struct supervisor *sv = ts->sv;
	const struct tool_cfg *tool = t->tool;
	char dir[4096], work[4200], logp[4200], err[4400];
	char **argv = NULL, **envp = NULL;
	int rc;

	t->queued = 0;
	if (!tool) {
		fail(ts, t, "internal_error", "The tool of this task is no longer in the server's config.", 0,
		     "Ask the operator to restore the tool, or call another tool.");
		return -ENOENT;
	}
	int attempt = t->attempt + 1;   /* counted once its START record is in */

	snprintf(dir, sizeof dir, "%s/tasks/%s", sv->state_dir, t->id);
	snprintf(work, sizeof work, "%s/work", dir);
	snprintf(logp, sizeof logp, "%s/output.log", dir);
	if ((rc = task_env_mkdir_p(work, 0700)) < 0) {
		snprintf(err, sizeof err, "cannot create %s: %s", work, strerror(-rc));
		goto fail;
	}
	if (sv->transfers) {
		/* Uploaded files named in the arguments are placed read-only in work/inputs/. */
		cJSON *env = NULL;
		if (transfer_prepare_args(sv->transfers, tool->input_schema, t->args, work, &env) < 0) {
			finish(ts, t, TASK_FAILED, NULL, 0, env ? env : task_envelope("invalid_arguments",
			       "An input file could not be placed in the job's work area.", 1, "Check the file handles."));
			return -EINVAL;
		}
	}
	argv = calloc(tool->argc + 1, sizeof *argv);
	if (!argv) {
		rc = -ENOMEM;
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < tool->argc; i++) {
		argv[i] = i == 0 ? strdup(tool->argv[0]) : task_env_expand(tool->argv[i], t->args);
		if (!argv[i]) {
			rc = -ENOMEM;
			snprintf(err, sizeof err, "out of memory");
			goto fail;
		}
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
	rec_init(&r, STORE_REC_START, t);
	r.u.start.attempt = attempt;
	r.u.start.sandbox = job_sandbox_json(t->job);   /* the sandbox this attempt really got */
	if ((rc = change(ts, t, &r)) < 0) {
		/* The attempt is not on record: it must not run.  Its start frame is still held, so
		 * the job has done nothing yet. */
		char msg[200];
		snprintf(msg, sizeof msg, "The job's start could not be recorded: %s.", strerror(-rc));
		fail(ts, t, "internal_error", msg, 1, "The server's storage failed; retry the call later.");
		job_kill(t->job, NULL);
		goto out;
	}
	fplog(&sv->log, FPLOG_INFO, t->id, "started %s (attempt %d, pid %d)%s", tool->name, t->attempt,
	      (int)job_pid(t->job), t->checkpoint ? " from its checkpoint" : "");
	if (send_start(t) < 0) {
		/* The arguments and checkpoint do not fit in one frame: the job could never start. */
		fail(ts, t, "internal_error", "The job's start frame (arguments and checkpoint) is larger than a "
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

static void enqueue(struct tasks *ts, struct task *t)
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
static size_t start_next(struct tasks *ts)
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
		rec_init(&r, STORE_REC_CREATE, t);
		r.u.create.tool = tool->name;
		r.u.create.args = text;
		/* The create record comes first: a task whose creation is not in the journal must
		 * not exist at all, or its later records would name a task replay has never heard
		 * of. */
		if ((rc = change(ts, t, &r)) < 0)
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
	enqueue(ts, t);
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
	rec_init(&r, STORE_REC_ANSWER, t);
	r.u.answer.qid = t->question_id;
	r.u.answer.response = text ? text : "null";
	/* Not recorded, so not accepted: the task still waits for its answer. */
	rc = change(ts, t, &r);
	free(text);
	if (rc < 0)
		return rc;
	const struct task_answer *a = t->answers;   /* the one just applied */
	if (t->job)
		send_answer(t, a->question_id, a->response);
	/* Asked before a restart: no job is waiting for the answer.  Run it again from its
	 * checkpoint; when it asks the same question the recorded answer is replayed to it. */
	if (!t->job && !t->queued) {
		enqueue(ts, t);
		start_next(ts);
	}
	fplog(&ts->sv->log, FPLOG_INFO, t->id, "answered %s", a->question_id);
	notify(ts, t, TASK_EV_STATUS);
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
		dequeue(ts, t);
	if (t->retry_timer) {
		loop_timer_cancel(ts->sv->loop, t->retry_timer);
		t->retry_timer = NULL;
	}
	finish(ts, t, TASK_CANCELLED, NULL, 0,
	       task_envelope("cancelled", t->cancel_reason, 0, "The task was cancelled; call the tool again to start over."));
	if (t->job) {
		send_cancel(t, t->cancel_reason);
		job_kill_after(t->job, (long)(ts->sv->cfg->server.cancel_grace_seconds * 1000.0));
	}
	start_next(ts);
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
		dequeue(ts, t);   /* one waiting for its retry timer is not on the run queue */
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

/* A restart from scratch: the job gets no checkpoint in its start frame. */
static void drop_checkpoint(struct task *t)
{
	free(t->checkpoint);
	t->checkpoint = NULL;
	t->checkpoint_len = 0;
	t->checkpoint_blob[0] = 0;
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
				drop_checkpoint(t);
			}
			continue;
		}
		if (t->was_running) {
			enum tool_resume policy = t->tool ? t->tool->resume : RESUME_FAIL;
			t->was_running = 0;
			if (policy == RESUME_FAIL) {
				fail(ts, t, "interrupted", "The server stopped while the job was running.", 1,
				     "Call the tool again to start over.");
				continue;
			}
			if (policy == RESUME_RESTART) {
				drop_checkpoint(t);
			}
			fplog(&ts->sv->log, FPLOG_NOTICE, t->id, "resuming after a restart (%s)",
			      policy == RESUME_CHECKPOINT && t->checkpoint ? "from its last checkpoint" : "from the start");
		}
		schedule(ts, t);
	}
	start_next(ts);
}

int tasks_tombstone_add(struct tasks *ts, const char *id, int64_t until)
{
	return task_tombs_add(ts->tombs, id, until);
}

int64_t tasks_tombstone_find(const struct tasks *ts, const char *id)
{
	return task_tombs_find(ts->tombs, id);
}

void tasks_tombstone_each(struct tasks *ts, void (*fn)(void *arg, const char *id, int64_t until), void *arg)
{
	task_tombs_each(ts->tombs, fn, arg);
}

size_t tasks_collect(struct tasks *ts, int64_t now)
{
	return task_expiry_collect(ts->sv, ts, ts->tombs, now);
}
