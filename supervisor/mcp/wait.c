/* supervisor/mcp/wait.c — see wait.h. */
#include "supervisor/mcp/wait.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/core/loop.h"
#include "supervisor/mcp/views.h"

#define PROGRESS_MIN_MS 50    /* per wait: at most 20 progress notifications a second */
#define PROGRESS_STEP   1e-6  /* the least rise of a repeated progress value (printed exactly) */
#define RELATED_TASK    "io.modelcontextprotocol/related-task"

/* An elicitation/create we sent and whose answer we wait for. */
struct outreq {
	long id;
	char task[33];
	char qid[208];
	struct outreq *next;
};

/* The request id and progressToken are copied: the message they came in is freed once it has
 * been dispatched, the wait lives on. */
struct wait *wait_new(struct session *s, enum wait_kind kind, const cJSON *id, struct task *t,
                      const struct wait_req *rq, const cJSON *token_from)
{
	struct wait *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	if (id && !(w->id = cJSON_Duplicate(id, 0))) {
		free(w);
		return NULL;
	}
	w->kind = kind;
	w->s = s;
	w->t = t;
	if (rq)
		w->rq = *rq;
	w->last_progress = -1;
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(token_from, "_meta"),
	                                                    "progressToken");
	if (token_from && (cJSON_IsString(tok) || cJSON_IsNumber(tok)))
		w->token = cJSON_Duplicate(tok, 0);
	w->next = s->waits;
	s->waits = w;
	return w;
}

/* A detached wait (its session closed) is on no list. */
static void unlink_wait(struct wait *w)
{
	for (struct wait **pp = w->s ? &w->s->waits : NULL; pp && *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	w->next = NULL;
}

void wait_free(struct wait *w)
{
	if (!w)
		return;
	unlink_wait(w);
	if (w->timer && w->s)
		loop_timer_cancel(w->s->sv->loop, w->timer);
	cJSON_Delete(w->id);
	cJSON_Delete(w->token);
	free(w);
}

/* ---- progress --------------------------------------------------------------------------- */

static void progress_timer_cb(struct loop *l, void *arg)
{
	struct session *s = arg;
	(void)l;
	s->progress_timer = NULL;
	waits_flush_owed(s);
}

/* A notifications/progress: progress strictly increases across calls for the same request,
 * and without force at most one per PROGRESS_MIN_MS.  An update held back (rate limit, or a
 * client that does not read) is owed and sent later: from a timer for the rate limit, when
 * the client reads again for congestion, so the latest progress is never lost. */
void wait_progress(struct wait *w, int force)
{
	struct session *s = w->s;
	const struct task *t = w->t;
	int64_t now = loop_now();
	if (!w->token || !t)
		return;
	if (!force && now - w->last_sent < PROGRESS_MIN_MS) {
		w->progress_owed = 1;
		if (!s->progress_timer)
			s->progress_timer = loop_timer_in(s->sv->loop, PROGRESS_MIN_MS, progress_timer_cb, s);
		return;
	}
	if (session_congested(s)) {
		w->progress_owed = 1;
		return;
	}
	/* progress must strictly increase, as the client reads it.  A repeated or lower fraction
	 * (a new message only) moves it by PROGRESS_STEP: a one-ulp step would not survive printing
	 * (cJSON prints a double that equals its 15-digit form within an epsilon as that form, so
	 * 0.5 + 1 ulp goes out as 0.5).  At the total there is no room left: the message waits for
	 * the result, which supersedes it. */
	double v = t->fraction >= 0 ? t->fraction : w->last_progress < 0 ? 0 : w->last_progress;
	if (v <= w->last_progress)
		v = w->last_progress + PROGRESS_STEP;
	if (v > 1.0) {
		w->progress_owed = 0;
		return;
	}
	cJSON *params = cJSON_CreateObject();
	cJSON_AddItemToObject(params, "progressToken", cJSON_Duplicate(w->token, 0));
	cJSON_AddNumberToObject(params, "progress", v);
	cJSON_AddNumberToObject(params, "total", 1);
	if (t->progress_msg)
		cJSON_AddStringToObject(params, "message", t->progress_msg);
	session_notify(s, "notifications/progress", params);
	w->last_progress = v;
	w->last_sent = now;
	w->progress_owed = 0;
}

void waits_flush_owed(struct session *s)
{
	for (struct wait *w = s->waits; w; w = w->next)
		if (w->progress_owed)
			wait_progress(w, 1);
}

/* ---- answers ---------------------------------------------------------------------------- */

/* Initialize-based sessions get the facade's handle: a plain CallToolResult any client can
 * show, pointing the model at durable_task_get. */
cJSON *wait_handover(struct session *s, const struct wait_req *rq, struct task *t)
{
	if (rq->style)
		return rq->style->handover(s, rq, t);
	return views_handle_result(s->sv, t);
}

cJSON *wait_finish(struct session *s, const struct wait_req *rq, cJSON *r)
{
	return r && rq->style ? rq->style->finish(s, r) : r;
}

void wait_answer(struct wait *w, cJSON *result)
{
	if (w->progress_owed)
		wait_progress(w, 1);
	if (w->kind == WAIT_RESULT && result) {
		/* tasks/result answers with the original result, tagged with the task it belongs to. */
		cJSON *meta = cJSON_GetObjectItem(result, "_meta");
		if (!meta)
			meta = cJSON_AddObjectToObject(result, "_meta");
		cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, RELATED_TASK), "taskId", w->t->id);
	}
	session_reply(w->s, w->id, wait_finish(w->s, &w->rq, result));
	wait_free(w);
}

/* An auto call that is still running after waitSeconds stops waiting: the task goes on. */
static void on_timer(struct loop *l, void *arg)
{
	struct wait *w = arg;
	(void)l;
	w->timer = NULL;
	wait_answer(w, wait_handover(w->s, &w->rq, w->t));
}

void wait_set_timer(struct wait *w, int64_t ms)
{
	w->timer = loop_timer_in(w->s->sv->loop, ms, on_timer, w);
}

/* ---- questions -------------------------------------------------------------------------- */

/* The request is remembered by id (outreq) so the answer can be matched to the question it
 * answers, even when the task has asked another meanwhile. */
void wait_elicit(struct wait *w, const struct task *t, int tag)
{
	struct session *s = w->s;
	if (!s->elicitation || !t->question_id || strcmp(w->elicited, t->question_id) == 0)
		return;
	struct outreq *o = calloc(1, sizeof *o);
	if (!o)
		return;
	o->id = ++s->next_out_id;
	memcpy(o->task, t->id, sizeof o->task);
	snprintf(o->qid, sizeof o->qid, "%s", t->question_id);
	snprintf(w->elicited, sizeof w->elicited, "%s", t->question_id);
	o->next = s->outreqs;
	s->outreqs = o;

	cJSON *p = views_elicit_params(t);
	if (tag)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(p, "_meta"), RELATED_TASK),
		                        "taskId", t->id);
	cJSON *id = cJSON_CreateNumber((double)o->id);
	session_send(s, rpc_request(id, "elicitation/create", p));
	cJSON_Delete(id);
}

/* A waiting call's task asks a question.  The era decides; for an initialize-based session the
 * caller is asked (once per question) when it can answer, else the task is handed back so the
 * model can read the question and respond through durable_task_respond. */
static void call_question(struct wait *w, struct task *t)
{
	if (w->rq.style) {
		wait_answer(w, w->rq.style->question(w->s, &w->rq, t));
		return;
	}
	if (w->rq.can_elicit && t->question_id)
		wait_elicit(w, t, 0);
	else
		wait_answer(w, wait_handover(w->s, &w->rq, t));
}

/* The answer the client gave to t's question, if it carries one that fits (borrowed from
 * res): declined, cancelled, malformed or not one of the choices is none.  A free-form
 * question takes content.response, or else the whole submitted form. */
static const cJSON *elicited_answer(const struct task *t, const cJSON *res)
{
	const cJSON *action = cJSON_GetObjectItemCaseSensitive(res, "action");
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content");
	if (!cJSON_IsString(action) || strcmp(action->valuestring, "accept") != 0 || !cJSON_IsObject(content))
		return NULL;
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(content, "response");
	if (!t->question_choices)
		return cJSON_IsString(resp) ? resp : content;
	const cJSON *c;
	if (cJSON_IsString(resp))
		cJSON_ArrayForEach(c, t->question_choices)
			if (cJSON_IsString(c) && strcmp(c->valuestring, resp->valuestring) == 0)
				return resp;
	return NULL;
}

const cJSON *wait_elicited_answer(const struct task *t, const cJSON *res)
{
	return elicited_answer(t, res);
}

/* Responses are matched within the session that was asked: another connection cannot answer
 * a question it was never sent. */
void waits_on_response(struct session *s, const struct rpc_msg *m)
{
	if (!cJSON_IsNumber(m->id))
		return;
	for (struct outreq **pp = &s->outreqs; *pp; pp = &(*pp)->next) {
		struct outreq *o = *pp;
		if ((double)o->id != m->id->valuedouble)
			continue;
		*pp = o->next;
		struct task *t = tasks_find(s->sv->tasks, o->task);
		const cJSON *answer = t && t->status == TASK_INPUT_REQUIRED && t->question_id &&
			strcmp(t->question_id, o->qid) == 0 ? elicited_answer(t, m->result) : NULL;
		free(o);
		/* An answer that could not be recorded is not taken: as if declined. */
		if (answer && tasks_respond(s->sv->tasks, t, answer) == 0)
			return;
		/* Declined, cancelled, malformed or not recordable: the question stays open for
		 * durable_task_respond, and a plain call still waiting on it gets the task handle to
		 * do that with. */
		for (struct wait *w = s->waits, *next; t && w; w = next) {
			next = w->next;
			if (w->kind == WAIT_CALL && w->t == t && !w->rq.style)
				wait_answer(w, wait_handover(s, &w->rq, t));
		}
		return;
	}
}

/* ---- task events ------------------------------------------------------------------------ */

/* A followed task changed.  Status notifications are optional (clients poll tasks/get): a
 * session whose output queue is full does not get them. */
static void follow_event(struct wait *w, struct task *t, enum task_event ev)
{
	struct session *s = w->s;
	if (ev == TASK_EV_PROGRESS) {
		wait_progress(w, 0);
		return;
	}
	if (w->rq.native && s->tasks_era && s->initialized && !session_congested(s))
		session_notify(s, "notifications/tasks/status", views_task(t));
	if (w->rq.native && t->status == TASK_INPUT_REQUIRED)
		wait_elicit(w, t, 1);
	if (TASK_TERMINAL(t->status))
		wait_free(w);
}

/* A request waiting on the task: tasks/result cares only for the end; a call also carries
 * progress and may stop waiting at a question. */
static void request_event(struct wait *w, struct task *t, enum task_event ev)
{
	if (w->kind == WAIT_RESULT) {
		if (ev != TASK_EV_PROGRESS && TASK_TERMINAL(t->status))
			wait_answer(w, views_final_result(w->s->sv, t));
		return;
	}
	if (ev == TASK_EV_PROGRESS)
		wait_progress(w, 0);
	else if (TASK_TERMINAL(t->status))
		wait_answer(w, views_final_result(w->s->sv, t));
	else if (t->status == TASK_INPUT_REQUIRED)
		call_question(w, t);
}

/* Followers hear of a change before the requests waiting on it are answered: a client sees
 * the status notification, then the result. */
void waits_on_task(struct session *s, struct task *t, enum task_event ev)
{
	for (struct wait *w = s->waits, *next; w; w = next) {
		next = w->next;
		if (w->kind == WAIT_FOLLOW && w->t == t)
			follow_event(w, t, ev);
	}
	for (struct wait *w = s->waits, *next; w; w = next) {
		next = w->next;
		if ((w->kind == WAIT_CALL || w->kind == WAIT_RESULT) && w->t == t)
			request_event(w, t, ev);
	}
}

int waits_cancel_request(struct session *s, const cJSON *request_id, const char *reason)
{
	for (struct wait *w = s->waits; w; w = w->next) {
		if ((w->kind != WAIT_CALL && w->kind != WAIT_RESULT) || !rpc_same_id(w->id, request_id))
			continue;
		struct task *t = w->t;
		enum wait_kind kind = w->kind;
		/* No response goes out for a cancelled request. */
		wait_free(w);
		/* Only a sync call's own request owns its task.  tasks/result merely reads one, and
		 * clients cancel it whenever their wait times out (the TS SDK after 60 s): ending
		 * the wait must not end the task, which only tasks/cancel does. */
		if (kind == WAIT_CALL)
			tasks_cancel(s->sv->tasks, t, reason ? reason : "the client cancelled the request");
		return 1;
	}
	return 0;
}

struct wait *waits_follow(struct session *s, const struct task *t)
{
	for (struct wait *w = s->waits; w; w = w->next)
		if (w->kind == WAIT_FOLLOW && w->t == t)
			return w;
	return NULL;
}

/* Log routing asks this for every line about a task: a short walk of one session's waits. */
int waits_concern(const struct session *s, const char *task_id)
{
	for (const struct wait *w = s->waits; w; w = w->next)
		if (w->t && strcmp(w->t->id, task_id) == 0)
			return 1;
	return 0;
}

/* Dropping a wait never touches its task: a closed connection is not a cancel.  The session's
 * own timer and its unanswered elicitation requests go with it. */
void waits_drop(struct session *s)
{
	while (s->waits) {
		struct wait *w = s->waits;
		if (w->kind == WAIT_LATER) {
			/* The pool still holds it: detach; its answer is dropped when it comes. */
			s->waits = w->next;
			w->next = NULL;
			w->s = NULL;
			continue;
		}
		wait_free(w);
	}
	while (s->outreqs) {
		struct outreq *o = s->outreqs;
		s->outreqs = o->next;
		free(o);
	}
	if (s->progress_timer)
		loop_timer_cancel(s->sv->loop, s->progress_timer);
	s->progress_timer = NULL;
}

size_t waits_count(const struct session *s)
{
	size_t n = 0;
	for (const struct wait *w = s->waits; w; w = w->next)
		n++;
	return n;
}
