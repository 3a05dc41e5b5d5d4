/* supervisor/mcp/views.h — every JSON shape of a task that a client sees, in one place: the
 * handle a task-mode call returns, what durable_task_get shows, a call's final result, a list
 * entry, the Task objects of both protocol eras' task APIs, and a pending question as an
 * elicitation.  Also the one task lister that every list method pages with.
 * All functions return a new cJSON (caller frees; NULL only when out of memory) and borrow
 * their arguments.  The texts a model reads say what happened and what to call next. */
#ifndef FP_VIEWS_H
#define FP_VIEWS_H

#include <stdint.h>
#include <cJSON.h>

#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"

/* _meta key that marks a CallToolResult as a task handle made by this server (its value is the
 * taskId).  Job-supplied results never carry _meta (mcpresult.h), so a client such as
 * `forkpoint call` can tell a real handle from a job's result that merely looks like one. */
#define VIEWS_HANDLE_META "forkpoint/taskHandle"
#define VIEWS_POLL_MS     1000

/* ISO 8601 UTC with milliseconds. */
void views_iso_time(int64_t ms, char out[64]);

/* The handle a task-mode call returns at once: {taskId, status, tool, pollIntervalMs, pollWith,
 * queuePosition?, note}. */
cJSON *views_handle(struct supervisor *sv, const struct task *t);
/* views_handle as a CallToolResult, marked with VIEWS_HANDLE_META. */
cJSON *views_handle_result(struct supervisor *sv, const struct task *t);
/* What durable_task_get shows for t (the object). */
cJSON *views_status(struct supervisor *sv, const struct task *t);
/* durable_task_get's CallToolResult: the status view, or for a result too large to inline a
 * link to it, or task_lost when its stored result is gone. */
cJSON *views_status_result(struct supervisor *sv, const struct task *t);
/* The result of a finished task as the original tool call's result (sync/auto mode,
 * tasks/result, the 2026 task's result); an unfinished or failed task as its status view with
 * isError. */
cJSON *views_final_result(struct supervisor *sv, const struct task *t);
/* What a completed task whose result blob is missing or damaged answers: a task_lost
 * envelope naming the blob (the task and its record are kept). */
cJSON *views_result_lost(const struct task *t);
/* One durable_task_list entry: {taskId, status, tool, progress?, createdAt, updatedAt}. */
cJSON *views_list_entry(const struct task *t);

/* The Task of the 2025-11-25 task API: {taskId, status, statusMessage?, createdAt,
 * lastUpdatedAt, ttl, pollInterval}. */
cJSON *views_task(const struct task *t);
/* The Task of the 2026-07-28 tasks extension (ttlMs, pollIntervalMs); detailed adds what
 * tasks/get inlines for the status: inputRequests, result or error. */
cJSON *views_task_stateless(struct supervisor *sv, const struct task *t, int detailed);
/* params of an elicitation/create asking t's pending question. */
cJSON *views_elicit_params(const struct task *t);
/* {questionId: {method: elicitation/create, params}} for t's open question ({} when none). */
cJSON *views_input_requests(const struct task *t);

/* The one task lister: append entry(t) to arr for at most max tasks, newest first, whose status
 * is status (< 0: any), starting after the task named by cursor (NULL: from the newest).
 * *next is the cursor of the next page (a task id, borrowed) or NULL when none is left.
 * 0, or -ENOENT when cursor names no task (it may have expired). */
int views_task_page(struct tasks *ts, const char *cursor, int status, int max,
                    cJSON *(*entry)(const struct task *t), cJSON *arr, const char **next);

#endif
