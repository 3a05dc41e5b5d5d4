/* tests/unit/test_session.c — supervisor/session.c on pipes: input split into lines (CR LF,
 * empty lines, an oversized line reported once and skipped), end of input with and without
 * anything read first, output held back until released, lines sent "now" overtaking held
 * ones, and backpressure: a peer that does not read its answers stops the session from handing
 * out requests until the queue drains.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "supervisor/mcp/session.h"
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

/* A session reading `input` (then end of input) with lines of at most max_line bytes. */
static void feed(struct tally *t, int line, const char *input, size_t max_line, const char *want)
{
	struct seen seen = { "", 0 };
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		check_die("pipe2");
	struct loop *l = loop_new();
	struct session *s = l ? session_new(l, in[0], out[1], max_line, on_line, on_eof, &seen) : NULL;
	if (!s)
		check_die("session_new");
	size_t len = strlen(input);
	if (len && write(in[1], input, len) != (ssize_t)len)
		check_die("write");
	close(in[1]);
	for (int i = 0; i < 20 && !seen.eof; i++)
		loop_run_once(l, 100);
	CHECKF(t, seen.eof == 1 && strcmp(seen.lines, want) == 0, "line %d: eof %d, lines [%s], want [%s]",
	       line, seen.eof, seen.lines, want);
	session_free(s);
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
	struct session *s = l ? session_new(l, in[0], out[1], 64, on_line, on_eof, &seen) : NULL;
	if (!s)
		check_die("session_new");
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	CHECKF(t, session_send(s, strdup("{\"a\":1}")) == 0, "send");
	session_flush(s);
	CHECKF(t, read(out[0], buf, sizeof buf) < 0, "held until released");
	CHECKF(t, session_out_pending(s) == 8, "pending %zu", session_out_pending(s));
	session_release(s);
	session_flush(s);
	ssize_t n = read(out[0], buf, sizeof buf);
	CHECKF(t, n == 8 && memcmp(buf, "{\"a\":1}\n", 8) == 0, "released line (%zd bytes)", n);
	CHECKF(t, session_send(s, NULL) < 0, "NULL line is out of memory");
	session_free(s);
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
	struct session *s = l ? session_new(l, in[0], out[1], 64, on_line, on_eof, &seen) : NULL;
	if (!s)
		check_die("session_new");
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	session_release(s);   /* nothing held: a no-op */
	CHECKF(t, session_send(s, strdup("h1")) == 0 && session_send(s, strdup("h2")) == 0, "send held");
	CHECKF(t, session_send_now(s, strdup("n1")) == 0, "send now");
	CHECKF(t, session_held(s) == 6 && session_out_pending(s) == 9, "held %zu, pending %zu",
	       session_held(s), session_out_pending(s));
	session_flush(s);
	ssize_t n = read(out[0], buf, sizeof buf);
	CHECKF(t, n == 3 && memcmp(buf, "n1\n", 3) == 0, "only the free line went out (%zd bytes)", n);
	CHECKF(t, session_send_now(s, strdup("n2")) == 0, "send now again");
	session_release(s);
	session_release(s);
	session_flush(s);
	n = read(out[0], buf, sizeof buf);
	CHECKF(t, n == 9 && memcmp(buf, "n2\nh1\nh2\n", 9) == 0, "then the held lines, in order (%zd: %.*s)",
	       n, n > 0 ? (int)n : 0, buf);
	CHECKF(t, session_held(s) == 0 && session_out_pending(s) == 0, "nothing left");
	CHECKF(t, session_send_now(s, NULL) < 0, "NULL line is out of memory");
	session_free(s);
	loop_free(l);
	close(in[1]);
	close(out[0]);
}

/* Every request line is answered with a 1 MiB line, released at once. */
struct echo {
	struct session *s;
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
	session_send(e->s, out);
	session_release(e->s);
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
	e.s = l ? session_new(l, in[0], out[1], 64, on_big_line, on_big_eof, &e) : NULL;
	if (!e.s)
		check_die("session_new");
	session_set_flow_cb(e.s, on_flow, &e);
	/* 100 requests in one write: a session that handed them all out would queue 100 MiB. */
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
	CHECKF(t, session_congested(e.s), "congested until drained (%zu bytes wait)", session_out_pending(e.s));
	CHECKF(t, session_out_pending(e.s) >= OUT_HIGH - (1u << 20), "stopped early, at %zu bytes", session_out_pending(e.s));
	CHECKF(t, session_out_pending(e.s) <= OUT_HIGH + (1u << 20) + 1, "queue bounded: %zu", session_out_pending(e.s));
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
	CHECKF(t, !session_congested(e.s), "not congested after draining");
	session_free(e.s);
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
