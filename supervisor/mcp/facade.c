/* supervisor/facade.c — see facade.h.  Every text a model reads here is written to be acted
 * on: it says what happened and what to call next. */
#include "supervisor/mcp/facade.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "supervisor/core/persist.h"
#include "proto/schema.h"
#include "supervisor/core/transfer.h"
#include "supervisor/mcp/resources.h"

#define POLL_MS    1000
#define LIST_PAGE  50

void facade_iso_time(int64_t ms, char out[64])
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
	facade_iso_time(ms, buf);
	cJSON_AddStringToObject(o, key, buf);
}

cJSON *facade_result(cJSON *obj, int is_error)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *content = cJSON_AddArrayToObject(r, "content");
	cJSON *text = cJSON_CreateObject();
	char *pretty = cJSON_PrintUnformatted(obj);   /* a model reads it: no layout to pay for */
	cJSON_AddStringToObject(text, "type", "text");
	cJSON_AddStringToObject(text, "text", pretty ? pretty : "{}");
	free(pretty);
	cJSON_AddItemToArray(content, text);
	cJSON_AddItemToObject(r, "structuredContent", obj);
	if (is_error)
		cJSON_AddBoolToObject(r, "isError", 1);
	return r;
}

cJSON *facade_failure(cJSON *envelope)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", "failed");
	cJSON_AddItemToObject(o, "error", envelope);
	return facade_result(o, 1);
}

cJSON *facade_error(const char *code, const char *message, int retryable, const char *hint)
{
	return facade_failure(task_envelope(code, message, retryable, hint));
}

cJSON *facade_storage_error(int err)
{
	char msg[300];
	const char *name = strerrorname_np(-err);
	snprintf(msg, sizeof msg, "The server cannot store anything durably right now (%s: %s); nothing was done.",
	         name ? name : "unknown error", strerror(-err));
	cJSON *env = task_envelope("storage_unavailable", msg, 1,
		"Call again in a few seconds; reads (durable_task_get, durable_task_list) keep working meanwhile. "
		"If it lasts, tell the operator: the disk of the server's state directory is full or failing.");
	cJSON_AddStringToObject(env, "errno", name ? name : "unknown");
	return facade_failure(env);
}

static cJSON *invalid_param(const char *param, const char *message)
{
	cJSON *env = task_envelope("invalid_param", message, 1,
		"Fix the named parameter (see the tool's inputSchema) and call again.");
	cJSON_AddStringToObject(env, "param", param);
	return facade_failure(env);
}

/* ---- tool definitions ---------------------------------------------------------------- */

cJSON *facade_prop(cJSON *props, const char *name, const char *type, const char *desc)
{
	cJSON *p = cJSON_AddObjectToObject(props, name);
	cJSON_AddStringToObject(p, "type", type);
	cJSON_AddStringToObject(p, "description", desc);
	return p;
}

cJSON *facade_tool_def(cJSON *arr, const char *name, const char *title, const char *desc, int readonly,
                       int destructive, int idempotent)
{
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "name", name);
	cJSON_AddStringToObject(t, "title", title);
	cJSON_AddStringToObject(t, "description", desc);
	cJSON *s = cJSON_AddObjectToObject(t, "inputSchema");
	cJSON_AddStringToObject(s, "type", "object");
	cJSON_AddObjectToObject(s, "properties");
	cJSON_AddBoolToObject(s, "additionalProperties", 0);
	cJSON *a = cJSON_AddObjectToObject(t, "annotations");
	cJSON_AddBoolToObject(a, "readOnlyHint", readonly);
	cJSON_AddBoolToObject(a, "destructiveHint", destructive);
	cJSON_AddBoolToObject(a, "idempotentHint", idempotent);
	cJSON_AddBoolToObject(a, "openWorldHint", 0);
	cJSON_AddItemToArray(arr, t);
	return s;
}

void facade_require(cJSON *schema, const char *a, const char *b)
{
	cJSON *r = cJSON_AddArrayToObject(schema, "required");
	cJSON_AddItemToArray(r, cJSON_CreateString(a));
	if (b)
		cJSON_AddItemToArray(r, cJSON_CreateString(b));
}

/* The durable_task_* tools: the read-only ones are idempotent, the others change a task. */
static cJSON *tool_def(cJSON *arr, const char *name, const char *title, const char *desc, int readonly)
{
	return facade_tool_def(arr, name, title, desc, readonly, !readonly, readonly);
}

void facade_list_tools(cJSON *arr)
{
	cJSON *s, *p;
	s = tool_def(arr, "durable_task_get", "Get a background task",
		"Status, progress, question, result or error of a background task started by another tool. "
		"Call it with the taskId that tool returned, about once a second, until status is completed, "
		"failed or cancelled. Task ids stay valid across reconnects and server restarts.", 1);
	p = cJSON_GetObjectItem(s, "properties");
	facade_prop(p, "taskId", "string", "The taskId a tool call returned.");
	facade_require(s, "taskId", NULL);

	s = tool_def(arr, "durable_task_respond", "Answer a background task's question",
		"Answer the question of a task whose status is input_required. Use one of the question's "
		"choices when it has them. The task then continues.", 0);
	p = cJSON_GetObjectItem(s, "properties");
	facade_prop(p, "taskId", "string", "The task waiting for input.");
	facade_prop(p, "response", "string", "The answer (one of inputRequest.choices, if given).");
	facade_require(s, "taskId", "response");

	s = tool_def(arr, "durable_task_cancel", "Cancel a background task",
		"Stop a task that is still working or waiting for input. Finished tasks are left as they are.", 0);
	p = cJSON_GetObjectItem(s, "properties");
	facade_prop(p, "taskId", "string", "The task to cancel.");
	facade_require(s, "taskId", NULL);

	s = tool_def(arr, "durable_task_list", "List background tasks",
		"Background tasks, newest first, with their status. Use it to find a taskId you lost.", 1);
	p = cJSON_GetObjectItem(s, "properties");
	cJSON *st = facade_prop(p, "status", "string", "Only tasks with this status.");
	cJSON *en = cJSON_AddArrayToObject(st, "enum");
	for (int i = 0; i <= TASK_CANCELLED; i++)
		cJSON_AddItemToArray(en, cJSON_CreateString(task_status_name((enum task_status)i)));
	facade_prop(p, "cursor", "string", "nextCursor from the previous page.");
}

int facade_is_tool(const char *name)
{
	return strcmp(name, "durable_task_get") == 0 || strcmp(name, "durable_task_respond") == 0 ||
	       strcmp(name, "durable_task_cancel") == 0 || strcmp(name, "durable_task_list") == 0;
}

/* ---- views ----------------------------------------------------------------------------- */

static cJSON *base_view(const struct task *t)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "taskId", t->id);
	cJSON_AddStringToObject(o, "status", task_status_name(t->status));
	cJSON_AddStringToObject(o, "tool", t->tool_name);
	return o;
}

static void add_progress(cJSON *o, const struct task *t)
{
	if (!t->progress_msg && t->fraction < 0)
		return;
	cJSON *p = cJSON_AddObjectToObject(o, "progress");
	cJSON_AddStringToObject(p, "message", t->progress_msg ? t->progress_msg : "");
	if (t->fraction >= 0)
		cJSON_AddNumberToObject(p, "fraction", t->fraction);
}

cJSON *facade_handle(struct supervisor *sv, const struct task *t)
{
	cJSON *o = base_view(t);
	int pos = tasks_queue_position(sv->tasks, t);
	cJSON_AddNumberToObject(o, "pollIntervalMs", POLL_MS);
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

cJSON *facade_handle_result(struct supervisor *sv, const struct task *t)
{
	cJSON *r = facade_result(facade_handle(sv, t), 0);
	if (r)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "_meta"), FACADE_HANDLE_META, t->id);
	return r;
}

cJSON *facade_view(struct supervisor *sv, const struct task *t)
{
	cJSON *o = base_view(t);
	char note[256];
	cJSON_AddNumberToObject(o, "attempt", t->attempt);
	add_time(o, "createdAt", t->created_ms);
	add_time(o, "updatedAt", t->updated_ms);
	if (t->started_ms)
		add_time(o, "startedAt", t->started_ms);
	switch (t->status) {
	case TASK_WORKING: {
		int pos = tasks_queue_position(sv->tasks, t);
		add_progress(o, t);
		if (pos > 0) {
			cJSON_AddNumberToObject(o, "queuePosition", pos);
			snprintf(note, sizeof note, "Queued at position %d, waiting for a free slot. Call "
			         "durable_task_get again in about %d s.", pos, POLL_MS / 1000);
		} else {
			snprintf(note, sizeof note, "Still running. Call durable_task_get again in about %d s.",
			         POLL_MS / 1000);
		}
		cJSON_AddNumberToObject(o, "pollIntervalMs", POLL_MS);
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
		snprintf(note, sizeof note, "The job is waiting for an answer. Ask the user if you need to, "
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
			snprintf(note, sizeof note, "Finished. The job's result is in result; the files it produced are "
			         "in artifacts (download them with file_transfer_open direction download, path = uri).");
		} else {
			snprintf(note, sizeof note, "Finished. The job's result is in result.");
		}
		break;
	case TASK_FAILED:
		cJSON_AddItemToObject(o, "error", t->error ? cJSON_Duplicate(t->error, 1)
			: task_envelope("internal_error", "failed without a reason", 0, ""));
		snprintf(note, sizeof note, "The task failed. error.recoveryHint says what to do next.");
		break;
	case TASK_CANCELLED:
		snprintf(note, sizeof note, "The task was cancelled. Call the tool again to start over.");
		break;
	}
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

cJSON *facade_result_lost(const struct task *t)
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
	return facade_result(o, 1);
}

cJSON *facade_final_result(struct supervisor *sv, const struct task *t)
{
	if (t->status == TASK_COMPLETED && t->result_lost)
		return facade_result_lost(t);
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
		return facade_result(v, 0);
	}
	return facade_result(facade_view(sv, t), 1);
}

/* ---- the tools --------------------------------------------------------------------------- */

static cJSON *unknown_task(const char *id)
{
	char msg[200];
	snprintf(msg, sizeof msg, "No task with id '%.64s'.", id);
	return facade_error("unknown_task", msg, 0,
		"Check the taskId (32 hex digits, as the tool call returned it); durable_task_list shows "
		"the tasks that exist.");
}

static cJSON *do_get(struct supervisor *sv, struct task *t)
{
	if (t->status == TASK_COMPLETED && t->result_lost)
		return facade_result_lost(t);
	if (result_too_large(sv, t))
		return resources_result_link(t);
	return facade_result(facade_view(sv, t), 0);
}

static cJSON *do_respond(struct supervisor *sv, struct task *t, const cJSON *response)
{
	char msg[300];
	if (t->status != TASK_INPUT_REQUIRED) {
		snprintf(msg, sizeof msg, "Task %s is %s, not waiting for input.", t->id, task_status_name(t->status));
		return facade_error("not_active", msg, 0,
			"Call durable_task_get to see what the task is doing; answer only when status is input_required.");
	}
	if (t->question_choices) {
		int ok = 0;
		const cJSON *c;
		cJSON_ArrayForEach(c, t->question_choices)
			if (cJSON_IsString(c) && strcmp(c->valuestring, response->valuestring) == 0)
				ok = 1;
		if (!ok) {
			char *choices = cJSON_PrintUnformatted(t->question_choices);
			snprintf(msg, sizeof msg, "'%.64s' is not one of the choices %.200s.",
			         response->valuestring, choices ? choices : "");
			free(choices);
			return invalid_param("response", msg);
		}
	}
	int rc = tasks_respond(sv->tasks, t, response);
	if (rc == -ENOMEM)
		return facade_error("internal_error", strerror(-rc), 1, "Call durable_task_respond again.");
	if (rc < 0)
		return facade_storage_error(rc);
	cJSON *o = base_view(t);
	cJSON_AddBoolToObject(o, "accepted", 1);
	cJSON_AddStringToObject(o, "note", "Answer delivered; the task continues. Call durable_task_get "
	                        "with this taskId until it finishes.");
	return facade_result(o, 0);
}

static cJSON *do_cancel(struct supervisor *sv, struct task *t)
{
	int rc = tasks_cancel(sv->tasks, t, "cancelled by the client");
	cJSON *o = base_view(t);
	cJSON_AddStringToObject(o, "note", rc == -EALREADY
		? "The task had already finished; it was left as it is. Call durable_task_get for its outcome."
		: "Cancelled. The job was told to stop and is killed if it does not stop by itself.");
	return facade_result(o, 0);
}

static cJSON *do_list(struct supervisor *sv, const cJSON *status, const cJSON *cursor)
{
	struct task *t = tasks_newest(sv->tasks);
	if (cursor) {
		struct task *c = tasks_find(sv->tasks, cursor->valuestring);
		if (!c)
			return invalid_param("cursor", "The cursor does not name a page of this list (it may have expired).");
		t = c->next;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(o, "tasks");
	int n = 0;
	struct task *last = NULL;
	for (; t; t = t->next) {
		if (status && strcmp(task_status_name(t->status), status->valuestring) != 0)
			continue;
		if (n == LIST_PAGE)
			break;
		cJSON *e = base_view(t);
		add_progress(e, t);
		add_time(e, "createdAt", t->created_ms);
		add_time(e, "updatedAt", t->updated_ms);
		cJSON_AddItemToArray(arr, e);
		last = t;
		n++;
	}
	if (t && last)
		cJSON_AddStringToObject(o, "nextCursor", last->id);
	cJSON_AddStringToObject(o, "note", t ? "More tasks: call durable_task_list with cursor set to nextCursor."
	                                      : "Call durable_task_get with a taskId for the details of one task.");
	return facade_result(o, 0);
}

cJSON *facade_call(struct supervisor *sv, const char *name, const cJSON *schema, cJSON *args)
{
	char err[256], field[128];
	cJSON *res;
	if (schema_validate(schema, args, err, sizeof err, field, sizeof field) < 0) {
		res = invalid_param(field, err);
		goto out;
	}
	if (strcmp(name, "durable_task_list") == 0) {
		res = do_list(sv, cJSON_GetObjectItem(args, "status"), cJSON_GetObjectItem(args, "cursor"));
		goto out;
	}
	const char *id = cJSON_GetObjectItem(args, "taskId")->valuestring;
	struct task *t = tasks_find(sv->tasks, id);
	if (!t && tasks_tombstone_find(sv->tasks, id)) {
		char msg[200];
		snprintf(msg, sizeof msg, "Task '%.64s' finished and has expired; its result is no longer kept.", id);
		res = facade_error("expired", msg, 0,
			"Call the tool again if you still need the result; fetch results before their expiresAt next time.");
		goto out;
	}
	if (!t) {
		res = unknown_task(id);
		goto out;
	}
	/* A change that could not be made durable is refused before anything is touched. */
	int fault = strcmp(name, "durable_task_get") != 0 ? persist_fault(sv->persist) : 0;
	if (fault < 0)
		res = facade_storage_error(fault);
	else if (strcmp(name, "durable_task_get") == 0)
		res = do_get(sv, t);
	else if (strcmp(name, "durable_task_respond") == 0)
		res = do_respond(sv, t, cJSON_GetObjectItem(args, "response"));
	else
		res = do_cancel(sv, t);
out:
	return res;
}
