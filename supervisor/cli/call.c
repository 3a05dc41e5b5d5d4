/* supervisor/cli/call.c — see call.h. */
#include "supervisor/cli/call.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include "supervisor/mcp/views.h"
#include "proto/jsonrpc.h"
#include "proto/termsafe.h"
#include "proto/io.h"
#include "proto/jsontext.h"

static const char usage_call[] =
	"usage: forkpoint call TOOL ['JSON'] --config FILE [--state DIR] [--raw]\n"
	"       forkpoint call --task ID --config FILE [--state DIR] [--raw]\n"
	"\n"
	"Runs TOOL with the JSON arguments through a real MCP session with forkpoint mcp,\n"
	"showing progress, asking the job's questions here, and printing the result as JSON.\n"
	"--task ID follows a task that already exists (e.g. one interrupted by a crash).\n"
	"Ctrl-C cancels the task.  Exit status: 0 completed, 1 failed or cancelled, 130 after Ctrl-C.\n"
	"Text from the job (progress, questions, messages, the result) is shown with control\n"
	"characters escaped, the result JSON with JSON escapes (it parses to the same value);\n"
	"--raw prints it as it is.\n";

struct client {
	pid_t pid;
	int to, from;          /* pipes to the server's stdin / from its stdout */
	struct wbuf in;        /* bytes read, not yet split into lines */
	long next_id;
	int tty;               /* stderr is a terminal: draw a bar */
	int raw;               /* --raw: job text as it is, not escaped */
	int bar_shown;
	char last_msg[512];
};

/* The only state a signal touches.  The handler is installed without SA_RESTART, so Ctrl-C
 * also breaks the poll in read_line with EINTR and the main path can cancel the task. */
static volatile sig_atomic_t interrupted;

static void on_sigint(int s)
{
	(void)s;
	interrupted = 1;
}

/* call is a real MCP client of a real server: it runs "forkpoint mcp" (this same binary,
 * through /proc/self/exe, so the versions always match) on a pair of pipes.  The server ignores
 * SIGINT: Ctrl-C reaches the whole foreground group, and the server must stay up to cancel the
 * task cleanly when this client asks it to. */
static int start_server(struct client *c, const char *config, const char *state)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		/* The server's own log stays out of the way of the bar unless it is a warning. */
		const char *argv[10];
		int n = 0;
		argv[n++] = "forkpoint";
		argv[n++] = "mcp";
		argv[n++] = "--config";
		argv[n++] = config;
		if (state) {
			argv[n++] = "--state";
			argv[n++] = state;
		}
		argv[n++] = "--log-level";
		argv[n++] = "warning";
		argv[n] = NULL;
		signal(SIGINT, SIG_IGN);
		execv("/proc/self/exe", (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->pid = pid;
	c->to = in[1];
	c->from = out[0];
	return 0;
}

/* Read one line from the server; NULL on EOF/error.  Caller frees.
 * Lines are split out of a buffer that keeps what follows the newline, since one read may
 * hold several messages.  The timeout bounds a silent server; an interrupt ends the wait so
 * the caller sees Ctrl-C within one poll. */
static char *read_line(struct client *c, int timeout_ms)
{
	for (;;) {
		unsigned char *start = c->in.data + c->in.off;
		size_t avail = wbuf_pending(&c->in);
		unsigned char *nl = avail ? memchr(start, '\n', avail) : NULL;
		if (nl) {
			size_t len = (size_t)(nl - start);
			char *line = malloc(len + 1);
			if (!line)
				return NULL;
			memcpy(line, start, len);
			line[len] = 0;
			wbuf_consume(&c->in, len + 1);
			return line;
		}
		struct pollfd p = { .fd = c->from, .events = POLLIN };
		int r = poll(&p, 1, timeout_ms);
		if (r < 0 && errno == EINTR) {
			if (interrupted)
				return NULL;
			continue;
		}
		if (r <= 0)
			return NULL;
		char buf[65536];
		ssize_t n = read(c->from, buf, sizeof buf);
		if (n <= 0)
			return NULL;
		if (wbuf_append(&c->in, buf, (size_t)n) < 0)
			return NULL;
	}
}

/* Text from the server, and so perhaps from a job, made safe for the terminal unless --raw
 * (one line: newlines are escaped too).  malloc'd; NULL when out of memory. */
static char *shown(const struct client *c, const char *s)
{
	return c->raw ? strdup(s ? s : "") : termsafe_str(s, 0);
}

/* fputs of before, s as shown(), after. */
static void put_shown(const struct client *c, FILE *f, const char *before, const char *s,
		      const char *after)
{
	char *t = shown(c, s);
	fprintf(f, "%s%s%s", before, t ? t : "?", after);
	free(t);
}

/* The bar lives on one stderr line redrawn with \r and erase-line; it is cleared before any
 * other output so messages never land in the middle of it. */
static void clear_bar(struct client *c)
{
	if (c->tty && c->bar_shown) {
		fputs("\r\033[K", stderr);
		c->bar_shown = 0;
	}
}

/* On a terminal, a 40-column bar with the message cut to whole characters; otherwise (a log
 * file, CI) one line per change of message, so a redirected stderr is not flooded with
 * identical lines. */
static void show_progress(struct client *c, double fraction, const char *msg)
{
	if (!msg)
		msg = "";
	char *safe = shown(c, msg);
	const char *m = safe ? safe : "?";
	if (c->tty) {
		char bar[41];
		int filled = fraction >= 0 ? (int)(fraction * 40 + 0.5) : 0;
		for (int i = 0; i < 40; i++)
			bar[i] = i < filled ? '#' : '.';
		bar[40] = 0;
		if (safe)
			termsafe_cut(safe, 60);   /* whole characters only */
		if (fraction >= 0)
			fprintf(stderr, "\r\033[K[%s] %3d%%  %s", bar, (int)(fraction * 100 + 0.5), m);
		else
			fprintf(stderr, "\r\033[K[%s]  %s", bar, m);
		c->bar_shown = 1;
	} else if (strcmp(msg, c->last_msg) != 0) {
		if (fraction >= 0)
			fprintf(stderr, "progress %3d%% %s\n", (int)(fraction * 100 + 0.5), m);
		else
			fprintf(stderr, "progress %s\n", m);
	}
	free(safe);
	snprintf(c->last_msg, sizeof c->last_msg, "%s", msg);
	fflush(stderr);
}

/* Send a request and wait for its response; notifications seen meanwhile update the bar.
 * Returns the parsed response (caller frees) or NULL.
 * Responses are matched by id; anything else that arrives meanwhile (progress, logs, other
 * notifications) is read and dropped, except that progress redraws the bar.  Ten minutes
 * without a line is taken as a dead server. */
static cJSON *request(struct client *c, const char *method, cJSON *params)
{
	cJSON *id = cJSON_CreateNumber((double)++c->next_id);
	char *line = rpc_request(id, method, params);
	int rc = line ? io_write_full(c->to, line, strlen(line)) : -ENOMEM;
	if (rc == 0)
		rc = io_write_full(c->to, "\n", 1);
	free(line);
	if (rc < 0) {
		cJSON_Delete(id);
		return NULL;
	}
	for (;;) {
		char *l = read_line(c, 600000);
		if (!l) {
			cJSON_Delete(id);
			return NULL;
		}
		cJSON *msg = cJSON_Parse(l);
		free(l);
		if (!msg)
			continue;
		const cJSON *mid = cJSON_GetObjectItem(msg, "id");
		const cJSON *mm = cJSON_GetObjectItem(msg, "method");
		if (cJSON_IsString(mm) && strcmp(mm->valuestring, "notifications/progress") == 0) {
			const cJSON *p = cJSON_GetObjectItem(msg, "params");
			const cJSON *pr = cJSON_GetObjectItem(p, "progress");
			const cJSON *ms = cJSON_GetObjectItem(p, "message");
			show_progress(c, cJSON_IsNumber(pr) ? pr->valuedouble : -1,
			              cJSON_IsString(ms) ? ms->valuestring : "");
		}
		if (!mm && cJSON_IsNumber(mid) && mid->valuedouble == id->valuedouble) {
			cJSON_Delete(id);
			return msg;
		}
		cJSON_Delete(msg);
	}
}

/* Fire and forget: a notification has no answer to wait for, and a write error shows up on
 * the next request. */
static void notify(struct client *c, const char *method)
{
	char *line = rpc_notification(method, NULL);
	if (line) {
		(void)!io_write_full(c->to, line, strlen(line));
		(void)!io_write_full(c->to, "\n", 1);
	}
	free(line);
}

/* Every call carries a progress token so the server streams notifications/progress while a
 * sync call runs. */
static cJSON *call_tool(struct client *c, const char *name, cJSON *args)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "name", name);
	cJSON_AddItemToObject(p, "arguments", args);
	cJSON_AddNumberToObject(cJSON_AddObjectToObject(p, "_meta"), "progressToken", 1);
	cJSON *resp = request(c, "tools/call", p);
	return resp;
}

/* The durable_task_* facade tools, which any MCP client can call: call follows a task the
 * same way a model does, not through a side door. */
static cJSON *facade(struct client *c, const char *tool, const char *task_id, const char *response)
{
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "taskId", task_id);
	if (response)
		cJSON_AddStringToObject(a, "response", response);
	return call_tool(c, tool, a);
}

static const cJSON *structured(const cJSON *resp)
{
	return cJSON_GetObjectItem(cJSON_GetObjectItem(resp, "result"), "structuredContent");
}

/* JSON on stdout; its strings made safe for the terminal with JSON's own escapes unless
 * --raw, so a program reading it gets the same value either way. */
static void print_json(const struct client *c, const cJSON *v)
{
	char *s = jsontext_pretty(v);
	char *safe = s && !c->raw ? termsafe_str(s, TERMSAFE_JSON | TERMSAFE_TEXT) : NULL;
	if (c->raw ? s != NULL : safe != NULL)
		printf("%s\n", c->raw ? s : safe);
	free(safe);
	free(s);
	fflush(stdout);
}

/* The choice a typed line picks: the choice with exactly that text, else the n-th choice when the
 * line is a number n in 1..count (so "2" picks the second of [yes/no] unless a choice is
 * literally "2").  NULL when it picks none. */
static const char *pick_choice(const cJSON *choices, const char *line)
{
	const cJSON *ch;
	cJSON_ArrayForEach(ch, choices)
		if (cJSON_IsString(ch) && strcmp(ch->valuestring, line) == 0)
			return ch->valuestring;
	char *end;
	errno = 0;
	long n = strtol(line, &end, 10);
	if (errno || end == line || *end != '\0' || n < 1 || n > cJSON_GetArraySize(choices))
		return NULL;
	ch = cJSON_GetArrayItem(choices, (int)n - 1);
	return cJSON_IsString(ch) ? ch->valuestring : NULL;
}

/* Ask a question on the terminal.  Returns a malloc'd answer or NULL.  After an answer that picks
 * no choice, the prompt itself carries the hint (a separate hint line could be drawn over by the
 * progress bar or lost above the prompt), and at most five tries are made. */
static char *ask_user(struct client *c, const cJSON *req)
{
	const cJSON *prompt = cJSON_GetObjectItem(req, "prompt");
	const cJSON *choices = cJSON_GetObjectItem(req, "choices");
	int n_choices = cJSON_IsArray(choices) ? cJSON_GetArraySize(choices) : 0;
	clear_bar(c);
	FILE *tty = fopen("/dev/tty", "r+");
	FILE *in = tty ? tty : stdin;
	FILE *out = tty ? tty : stderr;
	char line[1024];
	char *answer = NULL;
	for (int tries = 0; tries < 5 && !answer; tries++) {
		put_shown(c, out, "? ", cJSON_IsString(prompt) ? prompt->valuestring : "(no prompt)", "");
		if (n_choices > 0) {
			fputs(" [", out);
			const cJSON *ch;
			int first = 1;
			cJSON_ArrayForEach(ch, choices) {
				put_shown(c, out, first ? "" : "/", cJSON_IsString(ch) ? ch->valuestring : "?", "");
				first = 0;
			}
			fputs("]", out);
			if (tries > 0)
				fprintf(out, " (answer one of the choices, or its number 1-%d)", n_choices);
		}
		fputs(" ", out);
		fflush(out);
		if (!fgets(line, sizeof line, in))
			break;
		line[strcspn(line, "\r\n")] = 0;
		if (n_choices == 0) {
			answer = strdup(line);
			break;
		}
		const char *pick = pick_choice(choices, line);
		if (pick)
			answer = strdup(pick);
		else if (!tty)
			fputc('\n', out);   /* typed input echoes its own newline only on a terminal */
	}
	if (tty)
		fclose(tty);
	return answer;
}

static int poll_task(struct client *c, const char *id);

/* The MCP handshake first, as any client must; then either the given task or a fresh call.
 * The answer is a task handle only when the server's own _meta mark names it: a job's result
 * that happens to have a taskId field is printed as the result. */
static int drive(struct client *c, const char *tool, cJSON *args, const char *existing)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "protocolVersion", "2025-11-25");
	cJSON_AddObjectToObject(p, "capabilities");
	cJSON *ci = cJSON_AddObjectToObject(p, "clientInfo");
	cJSON_AddStringToObject(ci, "name", "forkpoint-call");
	cJSON_AddStringToObject(ci, "version", FORKPOINT_VERSION);
	cJSON *init = request(c, "initialize", p);
	if (!init || cJSON_GetObjectItem(init, "error")) {
		fprintf(stderr, "forkpoint: the server did not initialize (see the messages above)\n");
		cJSON_Delete(init);
		cJSON_Delete(args);
		return 1;
	}
	cJSON_Delete(init);
	notify(c, "notifications/initialized");

	char id[64];
	if (existing) {
		cJSON_Delete(args);
		snprintf(id, sizeof id, "%s", existing);
		return poll_task(c, id);
	}
	cJSON *resp = call_tool(c, tool, args);
	if (!resp) {
		fprintf(stderr, "forkpoint: no answer from the server\n");
		return 1;
	}
	const cJSON *err = cJSON_GetObjectItem(resp, "error");
	if (err) {
		put_shown(c, stderr, "forkpoint: ", cJSON_GetStringValue(cJSON_GetObjectItem(err, "message")), "\n");
		cJSON_Delete(resp);
		return 1;
	}
	const cJSON *sc = structured(resp);
	const cJSON *task = cJSON_GetObjectItem(sc, "taskId");
	/* Only the server's own mark makes a task handle: a job's result may look like one. */
	const cJSON *mark = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItem(resp, "result"), "_meta"), VIEWS_HANDLE_META);
	if (!cJSON_IsString(task) || !cJSON_IsString(mark) || strcmp(mark->valuestring, task->valuestring) != 0) {
		/* A sync tool (or a failure before any task): the answer is the result. */
		clear_bar(c);
		const cJSON *r = cJSON_GetObjectItem(resp, "result");
		print_json(c, sc ? sc : r);
		int bad = cJSON_IsTrue(cJSON_GetObjectItem(r, "isError"));
		cJSON_Delete(resp);
		return bad ? 1 : 0;
	}
	snprintf(id, sizeof id, "%s", task->valuestring);
	cJSON_Delete(resp);
	put_shown(c, stderr, "task ", id, " started\n");
	return poll_task(c, id);
}

/* Polls get until the task ends, answering questions on the terminal and cancelling on
 * Ctrl-C (exit 130, as a shell reports SIGINT).  A failed get (no status) means the server is
 * gone, which ends the wait instead of spinning. */
static int poll_task(struct client *c, const char *id)
{
	int rc = 1;
	for (;;) {
		if (interrupted) {
			clear_bar(c);
			put_shown(c, stderr, "forkpoint: interrupted; cancelling task ", id, "\n");
			cJSON_Delete(facade(c, "durable_task_cancel", id, NULL));
			return 130;
		}
		cJSON *g = facade(c, "durable_task_get", id, NULL);
		const cJSON *v = structured(g);
		const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(v, "status"));
		const cJSON *e = cJSON_GetObjectItem(v, "error");
		if (st && strcmp(st, "failed") == 0 && cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "result"), "isError"))) {
			clear_bar(c);
			put_shown(c, stderr, "forkpoint: ", cJSON_GetStringValue(cJSON_GetObjectItem(e, "message")), "\n");
			cJSON_Delete(g);
			return 1;
		}
		if (!st) {
			fprintf(stderr, "forkpoint: lost contact with the server\n");
			cJSON_Delete(g);
			return 1;
		}
		if (strcmp(st, "working") == 0) {
			const cJSON *pr = cJSON_GetObjectItem(v, "progress");
			const cJSON *fr = cJSON_GetObjectItem(pr, "fraction");
			const cJSON *qp = cJSON_GetObjectItem(v, "queuePosition");
			char qmsg[64];
			const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(pr, "message"));
			if (cJSON_IsNumber(qp)) {
				snprintf(qmsg, sizeof qmsg, "queued (position %d)", qp->valueint);
				msg = qmsg;
			}
			show_progress(c, cJSON_IsNumber(fr) ? fr->valuedouble : -1, msg ? msg : "working");
		} else if (strcmp(st, "input_required") == 0) {
			char *a = ask_user(c, cJSON_GetObjectItem(v, "inputRequest"));
			if (!a) {
				put_shown(c, stderr, "forkpoint: no answer given; cancelling task ", id, "\n");
				cJSON_Delete(facade(c, "durable_task_cancel", id, NULL));
				cJSON_Delete(g);
				return 1;
			}
			cJSON_Delete(facade(c, "durable_task_respond", id, a));
			free(a);
		} else {
			clear_bar(c);
			if (strcmp(st, "completed") == 0) {
				show_progress(c, 1.0, "done");
				if (c->tty)
					fputc('\n', stderr);
				print_json(c, cJSON_GetObjectItem(v, "result"));
				rc = 0;
			} else {
				put_shown(c, stderr, "task ", id, " ");
				put_shown(c, stderr, "", st, "\n");
				print_json(c, v);
			}
			cJSON_Delete(g);
			return rc;
		}
		cJSON_Delete(g);
		/* Poll briskly: this is a person watching, not a model paying per call. */
		struct timespec ts = { 0, 150 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

/* SIGPIPE is ignored so a server that died shows up as a write error, not a silent death of
 * the client.  Closing the server's stdin is its signal to stop its jobs and exit; it is then
 * reaped, so call never leaves a zombie or a running server behind. */
int call_main(int argc, char **argv)
{
	const char *tool = NULL, *json = NULL, *config = getenv("FORKPOINT_CONFIG"), *state = NULL;
	const char *existing = NULL;
	int raw = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage_call, stdout);
			return 0;
		} else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
			config = argv[++i];
		} else if (strcmp(argv[i], "--state") == 0 && i + 1 < argc) {
			state = argv[++i];
		} else if (strcmp(argv[i], "--task") == 0 && i + 1 < argc) {
			existing = argv[++i];
		} else if (strcmp(argv[i], "--raw") == 0) {
			raw = 1;
		} else if (argv[i][0] == '-' && argv[i][1] == '-') {
			fprintf(stderr, "forkpoint: call: unknown option '%s'\n\n%s", argv[i], usage_call);
			return 2;
		} else if (!tool) {
			tool = argv[i];
		} else if (!json) {
			json = argv[i];
		} else {
			fprintf(stderr, "forkpoint: call: unexpected argument '%s'\n\n%s", argv[i], usage_call);
			return 2;
		}
	}
	if ((!tool && !existing) || (tool && existing) || !config || !*config) {
		fprintf(stderr, "forkpoint: call: %s\n\n%s",
		        !config || !*config ? "--config FILE is required" : "give either TOOL or --task ID", usage_call);
		return 2;
	}
	cJSON *args = cJSON_Parse(json ? json : "{}");
	if (!cJSON_IsObject(args)) {
		fprintf(stderr, "forkpoint: call: the arguments must be a JSON object, e.g. '{\"topic\":\"x\"}'\n");
		cJSON_Delete(args);
		return 2;
	}
	struct client c;
	memset(&c, 0, sizeof c);
	c.tty = isatty(2);
	c.raw = raw;
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigint;
	sigaction(SIGINT, &sa, NULL);
	if (start_server(&c, config, state) < 0) {
		fprintf(stderr, "forkpoint: call: cannot start the server: %s\n", strerror(errno));
		cJSON_Delete(args);
		return 1;
	}
	int rc = drive(&c, tool, args, existing);
	close(c.to);   /* EOF: the server stops its jobs and exits */
	int st;
	while (waitpid(c.pid, &st, 0) < 0 && errno == EINTR)
		;
	close(c.from);
	wbuf_free(&c.in);
	return rc;
}
