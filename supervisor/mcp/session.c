/* supervisor/mcp/session.c — see session.h. */
#include "supervisor/mcp/session.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto/jsonrpc.h"
#include "supervisor/core/persist.h"

/* One that may depend on records not yet durable is held until the turn's commit; one that
 * cannot is released at once.  When nothing at all waits for a commit, nothing a message
 * could observe is undurable. */
void session_send(struct session *s, char *line)
{
	struct persist *p = s->sv->persist;
	int now = s->answer_now || !p || persist_pending(p) == 0;
	if (s->closed) {
		free(line);
		return;
	}
	if ((now ? transport_send_now(s->io, line) : transport_send(s->io, line)) < 0)
		fplog(&s->sv->log, FPLOG_ERROR, NULL, "out of memory queueing a message");
}

void session_reply(struct session *s, const cJSON *id, cJSON *result)
{
	if (result)
		session_send(s, rpc_result(id, result));
	else
		session_reply_error(s, id, RPC_INTERNAL_ERROR, "out of memory", NULL);
}

void session_reply_error(struct session *s, const cJSON *id, int code, const char *msg, cJSON *data)
{
	session_send(s, rpc_error(id, code, msg, data));
}

void session_notify(struct session *s, const char *method, cJSON *params)
{
	session_send(s, rpc_notification(method, params));
}

/* A closed session counts as congested: nothing unrequested is produced for it. */
int session_congested(const struct session *s)
{
	return s->closed || transport_congested(s->io);
}

/* A refusal promises nothing, so it goes at once even while commits fail. */
int session_refuse_if_faulted(struct session *s, const cJSON *id)
{
	int fault = persist_fault(s->sv->persist);
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
	s->answer_now = 1;
	session_reply_error(s, id, RPC_INTERNAL_ERROR, msg, data);
	return 1;
}
