/* supervisor/core/task_frames.c — the job protocol seen from the supervisor: the frames a job
 * is sent (start, answer, cancel, checkpointed), held until the turn's journal commit, and the
 * frames it sends (progress, checkpoint, ask, result, fail, log), each checked field by field
 * (a hostile peer) and turned into a transition (tasks_int.h).  docs/job-protocol.md is the
 * normative description. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/frame.h"
#include "proto/utf8.h"
#include "supervisor/core/ckpt.h"
#include "supervisor/core/job.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/task_apply.h"
#include "supervisor/core/tasks_int.h"
#include "supervisor/core/mcpresult.h"

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
	if (tasks__start_next(ts) > 0 && persist_commit(ts->sv->persist) == 0)
		release_held(ts);
}

int task_frames_send_start(struct task *t)
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
	return task_frames_send_start(arg);
}

int task_frames_send_answer(struct task *t, const char *qid, const cJSON *response)
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

int task_frames_send_cancel(struct task *t, const char *reason)
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
	char *d = NULL;
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
	tasks__set_progress(ts, t, d, fraction, 1);
	free(d);
	tasks__notify(ts, t, TASK_EV_PROGRESS);
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
		tasks__fail_limit(ts, t, msg, "maxCheckpointMB", qmb);
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
	/* A checkpoint is a promise to the job: stored (a large one as a blob, on the worker pool),
	 * recorded, applied; acknowledged after the commit (checkpoint_stored). */
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
		tasks__fail_limit(ts, t, msg, "stateDirMaxMB", mb);
		return;
	}
	if (rc < 0) {
		/* Never tell the job a checkpoint is safe when it is not. */
		char msg[200];
		snprintf(msg, sizeof msg, "The checkpoint could not be stored: %s.", strerror(-rc));
		tasks__fail(ts, t, "internal_error", msg, 1, "The server's disk may be full; retry the call later.");
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
		task_frames_send_answer(t, qid, a->response);
		free(qid);
		cJSON_Delete(choices);
		return 0;
	}
	struct store_rec r;
	char *ptext = dup_str(prompt, plen), *ctext = NULL;
	tasks__rec_init(&r, STORE_REC_ASK, t);
	r.u.ask.qid = qid;
	r.u.ask.prompt = ptext;
	int rc = ptext ? task_json_text(choices, &ctext) : -ENOMEM;
	r.u.ask.choices = ctext;
	if (rc == 0)
		rc = tasks__change(ts, t, &r);
	free(qid);
	free(ptext);
	free(ctext);
	cJSON_Delete(choices);
	if (rc < 0) {
		/* A question nobody could answer durably: end the attempt rather than wait on it. */
		char msg[200];
		snprintf(msg, sizeof msg, "The job's question could not be recorded: %s.", strerror(-rc));
		tasks__fail(ts, t, "internal_error", msg, 1, "The server's storage failed; retry the call later.");
		job_kill(t->job, NULL);
		return 0;
	}
	fplog(&ts->sv->log, FPLOG_INFO, t->id, "input required: %s", t->question_prompt ? t->question_prompt : "");
	tasks__notify(ts, t, TASK_EV_STATUS);
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
		tasks__finish(ts, t, TASK_COMPLETED, r, is_mcp, NULL);
		return;
	}
	cJSON_Delete(t->pending_result);
	t->pending_result = r;
	t->pending_result_mcp = is_mcp;
	t->result_held = 1;
	tasks__set_progress(ts, t, "The job has sent its result; the task completes once the job has exited.",
	             t->fraction, 0);
	tasks__notify(ts, t, TASK_EV_PROGRESS);
}

/* The held result, now that the job is gone. */
void task_frames_complete_held(struct tasks *ts, struct task *t)
{
	cJSON *r = t->pending_result;
	t->pending_result = NULL;
	t->result_held = 0;
	cJSON_Delete(t->pending_error);
	t->pending_error = NULL;
	tasks__finish(ts, t, TASK_COMPLETED, r, t->pending_result_mcp, NULL);
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
	int rc = persist_blob_put(p, t->result_pending, t->result_pending_len, t->pending_blob);
	if (rc == 0)
		t->pending_blob_bytes = t->result_pending_len;
	if (rc == -EDQUOT) {
		char msg[200];
		long mb = ts->sv->cfg->server.state_max_mb;
		snprintf(msg, sizeof msg, "The result of %zu bytes would take the state dir over its disk "
		         "budget (stateDirMaxMB %ld).", t->result_pending_len, mb);
		tasks__fail_limit(ts, t, msg, "stateDirMaxMB", mb);
		return;
	}
	if (rc < 0) {
		int n = t->result_store_tries++;
		int64_t delay = 1000LL << (n > 5 ? 5 : n);
		char msg[300];
		snprintf(msg, sizeof msg, "The job's result (%zu bytes) could not be stored yet (%s); "
		         "retrying in %lld s.", t->result_pending_len, strerror(-rc), (long long)(delay / 1000));
		fplog(&ts->sv->log, FPLOG_WARNING, t->id, "%s", msg);
		tasks__set_progress(ts, t, msg, t->fraction, 1);
		t->store_timer = loop_timer_in(ts->sv->loop, delay, on_store_timer, t);
		if (!t->store_timer) {
			tasks__fail(ts, t, "internal_error", "Out of memory while the job's result waited to be stored.", 1,
			     "Call the tool again later.");
			return;
		}
		tasks__notify(ts, t, TASK_EV_PROGRESS);
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
		tasks__fail_limit(ts, t, msg, "resultMaxBytes", max);
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
		free(t->pending_summary);
		t->pending_summary = describe_result(v ? v : mcp);
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
		tasks__fail(ts, t, c, mm, (int)r, hh);
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

int task_frames_on_frame(void *owner, struct job *j, const struct frame *f, const char **why)
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

