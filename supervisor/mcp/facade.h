/* supervisor/mcp/facade.h — the earlier names of the result builders (toolresult.h) and of
 * views_iso_time (views.h), for supervisor/core/transfer.c, which still uses them until its
 * MCP tool code moves into supervisor/mcp.  New code includes toolresult.h and views.h; this
 * header goes once no file includes it. */
#ifndef FP_FACADE_H
#define FP_FACADE_H

#include "supervisor/mcp/toolresult.h"
#include "supervisor/mcp/views.h"

#define facade_iso_time    views_iso_time
#define facade_result      toolresult_wrap
#define facade_failure     toolresult_failure
#define facade_error       toolresult_error
#define facade_tool_def    toolresult_tool_def
#define facade_prop        toolresult_prop
#define facade_require     toolresult_require

#endif
