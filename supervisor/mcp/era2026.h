/* supervisor/era2026.h — MCP 2026-07-28 ("stateless") requests, served on the same connections
 * as the initialize-based sessions of server.c.
 *
 * A request that carries _meta["io.modelcontextprotocol/protocolVersion"] stands alone: no
 * initialize, its client capabilities in _meta["io.modelcontextprotocol/clientCapabilities"].
 * This module answers it: server/discover, tools/list, tools/call, the resources methods, and the
 * io.modelcontextprotocol/tasks extension (tasks/get, tasks/update, tasks/cancel) for clients
 * that declare it on the request.  Every result carries resultType; a task is returned only to a
 * request that declared the extension.  Multi round-trip input (InputRequiredResult) carries the
 * task id as requestState.  The tasks are the same durable tasks the facade tools and the
 * 2025-11-25 task API show.
 *
 * The module borrows server.c's connections (struct msess) and owns its waiting calls. */
#ifndef FP_ERA2026_H
#define FP_ERA2026_H

#include <cJSON.h>

#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"

struct era2026;
struct msess;

struct era2026 *era2026_new(struct server *srv, struct supervisor *sv);
void era2026_free(struct era2026 *e);

/* 1 if a request with these params belongs to this era (its _meta names a protocol version). */
int era2026_claims(const cJSON *params);
/* Answer one such request on ms, now or (for a call that waits on its task) later. */
void era2026_request(struct era2026 *e, struct msess *ms, const cJSON *id, const char *method,
                     const cJSON *params);
/* The task observer's events (server.c forwards every one). */
void era2026_on_task(struct era2026 *e, struct task *t, enum task_event ev);
/* notifications/cancelled for a waiting call of ms: 1 if it was ours (the call is dropped and
 * its task cancelled), 0 otherwise. */
int era2026_cancelled(struct era2026 *e, struct msess *ms, const cJSON *request_id, const char *reason);

#endif
