/* supervisor/mcp/catalog.h — what the server offers its clients: the tool definitions (the
 * configured tools first, then the durable_task_* and file_transfer_* built-ins) paged for
 * tools/list, and the resources methods (tasks' results, logs and artifacts, resources.h).
 * Made once per server from the loaded config; read-only afterwards. */
#ifndef FP_CATALOG_H
#define FP_CATALOG_H

#include <cJSON.h>

#include "supervisor/core/supervisor.h"

struct catalog;

struct catalog *catalog_new(struct supervisor *sv);
void catalog_free(struct catalog *c);
/* One page of tools/list: {tools, nextCursor?} (caller frees), or NULL for an invalid cursor. */
cJSON *catalog_tools_page(const struct catalog *c, const cJSON *cursor);
/* inputSchema of a listed tool (borrowed), or NULL. */
const cJSON *catalog_tool_schema(const struct catalog *c, const char *name);
/* resources/list, resources/templates/list or resources/read (by method): the result, or NULL
 * with *code and *msg (static text) for the error (also when file transfer is unavailable). */
cJSON *catalog_resources(const struct catalog *c, const char *method, const cJSON *params, int *code,
                         const char **msg);

#endif
