/* supervisor/mcp/server.c — see server.h. */
#include "supervisor/mcp/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/jsonrpc.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/tasks.h"
#include "supervisor/mcp/call.h"
#include "supervisor/mcp/catalog.h"
#include "supervisor/mcp/ndjson.h"
#include "supervisor/mcp/session.h"
#include "supervisor/mcp/stateless.h"
#include "supervisor/mcp/views.h"
#include "supervisor/mcp/wait.h"

#define TASKS_PAGE 50

static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26" };

struct server {
	struct supervisor *sv;
	struct catalog *cat;
	struct session *sessions;
};

/* ---- routing ---------------------------------------------------------------------------- */

/* A log line goes to the sessions that asked for its level: one about a task only to those
 * that wait on or follow that task, one about the server itself to each of them.  While a
 * session's output queue is full its lines are counted instead, and the count is sent once
 * the client reads again. */
static void log_sink(void *arg, enum fplog_level lv, const char *task, const char *msg)
{
	struct server *srv = arg;
	for (struct session *s = srv->sessions; s; s = s->next) {
		if (s->closed || s->log_level < 0 || (int)lv < s->log_level || s->initialized < 1)
			continue;
		if (task && !waits_concern(s, task))
			continue;
		if (session_congested(s)) {
			s->logs_dropped++;
			continue;
		}
		if (s->logs_dropped) {
			char note[160];
			snprintf(note, sizeof note, "%ld log messages were not sent while this client was not "
			         "reading its input", s->logs_dropped);
			s->logs_dropped = 0;
			cJSON *p = cJSON_CreateObject();
			cJSON_AddStringToObject(p, "level", "warning");
			cJSON_AddStringToObject(p, "logger", "forkpoint");
			cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "data"), "message", note);
			session_notify(s, "notifications/message", p);
		}
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "level", fplog_level_name(lv));
		cJSON_AddStringToObject(p, "logger", "forkpoint");
		cJSON *d = cJSON_AddObjectToObject(p, "data");
		if (task)
			cJSON_AddStringToObject(d, "taskId", task);
		cJSON_AddStringToObject(d, "message", msg);
		session_notify(s, "notifications/message", p);
	}
}

/* A task changed: only the sessions with a wait on it hear of it. */
static void on_task(void *arg, struct task *t, enum task_event ev)
{
	struct server *srv = arg;
	for (struct session *s = srv->sessions; s; s = s->next)
		if (!s->closed && s->waits)
			waits_on_task(s, t, ev);
}

/* ---- the 2025-11-25 task API -------------------------------------------------------------- */

/* The task a 2025-11-25 tasks request names, or NULL after answering -32602. */
static struct task *task_param(struct session *s, const cJSON *id, const cJSON *params)
{
	const cJSON *tid = cJSON_GetObjectItemCaseSensitive(params, "taskId");
	struct task *t = cJSON_IsString(tid) ? tasks_find(s->sv->tasks, tid->valuestring) : NULL;
	if (!t)
		session_reply_error(s, id, RPC_INVALID_PARAMS, cJSON_IsString(tid) ? "Unknown or expired taskId"
		                                                                  : "params.taskId must be a string", NULL);
	return t;
}

/* A read: answered at once when everything about the task is durable, so polling keeps
 * working while commits fail. */
static void m_tasks_get(struct session *s, const cJSON *id, const cJSON *params)
{
	struct task *t = task_param(s, id, params);
	if (t && persist_task_durable(s->sv->persist, t))
		s->answer_now = 1;
	if (t)
		session_reply(s, id, views_task(t));
}

/* tasks/result blocks in the client, not here: it becomes a WAIT_RESULT of this session and is
 * answered when the task ends (or dropped if the connection closes first). */
static void m_tasks_result(struct session *s, const cJSON *id, const cJSON *params)
{
	struct task *t = task_param(s, id, params);
	if (!t)
		return;
	struct wait_req rq = { .can_elicit = s->elicitation };
	struct wait *w = wait_new(s, WAIT_RESULT, id, t, &rq, NULL);
	if (!w) {
		session_reply_error(s, id, RPC_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	if (TASK_TERMINAL(t->status)) {
		wait_answer(w, views_final_result(s->sv, t));
		return;
	}
	/* The client waits here for the outcome; if the job is asking something, ask it now. */
	struct wait *f = waits_follow(s, t);
	if (t->status == TASK_INPUT_REQUIRED && f && f->rq.native)
		wait_elicit(f, t, 1);
}

/* Every task of the server, through the one lister (views_task_page). */
static void m_tasks_list(struct session *s, const cJSON *id, const cJSON *params)
{
	const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(params, "cursor");
	const char *next;
	if (cursor && !cJSON_IsString(cursor)) {
		session_reply_error(s, id, RPC_INVALID_PARAMS, "tasks/list: invalid cursor", NULL);
		return;
	}
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(r, "tasks");
	if (views_task_page(s->sv->tasks, cursor ? cursor->valuestring : NULL, -1, TASKS_PAGE, views_task,
	                    arr, &next) < 0) {
		cJSON_Delete(r);
		session_reply_error(s, id, RPC_INVALID_PARAMS, "tasks/list: invalid cursor", NULL);
		return;
	}
	if (next)
		cJSON_AddStringToObject(r, "nextCursor", next);
	session_reply(s, id, r);
}

/* The spec makes cancelling a finished task an error in this era (2026-07-28 acks it). */
static void m_tasks_cancel(struct session *s, const cJSON *id, const cJSON *params)
{
	struct task *t = task_param(s, id, params);
	if (!t || session_refuse_if_faulted(s, id))
		return;
	if (TASK_TERMINAL(t->status)) {
		session_reply_error(s, id, RPC_INVALID_PARAMS,
			"Cannot cancel a task that is already completed, failed or cancelled", NULL);
		return;
	}
	tasks_cancel(s->sv->tasks, t, "cancelled by the client (tasks/cancel)");
	session_reply(s, id, views_task(t));
}

/* ---- other methods ---------------------------------------------------------------------- */

/* Task support against what a call asks, for sessions that negotiated the task API
 * (params.task is ignored elsewhere). */
static int refuse(struct session *s, const cJSON *id, const struct tool_cfg *tool, const struct wait_req *rq)
{
	if (rq->native && tool->task_support == TASK_SUPPORT_FORBIDDEN) {
		session_reply_error(s, id, RPC_METHOD_NOT_FOUND,
			"This tool does not support task-augmented calls (taskSupport: forbidden)", NULL);
		return 1;
	}
	if (!rq->native && s->tasks_era && tool->task_support == TASK_SUPPORT_REQUIRED) {
		session_reply_error(s, id, RPC_METHOD_NOT_FOUND,
			"This tool must be called as a task (taskSupport: required): add params.task", NULL);
		return 1;
	}
	return 0;
}

/* The one tools/call path, with this era's rules: params.task asks for a native task on a
 * session that negotiated 2025-11-25, questions go out as elicitation when the client can
 * answer them. */
static void m_tools_call(struct session *s, const cJSON *id, const cJSON *params)
{
	const cJSON *taskp = s->tasks_era ? cJSON_GetObjectItemCaseSensitive(params, "task") : NULL;
	struct wait_req rq = { .native = cJSON_IsObject(taskp), .can_elicit = s->elicitation };
	call_tool(s, id, params, &rq, refuse);
}

static void m_tools_list(struct session *s, const cJSON *id, const cJSON *params)
{
	cJSON *r = catalog_tools_page(s->cat, cJSON_GetObjectItemCaseSensitive(params, "cursor"));
	if (r)
		session_reply(s, id, r);
	else
		session_reply_error(s, id, RPC_INVALID_PARAMS, "tools/list: invalid cursor", NULL);
}

/* resources/list, resources/templates/list, resources/read: tasks' results, logs, artifacts. */
static void m_resources(struct session *s, const char *method, const cJSON *id, const cJSON *params)
{
	int code;
	const char *msg;
	cJSON *r = catalog_resources(s->cat, method, params, &code, &msg);
	if (r)
		session_reply(s, id, r);
	else
		session_reply_error(s, id, code, msg, NULL);
}

/* Per session: each connection chooses its own level; -1 (the default) sends no logs. */
static void m_set_level(struct session *s, const cJSON *id, const cJSON *params)
{
	const cJSON *lv = cJSON_GetObjectItemCaseSensitive(params, "level");
	int l = cJSON_IsString(lv) ? fplog_level_parse(lv->valuestring) : -1;
	if (l < 0) {
		session_reply_error(s, id, RPC_INVALID_PARAMS,
			"logging/setLevel: level must be one of debug, info, notice, warning, error, critical, alert, emergency", NULL);
		return;
	}
	s->log_level = l;
	session_reply(s, id, cJSON_CreateObject());
}

/* Version negotiation: echo a supported version, else offer the newest.  Capabilities are
 * declared only for what this session can use (tasks from 2025-11-25 on). */
static void m_initialize(struct session *s, const cJSON *id, const cJSON *params)
{
	const cJSON *pv = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
	if (!cJSON_IsString(pv)) {
		session_reply_error(s, id, RPC_INVALID_PARAMS, "initialize: params.protocolVersion must be a string", NULL);
		return;
	}
	const char *chosen = versions[0];
	for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
		if (strcmp(pv->valuestring, versions[i]) == 0)
			chosen = versions[i];
	snprintf(s->version, sizeof s->version, "%s", chosen);
	s->initialized = 1;
	s->tasks_era = strcmp(chosen, "2025-11-25") >= 0;
	const cJSON *ccaps = cJSON_GetObjectItemCaseSensitive(params, "capabilities");
	s->elicitation = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ccaps, "elicitation"));

	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "protocolVersion", chosen);
	cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "tools"), "listChanged", 0);
	cJSON_AddObjectToObject(caps, "logging");
	cJSON *rc = cJSON_AddObjectToObject(caps, "resources");
	cJSON_AddBoolToObject(rc, "subscribe", 0);
	cJSON_AddBoolToObject(rc, "listChanged", 0);
	if (s->tasks_era) {
		cJSON *tc = cJSON_AddObjectToObject(caps, "tasks");
		cJSON_AddObjectToObject(tc, "list");
		cJSON_AddObjectToObject(tc, "cancel");
		cJSON_AddObjectToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(tc, "requests"), "tools"), "call");
	}
	cJSON *info = cJSON_AddObjectToObject(r, "serverInfo");
	cJSON_AddStringToObject(info, "name", s->sv->cfg->server.name);
	cJSON_AddStringToObject(info, "version", FORKPOINT_VERSION);
	cJSON_AddStringToObject(info, "title", "forkpoint");
	cJSON_AddStringToObject(r, "instructions",
		"Long-running tools here return a taskId at once. Poll durable_task_get with it until the "
		"status is completed, failed or cancelled; answer questions with durable_task_respond; stop "
		"work with durable_task_cancel. Task ids survive reconnects and restarts.");
	session_reply(s, id, r);
}

/* ---- dispatch ------------------------------------------------------------------------------ */

/* Notifications get no answer, whatever they carry. */
static void notification(struct session *s, const struct rpc_msg *m)
{
	if (strcmp(m->method, "notifications/initialized") == 0) {
		if (s->initialized)
			s->initialized = 2;
	} else if (strcmp(m->method, "notifications/cancelled") == 0) {
		const cJSON *rid = cJSON_GetObjectItemCaseSensitive(m->params, "requestId");
		const cJSON *reason = cJSON_GetObjectItemCaseSensitive(m->params, "reason");
		/* Unknown or already answered ids are ignored, as the spec asks. */
		waits_cancel_request(s, rid, cJSON_GetStringValue(reason));
	}
	/* other notifications need no action */
}

/* Methods that need an initialized session. */
static void session_method(struct session *s, const char *method, const cJSON *id, const cJSON *params)
{
	if (strcmp(method, "tools/list") == 0)
		m_tools_list(s, id, params);
	else if (strcmp(method, "tools/call") == 0)
		m_tools_call(s, id, params);
	else if (strcmp(method, "logging/setLevel") == 0)
		m_set_level(s, id, params);
	else if (strcmp(method, "resources/list") == 0 || strcmp(method, "resources/templates/list") == 0 ||
	         strcmp(method, "resources/read") == 0)
		m_resources(s, method, id, params);
	else if (s->tasks_era && strcmp(method, "tasks/get") == 0)
		m_tasks_get(s, id, params);
	else if (s->tasks_era && strcmp(method, "tasks/result") == 0)
		m_tasks_result(s, id, params);
	else if (s->tasks_era && strcmp(method, "tasks/list") == 0)
		m_tasks_list(s, id, params);
	else if (s->tasks_era && strcmp(method, "tasks/cancel") == 0)
		m_tasks_cancel(s, id, params);
	else {
		char msg[200];
		snprintf(msg, sizeof msg, "Method not found: %.100s", method);
		s->answer_now = 1;
		session_reply_error(s, id, RPC_METHOD_NOT_FOUND, msg, NULL);
	}
}

/* Route one request or notification.  answer_now is decided here for what promises nothing
 * (housekeeping), before the method may decide it for reads of durable state. */
static void dispatch(struct session *s, struct rpc_msg *m)
{
	const char *method = m->method;
	if (m->kind == RPC_NOTIFICATION) {
		notification(s, m);
		return;
	}
	/* A request that names its protocol version in _meta stands alone (2026-07-28): no
	 * initialize, its capabilities travel with it. */
	if (stateless_claims(m->params)) {
		if (strcmp(method, "server/discover") == 0 || strcmp(method, "tools/list") == 0 ||
		    strcmp(method, "resources/templates/list") == 0)
			s->answer_now = 1;   /* housekeeping: see below */
		stateless_request(s, m->id, method, m->params);
		return;
	}
	/* Protocol housekeeping promises nothing: it answers at once, even while commits fail. */
	if (strcmp(method, "ping") == 0 || strcmp(method, "initialize") == 0 || !s->initialized ||
	    strcmp(method, "tools/list") == 0 || strcmp(method, "logging/setLevel") == 0 ||
	    strcmp(method, "resources/templates/list") == 0)
		s->answer_now = 1;
	if (strcmp(method, "ping") == 0)
		session_reply(s, m->id, cJSON_CreateObject());
	else if (strcmp(method, "initialize") == 0)
		m_initialize(s, m->id, m->params);
	else if (!s->initialized)
		session_reply_error(s, m->id, RPC_INVALID_REQUEST, "Server not initialized: send initialize first", NULL);
	else
		session_method(s, method, m->id, m->params);
}

/* ---- transport events ---------------------------------------------------------------------- */

/* One message from the transport.  Parse errors are answered at once: they promise nothing. */
static void on_message(void *arg, const char *line, size_t len)
{
	struct session *s = arg;
	if (!line) {
		s->answer_now = 1;
		session_reply_error(s, NULL, RPC_INVALID_REQUEST, "Invalid Request: message larger than 64 MiB", NULL);
		s->answer_now = 0;
		return;
	}
	struct rpc_msg m;
	rpc_parse(line, len, &m);
	switch (m.kind) {
	case RPC_INVALID:
		s->answer_now = 1;
		/* A broken notification gets no answer; everything else gets the error with the id
		 * we could recover (null when none). */
		if (!(m.err_code == RPC_INVALID_PARAMS && !m.id))
			session_reply_error(s, m.id, m.err_code, m.err_msg, NULL);
		break;
	case RPC_RESPONSE:
		waits_on_response(s, &m);   /* answers to our elicitation requests */
		break;
	default:
		dispatch(s, &m);
		break;
	}
	s->answer_now = 0;
	rpc_msg_free(&m);
}

/* The peer is gone.  Its waits go now (the tasks they waited on run on); what was already
 * queued for it still goes out at the next release, then the session is freed. */
static void on_close(void *arg)
{
	struct session *s = arg;
	fplog(&s->sv->log, FPLOG_INFO, NULL, "client closed its input");
	if (s->primary) {
		loop_stop(s->sv->loop);
		return;
	}
	waits_drop(s);
	s->closed = 1;
}

/* A client stopped reading (its output queue is full) or reads again; once it does, what was
 * held back for it goes out. */
static void on_flow(void *arg, int stopped)
{
	struct session *s = arg;
	fplog(&s->sv->log, FPLOG_INFO, NULL, stopped
	      ? "the client does not read its output (%zu bytes wait): its requests wait, notifications are held back"
	      : "the client reads its output again (%zu bytes wait): serving its requests", transport_pending(s->io));
	if (!stopped)
		waits_flush_owed(s);
}

/* ---- sessions ----------------------------------------------------------------------------- */

/* Waits first: a LATER wait the pool still holds must be detached before the session goes. */
static void session_free(struct session *s)
{
	waits_drop(s);
	transport_close(s->io);
	free(s);
}

/* Binding happens before the loop runs again, so no event of the new connection is lost. */
int server_attach_transport(struct server *srv, struct transport *t, int primary)
{
	if (!t)
		return -EINVAL;
	struct session *s = calloc(1, sizeof *s);
	if (!s) {
		transport_close(t);
		return -ENOMEM;
	}
	s->sv = srv->sv;
	s->cat = srv->cat;
	s->io = t;
	s->primary = primary;
	s->log_level = -1;
	static const struct transport_events ev = { on_message, on_close, on_flow };
	transport_bind(t, &ev, s);
	s->next = srv->sessions;
	srv->sessions = s;
	return 0;
}

int server_attach(struct server *srv, int in_fd, int out_fd, int primary)
{
	struct transport *t = ndjson_open(srv->sv->loop, in_fd, out_fd, SERVER_MAX_MESSAGE);
	if (!t)
		return errno ? -errno : -ENOMEM;
	return server_attach_transport(srv, t, primary);
}

/* The server hooks itself into the task table (events) and the logger (client log lines):
 * both are routed per session from here. */
struct server *server_new(struct supervisor *sv)
{
	struct server *srv = calloc(1, sizeof *srv);
	if (!srv)
		return NULL;
	srv->sv = sv;
	srv->cat = catalog_new(sv);
	if (!srv->cat) {
		free(srv);
		return NULL;
	}
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
	while (srv->sessions) {
		struct session *s = srv->sessions;
		srv->sessions = s->next;
		session_free(s);
	}
	catalog_free(srv->cat);
	free(srv);
}

/* After the turn's commit.  A closed session is freed here, not in its on_close: what it was
 * answered before it closed still goes out first, and no transport callback frees its own
 * transport. */
void server_release(struct server *srv)
{
	for (struct session **pp = &srv->sessions; *pp;) {
		struct session *s = *pp;
		transport_release(s->io);
		if (!s->closed) {
			pp = &s->next;
			continue;
		}
		/* Closed: what it was owed goes out if the peer still reads, then it is freed. */
		transport_flush(s->io);
		*pp = s->next;
		session_free(s);
	}
}

void server_flush(struct server *srv)
{
	for (struct session *s = srv->sessions; s; s = s->next)
		transport_flush(s->io);
}

void server_drain(struct server *srv, int timeout_ms)
{
	for (struct session *s = srv->sessions; s; s = s->next)
		transport_drain(s->io, timeout_ms);
}

void server_stats(const struct server *srv, struct server_stats *st)
{
	st->sessions = st->waits = 0;
	for (const struct session *s = srv->sessions; s; s = s->next) {
		st->sessions++;
		st->waits += waits_count(s);
	}
}
