/* supervisor/mcp/server.h — the MCP server: it owns the client connections (each an MCP
 * session over a transport, session.h and transport.h) and dispatches their JSON-RPC messages:
 * the lifecycle (initialize, version negotiation), tools/list and tools/call (call.h), the
 * 2025-11-25 task API, logging, resources and cancellation; 2026-07-28 stateless requests go to
 * stateless.h.  Task events and log lines are routed to the sessions that wait on or follow
 * the task (wait.h), never to every connection.
 *
 * Connections come and go: when one closes, its waits go at once (its tasks run on) and the
 * session is freed at the next server_release().  The primary connection (stdio) is the
 * process's reason to run: end of input on it stops the loop, and it is freed only by
 * server_free, after main has drained its output. */
#ifndef FP_SERVER_H
#define FP_SERVER_H

#include <stddef.h>

#include "supervisor/core/supervisor.h"
#include "supervisor/mcp/transport.h"

/* The largest message a client may send: a chunk upload of 256 KiB is ~350 KiB; leave room. */
#define SERVER_MAX_MESSAGE (64u << 20)

struct server *server_new(struct supervisor *sv);
/* Frees every session and its transport. */
void server_free(struct server *srv);

/* Serve one connection over a transport (taken over: closed by the server).  0 or -errno (t
 * is closed then too). */
int server_attach_transport(struct server *srv, struct transport *t, int primary);
/* The same over the stdio transport (ndjson.h) on in_fd/out_fd. */
int server_attach(struct server *srv, int in_fd, int out_fd, int primary);
/* Let every session write what it has queued (after the turn's journal commit), then free the
 * sessions whose connection closed. */
void server_release(struct server *srv);
/* Write released output of every session (the loop's end-of-turn hook calls this). */
void server_flush(struct server *srv);
/* At shutdown: wait up to timeout_ms for queued output to be written. */
void server_drain(struct server *srv, int timeout_ms);

/* What the server holds now: sessions (open or closed and not yet freed) and their waits. */
struct server_stats {
	size_t sessions;
	size_t waits;
};
void server_stats(const struct server *srv, struct server_stats *st);

#endif
