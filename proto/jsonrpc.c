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

/* A numeric id is taken when it is a whole number in int64's range, [-2^63, 2^63).  The range
 * is checked first: converting a double outside it (1e300, infinity) to an integer is
 * undefined behaviour, and a client controls every digit of the id. */
static int id_integral(double d)
{
	return d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == (double)(long long)d;
}

/* ---- exact numbers --------------------------------------------------------------------
 * A double holds integers exactly only up to 2^53, and cJSON prints 10^15 as "1e+15": an id
 * or a progress token sent as 9007199254740993 would come back as another number, and the
 * client would never match the answer to its request.  So the few numbers that are echoed
 * (the id, params.requestId, params._meta.progressToken) keep their original text in the
 * node's valuestring (cJSON ignores it for numbers, frees it and copies it with the node),
 * and the builders print that text verbatim. */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Past one string starting at its opening quote (the text is known to be valid JSON). */
static const char *skip_string(const char *p, const char *end)
{
	for (p++; p < end && *p != '"'; p++)
		if (*p == '\\')
			p++;
	return p < end ? p + 1 : end;
}

/* Past one value of any kind. */
static const char *skip_value(const char *p, const char *end)
{
	if (p >= end)
		return end;
	if (*p == '"')
		return skip_string(p, end);
	if (*p == '{' || *p == '[') {
		int depth = 0;
		for (; p < end; p++) {
			if (*p == '"') {
				p = skip_string(p, end) - 1;
			} else if (*p == '{' || *p == '[') {
				depth++;
			} else if ((*p == '}' || *p == ']') && --depth == 0) {
				return p + 1;
			}
		}
		return end;
	}
	while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' &&
	       *p != '\n' && *p != '\r')
		p++;
	return p;
}

/* 1 if the JSON string at p (its opening quote) decodes to the ASCII key.  Escapes are
 * decoded as cJSON does for the characters a key of ours can hold ("\u0069d" is "id"). */
static int key_is(const char *p, const char *end, const char *key)
{
	for (p++; p < end && *p != '"'; key++) {
		unsigned c = (unsigned char)*p++;
		if (c == '\\' && p < end) {
			c = (unsigned char)*p++;
			if (c == 'u') {
				if (end - p < 4)
					return 0;
				unsigned v = 0;
				for (int i = 0; i < 4; i++) {
					char h = p[i];
					v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
				}
				p += 4;
				c = v;
			} else if (c == 'n' || c == 't' || c == 'r' || c == 'b' || c == 'f') {
				return 0;   /* a control character: no key of ours */
			}
		}
		if (*key == '\0' || c != (unsigned char)*key)
			return 0;
	}
	return *key == '\0';
}

/* The text of the value at path (keys of nested objects, NULL-terminated) in the object that
 * starts at p: the first member of each name, as cJSON_GetObjectItemCaseSensitive finds it. */
static const char *value_at(const char *p, const char *end, const char *const *path, size_t *len)
{
	for (; *path; path++) {
		p = skip_ws(p, end);
		if (p >= end || *p != '{')
			return NULL;
		p = skip_ws(p + 1, end);
		for (;;) {
			if (p >= end || *p != '"')
				return NULL;
			int hit = key_is(p, end, *path);
			p = skip_ws(skip_string(p, end), end);
			if (p >= end || *p != ':')
				return NULL;
			p = skip_ws(p + 1, end);
			if (hit)
				break;
			p = skip_ws(skip_value(p, end), end);
			if (p >= end || *p != ',')
				return NULL;
			p = skip_ws(p + 1, end);
		}
	}
	*len = (size_t)(skip_value(p, end) - p);
	return p;
}

/* Keep the original text of the number node at path (found in the line), when there is one. */
static void keep_number_text(cJSON *root, const char *line, size_t len, const char *const *path)
{
	cJSON *node = root;
	for (const char *const *k = path; *k && node; k++)
		node = cJSON_GetObjectItemCaseSensitive(node, *k);
	if (!cJSON_IsNumber(node) || node->valuestring)
		return;
	size_t n = 0;
	const char *text = value_at(line, line + len, path, &n);
	if (!text || n == 0 || n > 64)
		return;
	node->valuestring = strndup(text, n);   /* on ENOMEM the number prints as cJSON prints it */
}

/* 1 if text (a JSON number token) is an integer literal in int64's range: -?digits, compared
 * as text so that 9223372036854775807 is taken and 9223372036854775808 is not. */
static int int64_literal(const char *t)
{
	int neg = *t == '-';
	const char *d = t + neg;
	size_t n = strspn(d, "0123456789");
	if (n != 19)
		return n < 19;
	return strcmp(d, neg ? "9223372036854775808" : "9223372036854775807") <= 0;
}

/* A numeric id is acceptable: an integer literal in int64's range (decided by its text: the
 * double of -9223372036854775809 is -2^63), or another spelling of a whole number in that
 * range (1e3, 5.0), decided by its value as before. */
static int number_id_ok(const cJSON *id)
{
	const char *t = id->valuestring;
	if (t && t[strspn(t, "-0123456789")] == '\0')
		return int64_literal(t);
	return id_integral(id->valuedouble);
}

/* Print o, with every number that kept its original text (the id, a progress token, a request
 * id, at the places the builders put them) printed as that text. */
static void exact_numbers(cJSON *o, int raw)
{
	static const char *const places[][3] = {
		{ "id", NULL, NULL }, { "params", "progressToken", NULL }, { "params", "requestId", NULL },
	};
	for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
		cJSON *node = o;
		for (size_t k = 0; k < 3 && places[i][k] && node; k++)
			node = cJSON_GetObjectItemCaseSensitive(node, places[i][k]);
		if (!node || !node->valuestring)
			continue;
		if (raw && cJSON_IsNumber(node))
			node->type = cJSON_Raw;
		else if (!raw && cJSON_IsRaw(node))
			node->type = cJSON_Number;
	}
}

/* The line as one JSON value, or NULL with m's parse-error message set.  cJSON is lenient in
 * two ways this closes: it stops at a NUL and at the end of the first value (so "{} x" would
 * parse), and it takes any bytes into its strings. */
static cJSON *parse_text(const char *line, size_t len, struct rpc_msg *m)
{
	/* cJSON stops at the first NUL; a NUL inside the line is not JSON text. */
	if (len == 0 || memchr(line, '\0', len)) {
		return NULL;
	}
	/* JSON text is UTF-8 (RFC 8259, 8.1), and cJSON would take any bytes into its strings:
	 * they would end up in task arguments, which the job library refuses, and in answers. */
	if (!utf8_valid(line, len)) {
		m->err_msg = "Parse error: not valid UTF-8";
		return NULL;
	}
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
	if (!root)
		return NULL;
	/* Trailing non-space bytes after the value make the line invalid JSON. */
	for (const char *p = end; p && p < line + len; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\r') {
			cJSON_Delete(root);
			return NULL;
		}
	}
	return root;
}

/* A message with a method: a request (with an id) or a notification.  A params error is
 * Invalid params, not Invalid Request; a notification's carries no id. */
static void take_method(struct rpc_msg *m, const cJSON *method, const char *line, size_t len)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(m->root, "id");
	if (!cJSON_IsString(method) || method->valuestring[0] == '\0') {
		m->err_msg = "Invalid Request: method must be a non-empty string";
		return;
	}
	cJSON *params = cJSON_GetObjectItemCaseSensitive(m->root, "params");
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
}

/* Checks run in an order that keeps an answerable id whenever there is one: the id is taken
 * (when valid) before the jsonrpc version is checked, so even a malformed request gets its
 * error under its own id.  Number texts are kept before anything reads them, since a double
 * cannot hold every int64 id. */
void rpc_parse(const char *line, size_t len, struct rpc_msg *m)
{
	memset(m, 0, sizeof *m);
	m->kind = RPC_INVALID;
	m->err_code = RPC_PARSE_ERROR;
	m->err_msg = "Parse error: not valid JSON";

	cJSON *root = parse_text(line, len, m);
	if (!root)
		return;
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
	static const char *const id_path[] = { "id", NULL };
	static const char *const rid_path[] = { "params", "requestId", NULL };
	static const char *const tok_path[] = { "params", "_meta", "progressToken", NULL };
	keep_number_text(root, line, len, id_path);
	keep_number_text(root, line, len, rid_path);
	keep_number_text(root, line, len, tok_path);
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
	int id_ok = id && (cJSON_IsString(id) || (cJSON_IsNumber(id) && number_id_ok(id)));
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
		take_method(m, method, line, len);
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
	exact_numbers(o, 1);
	char *s = cJSON_PrintUnformatted(o);
	exact_numbers(o, 0);
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
	if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) {
		/* Ids of 2^53 and beyond differ in their text, not always in their double. */
		if (a->valuestring && b->valuestring)
			return strcmp(a->valuestring, b->valuestring) == 0 ||
			       (a->valuedouble == b->valuedouble && a->valuedouble < 9007199254740992.0 &&
			        a->valuedouble > -9007199254740992.0);
		return a->valuedouble == b->valuedouble;
	}
	return 0;
}
