/* supervisor/session.h — one MCP transport connection: newline-delimited messages in, a
 * buffered queue of lines out, all non-blocking on the loop.  Knows nothing of MCP itself.
 * Input is read in bounded slices per turn; a line longer than max_line is reported once (as
 * line == NULL) and skipped up to its newline, so a hostile client cannot make us buffer it.
 * While OUT_HIGH bytes or more wait to be written the session stops reading input and stops
 * handing out the lines it has buffered (backpressure: a client that does not read its answers
 * cannot grow our memory by sending requests); once the queue has drained to half of that it
 * goes on; the owner hears of both (session_set_flow_cb).  Producers of unrequested messages
 * (notifications) check session_congested() and hold back or coalesce them meanwhile. */
#ifndef FP_SESSION_H
#define FP_SESSION_H

#include <stddef.h>
#include "supervisor/core/loop.h"

#define OUT_HIGH (16u << 20)   /* the output queue's high-water mark, in bytes */

struct session;

/* line: one message without its newline (NUL-terminated at line[len]); NULL if oversized. */
typedef void (*session_line_cb)(void *arg, const char *line, size_t len);
/* The peer closed its input (EOF) or the connection failed. */
typedef void (*session_eof_cb)(void *arg);
/* stopped 1: the output queue reached OUT_HIGH and the session stopped handing out requests;
 * stopped 0: it has drained to OUT_LOW, the owner may produce again (runs in a loop turn of its
 * own, before the buffered requests are handed out). */
typedef void (*session_flow_cb)(void *arg, int stopped);

struct session *session_new(struct loop *l, int in_fd, int out_fd, size_t max_line,
                            session_line_cb on_line, session_eof_cb on_eof, void *arg);
/* Unregisters and frees; closes the fds only if they are > 2. */
void session_free(struct session *s);
/* Queue one line (a newline is added).  Takes ownership of line (malloc'd); NULL is -ENOMEM.
 * Queued lines are held back until session_release(): a response may depend on journal records
 * of the same loop turn, and must not reach the client before they are durable. */
int session_send(struct session *s, char *line);
/* Queue one line that depends on nothing still waiting for a commit (a ping, a read of
 * durable state): it is released at once and may overtake held lines.  JSON-RPC answers carry
 * their ids, so their order across requests does not matter; a caller must never use this for
 * a line that observes a change not yet durable.  Ownership as for session_send(). */
int session_send_now(struct session *s, char *line);
/* Everything queued so far may be written (called after the turn's journal commit).  If the
 * held lines cannot be moved (out of memory) they stay held for the next release. */
void session_release(struct session *s);
/* Bytes queued with session_send() and not yet released. */
size_t session_held(const struct session *s);
/* Write what is released and can be written without blocking. */
void session_flush(struct session *s);
/* At shutdown: write everything released, waiting up to timeout_ms. */
void session_drain(struct session *s, int timeout_ms);
size_t session_out_pending(const struct session *s);
/* 1 from the moment OUT_HIGH bytes wait to be written until the queue has drained to OUT_LOW:
 * send nothing the client did not ask for meanwhile. */
int session_congested(const struct session *s);
void session_set_flow_cb(struct session *s, session_flow_cb cb, void *arg);

#endif
