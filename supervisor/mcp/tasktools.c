/* supervisor/mcp/tasktools.c — see tasktools.h.  Every text a model reads here is written to
 * be acted on: it says what happened and what to call next. */
#include "supervisor/mcp/tasktools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/schema.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/tasks.h"
#include "supervisor/mcp/toolresult.h"
#include "supervisor/mcp/views.h"

#define LIST_PAGE 50

/* The durable_task_* tools: the read-only ones are idempotent, the others change a task. */
static cJSON *tool_def(cJSON *arr, const char *name, const char *title, const char *desc, int readonly)
{
	return toolresult_tool_def(arr, name, title, desc, readonly, !readonly, readonly);
}

/* The descriptions are what a model reads to decide what to call: each says when to use the
 * tool and what to pass. */
void tasktools_list(cJSON *arr)
{
	cJSON *s, *p;
	s = tool_def(arr, "durable_task_get", "Get a background task",
		"Status, progress, question, result or error of a background task started by another tool. "
		"Call it with the taskId that tool returned, about once a second, until status is completed, "
		"failed or cancelled. Task ids stay valid across reconnects and server restarts.", 1);
	p = cJSON_GetObjectItem(s, "properties");
	toolresult_prop(p, "taskId", "string", "The taskId a tool call returned.");
	toolresult_require(s, "taskId", NULL);

	s = tool_def(arr, "durable_task_respond", "Answer a background task's question",
		"Answer the question of a task whose status is input_required. Use one of the question's "
		"choices when it has them. The task then continues.", 0);
	p = cJSON_GetObjectItem(s, "properties");
	toolresult_prop(p, "taskId", "string", "The task waiting for input.");
	toolresult_prop(p, "response", "string", "The answer (one of inputRequest.choices, if given).");
	toolresult_require(s, "taskId", "response");

	s = tool_def(arr, "durable_task_cancel", "Cancel a background task",
		"Stop a task that is still working or waiting for input. Finished tasks are left as they are.", 0);
	p = cJSON_GetObjectItem(s, "properties");
	toolresult_prop(p, "taskId", "string", "The task to cancel.");
	toolresult_require(s, "taskId", NULL);

	s = tool_def(arr, "durable_task_list", "List background tasks",
		"Background tasks, newest first, with their status. Use it to find a taskId you lost.", 1);
	p = cJSON_GetObjectItem(s, "properties");
	cJSON *st = toolresult_prop(p, "status", "string", "Only tasks with this status.");
	cJSON *en = cJSON_AddArrayToObject(st, "enum");
	for (int i = 0; i <= TASK_CANCELLED; i++)
		cJSON_AddItemToArray(en, cJSON_CreateString(task_status_name((enum task_status)i)));
	toolresult_prop(p, "cursor", "string", "nextCursor from the previous page.");
}

int tasktools_is_tool(const char *name)
{
	return strcmp(name, "durable_task_get") == 0 || strcmp(name, "durable_task_respond") == 0 ||
	       strcmp(name, "durable_task_cancel") == 0 || strcmp(name, "durable_task_list") == 0;
}

int tasktools_is_read(const char *name)
{
	return strcmp(name, "durable_task_get") == 0 || strcmp(name, "durable_task_list") == 0;
}

/* An id that never existed (as opposed to an expired one, which has a tombstone). */
static cJSON *unknown_task(const char *id)
{
	char msg[200];
	snprintf(msg, sizeof msg, "No task with id '%.64s'.", id);
	return toolresult_error("unknown_task", msg, 0,
		"Check the taskId (32 hex digits, as the tool call returned it); durable_task_list shows "
		"the tasks that exist.");
}

/* Choices are checked here, before the job sees the answer: a model that answers off-list
 * gets an error it can fix instead of a job that fails later. */
static cJSON *do_respond(struct supervisor *sv, struct task *t, const cJSON *response)
{
	char msg[300];
	if (t->status != TASK_INPUT_REQUIRED) {
		snprintf(msg, sizeof msg, "Task %s is %s, not waiting for input.", t->id, task_status_name(t->status));
		return toolresult_error("not_active", msg, 0,
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
			return toolresult_invalid_param("response", msg);
		}
	}
	int rc = tasks_respond(sv->tasks, t, response);
	if (rc == -ENOMEM)
		return toolresult_error("internal_error", strerror(-rc), 1, "Call durable_task_respond again.");
	if (rc < 0)
		return toolresult_storage_error(rc);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "taskId", t->id);
	cJSON_AddStringToObject(o, "status", task_status_name(t->status));
	cJSON_AddStringToObject(o, "tool", t->tool_name);
	cJSON_AddBoolToObject(o, "accepted", 1);
	cJSON_AddStringToObject(o, "note", "Answer delivered; the task continues. Call durable_task_get "
	                        "with this taskId until it finishes.");
	return toolresult_wrap(o, 0);
}

/* Cancelling a finished task is not an error for a model: it is told the task was left as
 * it is. */
static cJSON *do_cancel(struct supervisor *sv, struct task *t)
{
	int rc = tasks_cancel(sv->tasks, t, "cancelled by the client");
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "taskId", t->id);
	cJSON_AddStringToObject(o, "status", task_status_name(t->status));
	cJSON_AddStringToObject(o, "tool", t->tool_name);
	cJSON_AddStringToObject(o, "note", rc == -EALREADY
		? "The task had already finished; it was left as it is. Call durable_task_get for its outcome."
		: "Cancelled. The job was told to stop and is killed if it does not stop by itself.");
	return toolresult_wrap(o, 0);
}

/* The status filter as an enum value (-1: none); the schema has already checked the name. */
static int status_of(const cJSON *status)
{
	for (int i = 0; status && i <= TASK_CANCELLED; i++)
		if (strcmp(task_status_name((enum task_status)i), status->valuestring) == 0)
			return i;
	return -1;
}

/* One page through the one lister; the note tells the model whether to page on. */
static cJSON *do_list(struct supervisor *sv, const cJSON *status, const cJSON *cursor)
{
	const char *next;
	cJSON *o = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(o, "tasks");
	if (views_task_page(sv->tasks, cursor ? cursor->valuestring : NULL, status_of(status), LIST_PAGE,
	                    views_list_entry, arr, &next) < 0) {
		cJSON_Delete(o);
		return toolresult_invalid_param("cursor", "The cursor does not name a page of this list (it may have expired).");
	}
	if (next)
		cJSON_AddStringToObject(o, "nextCursor", next);
	cJSON_AddStringToObject(o, "note", next ? "More tasks: call durable_task_list with cursor set to nextCursor."
	                                        : "Call durable_task_get with a taskId for the details of one task.");
	return toolresult_wrap(o, 0);
}

/* Validate against the tool's own schema first: every error then names the field at fault. */
cJSON *tasktools_call(struct supervisor *sv, const char *name, const cJSON *schema, cJSON *args)
{
	char err[256], field[128];
	if (schema_validate(schema, args, err, sizeof err, field, sizeof field) < 0)
		return toolresult_invalid_param(field, err);
	if (strcmp(name, "durable_task_list") == 0)
		return do_list(sv, cJSON_GetObjectItem(args, "status"), cJSON_GetObjectItem(args, "cursor"));
	const char *id = cJSON_GetObjectItem(args, "taskId")->valuestring;
	struct task *t = tasks_find(sv->tasks, id);
	if (!t && tasks_tombstone_find(sv->tasks, id)) {
		char msg[200];
		snprintf(msg, sizeof msg, "Task '%.64s' finished and has expired; its result is no longer kept.", id);
		return toolresult_error("expired", msg, 0,
			"Call the tool again if you still need the result; fetch results before their expiresAt next time.");
	}
	if (!t)
		return unknown_task(id);
	/* A change that could not be made durable is refused before anything is touched. */
	int fault = strcmp(name, "durable_task_get") != 0 ? persist_fault(sv->persist) : 0;
	if (fault < 0)
		return toolresult_storage_error(fault);
	if (strcmp(name, "durable_task_get") == 0)
		return views_status_result(sv, t);
	if (strcmp(name, "durable_task_respond") == 0)
		return do_respond(sv, t, cJSON_GetObjectItem(args, "response"));
	return do_cancel(sv, t);
}
