/* supervisor/mcp/ndjson.h — the stdio transport: newline-delimited JSON-RPC messages over a
 * pair of fds (stdin/stdout; one socket fd serves as both), non-blocking on the loop.  It
 * implements transport.h and knows nothing of MCP itself.
 *
 * Input is read in bounded slices per turn; a line longer than max_line is reported once (as
 * msg == NULL) and skipped up to its newline, so a hostile client cannot make us buffer it.
 * Back-pressure as transport.h says, with OUT_HIGH as the high-water mark.  A regular file
 * (which epoll cannot poll) works as input or output too: it is always ready.  Closing frees
 * the fds that are > 2. */
#ifndef FP_NDJSON_H
#define FP_NDJSON_H

#include <stddef.h>

#include "supervisor/core/loop.h"
#include "supervisor/mcp/transport.h"

#define OUT_HIGH (16u << 20)   /* the output queue's high-water mark, in bytes */

/* A connection on in_fd/out_fd (made non-blocking).  NULL with errno on failure.  Bind its
 * events (transport_bind) before the loop runs again. */
struct transport *ndjson_open(struct loop *l, int in_fd, int out_fd, size_t max_line);
/* Bytes queued with send() and not yet released (tests). */
size_t ndjson_held(const struct transport *t);

#endif
