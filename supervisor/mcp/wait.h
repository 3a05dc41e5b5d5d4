/* supervisor/mcp/wait.h — the one waiter type: a session's interest in a task.  Every request
 * whose answer waits on a task, and every task a session follows, is a struct wait owned by
 * that session (session.h).  When the session closes its waits go (waits_drop); the tasks they
 * waited on run on.
 *
 * Kinds:
 *   WAIT_CALL    a tools/call in sync or auto mode (both protocol eras): answered with the
 *                final result, or earlier with the task handed over (auto mode's waitSeconds,
 *                a question the client cannot answer here); its progressToken gets progress.
 *   WAIT_RESULT  a tasks/result: answered with the final result when the task ends.
 *   WAIT_FOLLOW  the session created the task: it gets its logs, and for a task made through
 *                the 2025-11-25 task API (native) its progress, status notifications and
 *                questions (as elicitation requests); ends when the task does.
 *   WAIT_LATER   a built-in tool call whose answer the worker pool makes later; it outlives a
 *                closed session (detached: s == NULL) until the pool answers or drops it.
 * Notifications, logs and elicitations about a task go only to sessions with a wait on it. */
#ifndef FP_WAIT_H
#define FP_WAIT_H

#include <stdint.h>
#include <cJSON.h>

#include "proto/jsonrpc.h"
#include "supervisor/core/tasks.h"
#include "supervisor/mcp/session.h"

enum wait_kind { WAIT_CALL, WAIT_RESULT, WAIT_FOLLOW, WAIT_LATER };

struct wait_req;

/* What differs between the protocol eras in how a waiting call is answered.  NULL in a
 * wait_req stands for initialize-based sessions: a question is asked by elicitation when the
 * client can answer one (else the task handle goes back), the task is handed over as the
 * facade's handle, results go as they are, and a task-mode call hands over its task even when
 * it has already finished. */
struct wait_style {
	/* The task asks a question: what the call answers (it then stops waiting). */
	cJSON *(*question)(struct session *s, const struct wait_req *rq, struct task *t);
	/* The call answers with the task instead of its result. */
	cJSON *(*handover)(struct session *s, const struct wait_req *rq, struct task *t);
	/* Every answer of the call passes through here (consumes r; returns what to send). */
	cJSON *(*finish)(struct session *s, cJSON *r);
	int final_first;   /* a task that has already finished answers its result, whatever the mode */
};

/* What a waiting request asked for and what its client can take. */
struct wait_req {
	const struct wait_style *style;
	int native;        /* params.task on a 2025-11-25 session: answer the Task, follow it */
	int ext_tasks;     /* the request declared the 2026-07-28 tasks extension */
	int can_elicit;    /* the client can answer elicitation requests */
};

struct wait {
	enum wait_kind kind;
	struct session *s;
	struct wait_req rq;
	cJSON *id;             /* the request's id (CALL, RESULT, LATER) */
	struct task *t;        /* CALL, RESULT, FOLLOW: valid while the wait is (tasks outlive waits) */
	cJSON *token;          /* progressToken, or NULL */
	double last_progress;
	int64_t last_sent;
	int progress_owed;     /* an update was held back (rate limit, or a client that does not read) */
	struct loop_timer *timer;   /* auto mode: hand the task over after waitSeconds */
	char elicited[208];    /* question id already sent as an elicitation */
	struct wait *next;
};

/* A wait of s on t (NULL for LATER) for the request id (may be NULL); its progressToken is
 * taken from params._meta when token_from is not NULL.  NULL when out of memory. */
struct wait *wait_new(struct session *s, enum wait_kind kind, const cJSON *id, struct task *t,
                      const struct wait_req *rq, const cJSON *token_from);
/* Unlink and free. */
void wait_free(struct wait *w);
/* Answer w's request with result (consumed; NULL answers out of memory) and free w.  Progress
 * owed goes first: progress comes before the response or not at all. */
void wait_answer(struct wait *w, cJSON *result);
/* Auto mode: hand the task over after ms. */
void wait_set_timer(struct wait *w, int64_t ms);
/* A progress notification for w now (force: past the rate limit). */
void wait_progress(struct wait *w, int force);
/* The era's answers, for a call that has no wait (yet). */
cJSON *wait_handover(struct session *s, const struct wait_req *rq, struct task *t);
cJSON *wait_finish(struct session *s, const struct wait_req *rq, cJSON *r);
/* Ask s the job's question by elicitation/create, once per question (w->elicited); tag: mark
 * it as belonging to the task (native tasks). */
void wait_elicit(struct wait *w, const struct task *t, int tag);

/* The task observer's events, for the waits of s on t. */
void waits_on_task(struct session *s, struct task *t, enum task_event ev);
/* notifications/cancelled for request_id: 1 if a wait of s answered it (it is dropped; a
 * call's own task is cancelled with reason, a tasks/result leaves its task alone), else 0. */
int waits_cancel_request(struct session *s, const cJSON *request_id, const char *reason);
/* The answer to t's question that an ElicitResult carries (borrowed from res), or NULL when it
 * carries none that fits (declined, cancelled, malformed, not one of the choices).  A free-form
 * question takes content.response, or else the whole submitted form. */
const cJSON *wait_elicited_answer(const struct task *t, const cJSON *res);
/* An answer to one of our elicitation requests. */
void waits_on_response(struct session *s, const struct rpc_msg *m);
/* The session follows t (WAIT_FOLLOW), or NULL. */
struct wait *waits_follow(struct session *s, const struct task *t);
/* 1 if any wait of s concerns the task with this id. */
int waits_concern(const struct session *s, const char *task_id);
/* Send the latest progress held back for s: one notification each. */
void waits_flush_owed(struct session *s);
/* The session closes: every wait goes (LATER ones are detached), its tasks run on. */
void waits_drop(struct session *s);
size_t waits_count(const struct session *s);

#endif
