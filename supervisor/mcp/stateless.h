/* supervisor/mcp/stateless.h — what differs for MCP 2026-07-28 stateless requests, served on
 * the same connections as the initialize-based sessions of server.c.
 *
 * A request that carries _meta["io.modelcontextprotocol/protocolVersion"] stands alone: no
 * initialize, its client capabilities in _meta["io.modelcontextprotocol/clientCapabilities"].
 * This module answers it: server/discover, tools/list, tools/call (through the one call path,
 * call.h, with this era's answers), the resources methods, and the io.modelcontextprotocol/tasks
 * extension (tasks/get, tasks/update, tasks/cancel) for clients that declare it on the request.
 * Every result carries resultType; a task is returned only to a request that declared the
 * extension.  Multi round-trip input (InputRequiredResult) carries the task id as
 * requestState.  The tasks are the same durable tasks the durable_task_* tools and the
 * 2025-11-25 task API show.  Its waiting calls are waits of the session (wait.h). */
#ifndef FP_STATELESS_H
#define FP_STATELESS_H

#include <cJSON.h>

#include "supervisor/mcp/session.h"

/* 1 if a request with these params belongs to this era (its _meta names a protocol version). */
int stateless_claims(const cJSON *params);
/* Answer one such request on s, now or (for a call that waits on its task) later. */
void stateless_request(struct session *s, const cJSON *id, const char *method, const cJSON *params);

#endif
