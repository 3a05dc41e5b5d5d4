/* tests/bench/bench.c — `make bench`: forkpoint's costs as ratios against floors of the same
 * kind of work, measured in the same run on the same machine.  Absolute numbers from these
 * noisy VMs travel badly; a ratio to "one raw fdatasync", "one pipe round trip of the same
 * bytes" or "one bubblewrap launch" says how much forkpoint adds.
 *
 *   bench --build DIR --work DIR [--seconds S] [--rounds N] [--only NAME]... [--list]
 *   bench --echo TEMPLATE        the echo floor (echo.h), started by the bench itself
 *   bench --peak-rss FILE PROG...   a program's own peak RSS (baseline.h), likewise
 *
 * Each figure is one function in the table at the bottom; it prints one line per row,
 *   name: median [min..max] unit (floor: median [min..max] unit, ratio median [min..max])
 * measuring the figure and its floor in alternating rounds, and adds the row to the summary
 * printed at the end (with the plan's goal, met or not, where there is one).  A row with no
 * floor of the same kind says "absolute"; one that cannot be measured here (bubblewrap
 * missing) says "skipped" and why.  A figure that cannot be measured prints "name: FAILED
 * (why)" and makes the exit status 1; the others still run.  Speed never fails the run.
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
#include "echo.h"
#include "mcpc.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"

#define MAX_ROUNDS    9
#define MAX_ROWS      96
#define RPC_TIMEOUT   30000    /* ms for any single answer */
#define WINDOW        64       /* requests in flight when pipelining */

/* What the performance plan asks of a figure, for the summary. */
enum goal_kind { NO_GOAL, RATIO_AT_LEAST, RATIO_AT_MOST, VALUE_AT_MOST };
struct goal {
	enum goal_kind kind;
	double v;
};
static const struct goal no_goal = { NO_GOAL, 0 };

/* One line of the summary table. */
struct row {
	char label[72];
	char value[40];
	double ratio;              /* < 0: an absolute figure, no floor */
	struct goal goal;
	int met;
};

struct bench {
	char build[PATH_MAX], work[PATH_MAX], self[PATH_MAX];
	char bin[PATH_MAX], plain_count[PATH_MAX], sleeper[PATH_MAX], stamp[PATH_MAX], progress[PATH_MAX];
	char bwrap[PATH_MAX];      /* "" when bubblewrap cannot run here; bwrap_why says why */
	char bwrap_why[300];
	double seconds;            /* length of one measuring window */
	int rounds;
	char err[1024];            /* why the current figure failed */
	struct row rows[MAX_ROWS];
	int nrows;
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

static void min_max(const double *v, int n, double *lo, double *hi)
{
	*lo = *hi = v[0];
	for (int i = 1; i < n; i++) {
		*lo = v[i] < *lo ? v[i] : *lo;
		*hi = v[i] > *hi ? v[i] : *hi;
	}
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

/* "median [min..max]" of n values. */
static const char *spread(char *buf, size_t len, const double *v, int n)
{
	char a[32], lo_s[32], hi_s[32];
	double lo = 0, hi = 0;
	min_max(v, n, &lo, &hi);
	snprintf(buf, len, "%s [%s..%s]", num(a, sizeof a, median(v, n)), num(lo_s, sizeof lo_s, lo),
	         num(hi_s, sizeof hi_s, hi));
	return buf;
}

static const char *ratio_text(char *buf, size_t n, double r)
{
	/* Two decimals say enough for ratios near 1; small ones keep three significant digits. */
	snprintf(buf, n, r >= 0.1 ? "%.2f" : "%.3g", r);
	return buf;
}

static void add_row(struct bench *b, const char *label, double value, const char *unit, double ratio,
                    struct goal g)
{
	if (b->nrows == MAX_ROWS) {
		printf("(the summary is full: %s is left out of it)\n", label);
		return;
	}
	struct row *r = &b->rows[b->nrows++];
	char v[32];
	snprintf(r->label, sizeof r->label, "%s", label);
	snprintf(r->value, sizeof r->value, "%s %s", num(v, sizeof v, value), unit);
	r->ratio = ratio;
	r->goal = g;
	r->met = g.kind == RATIO_AT_LEAST ? ratio >= g.v : g.kind == RATIO_AT_MOST ? ratio <= g.v
	                                                 : g.kind == VALUE_AT_MOST ? value <= g.v : -1;
}

/* Per-round figure and floor values, printed as median [min..max] each, and the ratio as the
 * median [min..max] of the paired per-round ratios (a noisy neighbour then slows both halves
 * of a pair rather than skewing the ratio).  label names the row in the summary. */
static void report_rounds(struct bench *b, const char *label, const char *name, const double *v,
                          const char *unit, const double *base, const char *base_unit, int n, struct goal g)
{
	double r[MAX_ROUNDS];
	char sv[112], sb[112], sr[112], lo[32], mid[32], hi[32];
	double rlo, rhi;
	if (n < 1 || n > MAX_ROUNDS)
		return;
	for (int i = 0; i < n; i++)
		r[i] = base[i] > 0 ? v[i] / base[i] : 0;
	min_max(r, n, &rlo, &rhi);
	snprintf(sr, sizeof sr, "%s [%s..%s]", ratio_text(mid, sizeof mid, median(r, n)),
	         ratio_text(lo, sizeof lo, rlo), ratio_text(hi, sizeof hi, rhi));
	printf("%s: %s %s (floor: %s %s, ratio %s)\n", name, spread(sv, sizeof sv, v, n), unit,
	       spread(sb, sizeof sb, base, n), base_unit, sr);
	fflush(stdout);
	add_row(b, label, median(v, n), unit, median(r, n), g);
}

/* A figure with no floor of the same kind of work: its absolute value, said so. */
static void report_absolute(struct bench *b, const char *label, const char *name, const double *v,
                            const char *unit, int n, const char *why, struct goal g)
{
	char sv[112];
	if (n < 1 || n > MAX_ROUNDS)
		return;
	printf("%s: %s %s (absolute: %s)\n", name, spread(sv, sizeof sv, v, n), unit, why);
	fflush(stdout);
	add_row(b, label, median(v, n), unit, -1, g);
}

/* A row that could not be measured here, with the reason. */
static void report_skip(struct bench *b, const char *label, const char *name, const char *why, struct goal g)
{
	printf("%s: skipped (%s)\n", name, why);
	fflush(stdout);
	add_row(b, label, 0, "", -1, g);
	if (b->nrows > 0 && strcmp(b->rows[b->nrows - 1].label, label) == 0) {
		snprintf(b->rows[b->nrows - 1].value, sizeof b->rows[0].value, "skipped");
		b->rows[b->nrows - 1].met = -2;
	}
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

#define COLD_TOOLS 10   /* tools running the stamp job: cold starts sampled per round */

/* The tools: `count` runs plain-count N (N = 0: the job exits at once), `hold` runs the sleeper
 * for a given time (jobs that stay running or keep others queued), `progress` reports progress
 * every 10 ms until cancelled, `stamp-<i>` print the moment they started.  sandbox: the tools'
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
		"      \"command\": [\"%s\", \"{seconds}\", \"-\"], \"mode\": \"task\"%s },\n"
		"    { \"name\": \"progress\", \"description\": \"Reports progress every 10 ms until cancelled.\",\n"
		"      \"inputSchema\": { \"type\": \"object\" },\n"
		"      \"command\": [\"%s\", \"10\", \"0\"], \"mode\": \"task\"%s }",
		max_concurrent, max_queue, roots, b->plain_count, sb, b->sleeper, sb, b->progress, sb);
	/* stamp-0 .. stamp-N: the same program under distinct tools, so that each tool's first
	 * task is a cold start; sync, so the call's answer carries the job's output. */
	for (int i = 0; i < COLD_TOOLS; i++)
		fprintf(f,
			",\n    { \"name\": \"stamp-%d\", \"description\": \"Prints the time it started.\",\n"
			"      \"inputSchema\": { \"type\": \"object\" },\n"
			"      \"command\": [\"%s\"], \"mode\": \"sync\"%s }", i, b->stamp, sb);
	fputs("\n  ]\n}\n", f);
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

/* Fail unless resp answers request `want` with a result that is not an error. */
static int answer_ok(struct bench *b, const char *method, cJSON *resp, long got, long want)
{
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(resp, "result");
	if (got == want && res && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "isError")))
		return 0;
	char text[400];
	describe(resp, text, sizeof text);
	return fail(b, -EPROTO, "%s answered (request %ld, expected %ld): %s", method, got, want, text);
}

/* Calls of one prepared request with `depth` in flight for `seconds`; answers arrive in
 * order (both forkpoint and the echo floor answer in order).  *rate: answers per second. */
static int pipelined_rate(struct bench *b, struct mcpc *c, const char *method, const char *params,
                          unsigned depth, double seconds, double *rate)
{
	unsigned n = 0;
	long sent_id = 0, want = 0;
	int rc = 0, inflight = 0;
	double t0 = base_now(), t = t0;
	for (;;) {
		while (t - t0 < seconds && inflight < (int)depth) {
			if ((rc = mcpc_send_json(c, method, params, &sent_id)) < 0)
				return fail(b, rc, "%s: %s", method, strerror(-rc));
			if (inflight++ == 0 && n == 0)
				want = sent_id;
		}
		if (inflight == 0)
			break;
		long got;
		cJSON *resp;
		if ((rc = mcpc_next_response(c, RPC_TIMEOUT, &got, &resp)) < 0)
			return fail(b, rc, "%s: %s", method, strerror(-rc));
		rc = answer_ok(b, method, resp, got, want);
		cJSON_Delete(resp);
		if (rc < 0)
			return rc;
		want++;
		inflight--;
		n++;
		t = base_now();
	}
	*rate = n / (t - t0);
	return 0;
}

/* n sequential calls of one prepared request; lat[i]: each one's round trip in seconds. */
static int call_latencies(struct bench *b, struct mcpc *c, const char *method, const char *params, size_t n,
                          double *lat)
{
	for (size_t i = 0; i < n; i++) {
		long want, got;
		cJSON *resp;
		double t0 = base_now();
		int rc = mcpc_send_json(c, method, params, &want);
		if (rc == 0)
			rc = mcpc_next_response(c, RPC_TIMEOUT, &got, &resp);
		if (rc < 0)
			return fail(b, rc, "%s: %s", method, strerror(-rc));
		lat[i] = base_now() - t0;
		rc = answer_ok(b, method, resp, got, want);
		cJSON_Delete(resp);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* One answer to params, for an echo template. */
static int one_answer(struct bench *b, struct mcpc *c, const char *method, const char *params, cJSON **resp)
{
	long want, got;
	int rc = mcpc_send_json(c, method, params, &want);
	if (rc == 0)
		rc = mcpc_next_response(c, RPC_TIMEOUT, &got, resp);
	if (rc < 0)
		return fail(b, rc, "%s: %s", method, strerror(-rc));
	if ((rc = answer_ok(b, method, *resp, got, want)) < 0) {
		cJSON_Delete(*resp);
		*resp = NULL;
	}
	return rc;
}

/* The echo floor for one request: a process answering it with the bytes forkpoint answers
 * it with now (one call on c), over the same kind of pipes.  *bytes: the answer's length. */
static int echo_start(struct bench *b, struct inst *in, const char *tag, const char *method, const char *params,
                      struct mcpc **echo, size_t *bytes)
{
	char tpl[PATH_MAX + 32], log[PATH_MAX + 32];
	cJSON *resp = NULL;
	snprintf(tpl, sizeof tpl, "%s/echo-%s.json", in->dir, tag);
	snprintf(log, sizeof log, "%s/echo-%s.log", in->dir, tag);
	int rc = one_answer(b, in->c, method, params, &resp);
	if (rc < 0)
		return rc;
	char *text = cJSON_PrintUnformatted(resp);
	*bytes = text ? strlen(text) + 1 : 0;
	free(text);
	rc = echo_write_template(resp, tpl);
	cJSON_Delete(resp);
	if (rc < 0)
		return fail(b, rc, "echo template %s: %s", tpl, strerror(-rc));
	char *argv[] = { b->self, (char *)"--echo", tpl, NULL };
	if ((rc = mcpc_spawn_argv(argv, log, echo)) < 0)
		return fail(b, rc, "cannot start the echo floor: %s", strerror(-rc));
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
		report_rounds(b, "create+get round trips", "facade create+get round trips (one at a time)", v, "/s",
		              base, "256-byte append+fdatasync/s", b->rounds, no_goal);
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

/* ---- 2. durable_task_get on a finished task ----------------------------------------------- */

/* Wait until task id has completed. */
static int wait_completed(struct bench *b, struct mcpc *c, const char *id, int timeout_s)
{
	char st[32] = "";
	for (double deadline = base_now() + timeout_s; strcmp(st, "completed") != 0; sleep_ms(5)) {
		int rc = task_get(b, c, id, st, sizeof st, NULL);
		if (rc < 0)
			return rc;
		if (strcmp(st, "completed") != 0 && base_now() > deadline)
			return fail(b, -ETIMEDOUT, "task %s still %s after %d s", id, st, timeout_s);
	}
	return 0;
}

static const unsigned depths[] = { 1, 8, 64 };
#define NDEPTHS (sizeof depths / sizeof depths[0])

/* Gets of one finished task at 1, 8 and 64 in flight, each against the echo floor at the same
 * depth: the same request bytes out, the same answer bytes back, the same client. */
static int fig_get(struct bench *b)
{
	struct inst in;
	struct mcpc *echo = NULL;
	char id[33], params[200];
	size_t bytes = 0;
	double v[NDEPTHS][MAX_ROUNDS], base[NDEPTHS][MAX_ROUNDS];
	int rc = inst_prepare(b, &in, "get", 4, 1000);
	if (rc == 0)
		rc = inst_start(b, &in);
	if (rc == 0)
		rc = create_task(b, in.c, count_params, id);
	if (rc == 0)
		rc = wait_completed(b, in.c, id, 30);
	get_params(params, sizeof params, id);
	if (rc == 0)
		rc = echo_start(b, &in, "get", "tools/call", params, &echo, &bytes);
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		for (size_t d = 0; rc == 0 && d < NDEPTHS; d++) {
			if ((rc = pipelined_rate(b, echo, "tools/call", params, depths[d], b->seconds, &base[d][r])) == 0)
				rc = pipelined_rate(b, in.c, "tools/call", params, depths[d], b->seconds, &v[d][r]);
		}
	}
	for (size_t d = 0; rc == 0 && d < NDEPTHS; d++) {
		char name[160], label[64];
		snprintf(name, sizeof name, "durable_task_get calls, %u in flight (%zu-byte answers)", depths[d], bytes);
		snprintf(label, sizeof label, "get, %u in flight", depths[d]);
		report_rounds(b, label, name, v[d], "/s", base[d], "pipe round trips/s of the same bytes", b->rounds,
		              d == 0 ? (struct goal){ RATIO_AT_LEAST, 0.5 } : no_goal);
	}
	if (echo)
		mcpc_close(echo, 2000);
	inst_stop(&in);
	return rc;
}

/* ---- 2b. get latency while jobs report progress --------------------------------------------- */

#define PROGRESS_JOBS    8
#define LATENCY_SAMPLES  2000

static const char progress_params[] = "{\"name\":\"progress\",\"arguments\":{}}";

/* p50 and p99 of sequential gets of one of 8 running jobs that report progress every 10 ms
 * (each report is journaled and changes the task's view), against the echo floor's round
 * trip of the same bytes; both sample LATENCY_SAMPLES calls per round. */
static int fig_get_progress(struct bench *b)
{
	struct inst in;
	struct mcpc *echo = NULL;
	char ids[PROGRESS_JOBS][33], params[200];
	double p50[MAX_ROUNDS], p99[MAX_ROUNDS], b50[MAX_ROUNDS], b99[MAX_ROUNDS];
	double *lat = malloc(LATENCY_SAMPLES * sizeof *lat);
	size_t bytes = 0;
	if (!lat)
		return fail(b, -ENOMEM, "out of memory");
	int rc = inst_prepare(b, &in, "get-progress", PROGRESS_JOBS + 2, 1000);
	if (rc == 0)
		rc = inst_start(b, &in);
	for (int i = 0; rc == 0 && i < PROGRESS_JOBS; i++)
		rc = create_task(b, in.c, progress_params, ids[i]);
	if (rc == 0)
		rc = wait_started(b, in.c, ids, PROGRESS_JOBS, 60000);
	get_params(params, sizeof params, ids[0]);
	if (rc == 0)
		rc = echo_start(b, &in, "get-progress", "tools/call", params, &echo, &bytes);
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		if ((rc = call_latencies(b, echo, "tools/call", params, LATENCY_SAMPLES, lat)) < 0)
			break;
		b50[r] = base_quantile(lat, LATENCY_SAMPLES, 0.50) * 1e3;
		b99[r] = base_quantile(lat, LATENCY_SAMPLES, 0.99) * 1e3;
		if ((rc = call_latencies(b, in.c, "tools/call", params, LATENCY_SAMPLES, lat)) < 0)
			break;
		p50[r] = base_quantile(lat, LATENCY_SAMPLES, 0.50) * 1e3;
		p99[r] = base_quantile(lat, LATENCY_SAMPLES, 0.99) * 1e3;
	}
	/* The jobs must really have been running (and reporting) all along. */
	char st[32];
	int started = 0;
	if (rc == 0 && (rc = task_get(b, in.c, ids[PROGRESS_JOBS - 1], st, sizeof st, &started)) == 0 &&
	    (strcmp(st, "working") != 0 || !started))
		rc = fail(b, -EPROTO, "a progress job is %s, not running", st);
	if (rc == 0) {
		char name[160];
		snprintf(name, sizeof name, "durable_task_get latency p50, 8 jobs reporting progress every 10 ms "
		         "(%zu-byte answers)", bytes);
		report_rounds(b, "get p50, 8 jobs reporting progress", name, p50, "ms", b50,
		              "ms p50 pipe round trip of the same bytes", b->rounds, no_goal);
		snprintf(name, sizeof name, "durable_task_get latency p99, 8 jobs reporting progress every 10 ms");
		report_rounds(b, "get p99, 8 jobs reporting progress", name, p99, "ms", b99,
		              "ms p99 pipe round trip of the same bytes", b->rounds, no_goal);
	}
	if (echo)
		mcpc_close(echo, 2000);
	inst_stop(&in);
	free(lat);
	return rc;
}

/* ---- 3. tasks started and finished, per sandbox profile ------------------------------------ */

#define THROUGHPUT_TASKS 300

/* bubblewrap passed the probe but failed inside a figure: its rows are skipped from here on,
 * with the reason, rather than failing the figure they are only an anchor for. */
static void bwrap_lost(struct bench *b, const char *what, int rc)
{
	snprintf(b->bwrap_why, sizeof b->bwrap_why, "%s failed: %s", what,
	         rc == -ECHILD ? "it exited with an error" : strerror(-rc));
	b->bwrap[0] = 0;
	printf("bubblewrap rows are skipped from here on: %s\n", b->bwrap_why);
}

/* `tasks` tasks of plain-count 0 created (64 requests in flight), `jobs` at a time, until all
 * have completed, over `rounds` rounds; against the same program run by posix_spawn, `jobs` at
 * a time, and for the isolating profiles also by bubblewrap with the `default` profile's
 * namespaces (the anchor a sandboxing launcher sets).  profile: the tools' sandbox profile.  A
 * profile that cannot run the program (a job killed by its filter) fails the figure with the
 * task's error: that is a finding, not noise.  Fills v, base and bwrap (*use_bwrap cleared if
 * bubblewrap does not run); *degraded as task_sandbox gives it. */
struct tp_spec {
	const char *profile;
	int jobs, rounds;
	unsigned tasks;
};

static int throughput_rounds(struct bench *b, const struct tp_spec *sp, double *v, double *base, double *bwrap,
                             int *use_bwrap, int *degraded)
{
	struct inst in;
	struct base_bwrap bw;
	char *argv[] = { b->plain_count, (char *)"0", NULL };
	char tag[64], sandbox[64], id[33];
	int n = 0;
	*use_bwrap = b->bwrap[0] && strcmp(sp->profile, "none") != 0;
	snprintf(tag, sizeof tag, "throughput-%s-%d", sp->profile, sp->jobs);
	snprintf(sandbox, sizeof sandbox, "{\"profile\": \"%s\"}", sp->profile);
	int rc = inst_prepare_sandbox(b, &in, tag, sp->jobs, 100000, sandbox);
	if (rc == 0 && *use_bwrap && (rc = base_bwrap_cmd(b->bwrap, argv, &bw)) < 0)
		fail(b, rc, "bwrap command line: %s", strerror(-rc));
	if (rc == 0)
		rc = inst_start(b, &in);
	for (int r = 0; rc == 0 && r < sp->rounds; r++) {
		if ((rc = base_spawn_rate(argv, sp->tasks, (unsigned)sp->jobs, &base[r])) < 0) {
			fail(b, rc, "spawn baseline: %s", strerror(-rc));
			break;
		}
		if (*use_bwrap && (rc = base_spawn_rate(bw.argv, sp->tasks, (unsigned)sp->jobs, &bwrap[r])) < 0) {
			bwrap_lost(b, "bwrap running plain-count", rc);
			*use_bwrap = rc = 0;
		}
		unsigned done;
		double secs, t0 = base_now();
		if ((rc = create_pipelined(b, in.c, count_params, sp->tasks, 0, WINDOW, &done, &secs)) < 0 ||
		    (rc = wait_idle(b, in.c, 120000, 10)) < 0)
			break;
		v[r] = sp->tasks / (base_now() - t0);
	}
	/* The figure is only about this profile if the jobs really got it. */
	if (rc == 0 && (rc = list_count(b, in.c, "completed", &n, id)) == 0 && n == 0)
		rc = fail(b, -EPROTO, "no completed task to check the sandbox of");
	if (rc == 0)
		rc = task_sandbox(b, in.c, id, sp->profile, degraded);
	inst_stop(&in);
	return rc;
}

/* The rows of one throughput setting; goal: the bubblewrap row's, if any. */
static int throughput_figure(struct bench *b, const struct tp_spec *sp, struct goal bwrap_goal)
{
	double v[MAX_ROUNDS], base[MAX_ROUNDS], bwrap[MAX_ROUNDS];
	int use_bwrap = 0, degraded = 0;
	int rc = throughput_rounds(b, sp, v, base, bwrap, &use_bwrap, &degraded);
	if (rc < 0)
		return rc;
	char name[200], label[72];
	const char *deg = degraded && strcmp(sp->profile, "none") != 0 ? " (degraded on this host)" : "";
	snprintf(name, sizeof name, "tasks started and finished, profile %s%s (%u x plain-count 0, %d at a time)",
	         sp->profile, deg, sp->tasks, sp->jobs);
	snprintf(label, sizeof label, "tasks/s, %s, %d at a time, vs posix_spawn", sp->profile, sp->jobs);
	report_rounds(b, label, name, v, "tasks/s", base, "posix_spawn+waitpid/s", sp->rounds, no_goal);
	if (strcmp(sp->profile, "none") == 0)
		return 0;
	snprintf(label, sizeof label, "tasks/s, %s, %d at a time, vs bwrap", sp->profile, sp->jobs);
	snprintf(name, sizeof name, "tasks started and finished, profile %s%s, %d at a time, against bubblewrap",
	         sp->profile, deg, sp->jobs);
	if (use_bwrap)
		report_rounds(b, label, name, v, "tasks/s", bwrap, "bwrap (user,pid,mount,net,ipc,uts)+waitpid/s",
		              sp->rounds, bwrap_goal);
	else
		report_skip(b, label, name, b->bwrap_why, bwrap_goal);
	return 0;
}

static int fig_throughput_none(struct bench *b)
{
	return throughput_figure(b, &(struct tp_spec){ "none", 4, b->rounds, THROUGHPUT_TASKS }, no_goal);
}

static int fig_throughput_default(struct bench *b)
{
	return throughput_figure(b, &(struct tp_spec){ "default", 4, b->rounds, THROUGHPUT_TASKS },
	                         (struct goal){ RATIO_AT_LEAST, 1.5 });
}

static int fig_throughput_strict(struct bench *b)
{
	return throughput_figure(b, &(struct tp_spec){ "strict", 4, b->rounds, THROUGHPUT_TASKS }, no_goal);
}

#define SCALE_TASKS  120
#define SCALE_ROUNDS 3

/* `default` tasks with 1, 8 and 64 jobs at a time (fewer tasks and rounds: it is the trend
 * that matters here), each against posix_spawn and bubblewrap at the same concurrency. */
static int fig_throughput_scale(struct bench *b)
{
	int rounds = b->rounds < SCALE_ROUNDS ? b->rounds : SCALE_ROUNDS, rc = 0;
	for (size_t d = 0; rc == 0 && d < NDEPTHS; d++)
		rc = throughput_figure(b, &(struct tp_spec){ "default", (int)depths[d], rounds, SCALE_TASKS }, no_goal);
	return rc;
}

/* ---- 3b. tools/call to the job's first instruction --------------------------------------------- */

#define WARM_SAMPLES 40
#define BWRAP_SAMPLES 20
#define CALL_GAP_MS  20

/* One sync call of stamp-<tool>: from just before the request is written to the moment the
 * job read the clock first thing in main(). */
static int stamp_call(struct bench *b, struct mcpc *c, int tool, double *secs)
{
	char params[96];
	cJSON *resp = NULL;
	const cJSON *sc;
	snprintf(params, sizeof params, "{\"name\":\"stamp-%d\",\"arguments\":{}}", tool);
	double t0 = base_now();
	int rc = tool_call(b, c, params, &resp);
	if (rc == 0 && (rc = tool_result(b, resp, &sc)) == 0) {
		const char *out = sc_string(sc, "output");
		char *end;
		long long ns = strtoll(out, &end, 10);
		if (end == out || ns <= 0)
			rc = fail(b, -EBADMSG, "stamp-%d printed '%.60s'", tool, out);
		else
			*secs = (double)ns / 1e9 - t0;
	}
	cJSON_Delete(resp);
	return rc;
}

/* p50 and p99 (ms) of n samples from f; v is reordered. */
static void p50_p99(double *v, size_t n, double *p50, double *p99)
{
	*p50 = base_quantile(v, n, 0.50) * 1e3;
	*p99 = base_quantile(v, n, 0.99) * 1e3;
}

/* Floor samples of one round: the stamp started by posix_spawn (and by bwrap if it runs).
 * 1: the posix_spawn samples are there, bwrap failed (bwrap_lost). */
static int stamp_floor(struct bench *b, struct base_bwrap *bw, double *sp, double *bwv)
{
	char *argv[] = { b->stamp, NULL };
	int rc = 0;
	for (int i = 0; rc == 0 && i < WARM_SAMPLES; i++)
		if ((rc = base_spawn_stamp(argv, &sp[i])) < 0)
			fail(b, rc, "posix_spawn of %s: %s", b->stamp, strerror(-rc));
	for (int i = 0; rc == 0 && bw && i < BWRAP_SAMPLES; i++)
		if ((rc = base_spawn_stamp(bw->argv, &bwv[i])) < 0) {
			bwrap_lost(b, "bwrap running the stamp job", rc);
			return 1;
		}
	return rc;
}

/* One round in a fresh supervisor whose tools have `profile`: the first task of each of
 * `ncold` tools into cold[], then WARM_SAMPLES more of stamp-0 into warm[].  Calls are paced
 * CALL_GAP_MS apart, as a client's are: whatever a supervisor prepares between tasks (a warm
 * sandbox) has the time to be ready, and the figure is the latency of one call rather than of
 * a queue.  In round 0 the task's recorded sandbox is checked (*degraded: mechanisms missing). */
static int latency_round(struct bench *b, int r, const char *profile, int ncold, double *cold, double *warm,
                         int *degraded)
{
	struct inst in;
	char tag[48], sandbox[64], id[33];
	int n = 0;
	snprintf(tag, sizeof tag, "latency-%s-%d", profile, r);
	snprintf(sandbox, sizeof sandbox, "{\"profile\": \"%s\"}", profile);
	int rc = inst_prepare_sandbox(b, &in, tag, 4, 1000, sandbox);
	if (rc == 0)
		rc = inst_start(b, &in);
	for (int t = 0; rc == 0 && t < ncold; t++) {
		sleep_ms(CALL_GAP_MS);
		rc = stamp_call(b, in.c, t, &cold[t]);
	}
	for (int i = 0; rc == 0 && i < WARM_SAMPLES; i++) {
		sleep_ms(CALL_GAP_MS);
		rc = stamp_call(b, in.c, 0, &warm[i]);
	}
	if (rc == 0 && r == 0 && (rc = list_count(b, in.c, "completed", &n, id)) == 0)
		rc = n ? task_sandbox(b, in.c, id, profile, degraded) : fail(b, -EPROTO, "no task listed");
	inst_stop(&in);
	return rc;
}

/* Profile `default`, a fresh supervisor per round: the first task of each of COLD_TOOLS tools
 * (cold), then WARM_SAMPLES more of one of them (warm), one at a time; against the same
 * program started by posix_spawn, and by bubblewrap with the same namespaces.  Profile `none`
 * the same way (warm only) shows what is not the sandbox. */
static int fig_latency(struct bench *b)
{
	char *argv[] = { b->stamp, NULL };
	struct base_bwrap bw;
	double cold[COLD_TOOLS], warm[WARM_SAMPLES], none[WARM_SAMPLES], sp[WARM_SAMPLES], bwv[BWRAP_SAMPLES];
	double c50[MAX_ROUNDS], c99[MAX_ROUNDS], w50[MAX_ROUNDS], w99[MAX_ROUNDS], n50[MAX_ROUNDS], n99[MAX_ROUNDS];
	double s50[MAX_ROUNDS], s99[MAX_ROUNDS], b50[MAX_ROUNDS], b99[MAX_ROUNDS];
	int rc = 0, use_bwrap = b->bwrap[0] != 0, degraded = 0, degraded_none = 0;
	if (use_bwrap && (rc = base_bwrap_cmd(b->bwrap, argv, &bw)) < 0)
		return fail(b, rc, "bwrap command line: %s", strerror(-rc));
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		if ((rc = stamp_floor(b, use_bwrap ? &bw : NULL, sp, bwv)) < 0)
			break;
		if (rc == 1)
			use_bwrap = rc = 0;
		p50_p99(sp, WARM_SAMPLES, &s50[r], &s99[r]);
		if (use_bwrap)
			p50_p99(bwv, BWRAP_SAMPLES, &b50[r], &b99[r]);
		if ((rc = latency_round(b, r, "default", COLD_TOOLS, cold, warm, &degraded)) < 0 ||
		    (rc = latency_round(b, r, "none", 0, NULL, none, &degraded_none)) < 0)
			break;
		p50_p99(cold, COLD_TOOLS, &c50[r], &c99[r]);
		p50_p99(warm, WARM_SAMPLES, &w50[r], &w99[r]);
		p50_p99(none, WARM_SAMPLES, &n50[r], &n99[r]);
	}
	if (rc < 0)
		return rc;
	const char *deg = degraded ? " (degraded on this host)" : "";
	char name[200];
	snprintf(name, sizeof name, "tools/call to the job's first instruction, profile default%s, warm, p50", deg);
	report_rounds(b, "call to job running, warm p50", name, w50, "ms", s50, "ms p50 posix_spawn to first instruction",
	              b->rounds, (struct goal){ VALUE_AT_MOST, 1.0 });
	snprintf(name, sizeof name, "tools/call to the job's first instruction, profile default%s, warm, p99", deg);
	report_rounds(b, "call to job running, warm p99", name, w99, "ms", s99, "ms p99 posix_spawn to first instruction",
	              b->rounds, no_goal);
	snprintf(name, sizeof name, "tools/call to the job's first instruction, profile default%s, cold (first task of "
	         "a tool), p50", deg);
	report_rounds(b, "call to job running, cold p50", name, c50, "ms", s50, "ms p50 posix_spawn to first instruction",
	              b->rounds, no_goal);
	snprintf(name, sizeof name, "tools/call to the job's first instruction, profile default%s, cold, p99 (of %d)", deg,
	         COLD_TOOLS);
	report_rounds(b, "call to job running, cold p99", name, c99, "ms", s99, "ms p99 posix_spawn to first instruction",
	              b->rounds, no_goal);
	report_rounds(b, "call to job running, none, warm p50", "tools/call to the job's first instruction, profile none, "
	              "warm, p50", n50, "ms", s50, "ms p50 posix_spawn to first instruction", b->rounds, no_goal);
	report_rounds(b, "call to job running, none, warm p99", "tools/call to the job's first instruction, profile none, "
	              "warm, p99", n99, "ms", s99, "ms p99 posix_spawn to first instruction", b->rounds, no_goal);
	if (use_bwrap) {
		report_rounds(b, "call to job running vs bwrap, warm p50", "tools/call to the job's first instruction, warm, "
		              "p50, against bubblewrap", w50, "ms", b50, "ms p50 bwrap (same namespaces) to first instruction",
		              b->rounds, no_goal);
	} else {
		report_skip(b, "call to job running vs bwrap, warm p50", "tools/call to the job's first instruction, warm, p50, "
		            "against bubblewrap", b->bwrap_why, no_goal);
	}
	return 0;
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
	double v[NDEPTHS][MAX_ROUNDS], base[NDEPTHS][MAX_ROUNDS];
	unsigned q[NDEPTHS][MAX_ROUNDS];
	int rc = 0;
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		for (size_t d = 0; rc == 0 && d < NDEPTHS; d++) {
			char tag[32];
			snprintf(tag, sizeof tag, "acks-%u-%d", depths[d], r);
			rc = acks_round(b, tag, depths[d], &base[d][r], &v[d][r], &q[d][r]);
		}
	}
	for (size_t d = 0; rc == 0 && d < NDEPTHS; d++) {
		char name[160], label[64], unit[64];
		unsigned m = 0;
		for (int r = 0; r < b->rounds; r++)
			m = q[d][r] > m ? q[d][r] : m;
		snprintf(name, sizeof name, "durable create acks, %u in flight (queue grows to %u)", depths[d], m);
		snprintf(label, sizeof label, "durable creates, %u in flight", depths[d]);
		snprintf(unit, sizeof unit, "256-byte appends/s at %u per fdatasync", depths[d]);
		report_rounds(b, label, name, v[d], "/s", base[d], unit, b->rounds,
		              d == 0 ? (struct goal){ RATIO_AT_LEAST, 0.9 } : no_goal);
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
		report_rounds(b, "journal replay in-process", name, v, "records/s", base, "records/s by read()+crc32c",
		              b->rounds, no_goal);
	}
	return rc;
}

/* VmRSS after the allocator and the loop have settled. */
static int settled_rss(struct bench *b, struct mcpc *c, long *kb)
{
	sleep_ms(300);
	int rc = mcpc_rss_kb(c, kb);
	return rc < 0 ? fail(b, rc, "VmRSS: %s", strerror(-rc)) : 0;
}

/* ---- 6. scaling with the number of tasks: start-up, list, `forkpoint ls` ---------------------- */

static const unsigned scale_sizes[] = { 1000, 10000, 100000 };
#define NSCALE       (sizeof scale_sizes / sizeof scale_sizes[0])
#define LIST_SAMPLES 21

static const char list_params[] = "{\"name\":\"durable_task_list\",\"arguments\":{}}";

/* Spawn → initialize answered, in seconds. */
static int first_answer(struct bench *b, struct inst *in, double *secs)
{
	double t0 = base_now();
	int rc = inst_start(b, in);
	*secs = base_now() - t0;
	return rc;
}

/* The generated history must really be there: the first and the last task, completed. */
static int check_history(struct bench *b, struct mcpc *c, unsigned n)
{
	char id[33], st[32];
	int rc = 0;
	for (unsigned k = 0; rc == 0 && k < 2; k++) {
		jgen_task_id(1000000 + (k ? n - 1 : 0), id);
		if ((rc = task_get(b, c, id, st, sizeof st, NULL)) == 0 && strcmp(st, "completed") != 0)
			rc = fail(b, -EBADMSG, "restored task %s is %s, not completed", id, st);
	}
	return rc;
}

struct scale_vals {
	double start[MAX_ROUNDS], list[MAX_ROUNDS], ls[MAX_ROUNDS];
	double scan[MAX_ROUNDS], echo[MAX_ROUNDS], rss[MAX_ROUNDS], bytes[MAX_ROUNDS];
	double scan_ls[MAX_ROUNDS], bytes_ls[MAX_ROUNDS];   /* the journal as ls finds it */
	double rss_up[MAX_ROUNDS];                          /* the supervisor's, KiB, once started */
};

/* One round at one size: the raw scan of the journal, then start-up to the first answer, the
 * first page of durable_task_list (median of LIST_SAMPLES, the echo floor's likewise), and
 * `forkpoint ls` on the stopped supervisor's state (its peak RSS too).  *echo is started in
 * round 0 from the real answer. */
static int scale_round(struct bench *b, struct inst *in, unsigned n, int r, struct mcpc **echo,
                       struct scale_vals *sv)
{
	uint64_t recs = 0, bytes = 0;
	double secs, lat[LIST_SAMPLES];
	size_t ebytes;
	int rc = base_scan_journal(in->state, &recs, &bytes, &secs), status = 0;
	if (rc < 0)
		return fail(b, rc, "scanning the journal: %s", strerror(-rc));
	sv->scan[r] = secs * 1e3;
	sv->bytes[r] = (double)bytes / 1024.0;
	if ((rc = first_answer(b, in, &secs)) < 0)
		return rc;
	sv->start[r] = secs * 1e3;
	long kb = 0;
	if ((rc = settled_rss(b, in->c, &kb)) < 0)
		goto out;
	sv->rss_up[r] = (double)kb;
	if (r == 0 && ((rc = check_history(b, in->c, n)) < 0 ||
	               (rc = echo_start(b, in, "list", "tools/call", list_params, echo, &ebytes)) < 0))
		goto out;
	if ((rc = call_latencies(b, in->c, "tools/call", list_params, LIST_SAMPLES, lat)) < 0)
		goto out;
	sv->list[r] = base_quantile(lat, LIST_SAMPLES, 0.5) * 1e3;
	if ((rc = call_latencies(b, *echo, "tools/call", list_params, LIST_SAMPLES, lat)) < 0)
		goto out;
	sv->echo[r] = base_quantile(lat, LIST_SAMPLES, 0.5) * 1e3;
	inst_stop(in);
	/* The supervisor may have compacted the journal: ls's floor is what ls will read. */
	if ((rc = base_scan_journal(in->state, &recs, &bytes, &secs)) < 0) {
		rc = fail(b, rc, "scanning the journal: %s", strerror(-rc));
		goto out;
	}
	sv->scan_ls[r] = secs * 1e3;
	sv->bytes_ls[r] = (double)bytes / 1024.0;
	long rss = 0;
	char *argv[] = { b->bin, (char *)"ls", (char *)"--state", in->state, NULL };
	char tmp[PATH_MAX + 16];
	snprintf(tmp, sizeof tmp, "%s/ls-peak", in->dir);
	if ((rc = base_run_peak(b->self, argv, tmp, &secs, &rss, &status)) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		rc = fail(b, rc, "forkpoint ls --state %s: %s", in->state, rc < 0 ? strerror(-rc) : "failed");
		goto out;
	}
	sv->ls[r] = secs * 1e3;
	sv->rss[r] = (double)rss;
out:
	inst_stop(in);
	return rc;
}

/* 1k, 10k and 100k finished tasks in a generated journal (jgen: records as the supervisor
 * writes them, no 100k real calls).  Start-up and `ls` against the raw read+CRC of the same
 * journal bytes (measured just before, in the same round); list's first page against the
 * echo floor of the same answer; `ls`'s peak RSS against the journal's size. */
static int fig_scale(struct bench *b)
{
	struct scale_vals *sv = calloc(NSCALE, sizeof *sv);
	struct mcpc *echo[NSCALE] = { 0 };
	struct inst in[NSCALE], empty;
	char err[512];
	int rc = sv ? 0 : fail(b, -ENOMEM, "out of memory");
	memset(in, 0, sizeof in);
	memset(&empty, 0, sizeof empty);
	for (size_t k = 0; rc == 0 && k < NSCALE; k++) {
		char tag[32];
		snprintf(tag, sizeof tag, "scale-%u", scale_sizes[k]);
		if ((rc = inst_prepare(b, &in[k], tag, 4, 1000)) == 0 &&
		    (rc = jgen_restart_state(in[k].state, "count", scale_sizes[k], "hold", "{}", 0, err, sizeof err)) < 0)
			fail(b, rc, "generating the journal: %s", err);
	}
	/* What start-up costs with nothing to replay, for reading the small sizes. */
	double empty_ms[MAX_ROUNDS], empty_kb[MAX_ROUNDS];
	if (rc == 0)
		rc = inst_prepare(b, &empty, "scale-empty", 4, 1000);
	for (int r = 0; rc == 0 && r < b->rounds; r++) {
		double secs;
		if ((rc = first_answer(b, &empty, &secs)) < 0)
			break;
		long kb = 0;
		rc = settled_rss(b, empty.c, &kb);
		inst_stop(&empty);
		if (rc < 0)
			break;
		empty_ms[r] = secs * 1e3;
		empty_kb[r] = (double)kb;
		for (size_t k = 0; rc == 0 && k < NSCALE; k++)
			rc = scale_round(b, &in[k], scale_sizes[k], r, &echo[k], &sv[k]);
	}
	for (size_t k = 0; rc == 0 && k < NSCALE; k++) {
		char name[200], label[72];
		unsigned n = scale_sizes[k];
		int big = n == 100000;
		snprintf(name, sizeof name, "start-up to the first answer, %u finished tasks (%.1f MiB journal; "
		         "%.0f ms with an empty state dir)", n, median(sv[k].bytes, b->rounds) / 1024.0,
		         median(empty_ms, b->rounds));
		snprintf(label, sizeof label, "start-up, %uk tasks", n / 1000);
		report_rounds(b, label, name, sv[k].start, "ms", sv[k].scan, "ms read()+crc32c of the journal", b->rounds,
		              no_goal);
		snprintf(name, sizeof name, "durable_task_list first page, %u tasks (median of %d calls)", n, LIST_SAMPLES);
		snprintf(label, sizeof label, "list, %uk tasks", n / 1000);
		report_rounds(b, label, name, sv[k].list, "ms", sv[k].echo, "ms pipe round trip of the same bytes",
		              b->rounds, no_goal);
		snprintf(name, sizeof name, "forkpoint ls, %u tasks (output to /dev/null)", n);
		snprintf(label, sizeof label, "forkpoint ls, %uk tasks", n / 1000);
		report_rounds(b, label, name, sv[k].ls, "ms", sv[k].scan_ls, "ms read()+crc32c of the journal", b->rounds,
		              big ? (struct goal){ RATIO_AT_MOST, 3 } : no_goal);
		double per[MAX_ROUNDS], dur[MAX_ROUNDS];
		for (int r = 0; r < b->rounds; r++) {
			per[r] = (sv[k].rss_up[r] - empty_kb[r]) / n;
			dur[r] = sv[k].bytes[r] / n;
		}
		snprintf(name, sizeof name, "supervisor RSS per task after start-up, %u generated tasks (against a fresh "
		         "supervisor; their records hold no sandbox description)", n);
		snprintf(label, sizeof label, "RSS per task after start-up, %uk generated", n / 1000);
		report_rounds(b, label, name, per, "KiB", dur, "KiB of journal per task", b->rounds, no_goal);
		snprintf(name, sizeof name, "forkpoint ls peak RSS, %u tasks", n);
		snprintf(label, sizeof label, "forkpoint ls peak RSS, %uk tasks", n / 1000);
		report_rounds(b, label, name, sv[k].rss, "KiB", sv[k].bytes_ls, "KiB of journal", b->rounds, no_goal);
	}
	for (size_t k = 0; k < NSCALE; k++) {
		if (echo[k])
			mcpc_close(echo[k], 2000);
		inst_stop(&in[k]);
	}
	inst_stop(&empty);
	free(sv);
	return rc;
}

/* ---- 7. memory ---------------------------------------------------------------------------------- */

#define MEM_TASKS    1000
#define MEM_ROUNDS   3
#define MEM_RUNNING  50

static const char hold_params[] = "{\"name\":\"hold\",\"arguments\":{\"seconds\":600}}";

static int journal_kib(struct bench *b, const char *state, double *kib)
{
	uint64_t recs, bytes;
	double secs;
	int rc = base_scan_journal(state, &recs, &bytes, &secs);
	if (rc < 0)
		return fail(b, rc, "scanning the journal: %s", strerror(-rc));
	*kib = (double)bytes / 1024.0;
	return 0;
}

/* One round: a fresh `default` supervisor runs one task (one-off costs paid), then MEM_TASKS
 * more; live = the RSS growth per task.  Restarted on that state, against a fresh supervisor
 * on an empty state dir: after restart = the RSS difference per task.  *dur: the journal bytes
 * per task, the durable state the RSS is there to hold. */
static int memory_round(struct bench *b, int r, double *live, double *restarted, double *dur)
{
	struct inst in, empty;
	char tag[32], id[33];
	long idle = 0, after = 0, fresh = 0, back = 0;
	double j0 = 0, j1 = 0, secs;
	unsigned done;
	memset(&empty, 0, sizeof empty);
	snprintf(tag, sizeof tag, "memory-%d", r);
	int rc = inst_prepare_sandbox(b, &in, tag, 4, 100000, "{\"profile\": \"default\"}");
	snprintf(tag, sizeof tag, "memory-empty-%d", r);
	if (rc == 0)
		rc = inst_prepare_sandbox(b, &empty, tag, 4, 100000, "{\"profile\": \"default\"}");
	if (rc == 0 && (rc = inst_start(b, &in)) == 0 && (rc = create_task(b, in.c, count_params, id)) == 0 &&
	    (rc = wait_completed(b, in.c, id, 30)) == 0 && (rc = settled_rss(b, in.c, &idle)) == 0)
		rc = journal_kib(b, in.state, &j0);
	if (rc == 0 && (rc = create_pipelined(b, in.c, count_params, MEM_TASKS, 0, WINDOW, &done, &secs)) == 0 &&
	    (rc = wait_idle(b, in.c, 180000, 50)) == 0 && (rc = settled_rss(b, in.c, &after)) == 0)
		rc = journal_kib(b, in.state, &j1);
	inst_stop(&in);
	if (rc == 0 && (rc = inst_start(b, &empty)) == 0 && (rc = settled_rss(b, empty.c, &fresh)) == 0 &&
	    (rc = inst_start(b, &in)) == 0)
		rc = settled_rss(b, in.c, &back);
	inst_stop(&in);
	inst_stop(&empty);
	if (rc == 0) {
		*live = (double)(after - idle) / MEM_TASKS;
		*restarted = (double)(back - fresh) / (MEM_TASKS + 1);
		*dur = (j1 - j0) / MEM_TASKS;
	}
	return rc;
}

static int fig_memory(struct bench *b)
{
	double live[MAX_ROUNDS], back[MAX_ROUNDS], dur[MAX_ROUNDS];
	int n = b->rounds < MEM_ROUNDS ? b->rounds : MEM_ROUNDS, rc = 0;
	for (int r = 0; rc == 0 && r < n; r++)
		rc = memory_round(b, r, &live[r], &back[r], &dur[r]);
	if (rc < 0)
		return rc;
	char name[200];
	snprintf(name, sizeof name, "supervisor RSS per retained task, live (%d finished default-profile tasks, "
	         "%d rounds; goal <= 1 KiB)", MEM_TASKS, n);
	report_rounds(b, "RSS per retained task, live", name, live, "KiB", dur, "KiB of journal per task", n,
	              (struct goal){ VALUE_AT_MOST, 1.0 });
	snprintf(name, sizeof name, "supervisor RSS per retained task, after a restart (against a fresh supervisor; "
	         "goal <= 1 KiB)");
	report_rounds(b, "RSS per retained task, after restart", name, back, "KiB", dur, "KiB of journal per task", n,
	              (struct goal){ VALUE_AT_MOST, 1.0 });
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
	double per[MAX_ROUNDS], init[MAX_ROUNDS], plain[MAX_ROUNDS];
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
		per[r] = (double)(i1 - i0) / MEM_RUNNING;
	}
	if (rc == 0) {
		char name[160];
		snprintf(name, sizeof name, "supervisor RSS per running job, profile default%s (%d sleepers)",
		         degraded ? " (degraded on this host)" : "", MEM_RUNNING);
		report_absolute(b, "supervisor RSS per running job", name, per, "KiB", b->rounds,
		                "a parent holding a plain child grows by next to nothing, so no floor divides it", no_goal);
		report_rounds(b, "sandbox init per running job", "sandbox init per running job, private memory", init, "KiB",
		              plain, "KiB private of the job program run by posix_spawn", b->rounds, no_goal);
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
		report_rounds(b, "upload", "file upload through the transfer tools (64 MiB, 256 KiB chunks, one call at a time)",
		              up, "MiB/s", up_base, "MiB/s base64 decode+sha256", b->rounds, (struct goal){ RATIO_AT_LEAST, 0.5 });
		report_rounds(b, "download", "file download through the transfer tools (64 MiB, 256 KiB chunks, one call at a "
		              "time)", down, "MiB/s", down_base, "MiB/s base64 encode+sha256", b->rounds,
		              (struct goal){ RATIO_AT_LEAST, 0.5 });
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
	{ "get-progress", fig_get_progress },
	{ "throughput-none", fig_throughput_none },
	{ "throughput-default", fig_throughput_default },
	{ "throughput-strict", fig_throughput_strict },
	{ "throughput-scale", fig_throughput_scale },
	{ "latency", fig_latency },
	{ "acks", fig_acks },
	{ "replay", fig_replay },
	{ "scale", fig_scale },
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
	printf("Every figure is divided by a floor of the same kind of work, measured in this run on this\n"
	       "machine: a raw append+fdatasync, a pipe round trip of the same bytes (an echo process), a\n"
	       "plain posix_spawn and bubblewrap with the same namespaces, a raw read+CRC of the same journal,\n"
	       "the journal bytes a task costs, a plain process's memory, base64+sha256 in-process.  Figure\n"
	       "and floor alternate over %d rounds of %.1f s; each is shown as median [min..max] of the rounds,\n"
	       "the ratio (figure/floor) as the median [min..max] of the per-round ratios.  Rates: 1.00 = as\n"
	       "fast as the floor, higher is better; times and memory: a multiple of the floor, lower is better.\n"
	       "A figure with no such floor says \"absolute\".\n\n",
	       b->rounds, b->seconds);
	fflush(stdout);
}

/* The table at the end: one row a figure, its ratio, and the goal where the plan sets one. */
static void summary(const struct bench *b)
{
	printf("\nsummary (ratio = figure/floor, medians; goals from the performance plan)\n");
	printf("%-50s %-20s %-8s %-14s %s\n", "figure", "value", "ratio", "goal", "");
	for (int i = 0; i < b->nrows; i++) {
		const struct row *r = &b->rows[i];
		char ratio[32] = "-", goal[40] = "-";
		const char *met = "";
		if (r->ratio >= 0)
			ratio_text(ratio, sizeof ratio, r->ratio);
		if (r->goal.kind == RATIO_AT_LEAST)
			snprintf(goal, sizeof goal, "ratio >= %g", r->goal.v);
		else if (r->goal.kind == RATIO_AT_MOST)
			snprintf(goal, sizeof goal, "ratio <= %g", r->goal.v);
		else if (r->goal.kind == VALUE_AT_MOST)
			snprintf(goal, sizeof goal, "<= %g", r->goal.v);
		if (r->goal.kind != NO_GOAL)
			met = r->met == -2 ? "not measured" : r->met ? "met" : "not met";
		printf("%-50s %-20s %-8s %-14s %s\n", r->label, r->value, ratio, goal, met);
	}
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
	fputs("usage: bench --build DIR --work DIR [--seconds S] [--rounds N] [--only NAME]... [--list]\n"
	      "       bench --echo TEMPLATE | --peak-rss FILE PROGRAM...   (modes the bench starts itself)\n",
	      stderr);
	return 2;
}

/* bwrap on PATH, run once on the bench's own job: b->bwrap set if it works here, else
 * b->bwrap_why says why the bubblewrap rows are skipped. */
static void probe_bwrap(struct bench *b)
{
	const char *path = getenv("PATH");
	char cand[PATH_MAX], errpath[PATH_MAX + 32];
	b->bwrap[0] = 0;
	snprintf(b->bwrap_why, sizeof b->bwrap_why, "bubblewrap (bwrap) is not installed: scripts/deps.sh --bench "
	         "installs it");
	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");
		if (n && n < sizeof cand - 8) {
			snprintf(cand, sizeof cand, "%.*s/bwrap", (int)n, p);
			if (access(cand, X_OK) == 0)
				break;
		}
		cand[0] = 0;
		p += n + (p[n] == ':');
	}
	if (!cand[0])
		return;
	struct base_bwrap bw;
	char *prog[] = { b->plain_count, (char *)"0", NULL };
	double secs;
	int status = 0, rc;
	snprintf(errpath, sizeof errpath, "%s/bwrap-probe.log", b->work);
	if ((rc = base_bwrap_cmd(cand, prog, &bw)) == 0)
		rc = base_run(bw.argv, errpath, &secs, NULL, &status);
	if (rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		snprintf(b->bwrap, sizeof b->bwrap, "%s", cand);
		return;
	}
	char line[200] = "";
	FILE *f = fopen(errpath, "re");
	if (f) {
		if (!fgets(line, sizeof line, f))
			line[0] = 0;
		fclose(f);
	}
	line[strcspn(line, "\n")] = 0;
	snprintf(b->bwrap_why, sizeof b->bwrap_why, "%s cannot run here: %s", cand,
	         rc < 0 ? strerror(-rc) : line[0] ? line : "it failed");
}

static int parse_args(int argc, char **argv, struct bench *b, const char **build, const char **work,
                      const char **only, size_t *nonly)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--list") == 0) {
			for (size_t k = 0; k < NFIGURES; k++)
				puts(figures[k].name);
			exit(0);
		} else if (i + 1 >= argc) {
			return -1;
		} else if (strcmp(argv[i], "--build") == 0) {
			*build = argv[++i];
		} else if (strcmp(argv[i], "--work") == 0) {
			*work = argv[++i];
		} else if (strcmp(argv[i], "--seconds") == 0) {
			b->seconds = strtod(argv[++i], NULL);
		} else if (strcmp(argv[i], "--rounds") == 0) {
			b->rounds = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--only") == 0 && *nonly < NFIGURES) {
			only[(*nonly)++] = argv[++i];
		} else {
			return -1;
		}
	}
	for (size_t k = 0; k < *nonly; k++) {
		size_t f = 0;
		while (f < NFIGURES && strcmp(figures[f].name, only[k]) != 0)
			f++;
		if (f == NFIGURES) {
			fprintf(stderr, "bench: no figure named '%s' (--list shows them)\n", only[k]);
			return -1;
		}
	}
	return *build && *work && b->seconds > 0 && b->rounds >= 1 && b->rounds <= MAX_ROUNDS ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct bench b;
	const char *build = NULL, *work = NULL;
	const char *only[NFIGURES + 1];
	size_t nonly = 0;
	if (argc == 3 && strcmp(argv[1], "--echo") == 0)
		return echo_main(argv[2]);
	if (argc >= 4 && strcmp(argv[1], "--peak-rss") == 0)
		return base_peak_main(argv + 2);
	memset(&b, 0, sizeof b);
	b.seconds = 1.0;
	b.rounds = 5;
	if (parse_args(argc, argv, &b, &build, &work, only, &nonly) < 0)
		return usage();
	if (!realpath(work, b.work)) {
		fprintf(stderr, "bench: work dir %s: %s\n", work, strerror(errno));
		return 2;
	}
	if (!realpath("/proc/self/exe", b.self) || !realpath(build, b.build) ||
	    resolve(b.bin, b.build, "forkpoint") < 0 || resolve(b.plain_count, b.build, "examples/plain-count") < 0 ||
	    resolve(b.sleeper, b.build, "tests/helpers/sleeper") < 0 ||
	    resolve(b.stamp, b.build, "tests/bench-jobs/stamp") < 0 ||
	    resolve(b.progress, b.build, "tests/bench-jobs/progress") < 0)
		return 2;

	/* A server that dies mid-figure must fail that figure, not kill the whole run. */
	signal(SIGPIPE, SIG_IGN);
	probe_bwrap(&b);
	header(&b);
	if (!b.bwrap[0])
		printf("bubblewrap rows are skipped: %s\n\n", b.bwrap_why);
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
	summary(&b);
	printf("\n(%.0f s)\n", base_now() - t0);
	return failed;
}
