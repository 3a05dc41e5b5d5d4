/* tests/unit/test_tasks.c — task creation against a real journal: a create whose record cannot
 * be appended (larger than the journal's record limit) is refused and leaves no task behind, in
 * memory or on disk, so a replay never meets a record for a task it has not seen created; a
 * normal create is replayed; an answer that cannot be recorded is not taken.  No job runs
 * there (maxConcurrent is set to 0 after loading, so every task stays queued).  With a free
 * slot, a new task's job is not started before its create record is durable: it starts at
 * the release after the commit.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "check.h"
#include "supervisor/core/config.h"
#include "state/journal.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"
#include "runner/sandbox/sandbox.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct env {
	char dir[256], state[300];
	struct supervisor sv;
};

/* A supervisor over dir/state with one tool, its journal replayed into a fresh task table. */
static void env_open(struct env *e)
{
	char cfg[320], err[512];
	memset(&e->sv, 0, sizeof e->sv);
	snprintf(cfg, sizeof cfg, "%s/config.json", e->dir);
	const char *json = "{\"tools\":[{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\"},"
	                   "\"command\":[\"/bin/true\"]}]}";
	check_put(cfg, json, strlen(json));
	fplog_init(&e->sv.log, 2, FPLOG_CRITICAL);
	if (config_load(cfg, &e->sv.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "config: %s\n", err);
		exit(2);
	}
	e->sv.cfg->server.max_concurrent = 0;   /* nothing starts: creation alone is under test */
	e->sv.state_dir = e->state;
	e->sv.loop = loop_new();
	e->sv.tasks = e->sv.loop ? tasks_new(&e->sv) : NULL;
	if (!e->sv.tasks)
		check_die("tasks_new");
	if (persist_open(&e->sv, 0, &e->sv.persist, err, sizeof err) < 0) {
		fprintf(stderr, "persist_open: %s\n", err);
		exit(2);
	}
}

static void env_close(struct env *e)
{
	persist_close(e->sv.persist);
	tasks_free(e->sv.tasks);
	sandbox_free(e->sv.sandbox);   /* made by the first job start */
	loop_free(e->sv.loop);
	config_free(e->sv.cfg);
}

/* {"pad": n bytes of 'x'}. */
static cJSON *args_of(size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		check_die("malloc");
	memset(s, 'x', n);
	s[n] = 0;
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "pad", s);
	free(s);
	return a;
}

static void test_create(struct tally *t)
{
	struct env e;
	check_tmpdir(e.dir, sizeof e.dir, "tasks");
	snprintf(e.state, sizeof e.state, "%s/state", e.dir);
	check_mkdir(e.state);
	env_open(&e);
	const struct tool_cfg *tool = &e.sv.cfg->tools[0];

	struct task *tk = NULL;
	int rc = tasks_create(e.sv.tasks, tool, args_of(JOURNAL_MAX_RECORD + 16), &tk);
	CHECKF(t, rc == -EMSGSIZE, "a create over the record limit: %d (%s)", rc, strerror(-rc));
	CHECKF(t, tasks_count(e.sv.tasks) == 0 && !tasks_newest(e.sv.tasks), "no task in memory (%zu)",
	       tasks_count(e.sv.tasks));
	rc = tasks_create(e.sv.tasks, tool, args_of(10), &tk);
	CHECKF(t, rc == 0 && tk && tasks_count(e.sv.tasks) == 1, "a normal create: %d", rc);
	char id[33] = "";
	if (tk)
		memcpy(id, tk->id, sizeof id);
	CHECKF(t, persist_commit(e.sv.persist) == 0, "commit");
	CHECKF(t, tk && persist_task_durable(e.sv.persist, tk), "durable after the commit");
	env_close(&e);

	/* The journal replays: exactly the task that was acknowledged. */
	env_open(&e);
	struct task *back = tasks_find(e.sv.tasks, id);
	CHECKF(t, tasks_count(e.sv.tasks) == 1 && back, "replayed %zu tasks", tasks_count(e.sv.tasks));
	/* Not waiting for input: refused, nothing recorded. */
	cJSON *ans = cJSON_CreateString("yes");
	CHECKF(t, back && tasks_respond(e.sv.tasks, back, ans) == -EINVAL, "respond to a task not asking");
	cJSON_Delete(ans);
	if (back) {
		/* Asking (as replay leaves a task that asked before a restart); an answer too large
		 * to record is not taken: the question stays open and nothing was answered. */
		back->status = TASK_INPUT_REQUIRED;
		back->question_id = strdup("q1");
		cJSON *huge = args_of(JOURNAL_MAX_RECORD + 16);
		rc = tasks_respond(e.sv.tasks, back, huge);
		CHECKF(t, rc == -EMSGSIZE, "an answer over the record limit: %d", rc);
		CHECKF(t, back->status == TASK_INPUT_REQUIRED && back->question_id && !back->answers,
		       "the question is still open");
		cJSON_Delete(huge);
		ans = cJSON_CreateString("yes");
		CHECKF(t, tasks_respond(e.sv.tasks, back, ans) == 0 && back->answers && !back->question_id,
		       "a normal answer is taken");
		cJSON_Delete(ans);
		CHECKF(t, persist_commit(e.sv.persist) == 0, "commit");
	}
	env_close(&e);
	uint64_t recs = 0;
	char err[512];
	CHECKF(t, journal_fsck(e.state, 0, &recs, err, sizeof err) == 0, "fsck: %s", err);
	check_rm_rf(e.dir);
}

/* Before, tasks_create spawned the job in the same loop turn, while its create record was
 * still only appended: a crash before the commit left a job that had acted for a task no
 * replay would know. */
static void test_start_after_commit(struct tally *t)
{
	struct env e;
	check_tmpdir(e.dir, sizeof e.dir, "tasks-start");
	snprintf(e.state, sizeof e.state, "%s/state", e.dir);
	check_mkdir(e.state);
	env_open(&e);
	e.sv.cfg->server.max_concurrent = 1;
	const struct tool_cfg *tool = &e.sv.cfg->tools[0];
	struct task *tk = NULL;
	int rc = tasks_create(e.sv.tasks, tool, args_of(10), &tk);
	CHECKF(t, rc == 0 && tk, "create: %d", rc);
	CHECKF(t, tk && tk->attempt == 0 && !tk->job && tk->queued,
	       "not started before the commit (attempt %d, job %p)", tk ? tk->attempt : -1, tk ? (void *)tk->job : NULL);
	CHECKF(t, tk && tasks_queue_position(e.sv.tasks, tk) == 0, "not reported as queued: a slot is free");
	CHECKF(t, persist_commit(e.sv.persist) == 0, "commit");
	tasks_release(e.sv.tasks);
	CHECKF(t, tk && !tk->queued && (tk->attempt == 1 || TASK_TERMINAL(tk->status)),
	       "started (or failed to) at the release after the commit: attempt %d", tk ? tk->attempt : -1);
	CHECKF(t, tk && persist_task_durable(e.sv.persist, tk), "its start record is committed with it");
	env_close(&e);
	check_rm_rf(e.dir);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_create(&t);
	test_start_after_commit(&t);
	return check_done(&t);
}
