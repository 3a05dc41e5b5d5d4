/* supervisor/core/mcpresult.h — an MCP CallToolResult supplied by a job (the `mcp` form of a result
 * frame), made fit to forward to clients.  The job is untrusted: what it sends must be a
 * result a client can take at face value, with nothing in it that only the server may say.
 *
 * Kept: `content` (required; every block one of the MCP content types with its required
 * fields of the right types), `structuredContent` (an object) and `isError` (a bool).
 * Dropped: `_meta` at every level (it carries protocol facts such as related-task and the
 * server's own task-handle mark), and keys that are not part of a block's type.
 * Refused: unknown block types, missing or mistyped fields, bad base64, and links
 * (resource_link, resource) that are not URIs or point at file:, javascript:, vbscript: or
 * data: — a file:// link would point the client at its own files — or at another task's
 * forkpoint:// resources. */
#ifndef FP_MCPRESULT_H
#define FP_MCPRESULT_H

#include <stddef.h>
#include <cJSON.h>

#define MCPRESULT_MAX_BLOCKS 1024

/* Clean r in place.  0; or -EINVAL with the reason in why (naming the block and field), and
 * r then must not be forwarded.  task_id: the task the result belongs to. */
int mcpresult_clean(cJSON *r, const char *task_id, char *why, size_t whylen);

#endif
