/* supervisor/mcp/facade.h — the earlier names of the result builders (toolresult.h) and task
 * views (views.h), for the files that still use them (supervisor/core/transfer.c,
 * supervisor/cli/ops.c and call.c).  New code includes toolresult.h and views.h; this header
 * goes once no file includes it. */
#ifndef FP_FACADE_H
#define FP_FACADE_H

#include "supervisor/mcp/toolresult.h"
#include "supervisor/mcp/views.h"

#define FACADE_HANDLE_META VIEWS_HANDLE_META
#define facade_iso_time    views_iso_time
#define facade_result      toolresult_wrap
#define facade_failure     toolresult_failure
#define facade_error       toolresult_error
#define facade_tool_def    toolresult_tool_def
#define facade_prop        toolresult_prop
#define facade_require     toolresult_require

#endif
