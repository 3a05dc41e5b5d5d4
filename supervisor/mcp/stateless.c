/* supervisor/mcp/stateless.c — see stateless.h.
 *
 * How a tools/call of this era is answered (the tool's mode decides, as for the other era):
 *   - task mode: a CreateTaskResult when the request declared the tasks extension and the tool
 *     allows tasks, else the task handle (a plain CallToolResult);
 *   - sync and auto mode: the call waits for its task.  If the job asks a question meanwhile
 *     and the client can elicit, the answer is an InputRequiredResult whose requestState is the
 *     task id; the client retries with inputResponses and the same task continues.  An auto
 *     call still running after waitSeconds becomes a task (extension) or a task handle;
 *   - a tool whose taskSupport is required refuses clients without the extension (-32021). */
#include "supervisor/mcp/stateless.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/jsonrpc.h"
#include "supervisor/core/config.h"
#include "supervisor/core/tasks.h"
#include "supervisor/mcp/call.h"
#include "supervisor/mcp/catalog.h"
#include "supervisor/mcp/views.h"
#include "supervisor/mcp/wait.h"

#define VERSION_2026      "2026-07-28"
#define META_VERSION      "io.modelcontextprotocol/protocolVersion"
#define META_CAPS         "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER_INFO  "io.modelcontextprotocol/serverInfo"
#define EXT_TASKS         "io.modelcontextprotocol/tasks"
#define RPC_MISSING_CAPABILITY  (-32021)
#define RPC_UNSUPPORTED_VERSION (-32022)

/* ---- results ---------------------------------------------------------------------------- */

/* Every result of this era says what kind it is and which server produced it. */
static cJSON *stamp(struct session *s, cJSON *r, const char *type)
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
		cJSON_AddStringToObject(info, "name", s->sv->cfg->server.name);
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

static void answer(struct session *s, const cJSON *id, cJSON *result)
{
	session_reply(s, id, stamp(s, result, "complete"));
}

static void missing_tasks_extension(struct session *s, const cJSON *id, const char *why)
{
	cJSON *data = cJSON_CreateObject();
	cJSON *ext = cJSON_AddObjectToObject(cJSON_AddObjectToObject(data, "requiredCapabilities"), "extensions");
	cJSON_AddObjectToObject(ext, EXT_TASKS);
	session_reply_error(s, id, RPC_MISSING_CAPABILITY, why, data);
}

/* ---- this era's answers for a call that waits (wait.h) ----------------------------------- */

/* A task goes only to a request that declared the extension, and never for a tool that
 * forbids tasks. */
static int may_return_task(const struct wait_req *rq, const struct task *t)
{
	return rq->ext_tasks && t->tool && t->tool->task_support != TASK_SUPPORT_FORBIDDEN;
}

static cJSON *handover(struct session *s, const struct wait_req *rq, struct task *t)
{
	if (may_return_task(rq, t))
		return stamp(s, views_task_stateless(s->sv, t, 0), "task");
	return stamp(s, views_handle_result(s->sv, t), "complete");
}

/* The task asks a question: ask the client in the answer, or hand the task over. */
static cJSON *question(struct session *s, const struct wait_req *rq, struct task *t)
{
	if (!rq->can_elicit || !t->question_id)
		return handover(s, rq, t);
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToObject(r, "inputRequests", views_input_requests(t));
	/* The task id is unguessable and names the waiting job: the retry resumes that task. */
	cJSON_AddStringToObject(r, "requestState", t->id);
	return stamp(s, r, "input_required");
}

/* What every answer of a call passes through: a result without a type is "complete". */
static cJSON *finish(struct session *s, cJSON *r)
{
	return stamp(s, r, "complete");
}

static const struct wait_style style = {
	.question = question,
	.handover = handover,
	.finish = finish,
	.final_first = 1,
};

/* A task-only tool cannot answer a client that cannot take a task: -32021 names what to declare. */
static int refuse(struct session *s, const cJSON *id, const struct tool_cfg *tool, const struct wait_req *rq)
{
	if (tool->task_support != TASK_SUPPORT_REQUIRED || rq->ext_tasks)
		return 0;
	missing_tasks_extension(s, id, "This tool runs only as a task: declare the io.modelcontextprotocol/tasks extension");
	return 1;
}

/* ---- answers to questions ------------------------------------------------------------------ */

/* Deliver the responses that answer t's open question; keys that are not open are ignored.
 * 0, or the -errno of an answer that could not be recorded (it was not taken). */
static int apply_responses(struct session *s, struct task *t, const cJSON *responses)
{
	const cJSON *r;
	cJSON_ArrayForEach(r, responses) {
		if (t->status != TASK_INPUT_REQUIRED || !t->question_id || !r->string ||
		    strcmp(r->string, t->question_id) != 0)
			continue;
		const cJSON *a = wait_elicited_answer(t, r);
		int rc = a ? tasks_respond(s->sv->tasks, t, a) : 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- methods ------------------------------------------------------------------------------ */

/* server/discover replaces initialize in this era: what the server speaks and offers. */
static void m_discover(struct session *s, const cJSON *id)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "supportedVersions"), cJSON_CreateString(VERSION_2026));
	cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "tools"), "listChanged", 0);
	if (s->sv->transfers) {
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
	answer(s, id, cacheable(r, "public"));
}

static struct task *task_param(struct session *s, const cJSON *id, const cJSON *params, const char *method)
{
	char msg[200];
	const cJSON *tid = cJSON_GetObjectItemCaseSensitive(params, "taskId");
	if (!cJSON_IsString(tid)) {
		snprintf(msg, sizeof msg, "%s: params.taskId must be a string", method);
		session_reply_error(s, id, RPC_INVALID_PARAMS, msg, NULL);
		return NULL;
	}
	struct task *t = tasks_find(s->sv->tasks, tid->valuestring);
	if (!t) {
		snprintf(msg, sizeof msg, "%s: %s", method, tasks_tombstone_find(s->sv->tasks, tid->valuestring)
		         ? "the task has expired" : "no task with this taskId");
		session_reply_error(s, id, RPC_INVALID_PARAMS, msg, NULL);
	}
	return t;
}

/* tasks/get is a read; tasks/update and tasks/cancel change the task and are refused first
 * while the journal cannot take records. */
static void m_tasks(struct session *s, const cJSON *id, const char *method, const cJSON *params)
{
	struct task *t = task_param(s, id, params, method);
	if (!t)
		return;
	if (strcmp(method, "tasks/get") == 0) {
		answer(s, id, views_task_stateless(s->sv, t, 1));
		return;
	}
	if (session_refuse_if_faulted(s, id))
		return;   /* an update or cancel that could not be recorded must not be acknowledged */
	if (strcmp(method, "tasks/update") == 0) {
		const cJSON *responses = cJSON_GetObjectItemCaseSensitive(params, "inputResponses");
		if (!cJSON_IsObject(responses)) {
			session_reply_error(s, id, RPC_INVALID_PARAMS, "tasks/update: params.inputResponses must be an object", NULL);
			return;
		}
		int rc = apply_responses(s, t, responses);
		if (rc < 0) {
			char msg[200];
			snprintf(msg, sizeof msg, "tasks/update: the answer could not be recorded (%s); nothing was done",
			         strerror(-rc));
			session_reply_error(s, id, RPC_INTERNAL_ERROR, msg, NULL);
			return;
		}
	} else {
		/* Cancelling a finished task leaves it as it is; the ack is the same. */
		tasks_cancel(s->sv->tasks, t, "cancelled by the client (tasks/cancel)");
	}
	answer(s, id, cJSON_CreateObject());
}

static void m_resources(struct session *s, const cJSON *id, const char *method, const cJSON *params)
{
	int code;
	const char *msg;
	cJSON *r = catalog_resources(s->cat, method, params, &code, &msg);
	if (r) {
		answer(s, id, cacheable(r, "private"));
		return;
	}
	if (!s->sv->transfers)
		code = RPC_METHOD_NOT_FOUND;
	/* This era reports a missing resource as invalid params. */
	session_reply_error(s, id, code == RPC_RESOURCE_NOT_FOUND ? RPC_INVALID_PARAMS : code, msg, NULL);
}

/* A retry that carries answers (requestState names the waiting task): the same task goes on. */
static void m_call_retry(struct session *s, const cJSON *id, const cJSON *params, const struct wait_req *rq,
                         const char *name, const char *state)
{
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(params, "inputResponses");
	struct task *t = tasks_find(s->sv->tasks, state);
	if (!t || strcmp(t->tool_name, name) != 0) {
		session_reply_error(s, id, RPC_INVALID_PARAMS,
			"tools/call: requestState does not belong to a call of this tool (it may have expired)", NULL);
		return;
	}
	if (t->tool && refuse(s, id, t->tool, rq))
		return;
	/* An answer that could not be recorded was not taken: the question is asked again. */
	if (responses)
		apply_responses(s, t, responses);
	call_answer_or_wait(s, id, params, t, rq);
}

/* This era's extra fields are checked here; the call itself takes the shared path. */
static void m_call(struct session *s, const cJSON *id, const cJSON *params, const struct wait_req *rq)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(params, "inputResponses");
	const cJSON *state = cJSON_GetObjectItemCaseSensitive(params, "requestState");
	const char *bad = NULL;
	if (!cJSON_IsString(name))
		bad = "tools/call: params.name must be a string";
	else if (arguments && !cJSON_IsObject(arguments) && !cJSON_IsNull(arguments))
		bad = "tools/call: params.arguments must be an object";
	else if (responses && !cJSON_IsObject(responses))
		bad = "tools/call: params.inputResponses must be an object";
	else if (state && !cJSON_IsString(state))
		bad = "tools/call: params.requestState must be a string";
	if (bad)
		session_reply_error(s, id, RPC_INVALID_PARAMS, bad, NULL);
	else if (state)
		m_call_retry(s, id, params, rq, name->valuestring, state->valuestring);
	else
		call_tool(s, id, params, rq, refuse);
}

/* ---- entry points ------------------------------------------------------------------------- */

int stateless_claims(const cJSON *params)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	return cJSON_IsObject(meta) && cJSON_GetObjectItemCaseSensitive(meta, META_VERSION) != NULL;
}

/* The request's own version and capabilities: 0 and *rq, or -1 after answering the error. */
static int request_client(struct session *s, const cJSON *id, const cJSON *params, struct wait_req *rq)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *version = cJSON_GetObjectItemCaseSensitive(meta, META_VERSION);
	const cJSON *caps = cJSON_GetObjectItemCaseSensitive(meta, META_CAPS);
	if (!cJSON_IsString(version)) {
		session_reply_error(s, id, RPC_INVALID_PARAMS, "_meta." META_VERSION " must be a string", NULL);
		return -1;
	}
	if (strcmp(version->valuestring, VERSION_2026) != 0) {
		/* Earlier versions are negotiated with initialize, not named per request. */
		cJSON *data = cJSON_CreateObject();
		cJSON_AddItemToArray(cJSON_AddArrayToObject(data, "supported"), cJSON_CreateString(VERSION_2026));
		cJSON_AddStringToObject(data, "requested", version->valuestring);
		session_reply_error(s, id, RPC_UNSUPPORTED_VERSION, "Unsupported protocol version", data);
		return -1;
	}
	if (!cJSON_IsObject(caps)) {
		session_reply_error(s, id, RPC_INVALID_PARAMS,
			"_meta." META_CAPS " is required (an object; {} declares no capabilities)", NULL);
		return -1;
	}
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(caps, "extensions");
	*rq = (struct wait_req){
		.style = &style,
		.ext_tasks = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ext, EXT_TASKS)),
		.can_elicit = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(caps, "elicitation")),
	};
	return 0;
}

/* Capabilities are per request in this era: each request builds its own wait_req. */
void stateless_request(struct session *s, const cJSON *id, const char *method, const cJSON *params)
{
	struct wait_req rq;
	char msg[200];
	if (request_client(s, id, params, &rq) < 0)
		return;
	if (strcmp(method, "server/discover") == 0) {
		m_discover(s, id);
	} else if (strcmp(method, "tools/list") == 0) {
		cJSON *r = catalog_tools_page(s->cat, cJSON_GetObjectItemCaseSensitive(params, "cursor"));
		if (r)
			answer(s, id, cacheable(r, "public"));
		else
			session_reply_error(s, id, RPC_INVALID_PARAMS, "tools/list: invalid cursor", NULL);
	} else if (strcmp(method, "tools/call") == 0) {
		m_call(s, id, params, &rq);
	} else if (strcmp(method, "resources/list") == 0 || strcmp(method, "resources/templates/list") == 0 ||
	           strcmp(method, "resources/read") == 0) {
		m_resources(s, id, method, params);
	} else if (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/update") == 0 ||
	           strcmp(method, "tasks/cancel") == 0) {
		if (rq.ext_tasks)
			m_tasks(s, id, method, params);
		else
			missing_tasks_extension(s, id, "Declare the io.modelcontextprotocol/tasks extension to use tasks/*");
	} else {
		/* initialize, ping, logging/setLevel, tasks/result and tasks/list do not exist here. */
		snprintf(msg, sizeof msg, "Method not found: %.100s", method);
		session_reply_error(s, id, RPC_METHOD_NOT_FOUND, msg, NULL);
	}
}
