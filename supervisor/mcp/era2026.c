/* supervisor/era2026.c — see era2026.h.
 *
 * How a tools/call of this era is answered (the tool's mode decides, as for the facade):
 *   - task mode: a CreateTaskResult when the request declared the tasks extension and the tool
 *     allows tasks, else the facade's task handle (a plain CallToolResult);
 *   - sync and auto mode: the call waits for its task.  If the job asks a question meanwhile
 *     and the client can elicit, the answer is an InputRequiredResult whose requestState is the
 *     task id; the client retries with inputResponses and the same task continues.  An auto
 *     call still running after waitSeconds becomes a task (extension) or a task handle;
 *   - a tool whose taskSupport is required refuses clients without the extension (-32021). */
#include "supervisor/mcp/era2026.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/core/config.h"
#include "supervisor/mcp/facade.h"
#include "proto/jsonrpc.h"
#include "supervisor/core/loop.h"
#include "proto/schema.h"
#include "supervisor/mcp/server_int.h"
#include "supervisor/core/transfer.h"

#define VERSION_2026      "2026-07-28"
#define META_VERSION      "io.modelcontextprotocol/protocolVersion"
#define META_CAPS         "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER_INFO  "io.modelcontextprotocol/serverInfo"
#define EXT_TASKS         "io.modelcontextprotocol/tasks"
#define RPC_MISSING_CAPABILITY  (-32021)
#define RPC_UNSUPPORTED_VERSION (-32022)
#define POLL_MS           1000
#define DEFAULT_TTL_S     86400.0

/* What one request declared about its client: capabilities are per request in this era. */
struct client {
	int tasks;             /* the io.modelcontextprotocol/tasks extension */
	int elicitation;
};

/* A tools/call that waits for its task (sync and auto mode). */
struct waiting {
	struct msess *ms;
	cJSON *id;
	struct task *t;
	struct client c;
	cJSON *token;          /* progressToken, or NULL */
	double last_progress;
	int64_t last_sent;
	struct loop_timer *timer;  /* auto mode: hand back a task after waitSeconds */
	struct era2026 *e;
	struct waiting *next;
};

struct era2026 {
	struct server *srv;
	struct supervisor *sv;
	struct waiting *waiting;
};

/* ---- results ---------------------------------------------------------------------------- */

/* Every result of this era says what kind it is and which server produced it. */
static cJSON *stamp(struct era2026 *e, cJSON *r, const char *type)
{
	if (!r)
		return NULL;
	if (!cJSON_GetObjectItemCaseSensitive(r, "resultType"))
		cJSON_AddStringToObject(r, "resultType", type);
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(r, "_meta");
	if (!meta)
		meta = cJSON_AddObjectToObject(r, "_meta");
	if (cJSON_IsObject(meta) && !cJSON_GetObjectItemCaseSensitive(meta, META_SERVER_INFO)) {
		cJSON *info = cJSON_AddObjectToObject(meta, META_SERVER_INFO);
		cJSON_AddStringToObject(info, "name", e->sv->cfg->server.name);
		cJSON_AddStringToObject(info, "version", FORKPOINT_VERSION);
		cJSON_AddStringToObject(info, "title", "forkpoint");
	}
	return r;
}

/* List and read results may be cached by the client; forkpoint promises no freshness window. */
static cJSON *cacheable(cJSON *r, const char *scope)
{
	if (r) {
		cJSON_AddNumberToObject(r, "ttlMs", 0);
		cJSON_AddStringToObject(r, "cacheScope", scope);
	}
	return r;
}

static cJSON *stamp_complete(void *arg, cJSON *r)
{
	return stamp(arg, r, "complete");
}

static void answer(struct era2026 *e, struct msess *ms, const cJSON *id, cJSON *result, const char *type)
{
	result = stamp(e, result, type);
	if (result)
		server_reply(ms, id, result);
	else
		server_reply_error(ms, id, RPC_INTERNAL_ERROR, "out of memory", NULL);
}

static void missing_tasks_extension(struct msess *ms, const cJSON *id, const char *why)
{
	cJSON *data = cJSON_CreateObject();
	cJSON *ext = cJSON_AddObjectToObject(cJSON_AddObjectToObject(data, "requiredCapabilities"), "extensions");
	cJSON_AddObjectToObject(ext, EXT_TASKS);
	server_reply_error(ms, id, RPC_MISSING_CAPABILITY, why, data);
}

/* ---- task views ------------------------------------------------------------------------- */

static cJSON *input_requests(const struct task *t)
{
	cJSON *reqs = cJSON_CreateObject();
	if (t->status == TASK_INPUT_REQUIRED && t->question_id) {
		/* The job's question id is the key: stable for the question, never reused for another. */
		cJSON *r = cJSON_AddObjectToObject(reqs, t->question_id);
		cJSON_AddStringToObject(r, "method", "elicitation/create");
		cJSON_AddItemToObject(r, "params", server_elicit_params(t));
	}
	return reqs;
}

/* A failed task as the JSON-RPC error its call would have ended with; the envelope is data. */
static cJSON *task_error(const struct task *t)
{
	cJSON *err = cJSON_CreateObject();
	const char *msg = t->error ? cJSON_GetStringValue(cJSON_GetObjectItem(t->error, "message")) : NULL;
	cJSON_AddNumberToObject(err, "code", RPC_INTERNAL_ERROR);
	cJSON_AddStringToObject(err, "message", msg ? msg : "The task failed.");
	if (t->error)
		cJSON_AddItemToObject(err, "data", cJSON_Duplicate(t->error, 1));
	return err;
}

/* The extension's Task; detailed adds what tasks/get inlines for the status. */
static cJSON *task_view(struct era2026 *e, const struct task *t, int detailed)
{
	double ttl = t->tool ? t->tool->ttl_seconds : DEFAULT_TTL_S;
	cJSON *o = server_task_object(t);
	cJSON_AddNumberToObject(o, "ttlMs", (double)llround(ttl * 1000.0));
	cJSON_AddNumberToObject(o, "pollIntervalMs", POLL_MS);
	if (!detailed)
		return o;
	switch (t->status) {
	case TASK_INPUT_REQUIRED:
		cJSON_AddItemToObject(o, "inputRequests", input_requests(t));
		break;
	case TASK_COMPLETED: {
		/* The original call's result, isError included: a tool error is still "completed". */
		cJSON *r = facade_final_result(e->sv, t);
		if (r && !cJSON_GetObjectItemCaseSensitive(r, "resultType"))
			cJSON_AddStringToObject(r, "resultType", "complete");
		cJSON_AddItemToObject(o, "result", r);
		break;
	}
	case TASK_FAILED:
		cJSON_AddItemToObject(o, "error", task_error(t));
		break;
	default:
		break;
	}
	return o;
}

static cJSON *created(struct era2026 *e, const struct task *t)
{
	return stamp(e, task_view(e, t, 0), "task");
}

static cJSON *input_required(struct era2026 *e, const struct task *t)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToObject(r, "inputRequests", input_requests(t));
	/* The task id is unguessable and names the waiting job: the retry resumes that task. */
	cJSON_AddStringToObject(r, "requestState", t->id);
	return stamp(e, r, "input_required");
}

static int may_return_task(const struct client *c, const struct task *t)
{
	return c->tasks && t->tool && t->tool->task_support != TASK_SUPPORT_FORBIDDEN;
}

static cJSON *task_handle(struct era2026 *e, const struct task *t)
{
	return stamp(e, facade_handle_result(e->sv, t), "complete");
}

/* A waiting call's task asks a question: ask the client, or hand the task over. */
static cJSON *on_question(struct era2026 *e, const struct task *t, const struct client *c)
{
	if (c->elicitation && t->question_id)
		return input_required(e, t);
	return may_return_task(c, t) ? created(e, t) : task_handle(e, t);
}

/* ---- answers to questions ------------------------------------------------------------------ */

/* Deliver the responses that answer t's open question; keys that are not open are ignored.
 * 0, or the -errno of an answer that could not be recorded (it was not taken). */
static int apply_responses(struct era2026 *e, struct task *t, const cJSON *responses)
{
	const cJSON *r;
	cJSON_ArrayForEach(r, responses) {
		if (t->status != TASK_INPUT_REQUIRED || !t->question_id || !r->string ||
		    strcmp(r->string, t->question_id) != 0)
			continue;
		const cJSON *a = server_elicited_answer(t, r);
		int rc = a ? tasks_respond(e->sv->tasks, t, a) : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- waiting calls ------------------------------------------------------------------------ */

static void waiting_free(struct era2026 *e, struct waiting *w)
{
	for (struct waiting **pp = &e->waiting; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	if (w->timer)
		loop_timer_cancel(e->sv->loop, w->timer);
	cJSON_Delete(w->id);
	cJSON_Delete(w->token);
	free(w);
}

static void waiting_answer(struct era2026 *e, struct waiting *w, cJSON *result)
{
	if (result)
		server_reply(w->ms, w->id, result);
	else
		server_reply_error(w->ms, w->id, RPC_INTERNAL_ERROR, "out of memory", NULL);
	waiting_free(e, w);
}

static void on_wait_timer(struct loop *l, void *arg)
{
	struct waiting *w = arg;
	struct era2026 *e = w->e;
	(void)l;
	w->timer = NULL;
	waiting_answer(e, w, may_return_task(&w->c, w->t) ? created(e, w->t) : task_handle(e, w->t));
}

/* Answer a call about task t now if its state or its tool's mode allows, else wait. */
static void answer_or_wait(struct era2026 *e, struct msess *ms, const cJSON *id, const cJSON *params,
                           struct task *t, const struct client *c)
{
	const struct tool_cfg *tool = t->tool;
	if (TASK_TERMINAL(t->status)) {
		answer(e, ms, id, facade_final_result(e->sv, t), "complete");
		return;
	}
	if (t->status == TASK_INPUT_REQUIRED) {
		answer(e, ms, id, on_question(e, t, c), "complete");
		return;
	}
	if (!tool || tool->mode == TOOL_MODE_TASK) {
		answer(e, ms, id, may_return_task(c, t) ? created(e, t) : task_handle(e, t), "complete");
		return;
	}
	struct waiting *w = calloc(1, sizeof *w);
	if (!w || !(w->id = cJSON_Duplicate(id, 0))) {
		free(w);
		answer(e, ms, id, may_return_task(c, t) ? created(e, t) : task_handle(e, t), "complete");
		return;
	}
	w->e = e;
	w->ms = ms;
	w->t = t;
	w->c = *c;
	w->last_progress = -1;
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(params, "_meta"),
	                                                    "progressToken");
	if (cJSON_IsString(tok) || cJSON_IsNumber(tok))
		w->token = cJSON_Duplicate(tok, 0);
	if (tool->mode == TOOL_MODE_AUTO)
		w->timer = loop_timer_in(e->sv->loop, (int64_t)(tool->wait_seconds * 1000.0), on_wait_timer, w);
	w->next = e->waiting;
	e->waiting = w;
	if (w->token)
		server_send_progress(ms, w->token, t, &w->last_progress, &w->last_sent, 1);
}

void era2026_on_task(struct era2026 *e, struct task *t, enum task_event ev)
{
	for (struct waiting *w = e ? e->waiting : NULL, *next; w; w = next) {
		next = w->next;
		if (w->t != t)
			continue;
		if (ev == TASK_EV_PROGRESS)
			server_send_progress(w->ms, w->token, t, &w->last_progress, &w->last_sent, 0);
		else if (TASK_TERMINAL(t->status))
			waiting_answer(e, w, stamp(e, facade_final_result(e->sv, t), "complete"));
		else if (t->status == TASK_INPUT_REQUIRED)
			waiting_answer(e, w, on_question(e, t, &w->c));
	}
}

int era2026_cancelled(struct era2026 *e, struct msess *ms, const cJSON *request_id, const char *reason)
{
	for (struct waiting *w = e ? e->waiting : NULL; w; w = w->next) {
		if (w->ms != ms || !rpc_same_id(w->id, request_id))
			continue;
		struct task *t = w->t;
		/* No response goes out for a cancelled request. */
		waiting_free(e, w);
		tasks_cancel(e->sv->tasks, t, reason ? reason : "the client cancelled the request");
		return 1;
	}
	return 0;
}

/* ---- methods ------------------------------------------------------------------------------ */

static void m_discover(struct era2026 *e, struct msess *ms, const cJSON *id)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "supportedVersions"), cJSON_CreateString(VERSION_2026));
	cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "tools"), "listChanged", 0);
	if (e->sv->transfers) {
		cJSON *rc = cJSON_AddObjectToObject(caps, "resources");
		cJSON_AddBoolToObject(rc, "subscribe", 0);
		cJSON_AddBoolToObject(rc, "listChanged", 0);
	}
	cJSON_AddObjectToObject(cJSON_AddObjectToObject(caps, "extensions"), EXT_TASKS);
	cJSON_AddStringToObject(r, "instructions",
		"Long-running tools here run as durable tasks. Clients that declare the "
		"io.modelcontextprotocol/tasks extension get a task and poll tasks/get; others get a taskId "
		"to poll with durable_task_get, answer questions with durable_task_respond and stop work with "
		"durable_task_cancel. Task ids survive reconnects and restarts.");
	answer(e, ms, id, cacheable(r, "public"), "complete");
}

static struct task *task_param(struct era2026 *e, struct msess *ms, const cJSON *id, const cJSON *params,
                               const char *method)
{
	char msg[200];
	const cJSON *tid = cJSON_GetObjectItemCaseSensitive(params, "taskId");
	if (!cJSON_IsString(tid)) {
		snprintf(msg, sizeof msg, "%s: params.taskId must be a string", method);
		server_reply_error(ms, id, RPC_INVALID_PARAMS, msg, NULL);
		return NULL;
	}
	struct task *t = tasks_find(e->sv->tasks, tid->valuestring);
	if (!t) {
		snprintf(msg, sizeof msg, "%s: %s", method, tasks_tombstone_find(e->sv->tasks, tid->valuestring)
		         ? "the task has expired" : "no task with this taskId");
		server_reply_error(ms, id, RPC_INVALID_PARAMS, msg, NULL);
	}
	return t;
}

static void m_tasks(struct era2026 *e, struct msess *ms, const cJSON *id, const char *method,
                    const cJSON *params)
{
	struct task *t = task_param(e, ms, id, params, method);
	if (!t)
		return;
	if (strcmp(method, "tasks/get") == 0) {
		answer(e, ms, id, task_view(e, t, 1), "complete");
		return;
	}
	if (server_refuse_if_faulted(ms, id))
		return;   /* an update or cancel that could not be recorded must not be acknowledged */
	if (strcmp(method, "tasks/update") == 0) {
		const cJSON *responses = cJSON_GetObjectItemCaseSensitive(params, "inputResponses");
		if (!cJSON_IsObject(responses)) {
			server_reply_error(ms, id, RPC_INVALID_PARAMS, "tasks/update: params.inputResponses must be an object", NULL);
			return;
		}
		int rc = apply_responses(e, t, responses);
		if (rc < 0) {
			char msg[200];
			snprintf(msg, sizeof msg, "tasks/update: the answer could not be recorded (%s); nothing was done",
			         strerror(-rc));
			server_reply_error(ms, id, RPC_INTERNAL_ERROR, msg, NULL);
			return;
		}
	} else {
		/* Cancelling a finished task leaves it as it is; the ack is the same. */
		tasks_cancel(e->sv->tasks, t, "cancelled by the client (tasks/cancel)");
	}
	answer(e, ms, id, cJSON_CreateObject(), "complete");
}

static void m_resources(struct era2026 *e, struct msess *ms, const cJSON *id, const char *method,
                        const cJSON *params)
{
	int code;
	const char *msg;
	cJSON *r = server_resources(e->sv->transfers, method, params, &code, &msg);
	if (r) {
		answer(e, ms, id, cacheable(r, "private"), "complete");
		return;
	}
	if (!e->sv->transfers)
		code = RPC_METHOD_NOT_FOUND;
	/* This era reports a missing resource as invalid params. */
	server_reply_error(ms, id, code == RPC_RESOURCE_NOT_FOUND ? RPC_INVALID_PARAMS : code, msg, NULL);
}

static void m_call(struct era2026 *e, struct msess *ms, const cJSON *id, const cJSON *params,
                   const struct client *c)
{
	struct supervisor *sv = e->sv;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(params, "inputResponses");
	const cJSON *state = cJSON_GetObjectItemCaseSensitive(params, "requestState");
	char msg[300];

	if (!cJSON_IsString(name)) {
		server_reply_error(ms, id, RPC_INVALID_PARAMS, "tools/call: params.name must be a string", NULL);
		return;
	}
	if (arguments && !cJSON_IsObject(arguments) && !cJSON_IsNull(arguments)) {
		server_reply_error(ms, id, RPC_INVALID_PARAMS, "tools/call: params.arguments must be an object", NULL);
		return;
	}
	if (responses && !cJSON_IsObject(responses)) {
		server_reply_error(ms, id, RPC_INVALID_PARAMS, "tools/call: params.inputResponses must be an object", NULL);
		return;
	}
	if (state && !cJSON_IsString(state)) {
		server_reply_error(ms, id, RPC_INVALID_PARAMS, "tools/call: params.requestState must be a string", NULL);
		return;
	}
	if (state) {
		/* A retry that carries answers: the same task continues. */
		struct task *t = tasks_find(sv->tasks, state->valuestring);
		if (!t || strcmp(t->tool_name, name->valuestring) != 0) {
			server_reply_error(ms, id, RPC_INVALID_PARAMS,
				"tools/call: requestState does not belong to a call of this tool (it may have expired)", NULL);
			return;
		}
		if (t->tool && t->tool->task_support == TASK_SUPPORT_REQUIRED && !c->tasks) {
			missing_tasks_extension(ms, id, "This tool runs only as a task: declare the io.modelcontextprotocol/tasks extension");
			return;
		}
		/* An answer that could not be recorded was not taken: the question is asked again. */
		if (responses)
			apply_responses(e, t, responses);
		answer_or_wait(e, ms, id, params, t, c);
		return;
	}

	cJSON *args = arguments && cJSON_IsObject(arguments) ? cJSON_Duplicate(arguments, 1) : cJSON_CreateObject();
	if (!args) {
		server_reply_error(ms, id, RPC_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	cJSON *r;
	int builtin = server_run_builtin(e->srv, ms, id, stamp_complete, e, name->valuestring, args, &r);
	if (builtin == 2)
		return;   /* answered later, stamped by stamp_complete */
	if (builtin) {
		answer(e, ms, id, r, "complete");
		return;
	}
	const struct tool_cfg *tool = config_tool(sv->cfg, name->valuestring);
	if (!tool) {
		cJSON_Delete(args);
		snprintf(msg, sizeof msg, "Unknown tool: %.100s", name->valuestring);
		server_reply_error(ms, id, RPC_INVALID_PARAMS, msg, NULL);
		return;
	}
	if (tool->task_support == TASK_SUPPORT_REQUIRED && !c->tasks) {
		cJSON_Delete(args);
		missing_tasks_extension(ms, id, "This tool runs only as a task: declare the io.modelcontextprotocol/tasks extension");
		return;
	}
	struct task *t;
	if (server_start_task(sv, tool, args, &t, &r) < 0) {
		answer(e, ms, id, r, "complete");
		return;
	}
	answer_or_wait(e, ms, id, params, t, c);
}

/* ---- entry points ------------------------------------------------------------------------- */

int era2026_claims(const cJSON *params)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	return cJSON_IsObject(meta) && cJSON_GetObjectItemCaseSensitive(meta, META_VERSION) != NULL;
}

void era2026_request(struct era2026 *e, struct msess *ms, const cJSON *id, const char *method,
                     const cJSON *params)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *version = cJSON_GetObjectItemCaseSensitive(meta, META_VERSION);
	const cJSON *caps = cJSON_GetObjectItemCaseSensitive(meta, META_CAPS);
	char msg[200];

	if (!cJSON_IsString(version)) {
		server_reply_error(ms, id, RPC_INVALID_PARAMS, "_meta." META_VERSION " must be a string", NULL);
		return;
	}
	if (strcmp(version->valuestring, VERSION_2026) != 0) {
		/* Earlier versions are negotiated with initialize, not named per request. */
		cJSON *data = cJSON_CreateObject();
		cJSON_AddItemToArray(cJSON_AddArrayToObject(data, "supported"), cJSON_CreateString(VERSION_2026));
		cJSON_AddStringToObject(data, "requested", version->valuestring);
		server_reply_error(ms, id, RPC_UNSUPPORTED_VERSION, "Unsupported protocol version", data);
		return;
	}
	if (!cJSON_IsObject(caps)) {
		server_reply_error(ms, id, RPC_INVALID_PARAMS,
			"_meta." META_CAPS " is required (an object; {} declares no capabilities)", NULL);
		return;
	}
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(caps, "extensions");
	struct client c = {
		.tasks = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ext, EXT_TASKS)),
		.elicitation = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(caps, "elicitation")),
	};

	if (strcmp(method, "server/discover") == 0) {
		m_discover(e, ms, id);
	} else if (strcmp(method, "tools/list") == 0) {
		cJSON *r = server_tools_page(e->srv, cJSON_GetObjectItemCaseSensitive(params, "cursor"));
		if (r)
			answer(e, ms, id, cacheable(r, "public"), "complete");
		else
			server_reply_error(ms, id, RPC_INVALID_PARAMS, "tools/list: invalid cursor", NULL);
	} else if (strcmp(method, "tools/call") == 0) {
		m_call(e, ms, id, params, &c);
	} else if (strcmp(method, "resources/list") == 0 || strcmp(method, "resources/templates/list") == 0 ||
	           strcmp(method, "resources/read") == 0) {
		m_resources(e, ms, id, method, params);
	} else if (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/update") == 0 ||
	           strcmp(method, "tasks/cancel") == 0) {
		if (c.tasks)
			m_tasks(e, ms, id, method, params);
		else
			missing_tasks_extension(ms, id, "Declare the io.modelcontextprotocol/tasks extension to use tasks/*");
	} else {
		/* initialize, ping, logging/setLevel, tasks/result and tasks/list do not exist here. */
		snprintf(msg, sizeof msg, "Method not found: %.100s", method);
		server_reply_error(ms, id, RPC_METHOD_NOT_FOUND, msg, NULL);
	}
}

struct era2026 *era2026_new(struct server *srv, struct supervisor *sv)
{
	struct era2026 *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->srv = srv;
	e->sv = sv;
	return e;
}

void era2026_free(struct era2026 *e)
{
	if (!e)
		return;
	while (e->waiting)
		waiting_free(e, e->waiting);
	free(e);
}
