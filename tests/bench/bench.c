/* tests/bench/bench.c — `make bench`: forkpoint's costs as ratios against cost floors measured
 * in the same run on the same machine.  Absolute numbers from these noisy VMs travel badly; a
 * ratio to "one raw fdatasync" or "one plain posix_spawn" says how much forkpoint adds.
 *
 *   bench --build DIR --work DIR [--seconds S] [--rounds N] [--only NAME]... [--list]
 *
 * Each figure is one function in the table at the bottom; it prints one line per figure,
 *   name: value unit (baseline: value unit, ratio X)
 * measuring the figure and its baseline in alternating rounds.  A figure that cannot be
 * measured prints "name: FAILED (why)" and makes the exit status 1; the others still run.
 * Everything is created under the work dir, which the caller removes. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "proto/b64.h"
#include "baseline.h"
#include "state/blob.h"
#include "state/crc32c.h"
#include "jgen.h"
#include "supervisor/core/loop.h"
#include "mcpc.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"

#define MAX_ROUNDS    9
#define RPC_TIMEOUT   30000    /* ms for any single answer */
#define WINDOW        64       /* requests in flight when pipelining */

struct bench {
	char build[PATH_MAX], work[PATH_MAX];
	char bin[PATH_MAX], plain_count[PATH_MAX], sleeper[PATH_MAX];
	double seconds;            /* length of one measuring window */
	int rounds;
	char err[1024];            /* why the current figure failed */
};

/* One running supervisor with its own state dir and config. */
struct inst {
	struct mcpc *c;
	char dir[PATH_MAX], state[PATH_MAX], config[PATH_MAX], log[PATH_MAX];
};

/* ---- small helpers ------------------------------------------------------------------------- */

static int fail(struct bench *b, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct bench *b, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->err, sizeof b->err, fmt, ap);
	va_end(ap);
	return rc < 0 ? rc : -EIO;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAX_ROUNDS];
	memcpy(s, v, (size_t)n * sizeof *s);
	qsort(s, (size_t)n, sizeof *s, cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static const char *num(char *buf, size_t n, double v)
{
	if (v >= 100 || v <= -100)
		snprintf(buf, n, "%.0f", v);
	else if (v >= 10 || v <= -10)
		snprintf(buf, n, "%.1f", v);
	else
		snprintf(buf, n, "%.3g", v);
	return buf;
}

/* The one output format every figure uses. */
static void report(const char *name, double value, const char *unit, double base, const char *base_unit,
                   double ratio)
{
	char a[32], c[32], r[32];
	/* Two decimals say enough for ratios near 1; small ones keep three significant digits. */
	snprintf(r, sizeof r, ratio >= 0.1 ? "%.2f" : "%.3g", ratio);
	printf("%s: %s %s (baseline: %s %s, ratio %s)\n", name, num(a, sizeof a, value), unit,
	       num(c, sizeof c, base), base_unit, r);
	fflush(stdout);
}

/* Per-round figure and baseline values: medians of each, and the median of the paired ratios
 * (a noisy neighbour then slows both halves of a pair rather than skewing the ratio). */
static void report_rounds(const char *name, const double *v, const char *unit, const double *base,
                          const char *base_unit, int n)
{
	double r[MAX_ROUNDS];
	for (int i = 0; i < n; i++)
		r[i] = base[i] > 0 ? v[i] / base[i] : 0;
	report(name, median(v, n), unit, median(base, n), base_unit, median(r, n));
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* a/b, or -ENAMETOOLONG. */
static int join(char *out, size_t n, const char *a, const char *b)
{
	int len = snprintf(out, n, "%s/%s", a, b);
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

static int mkdir_p2(const char *a, const char *b_or_null)
{
	if (mkdir(a, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (b_or_null && mkdir(b_or_null, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* ---- fixtures ------------------------------------------------------------------------------ */

/* Two tools: `count` runs plain-count N (N = 0: the job exits at once), `hold` runs the sleeper
 * for a given time (jobs that stay running or keep others queued).  sandbox: the tools'
 * "sandbox" object as JSON text, NULL for the defaults.  file_root: the one folder the transfer
 * tools may use, NULL for none. */
static int write_config(struct bench *b, const char *path, int max_concurrent, int max_queue,
                        const char *sandbox, const char *file_root)
{
	char sb[512] = "", roots[PATH_MAX + 32] = "";
	if (sandbox && snprintf(sb, sizeof sb, ", \"sandbox\": %s", sandbox) >= (int)sizeof sb)
		return fail(b, -ENAMETOOLONG, "sandbox settings too long");
	/* The path goes into JSON unescaped: the scratch dir's name never needs escaping, and a
	 * TMPDIR that would is refused rather than quoted wrongly. */
	if (file_root && (strpbrk(file_root, "\"\\") ||
	                  snprintf(roots, sizeof roots, "\"fileRoots\": [\"%s\"],\n              ", file_root) >=
	                          (int)sizeof roots))
		return fail(b, -EINVAL, "%s cannot be written into the config as it is", file_root);
	FILE *f = fopen(path, "we");
	if (!f)
		return fail(b, -errno, "%s: %s", path, strerror(errno));
	fprintf(f,
		"{\n"
		"  \"server\": { \"name\": \"forkpoint-bench\", \"maxConcurrent\": %d, \"maxQueue\": %d,\n"
		"              %s\"cancelGraceSeconds\": 1 },\n"
		"  \"tools\": [\n"
		"    { \"name\": \"count\", \"description\": \"Prints n lines and exits.\",\n"
		"      \"inputSchema\": { \"type\": \"object\", \"properties\": {\n"
		"        \"n\": { \"type\": \"integer\", \"minimum\": 0, \"maximum\": 100000, \"default\": 0 } } },\n"
		"      \"command\": [\"%s\", \"{n}\"], \"mode\": \"task\"%s },\n"
		"    { \"name\": \"hold\", \"description\": \"Sleeps.\",\n"
		"      \"inputSchema\": { \"type\": \"object\", \"properties\": {\n"
		"        \"seconds\": { \"type\": \"number\", \"minimum\": 0, \"default\": 600 } } },\n"
		"      \"command\": [\"%s\", \"{seconds}\", \"-\"], \"mode\": \"task\"%s }\n"
		"  ]\n"
		"}\n",
		max_concurrent, max_queue, roots, b->plain_count, sb, b->sleeper, sb);
	if (fclose(f) != 0)
		return fail(b, -errno, "%s: %s", path, strerror(errno));
	return 0;
}

/* Directory, config and state of one supervisor; the state may be filled before it starts.
 * sandbox and file_root as for write_config(). */
static int inst_prepare_full(struct bench *b, struct inst *in, const char *tag, int max_concurrent,
                             int max_queue, const char *sandbox, const char *file_root)
{
	memset(in, 0, sizeof *in);
	int rc = join(in->dir, sizeof in->dir, b->work, tag);
	if (rc == 0)
		rc = join(in->state, sizeof in->state, in->dir, "state");
	if (rc == 0)
		rc = join(in->config, sizeof in->config, in->dir, "config.json");
	if (rc == 0)
		rc = join(in->log, sizeof in->log, in->dir, "stderr.log");
	if (rc == 0)
		rc = mkdir_p2(in->dir, in->state);
	if (rc < 0)
		return fail(b, rc, "%s/%s: %s", b->work, tag, strerror(-rc));
	return write_config(b, in->config, max_concurrent, max_queue, sandbox, file_root);
}

static int inst_prepare_sandbox(struct bench *b, struct inst *in, const char *tag, int max_concurrent,
                                int max_queue, const char *sandbox)
{
	return inst_prepare_full(b, in, tag, max_concurrent, max_queue, sandbox, NULL);
}

static int inst_prepare(struct bench *b, struct inst *in, const char *tag, int max_concurrent, int max_queue)
{
	return inst_prepare_full(b, in, tag, max_concurrent, max_queue, NULL, NULL);
}

static int inst_start(struct bench *b, struct inst *in)
{
	int rc = mcpc_spawn(b->bin, in->config, in->state, in->log, &in->c);
	if (rc < 0)
		return fail(b, rc, "cannot start %s: %s", b->bin, strerror(-rc));
	if ((rc = mcpc_initialize(in->c, RPC_TIMEOUT)) < 0) {
		mcpc_close(in->c, 2000);
		in->c = NULL;
		return fail(b, rc, "initialize: %s (server log: %s)", strerror(-rc), in->log);
	}
	return 0;
}

static void inst_stop(struct inst *in)
{
	if (in->c)
		mcpc_close(in->c, 10000);
	in->c = NULL;
}

/* ---- MCP helpers --------------------------------------------------------------------------- */

/* The text of a failed tool call, for the error message. */
static void describe(const cJSON *resp, char *out, size_t n)
{
	char *s = cJSON_PrintUnformatted(resp);
	snprintf(out, n, "%.300s", s ? s : "(no memory)");
	free(s);
}

/* The structuredContent of a tools/call answer, or a failure naming what came back. */
static int tool_result(struct bench *b, const cJSON *resp, const cJSON **sc)
{
	char text[400];
	*sc = mcpc_structured(resp);
	if (*sc)
		return 0;
	describe(resp, text, sizeof text);
	return fail(b, -EPROTO, "tool call failed: %s", text);
}

static int get_task_id(struct bench *b, const cJSON *resp, char id[33])
{
	const cJSON *sc;
	int rc = tool_result(b, resp, &sc);
	if (rc < 0)
		return rc;
	const cJSON *tid = cJSON_GetObjectItemCaseSensitive(sc, "taskId");
	if (!cJSON_IsString(tid) || strlen(tid->valuestring) != 32)
		return fail(b, -EPROTO, "tool call answered without a taskId");
	memcpy(id, tid->valuestring, 33);
	return 0;
}

/* One tools/call with params as JSON text, not pipelined; *resp is the whole answer. */
static int tool_call(struct bench *b, struct mcpc *c, const char *params, cJSON **resp)
{
	long want, got;
	int rc = mcpc_send_json(c, "tools/call", params, &want);
	if (rc == 0)
		rc = mcpc_next_response(c, RPC_TIMEOUT, &got, resp);
	if (rc < 0)
		return fail(b, rc, "tools/call %.60s: %s", params, strerror(-rc));
	if (got != want) {
		cJSON_Delete(*resp);
		return fail(b, -EPROTO, "answer to request %ld, expected %ld", got, want);
	}
	return 0;
}

static int create_task(struct bench *b, struct mcpc *c, const char *params, char id[33])
{
	cJSON *resp;
	int rc = tool_call(b, c, params, &resp);
	if (rc < 0)
		return rc;
	rc = get_task_id(b, resp, id);
	cJSON_Delete(resp);
	return rc;
}

static void get_params(char *buf, size_t n, const char *id)
{
	snprintf(buf, n, "{\"name\":\"durable_task_get\",\"arguments\":{\"taskId\":\"%s\"}}", id);
}

/* durable_task_get: *status (static name) and whether the job has started. */
static int task_get(struct bench *b, struct mcpc *c, const char *id, char *status, size_t n, int *started)
{
	char params[200];
	cJSON *r = NULL;
	get_params(params, sizeof params, id);
	int rc = tool_call(b, c, params, &r);
	if (rc < 0)
		return rc;
	const cJSON *sc;
	if ((rc = tool_result(b, r, &sc)) == 0) {
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(sc, "status");
		snprintf(status, n, "%s", cJSON_IsString(st) ? st->valuestring : "?");
		if (started)
			*started = cJSON_GetObjectItemCaseSensitive(sc, "startedAt") != NULL;
		if (strcmp(status, "failed") == 0) {
			char text[400];
			describe(cJSON_GetObjectItemCaseSensitive(sc, "error"), text, sizeof text);
			rc = fail(b, -EPROTO, "task %s failed: %s", id, text);
		}
	}
	cJSON_Delete(r);
	return rc;
}

/* The sandbox task `id` got (durable_task_get's "sandbox"): fail unless its profile is `want`;
 * *degraded: how many mechanisms the host could not give it. */
static int task_sandbox(struct bench *b, struct mcpc *c, const char *id, const char *want, int *degraded)
{
	char params[200];
	cJSON *r = NULL;
	get_params(params, sizeof params, id);
	int rc = tool_call(b, c, params, &r);
	if (rc < 0)
		return rc;
	const cJSON *sc;
	if ((rc = tool_result(b, r, &sc)) == 0) {
		const cJSON *sb = cJSON_GetObjectItemCaseSensitive(sc, "sandbox");
		const cJSON *prof = cJSON_GetObjectItemCaseSensitive(sb, "profile");
		if (!cJSON_IsString(prof) || strcmp(prof->valuestring, want) != 0) {
			char text[400];
			describe(sb, text, sizeof text);
			rc = fail(b, -EPROTO, "task %s ran with sandbox %s, not profile %s", id, text, want);
		} else {
			*degraded = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sb, "degraded"));
		}
	}
	cJSON_Delete(r);
	return rc;
}

/* Tasks listed with the given status on the first page (at most 50), and the first one's id. */
static int list_count(struct bench *b, struct mcpc *c, const char *status, int *count, char first[33])
{
	char params[200];
	cJSON *r = NULL;
	snprintf(params, sizeof params, "{\"name\":\"durable_task_list\",\"arguments\":{\"status\":\"%s\"}}", status);
	int rc = tool_call(b, c, params, &r);
	if (rc < 0)
		return rc;
	const cJSON *sc;
	if ((rc = tool_result(b, r, &sc)) == 0) {
		const cJSON *tasks = cJSON_GetObjectItemCaseSensitive(sc, "tasks");
		*count = cJSON_GetArraySize(tasks);
		if (first && *count > 0) {
			const cJSON *tid = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tasks, 0), "taskId");
			snprintf(first, 33, "%s", cJSON_IsString(tid) ? tid->valuestring : "");
		}
	}
	cJSON_Delete(r);
	return rc;
}

/* Wait until no task is working; then fail if any failed (jobs that cannot run here would
 * make every figure meaningless, so say so rather than print numbers). */
static int wait_idle(struct bench *b, struct mcpc *c, int timeout_ms, int poll_ms)
{
	double deadline = base_now() + timeout_ms / 1000.0;
	int n = 0, rc;
	char id[33];
	for (;;) {
		if ((rc = list_count(b, c, "working", &n, NULL)) < 0)
			return rc;
		if (n == 0)
			break;
		if (base_now() > deadline)
			return fail(b, -ETIMEDOUT, "tasks still working after %d s", timeout_ms / 1000);
		sleep_ms(poll_ms);
	}
	if ((rc = list_count(b, c, "failed", &n, id)) < 0)
		return rc;
	if (n > 0) {
		char st[32];
		rc = task_get(b, c, id, st, sizeof st, NULL);
		return rc < 0 ? rc : fail(b, -EPROTO, "task %s failed", id);
	}
	return 0;
}

/* Create `total` tasks with up to `window` requests in flight.  With total = 0 it runs for
 * `seconds` instead.  *done: acknowledgements received; *secs: time taken. */
static int create_pipelined(struct bench *b, struct mcpc *c, const char *params, unsigned total, double seconds,
                            unsigned window, unsigned *done, double *secs)
{
	unsigned sent = 0, got = 0;
	int rc = 0;
	double t0 = base_now(), t = t0;
	for (;;) {
		int more = total ? sent < total : t - t0 < seconds;
		while (more && sent - got < window) {
			if ((rc = mcpc_send_json(c, "tools/call", params, NULL)) < 0)
				return fail(b, rc, "tools/call: %s", strerror(-rc));
			sent++;
			more = total ? sent < total : 1;
		}
		if (got == sent)
			break;
		long id;
		cJSON *resp;
		if ((rc = mcpc_next_response(c, RPC_TIMEOUT, &id, &resp)) < 0)
			return fail(b, rc, "tools/call answer: %s", strerror(-rc));
		char tid[33];
		rc = get_task_id(b, resp, tid);
		cJSON_Delete(resp);
		if (rc < 0)
			return rc;
		got++;
		t = base_now();
	}
	*done = got;
	*secs = base_now() - t0;
	return 0;
}

/* Sequential calls of one prepared request for `seconds`; *rate: answers per second. */
static int call_rate(struct bench *b, struct mcpc *c, const char *method, const char *params, double seconds,
                     double *rate)
{
	unsigned n = 0;
	double t0 = base_now(), t = t0;
	do {
		long want, got;
		cJSON *resp;
		int rc = mcpc_send_json(c, method, params, &want);
		if (rc == 0)
			rc = mcpc_next_response(c, RPC_TIMEOUT, &got, &resp);
		if (rc < 0)
			return fail(b, rc, "%s: %s", method, strerror(-rc));
		int ok = got == want && cJSON_GetObjectItemCaseSensitive(resp, "result") &&
		         !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(resp, "result"),
		                                                        "isError"));
		if (!ok) {
			char text[400];
			describe(resp, text, sizeof text);
			cJSON_Delete(resp);
			return fail(b, -EPROTO, "%s answered: %s", method, text);
		}
		cJSON_Delete(resp);
		n++;
		t = base_now();
	} while (t - t0 < seconds);
	*rate = n / (t - t0);
	return 0;
}

static const char count_params[] = "{\"name\":\"count\",\"arguments\":{\"n\":0}}";

/* ---- 1. create + get round trips -------------------------------------------------------- */

static int fig_create_get(struct bench *b)
{
	struct inst in;
	double v[MAX_ROUNDS], base[MAX_ROUNDS];
	int rc = inst_prepare(b, &in, "create-get", 4, 100000);
	if (rc == 0)
		rc = inst_start(b, &in);
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		if ((rc = wait_idle(b, in.c, 60000, 20)) < 0)
			break;
		if ((rc = base_append_rate(in.state, 256, 1, b->seconds, &base[r])) < 0) {
			fail(b, rc, "append baseline: %s", strerror(-rc));
			break;
		}
		unsigned n = 0;
		double t0 = base_now(), t = t0;
		do {
			char id[33], st[32];
			if ((rc = create_task(b, in.c, count_params, id)) < 0)
				break;
			if ((rc = task_get(b, in.c, id, st, sizeof st, NULL)) < 0)
				break;
			n++;
			t = base_now();
		} while (t - t0 < b->seconds);
		if (rc < 0)
			break;
		v[r] = n / (t - t0);
	}
	if (rc == 0)
		rc = wait_idle(b, in.c, 60000, 20);
	if (rc == 0)
		report_rounds("facade create+get round trips", v, "/s", base, "append+fdatasync/s", b->rounds);
	inst_stop(&in);
	return rc;
}

/* ---- 2. durable_task_get on a finished task ----------------------------------------------- */

static int fig_get(struct bench *b)
{
	struct inst in;
	char id[33], params[200], st[32] = "";
	double v[MAX_ROUNDS], base[MAX_ROUNDS];
	int rc = inst_prepare(b, &in, "get", 4, 1000);
	if (rc == 0)
		rc = inst_start(b, &in);
	if (rc == 0)
		rc = create_task(b, in.c, count_params, id);
	for (double deadline = base_now() + 30; rc == 0 && strcmp(st, "completed") != 0; sleep_ms(10)) {
		if ((rc = task_get(b, in.c, id, st, sizeof st, NULL)) == 0 && base_now() > deadline)
			rc = fail(b, -ETIMEDOUT, "task %s still %s after 30 s", id, st);
	}
	get_params(params, sizeof params, id);
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		if ((rc = call_rate(b, in.c, "ping", NULL, b->seconds, &base[r])) == 0)
			rc = call_rate(b, in.c, "tools/call", params, b->seconds, &v[r]);
	}
	if (rc == 0)
		report_rounds("durable_task_get calls", v, "/s", base, "ping round trips/s", b->rounds);
	inst_stop(&in);
	return rc;
}

/* ---- 3. tasks started and finished, per sandbox profile ------------------------------------ */

#define THROUGHPUT_TASKS 300

/* 300 tasks of plain-count 0 created (64 requests in flight), 4 jobs at a time, until all
 * have completed; against the same program run by posix_spawn, 4 at a time.  profile: the
 * tools' sandbox profile.  A profile that cannot run the program (a job killed by its
 * filter) fails the figure with the task's error: that is a finding, not noise. */
static int throughput_figure(struct bench *b, const char *profile)
{
	struct inst in;
	double v[MAX_ROUNDS], base[MAX_ROUNDS];
	char *argv[] = { b->plain_count, (char *)"0", NULL };
	char tag[64], sandbox[64], id[33];
	int n = 0, degraded = 0;
	snprintf(tag, sizeof tag, "throughput-%s", profile);
	snprintf(sandbox, sizeof sandbox, "{\"profile\": \"%s\"}", profile);
	int rc = inst_prepare_sandbox(b, &in, tag, 4, 100000, sandbox);
	if (rc == 0)
		rc = inst_start(b, &in);
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		if ((rc = base_spawn_rate(argv, THROUGHPUT_TASKS, 4, &base[r])) < 0) {
			fail(b, rc, "spawn baseline: %s", strerror(-rc));
			break;
		}
		unsigned done;
		double secs, t0 = base_now();
		if ((rc = create_pipelined(b, in.c, count_params, THROUGHPUT_TASKS, 0, WINDOW, &done, &secs)) < 0 ||
		    (rc = wait_idle(b, in.c, 120000, 10)) < 0)
			break;
		v[r] = THROUGHPUT_TASKS / (base_now() - t0);
	}
	/* The figure is only about this profile if the jobs really got it. */
	if (rc == 0 && (rc = list_count(b, in.c, "completed", &n, id)) == 0 && n == 0)
		rc = fail(b, -EPROTO, "no completed task to check the sandbox of");
	if (rc == 0)
		rc = task_sandbox(b, in.c, id, profile, &degraded);
	if (rc == 0) {
		char name[160];
		snprintf(name, sizeof name, "tasks started and finished, profile %s%s (300 x plain-count 0, 4 at a time)",
		         profile, degraded && strcmp(profile, "none") != 0 ? " (degraded on this host)" : "");
		report_rounds(name, v, "tasks/s", base, "posix_spawn+waitpid/s", b->rounds);
	}
	inst_stop(&in);
	return rc;
}

static int fig_throughput_none(struct bench *b)
{
	return throughput_figure(b, "none");
}

static int fig_throughput_default(struct bench *b)
{
	return throughput_figure(b, "default");
}

static int fig_throughput_strict(struct bench *b)
{
	return throughput_figure(b, "strict");
}

/* ---- 4. durable create acknowledgements ------------------------------------------------------- */

/* One round in a fresh supervisor whose only slot is taken by a sleeping job, so every task
 * created stays queued and the figure is the cost of accepting and journaling a task, not of
 * running it.  A fresh state dir per round keeps the rounds alike (queue length, journal size).
 * The baseline runs in the same state dir just before. */
static int acks_round(struct bench *b, const char *tag, unsigned window, double *base, double *rate,
                      unsigned *queued)
{
	struct inst in;
	char blocker[33], st[32];
	int started = 0;
	int rc = inst_prepare(b, &in, tag, 1, 1000000);
	if (rc == 0)
		rc = inst_start(b, &in);
	if (rc == 0)
		rc = create_task(b, in.c, "{\"name\":\"hold\",\"arguments\":{\"seconds\":600}}", blocker);
	for (double deadline = base_now() + 30; rc == 0 && !started; sleep_ms(10)) {
		if ((rc = task_get(b, in.c, blocker, st, sizeof st, &started)) == 0 && base_now() > deadline)
			rc = fail(b, -ETIMEDOUT, "the blocking job did not start within 30 s");
	}
	if (rc == 0 && (rc = base_append_rate(in.state, 256, window, b->seconds, base)) < 0)
		fail(b, rc, "append baseline: %s", strerror(-rc));
	double secs;
	if (rc == 0 && (rc = create_pipelined(b, in.c, count_params, 0, b->seconds, window, queued, &secs)) == 0)
		*rate = *queued / secs;
	inst_stop(&in);
	return rc;
}

static int fig_acks(struct bench *b)
{
	double seq[MAX_ROUNDS], seq_base[MAX_ROUNDS], pipe[MAX_ROUNDS], pipe_base[MAX_ROUNDS];
	unsigned qs[MAX_ROUNDS], qp[MAX_ROUNDS];
	int rc = 0;
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		char tag[32];
		snprintf(tag, sizeof tag, "acks-seq-%d", r);
		if ((rc = acks_round(b, tag, 1, &seq_base[r], &seq[r], &qs[r])) < 0)
			break;
		snprintf(tag, sizeof tag, "acks-pipe-%d", r);
		rc = acks_round(b, tag, WINDOW, &pipe_base[r], &pipe[r], &qp[r]);
	}
	if (rc == 0) {
		char name[128];
		unsigned ms = 0, mp = 0;
		for (int r = 0; r < b->rounds; r++) {
			ms = qs[r] > ms ? qs[r] : ms;
			mp = qp[r] > mp ? qp[r] : mp;
		}
		snprintf(name, sizeof name, "durable create acks, sequential (queue grows to %u)", ms);
		report_rounds(name, seq, "/s", seq_base, "append+fdatasync/s", b->rounds);
		snprintf(name, sizeof name, "durable create acks, 64 in flight (queue grows to %u)", mp);
		report_rounds(name, pipe, "/s", pipe_base, "appends/s at 64 per fdatasync", b->rounds);
	}
	return rc;
}

/* ---- 5. journal replay -------------------------------------------------------------------------- */

#define REPLAY_TASKS    10000
#define REPLAY_RECORDS  1000000

/* persist_open() on a bare supervisor context: exactly the replay `forkpoint mcp` does at
 * start, without a server or jobs. */
static int replay_once(struct bench *b, const char *state, double *secs, uint64_t *records, size_t *tasks)
{
	struct supervisor sv;
	struct persist *p = NULL;
	char err[512];
	int rc = 0;
	memset(&sv, 0, sizeof sv);
	fplog_init(&sv.log, 2, FPLOG_WARNING);
	sv.state_dir = (char *)state;
	sv.loop = loop_new();
	sv.tasks = sv.loop ? tasks_new(&sv) : NULL;
	if (!sv.tasks) {
		rc = fail(b, -ENOMEM, "out of memory");
		goto out;
	}
	double t0 = base_now();
	rc = persist_open(&sv, 0, &p, err, sizeof err);
	*secs = base_now() - t0;
	if (rc < 0) {
		fail(b, rc, "persist_open: %s", err);
		goto out;
	}
	*records = persist_records_replayed(p);
	*tasks = tasks_count(sv.tasks);
out:
	persist_close(p);
	tasks_free(sv.tasks);
	loop_free(sv.loop);
	return rc;
}

static int fig_replay(struct bench *b)
{
	char dir[PATH_MAX], state[PATH_MAX], err[512];
	double v[MAX_ROUNDS], base[MAX_ROUNDS];
	int rc = join(dir, sizeof dir, b->work, "replay");
	if (rc == 0)
		rc = join(state, sizeof state, dir, "state");
	if (rc == 0)
		rc = mkdir_p2(dir, state);
	if (rc < 0)
		return fail(b, rc, "%s: %s", state, strerror(-rc));
	double t0 = base_now();
	if ((rc = jgen_progress_history(state, "count", REPLAY_TASKS, REPLAY_RECORDS, err, sizeof err)) < 0)
		return fail(b, rc, "generating the journal: %s", err);
	double gen = base_now() - t0;
	uint64_t bytes = 0;
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		uint64_t recs = 0, replayed = 0;
		size_t tasks = 0;
		double secs;
		if ((rc = base_scan_journal(state, &recs, &bytes, &secs)) < 0) {
			fail(b, rc, "scanning the journal: %s", strerror(-rc));
			break;
		}
		if (recs != REPLAY_RECORDS) {
			rc = fail(b, -EBADMSG, "the raw scan saw %llu records, not %u", (unsigned long long)recs,
			          REPLAY_RECORDS);
			break;
		}
		base[r] = recs / secs;
		if ((rc = replay_once(b, state, &secs, &replayed, &tasks)) < 0)
			break;
		if (replayed < REPLAY_RECORDS || tasks != REPLAY_TASKS) {
			rc = fail(b, -EBADMSG, "replay saw %llu records and %zu tasks", (unsigned long long)replayed, tasks);
			break;
		}
		v[r] = replayed / secs;
	}
	if (rc == 0) {
		char name[160];
		snprintf(name, sizeof name, "journal replay (1 M records, %.0f MB, written in %.1f s)", bytes / 1e6, gen);
		report_rounds(name, v, "records/s", base, "records/s by read()+crc32c", b->rounds);
	}
	return rc;
}

/* ---- 6. restart to first answer --------------------------------------------------------------- */

#define RESTART_FINISHED 5000
#define RESTART_QUEUED   5000

/* Spawn → initialize answered, in seconds. */
static int first_answer(struct bench *b, struct inst *in, double *secs)
{
	double t0 = base_now();
	int rc = inst_start(b, in);
	*secs = base_now() - t0;
	return rc;
}

static int fig_restart(struct bench *b)
{
	struct inst full, empty;
	char err[512];
	double v[MAX_ROUNDS], base[MAX_ROUNDS];
	int rc = inst_prepare(b, &full, "restart", 4, 100000);
	if (rc == 0)
		rc = inst_prepare(b, &empty, "restart-empty", 4, 100000);
	if (rc == 0 && (rc = jgen_restart_state(full.state, "count", RESTART_FINISHED, "hold", "{\"seconds\":600}",
	                                        RESTART_QUEUED, err, sizeof err)) < 0)
		return fail(b, rc, "generating the journal: %s", err);
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		if ((rc = first_answer(b, &empty, &base[r])) < 0)
			break;
		inst_stop(&empty);
		if ((rc = first_answer(b, &full, &v[r])) < 0)
			break;
		if (r == 0) {
			/* The history must really be there: the first task (queued) and the last
			 * (finished), as the generator laid them out. */
			char id[33], st[32];
			jgen_task_id(1000000, id);
			if ((rc = task_get(b, full.c, id, st, sizeof st, NULL)) == 0 && strcmp(st, "working") != 0)
				rc = fail(b, -EBADMSG, "restored task %s is %s, not working", id, st);
			jgen_task_id(1000000 + RESTART_FINISHED + RESTART_QUEUED - 1, id);
			if (rc == 0 && (rc = task_get(b, full.c, id, st, sizeof st, NULL)) == 0 &&
			    strcmp(st, "completed") != 0)
				rc = fail(b, -EBADMSG, "restored task %s is %s, not completed", id, st);
		}
		inst_stop(&full);
		v[r] *= 1000;
		base[r] *= 1000;
	}
	inst_stop(&full);
	inst_stop(&empty);
	if (rc == 0)
		report_rounds("restart to first answer, 10,000 tasks (5,000 finished, 5,000 queued)", v, "ms", base,
		              "ms with an empty state dir", b->rounds);
	return rc;
}

/* ---- 7. memory ---------------------------------------------------------------------------------- */

#define MEM_FINISHED 1000
#define MEM_RUNNING  50

static const char hold_params[] = "{\"name\":\"hold\",\"arguments\":{\"seconds\":600}}";

static int fig_memory(struct bench *b)
{
	struct inst in;
	long idle = 0, after = 0;
	int rc = inst_prepare(b, &in, "memory", 4, 100000);
	if (rc == 0)
		rc = inst_start(b, &in);
	if (rc == 0) {
		sleep_ms(300);
		rc = mcpc_rss_kb(in.c, &idle);
	}
	unsigned done;
	double secs;
	if (rc == 0 && (rc = create_pipelined(b, in.c, count_params, MEM_FINISHED, 0, WINDOW, &done, &secs)) == 0 &&
	    (rc = wait_idle(b, in.c, 180000, 50)) == 0) {
		sleep_ms(300);
		rc = mcpc_rss_kb(in.c, &after);
	}
	if (rc < 0 && !b->err[0])
		fail(b, rc, "%s", strerror(-rc));
	if (rc == 0)
		report("supervisor RSS with 1,000 finished tasks", after / 1024.0, "MiB", idle / 1024.0, "MiB idle",
		       (double)after / (double)idle);
	inst_stop(&in);
	return rc;
}

/* Wait until every task in ids has started its job (none still queued or starting). */
static int wait_started(struct bench *b, struct mcpc *c, char (*ids)[33], int n, int timeout_ms)
{
	double deadline = base_now() + timeout_ms / 1000.0;
	for (int i = 0; i < n;) {
		char st[32];
		int started = 0;
		int rc = task_get(b, c, ids[i], st, sizeof st, &started);
		if (rc < 0)
			return rc;
		if (strcmp(st, "working") != 0)
			return fail(b, -EPROTO, "task %s is %s, not running", ids[i], st);
		if (started) {
			i++;
			continue;
		}
		if (base_now() > deadline)
			return fail(b, -ETIMEDOUT, "%d of %d jobs running after %d s", i, n, timeout_ms / 1000);
		sleep_ms(20);
	}
	return 0;
}

/* One round in a fresh supervisor (so the allocator has not kept memory from an earlier
 * round): one task run to completion first, so one-off costs of the first job are paid, then
 * the supervisor's VmRSS with no job running and with MEM_RUNNING sandboxed sleepers running.
 * *init_kb: the private memory of each job's sandbox init (the supervisor's children), per job. */
static int memory_running_round(struct bench *b, int round, long *idle, long *running, double *init_kb,
                                int *degraded)
{
	struct inst in;
	char tag[32], id[33], st[32] = "";
	char (*ids)[33] = calloc(MEM_RUNNING, sizeof *ids);
	pid_t kids[MEM_RUNNING + 1];
	size_t nkids = 0;
	if (!ids)
		return fail(b, -ENOMEM, "out of memory");
	snprintf(tag, sizeof tag, "memory-running-%d", round);
	int rc = inst_prepare_sandbox(b, &in, tag, MEM_RUNNING + 14, 1000, "{\"profile\": \"default\"}");
	if (rc == 0)
		rc = inst_start(b, &in);
	if (rc == 0)
		rc = create_task(b, in.c, count_params, id);
	for (double deadline = base_now() + 30; rc == 0 && strcmp(st, "completed") != 0; sleep_ms(10)) {
		if ((rc = task_get(b, in.c, id, st, sizeof st, NULL)) == 0 && base_now() > deadline)
			rc = fail(b, -ETIMEDOUT, "task %s still %s after 30 s", id, st);
	}
	if (rc == 0) {
		sleep_ms(300);
		if ((rc = mcpc_rss_kb(in.c, idle)) < 0)
			fail(b, rc, "VmRSS: %s", strerror(-rc));
	}
	for (int i = 0; rc == 0 && i < MEM_RUNNING; i++)
		rc = create_task(b, in.c, hold_params, ids[i]);
	if (rc == 0)
		rc = wait_started(b, in.c, ids, MEM_RUNNING, 60000);
	if (rc == 0)
		rc = task_sandbox(b, in.c, ids[0], "default", degraded);
	if (rc == 0) {
		sleep_ms(500);
		if ((rc = mcpc_rss_kb(in.c, running)) < 0)
			fail(b, rc, "VmRSS: %s", strerror(-rc));
	}
	/* Each running job hangs off one child of the supervisor: its sandbox's init. */
	if (rc == 0 && (rc = base_children(mcpc_pid(in.c), kids, MEM_RUNNING + 1, &nkids)) < 0)
		fail(b, rc, "listing the supervisor's children: %s", strerror(-rc));
	if (rc == 0 && nkids != MEM_RUNNING)
		rc = fail(b, -EPROTO, "the supervisor has %zu children with %d jobs running", nkids, MEM_RUNNING);
	long sum = 0;
	for (size_t i = 0; rc == 0 && i < nkids; i++) {
		long kb;
		if ((rc = base_private_kb(kids[i], &kb)) < 0)
			fail(b, rc, "private memory of %ld: %s", (long)kids[i], strerror(-rc));
		sum += kb;
	}
	if (rc == 0)
		*init_kb = (double)sum / (double)nkids;
	inst_stop(&in);
	free(ids);
	return rc;
}

static int fig_memory_running(struct bench *b)
{
	double per[MAX_ROUNDS], idle[MAX_ROUNDS], init[MAX_ROUNDS], plain[MAX_ROUNDS];
	char *argv[] = { b->sleeper, (char *)"600", (char *)"-", NULL };
	int rc = 0, degraded = 0;
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		long i0 = 0, i1 = 0, kb = 0;
		if ((rc = base_spawned_private_kb(argv, 500, &kb)) < 0) {
			fail(b, rc, "plain sleeper baseline: %s", strerror(-rc));
			break;
		}
		plain[r] = (double)kb;
		if ((rc = memory_running_round(b, r, &i0, &i1, &init[r], &degraded)) < 0)
			break;
		idle[r] = (double)i0;
		per[r] = (double)(i1 - i0) / MEM_RUNNING;
	}
	if (rc == 0) {
		char name[160];
		snprintf(name, sizeof name, "supervisor RSS per running job, profile default%s (%d sleepers)",
		         degraded ? " (degraded on this host)" : "", MEM_RUNNING);
		report_rounds(name, per, "KiB", idle, "KiB with none running", b->rounds);
		report_rounds("sandbox init per running job, private memory", init, "KiB", plain, "KiB private of the "
		              "job program run by posix_spawn", b->rounds);
	}
	return rc;
}

/* ---- 8. file transfer ----------------------------------------------------------------------------- */

#define XFER_BYTES  (64u << 20)
#define XFER_CHUNK  (256u << 10)
#define XFER_CHUNKS (XFER_BYTES / XFER_CHUNK)
#define MIB         (1024.0 * 1024.0)

/* The file every round moves: its bytes, its chunks as base64 (what an upload sends, encoded
 * before the clock starts so the client's own encoding is not measured), its sha256, and a
 * buffer for one write request. */
struct xfer_data {
	unsigned char *bytes;
	char *texts[XFER_CHUNKS];
	size_t lens[XFER_CHUNKS];
	char sha[65];
	char *line;
	size_t line_cap;
};

static void xfer_data_free(struct xfer_data *d)
{
	free(d->bytes);
	for (size_t i = 0; i < XFER_CHUNKS; i++)
		free(d->texts[i]);
	free(d->line);
}

static int xfer_data_init(struct bench *b, struct xfer_data *d)
{
	memset(d, 0, sizeof *d);
	if (!(d->bytes = malloc(XFER_BYTES)))
		return fail(b, -ENOMEM, "out of memory");
	/* Pseudo-random bytes (xorshift64): nothing on the way can shortcut repeated content. */
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < XFER_BYTES; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(d->bytes + i, &x, 8);
	}
	blob_sha256_hex(d->bytes, XFER_BYTES, d->sha);
	for (size_t i = 0; i < XFER_CHUNKS; i++) {
		if (!(d->texts[i] = malloc(B64_ENCODED_SIZE(XFER_CHUNK))))
			return fail(b, -ENOMEM, "out of memory");
		d->lens[i] = b64_encode(d->bytes + i * XFER_CHUNK, XFER_CHUNK, d->texts[i]);
	}
	d->line_cap = B64_ENCODED_SIZE(XFER_CHUNK) + 256;
	if (!(d->line = malloc(d->line_cap)))
		return fail(b, -ENOMEM, "out of memory");
	return 0;
}

/* The structuredContent string `key` of a tool answer, or "" (never NULL). */
static const char *sc_string(const cJSON *sc, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(sc, key);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static double sc_number(const cJSON *sc, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(sc, key);
	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* file_transfer_open for `name` (upload with size and sha256, or download); *handle. */
static int xfer_open(struct bench *b, struct mcpc *c, const struct xfer_data *d, const char *name, int upload,
                     char handle[33])
{
	char params[512];
	cJSON *resp = NULL;
	const cJSON *sc;
	if (upload)
		snprintf(params, sizeof params, "{\"name\":\"file_transfer_open\",\"arguments\":{\"direction\":"
		         "\"upload\",\"path\":\"%s\",\"size\":%u,\"sha256\":\"%s\"}}", name, XFER_BYTES, d->sha);
	else
		snprintf(params, sizeof params, "{\"name\":\"file_transfer_open\",\"arguments\":{\"direction\":"
		         "\"download\",\"path\":\"%s\"}}", name);
	int rc = tool_call(b, c, params, &resp);
	if (rc == 0 && (rc = tool_result(b, resp, &sc)) == 0) {
		if (strlen(sc_string(sc, "handle")) != 32)
			rc = fail(b, -EPROTO, "file_transfer_open answered without a handle");
		else if (!upload && (sc_number(sc, "size") != XFER_BYTES || strcmp(sc_string(sc, "sha256"), d->sha)))
			rc = fail(b, -EBADMSG, "download of %s: size %.0f, sha256 %s; uploaded %u bytes, sha256 %s", name,
			          sc_number(sc, "size"), sc_string(sc, "sha256"), XFER_BYTES, d->sha);
		else
			memcpy(handle, sc_string(sc, "handle"), 33);
	}
	cJSON_Delete(resp);
	return rc;
}

/* open → XFER_CHUNKS writes → commit, one call at a time as a client without pipelining
 * does; *secs from the open to the commit's answer. */
static int upload_once(struct bench *b, struct mcpc *c, struct xfer_data *d, const char *name, double *secs)
{
	char handle[33] = "", params[200];
	cJSON *resp = NULL;
	const cJSON *sc;
	double t0 = base_now();
	int rc = xfer_open(b, c, d, name, 1, handle);
	for (size_t i = 0; rc == 0 && i < XFER_CHUNKS; i++) {
		size_t off = i * XFER_CHUNK;
		snprintf(d->line, d->line_cap, "{\"name\":\"file_transfer_write\",\"arguments\":{\"handle\":\"%s\","
		         "\"offset\":%zu,\"data\":\"%s\"}}", handle, off, d->texts[i]);
		if ((rc = tool_call(b, c, d->line, &resp)) < 0)
			break;
		if ((rc = tool_result(b, resp, &sc)) == 0 && sc_number(sc, "nextOffset") != (double)(off + XFER_CHUNK))
			rc = fail(b, -EPROTO, "write at %zu: nextOffset %.0f", off, sc_number(sc, "nextOffset"));
		cJSON_Delete(resp);
	}
	if (rc == 0) {
		snprintf(params, sizeof params, "{\"name\":\"file_transfer_commit\",\"arguments\":{\"handle\":\"%s\"}}",
		         handle);
		if ((rc = tool_call(b, c, params, &resp)) == 0) {
			if ((rc = tool_result(b, resp, &sc)) == 0 &&
			    (strcmp(sc_string(sc, "status"), "completed") || strcmp(sc_string(sc, "sha256"), d->sha)))
				rc = fail(b, -EBADMSG, "commit answered status %s, sha256 %s", sc_string(sc, "status"),
				          sc_string(sc, "sha256"));
			cJSON_Delete(resp);
		}
	}
	*secs = base_now() - t0;
	return rc;
}

/* open → reads of the default 256 KiB until eof; *secs from the open to the last answer.  The
 * chunks' texts are kept and checked (decoded, compared, hashed) after the clock stops: a
 * client's own decoding is not the server's cost. */
static int download_once(struct bench *b, struct mcpc *c, struct xfer_data *d, const char *name, double *secs)
{
	char handle[33] = "", params[200];
	cJSON *chunks[XFER_CHUNKS + 1];
	size_t n = 0, off = 0;
	int eof = 0;
	double t0 = base_now();
	int rc = xfer_open(b, c, d, name, 0, handle);
	snprintf(params, sizeof params, "{\"name\":\"file_transfer_read\",\"arguments\":{\"handle\":\"%s\"}}",
	         handle);
	while (rc == 0 && !eof) {
		cJSON *resp = NULL;
		const cJSON *sc;
		if (n > XFER_CHUNKS) {
			rc = fail(b, -EPROTO, "no eof after %zu reads", n);
			break;
		}
		if ((rc = tool_call(b, c, params, &resp)) < 0)
			break;
		if ((rc = tool_result(b, resp, &sc)) == 0) {
			eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sc, "eof"));
			chunks[n] = cJSON_DetachItemFromObjectCaseSensitive((cJSON *)sc, "data");
			if (!cJSON_IsString(chunks[n])) {
				cJSON_Delete(chunks[n]);
				rc = fail(b, -EPROTO, "file_transfer_read answered without data");
			} else {
				n++;
			}
			if (rc == 0 && eof && strcmp(sc_string(sc, "sha256"), d->sha) != 0)
				rc = fail(b, -EBADMSG, "the last read gave sha256 %s, not %s", sc_string(sc, "sha256"), d->sha);
		}
		cJSON_Delete(resp);
	}
	*secs = base_now() - t0;
	/* Every byte must be the file's: decode each chunk, append it, compare, hash. */
	size_t max_text = B64_ENCODED_SIZE(XFER_CHUNK) - 1;
	unsigned char *buf = rc == 0 ? malloc(XFER_BYTES) : NULL;
	unsigned char *one = rc == 0 ? malloc(B64_DECODED_MAX(max_text)) : NULL;
	if (rc == 0 && (!buf || !one))
		rc = fail(b, -ENOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *t = chunks[i]->valuestring;
		size_t len = strlen(t), bad;
		ssize_t got = len <= max_text ? b64_decode(t, len, one, &bad) : -1;
		if (got < 0 || off + (size_t)got > XFER_BYTES) {
			rc = fail(b, -EBADMSG, "chunk %zu does not decode to the file's bytes", i);
			break;
		}
		memcpy(buf + off, one, (size_t)got);
		off += (size_t)got;
	}
	if (rc == 0 && (off != XFER_BYTES || memcmp(buf, d->bytes, XFER_BYTES) != 0))
		rc = fail(b, -EBADMSG, "the %zu bytes downloaded differ from the %u uploaded", off, XFER_BYTES);
	if (rc == 0) {
		char hex[65];
		blob_sha256_hex(buf, off, hex);
		if (strcmp(hex, d->sha) != 0)
			rc = fail(b, -EBADMSG, "the bytes downloaded hash to %s, not %s", hex, d->sha);
	}
	free(buf);
	free(one);
	for (size_t i = 0; i < n; i++)
		cJSON_Delete(chunks[i]);
	return rc;
}

/* Upload and download of one 64 MiB file per round through the transfer tools, against the
 * base64 and sha256 work the server cannot avoid, done in-process on the same bytes. */
static int fig_transfer(struct bench *b)
{
	struct inst in;
	struct xfer_data d;
	char root[PATH_MAX], path[PATH_MAX + 32];
	double up[MAX_ROUNDS], up_base[MAX_ROUNDS], down[MAX_ROUNDS], down_base[MAX_ROUNDS];
	int rc = join(root, sizeof root, b->work, "transfer-files");
	if (rc == 0)
		rc = mkdir_p2(root, NULL);
	if (rc < 0)
		return fail(b, rc, "%s: %s", root, strerror(-rc));
	if ((rc = inst_prepare_full(b, &in, "transfer", 4, 1000, NULL, root)) < 0)
		return rc;
	if ((rc = xfer_data_init(b, &d)) == 0)
		rc = inst_start(b, &in);
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		char name[32], hex[65];
		double rate, secs;
		snprintf(name, sizeof name, "bench-%d.bin", r);
		if ((rc = base_b64_decode_sha256(d.texts, d.lens, XFER_CHUNKS, XFER_BYTES, &rate, hex)) < 0 ||
		    strcmp(hex, d.sha) != 0) {
			rc = fail(b, rc, "decode baseline: %s", rc < 0 ? strerror(-rc) : "wrong sha256");
			break;
		}
		up_base[r] = rate / MIB;
		if ((rc = upload_once(b, in.c, &d, name, &secs)) < 0)
			break;
		up[r] = XFER_BYTES / MIB / secs;
		if ((rc = base_b64_encode_sha256(d.bytes, XFER_BYTES, XFER_CHUNK, &rate)) < 0) {
			fail(b, rc, "encode baseline: %s", strerror(-rc));
			break;
		}
		down_base[r] = rate / MIB;
		if ((rc = download_once(b, in.c, &d, name, &secs)) < 0)
			break;
		down[r] = XFER_BYTES / MIB / secs;
		/* Done with it: five rounds need not leave 320 MiB behind. */
		snprintf(path, sizeof path, "%s/%s", root, name);
		unlink(path);
	}
	if (rc == 0) {
		report_rounds("file upload through the transfer tools (64 MiB, 256 KiB chunks, one call at a time)", up,
		              "MiB/s", up_base, "MiB/s base64 decode+sha256", b->rounds);
		report_rounds("file download through the transfer tools (64 MiB, 256 KiB chunks, one call at a time)",
		              down, "MiB/s", down_base, "MiB/s base64 encode+sha256", b->rounds);
	}
	inst_stop(&in);
	xfer_data_free(&d);
	return rc;
}

/* ---- driver ------------------------------------------------------------------------------------ */

struct figure {
	const char *name;
	int (*run)(struct bench *b);
};

/* In output order. */
static const struct figure figures[] = {
	{ "create-get", fig_create_get },
	{ "get", fig_get },
	{ "throughput-none", fig_throughput_none },
	{ "throughput-default", fig_throughput_default },
	{ "throughput-strict", fig_throughput_strict },
	{ "acks", fig_acks },
	{ "replay", fig_replay },
	{ "restart", fig_restart },
	{ "memory", fig_memory },
	{ "memory-running", fig_memory_running },
	{ "transfer", fig_transfer },
};
#define NFIGURES (sizeof figures / sizeof figures[0])

static void header(const struct bench *b)
{
	struct utsname u;
	uname(&u);
	printf("forkpoint benchmarks (%s %s, %ld CPUs, crc32c %s)\n", u.sysname, u.release,
	       sysconf(_SC_NPROCESSORS_ONLN), crc32c_hw_available() ? "hardware" : "software");
	printf("Every figure is divided by a baseline measured in this run on this machine: a raw append+\n"
	       "fdatasync, a ping, a plain posix_spawn, a raw read of the journal, an empty state dir, idle\n"
	       "memory, a plain process's memory, base64+sha256 in-process.  Rates: ratio = figure/baseline\n"
	       "(1.00 = as fast as the floor).  Times and memory: ratio = figure/baseline (lower is better).\n"
	       "Figure and baseline alternate over %d rounds of %.1f s; values are medians, the ratio is the\n"
	       "median of the per-round ratios.\n\n",
	       b->rounds, b->seconds);
	fflush(stdout);
}

static int resolve(char *out, const char *build, const char *rel)
{
	char buf[PATH_MAX];
	if (join(buf, sizeof buf, build, rel) < 0 || !realpath(buf, out) || access(out, X_OK) < 0) {
		fprintf(stderr, "bench: %s is missing: build it first\n", buf);
		return -1;
	}
	return 0;
}

static int usage(void)
{
	fputs("usage: bench --build DIR --work DIR [--seconds S] [--rounds N] [--only NAME]... [--list]\n",
	      stderr);
	return 2;
}

int main(int argc, char **argv)
{
	struct bench b;
	const char *build = NULL, *work = NULL;
	const char *only[NFIGURES + 1];
	size_t nonly = 0;
	memset(&b, 0, sizeof b);
	b.seconds = 1.0;
	b.rounds = 5;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--list") == 0) {
			for (size_t k = 0; k < NFIGURES; k++)
				puts(figures[k].name);
			return 0;
		} else if (i + 1 >= argc) {
			return usage();
		} else if (strcmp(argv[i], "--build") == 0) {
			build = argv[++i];
		} else if (strcmp(argv[i], "--work") == 0) {
			work = argv[++i];
		} else if (strcmp(argv[i], "--seconds") == 0) {
			b.seconds = strtod(argv[++i], NULL);
		} else if (strcmp(argv[i], "--rounds") == 0) {
			b.rounds = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--only") == 0 && nonly < NFIGURES) {
			only[nonly++] = argv[++i];
		} else {
			return usage();
		}
	}
	if (!build || !work || b.seconds <= 0 || b.rounds < 1 || b.rounds > MAX_ROUNDS)
		return usage();
	if (!realpath(work, b.work)) {
		fprintf(stderr, "bench: work dir %s: %s\n", work, strerror(errno));
		return 2;
	}
	if (!realpath(build, b.build) || resolve(b.bin, b.build, "forkpoint") < 0 ||
	    resolve(b.plain_count, b.build, "examples/plain-count") < 0 ||
	    resolve(b.sleeper, b.build, "tests/helpers/sleeper") < 0)
		return 2;
	for (size_t k = 0; k < nonly; k++) {
		size_t f = 0;
		while (f < NFIGURES && strcmp(figures[f].name, only[k]) != 0)
			f++;
		if (f == NFIGURES) {
			fprintf(stderr, "bench: no figure named '%s' (--list shows them)\n", only[k]);
			return 2;
		}
	}

	/* A server that dies mid-figure must fail that figure, not kill the whole run. */
	signal(SIGPIPE, SIG_IGN);
	header(&b);
	int failed = 0;
	double t0 = base_now();
	for (size_t f = 0; f < NFIGURES; f++) {
		int selected = nonly == 0;
		for (size_t k = 0; k < nonly; k++)
			selected |= strcmp(figures[f].name, only[k]) == 0;
		if (!selected)
			continue;
		b.err[0] = 0;
		if (figures[f].run(&b) < 0) {
			printf("%s: FAILED (%s)\n", figures[f].name, b.err[0] ? b.err : "unknown error");
			fflush(stdout);
			failed = 1;
		}
	}
	printf("\n(%.0f s)\n", base_now() - t0);
	return failed;
}
