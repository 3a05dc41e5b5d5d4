/* supervisor/mcp/session.h — the MCP session of one client connection: what the client
 * negotiated (protocol version, capabilities, log level), the waits it owns (wait.h) and the
 * elicitation requests it was sent, over one transport (transport.h).
 *
 * Every message to the client goes through session_send(), which decides whether it waits for
 * the turn's journal commit (transport send) or may go at once (send_now): at once when the
 * message being handled observes nothing undurable (answer_now), or when nothing at all waits
 * for a commit.  A session belongs to the server (server.c) that made it; the other modules
 * borrow it.  Functions that take a cJSON result, data or params consume it. */
#ifndef FP_SESSION_H
#define FP_SESSION_H

#include <stdint.h>
#include <cJSON.h>

#include "supervisor/core/loop.h"
#include "supervisor/core/supervisor.h"
#include "supervisor/mcp/transport.h"

struct catalog;
struct wait;
struct outreq;

struct session {
	struct supervisor *sv;
	const struct catalog *cat;   /* the tools and resources offered (borrowed) */
	struct transport *io;
	int primary;           /* end of input here shuts the supervisor down (stdio) */
	int closed;            /* the peer went away: freed at the next release */
	int initialized;       /* 0: no initialize yet; 1: answered; 2: notifications/initialized seen */
	char version[16];
	int log_level;         /* -1: client did not ask for log messages */
	int elicitation;       /* the client declared the elicitation capability */
	int tasks_era;         /* negotiated 2025-11-25: native tasks on this session */
	long logs_dropped;     /* log notifications not sent while the output queue was full */
	/* The message being handled observes nothing that waits for a commit (ping, tools/list, a
	 * read of durable tasks, a refusal): its answer need not wait for the turn's commit, and
	 * so keeps flowing while commits fail.  Set per message, cleared after it. */
	int answer_now;
	struct wait *waits;    /* owned (wait.h) */
	struct outreq *outreqs;   /* elicitation/create requests sent, answers awaited (wait.c) */
	long next_out_id;
	struct loop_timer *progress_timer;   /* sends progress held back by the rate limit */
	struct session *next;
};

/* Queue one message (a JSON-RPC line, consumed; NULL is logged as out of memory). */
void session_send(struct session *s, char *line);
/* A response: result (NULL answers -32603 out of memory). */
void session_reply(struct session *s, const cJSON *id, cJSON *result);
void session_reply_error(struct session *s, const cJSON *id, int code, const char *msg, cJSON *data);
void session_notify(struct session *s, const char *method, cJSON *params);
/* 1 when the client does not read its output: send nothing it did not ask for meanwhile. */
int session_congested(const struct session *s);
/* Before a change: while the journal cannot take records (persist_fault), answer the JSON-RPC
 * error -32603 with data {code: storage_unavailable, errno, retryable: true} at once and
 * return 1; else 0, nothing sent. */
int session_refuse_if_faulted(struct session *s, const cJSON *id);

#endif
