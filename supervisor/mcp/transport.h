/* supervisor/mcp/transport.h — one client connection, as dispatch sees it.  Every way a client
 * reaches the server (stdio today: ndjson.h; a Unix socket or a Streamable HTTP session later)
 * implements this ops table, and dispatch (server.c) talks to nothing else.
 *
 * The contract every implementation keeps:
 *   - Messages.  One JSON-RPC message per on_message call (NUL-terminated at msg[len]); msg is
 *     NULL once for a message over the transport's size limit, which is skipped.  Messages of
 *     one connection are handed out in the order they arrived, on the loop thread.
 *   - Ordering against the store.  send() queues a message and HOLDS it: an answer may observe
 *     records appended in this loop turn, and must not reach the client before they are
 *     durable.  release() (after the turn's group commit) lets everything held go out, in the
 *     order it was queued.  send_now() is for a message that observes nothing undurable (a
 *     ping, a read of durable state, a refusal): it is released at once and may overtake held
 *     messages (JSON-RPC answers carry their ids).  flush() writes what is released and can be
 *     written without blocking; drain() waits, bounded, for it at shutdown.
 *   - Back-pressure.  While a client does not read (congested() is 1, from a high-water mark
 *     until the queue drains to half of it), the transport stops handing out its requests, and
 *     producers of unrequested messages (notifications, logs) hold them back or coalesce them.
 *     on_flow(1) says it stopped, on_flow(0) (in a loop turn of its own) that it goes on.
 *   - Close.  on_close runs once when the peer ends its input or the connection fails.  The
 *     owner then frees the transport with close(), never from inside one of its callbacks;
 *     close() unregisters from the loop, drops what was not written and frees.  Nothing is
 *     sent to a connection after close().
 * Sending takes ownership of msg (malloc'd, without a newline; NULL is -ENOMEM).  send and
 * send_now return 0 or -ENOMEM; a connection whose peer is gone accepts and discards. */
#ifndef FP_TRANSPORT_H
#define FP_TRANSPORT_H

#include <stddef.h>

struct transport;

/* What a transport tells its owner.  arg is the owner's (transport_bind). */
struct transport_events {
	void (*on_message)(void *arg, const char *msg, size_t len);
	void (*on_close)(void *arg);
	void (*on_flow)(void *arg, int stopped);
};

struct transport_ops {
	int (*send)(struct transport *t, char *msg);
	int (*send_now)(struct transport *t, char *msg);
	void (*release)(struct transport *t);
	void (*flush)(struct transport *t);
	void (*drain)(struct transport *t, int timeout_ms);
	int (*congested)(const struct transport *t);
	/* Bytes queued and not yet written, held or released. */
	size_t (*pending)(const struct transport *t);
	void (*close)(struct transport *t);
};

/* The head of every implementation's connection struct. */
struct transport {
	const struct transport_ops *ops;
	struct transport_events ev;
	void *arg;
};

/* Set the owner's callbacks.  An implementation delivers nothing before its first loop turn,
 * so binding right after it was made loses nothing. */
static inline void transport_bind(struct transport *t, const struct transport_events *ev, void *arg)
{
	t->ev = *ev;
	t->arg = arg;
}

static inline int transport_send(struct transport *t, char *msg) { return t->ops->send(t, msg); }
static inline int transport_send_now(struct transport *t, char *msg) { return t->ops->send_now(t, msg); }
static inline void transport_release(struct transport *t) { t->ops->release(t); }
static inline void transport_flush(struct transport *t) { t->ops->flush(t); }
static inline void transport_drain(struct transport *t, int ms) { t->ops->drain(t, ms); }
static inline int transport_congested(const struct transport *t) { return t->ops->congested(t); }
static inline size_t transport_pending(const struct transport *t) { return t->ops->pending(t); }
static inline void transport_close(struct transport *t)
{
	if (t)
		t->ops->close(t);
}

#endif
