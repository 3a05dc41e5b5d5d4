/* supervisor/mcp/resources.h — tasks' results, logs and artifacts as MCP resources
 * (resources/list, templates/list, read), and the resource link that replaces a large result.
 * The URI scheme and the artifacts themselves are supervisor/core/artifacts.h. */
#ifndef FP_RESOURCES_H
#define FP_RESOURCES_H

#include "supervisor/core/artifacts.h"

#define RES_LOG_TAIL        (1u << 20)           /* resources/read of a log: its last 1 MiB */
#define RES_READ_MAX        (8u << 20)           /* larger artifacts: download them instead */

struct task;
struct transfers;

/* resources/list (pages of 100, params.cursor) and resources/templates/list.  tr owns the
 * buffer error messages are written to. */
cJSON *resources_list(struct transfers *tr, const cJSON *params, int *rpc_err, const char **msg);
cJSON *resources_templates(struct transfers *tr);
/* resources/read of uri.  On error these return NULL with *rpc_err (-32002 not found, -32602
 * bad uri or cursor) and *msg (owned by tr, valid until the next call). */
cJSON *resources_read(struct transfers *tr, const char *uri, int *rpc_err, const char **msg);
/* A CallToolResult standing in for a finished task's result that is larger than
 * server.resultInlineBytes: a short summary (the same JSON as text and structuredContent:
 * {taskId, status, resultUri, resultBytes, summary, note}) followed by a resource_link content
 * block to forkpoint://tasks/{id}/result.  NULL when out of memory. */
cJSON *resources_result_link(const struct task *t);

/* A guess from the name's extension ("application/octet-stream" when unknown) and whether
 * that type is text. */
const char *res_mime_type(const char *name, int *is_text);

#endif
