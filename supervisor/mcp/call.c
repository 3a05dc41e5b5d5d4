/* supervisor/mcp/call.c — see call.h. */
#include "supervisor/mcp/call.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/jsonrpc.h"
#include "proto/schema.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "supervisor/mcp/catalog.h"
#include "supervisor/mcp/files.h"
#include "supervisor/mcp/tasktools.h"
#include "supervisor/mcp/toolresult.h"
#include "supervisor/mcp/views.h"

/* ---- built-in tools ------------------------------------------------------------------------ */

/* Tools that change nothing: answered while the journal cannot take records. */
static int builtin_reads(const char *name)
{
	return tasktools_is_read(name) || strcmp(name, "file_transfer_read") == 0 ||
	       strcmp(name, "file_transfer_status") == 0;
}

/* 1 if every task is durable as it is now: a list of them may then be answered at once. */
static int all_durable(struct supervisor *sv)
{
	if (!sv->persist || persist_pending(sv->persist) == 0)
		return 1;
	for (struct task *t = tasks_newest(sv->tasks); t; t = t->next)
		if (!persist_task_durable(sv->persist, t))
			return 0;
	return 1;
}

/* Before a built-in tool runs: 1 and *result if it is a write refused because storage is
 * failing; else 0, with answer_now set when its answer can observe only durable state. */
static int builtin_gate(struct session *s, const char *name, const cJSON *args, cJSON **result)
{
	struct supervisor *sv = s->sv;
	int fault = persist_fault(sv->persist);
	if (!builtin_reads(name) && fault < 0) {
		*result = toolresult_storage_error(fault);
		s->answer_now = 1;
		return 1;
	}
	if (strcmp(name, "durable_task_get") == 0) {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(args, "taskId");
		struct task *t = cJSON_IsString(id) ? tasks_find(sv->tasks, id->valuestring) : NULL;
		if (t && persist_task_durable(sv->persist, t))
			s->answer_now = 1;
	} else if (strcmp(name, "durable_task_list") == 0 && all_durable(sv)) {
		s->answer_now = 1;
	}
	return 0;
}

/* A built-in call answered later by the worker pool: a WAIT_LATER of the session. */
static void later_answer(void *ctx, cJSON *result)
{
	struct wait *w = ctx;
	if (w->s) {
		wait_answer(w, result);
		return;
	}
	cJSON_Delete(result);   /* the session closed meanwhile */
	wait_free(w);
}

static void later_drop(void *ctx)
{
	wait_free(ctx);
}

/* A file_transfer_* call: its answer now (1, *result) or, when the pool makes it, later (2). */
static int transfer_builtin(struct session *s, const cJSON *id, const struct wait_req *rq, const char *name,
                            cJSON *args, cJSON **result)
{
	struct supervisor *sv = s->sv;
	struct wait *w = wait_new(s, WAIT_LATER, id, NULL, rq, NULL);
	struct files_later later = { later_answer, later_drop, w };
	unsigned long before = transfers_deferred(sv->transfers);
	*result = files_call_later(sv->transfers, name, catalog_tool_schema(s->cat, name), args,
	                              w ? &later : NULL);
	if (!*result && w && transfers_deferred(sv->transfers) != before)
		return 2;
	wait_free(w);
	return 1;
}

/* tools/call of a built-in tool: 1 if name is one, with *result its CallToolResult (NULL when
 * out of memory); 2 if its answer comes later (through the session's WAIT_LATER); 0 if name
 * is not a built-in.  args is consumed unless 0. */
static int run_builtin(struct session *s, const cJSON *id, const struct wait_req *rq, const char *name,
                       cJSON *args, cJSON **result)
{
	struct supervisor *sv = s->sv;
	int rc = 1;
	if (!tasktools_is_tool(name) && !files_is_tool(name))
		return 0;
	if (builtin_gate(s, name, args, result))
		; /* refused: storage is failing and this call would change something */
	else if (tasktools_is_tool(name))
		*result = tasktools_call(sv, name, catalog_tool_schema(s->cat, name), args);
	else if (sv->transfers)
		rc = transfer_builtin(s, id, rq, name, args, result);
	else
		*result = toolresult_error("internal_error", "file transfer is not available", 0, "");
	cJSON_Delete(args);
	return rc;
}

/* ---- configured tools ---------------------------------------------------------------------- */

/* The arguments as compact JSON (as they are journaled and sent to the job; the schema's
 * defaults add little), against server.maxArgumentsBytes: a call over it is refused before
 * anything exists, so a create record is always writable and a start frame always fits.
 * 0, or -E2BIG / -ENOMEM with *failure. */
static int check_size(struct supervisor *sv, const cJSON *args, cJSON **failure)
{
	char *text = cJSON_PrintUnformatted(args);
	if (!text) {
		*failure = toolresult_error("internal_error", "out of memory", 1, "Call the tool again.");
		return -ENOMEM;
	}
	size_t n = strlen(text);
	free(text);
	long max = sv->cfg->server.max_arguments_bytes;
	if (n <= (size_t)max)
		return 0;
	char msg[300];
	snprintf(msg, sizeof msg, "The arguments are %zu bytes as JSON; this server accepts at most %ld "
	         "(server.maxArgumentsBytes).", n, max);
	cJSON *env = task_envelope("invalid_arguments", msg, 0,
		"Pass large data as a file (file_transfer_open) and its handle as the argument, or ask the "
		"operator to raise server.maxArgumentsBytes.");
	cJSON_AddStringToObject(env, "param", "");
	*failure = toolresult_failure(env);
	return -E2BIG;
}

int call_start_task(struct session *s, const struct tool_cfg *tool, cJSON *args, struct task **out,
                    cJSON **failure)
{
	struct supervisor *sv = s->sv;
	char err[512], field[256];
	*out = NULL;
	*failure = NULL;
	int rc = persist_fault(sv->persist);
	if (rc < 0) {
		/* Nothing could be promised: refuse before anything is made, and say so at once. */
		cJSON_Delete(args);
		*failure = toolresult_storage_error(rc);
		s->answer_now = 1;
		return rc;
	}
	if ((rc = check_size(sv, args, failure)) < 0) {
		cJSON_Delete(args);
		return rc;
	}
	if (schema_apply(tool->input_check, args, err, sizeof err, field, sizeof field) < 0) {
		cJSON_Delete(args);
		cJSON *env = task_envelope("invalid_arguments", err, 1,
			"Fix the named argument to match the tool's inputSchema and call the tool again.");
		cJSON_AddStringToObject(env, "param", field);
		*failure = toolresult_failure(env);
		return -EINVAL;
	}
	rc = tasks_create(sv->tasks, tool, args, out);
	if (rc == -ENOBUFS)
		*failure = toolresult_error("queue_full", "Too many tasks are waiting to run.", 1,
			"Wait for running tasks to finish (durable_task_list), then call the tool again.");
	else if (rc == -ENOMEM)
		*failure = toolresult_error("internal_error", strerror(-rc), 1, "Call the tool again.");
	else if (rc == -EMSGSIZE)
		*failure = toolresult_error("invalid_arguments", "The arguments are too large to be recorded.", 0,
			"Pass large data as a file (file_transfer_open) and its handle as the argument.");
	else if (rc < 0)
		*failure = toolresult_storage_error(rc);
	return rc;
}

/* Every answer of a call passes the era's finish (2026-07-28 stamps resultType). */
static void answer(struct session *s, const cJSON *id, const struct wait_req *rq, cJSON *r)
{
	session_reply(s, id, wait_finish(s, rq, r));
}

/* The session follows a task it started until the task ends (its logs; for a native task also
 * progress, status and questions).  Out of memory only loses those notifications. */
static void follow(struct session *s, struct task *t, const struct wait_req *rq, const cJSON *params)
{
	if (TASK_TERMINAL(t->status) || waits_follow(s, t))
		return;
	struct wait_req frq = *rq;
	if (!wait_new(s, WAIT_FOLLOW, NULL, t, &frq, rq->native ? params : NULL))
		fplog(&s->sv->log, FPLOG_ERROR, t->id, "out of memory: the client will not hear of this task");
}

/* The order of the checks is the behaviour: a native task answers its Task at once; a task
 * that has already finished answers its result in the era that asks for that first; a
 * question is answered by the era; a task-mode tool hands its task over; only sync and auto
 * calls wait, auto ones at most waitSeconds. */
void call_answer_or_wait(struct session *s, const cJSON *id, const cJSON *params, struct task *t,
                         const struct wait_req *rq)
{
	const struct tool_cfg *tool = t->tool;
	follow(s, t, rq, params);
	if (rq->native) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddItemToObject(r, "task", views_task(t));
		session_reply(s, id, r);
		return;
	}
	int final_first = rq->style && rq->style->final_first;
	if (final_first && TASK_TERMINAL(t->status)) {
		answer(s, id, rq, views_final_result(s->sv, t));
		return;
	}
	if (rq->style && t->status == TASK_INPUT_REQUIRED) {
		answer(s, id, rq, rq->style->question(s, rq, t));
		return;
	}
	if (!tool || tool->mode == TOOL_MODE_TASK || TASK_TERMINAL(t->status)) {
		answer(s, id, rq, !tool || tool->mode == TOOL_MODE_TASK ? wait_handover(s, rq, t)
		                                                        : views_final_result(s->sv, t));
		return;
	}
	struct wait *w = wait_new(s, WAIT_CALL, id, t, rq, params);
	if (!w) {
		answer(s, id, rq, wait_handover(s, rq, t));
		return;
	}
	if (tool->mode == TOOL_MODE_AUTO)
		wait_set_timer(w, (int64_t)(tool->wait_seconds * 1000.0));
	if (w->token)
		wait_progress(w, 1);
}

/* Checks in the order a client can fix them: the request's shape, the tool's name, what the
 * era allows for this tool, then the arguments (call_start_task). */
void call_tool(struct session *s, const cJSON *id, const cJSON *params, const struct wait_req *rq,
               call_refuse_fn refuse)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	if (!cJSON_IsString(name)) {
		session_reply_error(s, id, RPC_INVALID_PARAMS, "tools/call: params.name must be a string", NULL);
		return;
	}
	if (arguments && !cJSON_IsObject(arguments) && !cJSON_IsNull(arguments)) {
		session_reply_error(s, id, RPC_INVALID_PARAMS, "tools/call: params.arguments must be an object", NULL);
		return;
	}
	cJSON *args = arguments && cJSON_IsObject(arguments) ? cJSON_Duplicate(arguments, 1) : cJSON_CreateObject();
	if (!args) {
		session_reply_error(s, id, RPC_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	cJSON *r;
	int builtin = run_builtin(s, id, rq, name->valuestring, args, &r);
	if (builtin == 2)
		return;   /* answered later, through the era's finish */
	if (builtin) {
		answer(s, id, rq, r);
		return;
	}
	const struct tool_cfg *tool = config_tool(s->sv->cfg, name->valuestring);
	if (!tool) {
		char msg[200];
		snprintf(msg, sizeof msg, "Unknown tool: %.100s", name->valuestring);
		cJSON_Delete(args);
		session_reply_error(s, id, RPC_INVALID_PARAMS, msg, NULL);
		return;
	}
	if (refuse && refuse(s, id, tool, rq)) {
		cJSON_Delete(args);
		return;
	}
	struct task *t;
	if (call_start_task(s, tool, args, &t, &r) < 0) {
		answer(s, id, rq, r);
		return;
	}
	call_answer_or_wait(s, id, params, t, rq);
}
