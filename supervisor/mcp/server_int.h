/* supervisor/server_int.h — what server.c shares with the modules that answer some of its
 * requests (era2026.c).  Not part of the supervisor's public surface.
 *
 * struct msess is one client connection of server.c; the functions below only borrow it.
 * Functions that take a cJSON result or data consume it; the others borrow their arguments. */
#ifndef FP_SERVER_INT_H
#define FP_SERVER_INT_H

#include <stdint.h>
#include <cJSON.h>

#include "supervisor/core/supervisor.h"

struct msess;
struct task;
struct tool_cfg;
struct transfers;

/* Queue a response on the connection (result / data consumed, may be NULL). */
void server_reply(struct msess *ms, const cJSON *id, cJSON *result);
void server_reply_error(struct msess *ms, const cJSON *id, int code, const char *msg, cJSON *data);

/* Before a change requested through the native task API: while the journal cannot take records
 * (persist_fault), answer the JSON-RPC error -32603 with data {code: storage_unavailable, errno,
 * retryable: true} at once and return 1; else 0, nothing sent. */
int server_refuse_if_faulted(struct msess *ms, const cJSON *id);

/* One page of tools/list: {tools, nextCursor?} (caller frees), or NULL for an invalid cursor. */
cJSON *server_tools_page(struct server *srv, const cJSON *cursor);
/* inputSchema of a listed tool (borrowed), or NULL. */
const cJSON *server_tool_schema(struct server *srv, const char *name);

/* What a caller does to a result before it is sent (era2026 stamps its results): consumes r
 * and returns what to send. */
typedef cJSON *(*server_wrap_fn)(void *arg, cJSON *r);
/* tools/call of a built-in tool (durable_task_*, file_transfer_*): 1 if name is one, with
 * args consumed and *result the CallToolResult (NULL when out of memory); 2 if it is one whose
 * answer comes later (a download being hashed off the loop): it will be sent to ms for id,
 * through wrap (when not NULL) first; 0 otherwise, args untouched. */
int server_run_builtin(struct server *srv, struct msess *ms, const cJSON *id, server_wrap_fn wrap,
                       void *wrap_arg, const char *name, cJSON *args, cJSON **result);
/* Validate args (consumed) against a configured tool's inputSchema and create its task.
 * 0 and *out; or -errno and *failure, the CallToolResult that says why (invalid_arguments,
 * queue_full, internal_error). */
int server_start_task(struct supervisor *sv, const struct tool_cfg *tool, cJSON *args, struct task **out,
                      cJSON **failure);
/* resources/list, resources/templates/list or resources/read (by method) through tr: the
 * result, or NULL with *code and *msg (static text) for the error (also when tr is NULL). */
cJSON *server_resources(struct transfers *tr, const char *method, const cJSON *params, int *code,
                        const char **msg);

/* A notifications/progress for a waiting request: progress strictly increases across calls for
 * the same request (*last, *last_sent are its state; start *last at -1), and without force at
 * most one per PROGRESS_MIN_MS.  1 sent; 0 no token; -EBUSY not due yet (rate limit); -EAGAIN
 * held back because the client does not read (its output queue is full).  After either, the
 * caller sends it later with force. */
int server_send_progress(struct msess *ms, const cJSON *token, const struct task *t,
                         double *last, int64_t *last_sent, int force);

/* What every era's Task object starts with: taskId, status, statusMessage (when there is one),
 * createdAt, lastUpdatedAt (caller frees). */
cJSON *server_task_object(const struct task *t);
/* params of an elicitation/create asking t's pending question (caller frees). */
cJSON *server_elicit_params(const struct task *t);
/* The answer to t's question that an ElicitResult carries (borrowed from res), or NULL when it
 * carries none that fits (declined, cancelled, malformed, not one of the choices).  A free-form
 * question takes content.response, or else the whole submitted form. */
const cJSON *server_elicited_answer(const struct task *t, const cJSON *res);

#endif
