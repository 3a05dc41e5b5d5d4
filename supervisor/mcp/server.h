/* supervisor/server.h — the MCP server: sessions (stdio now; sockets later attach the same
 * way), JSON-RPC dispatch, the lifecycle (initialize, version negotiation), tools/list and
 * tools/call, logging, progress notifications and cancellation of in-flight calls.  The facade
 * tools (durable_task_*) live in facade.c. */
#ifndef FP_SERVER_H
#define FP_SERVER_H

#include "supervisor/core/supervisor.h"

struct server *server_new(struct supervisor *sv);
void server_free(struct server *srv);

/* Serve one connection.  primary: end of input on it shuts the supervisor down (stdio). */
int server_attach(struct server *srv, int in_fd, int out_fd, int primary);
/* Let every session write what it has queued (after the turn's journal commit). */
void server_release(struct server *srv);
/* Write released output of every session (the loop's end-of-turn hook calls this). */
void server_flush(struct server *srv);
/* At shutdown: wait up to timeout_ms for queued output to be written. */
void server_drain(struct server *srv, int timeout_ms);

#endif
