/* tests/fuzz/fuzz_rpc.c — libFuzzer target for the MCP server: the input is newline-separated
 * JSON-RPC lines, fed one by one through a pipe to the real dispatch of a whole supervisor
 * built in-process (event loop, task table, journal in a scratch state dir, file transfers,
 * server), with tools that run /bin/true, /bin/false and /bin/sleep and, when it was built
 * next to this program, the example job that asks a question.
 *
 * Ids a client could only learn from an answer are spliced in: "$T" in a line becomes the
 * last taskId (or requestState) seen in the output, "$H" the last transfer handle, "$U" the
 * last forkpoint:// URI and "$Q" the last questionId, so one input can create a task and
 * then poll, answer or cancel it.  After each line the loop runs until the jobs it started
 * have settled (bounded); after the last the input is closed, which stops the supervisor as
 * end of stdin does, and everything is torn down (tasks_free kills leftover jobs).
 *
 * Time per input is bounded in total, not only per line: libFuzzer's inputs reach 4096 bytes,
 * so 4096 lines of LINE_BUDGET_MS each could wait a minute while jobs keep running, and each
 * of ~60 tool calls costs tens of ms of spawning on a loaded machine.  Lines are sent only
 * until INPUT_BUDGET_MS has passed (the rest of the input is dropped, as if it ended there),
 * and no line waits past it; then come FINAL_BUDGET_MS and the teardown.  That keeps every
 * input far inside -timeout=10 even on a busy 2-core machine.
 * -DLINE_BUDGET_MS=0 -DFINAL_BUDGET_MS=0 builds a variant that tears down with jobs running.
 *
 * A second client shares the server: a line that starts with byte 0x01 goes, without that
 * byte, to a second connection (a socketpair, opened on first use), and a line that is just
 * 0x01 closes it, so waits owned by a connection that goes away are exercised too.
 *
 * Must never crash, leak, hang or trip a sanitizer.  Every line the server writes must be one
 * JSON-RPC 2.0 object (a request, notification, result or error) in well-formed UTF-8,
 * whatever the input.  Built by `make fuzz`. */
#include "supervisor/core/config.h"
#include "supervisor/core/loop.h"
#include "supervisor/core/persist.h"
#include "state/store.h"
#include "runner/sandbox/sandbox.h"
#include "supervisor/mcp/server.h"
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "tests/fuzz/fuzz_utf8.h"
#include "tests/unit/check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef LINE_BUDGET_MS
#define LINE_BUDGET_MS  15    /* per input line: time for the jobs it started to settle */
#endif
#ifndef FINAL_BUDGET_MS
#define FINAL_BUDGET_MS 40    /* after the last line */
#endif
#define INPUT_BUDGET_MS 2000  /* all of one input's lines together */
#define REMEMBERED      256   /* longest id, URI or question id spliced back into input */

/* What lives for the whole process (libFuzzer gives the target no context argument): the
 * scratch folder, the config, the host's sandbox probe and /dev/null for the log. */
static struct {
	char scratch[PATH_MAX];
	char state[PATH_MAX + 16];
	char files[PATH_MAX + 16];
	struct config *cfg;
	struct sandbox *sandbox;
	char *bin_dir;
	int null_fd;
	int trace;          /* FUZZ_RPC_TRACE set: echo every line sent and received on stderr */
} env;

/* Output of one connection read but not yet split into lines. */
struct stream {
	int fd;
	char *buf;
	size_t len, cap;
};

/* One input's supervisor and the client's ends of its connections. */
struct run {
	struct supervisor sv;
	struct store_mem_medium *medium;        /* the task store: in memory, fresh per input */
	int in_w;
	struct stream out;      /* the primary connection's output */
	struct stream side;     /* the second connection (fd -1 while there is none): both ways */
	char task[REMEMBERED], handle[REMEMBERED], uri[REMEMBERED], question[REMEMBERED];
	int64_t wait_end;       /* loop_now() past which no line is sent or waited for */
};

static void cleanup(void)
{
	if (env.scratch[0] != '\0')
		check_rm_rf(env.scratch);
}

static const char config_fmt[] =
	"{\"server\": {\"name\": \"fuzz\", \"maxConcurrent\": 2, \"maxQueue\": 4, \"fileRoots\": [\"%s\"],"
	"  \"cancelGraceSeconds\": 0.05, \"logMaxBytes\": 4096, \"resultInlineBytes\": 256},"
	" \"tools\": ["
	"  {\"name\": \"quick\", \"title\": \"Quick\", \"description\": \"exits at once\","
	"   \"inputSchema\": {\"type\": \"object\", \"properties\": {"
	"     \"x\": {\"type\": \"string\", \"maxLength\": 40, \"default\": \"a\"},"
	"     \"n\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9},"
	"     \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 3}},"
	"     \"additionalProperties\": false},"
	"   \"annotations\": {\"readOnlyHint\": true},"
	"   \"command\": [\"/bin/true\", \"{x}\", \"n={n}\"], \"ttlSeconds\": 60, \"sandbox\": {\"profile\": \"none\"}},"
	"  {\"name\": \"wait\", \"inputSchema\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"string\"}}},"
	"   \"outputSchema\": {\"type\": \"object\"},"
	"   \"command\": [\"/bin/true\"], \"mode\": \"sync\", \"sandbox\": {\"profile\": \"none\"}},"
	"  {\"name\": \"nap\", \"inputSchema\": {\"type\": \"object\", \"properties\": {"
	"     \"s\": {\"type\": \"string\", \"enum\": [\"0\", \"0.002\", \"0.01\"], \"default\": \"0.002\"}}},"
	"   \"command\": [\"/bin/sleep\", \"{s}\"], \"mode\": \"auto\", \"waitSeconds\": 0.005,"
	"   \"timeoutSeconds\": 1, \"sandbox\": {\"profile\": \"none\"}},"
	"  {\"name\": \"flaky\", \"command\": [\"/bin/false\"], \"retries\": 1, \"resume\": \"restart\","
	"   \"sandbox\": {\"profile\": \"none\"}},"
	"  {\"name\": \"must\", \"command\": [\"/bin/true\"], \"taskSupport\": \"required\","
	"   \"sandbox\": {\"profile\": \"none\"}},"
	"  {\"name\": \"never\", \"command\": [\"/bin/true\"], \"mode\": \"auto\", \"waitSeconds\": 0,"
	"   \"taskSupport\": \"forbidden\", \"sandbox\": {\"profile\": \"none\"}},"
	"  {\"name\": \"take\", \"inputSchema\": {\"type\": \"object\", \"properties\": {"
	"     \"input\": {\"type\": \"string\", \"format\": \"forkpoint-upload\"}}, \"required\": [\"input\"]},"
	"   \"command\": [\"/bin/true\", \"{input}\"], \"mode\": \"sync\", \"sandbox\": {\"profile\": \"none\"}}"
	"%s]}";

/* The example job, when present: asks whether to add an appendix after its first section. */
static const char ask_fmt[] =
	", {\"name\": \"%s\", \"inputSchema\": {\"type\": \"object\", \"properties\": {"
	"     \"topic\": {\"type\": \"string\", \"default\": \"t\"},"
	"     \"sections\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3, \"default\": 2},"
	"     \"delayMs\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 5, \"default\": 0},"
	"     \"ask\": {\"type\": \"boolean\", \"default\": true},"
	"     \"failAt\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3}},"
	"     \"additionalProperties\": false},"
	"   \"command\": [\"%s\"], \"mode\": \"%s\", \"waitSeconds\": 0.02, \"retries\": 1,"
	"   \"sandbox\": {\"profile\": \"none\"}}";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char job[PATH_MAX], tools[2 * PATH_MAX + 2048] = "", err[512];
	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(env.scratch, sizeof env.scratch, "%s/fp-fuzz-rpc-XXXXXX", base);
	if (mkdtemp(env.scratch) == NULL)
		abort();
	atexit(cleanup);
	snprintf(env.state, sizeof env.state, "%s/state", env.scratch);
	snprintf(env.files, sizeof env.files, "%s/files", env.scratch);
	env.trace = getenv("FUZZ_RPC_TRACE") != NULL;
	env.null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (env.null_fd < 0)
		abort();

	/* build/fuzz/fuzz_rpc finds build/fuzz/report-generator beside itself. */
	char *self = realpath("/proc/self/exe", NULL);
	char *slash = self ? strrchr(self, '/') : NULL;
	if (slash)
		*slash = '\0';
	snprintf(job, sizeof job, "%s/report-generator", self ? self : ".");
	env.bin_dir = self;
	if (access(job, X_OK) == 0) {
		int n = snprintf(tools, sizeof tools, ask_fmt, "ask", job, "sync");
		snprintf(tools + n, sizeof tools - (size_t)n, ask_fmt, "askbg", job, "task");
	} else {
		fprintf(stderr, "fuzz_rpc: %s not found; fuzzing without a job that asks questions\n", job);
	}
	size_t cap = sizeof config_fmt + sizeof env.files + sizeof tools;
	char *text = malloc(cap);
	if (!text)
		abort();
	int len = snprintf(text, cap, config_fmt, env.files, tools);
	if (config_parse(text, (size_t)len, env.scratch, &env.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "fuzz_rpc: config: %s\n", err);
		abort();
	}
	free(text);
	/* The probe runs trial jobs; once per process is enough. */
	if (sandbox_new(&env.sandbox) < 0)
		abort();
	return 0;
}

/* ---- output: every line must be one JSON-RPC message ------------------------------------- */

static void fail_line(const char *why, const char *line, size_t len)
{
	fprintf(stderr, "fuzz_rpc: %s: %.*s\n", why, (int)(len > 2000 ? 2000 : len), line);
	__builtin_trap();
}

static void remember(char *slot, const cJSON *v, size_t exact_len, const char *prefix)
{
	if (!cJSON_IsString(v))
		return;
	size_t n = strlen(v->valuestring);
	if ((exact_len && n != exact_len) || n >= REMEMBERED ||
	    (prefix && strncmp(v->valuestring, prefix, strlen(prefix)) != 0))
		return;
	memcpy(slot, v->valuestring, n + 1);
}

/* Learn the ids a client would take from the answers, for "$T" and friends. */
static void harvest(struct run *r, const cJSON *j)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, j) {
		if (c->string) {
			if (strcmp(c->string, "taskId") == 0 || strcmp(c->string, "requestState") == 0)
				remember(r->task, c, 32, NULL);
			else if (strcmp(c->string, "handle") == 0)
				remember(r->handle, c, 32, NULL);
			else if (strcmp(c->string, "uri") == 0 || strcmp(c->string, "resultUri") == 0)
				remember(r->uri, c, 0, "forkpoint://");
			else if (strcmp(c->string, "questionId") == 0)
				remember(r->question, c, 0, NULL);
			else if (strcmp(c->string, "inputRequests") == 0 && c->child && c->child->string) {
				/* keyed by question id */
				cJSON key = { .type = cJSON_String, .valuestring = c->child->string };
				remember(r->question, &key, 0, NULL);
			}
		}
		if (cJSON_IsObject(c) || cJSON_IsArray(c))
			harvest(r, c);
	}
}

static void check_line(struct run *r, const char *line, size_t len)
{
	const char *end = NULL;
	if (env.trace)
		fprintf(stderr, "<- %.*s\n", (int)len, line);
	cJSON *j = cJSON_ParseWithLengthOpts(line, len, &end, 0);
	if (!j || end != line + len)
		fail_line("output line is not one JSON value", line, len);
	if (!fuzz_utf8_valid((const uint8_t *)line, len))
		fail_line("output line is not UTF-8", line, len);
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "jsonrpc");
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(j, "method");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
	const cJSON *result = cJSON_GetObjectItemCaseSensitive(j, "result");
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(j, "error");
	if (!cJSON_IsObject(j) || !cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0)
		fail_line("not a JSON-RPC 2.0 object", line, len);
	if (method) {
		if (!cJSON_IsString(method) || result || error)
			fail_line("malformed request or notification", line, len);
	} else {
		if (!id || !(cJSON_IsString(id) || cJSON_IsNumber(id) || cJSON_IsNull(id)) || !result == !error)
			fail_line("malformed response", line, len);
		if (error && (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(error, "code")) ||
		              !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(error, "message"))))
			fail_line("malformed error", line, len);
		if (result && !cJSON_IsObject(result))
			fail_line("result is not an object", line, len);
	}
	harvest(r, j);
	cJSON_Delete(j);
}

/* Read whatever the server has written to one connection and check each complete line. */
static void pump_stream(struct run *r, struct stream *o)
{
	for (;;) {
		if (o->cap - o->len < 65536) {
			size_t cap = o->cap ? o->cap * 2 : 131072;
			char *p = realloc(o->buf, cap);
			if (!p)
				abort();
			o->buf = p;
			o->cap = cap;
		}
		ssize_t n = o->fd >= 0 ? read(o->fd, o->buf + o->len, o->cap - o->len) : 0;
		if (n <= 0)
			break;
		o->len += (size_t)n;
	}
	size_t off = 0;
	for (;;) {
		char *nl = memchr(o->buf + off, '\n', o->len - off);
		if (!nl)
			break;
		check_line(r, o->buf + off, (size_t)(nl - (o->buf + off)));
		off = (size_t)(nl - o->buf) + 1;
	}
	memmove(o->buf, o->buf + off, o->len - off);
	o->len -= off;
}

static void pump(struct run *r)
{
	pump_stream(r, &r->out);
	pump_stream(r, &r->side);
}

/* ---- driving the loop -------------------------------------------------------------------- */

/* The end of every turn, as in `forkpoint mcp`: commit, then release what waited for it. */
static void on_turn(struct loop *l, void *arg)
{
	struct supervisor *sv = arg;
	(void)l;
	if (persist_commit(sv->persist) < 0)
		return;
	tasks_release(sv->tasks);
	server_release(sv->server);
	server_flush(sv->server);
	persist_maybe_compact(sv->persist);
}

static void turn(struct run *r, int wait_ms)
{
	loop_run_once(r->sv.loop, wait_ms);
	pump(r);
}

/* A job is running and has not yet finished or asked.  Queued tasks do not count: they start
 * only when a running job ends, and jobs waiting for an answer may hold every slot. */
static int busy(struct supervisor *sv)
{
	for (struct task *t = tasks_newest(sv->tasks); t; t = t->next)
		if (t->status == TASK_WORKING && t->job)
			return 1;
	return 0;
}

/* Turn until no job runs or until now + budget_ms, but not past `cap` (monotonic ms). */
static void settle(struct run *r, int budget_ms, int64_t cap)
{
	int64_t end = loop_now() + budget_ms;
	if (end > cap)
		end = cap;
	turn(r, 0);
	turn(r, 0);
	while (!loop_stopped(r->sv.loop) && busy(&r->sv) && loop_now() < end)
		turn(r, 2);
	turn(r, 0);
}

static void send_bytes(struct run *r, int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			abort();
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (loop_stopped(r->sv.loop)) {
			return;       /* nobody will read the rest */
		} else {
			turn(r, 1);   /* the pipe is full: let the server read */
		}
	}
}

/* The second connection: opened on first use (non-primary: its end of input only ends it). */
static int side_fd(struct run *r)
{
	int sp[2];
	if (r->side.fd >= 0)
		return r->side.fd;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	fcntl(sp[0], F_SETFL, O_NONBLOCK);
	if (server_attach(r->sv.server, sp[1], sp[1], 0) < 0)
		abort();
	r->side.fd = sp[0];
	return sp[0];
}

static void side_close(struct run *r)
{
	pump_stream(r, &r->side);
	if (r->side.fd >= 0)
		close(r->side.fd);
	r->side.fd = -1;
	r->side.len = 0;
	settle(r, LINE_BUDGET_MS, r->wait_end);
}

/* One input line with its "$X" references replaced, then time for what it started. */
static void send_line(struct run *r, const char *line, size_t len, int newline)
{
	static const char zero[] = "00000000000000000000000000000000";
	size_t start = 0;
	int fd = r->in_w;
	if (len > 0 && line[0] == '\x01') {
		if (len == 1) {
			side_close(r);
			return;
		}
		fd = side_fd(r);
		line++;
		len--;
	}
	for (size_t i = 0; i + 1 < len; i++) {
		if (line[i] != '$')
			continue;
		const char *sub = NULL;
		switch (line[i + 1]) {
		case 'T': sub = r->task[0] ? r->task : zero; break;
		case 'H': sub = r->handle[0] ? r->handle : zero; break;
		case 'U': sub = r->uri[0] ? r->uri : "forkpoint://tasks/00000000000000000000000000000000/result"; break;
		case 'Q': sub = r->question; break;
		default: continue;
		}
		send_bytes(r, fd, line + start, i - start);
		send_bytes(r, fd, sub, strlen(sub));
		start = i + 2;
		i++;
	}
	send_bytes(r, fd, line + start, len - start);
	if (env.trace)
		fprintf(stderr, "-> %.*s\n", (int)len, line);
	if (newline)
		send_bytes(r, fd, "\n", 1);
	settle(r, LINE_BUDGET_MS, r->wait_end);
}

static int start(struct run *r)
{
	struct supervisor *sv = &r->sv;
	char err[512];
	int in[2] = { -1, -1 }, out[2] = { -1, -1 };

	check_rm_rf(env.state);
	check_rm_rf(env.files);
	check_mkdir(env.state);
	check_mkdir(env.files);
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/hello.txt", env.files);
	check_put(path, "hello, world\n", 13);

	fplog_init(&sv->log, env.null_fd, FPLOG_DEBUG);
	sv->cfg = env.cfg;
	sv->bin_dir = env.bin_dir;
	sv->sandbox = env.sandbox;
	if (!(sv->state_dir = strdup(env.state)))
		return -1;
	/* The memory backend: the journal has its own target (fuzz_journal), and an fsync per
	 * input would slow this one down for nothing. */
	struct store *store;
	if (!(r->medium = store_mem_medium_new()) || store_mem_new(r->medium, &store) < 0)
		return -1;
	const struct supervisor_opts so = { .store = store };
	if (supervisor_open(sv, &so, err, sizeof err) < 0) {
		fprintf(stderr, "fuzz_rpc: %s\n", err);
		return -1;
	}
	if (!(sv->server = server_new(sv)))
		return -1;
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		abort();
	r->in_w = in[1];
	r->out.fd = out[0];
	fcntl(r->in_w, F_SETFL, O_NONBLOCK);
	fcntl(r->out.fd, F_SETFL, O_NONBLOCK);
	/* Primary, like stdio: the end of the input stops the supervisor. */
	if (server_attach(sv->server, in[0], out[1], 1) < 0)
		abort();
	tasks_recover(sv->tasks);
	transfers_recover(sv->transfers);
	loop_set_turn_hook(sv->loop, on_turn, sv);
	return 0;
}

static void stop(struct run *r)
{
	struct supervisor *sv = &r->sv;
	/* As `forkpoint mcp` ends: answers that are durable go out, jobs are killed. */
	if (sv->server && sv->persist && persist_commit(sv->persist) == 0) {
		server_release(sv->server);
		for (int i = 0; i < 4; i++) {
			server_flush(sv->server);
			pump(r);
		}
	}
	server_free(sv->server);
	sv->sandbox = NULL;   /* the process's probe, shared by every input */
	supervisor_close(sv);
	store_mem_medium_free(r->medium);
	r->medium = NULL;
	free(sv->state_dir);
	if (r->in_w >= 0)
		close(r->in_w);
	if (r->out.fd >= 0)
		close(r->out.fd);
	if (r->side.fd >= 0)
		close(r->side.fd);
	free(r->out.buf);
	free(r->side.buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r;
	memset(&r, 0, sizeof r);
	r.in_w = r.out.fd = r.side.fd = -1;
	if (start(&r) < 0)
		abort();

	const char *p = (const char *)data, *end = p + size;
	r.wait_end = loop_now() + INPUT_BUDGET_MS;
	while (p < end && !loop_stopped(r.sv.loop) && loop_now() < r.wait_end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		send_line(&r, p, len, nl != NULL);
		p += len + (nl ? 1 : 0);
	}
	settle(&r, FINAL_BUDGET_MS, INT64_MAX);
	close(r.in_w);
	r.in_w = -1;
	for (int i = 0; i < 8 && !loop_stopped(r.sv.loop); i++)
		turn(&r, 1);
	stop(&r);
	return 0;
}
