/* supervisor/facade.h — the model-facing views of tasks and the durable_task_* tools
 * (docs/tools.md).  Results are built as {content:[text], structuredContent, isError?}. */
#ifndef FP_FACADE_H
#define FP_FACADE_H

#include <cJSON.h>
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"

/* The four tool definitions for tools/list, appended to arr. */
void facade_list_tools(cJSON *arr);
/* 1 if name is a facade tool. */
int facade_is_tool(const char *name);
/* Run a facade tool whose inputSchema (from facade_list_tools) is schema; args are validated
 * here.  Returns a CallToolResult (NULL only when out of memory). */
cJSON *facade_call(struct supervisor *sv, const char *name, const cJSON *schema, cJSON *args);

/* The handle a task-mode call returns at once. */
cJSON *facade_handle(struct supervisor *sv, const struct task *t);
/* _meta key that marks a CallToolResult as a task handle made by this server (its value is the
 * taskId).  Job-supplied results never carry _meta (mcpresult.h), so a client such as
 * `forkpoint call` can tell a real handle from a job's result that merely looks like one. */
#define FACADE_HANDLE_META "forkpoint/taskHandle"
/* facade_handle as a CallToolResult, marked with FACADE_HANDLE_META. */
cJSON *facade_handle_result(struct supervisor *sv, const struct task *t);
/* What durable_task_get shows for t. */
cJSON *facade_view(struct supervisor *sv, const struct task *t);
/* Wrap a JSON object as a CallToolResult: same JSON as structuredContent and as text. */
cJSON *facade_result(cJSON *obj, int is_error);
/* A CallToolResult for a failure envelope {status:"failed", error:{…}}; extra may add fields
 * to error (consumed, may be NULL). */
cJSON *facade_error(const char *code, const char *message, int retryable, const char *hint);
/* The same for an envelope already built (task_envelope(), consumed). */
cJSON *facade_failure(cJSON *envelope);
/* The failure for a change refused because the journal cannot take it (err: -errno, such as
 * -ENOSPC or -EIO): code storage_unavailable, retryable, the errno's name in `errno`. */
cJSON *facade_storage_error(int err);
/* The result of a finished task as the original tool call's result (sync/auto mode). */
cJSON *facade_final_result(struct supervisor *sv, const struct task *t);
/* What a completed task whose result blob is missing or damaged answers: a task_lost
 * envelope naming the blob (the task and its record are kept). */
cJSON *facade_result_lost(const struct task *t);
/* ISO 8601 UTC with milliseconds. */
void facade_iso_time(int64_t ms, char out[64]);

/* Building the built-in tools' definitions (here and in transfer.c).  facade_tool_def appends
 * {name, title, description, inputSchema: {type: object, properties: {}, additionalProperties:
 * false}, annotations} to arr and returns the inputSchema (borrowed) for properties. */
cJSON *facade_tool_def(cJSON *arr, const char *name, const char *title, const char *desc, int readonly,
                       int destructive, int idempotent);
/* Add {type, description} as properties[name]; returns it (borrowed) for more keywords. */
cJSON *facade_prop(cJSON *props, const char *name, const char *type, const char *desc);
/* The schema's "required": a, and b unless it is NULL. */
void facade_require(cJSON *schema, const char *a, const char *b);

#endif
