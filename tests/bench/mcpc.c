/* tests/bench/mcpc.c — see mcpc.h. */
#include "mcpc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct mcpc {
	pid_t pid;
	int to_srv;          /* the server's stdin */
	int from_srv;        /* the server's stdout */
	char *buf;           /* bytes read but not yet consumed as lines */
	size_t len, cap;
	long next_id;
};

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mcpc_spawn(const char *bin, const char *config, const char *state, const char *errlog,
               struct mcpc **out)
{
	char *argv[] = { (char *)bin, (char *)"mcp", (char *)"--config", (char *)config, (char *)"--state",
	                 (char *)state, (char *)"--log-level", (char *)"warning", NULL };
	return mcpc_spawn_argv(argv, errlog, out);
}

int mcpc_spawn_argv(char *const argv[], const char *errlog, struct mcpc **out)
{
	int in[2] = { -1, -1 }, outp[2] = { -1, -1 };
	posix_spawn_file_actions_t fa;
	int fa_init = 0, rc;
	struct mcpc *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->to_srv = c->from_srv = -1;
	c->next_id = 1;
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = -posix_spawn_file_actions_init(&fa)) < 0)
		goto fail;
	fa_init = 1;
	/* dup2 clears close-on-exec on the target, so only 0/1/2 reach the server. */
	if ((rc = -posix_spawn_file_actions_adddup2(&fa, in[0], 0)) < 0 ||
	    (rc = -posix_spawn_file_actions_adddup2(&fa, outp[1], 1)) < 0 ||
	    (rc = -posix_spawn_file_actions_addopen(&fa, 2, errlog, O_WRONLY | O_CREAT | O_APPEND, 0600)) < 0)
		goto fail;
	if ((rc = -posix_spawn(&c->pid, argv[0], &fa, NULL, argv, environ)) < 0)
		goto fail;
	close(in[0]);
	close(outp[1]);
	c->to_srv = in[1];
	c->from_srv = outp[0];
	posix_spawn_file_actions_destroy(&fa);
	*out = c;
	return 0;
fail:
	if (fa_init)
		posix_spawn_file_actions_destroy(&fa);
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (outp[i] >= 0)
			close(outp[i]);
	}
	free(c);
	return rc;
}

pid_t mcpc_pid(const struct mcpc *c)
{
	return c->pid;
}

int mcpc_close(struct mcpc *c, int timeout_ms)
{
	int status = 0, rc = -ETIMEDOUT;
	if (!c)
		return 0;
	close(c->to_srv);
	long long deadline = now_ms() + timeout_ms;
	for (;;) {
		pid_t w = waitpid(c->pid, &status, WNOHANG);
		if (w == c->pid) {
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			break;
		}
		if (w < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		if (now_ms() >= deadline) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &status, 0);
			rc = -ETIMEDOUT;
			break;
		}
		/* Keep draining its stdout so a server flushing its last answers cannot block. */
		char sink[4096];
		struct pollfd p = { .fd = c->from_srv, .events = POLLIN };
		if (poll(&p, 1, 10) > 0 && read(c->from_srv, sink, sizeof sink) <= 0)
			usleep(5000);
	}
	close(c->from_srv);
	free(c->buf);
	free(c);
	return rc;
}

static int write_full(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int format_line(char *buf, size_t size, long id, const char *method, const char *params)
{
	return snprintf(buf, size, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"%s\",\"params\":%s}\n",
	                id, method, params ? params : "{}");
}

static int send_msg(struct mcpc *c, cJSON *msg)
{
	char *s = cJSON_PrintUnformatted(msg);
	cJSON_Delete(msg);
	if (!s)
		return -ENOMEM;
	size_t n = strlen(s);
	/* One write per message: the newline goes with it. */
	char *line = realloc(s, n + 2);
	if (!line) {
		free(s);
		return -ENOMEM;
	}
	line[n] = '\n';
	line[n + 1] = 0;
	int rc = write_full(c->to_srv, line, n + 1);
	free(line);
	return rc;
}

static cJSON *new_msg(const char *method, cJSON *params)
{
	cJSON *m = cJSON_CreateObject();
	if (!m) {
		cJSON_Delete(params);
		return NULL;
	}
	cJSON_AddStringToObject(m, "jsonrpc", "2.0");
	cJSON_AddStringToObject(m, "method", method);
	if (params)
		cJSON_AddItemToObject(m, "params", params);
	return m;
}

int mcpc_send(struct mcpc *c, const char *method, cJSON *params, long *id)
{
	cJSON *m = new_msg(method, params);
	if (!m)
		return -ENOMEM;
	long n = c->next_id++;
	cJSON_AddNumberToObject(m, "id", (double)n);
	if (id)
		*id = n;
	return send_msg(c, m);
}

int mcpc_send_json(struct mcpc *c, const char *method, const char *params_json, long *id)
{
	long n = c->next_id++;
	int len = format_line(NULL, 0, n, method, params_json);
	char stackbuf[1024];
	char *line = (size_t)len < sizeof stackbuf ? stackbuf : malloc((size_t)len + 1);
	if (!line)
		return -ENOMEM;
	format_line(line, (size_t)len + 1, n, method, params_json);
	int rc = write_full(c->to_srv, line, (size_t)len);
	if (line != stackbuf)
		free(line);
	if (id)
		*id = n;
	return rc;
}

int mcpc_notify(struct mcpc *c, const char *method, cJSON *params)
{
	cJSON *m = new_msg(method, params);
	return m ? send_msg(c, m) : -ENOMEM;
}

/* The next complete line as a parsed message. */
static int next_msg(struct mcpc *c, long long deadline, cJSON **msg)
{
	for (;;) {
		char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		if (nl) {
			size_t n = (size_t)(nl - c->buf);
			*msg = cJSON_ParseWithLength(c->buf, n);
			memmove(c->buf, nl + 1, c->len - n - 1);
			c->len -= n + 1;
			if (*msg)
				return 0;
			continue;   /* not JSON: nothing a benchmark can use */
		}
		if (c->cap - c->len < 65536) {
			size_t cap = c->cap ? c->cap * 2 : 262144;
			char *b = realloc(c->buf, cap);
			if (!b)
				return -ENOMEM;
			c->buf = b;
			c->cap = cap;
		}
		long long left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = c->from_srv, .events = POLLIN };
		int r = poll(&p, 1, (int)left);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		ssize_t got = read(c->from_srv, c->buf + c->len, c->cap - c->len);
		if (got < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
		if (got == 0)
			return -EPIPE;   /* the server exited */
		if (got > 0)
			c->len += (size_t)got;
	}
}

int mcpc_next_response(struct mcpc *c, int timeout_ms, long *id, cJSON **resp)
{
	long long deadline = now_ms() + timeout_ms;
	for (;;) {
		cJSON *m;
		int rc = next_msg(c, deadline, &m);
		if (rc < 0)
			return rc;
		const cJSON *mid = cJSON_GetObjectItemCaseSensitive(m, "id");
		if (!cJSON_IsNumber(mid) || cJSON_GetObjectItemCaseSensitive(m, "method")) {
			cJSON_Delete(m);   /* a notification or a request from the server */
			continue;
		}
		*id = (long)mid->valuedouble;
		*resp = m;
		return 0;
	}
}

int mcpc_call(struct mcpc *c, const char *method, cJSON *params, int timeout_ms, cJSON **result)
{
	long want, got;
	cJSON *resp = NULL;
	long long deadline = now_ms() + timeout_ms;
	int rc = mcpc_send(c, method, params, &want);
	if (rc < 0)
		return rc;
	do {
		cJSON_Delete(resp);
		resp = NULL;
		long long left = deadline - now_ms();
		rc = mcpc_next_response(c, left > 0 ? (int)left : 0, &got, &resp);
		if (rc < 0)
			return rc;
	} while (got != want);
	cJSON *r = cJSON_DetachItemFromObjectCaseSensitive(resp, "result");
	cJSON_Delete(resp);
	if (!r)
		return -EPROTO;
	if (result)
		*result = r;
	else
		cJSON_Delete(r);
	return 0;
}

int mcpc_initialize(struct mcpc *c, int timeout_ms)
{
	cJSON *p = cJSON_CreateObject();
	if (!p)
		return -ENOMEM;
	cJSON_AddStringToObject(p, "protocolVersion", "2025-06-18");
	cJSON_AddObjectToObject(p, "capabilities");
	cJSON *ci = cJSON_AddObjectToObject(p, "clientInfo");
	cJSON_AddStringToObject(ci, "name", "forkpoint-bench");
	cJSON_AddStringToObject(ci, "version", "1");
	int rc = mcpc_call(c, "initialize", p, timeout_ms, NULL);
	if (rc == 0)
		rc = mcpc_notify(c, "notifications/initialized", NULL);
	return rc;
}

cJSON *mcpc_tool_params(const char *tool, cJSON *args)
{
	cJSON *p = cJSON_CreateObject();
	if (!p) {
		cJSON_Delete(args);
		return NULL;
	}
	cJSON_AddStringToObject(p, "name", tool);
	cJSON_AddItemToObject(p, "arguments", args ? args : cJSON_CreateObject());
	return p;
}

const cJSON *mcpc_structured(const cJSON *resp)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(resp, "result");
	if (!r)
		r = resp;   /* a result already detached by mcpc_call */
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "isError")))
		return NULL;
	return cJSON_GetObjectItemCaseSensitive(r, "structuredContent");
}

int mcpc_tool(struct mcpc *c, const char *tool, cJSON *args, int timeout_ms, cJSON **sc)
{
	cJSON *p = mcpc_tool_params(tool, args), *r = NULL;
	if (!p)
		return -ENOMEM;
	int rc = mcpc_call(c, "tools/call", p, timeout_ms, &r);
	if (rc < 0)
		return rc;
	if (!mcpc_structured(r)) {
		cJSON_Delete(r);
		return -EPROTO;
	}
	if (sc)
		*sc = cJSON_DetachItemFromObjectCaseSensitive(r, "structuredContent");
	cJSON_Delete(r);
	return 0;
}

int mcpc_rss_kb(const struct mcpc *c, long *kb)
{
	char path[64], line[256];
	int rc = -ENOENT;
	snprintf(path, sizeof path, "/proc/%ld/status", (long)c->pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld kB", kb) == 1) {
			rc = 0;
			break;
		}
	fclose(f);
	return rc;
}
