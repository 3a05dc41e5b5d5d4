/* supervisor/mcp/resources.h — tasks' results, logs and artifacts as MCP resources
 * (resources/list, templates/list, read; the entry points are declared in transfer.h), and
 * the resource link that replaces a large result.  The URI scheme and the artifacts
 * themselves are supervisor/core/artifacts.h. */
#ifndef FP_RESOURCES_H
#define FP_RESOURCES_H

#include "supervisor/core/artifacts.h"

#define RES_LOG_TAIL        (1u << 20)           /* resources/read of a log: its last 1 MiB */
#define RES_READ_MAX        (8u << 20)           /* larger artifacts: download them instead */

/* A guess from the name's extension ("application/octet-stream" when unknown) and whether
 * that type is text. */
const char *res_mime_type(const char *name, int *is_text);

#endif
