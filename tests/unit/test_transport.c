/* tests/unit/test_transport.c — dispatch (supervisor/mcp/server.c) over several connections of
 * the stdio transport, each a socketpair whose far end this test plays as the client:
 *   - routing: a log line and a status notification about a task reach only the connection
 *     that created the task, never the other one;
 *   - close: a connection that closes loses its waits (sync calls of both protocol eras, a
 *     tasks/result on another connection's task) at once and is freed at the next release, while every task it created
 *     or waited on runs on;
 *   - no growth: opening and closing many connections, each with a wait, leaves the server
 *     holding what it held before (sessions and waits), and nothing leaks (ASan build);
 *   - an answer the worker pool makes for a connection that has closed meanwhile (a download
 *     being hashed) is dropped when it comes, while the same answer for an open connection
 *     arrives.
 * No job runs: maxConcurrent is 0, so every task stays queued in the working state.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "check.h"
#include "state/store.h"
#include "supervisor/core/config.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "supervisor/core/workers.h"
#include "supervisor/mcp/server.h"

#include <cJSON.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

struct env {
	char dir[256], state[300], root[300];
	struct supervisor sv;
	struct store_mem_medium *medium;   /* the task store: in memory */
};

/* The client's end of one connection and what it has received so far. */
struct client {
	int fd;
	char buf[1 << 16];
	size_t len;
};

static void env_open(struct env *e)
{
	char cfg[320], err[512];
	memset(&e->sv, 0, sizeof e->sv);
	check_tmpdir(e->dir, sizeof e->dir, "transport");
	snprintf(e->state, sizeof e->state, "%s/state", e->dir);
	check_mkdir(e->state);
	snprintf(e->root, sizeof e->root, "%s/files", e->dir);
	check_mkdir(e->root);
	snprintf(cfg, sizeof cfg, "%s/config.json", e->dir);
	char json[1024];
	snprintf(json, sizeof json, "{\"server\":{\"fileRoots\":[\"%s\"]},\"tools\":["
		"{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\"},\"command\":[\"/bin/true\"]},"
		"{\"name\":\"s\",\"mode\":\"sync\",\"inputSchema\":{\"type\":\"object\"},\"command\":[\"/bin/true\"]}]}",
		e->root);
	check_put(cfg, json, strlen(json));
	fplog_init(&e->sv.log, 2, FPLOG_CRITICAL);
	if (config_load(cfg, &e->sv.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "config: %s\n", err);
		exit(2);
	}
	e->sv.cfg->server.max_concurrent = 0;   /* nothing starts: dispatch alone is under test */
	e->sv.state_dir = e->state;
	e->sv.loop = loop_new();
	e->sv.tasks = e->sv.loop ? tasks_new(&e->sv) : NULL;
	struct store *store;
	if (!e->sv.tasks || !(e->medium = store_mem_medium_new()) || store_mem_new(e->medium, &store) < 0)
		check_die("store");
	if (persist_open_store(&e->sv, store, 0, NULL, NULL, &e->sv.persist, err, sizeof err) < 0) {
		fprintf(stderr, "persist: %s\n", err);
		exit(2);
	}
	e->sv.server = server_new(&e->sv);
	if (!e->sv.server)
		check_die("server_new");
}

static void env_close(struct env *e)
{
	workers_free(e->sv.workers);   /* first, as in forkpoint mcp: its last answers go to sessions */
	server_free(e->sv.server);
	transfers_free(e->sv.transfers);
	tasks_free(e->sv.tasks);
	persist_close(e->sv.persist);
	store_mem_medium_free(e->medium);
	loop_free(e->sv.loop);
	config_free(e->sv.cfg);
	check_rm_rf(e->dir);
}

/* One loop turn and its end: what the turn hook of `forkpoint mcp` does (commit, then
 * release what waited for it). */
static void turn(struct env *e)
{
	loop_run_once(e->sv.loop, 5);
	if (persist_commit(e->sv.persist) == 0) {
		tasks_release(e->sv.tasks);
		server_release(e->sv.server);
	}
	server_flush(e->sv.server);
}

static void client_open(struct env *e, struct client *c)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		check_die("socketpair");
	fcntl(sp[0], F_SETFL, O_NONBLOCK);
	c->fd = sp[0];
	c->len = 0;
	c->buf[0] = 0;
	if (server_attach(e->sv.server, sp[1], sp[1], 0) < 0)
		check_die("server_attach");
}

static void client_send(struct client *c, const char *json)
{
	size_t n = strlen(json);
	if (write(c->fd, json, n) != (ssize_t)n || write(c->fd, "\n", 1) != 1)
		check_die("write");
}

static void client_read(struct client *c)
{
	for (;;) {
		if (c->len + 1 >= sizeof c->buf)
			check_die("client buffer full");
		ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
		if (n <= 0)
			break;
		c->len += (size_t)n;
		c->buf[c->len] = 0;
	}
}

/* Turns until the client has received a line containing needle (at most 100); 1 if it has. */
static int await(struct env *e, struct client *c, const char *needle)
{
	for (int i = 0; i < 100; i++) {
		client_read(c);
		if (strstr(c->buf, needle))
			return 1;
		turn(e);
	}
	return 0;
}

/* Forget what the client has received so far. */
static void client_clear(struct client *c)
{
	client_read(c);
	c->len = 0;
	c->buf[0] = 0;
}

/* initialize (2025-11-25: native tasks), initialized, logging at debug. */
static void handshake(struct env *e, struct client *c)
{
	client_send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
	               "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
	client_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	client_send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"l\",\"method\":\"logging/setLevel\",\"params\":{\"level\":\"debug\"}}");
	if (!await(e, c, "\"id\":\"l\""))
		check_die("handshake");
	client_clear(c);
}

/* A task-augmented call of tool t; the new task's id in id[33]. */
static struct task *create_task(struct env *e, struct client *c, const char *rid, char id[33])
{
	char req[200], needle[64];
	snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"tools/call\",\"params\":"
	         "{\"name\":\"t\",\"arguments\":{},\"task\":{}}}", rid);
	snprintf(needle, sizeof needle, "\"id\":\"%s\"", rid);
	client_send(c, req);
	if (!await(e, c, needle))
		check_die("tools/call");
	const char *p = strstr(c->buf, "\"task\":{\"taskId\":\"");
	if (!p)
		check_die("no taskId in the CreateTaskResult");
	memcpy(id, p + 18, 32);
	id[32] = 0;
	client_clear(c);
	return tasks_find(e->sv.tasks, id);
}

static void test_routing(struct tally *t)
{
	struct env e;
	struct client a, b;
	char ida[33], idb[33];
	env_open(&e);
	client_open(&e, &a);
	client_open(&e, &b);
	handshake(&e, &a);
	handshake(&e, &b);
	struct task *ta = create_task(&e, &a, "ca", ida);
	struct task *tb = create_task(&e, &b, "cb", idb);
	CHECK(t, ta && tb && ta != tb, "each connection created a task");

	fplog(&e.sv.log, FPLOG_ERROR, ida, "a line about task A");
	CHECK(t, await(&e, &a, "a line about task A"), "the log line about A reaches A");
	client_read(&b);
	CHECKF(t, !strstr(b.buf, "task A"), "the log line about A reached B too: %s", b.buf);
	CHECK(t, !strstr(b.buf, "task A"), "the log line about A does not reach B");

	tasks_cancel(e.sv.tasks, ta, "cancelled by the test");
	CHECK(t, await(&e, &a, "notifications/tasks/status"), "A hears its task's status");
	turn(&e);
	client_read(&b);
	CHECK(t, !strstr(b.buf, "notifications/tasks/status"), "B does not hear of A's task");
	CHECK(t, tb->status == TASK_WORKING, "B's task is untouched");

	/* A server-wide line (no task) concerns every session that asked for logs. */
	client_clear(&a);
	client_clear(&b);
	fplog(&e.sv.log, FPLOG_ERROR, NULL, "a line about the server");
	CHECK(t, await(&e, &a, "a line about the server") && await(&e, &b, "a line about the server"),
	      "a server-wide line reaches both");
	close(a.fd);
	close(b.fd);
	env_close(&e);
}

static void test_close(struct tally *t)
{
	struct env e;
	struct client a, b;
	char idb[33];
	struct server_stats st0, st1, st2;
	env_open(&e);
	client_open(&e, &a);
	client_open(&e, &b);
	handshake(&e, &a);
	handshake(&e, &b);
	struct task *tb = create_task(&e, &b, "cb", idb);
	server_stats(e.sv.server, &st0);
	/* A waits in a sync call of its own and in tasks/result on B's task. */
	client_send(&a, "{\"jsonrpc\":\"2.0\",\"id\":\"sync\",\"method\":\"tools/call\",\"params\":{\"name\":\"s\","
	                "\"arguments\":{},\"_meta\":{\"progressToken\":\"p\"}}}");
	char req[200];
	snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":\"res\",\"method\":\"tasks/result\",\"params\":"
	         "{\"taskId\":\"%s\"}}", idb);
	client_send(&a, req);
	CHECK(t, await(&e, &a, "\"progressToken\":\"p\""), "the sync call waits (its first progress came)");
	/* The same waiter type serves a 2026-07-28 stateless call on the same connection. */
	client_send(&a, "{\"jsonrpc\":\"2.0\",\"id\":\"sl\",\"method\":\"tools/call\",\"params\":{\"name\":\"s\","
	                "\"arguments\":{},\"_meta\":{\"progressToken\":\"q\",\"io.modelcontextprotocol/protocolVersion\":"
	                "\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
	CHECK(t, await(&e, &a, "\"progressToken\":\"q\""), "the stateless sync call waits too");
	turn(&e);
	server_stats(e.sv.server, &st1);
	/* Each sync call: its WAIT_CALL and the session's WAIT_FOLLOW of the task; tasks/result: one. */
	CHECKF(t, st1.waits == st0.waits + 5, "waits: %zu before, %zu with A's", st0.waits, st1.waits);
	struct task *ts = NULL;
	int sync_tasks = 0;
	for (struct task *x = tasks_newest(e.sv.tasks); x; x = x->next)
		if (strcmp(x->tool_name, "s") == 0)
			ts = x, sync_tasks++;
	CHECK(t, ts && sync_tasks == 2 && ts->status == TASK_WORKING, "the sync calls' tasks exist");

	close(a.fd);
	for (int i = 0; i < 20; i++)
		turn(&e);
	server_stats(e.sv.server, &st2);
	CHECKF(t, st2.sessions == 1 && st2.waits == st0.waits, "after A closed: %zu sessions, %zu waits (want 1, %zu)",
	       st2.sessions, st2.waits, st0.waits);
	CHECK(t, st2.sessions == 1 && st2.waits == st0.waits, "a closed connection's waits and session are freed");
	int running = 0;
	for (struct task *x = tasks_newest(e.sv.tasks); x; x = x->next)
		running += strcmp(x->tool_name, "s") == 0 && x->status == TASK_WORKING;
	CHECK(t, running == 2, "the tasks A's sync calls waited on run on");
	CHECK(t, tasks_find(e.sv.tasks, idb) == tb && tb->status == TASK_WORKING,
	      "the task A's tasks/result waited on runs on");

	/* B still gets what is routed to it. */
	fplog(&e.sv.log, FPLOG_ERROR, idb, "still routed to B");
	CHECK(t, await(&e, &b, "still routed to B"), "the other connection is served as before");
	close(b.fd);
	env_close(&e);
}

static void test_no_growth(struct tally *t)
{
	struct env e;
	struct client b, c;
	char idb[33], req[200];
	struct server_stats before, after;
	env_open(&e);
	client_open(&e, &b);
	handshake(&e, &b);
	create_task(&e, &b, "cb", idb);
	snprintf(req, sizeof req, "{\"jsonrpc\":\"2.0\",\"id\":\"res\",\"method\":\"tasks/result\",\"params\":"
	         "{\"taskId\":\"%s\"}}", idb);
	server_stats(e.sv.server, &before);
	int served = 0;
	for (int i = 0; i < 300; i++) {
		client_open(&e, &c);
		client_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		                "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
		client_send(&c, req);
		served += await(&e, &c, "\"id\":\"i\"");
		turn(&e);
		close(c.fd);
		turn(&e);
		turn(&e);
	}
	for (int i = 0; i < 10; i++)
		turn(&e);
	server_stats(e.sv.server, &after);
	CHECKF(t, served == 300, "%d of 300 connections answered", served);
	CHECKF(t, after.sessions == before.sessions && after.waits == before.waits,
	       "after 300 connections: %zu sessions, %zu waits (before: %zu, %zu)", after.sessions, after.waits,
	       before.sessions, before.waits);
	CHECK(t, after.sessions == before.sessions && after.waits == before.waits,
	      "opening and closing 300 connections leaves nothing behind");
	close(b.fd);
	env_close(&e);
}

/* Holds the pool's only thread until the gate opens, so the next job waits in the queue. */
static void hold_run(struct workers *w, void *arg)
{
	atomic_int *gate = arg;
	while (!workers_stopping(w) && !atomic_load(gate))
		usleep(1000);
}

static void hold_done(void *arg, int ran)
{
	(void)arg;
	(void)ran;
}

static void test_later_answer(struct tally *t)
{
	struct env e;
	struct client a, b;
	struct server_stats st0, st1;
	atomic_int gate = 0;
	char path[400];
	env_open(&e);
	e.sv.transfers = transfers_new(&e.sv);
	if (!e.sv.transfers || workers_new(e.sv.loop, 1, &e.sv.workers) < 0)
		check_die("transfers and workers");
	/* Over 1 MiB: a download open hashes it in the pool and answers later. */
	snprintf(path, sizeof path, "%s/big.bin", e.root);
	char *data = calloc(1, 3u << 20);
	if (!data)
		check_die("calloc");
	check_put(path, data, 3u << 20);
	free(data);
	client_open(&e, &a);
	client_open(&e, &b);
	handshake(&e, &a);
	handshake(&e, &b);
	server_stats(e.sv.server, &st0);
	workers_submit(e.sv.workers, hold_run, hold_done, &gate);
	const char *open_req = "{\"jsonrpc\":\"2.0\",\"id\":\"dl\",\"method\":\"tools/call\",\"params\":{\"name\":"
		"\"file_transfer_open\",\"arguments\":{\"direction\":\"download\",\"path\":\"big.bin\"}}}";
	client_send(&a, open_req);
	client_send(&b, open_req);
	for (int i = 0; i < 10; i++)
		turn(&e);
	server_stats(e.sv.server, &st1);
	CHECKF(t, st1.waits == st0.waits + 2, "waits: %zu, then %zu", st0.waits, st1.waits);
	CHECK(t, st1.waits == st0.waits + 2, "each download open waits for the pool");
	close(a.fd);
	for (int i = 0; i < 10; i++)
		turn(&e);
	server_stats(e.sv.server, &st1);
	CHECK(t, st1.sessions == 1 && st1.waits == st0.waits + 1, "the closed connection is gone, its answer detached");
	atomic_store(&gate, 1);
	CHECK(t, await(&e, &b, "\"id\":\"dl\""), "the open connection gets its answer");
	for (int i = 0; i < 100 && workers_pending(e.sv.workers); i++)
		turn(&e);
	CHECK(t, workers_pending(e.sv.workers) == 0, "the pool answered both (one into a closed connection)");
	server_stats(e.sv.server, &st1);
	CHECK(t, st1.waits == st0.waits, "no wait left behind");
	close(b.fd);
	env_close(&e);
}

int main(void)
{
	struct tally t = { 0, 0 };
	signal(SIGPIPE, SIG_IGN);   /* as forkpoint mcp: a peer gone is EPIPE, not death */
	test_routing(&t);
	test_close(&t);
	test_no_growth(&t);
	test_later_answer(&t);
	return check_done(&t);
}
