/* supervisor/core/mcpresult.c — see mcpresult.h.  Each block is rebuilt from an allow-list of its
 * type's keys rather than filtered by a deny-list, so whatever MCP adds later reaches clients
 * only once it is listed here. */
#include "supervisor/core/mcpresult.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "supervisor/core/artifacts.h"

/* Standard base64 with padding, as MCP's image, audio and blob fields carry.  Only the
 * alphabet, the length and the place of the padding are checked, without decoding: enough
 * that a client's decoder is never handed text that is not base64, at no cost in memory
 * for large images. */
static int base64_ok(const char *s)
{
	size_t n = strlen(s), pad = 0;
	if (n % 4)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '=') {
			if (i < n - 2)
				return 0;
			pad++;
			continue;
		}
		if (pad || !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		             c == '+' || c == '/'))
			return 0;
	}
	return 1;
}

/* A URI with a scheme (RFC 3986) and no whitespace or control characters.  Refused: file:
 * (it would point the client at its own files), script and data schemes, and forkpoint://
 * resources of other tasks.  Other schemes (https:, a server's own test:, ...) pass. */
static int uri_ok(const char *uri, const char *task_id)
{
	static const char *const refused[] = { "file", "javascript", "vbscript", "data" };
	size_t n = 0;
	if (!((uri[0] >= 'a' && uri[0] <= 'z') || (uri[0] >= 'A' && uri[0] <= 'Z')))
		return 0;
	while (uri[n] && uri[n] != ':' && (isalnum((unsigned char)uri[n]) || strchr("+-.", uri[n])))
		n++;
	if (uri[n] != ':')
		return 0;
	/* Whitespace and control characters have no place in a URI and could hide its real
	 * target from a user reading it. */
	for (const unsigned char *p = (const unsigned char *)uri; *p; p++)
		if (*p <= 0x20 || *p == 0x7f)
			return 0;
	/* Schemes are case-insensitive (RFC 3986, 3.1): FILE: is refused like file:. */
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
		if (strlen(refused[i]) == n && strncasecmp(uri, refused[i], n) == 0)
			return 0;
	struct artifacts_uri u;
	if (strncasecmp(uri, "forkpoint:", 10) == 0)
		return artifacts_uri_parse(uri, &u) == 0 && strcmp(u.id, task_id) == 0;
	return 1;
}

/* Move key from src to dst if present; it must satisfy type (a cJSON_Is* predicate).  Moving
 * (detach, then attach) rather than copying keeps a large value such as image data from
 * being duplicated.  It also empties src as it goes, so on a failure src is left part
 * stripped, which is why mcpresult.h forbids forwarding r after a failure. */
static int take(cJSON *dst, cJSON *src, const char *key, cJSON_bool (*type)(const cJSON *), int required,
                const char *where, char *why, size_t whylen)
{
	cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(src, key);
	if (!v) {
		if (required)
			snprintf(why, whylen, "%s needs \"%s\"", where, key);
		return required ? -EINVAL : 0;
	}
	if (!type(v)) {
		snprintf(why, whylen, "%s: \"%s\" has the wrong type", where, key);
		cJSON_Delete(v);
		return -EINVAL;
	}
	cJSON_AddItemToObject(dst, key, v);
	return 0;
}

/* annotations: {audience?: ["user"|"assistant"], priority?: 0..1, lastModified?: string}.
 * Rebuilt like the blocks, so unknown keys inside annotations are dropped too; the value
 * checks run on the clean copy, after the type checks, so each check sees the right type. */
static int take_annotations(cJSON *dst, cJSON *src, const char *where, char *why, size_t whylen)
{
	cJSON *a = cJSON_GetObjectItemCaseSensitive(src, "annotations");
	if (!a)
		return 0;
	cJSON *clean = cJSON_CreateObject();
	int rc = !cJSON_IsObject(a) ? -EINVAL : 0;
	if (rc == 0)
		rc = take(clean, a, "audience", cJSON_IsArray, 0, where, why, whylen);
	if (rc == 0)
		rc = take(clean, a, "priority", cJSON_IsNumber, 0, where, why, whylen);
	if (rc == 0)
		rc = take(clean, a, "lastModified", cJSON_IsString, 0, where, why, whylen);
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(clean, "priority");
	const cJSON *e;
	if (rc == 0 && p && (p->valuedouble < 0 || p->valuedouble > 1))
		rc = -EINVAL;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(clean, "audience"))
		if (rc == 0 && (!cJSON_IsString(e) || (strcmp(e->valuestring, "user") != 0 &&
		                                      strcmp(e->valuestring, "assistant") != 0)))
			rc = -EINVAL;
	if (rc < 0) {
		if (!why[0])
			snprintf(why, whylen, "%s: invalid annotations", where);
		cJSON_Delete(clean);
		return rc;
	}
	cJSON_AddItemToObject(dst, "annotations", clean);
	return 0;
}

/* The embedded resource of a "resource" block: uri and exactly one of text or blob.  Both or
 * neither would leave the client to guess which content is meant, so either is refused.
 * The uri gets the same check as a resource_link's: an embedded resource can name a client
 * file or another task's resource as easily as a link can. */
static int clean_embedded(cJSON *dst, cJSON *src, const char *task_id, const char *where, char *why,
                          size_t whylen)
{
	cJSON *res = cJSON_GetObjectItemCaseSensitive(src, "resource");
	if (!cJSON_IsObject(res)) {
		snprintf(why, whylen, "%s needs \"resource\" (an object)", where);
		return -EINVAL;
	}
	cJSON *c = cJSON_CreateObject();
	int rc = take(c, res, "uri", cJSON_IsString, 1, where, why, whylen);
	if (rc == 0)
		rc = take(c, res, "mimeType", cJSON_IsString, 0, where, why, whylen);
	if (rc == 0)
		rc = take(c, res, "text", cJSON_IsString, 0, where, why, whylen);
	if (rc == 0)
		rc = take(c, res, "blob", cJSON_IsString, 0, where, why, whylen);
	const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
	const cJSON *blob = cJSON_GetObjectItemCaseSensitive(c, "blob");
	if (rc == 0 && (!text) == (!blob)) {
		snprintf(why, whylen, "%s: resource needs exactly one of \"text\" and \"blob\"", where);
		rc = -EINVAL;
	} else if (rc == 0 && blob && !base64_ok(blob->valuestring)) {
		snprintf(why, whylen, "%s: resource.blob is not base64", where);
		rc = -EINVAL;
	} else if (rc == 0 && !uri_ok(cJSON_GetObjectItemCaseSensitive(c, "uri")->valuestring, task_id)) {
		snprintf(why, whylen, "%s: resource.uri may not be a file:, script or data URI, or another task's forkpoint:// resource", where);
		rc = -EINVAL;
	}
	if (rc < 0) {
		cJSON_Delete(c);
		return rc;
	}
	cJSON_AddItemToObject(dst, "resource", c);
	return 0;
}

/* Rebuild one content block from its type's keys.  An unknown type is refused rather than
 * passed on: the allow-list is the point (see the file header).  where names the block by
 * index, so the reason in why says which block of a long array was wrong. */
static int clean_block(cJSON *src, size_t i, const char *task_id, cJSON **out, char *why, size_t whylen)
{
	char where[48];
	snprintf(where, sizeof where, "content[%zu]", i);
	const cJSON *ty = cJSON_GetObjectItemCaseSensitive(src, "type");
	if (!cJSON_IsObject(src) || !cJSON_IsString(ty)) {
		snprintf(why, whylen, "%s must be an object with a \"type\" string", where);
		return -EINVAL;
	}
	cJSON *b = cJSON_CreateObject();
	const char *t = ty->valuestring;
	int rc = 0;
	cJSON_AddStringToObject(b, "type", t);
	if (strcmp(t, "text") == 0) {
		rc = take(b, src, "text", cJSON_IsString, 1, where, why, whylen);
	} else if (strcmp(t, "image") == 0 || strcmp(t, "audio") == 0) {
		rc = take(b, src, "data", cJSON_IsString, 1, where, why, whylen);
		if (rc == 0)
			rc = take(b, src, "mimeType", cJSON_IsString, 1, where, why, whylen);
		if (rc == 0 && !base64_ok(cJSON_GetObjectItemCaseSensitive(b, "data")->valuestring)) {
			snprintf(why, whylen, "%s: data is not base64", where);
			rc = -EINVAL;
		}
	} else if (strcmp(t, "resource_link") == 0) {
		static const char *const opt[] = { "title", "description", "mimeType" };
		rc = take(b, src, "uri", cJSON_IsString, 1, where, why, whylen);
		if (rc == 0)
			rc = take(b, src, "name", cJSON_IsString, 1, where, why, whylen);
		for (size_t k = 0; rc == 0 && k < sizeof opt / sizeof opt[0]; k++)
			rc = take(b, src, opt[k], cJSON_IsString, 0, where, why, whylen);
		if (rc == 0)
			rc = take(b, src, "size", cJSON_IsNumber, 0, where, why, whylen);
		if (rc == 0 && !uri_ok(cJSON_GetObjectItemCaseSensitive(b, "uri")->valuestring, task_id)) {
			snprintf(why, whylen, "%s: uri may not be a file:, script or data URI, or another task's forkpoint:// resource", where);
			rc = -EINVAL;
		}
	} else if (strcmp(t, "resource") == 0) {
		rc = clean_embedded(b, src, task_id, where, why, whylen);
	} else {
		snprintf(why, whylen, "%s: unknown content type \"%.40s\" (text, image, audio, resource_link, resource)",
		         where, t);
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = take_annotations(b, src, where, why, whylen);
	if (rc < 0) {
		cJSON_Delete(b);
		return rc;
	}
	*out = b;
	return 0;
}

/* Every block is validated into a new array before r is touched at the top level, so a
 * refused result is never half-rewritten at that level.  The block limit is checked first,
 * before any block is rebuilt, so an oversized content array is refused without the work. */
int mcpresult_clean(cJSON *r, const char *task_id, char *why, size_t whylen)
{
	why[0] = 0;
	cJSON *content = cJSON_GetObjectItemCaseSensitive(r, "content");
	if (!cJSON_IsObject(r) || !cJSON_IsArray(content)) {
		snprintf(why, whylen, "an mcp result needs a content array");
		return -EINVAL;
	}
	if (cJSON_GetArraySize(content) > MCPRESULT_MAX_BLOCKS) {
		snprintf(why, whylen, "an mcp result has at most %d content blocks", MCPRESULT_MAX_BLOCKS);
		return -EINVAL;
	}
	const cJSON *sc = cJSON_GetObjectItemCaseSensitive(r, "structuredContent");
	const cJSON *ie = cJSON_GetObjectItemCaseSensitive(r, "isError");
	if ((sc && !cJSON_IsObject(sc)) || (ie && !cJSON_IsBool(ie))) {
		snprintf(why, whylen, "structuredContent must be an object and isError a bool");
		return -EINVAL;
	}
	cJSON *blocks = cJSON_CreateArray();
	size_t i = 0;
	for (cJSON *src = content->child; src; src = src->next, i++) {
		cJSON *b;
		if (clean_block(src, i, task_id, &b, why, whylen) < 0) {
			cJSON_Delete(blocks);
			return -EINVAL;
		}
		cJSON_AddItemToArray(blocks, b);
	}
	/* Everything else at the top, _meta first of all, is dropped. */
	cJSON *keep_sc = cJSON_DetachItemFromObjectCaseSensitive(r, "structuredContent");
	cJSON *keep_ie = cJSON_DetachItemFromObjectCaseSensitive(r, "isError");
	while (r->child)
		cJSON_Delete(cJSON_DetachItemViaPointer(r, r->child));
	cJSON_AddItemToObject(r, "content", blocks);
	if (keep_sc)
		cJSON_AddItemToObject(r, "structuredContent", keep_sc);
	if (keep_ie)
		cJSON_AddItemToObject(r, "isError", keep_ie);
	return 0;
}
