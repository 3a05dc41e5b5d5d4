/* supervisor/mcp/ndjson.c — see ndjson.h. */
#include "supervisor/mcp/ndjson.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "proto/io.h"

#define READ_SLICE  (256u << 10)
#define OUT_LOW     (OUT_HIGH / 2)

struct ndjson {
	struct transport base;   /* first: a struct transport * is a struct ndjson * */
	struct loop *loop;
	int in_fd, out_fd;
	size_t max_line;
	struct wbuf in;
	struct wbuf out;     /* released: written as the peer reads */
	struct wbuf hold;    /* queued lines waiting for release, in order, in order */
	int skipping;        /* inside an oversized line: drop bytes until newline */
	int reading;         /* in_fd registered for EPOLLIN */
	int out_registered;
	int eof;
	int out_broken;
	/* Regular files cannot be polled (epoll says EPERM); they are always ready, so input from
	 * one is read from a zero-delay timer and output to one is written directly. */
	int in_file, out_file;
	struct loop_timer *in_timer;
	int paused;          /* input processing stopped at OUT_HIGH, until the queue drains to OUT_LOW */
	struct loop_timer *resume_timer;
};

static void on_in(struct ndjson *s);

static void in_timer_cb(struct loop *l, void *arg)
{
	struct ndjson *s = arg;
	(void)l;
	s->in_timer = NULL;
	on_in(s);
}

static size_t writable(const struct ndjson *s)
{
	return wbuf_pending(&s->out);
}

/* Everything queued, released or not: what backpressure counts. */
static size_t queued(const struct ndjson *s)
{
	return wbuf_pending(&s->out) + wbuf_pending(&s->hold);
}

static int congested(const struct ndjson *s)
{
	return s->paused || queued(s) >= OUT_HIGH;
}

/* Ask the loop for exactly the readiness we can use now: input only while not congested (the
 * back-pressure), output only while something released waits.  A shared fd (a socket) has one
 * registration for both; a regular file is never registered and is driven from a timer. */
static void update_events(struct ndjson *s)
{
	int want_in = !s->eof && !congested(s);
	int want_out = writable(s) > 0 && !s->out_broken;
	if (s->in_file) {
		if (want_in && !s->in_timer)
			s->in_timer = loop_timer_in(s->loop, 0, in_timer_cb, s);
		want_in = 0;
	}
	if (s->out_file)
		want_out = 0;
	if (s->in_fd == s->out_fd) {
		uint32_t ev = (want_in ? EPOLLIN : 0) | (want_out ? EPOLLOUT : 0);
		loop_mod_fd(s->loop, s->in_fd, ev);
		return;
	}
	if (want_in != s->reading && !s->eof && !s->in_file) {
		loop_mod_fd(s->loop, s->in_fd, want_in ? EPOLLIN : 0);
		s->reading = want_in;
	}
	if (want_out != s->out_registered) {
		loop_mod_fd(s->loop, s->out_fd, want_out ? EPOLLOUT : 0);
		s->out_registered = want_out;
	}
}

/* Hand out the complete lines buffered so far; stop (paused) while the output queue is at
 * OUT_HIGH, since every request may add a response to it. */
static void process_input(struct ndjson *s)
{
	for (;;) {
		if (congested(s)) {
			if (!s->paused && s->base.ev.on_flow)
				s->base.ev.on_flow(s->base.arg, 1);
			s->paused = 1;
			return;
		}
		size_t avail = wbuf_pending(&s->in);
		if (avail == 0)
			return;   /* nothing buffered, perhaps no buffer at all yet (data NULL) */
		unsigned char *start = s->in.data + s->in.off;
		unsigned char *nl = memchr(start, '\n', avail);
		if (s->skipping) {
			if (!nl) {
				wbuf_consume(&s->in, avail);
				return;
			}
			wbuf_consume(&s->in, (size_t)(nl - start) + 1);
			s->skipping = 0;
			continue;
		}
		if (!nl) {
			if (avail > s->max_line) {
				s->skipping = 1;
				wbuf_consume(&s->in, avail);
				s->base.ev.on_message(s->base.arg, NULL, 0);
			}
			return;
		}
		size_t raw = (size_t)(nl - start) + 1;
		size_t len = raw - 1;
		if (len > s->max_line) {
			wbuf_consume(&s->in, raw);
			s->base.ev.on_message(s->base.arg, NULL, 0);
			continue;
		}
		*nl = 0;   /* hand out a NUL-terminated line in place */
		if (len && start[len - 1] == '\r')
			start[--len] = 0;
		/* Consume first; the callback may queue output, which never touches s->in. */
		s->in.off += raw;
		if (len > 0)
			s->base.ev.on_message(s->base.arg, (const char *)start, len);
		if (s->in.off >= s->in.len)
			s->in.off = s->in.len = 0;
	}
}

/* Read at most READ_SLICE bytes per turn, so one chatty client cannot starve the loop; stop
 * early once congested, the rest stays in the kernel until the peer reads its answers. */
static void on_in(struct ndjson *s)
{
	size_t budget = READ_SLICE;
	while (budget > 0 && !s->eof && !s->paused) {
		char buf[65536];
		ssize_t n = read(s->in_fd, buf, sizeof buf);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			n = 0;
		}
		if (n == 0) {
			s->eof = 1;
			if (s->in_fd != s->out_fd && !s->in_file) {
				loop_del_fd(s->loop, s->in_fd);
				s->reading = 0;
			}
			process_input(s);
			s->base.ev.on_close(s->base.arg);
			return;
		}
		if (wbuf_append(&s->in, buf, (size_t)n) < 0) {
			/* Out of memory for input: treat as an oversized line rather than crash. */
			wbuf_consume(&s->in, wbuf_pending(&s->in));
			s->skipping = 1;
			s->base.ev.on_message(s->base.arg, NULL, 0);
			continue;
		}
		budget = (size_t)n > budget ? 0 : budget - (size_t)n;
		process_input(s);
		if (congested(s))
			break;
	}
	update_events(s);
}

/* The output queue has drained after a stop: tell the owner it may produce again, then go on
 * with the buffered input.  Runs from a timer, so in a loop turn of its own: whatever it
 * queues is released by that turn's commit like any other answer. */
static void resume_cb(struct loop *l, void *arg)
{
	struct ndjson *s = arg;
	(void)l;
	s->resume_timer = NULL;
	s->paused = 0;
	if (s->base.ev.on_flow)
		s->base.ev.on_flow(s->base.arg, 0);
	process_input(s);
	update_events(s);
}

static void maybe_resume(struct ndjson *s)
{
	if (s->paused && !s->resume_timer && queued(s) <= OUT_LOW)
		s->resume_timer = loop_timer_in(s->loop, 0, resume_cb, s);
}

/* Write what is released until the peer's buffer is full.  A write error means the peer is
 * gone: everything queued is dropped and later sends are accepted and discarded, so the
 * owner needs no special case for a dead client (it hears of it through on_close). */
static void flush(struct ndjson *s)
{
	while (writable(s) && !s->out_broken) {
		ssize_t n = write(s->out_fd, s->out.data + s->out.off, writable(s));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			/* The client is gone; keep serving nothing to it, drop what was queued. */
			s->out_broken = 1;
			wbuf_consume(&s->out, wbuf_pending(&s->out));
			wbuf_consume(&s->hold, wbuf_pending(&s->hold));
			break;
		}
		wbuf_consume(&s->out, (size_t)n);
	}
	maybe_resume(s);
	update_events(s);
}

/* Output first: a turn that frees queue space may let input resume in the same turn. */
static void on_fd(struct loop *l, int fd, uint32_t ev, void *arg)
{
	struct ndjson *s = arg;
	(void)l;
	if (fd == s->out_fd && (ev & (EPOLLOUT | EPOLLERR)))
		flush(s);
	if (fd == s->in_fd && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		on_in(s);
}

static const struct transport_ops ndjson_ops;

/* epoll refuses regular files (EPERM): a config that redirects stdin or stdout to a file
 * still works, the file side being always ready. */
struct transport *ndjson_open(struct loop *l, int in_fd, int out_fd, size_t max_line)
{
	struct ndjson *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->base.ops = &ndjson_ops;
	s->loop = l;
	s->in_fd = in_fd;
	s->out_fd = out_fd;
	s->max_line = max_line;
	fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
	fcntl(out_fd, F_SETFL, fcntl(out_fd, F_GETFL) | O_NONBLOCK);
	int rc = loop_add_fd(l, in_fd, EPOLLIN, on_fd, s);
	if (rc == -EPERM && in_fd != out_fd) {
		s->in_file = 1;
	} else if (rc < 0) {
		free(s);
		errno = -rc;
		return NULL;
	} else {
		s->reading = 1;
	}
	if (out_fd != in_fd) {
		rc = loop_add_fd(l, out_fd, 0, on_fd, s);
		if (rc == -EPERM) {
			s->out_file = 1;
		} else if (rc < 0) {
			loop_del_fd(l, in_fd);
			free(s);
			errno = -rc;
			return NULL;
		}
	}
	update_events(s);
	return &s->base;
}

/* Unregister before closing: the fd numbers may be reused by the next connection at once. */
static void nj_close(struct transport *t)
{
	struct ndjson *s = (struct ndjson *)t;
	if (s->in_timer)
		loop_timer_cancel(s->loop, s->in_timer);
	if (s->resume_timer)
		loop_timer_cancel(s->loop, s->resume_timer);
	loop_del_fd(s->loop, s->in_fd);
	if (s->out_fd != s->in_fd)
		loop_del_fd(s->loop, s->out_fd);
	if (s->in_fd > 2)
		close(s->in_fd);
	if (s->out_fd > 2 && s->out_fd != s->in_fd)
		close(s->out_fd);
	wbuf_free(&s->in);
	wbuf_free(&s->out);
	wbuf_free(&s->hold);
	free(s);
}

/* The framing of this transport: one message, one line.  JSON-RPC text from rpc_* never
 * holds a raw newline (cJSON escapes it), so the newline is the whole frame. */
static int queue_line(struct ndjson *s, struct wbuf *b, char *line)
{
	if (!line)
		return -ENOMEM;
	int rc = 0;
	if (!s->out_broken) {
		size_t n = strlen(line);
		line[n] = '\n';   /* overwrite the NUL: one append, one line */
		rc = wbuf_append(b, line, n + 1);
	}
	free(line);
	return rc;
}

static int nj_send(struct transport *t, char *line)
{
	struct ndjson *s = (struct ndjson *)t;
	return queue_line(s, &s->hold, line);
}

static int nj_send_now(struct transport *t, char *line)
{
	struct ndjson *s = (struct ndjson *)t;
	int rc = queue_line(s, &s->out, line);
	if (rc == 0)
		update_events(s);
	return rc;
}

/* The held lines join the released stream behind what is already there, in the order they
 * were queued.  If they cannot be moved (out of memory) they stay held for the next release. */
static void nj_release(struct transport *t)
{
	struct ndjson *s = (struct ndjson *)t;
	size_t n = wbuf_pending(&s->hold);
	if (n && wbuf_pending(&s->out) == 0) {
		struct wbuf tmp = s->out;   /* the usual case: nothing else queued, no copy */
		s->out = s->hold;
		s->hold = tmp;
		wbuf_consume(&s->hold, n);
	} else if (n && wbuf_append(&s->out, s->hold.data + s->hold.off, n) == 0) {
		wbuf_consume(&s->hold, n);
	}
	update_events(s);
}

static size_t nj_pending(const struct transport *t)
{
	return queued((const struct ndjson *)t);
}

size_t ndjson_held(const struct transport *t)
{
	return wbuf_pending(&((const struct ndjson *)t)->hold);
}

static void nj_flush(struct transport *t)
{
	flush((struct ndjson *)t);
}

static int nj_congested(const struct transport *t)
{
	return congested((const struct ndjson *)t);
}

/* Shutdown only: the loop no longer runs, so wait with poll() for the peer to read, bounded
 * by timeout_ms, rather than drop answers it was promised. */
static void nj_drain(struct transport *t, int timeout_ms)
{
	struct ndjson *s = (struct ndjson *)t;
	int64_t end = loop_now() + timeout_ms;
	while (writable(s) && !s->out_broken) {
		flush(s);
		if (!writable(s))
			break;
		int64_t left = end - loop_now();
		if (left <= 0)
			break;
		struct pollfd p = { .fd = s->out_fd, .events = POLLOUT };
		poll(&p, 1, (int)left);
	}
}

static const struct transport_ops ndjson_ops = {
	.send = nj_send,
	.send_now = nj_send_now,
	.release = nj_release,
	.flush = nj_flush,
	.drain = nj_drain,
	.congested = nj_congested,
	.pending = nj_pending,
	.close = nj_close,
};
