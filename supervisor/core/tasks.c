/* supervisor/tasks.c — see tasks.h. */
#include "supervisor/core/tasks.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/frame.h"
#include "supervisor/core/ckpt.h"
#include "supervisor/core/inputs.h"
#include "supervisor/core/job.h"
#include "supervisor/mcp/mcpresult.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/rmtree.h"
#include "supervisor/core/transfer.h"
#include "supervisor/core/workers.h"
#include "proto/io.h"
#include "proto/utf8.h"

#define MAX_QUESTION_ID   200
#define MAX_PROMPT        (64u << 10)
#define MAX_CHOICES       64
#define MAX_PROGRESS_MSG  4096
#define ARGS_ENV_MAX      (64u << 10)   /* larger arguments go to ARGS_FILE_NAME, not the environment */
#define ARGS_FILE_NAME    ".forkpoint-args.json"
#define E2BIG_HINT        "An argument placed in the tool's command line is too long (the kernel allows " \
                          "128 KiB per word); call the tool with a shorter value."

struct tasks_table;

struct tasks {
	struct supervisor *sv;
	struct task *head;           /* newest first */
	size_t count;
	struct tasks_table *tab;     /* id → task */
	struct task *qhead, *qtail;
	size_t qlen;
	int qpos_dirty;              /* a task left the queue from the head or the middle */
	int running;
	task_observer observer;
	void *observer_arg;
	struct task *held;           /* tasks with frames waiting for the commit */
	struct tomb *tombs;          /* expired ids, newest first */
	size_t ntombs;
};

struct tomb {
	char id[33];
	int64_t until;
	struct tomb *next;
};

/* The hash table maps id → task with separate chaining through a small side struct so
 * struct task stays free of table internals. */
struct hnode {
	struct task *t;
	struct hnode *next;
};

struct tasks_table {
	struct hnode **b;
	size_t n;
};

static uint64_t hash_id(const char *id)
{
	/* FNV-1a; ids are random already, this only needs to spread them. */
	uint64_t h = 1469598103934665603ull;
	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 1099511628211ull;
	return h;
}

static struct tasks_table *table(struct tasks *ts)
{
	return ts->tab;
}

static int table_grow(struct tasks *ts)
{
	struct tasks_table *old = table(ts);
	size_t n = old ? old->n * 2 : 1024;
	struct tasks_table *nt = calloc(1, sizeof *nt);
	struct hnode **b = calloc(n, sizeof *b);
	if (!nt || !b) {
		free(nt);
		free(b);
		return -ENOMEM;
	}
	nt->b = b;
	nt->n = n;
	if (old) {
		for (size_t i = 0; i < old->n; i++) {
			struct hnode *h = old->b[i];
			while (h) {
				struct hnode *nx = h->next;
				size_t k = hash_id(h->t->id) & (n - 1);
				h->next = b[k];
				b[k] = h;
				h = nx;
			}
		}
		free(old->b);
		free(old);
	}
	ts->tab = nt;
	return 0;
}

static int table_put(struct tasks *ts, struct task *t)
{
	if (!table(ts) || ts->count + 1 > table(ts)->n) {
		int rc = table_grow(ts);
		if (rc < 0 && !table(ts))
			return rc;
	}
	struct hnode *h = malloc(sizeof *h);
	if (!h)
		return -ENOMEM;
	size_t k = hash_id(t->id) & (table(ts)->n - 1);
	h->t = t;
	h->next = table(ts)->b[k];
	table(ts)->b[k] = h;
	return 0;
}

static void table_del(struct tasks *ts, const struct task *t)
{
	size_t k = hash_id(t->id) & (table(ts)->n - 1);
	for (struct hnode **pp = &table(ts)->b[k]; *pp; pp = &(*pp)->next) {
		if ((*pp)->t == t) {
			struct hnode *h = *pp;
			*pp = h->next;
			free(h);
			return;
		}
	}
}

struct task *tasks_find(struct tasks *ts, const char *id)
{
	if (!id || !table(ts))
		return NULL;
	size_t k = hash_id(id) & (table(ts)->n - 1);
	for (struct hnode *h = table(ts)->b[k]; h; h = h->next)
		if (strcmp(h->t->id, id) == 0)
			return h->t;
	return NULL;
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
	if (table_grow(ts) < 0) {
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
	if (done && ts->sv->persist && persist_commit(ts->sv->persist) < 0)
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
	for (struct tomb *b = ts->tombs, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	struct tasks_table *tb = table(ts);
	if (tb) {
		for (size_t i = 0; i < tb->n; i++)
			for (struct hnode *h = tb->b[i], *nx; h; h = nx) {
				nx = h->next;
				free(h);
			}
		free(tb->b);
		free(tb);
	}
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
	return t->qpos;
}

/* ---- transitions ---------------------------------------------------------------- */

static void touch(struct task *t)
{
	t->updated_ms = loop_wall_ms();
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

/* The single place a task enters a terminal state. */
static void finish(struct tasks *ts, struct task *t, enum task_status st, cJSON *result,
                   int is_mcp, cJSON *error)
{
	if (TASK_TERMINAL(t->status)) {
		cJSON_Delete(result);
		cJSON_Delete(error);
		return;
	}
	drop_pending_result(ts, t);
	t->status = st;
	t->result = result;
	t->result_is_mcp = is_mcp;
	t->error = error;
	task_clear_question(t);
	if (st == TASK_COMPLETED && ts->sv->transfers) {
		/* Files the job left in outputs/ become the task's artifacts, listed with its result. */
		char work[4200];
		snprintf(work, sizeof work, "%s/tasks/%s/work", ts->sv->state_dir, t->id);
		cJSON_Delete(t->artifacts);
		t->artifacts = transfer_collect_artifacts(ts->sv->transfers, t, work);
	}
	touch(t);
	t->finished_ms = t->updated_ms;
	t->expires_ms = t->finished_ms + (int64_t)((t->tool ? t->tool->ttl_seconds : 86400.0) * 1000.0);
	t->was_running = 0;
	if (t->timeout_timer) {
		loop_timer_cancel(ts->sv->loop, t->timeout_timer);
		t->timeout_timer = NULL;
	}
	if (t->retry_timer) {
		loop_timer_cancel(ts->sv->loop, t->retry_timer);
		t->retry_timer = NULL;
	}
	if (ts->sv->persist && persist_finished(ts->sv->persist, t) < 0)
		fplog(&ts->sv->log, FPLOG_ERROR, t->id, "could not store the outcome durably");
	fplog(&ts->sv->log, st == TASK_COMPLETED ? FPLOG_INFO : FPLOG_NOTICE, t->id, "%s%s%s",
	      task_status_name(st), error ? ": " : "",
	      error ? cJSON_GetStringValue(cJSON_GetObjectItem(error, "message")) : "");
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

void tasks_release(struct tasks *ts)
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
	return memchr(s, '\0', n) == NULL && utf8_valid(s, n);
}

static int on_progress(struct tasks *ts, struct task *t, const msgpack_object *m, const char **why)
{
	const char *msg;
	size_t len;
	double f;
	int rc = frame_get_str(m, "message", &msg, &len);
	if (rc == -EINVAL || (rc == 0 && !clean_str(msg, len))) {
		*why = "protocol violation: progress.message must be a string";
		return -1;
	}
	if (rc == 0) {
		/* Cut on a character boundary so the message stays valid UTF-8. */
		len = utf8_clip(msg, len, MAX_PROGRESS_MSG);
		char *d = dup_str(msg, len);
		if (d) {
			free(t->progress_msg);
			t->progress_msg = d;
		}
	}
	rc = frame_get_double(m, "fraction", &f);
	if (rc == -EINVAL) {
		*why = "protocol violation: progress.fraction must be a number";
		return -1;
	}
	if (rc == 0 && isfinite(f))
		t->fraction = f < 0 ? 0 : f > 1 ? 1 : f;
	t->progress_seq++;
	touch(t);
	if (ts->sv->persist)
		persist_progress(ts->sv->persist, t);
	notify(ts, t, TASK_EV_PROGRESS);
	return 0;
}

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

static void checkpoint_stored(struct task *t, size_t len, int64_t seq, int rc);

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
	long qmb = t->tool && t->tool->max_checkpoint_mb ? t->tool->max_checkpoint_mb : FRAME_CHECKPOINT_MB;
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
	size_t room = alen < FRAME_MAX_DEFAULT - FRAME_START_FIELDS_MAX ? FRAME_MAX_DEFAULT - FRAME_START_FIELDS_MAX - alen : 0;
	if (len > room) {
		*why = "checkpoint too large: with the task's arguments it must fit in one 8 MiB start frame";
		return -1;
	}
	touch(t);
	ckpt_store(ts->sv, t, t->job, data, len, seq, checkpoint_stored);
	return 0;
}

/* A checkpoint is stored and recorded (rc 0: acknowledge it after the commit) or not. */
static void checkpoint_stored(struct task *t, size_t len, int64_t seq, int rc)
{
	struct tasks *ts = t->owner;
	if (rc == -EDQUOT) {
		char msg[200];
		long mb = ts->sv->cfg->server.state_max_mb;
		snprintf(msg, sizeof msg, "The checkpoint of %zu bytes would take the state dir over its "
		         "disk budget (stateDirMaxMB %ld).", len, mb);
		fail_limit(ts, t, msg, "stateDirMaxMB", mb);
		return;
	}
	if (rc < 0) {
		/* Never tell the job a checkpoint is safe when it is not. */
		char msg[200];
		snprintf(msg, sizeof msg, "The checkpoint could not be stored: %s.", strerror(-rc));
		fail(ts, t, "internal_error", msg, 1, "The server's disk may be full; retry the call later.");
		job_kill(t->job, NULL);
		return;
	}
	send_checkpointed(t, seq);
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
	task_clear_question(t);
	t->question_id = qid;
	t->question_prompt = dup_str(prompt, plen);
	t->question_choices = choices;
	t->status = TASK_INPUT_REQUIRED;
	touch(t);
	int rc = ts->sv->persist ? persist_asked(ts->sv->persist, t) : 0;
	if (rc < 0) {
		/* A question nobody could answer durably: end the attempt rather than wait on it. */
		char msg[200];
		snprintf(msg, sizeof msg, "The job's question could not be recorded: %s.", strerror(-rc));
		t->status = TASK_WORKING;
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
			size_t n = utf8_clip(k->via.str.ptr, k->via.str.size, 60);
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
	free(t->progress_msg);
	t->progress_msg = strdup("The job has sent its result; the task completes once the job has exited.");
	t->progress_seq++;
	touch(t);
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
	int rc = p ? persist_store_result(p, t, t->result_pending, t->result_pending_len) : 0;
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
		free(t->progress_msg);
		t->progress_msg = strdup(msg);
		fplog(&ts->sv->log, FPLOG_WARNING, t->id, "%s", msg);
		touch(t);
		if (p)
			persist_progress(p, t);
		t->store_timer = loop_timer_in(ts->sv->loop, delay, on_store_timer, t);
		if (!t->store_timer) {
			fail(ts, t, "internal_error", "Out of memory while the job's result waited to be stored.", 1,
			     "Call the tool again later.");
			return;
		}
		notify(ts, t, TASK_EV_PROGRESS);
		return;
	}
	cJSON *r = NULL;
	if (!p && !(r = cJSON_ParseWithLength(t->result_pending, t->result_pending_len))) {
		fail(ts, t, "internal_error", "Out of memory holding the job's result.", 1, "Call the tool again later.");
		return;
	}
	complete(ts, t, r, t->result_pending_mcp);
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

static void start_next(struct tasks *ts);

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
	t->retries_used++;
	int64_t delay = 1000LL << (t->retries_used - 1 > 6 ? 6 : t->retries_used - 1);
	t->not_before = loop_wall_ms() + delay;
	char msg[600];
	snprintf(msg, sizeof msg, "Attempt %d failed (%s); retrying from the last checkpoint in %lld s.",
	         t->attempt, cJSON_GetStringValue(cJSON_GetObjectItem(why, "message")), (long long)(delay / 1000));
	free(t->progress_msg);
	t->progress_msg = strdup(msg);
	cJSON_Delete(why);
	touch(t);
	if (ts->sv->persist && persist_retry(ts->sv->persist, t) < 0)
		fplog(&ts->sv->log, FPLOG_ERROR, t->id, "the retry could not be recorded; after a restart "
		      "the task resumes as interrupted");
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
	snprintf(path, sizeof path, "%s/tasks/%s/work/" ARGS_FILE_NAME, ts->sv->state_dir, t->id);
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

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Text of an argument for a {name} placeholder: strings as they are, the rest as JSON. */
static int arg_text(const cJSON *v, struct wbuf *out)
{
	if (!v || cJSON_IsNull(v))
		return 0;
	if (cJSON_IsString(v))
		return wbuf_append(out, v->valuestring, strlen(v->valuestring));
	if (cJSON_IsBool(v))
		return wbuf_printf(out, "%s", cJSON_IsTrue(v) ? "true" : "false");
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d == floor(d) && fabs(d) < 9e15)
			return wbuf_printf(out, "%lld", (long long)d);
		return wbuf_printf(out, "%.17g", d);
	}
	char *s = cJSON_PrintUnformatted(v);
	if (!s)
		return -ENOMEM;
	int rc = wbuf_append(out, s, strlen(s));
	free(s);
	return rc;
}

/* Replace each {name} placeholder (as config_placeholder() defines it, the same rule the config
 * was checked with) by its argument; an absent optional argument becomes the empty string. */
static char *expand(const char *tmpl, const cJSON *args)
{
	struct wbuf b = { 0 };
	const char *p = tmpl, *name;
	size_t len;
	for (;;) {
		const char *open = config_placeholder(p, &name, &len);
		if (!open) {
			wbuf_append(&b, p, strlen(p));
			break;
		}
		wbuf_append(&b, p, (size_t)(open - p));
		char key[256];
		snprintf(key, sizeof key, "%.*s", (int)(len < 255 ? len : 255), name);
		arg_text(cJSON_GetObjectItemCaseSensitive(args, key), &b);
		p = open + len + 2;
	}
	if (wbuf_append(&b, "", 1) < 0) {
		wbuf_free(&b);
		return NULL;
	}
	return (char *)b.data;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* The arguments for a job's environment.  Small ones travel as FORKPOINT_ARGS; the kernel caps
 * one environment string at 128 KiB (MAX_ARG_STRLEN) and execve would fail with E2BIG, so
 * larger ones are written to a file in the work directory, named by FORKPOINT_ARGS_FILE.
 * Jobs on the frame protocol get them in their start frame either way.  0 and *out, or
 * -errno with err. */
static int args_env(const char *work, const char *args_json, char **out, char *err, size_t errlen)
{
	size_t n = strlen(args_json);
	if (n <= ARGS_ENV_MAX) {
		if (asprintf(out, "FORKPOINT_ARGS=%s", args_json) < 0)
			goto oom;
		return 0;
	}
	char path[4300];
	snprintf(path, sizeof path, "%s/" ARGS_FILE_NAME, work);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	int rc = fd < 0 ? -errno : io_write_full(fd, args_json, n);
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
		return rc;
	}
	if (asprintf(out, "FORKPOINT_ARGS_FILE=%s", path) < 0)
		goto oom;
	return 0;
oom:
	*out = NULL;
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

/* A job sees a clean environment: nothing of the supervisor's leaks into it, only what
 * docs/job-protocol.md lists.  0 and *out (NULL-terminated, for free_strv), or -errno with
 * err. */
static int job_env(struct supervisor *sv, const struct task *t, const char *work, char ***out,
                   char *err, size_t errlen)
{
	char *args_json = cJSON_PrintUnformatted(t->args);
	char **envp = calloc(12, sizeof *envp);
	int rc = -ENOMEM, e = 0;
	if (!args_json || !envp)
		goto oom;
	if (asprintf(&envp[e++], "PATH=%s:/usr/local/bin:/usr/bin:/bin", sv->bin_dir) < 0 ||
	    asprintf(&envp[e++], "HOME=%s", work) < 0 ||
	    asprintf(&envp[e++], "TMPDIR=%s", work) < 0 ||
	    asprintf(&envp[e++], "LANG=C.UTF-8") < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_FD=3") < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_TASK_ID=%s", t->id) < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_TOOL=%s", t->tool->name) < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_ATTEMPT=%d", t->attempt) < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_WORKDIR=%s", work) < 0) {
		envp[e - 1] = NULL;   /* asprintf leaves it undefined on failure */
		goto oom;
	}
	if ((rc = args_env(work, args_json, &envp[e++], err, errlen)) < 0)
		goto fail;
	free(args_json);
	*out = envp;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	free(args_json);
	free_strv(envp);
	return rc;
}

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
		finish(ts, t, TASK_FAILED, NULL, 0, env);
	else
		spawn_job(ts, t);
	start_next(ts);
}

static int start_job(struct tasks *ts, struct task *t)
{
	struct supervisor *sv = ts->sv;
	const struct tool_cfg *tool = t->tool;
	char work[4200], err[4400];
	int rc;

	t->queued = 0;
	if (!tool) {
		fail(ts, t, "internal_error", "The tool of this task is no longer in the server's config.", 0,
		     "Ask the operator to restore the tool, or call another tool.");
		return -ENOENT;
	}
	t->attempt++;

	snprintf(work, sizeof work, "%s/tasks/%s/work", sv->state_dir, t->id);
	if ((rc = mkdir_p(work, 0700)) < 0) {
		snprintf(err, sizeof err, "cannot create %s: %s", work, strerror(-rc));
		start_failed(ts, t, rc, err);
		return rc;
	}
	if (sv->transfers) {
		/* Uploaded files named in the arguments are placed read-only in work/inputs/; large
		 * copies are made on the worker pool, and the job starts once they are done. */
		cJSON *env = NULL;
		struct inputs *later = NULL;
		if (transfer_prepare_args_later(sv->transfers, tool->input_schema, t->args, work,
		                                sv->workers ? &later : NULL, &env) < 0) {
			finish(ts, t, TASK_FAILED, NULL, 0, env ? env : task_envelope("invalid_arguments",
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

/* The rest of a start: argv and environment, the process, its record and its start frame. */
static int spawn_job(struct tasks *ts, struct task *t)
{
	struct supervisor *sv = ts->sv;
	const struct tool_cfg *tool = t->tool;
	char dir[4096], work[4200], logp[4200], err[4400];
	char **argv = NULL, **envp = NULL;
	int rc;

	snprintf(dir, sizeof dir, "%s/tasks/%s", sv->state_dir, t->id);
	snprintf(work, sizeof work, "%s/work", dir);
	snprintf(logp, sizeof logp, "%s/output.log", dir);
	argv = calloc(tool->argc + 1, sizeof *argv);
	if (!argv) {
		rc = -ENOMEM;
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < tool->argc; i++) {
		argv[i] = i == 0 ? strdup(tool->argv[0]) : expand(tool->argv[i], t->args);
		if (!argv[i]) {
			rc = -ENOMEM;
			snprintf(err, sizeof err, "out of memory");
			goto fail;
		}
	}
	if ((rc = job_env(sv, t, work, &envp, err, sizeof err)) < 0)
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
	cJSON_Delete(t->sandbox);
	t->sandbox = cJSON_Parse(job_sandbox_json(t->job));
	ts->running++;
	t->was_running = 1;
	t->started_ms = loop_wall_ms();
	t->job_started_mono = loop_now();
	touch(t);
	if (tool->timeout_seconds > 0)
		t->timeout_timer = loop_timer_in(sv->loop, (int64_t)(tool->timeout_seconds * 1000.0), on_timeout, t);
	if (sv->persist && (rc = persist_started(sv->persist, t)) < 0) {
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
	free_strv(argv);
	free_strv(envp);
	return 0;
fail:
	free_strv(argv);
	free_strv(envp);
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

static void start_next(struct tasks *ts)
{
	while (ts->qhead && ts->running < ts->sv->cfg->server.max_concurrent) {
		struct task *t = ts->qhead;
		ts->qhead = t->qnext;
		if (!ts->qhead)
			ts->qtail = NULL;
		t->qnext = NULL;
		ts->qlen--;
		ts->qpos_dirty = 1;
		start_job(ts, t);
	}
}

int tasks_create(struct tasks *ts, const struct tool_cfg *tool, cJSON *args, struct task **out)
{
	int rc;
	if (ts->qlen >= (size_t)ts->sv->cfg->server.max_queue &&
	    ts->running >= ts->sv->cfg->server.max_concurrent) {
		cJSON_Delete(args);
		return -ENOBUFS;
	}
	struct task *t = calloc(1, sizeof *t);
	if (!t) {
		cJSON_Delete(args);
		return -ENOMEM;
	}
	/* 128 bits from the OS: a collision with a live or expired id is practically impossible,
	 * but checking costs nothing. */
	do {
		rc = io_random_hex(t->id);
	} while (rc == 0 && (tasks_find(ts, t->id) || tasks_tombstone_find(ts, t->id)));
	if (rc < 0) {
		cJSON_Delete(args);
		free(t);
		return rc;
	}
	t->owner = ts;
	t->tool = tool;
	t->tool_name = strdup(tool->name);
	t->args = args;
	t->status = TASK_WORKING;
	t->fraction = -1;
	t->created_ms = t->updated_ms = loop_wall_ms();
	if (!t->tool_name || (rc = table_put(ts, t)) < 0) {
		task_free(t);
		return -ENOMEM;
	}
	/* The create record comes first: a task whose creation is not in the journal must not
	 * exist at all, or its later records would name a task replay has never heard of. */
	if (ts->sv->persist && (rc = persist_created(ts->sv->persist, t)) < 0) {
		table_del(ts, t);
		task_free(t);
		return rc;
	}
	t->next = ts->head;
	if (ts->head)
		ts->head->prev = t;
	ts->head = t;
	ts->count++;
	enqueue(ts, t);
	fplog(&ts->sv->log, FPLOG_INFO, t->id, "created %s", tool->name);
	*out = t;
	start_next(ts);
	return 0;
}

int tasks_respond(struct tasks *ts, struct task *t, const cJSON *response)
{
	if (t->status != TASK_INPUT_REQUIRED || !t->question_id)
		return -EINVAL;
	struct task_answer *a = calloc(1, sizeof *a);
	if (!a)
		return -ENOMEM;
	a->question_id = strdup(t->question_id);
	a->response = cJSON_Duplicate(response, 1);
	if (!a->question_id || !a->response) {
		free(a->question_id);
		cJSON_Delete(a->response);
		free(a);
		return -ENOMEM;
	}
	int rc = ts->sv->persist ? persist_answered(ts->sv->persist, t, a->question_id, a->response) : 0;
	if (rc < 0) {
		/* Not recorded, so not accepted: the task still waits for its answer. */
		free(a->question_id);
		cJSON_Delete(a->response);
		free(a);
		return rc;
	}
	a->next = t->answers;
	t->answers = a;
	if (t->job)
		send_answer(t, a->question_id, a->response);
	task_clear_question(t);
	t->status = TASK_WORKING;
	touch(t);
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
	int rc = table_put(ts, t);
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
	table_del(ts, t);
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
	struct tomb *b = calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	snprintf(b->id, sizeof b->id, "%s", id);
	b->until = until;
	b->next = ts->tombs;
	ts->tombs = b;
	ts->ntombs++;
	return 0;
}

int64_t tasks_tombstone_find(const struct tasks *ts, const char *id)
{
	/* Tombstones are few (expired ids, for a limited time); a list is enough. */
	for (const struct tomb *b = ts->tombs; b; b = b->next)
		if (strcmp(b->id, id) == 0)
			return b->until;
	return 0;
}

void tasks_tombstone_each(struct tasks *ts, void (*fn)(void *arg, const char *id, int64_t until), void *arg)
{
	for (struct tomb *b = ts->tombs; b; b = b->next)
		fn(arg, b->id, b->until);
}

static void remove_task_dir(struct tasks *ts, const char *id)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/tasks/%s", ts->sv->state_dir, id);
	/* In the background (rmtree.h): a job's output may be a large tree. */
	rmtree_later(ts->sv, path);
}

size_t tasks_collect(struct tasks *ts, int64_t now)
{
	size_t n = 0;
	/* While commits fail an expiry could not be recorded: keep everything until they work. */
	if (ts->sv->persist && persist_fault(ts->sv->persist) < 0)
		return 0;
	for (struct tomb **pp = &ts->tombs; *pp;) {
		if ((*pp)->until <= now) {
			struct tomb *b = *pp;
			*pp = b->next;
			free(b);
			ts->ntombs--;
		} else {
			pp = &(*pp)->next;
		}
	}
	for (struct task *t = ts->head, *next; t; t = next) {
		next = t->next;
		if (!TASK_TERMINAL(t->status) || t->expires_ms > now || t->job)
			continue;
		/* Expired ids answer `expired` for as long again as they lived (at least an hour,
		 * at most a week), then `unknown_task`. */
		int64_t ttl = t->expires_ms - t->finished_ms;
		int64_t keep = ttl < 3600000 ? 3600000 : ttl > 604800000 ? 604800000 : ttl;
		char id[33];
		memcpy(id, t->id, sizeof id);
		/* Forgotten only once the journal says so; otherwise the next collection retries. */
		if (ts->sv->persist && persist_expired(ts->sv->persist, id, now + keep) < 0)
			continue;
		if (ts->sv->persist)
			persist_release(ts->sv->persist, t);
		tasks_tombstone_add(ts, id, now + keep);
		tasks_remove(ts, t);
		remove_task_dir(ts, id);
		n++;
	}
	return n;
}
