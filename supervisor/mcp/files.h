/* supervisor/mcp/files.h — the file_transfer_* tools (open / write / read / commit / status):
 * their definitions for tools/list, argument validation against those definitions, and the
 * CallToolResult each answer becomes.  The transfers themselves are supervisor/core/transfer.h;
 * docs/files.md is the model-facing reference. */
#ifndef FP_FILES_H
#define FP_FILES_H

#include <cJSON.h>

struct transfers;

/* The five tool definitions for tools/list, appended to arr. */
void files_list_tools(cJSON *arr);
/* 1 if name is one of them. */
int files_is_tool(const char *name);

/* How an answer that is not ready yet reaches the caller: answer(ctx, result) is called once,
 * on the loop thread, with the CallToolResult (consumed; NULL when out of memory) — or, if the
 * worker pool stops first, drop(ctx) instead. */
struct files_later {
	void (*answer)(void *ctx, cJSON *result);
	void (*drop)(void *ctx);
	void *ctx;
};

/* Run tool `name` whose inputSchema (from files_list_tools) is schema; args are validated
 * here (the schema's defaults are filled into args).  Returns a CallToolResult, or NULL: out of memory, or (with later) the answer comes
 * through later — transfers_deferred() grew by one then, which tells the two apart.  With
 * later NULL (or no worker pool) every call is answered at once, blocking work done inline. */
cJSON *files_call_later(struct transfers *tr, const char *name, const cJSON *schema, cJSON *args,
                        const struct files_later *later);
cJSON *files_call(struct transfers *tr, const char *name, const cJSON *schema, cJSON *args);

#endif
