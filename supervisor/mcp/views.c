/* supervisor/mcp/views.c — see views.h. */
#include "supervisor/mcp/views.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/jsonrpc.h"
#include "supervisor/core/transfer.h"
#include "supervisor/mcp/resources.h"
#include "supervisor/mcp/toolresult.h"

#define DEFAULT_TTL_S 86400.0

void views_iso_time(int64_t ms, char out[64])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
	         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static void add_time(cJSON *o, const char *key, int64_t ms)
{
	char buf[64];
	views_iso_time(ms, buf);
	cJSON_AddStringToObject(o, key, buf);
}

/* ---- the model-facing views (durable_task_*) ------------------------------------------- */

/* What every model-facing view starts with: enough to call the next tool. */
static cJSON *base_view(const struct task *t)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "taskId", t->id);
	cJSON_AddStringToObject(o, "status", task_status_name(t->status));
	cJSON_AddStringToObject(o, "tool", t->tool_name);
	return o;
}

/* Progress only when the job reported some: an empty object would read as "no progress". */
static void add_progress(cJSON *o, const struct task *t)
{
	if (!t->progress_msg && t->fraction < 0)
		return;
	cJSON *p = cJSON_AddObjectToObject(o, "progress");
	cJSON_AddStringToObject(p, "message", t->progress_msg ? t->progress_msg : "");
	if (t->fraction >= 0)
		cJSON_AddNumberToObject(p, "fraction", t->fraction);
}

/* The note differs by state because a model acts on it literally: a queued task must not read
 * as running, a finished one must not invite more polling than one call. */
cJSON *views_handle(struct supervisor *sv, const struct task *t)
{
	cJSON *o = base_view(t);
	int pos = tasks_queue_position(sv->tasks, t);
	cJSON_AddNumberToObject(o, "pollIntervalMs", VIEWS_POLL_MS);
	cJSON_AddStringToObject(o, "pollWith", "durable_task_get");
	if (pos > 0)
		cJSON_AddNumberToObject(o, "queuePosition", pos);
	const char *note;
	switch (t->status) {
	case TASK_INPUT_REQUIRED:
		note = "The task is waiting for an answer. Call durable_task_get with this taskId to see the "
		       "question, then durable_task_respond.";
		break;
	case TASK_WORKING:
		note = pos > 0
			? "Queued: it starts when a slot is free. Call durable_task_get with this taskId until "
			  "status is completed, failed or cancelled. The taskId stays valid across reconnects and restarts."
			: "Started in the background. Call durable_task_get with this taskId until status is "
			  "completed, failed or cancelled. The taskId stays valid across reconnects and restarts.";
		break;
	default:
		note = "The task has already finished. Call durable_task_get with this taskId for the outcome.";
		break;
	}
	cJSON_AddStringToObject(o, "note", note);
	return o;
}

cJSON *views_handle_result(struct supervisor *sv, const struct task *t)
{
	cJSON *r = toolresult_wrap(views_handle(sv, t), 0);
	if (r)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "_meta"), VIEWS_HANDLE_META, t->id);
	return r;
}

/* The status-specific part of the durable_task_get view; writes the note for the model. */
static void add_status_part(struct supervisor *sv, cJSON *o, const struct task *t, char *note, size_t len)
{
	switch (t->status) {
	case TASK_WORKING: {
		int pos = tasks_queue_position(sv->tasks, t);
		add_progress(o, t);
		if (pos > 0) {
			cJSON_AddNumberToObject(o, "queuePosition", pos);
			snprintf(note, len, "Queued at position %d, waiting for a free slot. Call "
			         "durable_task_get again in about %d s.", pos, VIEWS_POLL_MS / 1000);
		} else {
			snprintf(note, len, "Still running. Call durable_task_get again in about %d s.",
			         VIEWS_POLL_MS / 1000);
		}
		cJSON_AddNumberToObject(o, "pollIntervalMs", VIEWS_POLL_MS);
		break;
	}
	case TASK_INPUT_REQUIRED: {
		add_progress(o, t);
		cJSON *q = cJSON_AddObjectToObject(o, "inputRequest");
		cJSON_AddStringToObject(q, "questionId", t->question_id ? t->question_id : "");
		cJSON_AddStringToObject(q, "prompt", t->question_prompt ? t->question_prompt : "");
		if (t->question_choices)
			cJSON_AddItemToObject(q, "choices", cJSON_Duplicate(t->question_choices, 1));
		cJSON_AddStringToObject(o, "respondWith", "durable_task_respond");
		snprintf(note, len, "The job is waiting for an answer. Ask the user if you need to, "
		         "then call durable_task_respond with this taskId and the answer%s.",
		         t->question_choices ? " (one of the choices)" : "");
		break;
	}
	case TASK_COMPLETED:
		if (!t->result && t->result_blob[0]) {
			/* Kept in the blob store: name it, never load it here. */
			char uri[200];
			artifacts_uri_format(uri, sizeof uri, RES_RESULT, t->id, NULL);
			cJSON_AddStringToObject(o, "resultUri", uri);
			cJSON_AddNumberToObject(o, "resultBytes", (double)t->result_bytes);
		} else {
			cJSON_AddItemToObject(o, "result", t->result ? cJSON_Duplicate(t->result, 1) : cJSON_CreateNull());
		}
		if (t->artifacts) {
			cJSON_AddItemToObject(o, "artifacts", cJSON_Duplicate(t->artifacts, 1));
			snprintf(note, len, "Finished. The job's result is in result; the files it produced are "
			         "in artifacts (download them with file_transfer_open direction download, path = uri).");
		} else {
			snprintf(note, len, "Finished. The job's result is in result.");
		}
		break;
	case TASK_FAILED:
		cJSON_AddItemToObject(o, "error", t->error ? cJSON_Duplicate(t->error, 1)
			: task_envelope("internal_error", "failed without a reason", 0, ""));
		snprintf(note, len, "The task failed. error.recoveryHint says what to do next.");
		break;
	case TASK_CANCELLED:
		snprintf(note, len, "The task was cancelled. Call the tool again to start over.");
		break;
	}
}

/* Times and attempt let a model tell a resumed task from a stuck one; the effective sandbox
 * shows what the job was allowed. */
cJSON *views_status(struct supervisor *sv, const struct task *t)
{
	cJSON *o = base_view(t);
	char note[256] = "";
	cJSON_AddNumberToObject(o, "attempt", t->attempt);
	add_time(o, "createdAt", t->created_ms);
	add_time(o, "updatedAt", t->updated_ms);
	if (t->started_ms)
		add_time(o, "startedAt", t->started_ms);
	add_status_part(sv, o, t, note, sizeof note);
	if (TASK_TERMINAL(t->status))
		add_time(o, "expiresAt", t->expires_ms);
	if (t->sandbox)
		cJSON_AddItemToObject(o, "sandbox", cJSON_Duplicate(t->sandbox, 1));
	cJSON_AddStringToObject(o, "note", note);
	return o;
}

/* A result too large to paste into the model's context goes out as a summary and a link;
 * one kept in a blob is large by construction. */
static int result_too_large(struct supervisor *sv, const struct task *t)
{
	if (t->status != TASK_COMPLETED || !sv->transfers)
		return 0;
	if (!t->result)
		return t->result_blob[0] != 0;
	char *s = cJSON_PrintUnformatted(t->result);
	size_t n = s ? strlen(s) : 0;
	free(s);
	return (long)n > sv->cfg->server.result_inline_bytes;
}

cJSON *views_result_lost(const struct task *t)
{
	char msg[300];
	snprintf(msg, sizeof msg, "Task %s completed, but its stored result (blob %s) is missing or "
	         "damaged; it cannot be read back.", t->id, t->result_blob);
	cJSON *env = task_envelope("task_lost", msg, 0,
		"Call the tool again to compute the result anew; `forkpoint fsck` reports the damage.");
	if (env) {
		cJSON_AddStringToObject(env, "blob", t->result_blob);
		cJSON_AddStringToObject(env, "taskStatus", task_status_name(t->status));
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "taskId", t->id);
	cJSON_AddStringToObject(o, "status", "failed");
	cJSON_AddItemToObject(o, "error", env);
	return toolresult_wrap(o, 1);
}

/* A lost or too-large result must not be inlined: the first is an error of its own, the
 * second a link (resources_result_link) the model can download. */
cJSON *views_status_result(struct supervisor *sv, const struct task *t)
{
	if (t->status == TASK_COMPLETED && t->result_lost)
		return views_result_lost(t);
	if (result_too_large(sv, t))
		return resources_result_link(t);
	return toolresult_wrap(views_status(sv, t), 0);
}

/* A job's explicit MCP result goes as it is (cleaned when it was received, mcpresult.h); plain
 * JSON becomes structuredContent plus text.  A task that did not complete answers its status
 * view as an error result, so a sync caller sees why. */
cJSON *views_final_result(struct supervisor *sv, const struct task *t)
{
	if (t->status == TASK_COMPLETED && t->result_lost)
		return views_result_lost(t);
	if (result_too_large(sv, t))
		return resources_result_link(t);
	if (t->status == TASK_COMPLETED && t->result_is_mcp)
		return cJSON_Duplicate(t->result, 1);
	if (t->status == TASK_COMPLETED) {
		cJSON *v = t->result ? cJSON_Duplicate(t->result, 1) : cJSON_CreateNull();
		if (!cJSON_IsObject(v)) {
			/* structuredContent must be an object: wrap anything else. */
			cJSON *w = cJSON_CreateObject();
			cJSON_AddItemToObject(w, "result", v);
			v = w;
		}
		return toolresult_wrap(v, 0);
	}
	return toolresult_wrap(views_status(sv, t), 1);
}

cJSON *views_list_entry(const struct task *t)
{
	cJSON *e = base_view(t);
	add_progress(e, t);
	add_time(e, "createdAt", t->created_ms);
	add_time(e, "updatedAt", t->updated_ms);
	return e;
}

/* ---- the protocol task APIs ------------------------------------------------------------- */

/* The one line a task-API client shows next to the status: the question, the failure, or
 * the latest progress message. */
static const char *status_message(const struct task *t)
{
	if (t->status == TASK_INPUT_REQUIRED && t->question_prompt)
		return t->question_prompt;
	if ((t->status == TASK_FAILED || t->status == TASK_CANCELLED) && t->error)
		return cJSON_GetStringValue(cJSON_GetObjectItem(t->error, "message"));
	return t->progress_msg;
}

/* What every era's Task object starts with. */
static cJSON *task_object(const struct task *t)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "taskId", t->id);
	cJSON_AddStringToObject(o, "status", task_status_name(t->status));
	const char *sm = status_message(t);
	if (sm)
		cJSON_AddStringToObject(o, "statusMessage", sm);
	add_time(o, "createdAt", t->created_ms);
	add_time(o, "lastUpdatedAt", t->updated_ms);
	return o;
}

static double ttl_seconds(const struct task *t)
{
	return t->tool ? t->tool->ttl_seconds : DEFAULT_TTL_S;
}

/* ttl in milliseconds, as SEP-1686 asks; tasks made before the tool was removed from the
 * config keep the default. */
cJSON *views_task(const struct task *t)
{
	cJSON *o = task_object(t);
	cJSON_AddNumberToObject(o, "ttl", ttl_seconds(t) * 1000.0);
	cJSON_AddNumberToObject(o, "pollInterval", VIEWS_POLL_MS);
	return o;
}

/* A one-field form: clients render it as a prompt with a text box, or a pick list when the
 * job offered choices. */
cJSON *views_elicit_params(const struct task *t)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "mode", "form");
	cJSON_AddStringToObject(p, "message", t->question_prompt ? t->question_prompt : "");
	cJSON *schema = cJSON_AddObjectToObject(p, "requestedSchema");
	cJSON_AddStringToObject(schema, "type", "object");
	cJSON *resp = cJSON_AddObjectToObject(cJSON_AddObjectToObject(schema, "properties"), "response");
	cJSON_AddStringToObject(resp, "type", "string");
	cJSON_AddStringToObject(resp, "title", "Answer");
	if (t->question_choices)
		cJSON_AddItemToObject(resp, "enum", cJSON_Duplicate(t->question_choices, 1));
	cJSON_AddItemToArray(cJSON_AddArrayToObject(schema, "required"), cJSON_CreateString("response"));
	return p;
}

cJSON *views_input_requests(const struct task *t)
{
	cJSON *reqs = cJSON_CreateObject();
	if (t->status == TASK_INPUT_REQUIRED && t->question_id) {
		/* The job's question id is the key: stable for the question, never reused for another. */
		cJSON *r = cJSON_AddObjectToObject(reqs, t->question_id);
		cJSON_AddStringToObject(r, "method", "elicitation/create");
		cJSON_AddItemToObject(r, "params", views_elicit_params(t));
	}
	return reqs;
}

/* A failed task as the JSON-RPC error its call would have ended with; the envelope is data. */
static cJSON *task_error(const struct task *t)
{
	cJSON *err = cJSON_CreateObject();
	const char *msg = t->error ? cJSON_GetStringValue(cJSON_GetObjectItem(t->error, "message")) : NULL;
	cJSON_AddNumberToObject(err, "code", RPC_INTERNAL_ERROR);
	cJSON_AddStringToObject(err, "message", msg ? msg : "The task failed.");
	if (t->error)
		cJSON_AddItemToObject(err, "data", cJSON_Duplicate(t->error, 1));
	return err;
}

/* The 2026-07-28 extension inlines what the status implies, so one tasks/get tells a client
 * everything it needs to act. */
cJSON *views_task_stateless(struct supervisor *sv, const struct task *t, int detailed)
{
	cJSON *o = task_object(t);
	cJSON_AddNumberToObject(o, "ttlMs", (double)llround(ttl_seconds(t) * 1000.0));
	cJSON_AddNumberToObject(o, "pollIntervalMs", VIEWS_POLL_MS);
	if (!detailed)
		return o;
	switch (t->status) {
	case TASK_INPUT_REQUIRED:
		cJSON_AddItemToObject(o, "inputRequests", views_input_requests(t));
		break;
	case TASK_COMPLETED: {
		/* The original call's result, isError included: a tool error is still "completed". */
		cJSON *r = views_final_result(sv, t);
		if (r && !cJSON_GetObjectItemCaseSensitive(r, "resultType"))
			cJSON_AddStringToObject(r, "resultType", "complete");
		cJSON_AddItemToObject(o, "result", r);
		break;
	}
	case TASK_FAILED:
		cJSON_AddItemToObject(o, "error", task_error(t));
		break;
	default:
		break;
	}
	return o;
}

/* ---- listing ---------------------------------------------------------------------------- */

/* Cursors are task ids: stable across inserts at the head (new tasks come first), and a
 * cursor naming an expired task fails loudly rather than restarting the list. */
int views_task_page(struct tasks *ts, const char *cursor, int status, int max,
                    cJSON *(*entry)(const struct task *t), cJSON *arr, const char **next)
{
	struct task *t = tasks_newest(ts), *last = NULL;
	int n = 0;
	*next = NULL;
	if (cursor) {
		struct task *c = tasks_find(ts, cursor);
		if (!c)
			return -ENOENT;
		t = c->next;
	}
	for (; t; t = t->next) {
		if (status >= 0 && (int)t->status != status)
			continue;
		if (n == max)
			break;
		cJSON_AddItemToArray(arr, entry(t));
		last = t;
		n++;
	}
	/* The cursor is the last task shown: the next page starts after it. */
	if (t && last)
		*next = last->id;
	return 0;
}
