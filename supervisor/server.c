/* supervisor/server.c — see server.h. */
#include "server.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "facade.h"
#include "jsonrpc.h"
#include "schema.h"
#include "session.h"
#include "tasks.h"

#define MAX_LINE        (64u << 20)   /* a chunk upload of 256 KiB is ~350 KiB; leave room */
#define TOOLS_PAGE      100
#define PROGRESS_MIN_MS 50            /* per call: at most 20 progress notifications a second */

static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26" };

struct msess {
	struct server *srv;
	struct session *io;
	int primary;
	int initialized;       /* 0: no initialize yet; 1: answered; 2: notifications/initialized seen */
	char version[16];
	int log_level;         /* -1: client did not ask for log messages */
	struct msess *next;
};

/* A tools/call whose answer waits for its task (sync and auto modes). */
struct pending {
	struct msess *ms;
	cJSON *id;
	struct task *t;
	cJSON *token;          /* progressToken, or NULL */
	double last_progress;
	int64_t last_sent;
	struct loop_timer *auto_timer;
	struct pending *next;
};

struct server {
	struct supervisor *sv;
	cJSON *tools;          /* every tool definition, configured tools first */
	struct msess *sessions;
	struct pending *pending;
};

/* ---- sending ------------------------------------------------------------------------ */

static void send_line(struct msess *ms, char *line)
{
	if (session_send(ms->io, line) < 0)
		fplog(&ms->srv->sv->log, FPLOG_ERROR, NULL, "out of memory queueing a message");
}

static void reply(struct msess *ms, const cJSON *id, cJSON *result)
{
	send_line(ms, rpc_result(id, result));
}

static void reply_error(struct msess *ms, const cJSON *id, int code, const char *msg)
{
	send_line(ms, rpc_error(id, code, msg, NULL));
}

static void notify_session(struct msess *ms, const char *method, cJSON *params)
{
	send_line(ms, rpc_notification(method, params));
}

/* ---- logging to clients ---------------------------------------------------------------- */

static void log_sink(void *arg, enum fplog_level lv, const char *task, const char *msg)
{
	struct server *srv = arg;
	for (struct msess *ms = srv->sessions; ms; ms = ms->next) {
		if (ms->log_level < 0 || (int)lv < ms->log_level || ms->initialized < 1)
			continue;
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "level", fplog_level_name(lv));
		cJSON_AddStringToObject(p, "logger", "forkpoint");
		cJSON *d = cJSON_AddObjectToObject(p, "data");
		if (task)
			cJSON_AddStringToObject(d, "taskId", task);
		cJSON_AddStringToObject(d, "message", msg);
		notify_session(ms, "notifications/message", p);
	}
}

/* ---- pending calls ---------------------------------------------------------------------- */

static void pending_unlink(struct server *srv, struct pending *p)
{
	for (struct pending **pp = &srv->pending; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	if (p->auto_timer)
		loop_timer_cancel(srv->sv->loop, p->auto_timer);
	cJSON_Delete(p->id);
	cJSON_Delete(p->token);
	free(p);
}

static void send_progress(struct pending *p, int force)
{
	const struct task *t = p->t;
	int64_t now = loop_now();
	if (!p->token || (!force && now - p->last_sent < PROGRESS_MIN_MS))
		return;
	/* progress must strictly increase: a repeated or lower fraction still moves it a hair. */
	double v = t->fraction >= 0 ? t->fraction : p->last_progress < 0 ? 0 : p->last_progress;
	if (v <= p->last_progress)
		v = nextafter(p->last_progress, 2.0);
	cJSON *params = cJSON_CreateObject();
	cJSON_AddItemToObject(params, "progressToken", cJSON_Duplicate(p->token, 0));
	cJSON_AddNumberToObject(params, "progress", v);
	cJSON_AddNumberToObject(params, "total", 1);
	if (t->progress_msg)
		cJSON_AddStringToObject(params, "message", t->progress_msg);
	notify_session(p->ms, "notifications/progress", params);
	p->last_progress = v;
	p->last_sent = now;
}

static void answer_pending(struct server *srv, struct pending *p, cJSON *result)
{
	reply(p->ms, p->id, result);
	pending_unlink(srv, p);
}

static void on_task(void *arg, struct task *t, enum task_event ev)
{
	struct server *srv = arg;
	for (struct pending *p = srv->pending, *next; p; p = next) {
		next = p->next;
		if (p->t != t)
			continue;
		if (ev == TASK_EV_PROGRESS) {
			send_progress(p, 0);
		} else if (TASK_TERMINAL(t->status)) {
			answer_pending(srv, p, facade_final_result(srv->sv, t));
		} else if (t->status == TASK_INPUT_REQUIRED) {
			/* The caller is blocked in this call and cannot answer: hand back the task so
			 * the model can read the question and respond through the facade. */
			answer_pending(srv, p, facade_result(facade_handle(srv->sv, t), 0));
		}
	}
}

static void on_auto_timer(struct loop *l, void *arg)
{
	struct pending *p = arg;
	struct server *srv = p->ms->srv;
	(void)l;
	p->auto_timer = NULL;
	answer_pending(srv, p, facade_result(facade_handle(srv->sv, p->t), 0));
}

static int same_id(const cJSON *a, const cJSON *b)
{
	if (cJSON_IsString(a) && cJSON_IsString(b))
		return strcmp(a->valuestring, b->valuestring) == 0;
	if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
		return a->valuedouble == b->valuedouble;
	return 0;
}

/* ---- methods ----------------------------------------------------------------------------- */

static void m_initialize(struct msess *ms, const cJSON *id, const cJSON *params)
{
	struct server *srv = ms->srv;
	const cJSON *pv = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
	if (!cJSON_IsString(pv)) {
		reply_error(ms, id, RPC_INVALID_PARAMS, "initialize: params.protocolVersion must be a string");
		return;
	}
	const char *chosen = versions[0];
	for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
		if (strcmp(pv->valuestring, versions[i]) == 0)
			chosen = versions[i];
	snprintf(ms->version, sizeof ms->version, "%s", chosen);
	ms->initialized = 1;

	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "protocolVersion", chosen);
	cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "tools"), "listChanged", 0);
	cJSON_AddObjectToObject(caps, "logging");
	cJSON *info = cJSON_AddObjectToObject(r, "serverInfo");
	cJSON_AddStringToObject(info, "name", srv->sv->cfg->server.name);
	cJSON_AddStringToObject(info, "version", FORKPOINT_VERSION);
	cJSON_AddStringToObject(info, "title", "forkpoint");
	cJSON_AddStringToObject(r, "instructions",
		"Long-running tools here return a taskId at once. Poll durable_task_get with it until the "
		"status is completed, failed or cancelled; answer questions with durable_task_respond; stop "
		"work with durable_task_cancel. Task ids survive reconnects and restarts.");
	reply(ms, id, r);
}

static void m_tools_list(struct msess *ms, const cJSON *id, const cJSON *params)
{
	struct server *srv = ms->srv;
	const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(params, "cursor");
	int start = 0, total = cJSON_GetArraySize(srv->tools);
	if (cursor) {
		char *end = NULL;
		long v = cJSON_IsString(cursor) && cursor->valuestring[0] == 't'
			? strtol(cursor->valuestring + 1, &end, 10) : -1;
		if (!end || *end || v <= 0 || v >= total) {
			reply_error(ms, id, RPC_INVALID_PARAMS, "tools/list: invalid cursor");
			return;
		}
		start = (int)v;
	}
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(r, "tools");
	int i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, srv->tools) {
		if (i >= start && i < start + TOOLS_PAGE)
			cJSON_AddItemToArray(arr, cJSON_Duplicate(t, 1));
		i++;
	}
	if (start + TOOLS_PAGE < total) {
		char c[32];
		snprintf(c, sizeof c, "t%d", start + TOOLS_PAGE);
		cJSON_AddStringToObject(r, "nextCursor", c);
	}
	reply(ms, id, r);
}

static const cJSON *facade_schema(struct server *srv, const char *name)
{
	const cJSON *t;
	cJSON_ArrayForEach(t, srv->tools)
		if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, name) == 0)
			return cJSON_GetObjectItem(t, "inputSchema");
	return NULL;
}

static void m_tools_call(struct msess *ms, const cJSON *id, const cJSON *params)
{
	struct server *srv = ms->srv;
	struct supervisor *sv = srv->sv;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *arguments = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	if (!cJSON_IsString(name)) {
		reply_error(ms, id, RPC_INVALID_PARAMS, "tools/call: params.name must be a string");
		return;
	}
	if (arguments && !cJSON_IsObject(arguments) && !cJSON_IsNull(arguments)) {
		reply_error(ms, id, RPC_INVALID_PARAMS, "tools/call: params.arguments must be an object");
		return;
	}
	cJSON *args = arguments && cJSON_IsObject(arguments) ? cJSON_Duplicate(arguments, 1) : cJSON_CreateObject();
	if (!args) {
		reply_error(ms, id, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	if (facade_is_tool(name->valuestring)) {
		cJSON *r = facade_call(sv, name->valuestring, facade_schema(srv, name->valuestring), args);
		cJSON_Delete(args);
		if (r)
			reply(ms, id, r);
		else
			reply_error(ms, id, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	const struct tool_cfg *tool = config_tool(sv->cfg, name->valuestring);
	if (!tool) {
		char msg[200];
		snprintf(msg, sizeof msg, "Unknown tool: %.100s", name->valuestring);
		cJSON_Delete(args);
		reply_error(ms, id, RPC_INVALID_PARAMS, msg);
		return;
	}
	char err[512], field[256];
	if (schema_validate(tool->input_schema, args, err, sizeof err, field, sizeof field) < 0) {
		cJSON_Delete(args);
		cJSON *env = task_envelope("invalid_arguments", err, 1,
			"Fix the named argument to match the tool's inputSchema and call the tool again.");
		cJSON_AddStringToObject(env, "param", field);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "status", "failed");
		cJSON_AddItemToObject(o, "error", env);
		reply(ms, id, facade_result(o, 1));
		return;
	}
	struct task *t;
	int rc = tasks_create(sv->tasks, tool, args, &t);
	if (rc == -ENOBUFS) {
		reply(ms, id, facade_error("queue_full", "Too many tasks are waiting to run.", 1,
			"Wait for running tasks to finish (durable_task_list), then call the tool again."));
		return;
	}
	if (rc < 0) {
		reply(ms, id, facade_error("internal_error", strerror(-rc), 1, "Call the tool again."));
		return;
	}
	if (tool->mode == TOOL_MODE_TASK || TASK_TERMINAL(t->status)) {
		reply(ms, id, tool->mode == TOOL_MODE_TASK ? facade_result(facade_handle(sv, t), 0)
		                                           : facade_final_result(sv, t));
		return;
	}
	struct pending *p = calloc(1, sizeof *p);
	if (!p) {
		reply(ms, id, facade_result(facade_handle(sv, t), 0));
		return;
	}
	p->ms = ms;
	p->id = cJSON_Duplicate(id, 0);
	p->t = t;
	p->last_progress = -1;
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
	if (cJSON_IsString(tok) || cJSON_IsNumber(tok))
		p->token = cJSON_Duplicate(tok, 0);
	if (tool->mode == TOOL_MODE_AUTO)
		p->auto_timer = loop_timer_in(sv->loop, (int64_t)(tool->wait_seconds * 1000.0), on_auto_timer, p);
	p->next = srv->pending;
	srv->pending = p;
	if (p->token)
		send_progress(p, 1);
}

static void m_set_level(struct msess *ms, const cJSON *id, const cJSON *params)
{
	const cJSON *lv = cJSON_GetObjectItemCaseSensitive(params, "level");
	int l = cJSON_IsString(lv) ? fplog_level_parse(lv->valuestring) : -1;
	if (l < 0) {
		reply_error(ms, id, RPC_INVALID_PARAMS,
			"logging/setLevel: level must be one of debug, info, notice, warning, error, critical, alert, emergency");
		return;
	}
	ms->log_level = l;
	reply(ms, id, cJSON_CreateObject());
}

static void n_cancelled(struct msess *ms, const cJSON *params)
{
	struct server *srv = ms->srv;
	const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(params, "reason");
	for (struct pending *p = srv->pending; p; p = p->next) {
		if (p->ms != ms || !same_id(p->id, rid))
			continue;
		struct task *t = p->t;
		/* No response goes out for a cancelled request. */
		pending_unlink(srv, p);
		tasks_cancel(srv->sv->tasks, t, cJSON_IsString(reason) ? reason->valuestring
		                                                       : "the client cancelled the request");
		return;
	}
	/* Unknown or already answered ids are ignored, as the spec asks. */
}

static void dispatch(struct msess *ms, struct rpc_msg *m)
{
	const char *method = m->method;
	if (m->kind == RPC_NOTIFICATION) {
		if (strcmp(method, "notifications/initialized") == 0) {
			if (ms->initialized)
				ms->initialized = 2;
		} else if (strcmp(method, "notifications/cancelled") == 0) {
			n_cancelled(ms, m->params);
		}
		return;   /* other notifications need no action */
	}
	if (strcmp(method, "ping") == 0) {
		reply(ms, m->id, cJSON_CreateObject());
		return;
	}
	if (strcmp(method, "initialize") == 0) {
		m_initialize(ms, m->id, m->params);
		return;
	}
	if (!ms->initialized) {
		reply_error(ms, m->id, RPC_INVALID_REQUEST, "Server not initialized: send initialize first");
		return;
	}
	if (strcmp(method, "tools/list") == 0)
		m_tools_list(ms, m->id, m->params);
	else if (strcmp(method, "tools/call") == 0)
		m_tools_call(ms, m->id, m->params);
	else if (strcmp(method, "logging/setLevel") == 0)
		m_set_level(ms, m->id, m->params);
	else {
		char msg[200];
		snprintf(msg, sizeof msg, "Method not found: %.100s", method);
		reply_error(ms, m->id, RPC_METHOD_NOT_FOUND, msg);
	}
}

static void on_line(void *arg, const char *line, size_t len)
{
	struct msess *ms = arg;
	if (!line) {
		reply_error(ms, NULL, RPC_INVALID_REQUEST, "Invalid Request: message larger than 64 MiB");
		return;
	}
	struct rpc_msg m;
	rpc_parse(line, len, &m);
	switch (m.kind) {
	case RPC_INVALID:
		/* A broken notification gets no answer; everything else gets the error with the id
		 * we could recover (null when none). */
		if (!(m.err_code == RPC_INVALID_PARAMS && !m.id))
			reply_error(ms, m.id, m.err_code, m.err_msg);
		break;
	case RPC_RESPONSE:
		break;   /* answers to our requests: none are sent yet */
	default:
		dispatch(ms, &m);
		break;
	}
	rpc_msg_free(&m);
}

static void on_eof(void *arg)
{
	struct msess *ms = arg;
	struct server *srv = ms->srv;
	fplog(&srv->sv->log, FPLOG_INFO, NULL, "client closed its input");
	if (ms->primary)
		loop_stop(srv->sv->loop);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static cJSON *configured_tool_def(const struct tool_cfg *tc)
{
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "name", tc->name);
	if (tc->title)
		cJSON_AddStringToObject(t, "title", tc->title);
	if (tc->description)
		cJSON_AddStringToObject(t, "description", tc->description);
	cJSON_AddItemToObject(t, "inputSchema", cJSON_Duplicate(tc->input_schema, 1));
	if (tc->output_schema && tc->mode != TOOL_MODE_TASK)
		cJSON_AddItemToObject(t, "outputSchema", cJSON_Duplicate(tc->output_schema, 1));
	if (tc->annotations)
		cJSON_AddItemToObject(t, "annotations", cJSON_Duplicate(tc->annotations, 1));
	return t;
}

struct server *server_new(struct supervisor *sv)
{
	struct server *srv = calloc(1, sizeof *srv);
	if (!srv)
		return NULL;
	srv->sv = sv;
	srv->tools = cJSON_CreateArray();
	if (!srv->tools) {
		free(srv);
		return NULL;
	}
	for (size_t i = 0; i < sv->cfg->n_tools; i++)
		cJSON_AddItemToArray(srv->tools, configured_tool_def(&sv->cfg->tools[i]));
	facade_list_tools(srv->tools);
	tasks_set_observer(sv->tasks, on_task, srv);
	sv->log.sink = log_sink;
	sv->log.sink_arg = srv;
	return srv;
}

void server_free(struct server *srv)
{
	if (!srv)
		return;
	srv->sv->log.sink = NULL;
	tasks_set_observer(srv->sv->tasks, NULL, NULL);
	while (srv->pending)
		pending_unlink(srv, srv->pending);
	for (struct msess *ms = srv->sessions, *n; ms; ms = n) {
		n = ms->next;
		session_free(ms->io);
		free(ms);
	}
	cJSON_Delete(srv->tools);
	free(srv);
}

int server_attach(struct server *srv, int in_fd, int out_fd, int primary)
{
	struct msess *ms = calloc(1, sizeof *ms);
	if (!ms)
		return -ENOMEM;
	ms->srv = srv;
	ms->primary = primary;
	ms->log_level = -1;
	ms->io = session_new(srv->sv->loop, in_fd, out_fd, MAX_LINE, on_line, on_eof, ms);
	if (!ms->io) {
		free(ms);
		return -errno ? -errno : -ENOMEM;
	}
	ms->next = srv->sessions;
	srv->sessions = ms;
	return 0;
}

void server_release(struct server *srv)
{
	for (struct msess *ms = srv->sessions; ms; ms = ms->next)
		session_release(ms->io);
}

void server_flush(struct server *srv)
{
	for (struct msess *ms = srv->sessions; ms; ms = ms->next)
		session_flush(ms->io);
}

void server_drain(struct server *srv, int timeout_ms)
{
	for (struct msess *ms = srv->sessions; ms; ms = ms->next)
		session_drain(ms->io, timeout_ms);
}
