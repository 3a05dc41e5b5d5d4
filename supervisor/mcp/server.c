/* supervisor/server.c — see server.h. */
#include "supervisor/mcp/server.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/mcp/era2026.h"
#include "supervisor/mcp/facade.h"
#include "proto/jsonrpc.h"
#include "supervisor/core/persist.h"
#include "proto/schema.h"
#include "supervisor/mcp/server_int.h"
#include "supervisor/mcp/session.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "supervisor/mcp/files.h"
#include "supervisor/mcp/resources.h"

#define MAX_LINE        (64u << 20)   /* a chunk upload of 256 KiB is ~350 KiB; leave room */
#define TOOLS_PAGE      100
#define PROGRESS_MIN_MS 50            /* per call: at most 20 progress notifications a second */
#define PROGRESS_STEP   1e-6          /* the least rise of a repeated progress value (printed exactly) */

static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26" };

struct msess {
	struct server *srv;
	struct session *io;
	int primary;
	int initialized;       /* 0: no initialize yet; 1: answered; 2: notifications/initialized seen */
	char version[16];
	int log_level;         /* -1: client did not ask for log messages */
	int elicitation;       /* the client declared the elicitation capability */
	int tasks_era;         /* negotiated 2025-11-25: native tasks on this session */
	long logs_dropped;     /* log notifications not sent while the output queue was full */
	struct msess *next;
};

/* A request whose answer waits for its task: a tools/call in sync or auto mode, or a
 * tasks/result (which waits for the terminal state and answers with the original result). */
enum pend_kind { PEND_CALL, PEND_RESULT };

struct pending {
	enum pend_kind kind;
	struct msess *ms;
	cJSON *id;
	struct task *t;
	cJSON *token;          /* progressToken, or NULL */
	double last_progress;
	int64_t last_sent;
	int progress_owed;     /* an update was held back (rate limit, or a client that does not read) */
	struct loop_timer *auto_timer;
	char elicited[208];    /* question id already sent to the caller as an elicitation */
	struct pending *next;
};

/* A task created through MCP's native task API (2025-11-25): its creator gets progress
 * notifications (when the call carried a progressToken) until it is terminal, and its questions
 * as elicitation requests when the client can answer them. */
struct watch {
	struct msess *ms;
	char id[33];
	cJSON *token;
	double last_progress;
	int64_t last_sent;
	int progress_owed;
	char elicited[208];    /* question id already sent as an elicitation */
	struct watch *next;
};

/* An elicitation/create we sent and whose answer we wait for. */
struct outreq {
	long id;
	struct msess *ms;
	char task[33];
	char qid[208];
	struct outreq *next;
};

struct server {
	struct supervisor *sv;
	cJSON *tools;          /* every tool definition, configured tools first */
	struct msess *sessions;
	struct pending *pending;
	struct watch *watches;
	struct outreq *outreqs;
	long next_out_id;
	struct era2026 *era;   /* requests of the 2026-07-28 (stateless) era */
	struct loop_timer *progress_timer;   /* sends progress held back by the rate limit */
	/* The message being handled observes nothing that waits for a commit (ping, tools/list, a
	 * read of durable tasks, a refusal): its answer need not wait for the turn's commit, and
	 * so keeps flowing while commits fail.  Set per message, cleared after it. */
	int answer_now;
};

#define RELATED_TASK "io.modelcontextprotocol/related-task"


/* ---- sending ------------------------------------------------------------------------ */

/* Every message out goes through here.  One that may depend on records not yet durable is
 * held until the turn's commit (server_release); one that cannot is released at once.  When
 * nothing at all waits for a commit, nothing a message could observe is undurable. */
static void send_line(struct msess *ms, char *line)
{
	struct persist *p = ms->srv->sv->persist;
	int now = ms->srv->answer_now || persist_pending(p) == 0;
	if ((now ? session_send_now(ms->io, line) : session_send(ms->io, line)) < 0)
		fplog(&ms->srv->sv->log, FPLOG_ERROR, NULL, "out of memory queueing a message");
}

/* 1 if every task is durable as it is now: a list of them may then be answered at once. */
static int all_durable(struct supervisor *sv)
{
	if (persist_pending(sv->persist) == 0)
		return 1;
	for (struct task *t = tasks_newest(sv->tasks); t; t = t->next)
		if (!persist_task_durable(sv->persist, t))
			return 0;
	return 1;
}

/* Tools that change nothing: answered while the journal cannot take records. */
static int builtin_reads(const char *name)
{
	return strcmp(name, "durable_task_get") == 0 || strcmp(name, "durable_task_list") == 0 ||
	       strcmp(name, "file_transfer_read") == 0 || strcmp(name, "file_transfer_status") == 0;
}

/* Before a built-in tool runs: 1 and *result if it is a write refused because storage is
 * failing; else 0, with srv->answer_now set when its answer can observe only durable state. */
static int builtin_gate(struct server *srv, const char *name, const cJSON *args, cJSON **result)
{
	struct supervisor *sv = srv->sv;
	int fault = persist_fault(sv->persist);
	if (!builtin_reads(name) && fault < 0) {
		*result = facade_storage_error(fault);
		srv->answer_now = 1;
		return 1;
	}
	if (strcmp(name, "durable_task_get") == 0) {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(args, "taskId");
		struct task *t = cJSON_IsString(id) ? tasks_find(sv->tasks, id->valuestring) : NULL;
		if (t && persist_task_durable(sv->persist, t))
			srv->answer_now = 1;
	} else if (strcmp(name, "durable_task_list") == 0 && all_durable(sv)) {
		srv->answer_now = 1;
	}
	return 0;
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

void server_reply(struct msess *ms, const cJSON *id, cJSON *result)
{
	reply(ms, id, result);
}

void server_reply_error(struct msess *ms, const cJSON *id, int code, const char *msg, cJSON *data)
{
	send_line(ms, rpc_error(id, code, msg, data));
}

/* ---- logging to clients ---------------------------------------------------------------- */

/* Log lines go to every session that asked for them, except while its output queue is full:
 * those are counted and the count is sent once the client reads again. */
static void log_sink(void *arg, enum fplog_level lv, const char *task, const char *msg)
{
	struct server *srv = arg;
	for (struct msess *ms = srv->sessions; ms; ms = ms->next) {
		if (ms->log_level < 0 || (int)lv < ms->log_level || ms->initialized < 1)
			continue;
		if (session_congested(ms->io)) {
			ms->logs_dropped++;
			continue;
		}
		if (ms->logs_dropped) {
			char note[160];
			snprintf(note, sizeof note, "%ld log messages were not sent while this client was not "
			         "reading its input", ms->logs_dropped);
			ms->logs_dropped = 0;
			cJSON *p = cJSON_CreateObject();
			cJSON_AddStringToObject(p, "level", "warning");
			cJSON_AddStringToObject(p, "logger", "forkpoint");
			cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "data"), "message", note);
			notify_session(ms, "notifications/message", p);
		}
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

int server_send_progress(struct msess *ms, const cJSON *token, const struct task *t,
                         double *last, int64_t *last_sent, int force)
{
	int64_t now = loop_now();
	if (!token)
		return 0;
	if (!force && now - *last_sent < PROGRESS_MIN_MS)
		return -EBUSY;
	if (session_congested(ms->io))
		return -EAGAIN;
	/* progress must strictly increase, as the client reads it.  A repeated or lower fraction
	 * (a new message only) moves it by PROGRESS_STEP: a one-ulp step would not survive printing
	 * (cJSON prints a double that equals its 15-digit form within an epsilon as that form, so
	 * 0.5 + 1 ulp goes out as 0.5).  At the total there is no room left: the message waits for
	 * the result, which supersedes it. */
	double v = t->fraction >= 0 ? t->fraction : *last < 0 ? 0 : *last;
	if (v <= *last)
		v = *last + PROGRESS_STEP;
	if (v > 1.0)
		return 0;
	cJSON *params = cJSON_CreateObject();
	cJSON_AddItemToObject(params, "progressToken", cJSON_Duplicate(token, 0));
	cJSON_AddNumberToObject(params, "progress", v);
	cJSON_AddNumberToObject(params, "total", 1);
	if (t->progress_msg)
		cJSON_AddStringToObject(params, "message", t->progress_msg);
	notify_session(ms, "notifications/progress", params);
	*last = v;
	*last_sent = now;
	return 1;
}

static void progress_timer_cb(struct loop *l, void *arg);

/* An update held back by the rate limit goes out from a timer, so the latest progress is never
 * lost for want of a later one. */
static void owe_progress(struct server *srv, int rc, int *owed)
{
	*owed = rc < 0;
	if (rc == -EBUSY && !srv->progress_timer)
		srv->progress_timer = loop_timer_in(srv->sv->loop, PROGRESS_MIN_MS, progress_timer_cb, srv);
}

static void send_progress(struct pending *p, int force)
{
	int rc = server_send_progress(p->ms, p->token, p->t, &p->last_progress, &p->last_sent, force);
	owe_progress(p->ms->srv, rc, &p->progress_owed);
}

static void answer_pending(struct server *srv, struct pending *p, cJSON *result)
{
	/* Progress comes before the response or not at all. */
	if (p->progress_owed)
		send_progress(p, 1);
	if (p->kind == PEND_RESULT && result) {
		/* tasks/result answers with the original result, tagged with the task it belongs to. */
		cJSON *meta = cJSON_GetObjectItem(result, "_meta");
		if (!meta)
			meta = cJSON_AddObjectToObject(result, "_meta");
		cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, RELATED_TASK), "taskId", p->t->id);
	}
	reply(p->ms, p->id, result);
	pending_unlink(srv, p);
}

/* ---- native tasks (2025-11-25) -------------------------------------------------------------- */

static const char *task_status_message(const struct task *t)
{
	if (t->status == TASK_INPUT_REQUIRED && t->question_prompt)
		return t->question_prompt;
	if ((t->status == TASK_FAILED || t->status == TASK_CANCELLED) && t->error)
		return cJSON_GetStringValue(cJSON_GetObjectItem(t->error, "message"));
	return t->progress_msg;
}

cJSON *server_task_object(const struct task *t)
{
	char ts[64];
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "taskId", t->id);
	cJSON_AddStringToObject(o, "status", task_status_name(t->status));
	const char *sm = task_status_message(t);
	if (sm)
		cJSON_AddStringToObject(o, "statusMessage", sm);
	facade_iso_time(t->created_ms, ts);
	cJSON_AddStringToObject(o, "createdAt", ts);
	facade_iso_time(t->updated_ms, ts);
	cJSON_AddStringToObject(o, "lastUpdatedAt", ts);
	return o;
}

/* The Task object of MCP's task API for a durable task (any task, however it was created). */
static cJSON *native_task(const struct task *t)
{
	cJSON *o = server_task_object(t);
	cJSON_AddNumberToObject(o, "ttl", (t->tool ? t->tool->ttl_seconds : 86400.0) * 1000.0);
	cJSON_AddNumberToObject(o, "pollInterval", 1000);
	return o;
}

static struct watch *find_watch(struct server *srv, const char *id)
{
	for (struct watch *w = srv->watches; w; w = w->next)
		if (strcmp(w->id, id) == 0)
			return w;
	return NULL;
}

static void watch_unlink(struct server *srv, struct watch *w)
{
	for (struct watch **pp = &srv->watches; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	cJSON_Delete(w->token);
	free(w);
}

static void watch_progress(struct watch *w, const struct task *t, int force)
{
	int rc = server_send_progress(w->ms, w->token, t, &w->last_progress, &w->last_sent, force);
	owe_progress(w->ms->srv, rc, &w->progress_owed);
}

cJSON *server_elicit_params(const struct task *t)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "mode", "form");
	cJSON_AddStringToObject(p, "message", t->question_prompt ? t->question_prompt : "");
	cJSON *schema = cJSON_AddObjectToObject(p, "requestedSchema");
	cJSON_AddStringToObject(schema, "type", "object");
	cJSON *resp = cJSON_AddObjectToObject(cJSON_AddObjectToObject(schema, "properties"), "response");
	cJSON_AddStringToObject(resp, "type", "string");
	cJSON_AddStringToObject(resp, "title", "Answer");
	if (t->question_choices)
		cJSON_AddItemToObject(resp, "enum", cJSON_Duplicate(t->question_choices, 1));
	cJSON_AddItemToArray(cJSON_AddArrayToObject(schema, "required"), cJSON_CreateString("response"));
	return p;
}

/* Ask a client the job's question through elicitation, once per question (elicited holds the
 * question id already asked).  tag: mark the request as belonging to the task (native tasks);
 * a plain call's question belongs to the call the client is waiting on. */
static void elicit_to(struct server *srv, struct msess *ms, const struct task *t, char *elicited, size_t len,
                      int tag)
{
	if (!ms->elicitation || !t->question_id || strcmp(elicited, t->question_id) == 0)
		return;
	struct outreq *o = calloc(1, sizeof *o);
	if (!o)
		return;
	o->id = ++srv->next_out_id;
	o->ms = ms;
	memcpy(o->task, t->id, sizeof o->task);
	snprintf(o->qid, sizeof o->qid, "%s", t->question_id);
	snprintf(elicited, len, "%s", t->question_id);
	o->next = srv->outreqs;
	srv->outreqs = o;

	cJSON *p = server_elicit_params(t);
	if (tag)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(p, "_meta"), RELATED_TASK),
		                        "taskId", t->id);
	cJSON *id = cJSON_CreateNumber((double)o->id);
	send_line(ms, rpc_request(id, "elicitation/create", p));
	cJSON_Delete(id);
}

/* Ask the creator's client of a native task. */
static void elicit(struct server *srv, struct watch *w, const struct task *t)
{
	elicit_to(srv, w->ms, t, w->elicited, sizeof w->elicited, 1);
}

const cJSON *server_elicited_answer(const struct task *t, const cJSON *res)
{
	const cJSON *action = cJSON_GetObjectItemCaseSensitive(res, "action");
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content");
	if (!cJSON_IsString(action) || strcmp(action->valuestring, "accept") != 0 || !cJSON_IsObject(content))
		return NULL;
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(content, "response");
	if (!t->question_choices)
		return cJSON_IsString(resp) ? resp : content;   /* a free-form question takes any form */
	const cJSON *c;
	if (cJSON_IsString(resp))
		cJSON_ArrayForEach(c, t->question_choices)
			if (cJSON_IsString(c) && strcmp(c->valuestring, resp->valuestring) == 0)
				return resp;
	return NULL;
}

static void on_response(struct msess *ms, const struct rpc_msg *m)
{
	struct server *srv = ms->srv;
	if (!cJSON_IsNumber(m->id))
		return;
	for (struct outreq **pp = &srv->outreqs; *pp; pp = &(*pp)->next) {
		struct outreq *o = *pp;
		if (o->ms != ms || (double)o->id != m->id->valuedouble)
			continue;
		*pp = o->next;
		struct task *t = tasks_find(srv->sv->tasks, o->task);
		const cJSON *answer = t && t->status == TASK_INPUT_REQUIRED && t->question_id &&
			strcmp(t->question_id, o->qid) == 0 ? server_elicited_answer(t, m->result) : NULL;
		free(o);
		/* An answer that could not be recorded is not taken: as if declined. */
		if (answer && tasks_respond(srv->sv->tasks, t, answer) == 0)
			return;
		/* Declined, cancelled, malformed or not recordable: the question stays open for
		 * durable_task_respond, and a plain call still waiting on it gets the task handle to
		 * do that with. */
		for (struct pending *p = srv->pending, *next; t && p; p = next) {
			next = p->next;
			if (p->kind == PEND_CALL && p->t == t && p->ms == ms)
				answer_pending(srv, p, facade_handle_result(srv->sv, t));
		}
		return;
	}
}

/* Status notifications are optional (clients poll tasks/get): a session whose output queue is
 * full does not get them. */
static void status_notification(struct server *srv, const struct task *t)
{
	for (struct msess *ms = srv->sessions; ms; ms = ms->next)
		if (ms->tasks_era && ms->initialized && !session_congested(ms->io))
			notify_session(ms, "notifications/tasks/status", native_task(t));
}

/* Send the latest progress of every call and task (of session ms, or of all when NULL) whose
 * update was held back: one notification each, however many updates were skipped. */
static void flush_owed(struct server *srv, struct msess *ms)
{
	for (struct pending *p = srv->pending; p; p = p->next)
		if ((!ms || p->ms == ms) && p->progress_owed)
			send_progress(p, 1);
	for (struct watch *w = srv->watches; w; w = w->next) {
		struct task *t = w->progress_owed ? tasks_find(srv->sv->tasks, w->id) : NULL;
		if ((!ms || w->ms == ms) && t)
			watch_progress(w, t, 1);
	}
}

static void progress_timer_cb(struct loop *l, void *arg)
{
	struct server *srv = arg;
	(void)l;
	srv->progress_timer = NULL;
	flush_owed(srv, NULL);
}

/* A client stopped reading (its output queue is full) or reads again; once it does, what was
 * held back for it goes out. */
static void on_flow(void *arg, int stopped)
{
	struct msess *ms = arg;
	fplog(&ms->srv->sv->log, FPLOG_INFO, NULL, stopped
	      ? "the client does not read its output (%zu bytes wait): its requests wait, notifications are held back"
	      : "the client reads its output again (%zu bytes wait): serving its requests", session_out_pending(ms->io));
	if (!stopped)
		flush_owed(ms->srv, ms);
}

static void on_task(void *arg, struct task *t, enum task_event ev)
{
	struct server *srv = arg;
	era2026_on_task(srv->era, t, ev);
	struct watch *w = srv->watches ? find_watch(srv, t->id) : NULL;
	if (w) {
		if (ev == TASK_EV_PROGRESS) {
			watch_progress(w, t, 0);
		} else {
			status_notification(srv, t);
			if (t->status == TASK_INPUT_REQUIRED)
				elicit(srv, w, t);
			if (TASK_TERMINAL(t->status))
				watch_unlink(srv, w);
		}
	}
	for (struct pending *p = srv->pending, *next; p; p = next) {
		next = p->next;
		if (p->t != t)
			continue;
		if (p->kind == PEND_RESULT) {
			if (TASK_TERMINAL(t->status))
				answer_pending(srv, p, facade_final_result(srv->sv, t));
			continue;
		}
		if (ev == TASK_EV_PROGRESS) {
			send_progress(p, 0);
		} else if (TASK_TERMINAL(t->status)) {
			answer_pending(srv, p, facade_final_result(srv->sv, t));
		} else if (t->status == TASK_INPUT_REQUIRED && p->ms->elicitation && t->question_id) {
			/* The caller waits in this call and can answer: ask it, once per question. */
			elicit_to(srv, p->ms, t, p->elicited, sizeof p->elicited, 0);
		} else if (t->status == TASK_INPUT_REQUIRED) {
			/* The caller is blocked in this call and cannot answer: hand back the task so
			 * the model can read the question and respond through the facade. */
			answer_pending(srv, p, facade_handle_result(srv->sv, t));
		}
	}
}

static void on_auto_timer(struct loop *l, void *arg)
{
	struct pending *p = arg;
	struct server *srv = p->ms->srv;
	(void)l;
	p->auto_timer = NULL;
	answer_pending(srv, p, facade_handle_result(srv->sv, p->t));
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
	ms->tasks_era = strcmp(chosen, "2025-11-25") >= 0;
	const cJSON *ccaps = cJSON_GetObjectItemCaseSensitive(params, "capabilities");
	ms->elicitation = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ccaps, "elicitation"));

	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "protocolVersion", chosen);
	cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "tools"), "listChanged", 0);
	cJSON_AddObjectToObject(caps, "logging");
	cJSON *rc = cJSON_AddObjectToObject(caps, "resources");
	cJSON_AddBoolToObject(rc, "subscribe", 0);
	cJSON_AddBoolToObject(rc, "listChanged", 0);
	if (ms->tasks_era) {
		cJSON *tc = cJSON_AddObjectToObject(caps, "tasks");
		cJSON_AddObjectToObject(tc, "list");
		cJSON_AddObjectToObject(tc, "cancel");
		cJSON_AddObjectToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(tc, "requests"), "tools"), "call");
	}
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

cJSON *server_tools_page(struct server *srv, const cJSON *cursor)
{
	int start = 0, total = cJSON_GetArraySize(srv->tools);
	if (cursor) {
		char *end = NULL;
		long v = cJSON_IsString(cursor) && cursor->valuestring[0] == 't'
			? strtol(cursor->valuestring + 1, &end, 10) : -1;
		if (!end || *end || v <= 0 || v >= total)
			return NULL;
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
	return r;
}

static void m_tools_list(struct msess *ms, const cJSON *id, const cJSON *params)
{
	cJSON *r = server_tools_page(ms->srv, cJSON_GetObjectItemCaseSensitive(params, "cursor"));
	if (r)
		reply(ms, id, r);
	else
		reply_error(ms, id, RPC_INVALID_PARAMS, "tools/list: invalid cursor");
}

const cJSON *server_tool_schema(struct server *srv, const char *name)
{
	const cJSON *t;
	cJSON_ArrayForEach(t, srv->tools)
		if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, name) == 0)
			return cJSON_GetObjectItem(t, "inputSchema");
	return NULL;
}

/* A built-in call answered later: where the answer goes.  Sessions live as long as the
 * server, and the worker pool (which makes these answers) is stopped before it. */
struct later_reply {
	struct msess *ms;
	cJSON *id;
	server_wrap_fn wrap;
	void *wrap_arg;
};

static void later_answer(void *ctx, cJSON *result)
{
	struct later_reply *lr = ctx;
	if (result && lr->wrap)
		result = lr->wrap(lr->wrap_arg, result);
	if (result)
		reply(lr->ms, lr->id, result);
	else
		reply_error(lr->ms, lr->id, RPC_INTERNAL_ERROR, "out of memory");
	cJSON_Delete(lr->id);
	free(lr);
}

static void later_drop(void *ctx)
{
	struct later_reply *lr = ctx;
	cJSON_Delete(lr->id);
	free(lr);
}

int server_run_builtin(struct server *srv, struct msess *ms, const cJSON *id, server_wrap_fn wrap,
                       void *wrap_arg, const char *name, cJSON *args, cJSON **result)
{
	struct supervisor *sv = srv->sv;
	int rc = 1;
	if ((facade_is_tool(name) || files_is_tool(name)) && builtin_gate(srv, name, args, result)) {
		/* refused: storage is failing and this call would change something */
	} else if (facade_is_tool(name)) {
		*result = facade_call(sv, name, server_tool_schema(srv, name), args);
	} else if (!files_is_tool(name)) {
		return 0;
	} else if (sv->transfers) {
		struct later_reply *lr = ms ? calloc(1, sizeof *lr) : NULL;
		if (lr && !(lr->id = cJSON_Duplicate(id, 1)) && id) {
			free(lr);
			lr = NULL;
		}
		struct files_later later = { later_answer, later_drop, lr };
		if (lr) {
			lr->ms = ms;
			lr->wrap = wrap;
			lr->wrap_arg = wrap_arg;
		}
		unsigned long before = transfers_deferred(sv->transfers);
		*result = files_call_later(sv->transfers, name, server_tool_schema(srv, name), args,
		                           lr ? &later : NULL);
		if (!*result && lr && transfers_deferred(sv->transfers) != before)
			rc = 2;
		else if (lr)
			later_drop(lr);
	} else {
		*result = facade_error("internal_error", "file transfer is not available", 0, "");
	}
	cJSON_Delete(args);
	return rc;
}

/* The arguments as compact JSON (as they are journaled and sent to the job; the schema's
 * defaults add little), against server.maxArgumentsBytes: a call over it is refused before
 * anything exists, so a create record is always writable and a start frame always fits.
 * 0, or -E2BIG / -ENOMEM with *failure. */
static int check_size(struct supervisor *sv, const cJSON *args, cJSON **failure)
{
	char *text = cJSON_PrintUnformatted(args);
	if (!text) {
		*failure = facade_error("internal_error", "out of memory", 1, "Call the tool again.");
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
	*failure = facade_failure(env);
	return -E2BIG;
}

int server_start_task(struct supervisor *sv, const struct tool_cfg *tool, cJSON *args, struct task **out,
                      cJSON **failure)
{
	char err[512], field[256];
	*out = NULL;
	*failure = NULL;
	int rc = persist_fault(sv->persist);
	if (rc < 0) {
		/* Nothing could be promised: refuse before anything is made, and say so at once. */
		cJSON_Delete(args);
		*failure = facade_storage_error(rc);
		if (sv->server)
			sv->server->answer_now = 1;
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
		*failure = facade_failure(env);
		return -EINVAL;
	}
	rc = tasks_create(sv->tasks, tool, args, out);
	if (rc == -ENOBUFS)
		*failure = facade_error("queue_full", "Too many tasks are waiting to run.", 1,
			"Wait for running tasks to finish (durable_task_list), then call the tool again.");
	else if (rc == -ENOMEM)
		*failure = facade_error("internal_error", strerror(-rc), 1, "Call the tool again.");
	else if (rc == -EMSGSIZE)
		*failure = facade_error("invalid_arguments", "The arguments are too large to be recorded.", 0,
			"Pass large data as a file (file_transfer_open) and its handle as the argument.");
	else if (rc < 0)
		*failure = facade_storage_error(rc);
	return rc;
}

cJSON *server_resources(struct transfers *tr, const char *method, const cJSON *params, int *code,
                        const char **msg)
{
	*code = RPC_INTERNAL_ERROR;
	*msg = "resources are not available";
	if (!tr)
		return NULL;
	if (strcmp(method, "resources/list") == 0)
		return resources_list(tr, params, code, msg);
	if (strcmp(method, "resources/templates/list") == 0)
		return resources_templates(tr);
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(params, "uri");
	if (!cJSON_IsString(uri)) {
		*code = RPC_INVALID_PARAMS;
		*msg = "resources/read: params.uri must be a string";
		return NULL;
	}
	return resources_read(tr, uri->valuestring, code, msg);
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
	cJSON *res;
	int builtin = server_run_builtin(srv, ms, id, NULL, NULL, name->valuestring, args, &res);
	if (builtin == 2)
		return;
	if (builtin) {
		if (res)
			reply(ms, id, res);
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
	/* Task augmentation, for sessions that negotiated MCP's task API (else `task` is ignored). */
	const cJSON *taskp = ms->tasks_era ? cJSON_GetObjectItemCaseSensitive(params, "task") : NULL;
	int native = cJSON_IsObject(taskp);
	if (native && tool->task_support == TASK_SUPPORT_FORBIDDEN) {
		cJSON_Delete(args);
		reply_error(ms, id, RPC_METHOD_NOT_FOUND, "This tool does not support task-augmented calls (taskSupport: forbidden)");
		return;
	}
	if (!native && ms->tasks_era && tool->task_support == TASK_SUPPORT_REQUIRED) {
		cJSON_Delete(args);
		reply_error(ms, id, RPC_METHOD_NOT_FOUND, "This tool must be called as a task (taskSupport: required): add params.task");
		return;
	}
	struct task *t;
	if (server_start_task(sv, tool, args, &t, &res) < 0) {
		reply(ms, id, res);
		return;
	}
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
	if (native) {
		if (!TASK_TERMINAL(t->status)) {
			struct watch *w = calloc(1, sizeof *w);
			if (w) {
				w->ms = ms;
				memcpy(w->id, t->id, sizeof w->id);
				w->last_progress = -1;
				if (cJSON_IsString(tok) || cJSON_IsNumber(tok))
					w->token = cJSON_Duplicate(tok, 0);
				w->next = srv->watches;
				srv->watches = w;
			}
		}
		cJSON *r = cJSON_CreateObject();
		cJSON_AddItemToObject(r, "task", native_task(t));
		reply(ms, id, r);
		return;
	}
	if (tool->mode == TOOL_MODE_TASK || TASK_TERMINAL(t->status)) {
		reply(ms, id, tool->mode == TOOL_MODE_TASK ? facade_handle_result(sv, t)
		                                           : facade_final_result(sv, t));
		return;
	}
	struct pending *p = calloc(1, sizeof *p);
	if (!p) {
		reply(ms, id, facade_handle_result(sv, t));
		return;
	}
	p->kind = PEND_CALL;
	p->ms = ms;
	p->id = cJSON_Duplicate(id, 0);
	p->t = t;
	p->last_progress = -1;
	if (cJSON_IsString(tok) || cJSON_IsNumber(tok))
		p->token = cJSON_Duplicate(tok, 0);
	if (tool->mode == TOOL_MODE_AUTO)
		p->auto_timer = loop_timer_in(sv->loop, (int64_t)(tool->wait_seconds * 1000.0), on_auto_timer, p);
	p->next = srv->pending;
	srv->pending = p;
	if (p->token)
		send_progress(p, 1);
}

static struct task *task_param(struct msess *ms, const cJSON *id, const cJSON *params)
{
	const cJSON *tid = cJSON_GetObjectItemCaseSensitive(params, "taskId");
	struct task *t = cJSON_IsString(tid) ? tasks_find(ms->srv->sv->tasks, tid->valuestring) : NULL;
	if (!t)
		reply_error(ms, id, RPC_INVALID_PARAMS, cJSON_IsString(tid) ? "Unknown or expired taskId"
		                                                            : "params.taskId must be a string");
	return t;
}

static void m_tasks_get(struct msess *ms, const cJSON *id, const cJSON *params)
{
	struct task *t = task_param(ms, id, params);
	if (t && persist_task_durable(ms->srv->sv->persist, t))
		ms->srv->answer_now = 1;
	if (t)
		reply(ms, id, native_task(t));
}

int server_refuse_if_faulted(struct msess *ms, const cJSON *id)
{
	int fault = persist_fault(ms->srv->sv->persist);
	if (fault == 0)
		return 0;
	char msg[200];
	const char *name = strerrorname_np(-fault);
	snprintf(msg, sizeof msg, "storage_unavailable: the server cannot store anything durably right now (%s); "
	         "nothing was done, call again later", name ? name : strerror(-fault));
	cJSON *data = cJSON_CreateObject();
	cJSON_AddStringToObject(data, "code", "storage_unavailable");
	cJSON_AddStringToObject(data, "errno", name ? name : "unknown");
	cJSON_AddBoolToObject(data, "retryable", 1);
	ms->srv->answer_now = 1;
	server_reply_error(ms, id, RPC_INTERNAL_ERROR, msg, data);
	return 1;
}

static void m_tasks_result(struct msess *ms, const cJSON *id, const cJSON *params)
{
	struct server *srv = ms->srv;
	struct task *t = task_param(ms, id, params);
	if (!t)
		return;
	struct pending *p = calloc(1, sizeof *p);
	if (!p) {
		reply_error(ms, id, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	p->kind = PEND_RESULT;
	p->ms = ms;
	p->id = cJSON_Duplicate(id, 0);
	p->t = t;
	p->next = srv->pending;
	srv->pending = p;
	if (TASK_TERMINAL(t->status)) {
		answer_pending(srv, p, facade_final_result(srv->sv, t));
		return;
	}
	/* The client waits here for the outcome; if the job is asking something, ask it now. */
	struct watch *w = find_watch(srv, t->id);
	if (t->status == TASK_INPUT_REQUIRED && w && w->ms == ms)
		elicit(srv, w, t);
}

static void m_tasks_list(struct msess *ms, const cJSON *id, const cJSON *params)
{
	struct tasks *ts = ms->srv->sv->tasks;
	const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(params, "cursor");
	struct task *t = tasks_newest(ts);
	if (cursor) {
		struct task *c = cJSON_IsString(cursor) ? tasks_find(ts, cursor->valuestring) : NULL;
		if (!c) {
			reply_error(ms, id, RPC_INVALID_PARAMS, "tasks/list: invalid cursor");
			return;
		}
		t = c->next;
	}
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(r, "tasks");
	int n = 0;
	for (; t && n < 50; t = t->next, n++)
		cJSON_AddItemToArray(arr, native_task(t));
	if (t && t->prev)
		cJSON_AddStringToObject(r, "nextCursor", t->prev->id);
	reply(ms, id, r);
}

static void m_tasks_cancel(struct msess *ms, const cJSON *id, const cJSON *params)
{
	struct task *t = task_param(ms, id, params);
	if (!t || server_refuse_if_faulted(ms, id))
		return;
	if (TASK_TERMINAL(t->status)) {
		reply_error(ms, id, RPC_INVALID_PARAMS, "Cannot cancel a task that is already completed, failed or cancelled");
		return;
	}
	tasks_cancel(ms->srv->sv->tasks, t, "cancelled by the client (tasks/cancel)");
	reply(ms, id, native_task(t));
}

/* resources/list, resources/templates/list, resources/read: tasks' results, logs, artifacts. */
static void m_resources(struct msess *ms, const char *method, const cJSON *id, const cJSON *params)
{
	int code;
	const char *msg;
	cJSON *r = server_resources(ms->srv->sv->transfers, method, params, &code, &msg);
	if (r)
		reply(ms, id, r);
	else
		reply_error(ms, id, code, msg);
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
	if (era2026_cancelled(srv->era, ms, rid, cJSON_GetStringValue(reason)))
		return;
	for (struct pending *p = srv->pending; p; p = p->next) {
		if (p->ms != ms || !rpc_same_id(p->id, rid))
			continue;
		struct task *t = p->t;
		enum pend_kind kind = p->kind;
		/* No response goes out for a cancelled request. */
		pending_unlink(srv, p);
		/* Only a sync call's own request owns its task.  tasks/result merely reads one, and
		 * clients cancel it whenever their wait times out (the TS SDK after 60 s): ending
		 * the wait must not end the task, which only tasks/cancel does. */
		if (kind == PEND_CALL)
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
	/* A request that names its protocol version in _meta stands alone (2026-07-28): no
	 * initialize, its capabilities travel with it. */
	if (era2026_claims(m->params)) {
		if (strcmp(method, "server/discover") == 0 || strcmp(method, "tools/list") == 0 ||
		    strcmp(method, "resources/templates/list") == 0)
			ms->srv->answer_now = 1;   /* housekeeping: see below */
		era2026_request(ms->srv->era, ms, m->id, method, m->params);
		return;
	}
	/* Protocol housekeeping promises nothing: it answers at once, even while commits fail. */
	int housekeeping = strcmp(method, "ping") == 0 || strcmp(method, "initialize") == 0 ||
	                   !ms->initialized || strcmp(method, "tools/list") == 0 ||
	                   strcmp(method, "logging/setLevel") == 0 ||
	                   strcmp(method, "resources/templates/list") == 0;
	if (housekeeping)
		ms->srv->answer_now = 1;
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
	else if (strcmp(method, "resources/list") == 0 || strcmp(method, "resources/templates/list") == 0 ||
	         strcmp(method, "resources/read") == 0)
		m_resources(ms, method, m->id, m->params);
	else if (ms->tasks_era && strcmp(method, "tasks/get") == 0)
		m_tasks_get(ms, m->id, m->params);
	else if (ms->tasks_era && strcmp(method, "tasks/result") == 0)
		m_tasks_result(ms, m->id, m->params);
	else if (ms->tasks_era && strcmp(method, "tasks/list") == 0)
		m_tasks_list(ms, m->id, m->params);
	else if (ms->tasks_era && strcmp(method, "tasks/cancel") == 0)
		m_tasks_cancel(ms, m->id, m->params);
	else {
		char msg[200];
		snprintf(msg, sizeof msg, "Method not found: %.100s", method);
		ms->srv->answer_now = 1;
		reply_error(ms, m->id, RPC_METHOD_NOT_FOUND, msg);
	}
}

static void on_line(void *arg, const char *line, size_t len)
{
	struct msess *ms = arg;
	if (!line) {
		ms->srv->answer_now = 1;
		reply_error(ms, NULL, RPC_INVALID_REQUEST, "Invalid Request: message larger than 64 MiB");
		ms->srv->answer_now = 0;
		return;
	}
	struct rpc_msg m;
	rpc_parse(line, len, &m);
	switch (m.kind) {
	case RPC_INVALID:
		ms->srv->answer_now = 1;
		/* A broken notification gets no answer; everything else gets the error with the id
		 * we could recover (null when none). */
		if (!(m.err_code == RPC_INVALID_PARAMS && !m.id))
			reply_error(ms, m.id, m.err_code, m.err_msg);
		break;
	case RPC_RESPONSE:
		on_response(ms, &m);   /* answers to our elicitation requests */
		break;
	default:
		dispatch(ms, &m);
		break;
	}
	ms->srv->answer_now = 0;
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
	static const char *const support[] = { "forbidden", "optional", "required" };
	cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "execution"), "taskSupport", support[tc->task_support]);
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
	files_list_tools(srv->tools);
	srv->era = era2026_new(srv, sv);
	if (!srv->era) {
		cJSON_Delete(srv->tools);
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
	while (srv->pending)
		pending_unlink(srv, srv->pending);
	while (srv->watches)
		watch_unlink(srv, srv->watches);
	if (srv->progress_timer)
		loop_timer_cancel(srv->sv->loop, srv->progress_timer);
	era2026_free(srv->era);
	for (struct outreq *o = srv->outreqs, *n; o; o = n) {
		n = o->next;
		free(o);
	}
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
	session_set_flow_cb(ms->io, on_flow, ms);
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
