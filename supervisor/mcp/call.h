/* supervisor/mcp/call.h — the one tools/call path, for both protocol eras.  What differs
 * between them comes in as a wait_req (wait.h: how a waiting call answers) and a refuse rule
 * (which task-support combinations the era forbids); everything else is shared: argument
 * checks, built-in tools (durable_task_*, file_transfer_*), creating the task, and answering
 * it now or waiting on it.  Every call that creates a task makes the session follow it
 * (WAIT_FOLLOW), so the task's logs reach the client that started it. */
#ifndef FP_CALL_H
#define FP_CALL_H

#include <cJSON.h>

#include "supervisor/core/config.h"
#include "supervisor/mcp/session.h"
#include "supervisor/mcp/wait.h"

/* The era's rule for calling tool as this request asks: 1 after answering the error, else 0. */
typedef int (*call_refuse_fn)(struct session *s, const cJSON *id, const struct tool_cfg *tool,
                              const struct wait_req *rq);

/* Answer (now or later) the tools/call request id with params on s. */
void call_tool(struct session *s, const cJSON *id, const cJSON *params, const struct wait_req *rq,
               call_refuse_fn refuse);
/* Answer a call about task t now if its state or its tool's mode allows, else wait on it
 * (sync and auto mode; params carries the progressToken). */
void call_answer_or_wait(struct session *s, const cJSON *id, const cJSON *params, struct task *t,
                         const struct wait_req *rq);
/* Validate args (consumed) against a configured tool's inputSchema and create its task.
 * 0 and *out; or -errno and *failure, the CallToolResult that says why (storage_unavailable,
 * invalid_arguments, queue_full, internal_error). */
int call_start_task(struct session *s, const struct tool_cfg *tool, cJSON *args, struct task **out,
                    cJSON **failure);

#endif
