/* supervisor/mcp/toolresult.c — see toolresult.h. */
#include "supervisor/mcp/toolresult.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/core/tasks.h"

/* The same JSON twice: clients that read only text blocks (most hosts' models) and those
 * that read structuredContent (SDK clients with an outputSchema) see the same answer. */
cJSON *toolresult_wrap(cJSON *obj, int is_error)
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

cJSON *toolresult_failure(cJSON *envelope)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", "failed");
	cJSON_AddItemToObject(o, "error", envelope);
	return toolresult_wrap(o, 1);
}

cJSON *toolresult_error(const char *code, const char *message, int retryable, const char *hint)
{
	return toolresult_failure(task_envelope(code, message, retryable, hint));
}

/* Names the errno so an operator can tell a full disk (ENOSPC) from a failing one (EIO). */
cJSON *toolresult_storage_error(int err)
{
	char msg[300];
	const char *name = strerrorname_np(-err);
	snprintf(msg, sizeof msg, "The server cannot store anything durably right now (%s: %s); nothing was done.",
	         name ? name : "unknown error", strerror(-err));
	cJSON *env = task_envelope("storage_unavailable", msg, 1,
		"Call again in a few seconds; reads (durable_task_get, durable_task_list) keep working meanwhile. "
		"If it lasts, tell the operator: the disk of the server's state directory is full or failing.");
	cJSON_AddStringToObject(env, "errno", name ? name : "unknown");
	return toolresult_failure(env);
}

cJSON *toolresult_invalid_param(const char *param, const char *message)
{
	cJSON *env = task_envelope("invalid_param", message, 1,
		"Fix the named parameter (see the tool's inputSchema) and call again.");
	cJSON_AddStringToObject(env, "param", param);
	return toolresult_failure(env);
}

cJSON *toolresult_prop(cJSON *props, const char *name, const char *type, const char *desc)
{
	cJSON *p = cJSON_AddObjectToObject(props, name);
	cJSON_AddStringToObject(p, "type", type);
	cJSON_AddStringToObject(p, "description", desc);
	return p;
}

/* Built-in tools never reach outside the server (openWorldHint false) and take no keys
 * beyond their schema's (additionalProperties false). */
cJSON *toolresult_tool_def(cJSON *arr, const char *name, const char *title, const char *desc, int readonly,
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

void toolresult_require(cJSON *schema, const char *a, const char *b)
{
	cJSON *r = cJSON_AddArrayToObject(schema, "required");
	cJSON_AddItemToArray(r, cJSON_CreateString(a));
	if (b)
		cJSON_AddItemToArray(r, cJSON_CreateString(b));
}
