/* supervisor/server_int.h — what server.c shares with the modules that answer some of its
 * requests (era2026.c).  Not part of the supervisor's public surface.
 *
 * struct msess is one client connection of server.c; the functions below only borrow it.
 * Functions that take a cJSON result or data consume it; the others borrow their arguments. */
#ifndef FP_SERVER_INT_H
#define FP_SERVER_INT_H

#include <stdint.h>
#include <cJSON.h>

#include "supervisor.h"

struct msess;
struct task;

/* Queue a response on the connection (result / data consumed, may be NULL). */
void server_reply(struct msess *ms, const cJSON *id, cJSON *result);
void server_reply_error(struct msess *ms, const cJSON *id, int code, const char *msg, cJSON *data);

/* One page of tools/list: {tools, nextCursor?} (caller frees), or NULL for an invalid cursor. */
cJSON *server_tools_page(struct server *srv, const cJSON *cursor);
/* inputSchema of a listed tool (borrowed), or NULL. */
const cJSON *server_tool_schema(struct server *srv, const char *name);

/* A notifications/progress for a waiting request: progress strictly increases across calls for
 * the same request (*last, *last_sent are its state; start *last at -1), and without force at
 * most one per PROGRESS_MIN_MS. */
void server_send_progress(struct msess *ms, const cJSON *token, const struct task *t,
                          double *last, int64_t *last_sent, int force);

/* The statusMessage every task view shows (borrowed from t, may be NULL). */
const char *server_task_status_message(const struct task *t);
/* params of an elicitation/create asking t's pending question (caller frees). */
cJSON *server_elicit_params(const struct task *t);
/* The answer to t's question that an ElicitResult carries (borrowed from res), or NULL when it
 * carries none that fits (declined, cancelled, malformed, not one of the choices).  A free-form
 * question takes content.response, or else the whole submitted form. */
const cJSON *server_elicited_answer(const struct task *t, const cJSON *res);

#endif
