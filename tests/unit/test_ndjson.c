/* tests/unit/test_ndjson.c — the stdio transport (supervisor/mcp/ndjson.c) on pipes: input split into lines (CR LF,
 * empty lines, an oversized line reported once and skipped), end of input with and without
 * anything read first, output held back until released, lines sent "now" overtaking held
 * ones, and backpressure: a peer that does not read its answers stops the transport from handing
 * out requests until the queue drains.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "supervisor/mcp/ndjson.h"
#include "supervisor/core/loop.h"
#include "check.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the callbacks saw: lines joined with '|', "<big>" for an oversized one. */
struct seen {
	char lines[256];
	int eof;
};

static void on_line(void *arg, const char *line, size_t len)
{
	struct seen *s = arg;
	size_t have = strlen(s->lines);
	snprintf(s->lines + have, sizeof s->lines - have, "%s%.*s", have ? "|" : "",
	         line ? (int)len : 5, line ? line : "<big>");
}

static void on_eof(void *arg)
{
	((struct seen *)arg)->eof++;
}

/* A transport on in_fd/out_fd whose events go to the callbacks given. */
static struct transport *open_conn(struct loop *l, int in_fd, int out_fd, size_t max_line,
                                   void (*on_msg)(void *, const char *, size_t), void (*on_close)(void *),
                                   void (*on_flow)(void *, int), void *arg)
{
	struct transport *c = l ? ndjson_open(l, in_fd, out_fd, max_line) : NULL;
	if (!c)
		check_die("ndjson_open");
	struct transport_events ev = { on_msg, on_close, on_flow };
	transport_bind(c, &ev, arg);
	return c;
}

/* A connection reading `input` (then end of input) with lines of at most max_line bytes. */
static void feed(struct tally *t, int line, const char *input, size_t max_line, const char *want)
{
	struct seen seen = { "", 0 };
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		check_die("pipe2");
	struct loop *l = loop_new();
	struct transport *s = open_conn(l, in[0], out[1], max_line, on_line, on_eof, NULL, &seen);
	size_t len = strlen(input);
	if (len && write(in[1], input, len) != (ssize_t)len)
		check_die("write");
	close(in[1]);
	for (int i = 0; i < 20 && !seen.eof; i++)
		loop_run_once(l, 100);
	CHECKF(t, seen.eof == 1 && strcmp(seen.lines, want) == 0, "line %d: eof %d, lines [%s], want [%s]",
	       line, seen.eof, seen.lines, want);
	transport_close(s);
	loop_free(l);
	close(out[0]);
}

static void test_input(struct tally *t)
{
	/* End of input before any byte: nothing is buffered yet, not even a buffer. */
	feed(t, __LINE__, "", 64, "");
	feed(t, __LINE__, "a\r\nbb\n\n\r\nccc\n", 64, "a|bb|ccc");
	/* An unterminated last line is not a message. */
	feed(t, __LINE__, "a\npartial", 64, "a");
	feed(t, __LINE__, "123456789\nok\n", 4, "<big>|ok");
	feed(t, __LINE__, "123456789", 4, "<big>");
}

static void test_output(struct tally *t)
{
	struct seen seen = { "", 0 };
	int in[2], out[2];
	char buf[64];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		check_die("pipe2");
	struct loop *l = loop_new();
	struct transport *s = open_conn(l, in[0], out[1], 64, on_line, on_eof, NULL, &seen);
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	CHECKF(t, transport_send(s, strdup("{\"a\":1}")) == 0, "send");
	transport_flush(s);
	CHECKF(t, read(out[0], buf, sizeof buf) < 0, "held until released");
	CHECKF(t, transport_pending(s) == 8, "pending %zu", transport_pending(s));
	transport_release(s);
	transport_flush(s);
	ssize_t n = read(out[0], buf, sizeof buf);
	CHECKF(t, n == 8 && memcmp(buf, "{\"a\":1}\n", 8) == 0, "released line (%zd bytes)", n);
	CHECKF(t, transport_send(s, NULL) < 0, "NULL line is out of memory");
	transport_close(s);
	loop_free(l);
	close(in[1]);
	close(out[0]);
}

/* A line that depends on nothing uncommitted overtakes held ones; the held lines keep their
 * order and come out only when released, also when released twice or with nothing held. */
static void test_send_now(struct tally *t)
{
	struct seen seen = { "", 0 };
	int in[2], out[2];
	char buf[128];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		check_die("pipe2");
	struct loop *l = loop_new();
	struct transport *s = open_conn(l, in[0], out[1], 64, on_line, on_eof, NULL, &seen);
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	transport_release(s);   /* nothing held: a no-op */
	CHECKF(t, transport_send(s, strdup("h1")) == 0 && transport_send(s, strdup("h2")) == 0, "send held");
	CHECKF(t, transport_send_now(s, strdup("n1")) == 0, "send now");
	CHECKF(t, ndjson_held(s) == 6 && transport_pending(s) == 9, "held %zu, pending %zu",
	       ndjson_held(s), transport_pending(s));
	transport_flush(s);
	ssize_t n = read(out[0], buf, sizeof buf);
	CHECKF(t, n == 3 && memcmp(buf, "n1\n", 3) == 0, "only the free line went out (%zd bytes)", n);
	CHECKF(t, transport_send_now(s, strdup("n2")) == 0, "send now again");
	transport_release(s);
	transport_release(s);
	transport_flush(s);
	n = read(out[0], buf, sizeof buf);
	CHECKF(t, n == 9 && memcmp(buf, "n2\nh1\nh2\n", 9) == 0, "then the held lines, in order (%zd: %.*s)",
	       n, n > 0 ? (int)n : 0, buf);
	CHECKF(t, ndjson_held(s) == 0 && transport_pending(s) == 0, "nothing left");
	CHECKF(t, transport_send_now(s, NULL) < 0, "NULL line is out of memory");
	transport_close(s);
	loop_free(l);
	close(in[1]);
	close(out[0]);
}

/* Every request line is answered with a 1 MiB line, released at once. */
struct echo {
	struct transport *s;
	int lines, stopped, resumed;
};

static void on_big_line(void *arg, const char *line, size_t len)
{
	struct echo *e = arg;
	size_t n = 1u << 20;
	char *out = malloc(n + 1);
	(void)line;
	(void)len;
	if (!out)
		check_die("malloc");
	memset(out, 'a', n);
	out[n] = 0;
	e->lines++;
	transport_send(e->s, out);
	transport_release(e->s);
}

static void on_big_eof(void *arg)
{
	(void)arg;
}

static void on_flow(void *arg, int stopped)
{
	struct echo *e = arg;
	if (stopped)
		e->stopped++;
	else
		e->resumed++;
}

static void test_backpressure(struct tally *t)
{
	struct echo e = { NULL, 0, 0, 0 };
	int in[2], out[2];
	char buf[65536];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		check_die("pipe2");
	struct loop *l = loop_new();
	e.s = open_conn(l, in[0], out[1], 64, on_big_line, on_big_eof, on_flow, &e);
	/* 100 requests in one write: a transport that handed them all out would queue 100 MiB. */
	char req[300];
	memset(req, '\n', sizeof req);
	for (int i = 0; i < 100; i++)
		req[i * 3] = 'x', req[i * 3 + 1] = 'y';
	if (write(in[1], req, sizeof req) != (ssize_t)sizeof req)
		check_die("write");
	for (int i = 0; i < 10; i++)
		loop_run_once(l, 10);
	CHECKF(t, e.lines > 0 && e.lines < 100, "lines handed out while nobody reads: %d", e.lines);
	CHECKF(t, e.stopped == 1 && e.resumed == 0, "the owner heard of the stop once: %d, %d", e.stopped, e.resumed);
	CHECKF(t, transport_congested(e.s), "congested until drained (%zu bytes wait)", transport_pending(e.s));
	CHECKF(t, transport_pending(e.s) >= OUT_HIGH - (1u << 20), "stopped early, at %zu bytes", transport_pending(e.s));
	CHECKF(t, transport_pending(e.s) <= OUT_HIGH + (1u << 20) + 1, "queue bounded: %zu", transport_pending(e.s));
	/* Reading the answers lets the rest through, every one of them. */
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	size_t got = 0, want = 100u * ((1u << 20) + 1);
	for (int i = 0; i < 100000 && got < want; i++) {
		ssize_t n = read(out[0], buf, sizeof buf);
		if (n > 0)
			got += (size_t)n;
		loop_run_once(l, 0);
	}
	CHECKF(t, e.lines == 100 && got == want, "after draining: %d lines, %zu of %zu bytes", e.lines, got, want);
	CHECKF(t, e.resumed >= 1 && e.resumed == e.stopped, "stops %d, resumes %d", e.stopped, e.resumed);
	CHECKF(t, !transport_congested(e.s), "not congested after draining");
	transport_close(e.s);
	loop_free(l);
	close(in[1]);
	close(out[0]);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_input(&t);
	test_output(&t);
	test_send_now(&t);
	test_backpressure(&t);
	return check_done(&t);
}
