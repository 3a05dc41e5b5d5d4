/* supervisor/mcp/toolresult.h — building CallToolResults and built-in tool definitions, the
 * shapes every model-facing tool answers in (docs/tools.md).  A result carries the same JSON as
 * structuredContent and as one text block; a failure is the envelope {status:"failed",
 * error:{code, message, retryable, recoveryHint, …}} with isError.  Functions that take a
 * cJSON consume it; all return NULL only when out of memory. */
#ifndef FP_TOOLRESULT_H
#define FP_TOOLRESULT_H

#include <cJSON.h>

/* Wrap a JSON object as a CallToolResult: same JSON as structuredContent and as text. */
cJSON *toolresult_wrap(cJSON *obj, int is_error);
/* A CallToolResult for a failure envelope already built (task_envelope(), consumed). */
cJSON *toolresult_failure(cJSON *envelope);
/* The same, building the envelope from its parts. */
cJSON *toolresult_error(const char *code, const char *message, int retryable, const char *hint);
/* The failure for a change refused because the journal cannot take it (err: -errno, such as
 * -ENOSPC or -EIO): code storage_unavailable, retryable, the errno's name in `errno`. */
cJSON *toolresult_storage_error(int err);
/* invalid_param naming param, with message. */
cJSON *toolresult_invalid_param(const char *param, const char *message);

/* Built-in tool definitions.  toolresult_tool_def appends {name, title, description,
 * inputSchema: {type: object, properties: {}, additionalProperties: false}, annotations} to arr
 * and returns the inputSchema (borrowed) for properties. */
cJSON *toolresult_tool_def(cJSON *arr, const char *name, const char *title, const char *desc, int readonly,
                           int destructive, int idempotent);
/* Add {type, description} as properties[name]; returns it (borrowed) for more keywords. */
cJSON *toolresult_prop(cJSON *props, const char *name, const char *type, const char *desc);
/* The schema's "required": a, and b unless it is NULL. */
void toolresult_require(cJSON *schema, const char *a, const char *b);

#endif
