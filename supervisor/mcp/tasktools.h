/* supervisor/mcp/tasktools.h — the model-facing durable_task_* tools (get, respond, cancel,
 * list; docs/tools.md): how a client without a task API polls, answers and stops tasks.
 * Results are CallToolResults built with toolresult.h from the views of views.h. */
#ifndef FP_TASKTOOLS_H
#define FP_TASKTOOLS_H

#include <cJSON.h>

#include "supervisor/core/supervisor.h"

/* The four tool definitions for tools/list, appended to arr. */
void tasktools_list(cJSON *arr);
/* 1 if name is one of them. */
int tasktools_is_tool(const char *name);
/* 1 if name is one that changes nothing (answered while the journal cannot take records). */
int tasktools_is_read(const char *name);
/* Run one whose inputSchema (from tasktools_list) is schema; args (borrowed) are validated
 * here.  A change the journal cannot take is refused (storage_unavailable) before anything is
 * touched.  Returns a CallToolResult (NULL only when out of memory). */
cJSON *tasktools_call(struct supervisor *sv, const char *name, const cJSON *schema, cJSON *args);

#endif
