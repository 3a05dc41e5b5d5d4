/* supervisor/mcp/catalog.c — see catalog.h. */
#include "supervisor/mcp/catalog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/jsonrpc.h"
#include "supervisor/core/transfer.h"
#include "supervisor/mcp/files.h"
#include "supervisor/mcp/resources.h"
#include "supervisor/mcp/tasktools.h"

#define TOOLS_PAGE 100

struct catalog {
	struct supervisor *sv;
	cJSON *tools;          /* every tool definition, configured tools first */
};

/* A configured tool as tools/list shows it.  A task-mode tool answers with a handle, not its
 * result, so its outputSchema is not declared: SDK clients would reject the handle. */
static cJSON *configured_tool_def(const struct tool_cfg *tc)
{
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "name", tc->name);
	if (tc->title)
		cJSON_AddStringToObject(t, "title", tc->title);
	if (tc->description)
		cJSON_AddStringToObject(t, "description", tc->description);
	cJSON_AddItemToObject(t, "inputSchema", cJSON_Duplicate(tc->input_schema, 1));
	if (tc->output_schema && tc->mode != TOOL_MODE_TASK)
		cJSON_AddItemToObject(t, "outputSchema", cJSON_Duplicate(tc->output_schema, 1));
	if (tc->annotations)
		cJSON_AddItemToObject(t, "annotations", cJSON_Duplicate(tc->annotations, 1));
	static const char *const support[] = { "forbidden", "optional", "required" };
	cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "execution"), "taskSupport", support[tc->task_support]);
	return t;
}

/* Built once: tools/list is answered from this array, never rebuilt per request. */
struct catalog *catalog_new(struct supervisor *sv)
{
	struct catalog *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->sv = sv;
	c->tools = cJSON_CreateArray();
	if (!c->tools) {
		free(c);
		return NULL;
	}
	for (size_t i = 0; i < sv->cfg->n_tools; i++)
		cJSON_AddItemToArray(c->tools, configured_tool_def(&sv->cfg->tools[i]));
	tasktools_list(c->tools);
	files_list_tools(c->tools);
	return c;
}

void catalog_free(struct catalog *c)
{
	if (!c)
		return;
	cJSON_Delete(c->tools);
	free(c);
}

/* Cursors "tN" are offsets into the fixed array; anything else is an invalid cursor, as the
 * spec asks (-32602). */
cJSON *catalog_tools_page(const struct catalog *c, const cJSON *cursor)
{
	int start = 0, total = cJSON_GetArraySize(c->tools);
	if (cursor) {
		char *end = NULL;
		long v = cJSON_IsString(cursor) && cursor->valuestring[0] == 't'
			? strtol(cursor->valuestring + 1, &end, 10) : -1;
		if (!end || *end || v <= 0 || v >= total)
			return NULL;
		start = (int)v;
	}
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(r, "tools");
	int i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, c->tools) {
		if (i >= start && i < start + TOOLS_PAGE)
			cJSON_AddItemToArray(arr, cJSON_Duplicate(t, 1));
		i++;
	}
	if (start + TOOLS_PAGE < total) {
		char cur[32];
		snprintf(cur, sizeof cur, "t%d", start + TOOLS_PAGE);
		cJSON_AddStringToObject(r, "nextCursor", cur);
	}
	return r;
}

const cJSON *catalog_tool_schema(const struct catalog *c, const char *name)
{
	const cJSON *t;
	cJSON_ArrayForEach(t, c->tools)
		if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, name) == 0)
			return cJSON_GetObjectItem(t, "inputSchema");
	return NULL;
}

/* Both eras share this; each maps the error codes to its own (see stateless.c). */
cJSON *catalog_resources(const struct catalog *c, const char *method, const cJSON *params, int *code,
                         const char **msg)
{
	struct transfers *tr = c->sv->transfers;
	*code = RPC_INTERNAL_ERROR;
	*msg = "resources are not available";
	if (!tr)
		return NULL;
	if (strcmp(method, "resources/list") == 0)
		return resources_list(tr, params, code, msg);
	if (strcmp(method, "resources/templates/list") == 0)
		return resources_templates(tr);
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(params, "uri");
	if (!cJSON_IsString(uri)) {
		*code = RPC_INVALID_PARAMS;
		*msg = "resources/read: params.uri must be a string";
		return NULL;
	}
	return resources_read(tr, uri->valuestring, code, msg);
}
