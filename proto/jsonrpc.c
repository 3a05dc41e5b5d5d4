/* proto/jsonrpc.c — see jsonrpc.h. */
#include "proto/jsonrpc.h"

#include <string.h>

#include "proto/utf8.h"

/* 1 if a string in the JSON text holds the escape \u0000.  cJSON keeps strings NUL-terminated,
 * so such a string would silently end at the NUL ("ok.txt\u0000../x" reads as "ok.txt"): a
 * path, a name or an argument would mean something other than what was sent.  The text is
 * known to be valid JSON when this runs, so tracking quotes and backslashes is enough. */
static int has_nul_escape(const char *s, size_t len)
{
	int in_str = 0;
	for (size_t i = 0; i < len; i++) {
		if (!in_str) {
			in_str = s[i] == '"';
			continue;
		}
		if (s[i] == '"') {
			in_str = 0;
		} else if (s[i] == '\\' && i + 1 < len) {
			if (s[i + 1] == 'u' && i + 5 < len && memcmp(s + i + 2, "0000", 4) == 0)
				return 1;
			i++;
		}
	}
	return 0;
}

void rpc_parse(const char *line, size_t len, struct rpc_msg *m)
{
	memset(m, 0, sizeof *m);
	m->kind = RPC_INVALID;
	m->err_code = RPC_PARSE_ERROR;
	m->err_msg = "Parse error: not valid JSON";

	/* cJSON stops at the first NUL; a NUL inside the line is not JSON text. */
	if (len == 0 || memchr(line, '\0', len)) {
		return;
	}
	/* JSON text is UTF-8 (RFC 8259, 8.1), and cJSON would take any bytes into its strings:
	 * they would end up in task arguments, which the job library refuses, and in answers. */
	if (!utf8_valid(line, len)) {
		m->err_msg = "Parse error: not valid UTF-8";
		return;
	}
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
	if (!root)
		return;
	/* Trailing non-space bytes after the value make the line invalid JSON. */
	for (const char *p = end; p && p < line + len; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\r') {
			cJSON_Delete(root);
			return;
		}
	}
	m->root = root;
	m->err_code = RPC_INVALID_REQUEST;
	if (cJSON_IsArray(root)) {
		m->err_msg = "Invalid Request: batches are not supported";
		return;
	}
	if (!cJSON_IsObject(root)) {
		m->err_msg = "Invalid Request: a message must be a JSON object";
		return;
	}
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
	int id_ok = id && (cJSON_IsString(id) || (cJSON_IsNumber(id) &&
	            id->valuedouble == (double)(long long)id->valuedouble));
	if (id_ok)
		m->id = id;
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "jsonrpc");
	if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0) {
		m->err_msg = "Invalid Request: jsonrpc must be \"2.0\"";
		return;
	}
	if (id && !id_ok) {
		m->err_msg = "Invalid Request: id must be a string or an integer";
		return;
	}
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(root, "method");
	if (method) {
		if (!cJSON_IsString(method) || method->valuestring[0] == '\0') {
			m->err_msg = "Invalid Request: method must be a non-empty string";
			return;
		}
		cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
		if (params && !cJSON_IsObject(params)) {
			/* MCP params are always objects; positional arrays are not used. */
			m->err_code = RPC_INVALID_PARAMS;
			m->err_msg = "Invalid params: params must be an object";
			if (!id)
				m->id = NULL;
			return;
		}
		if (has_nul_escape(line, len)) {
			m->err_code = RPC_INVALID_PARAMS;
			m->err_msg = "Invalid params: a string contains \\u0000 (NUL), which no string here may hold";
			if (!id)
				m->id = NULL;
			return;
		}
		m->method = method->valuestring;
		m->params = params;
		m->kind = id ? RPC_REQUEST : RPC_NOTIFICATION;
		return;
	}
	const cJSON *result = cJSON_GetObjectItemCaseSensitive(root, "result");
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (id && ((result != NULL) ^ (error != NULL))) {
		m->result = result;
		m->error = error;
		m->kind = RPC_RESPONSE;
		return;
	}
	m->err_msg = "Invalid Request: neither a request, a notification nor a response";
}

void rpc_msg_free(struct rpc_msg *m)
{
	cJSON_Delete(m->root);
	memset(m, 0, sizeof *m);
}

static char *finish(cJSON *o)
{
	if (!o)
		return NULL;
	/* PrintUnformatted escapes control characters, so the text never contains a newline. */
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	/* Input is UTF-8, but a message that clipped a string ("%.100s") may end inside a
	 * character; what goes to the client must still be UTF-8.  A bad byte can only sit inside
	 * a JSON string (cJSON writes everything else as ASCII), so '?' keeps the text JSON. */
	if (s)
		utf8_scrub(s);
	return s;
}

static cJSON *envelope(const cJSON *id)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON *idc = id ? cJSON_Duplicate(id, 0) : cJSON_CreateNull();
	cJSON_AddItemToObject(o, "id", idc);
	return o;
}

char *rpc_result(const cJSON *id, cJSON *result)
{
	cJSON *o = envelope(id);
	if (!o) {
		cJSON_Delete(result);
		return NULL;
	}
	cJSON_AddItemToObject(o, "result", result ? result : cJSON_CreateObject());
	return finish(o);
}

char *rpc_error(const cJSON *id, int code, const char *message, cJSON *data)
{
	cJSON *o = envelope(id);
	cJSON *e = cJSON_CreateObject();
	if (!o || !e) {
		cJSON_Delete(o);
		cJSON_Delete(e);
		cJSON_Delete(data);
		return NULL;
	}
	cJSON_AddNumberToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", message);
	if (data)
		cJSON_AddItemToObject(e, "data", data);
	cJSON_AddItemToObject(o, "error", e);
	return finish(o);
}

char *rpc_notification(const char *method, cJSON *params)
{
	cJSON *o = cJSON_CreateObject();
	if (!o) {
		cJSON_Delete(params);
		return NULL;
	}
	cJSON_AddStringToObject(o, "jsonrpc", "2.0");
	cJSON_AddStringToObject(o, "method", method);
	if (params)
		cJSON_AddItemToObject(o, "params", params);
	return finish(o);
}

char *rpc_request(const cJSON *id, const char *method, cJSON *params)
{
	cJSON *o = envelope(id);
	if (!o) {
		cJSON_Delete(params);
		return NULL;
	}
	cJSON_AddStringToObject(o, "method", method);
	if (params)
		cJSON_AddItemToObject(o, "params", params);
	return finish(o);
}

int rpc_same_id(const cJSON *a, const cJSON *b)
{
	if (cJSON_IsString(a) && cJSON_IsString(b))
		return strcmp(a->valuestring, b->valuestring) == 0;
	if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
		return a->valuedouble == b->valuedouble;
	return 0;
}
