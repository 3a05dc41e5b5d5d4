/* supervisor/core/task_apply.c — see task_apply.h. */
#include "supervisor/core/task_apply.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Unformatted, because the text goes into journal records and the store carries it as is;
 * a NULL value is "no text" (0 with *out NULL), so only an allocation failure is an error. */
int task_json_text(const cJSON *v, char **out)
{
	*out = NULL;
	if (!v)
		return 0;
	*out = cJSON_PrintUnformatted(v);
	return *out ? 0 : -ENOMEM;
}

/* Field decoding shares one failure flag per record, so each setter stays a line. */
struct ap {
	struct task *t;
	const struct store_rec *r;
	int bad;     /* a JSON text did not parse */
	int oom;
};

/* A JSON text parsed; NULL for NULL or "null".  Text that does not parse sets bad.  The text
 * comes from journal bytes, so a damaged value must be reported (task_apply turns bad into
 * -EBADMSG) rather than quietly replayed as an absent one. */
static cJSON *json(struct ap *a, const char *text)
{
	if (!text)
		return NULL;
	cJSON *v = cJSON_Parse(text);
	if (!v) {
		a->bad = 1;
		return NULL;
	}
	if (cJSON_IsNull(v)) {
		cJSON_Delete(v);
		return NULL;
	}
	return v;
}

static char *dup(struct ap *a, const char *s)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		a->oom = 1;
	return d;
}

static void set_json(struct ap *a, cJSON **field, const char *text)
{
	cJSON *v = json(a, text);
	cJSON_Delete(*field);
	*field = v;
}

/* The copy is made before the old value goes: a record may borrow the task's own string. */
static void set_str(struct ap *a, char **field, const char *s)
{
	char *d = dup(a, s);
	free(*field);
	*field = d;
}

/* A progress message: an empty one means none. */
static void set_progress_msg(struct ap *a, const char *s)
{
	set_str(a, &a->t->progress_msg, s && s[0] ? s : NULL);
}

/* The new values are built before the old question is cleared, for the same reason as in
 * set_str: the record may point at the task's own strings. */
static void set_question(struct ap *a, const char *qid, const char *prompt, const char *choices)
{
	char *q = dup(a, qid), *p = dup(a, prompt);
	cJSON *c = json(a, choices);
	task_clear_question(a->t);
	a->t->question_id = q;
	a->t->question_prompt = p;
	a->t->question_choices = c;
}

/* Put an answer in front of the task's answers (the newest first). */
static void add_answer(struct ap *a, const struct store_answer *src)
{
	struct task_answer *an = calloc(1, sizeof *an);
	if (!an) {
		a->oom = 1;
		return;
	}
	an->question_id = dup(a, src->qid);
	an->response = json(a, src->response);
	/* A "null" answer is still an answer: keep it as a JSON null so the client reads back
	 * what it sent. */
	if (!an->response)
		an->response = cJSON_CreateNull();
	an->next = a->t->answers;
	a->t->answers = an;
}

/* Inline bytes are copied; a blob is named only: its bytes are read after replay (a later
 * record may supersede this one, and its blob may be gone already). */
static void set_checkpoint(struct ap *a, const struct store_checkpoint *k, int64_t seq)
{
	struct task *t = a->t;
	/* On the live path the caller may hand over its malloc'd copy (owned), which saves a
	 * second copy of a checkpoint that can be large. */
	void *copy = k->owned;
	char blob[sizeof t->checkpoint_blob] = "";
	if (k->has_data && !copy && !(copy = malloc(k->len ? k->len : 1))) {
		a->oom = 1;
		return;
	}
	if (copy && copy != k->owned)
		memcpy(copy, k->data, k->len);
	if (k->blob)
		snprintf(blob, sizeof blob, "%s", k->blob);
	free(t->checkpoint);
	t->checkpoint = copy;
	t->checkpoint_len = copy ? k->len : 0;
	memcpy(t->checkpoint_blob, blob, sizeof blob);
	t->checkpoint_seq = seq;
}

static void drop_checkpoint(struct task *t)
{
	free(t->checkpoint);
	t->checkpoint = NULL;
	t->checkpoint_len = 0;
	t->checkpoint_blob[0] = 0;
}

/* A result in a blob stays there: the task keeps its name, size and summary, and the text is
 * read when a client asks for it (a restart never loads or parses it). */
static void set_result(struct ap *a, const struct store_result *res)
{
	struct task *t = a->t;
	char blob[sizeof t->result_blob] = "";
	char *summary = res->blob ? dup(a, res->summary) : NULL;
	cJSON *value = res->blob ? NULL : json(a, res->text);
	if (res->blob)
		snprintf(blob, sizeof blob, "%s", res->blob);
	cJSON_Delete(t->result);
	t->result = value;
	free(t->result_summary);
	t->result_summary = summary;
	memcpy(t->result_blob, blob, sizeof blob);
	t->result_bytes = res->blob && res->bytes > 0 ? (uint64_t)res->bytes : 0;
	t->result_is_mcp = res->mcp != 0;
}

/* A status name this version does not know is refused, never mapped to a default: that
 * would rebuild the task in a state the journal never recorded. */
static int set_status(struct ap *a, const char *name, char *err, size_t errlen)
{
	int st = task_status_parse(name);
	if (st < 0) {
		snprintf(err, errlen, "task %s: unknown status", a->t->id);
		return -EBADMSG;
	}
	a->t->status = (enum task_status)st;
	return 0;
}

/* The identity every task starts from (CREATE, or the first fields of a snapshot).  A task
 * without a tool or arguments could never run, so the record is refused as damaged; the
 * error says -ENOMEM instead when it was only the copy that failed. */
static int apply_identity(struct ap *a, const char *tool, const char *args, int64_t created,
                          char *err, size_t errlen)
{
	struct task *t = a->t;
	set_str(a, &t->tool_name, tool);
	set_json(a, &t->args, args);
	if (!t->tool_name || !t->args) {
		snprintf(err, errlen, "task %s: record without tool or arguments", t->id);
		return a->oom ? -ENOMEM : -EBADMSG;
	}
	t->created_ms = t->updated_ms = created;
	return 0;
}

/* A whole task from a snapshot record.  Answers are stored newest first and add_answer
 * prepends, so they are applied oldest first to come out in the stored order.  The result
 * and error are only read for a terminal task: a live task has none, whatever the record
 * holds. */
static int apply_snap(struct ap *a, char *err, size_t errlen)
{
	struct task *t = a->t;
	const struct store_task *s = &a->r->u.snap;
	int rc = apply_identity(a, s->tool, s->args, s->created, err, errlen);
	if (rc == 0)
		rc = set_status(a, s->status, err, errlen);
	if (rc < 0)
		return rc;
	t->attempt = (int)s->attempt;
	t->retries_used = (int)s->retries;
	t->was_running = s->running != 0;
	t->not_before = s->not_before;
	t->updated_ms = s->updated;
	t->started_ms = s->started;
	t->finished_ms = s->finished;
	t->expires_ms = s->expires;
	set_progress_msg(a, s->msg);
	if (s->has_fraction)
		t->fraction = s->fraction;
	if (s->has_question)
		set_question(a, s->qid, s->prompt, s->choices);
	for (size_t i = s->nanswers; i-- > 0;)
		add_answer(a, &s->answers[i]);
	set_json(a, &t->sandbox, s->sandbox);
	set_json(a, &t->artifacts, s->artifacts);
	set_checkpoint(a, &s->ckpt, s->seq);
	if (TASK_TERMINAL(t->status)) {
		set_result(a, &s->result);
		set_json(a, &t->error, s->error);
	}
	return 0;
}

/* FINISH must carry a terminal status: a finish record that left its task live would mean
 * the journal is damaged, and replaying it anyway would hide that. */
static int apply_finish(struct ap *a, char *err, size_t errlen)
{
	struct task *t = a->t;
	const struct store_rec *r = a->r;
	int st = task_status_parse(r->u.finish.status);
	if (st < TASK_COMPLETED) {
		snprintf(err, errlen, "task %s: finish record with a non-terminal status", t->id);
		return -EBADMSG;
	}
	t->status = (enum task_status)st;
	set_result(a, &r->u.finish.result);
	set_json(a, &t->error, r->u.finish.error);
	set_json(a, &t->artifacts, r->u.finish.artifacts);
	t->finished_ms = t->updated_ms = r->at;
	t->expires_ms = r->u.finish.expires;
	t->was_running = 0;
	task_clear_question(t);
	/* A finished task never resumes: its checkpoint goes (the blob once this is durable). */
	drop_checkpoint(t);
	return 0;
}

/* An artifact's digest, computed after its task ended (a file transfer record, X_ARTSHA): the
 * artifacts of that name get sha256, or sha256Status when there is none ("failed" if the
 * record says nothing). */
static void apply_artsha(struct ap *a, const struct store_xfer *x)
{
	cJSON *art;
	const char *status = x->status && x->status[0] ? x->status : "failed";
	cJSON_ArrayForEach(art, a->t->artifacts) {
		const cJSON *n = cJSON_GetObjectItem(art, "name");
		if (!cJSON_IsString(n) || !x->name || strcmp(n->valuestring, x->name) != 0)
			continue;
		cJSON_DeleteItemFromObject(art, "sha256");
		cJSON_DeleteItemFromObject(art, "sha256Status");
		if (!(x->sha && x->sha[0] ? cJSON_AddStringToObject(art, "sha256", x->sha)
		                          : cJSON_AddStringToObject(art, "sha256Status", status)))
			a->oom = 1;
	}
}

/* Why one switch: each record type changes a handful of fields, and reading them together is
 * how the lifecycle is checked.  The same code runs live and in replay, so a restart rebuilds
 * exactly the state the live path had.  An unknown type fails the replay instead of being
 * skipped: a record from a newer version may change state this one cannot rebuild.  The
 * oom and bad flags are checked last, once, so a setter never needs its own error path. */
int task_apply(struct task *t, const struct store_rec *r, char *err, size_t errlen)
{
	struct ap a = { t, r, 0, 0 };
	int rc = 0;
	switch (r->type) {
	case STORE_REC_CREATE:
		rc = apply_identity(&a, r->u.create.tool, r->u.create.args, r->at, err, errlen);
		break;
	case STORE_REC_SNAP_TASK:
		rc = apply_snap(&a, err, errlen);
		break;
	case STORE_REC_START:
		t->attempt = (int)r->u.start.attempt;
		t->started_ms = t->updated_ms = r->at;
		t->was_running = 1;
		t->not_before = 0;
		set_json(&a, &t->sandbox, r->u.start.sandbox);
		break;
	case STORE_REC_PROGRESS:
		set_progress_msg(&a, r->u.progress.msg);
		if (r->u.progress.has_fraction)
			t->fraction = r->u.progress.fraction;
		t->updated_ms = r->at;
		break;
	case STORE_REC_CHECKPOINT:
		set_checkpoint(&a, &r->u.checkpoint.ckpt, r->u.checkpoint.seq);
		t->updated_ms = r->at;
		break;
	case STORE_REC_ASK:
		set_question(&a, r->u.ask.qid, r->u.ask.prompt, r->u.ask.choices);
		t->status = TASK_INPUT_REQUIRED;
		t->updated_ms = r->at;
		break;
	case STORE_REC_ANSWER:
		add_answer(&a, &r->u.answer);
		task_clear_question(t);
		if (t->status == TASK_INPUT_REQUIRED)
			t->status = TASK_WORKING;
		t->updated_ms = r->at;
		break;
	case STORE_REC_FINISH:
		rc = apply_finish(&a, err, errlen);
		break;
	case STORE_REC_RETRY:
		t->retries_used = (int)r->u.retry.retries;
		t->not_before = r->u.retry.not_before;
		set_str(&a, &t->progress_msg, r->u.retry.msg);
		t->updated_ms = r->at;
		t->was_running = 0;
		break;
	case STORE_REC_EXPIRE:
	case STORE_REC_SNAP_TOMB:
		break;
	case STORE_REC_X_ARTSHA:
		apply_artsha(&a, &r->u.xfer);
		break;
	default:
		snprintf(err, errlen, "unknown record type %u (written by a newer forkpoint?)", (unsigned)r->type);
		return -EBADMSG;
	}
	if (rc < 0)
		return rc;
	if (a.oom) {
		snprintf(err, errlen, "task %s: out of memory applying a record of type %u", t->id, (unsigned)r->type);
		return -ENOMEM;
	}
	if (a.bad) {
		snprintf(err, errlen, "task %s: a JSON value in a record of type %u does not parse", t->id,
		         (unsigned)r->type);
		return -EBADMSG;
	}
	return 0;
}
