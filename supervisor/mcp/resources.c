/* supervisor/mcp/resources.c — see resources.h: tasks' results, logs and artifacts as MCP
 * resources, and the resource link that replaces a large result.  The artifacts themselves
 * (names, URIs, opening, collection) are supervisor/core/artifacts.c. */
#include "supervisor/mcp/resources.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/b64.h"
#include "state/blob.h"
#include "supervisor/core/persist.h"
#include "state/layout.h"
#include "supervisor/mcp/toolresult.h"
#include "supervisor/mcp/views.h"
#include "proto/frame.h"
#include "proto/utf8.h"
#include "supervisor/core/roots.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/artifacts.h"
#include "supervisor/core/transfer.h"
#include "proto/jsontext.h"

#define LIST_PAGE  100


/* By extension only: the content is the job's and is not sniffed. */
const char *res_mime_type(const char *name, int *is_text)
{
	static const struct { const char *ext, *mime; int text; } types[] = {
		{ "txt", "text/plain", 1 }, { "log", "text/plain", 1 }, { "md", "text/markdown", 1 },
		{ "csv", "text/csv", 1 }, { "tsv", "text/tab-separated-values", 1 }, { "json", "application/json", 1 },
		{ "jsonl", "application/jsonl", 1 }, { "ndjson", "application/x-ndjson", 1 },
		{ "html", "text/html", 1 }, { "htm", "text/html", 1 }, { "xml", "application/xml", 1 },
		{ "yaml", "application/yaml", 1 }, { "yml", "application/yaml", 1 }, { "svg", "image/svg+xml", 1 },
		{ "c", "text/x-c", 1 }, { "h", "text/x-c", 1 }, { "py", "text/x-python", 1 }, { "sh", "text/x-shellscript", 1 },
		{ "png", "image/png", 0 }, { "jpg", "image/jpeg", 0 }, { "jpeg", "image/jpeg", 0 },
		{ "gif", "image/gif", 0 }, { "webp", "image/webp", 0 }, { "pdf", "application/pdf", 0 },
		{ "zip", "application/zip", 0 }, { "gz", "application/gzip", 0 }, { "tar", "application/x-tar", 0 },
		{ "wav", "audio/wav", 0 }, { "mp3", "audio/mpeg", 0 },
	};
	const char *dot = strrchr(name, '.');
	*is_text = 0;
	if (dot && dot != name) {
		for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
			if (strcasecmp(dot + 1, types[i].ext) == 0) {
				*is_text = types[i].text;
				return types[i].mime;
			}
		}
	}
	return "application/octet-stream";
}

/* ---- resources/list ---------------------------------------------------------------------- */

/* One resources/list entry; its name is the URI without the scheme and its title says whose
 * it is, so a client can show the list as it comes. */
static cJSON *entry(const struct task *t, enum res_kind kind, const char *name, const char *mime, int64_t size)
{
	char uri[PATH_MAX], nm[PATH_MAX], title[600];
	cJSON *e = cJSON_CreateObject();
	artifacts_uri_format(uri, sizeof uri, kind, t->id, name);
	cJSON_AddStringToObject(e, "uri", uri);
	snprintf(nm, sizeof nm, "%s", uri + strlen(RES_SCHEME));
	cJSON_AddStringToObject(e, "name", nm);
	if (kind == RES_RESULT)
		snprintf(title, sizeof title, "Result of %s task %.8s (%s)", t->tool_name, t->id, task_status_name(t->status));
	else if (kind == RES_LOG)
		snprintf(title, sizeof title, "Output of %s task %.8s", t->tool_name, t->id);
	else
		snprintf(title, sizeof title, "%.255s from %s task %.8s", name, t->tool_name, t->id);
	cJSON_AddStringToObject(e, "title", title);
	cJSON_AddStringToObject(e, "mimeType", mime);
	if (size >= 0)
		cJSON_AddNumberToObject(e, "size", (double)size);
	return e;
}

/* Every resource of one task, in a fixed order: result, log, artifacts by name. */
static cJSON *task_entries(struct supervisor *sv, const struct task *t)
{
	char p[PATH_MAX + 64];
	struct stat st;
	cJSON *arr = cJSON_CreateArray();
	if (!arr)
		return NULL;
	if (TASK_TERMINAL(t->status))
		cJSON_AddItemToArray(arr, entry(t, RES_RESULT, NULL, "application/json",
		                                t->result_blob[0] && !t->result ? (int64_t)t->result_bytes : -1));
	if (layout_task(p, sizeof p, sv->state_dir, t->id, LAYOUT_TASK_LOG) == 0 && lstat(p, &st) == 0 && S_ISREG(st.st_mode))
		cJSON_AddItemToArray(arr, entry(t, RES_LOG, NULL, "text/plain", st.st_size));
	if (t->status == TASK_COMPLETED) {
		int d = artifacts_open_outputs(sv, t->id);
		if (d >= 0) {
			size_t n = 0;
			char **names = artifacts_list(d, &n, NULL, t->id);
			for (size_t i = 0; i < n && i < ARTIFACTS_MAX_COUNT; i++) {
				int text;
				const char *mime = res_mime_type(names[i], &text);
				if (fstatat(d, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
					cJSON_AddItemToArray(arr, entry(t, RES_ARTIFACT, names[i], mime, st.st_size));
			}
			artifacts_names_free(names, n);
			close(d);
		}
	}
	return arr;
}

/* A JSON-RPC error: the message goes into the table's buffer, which outlives the call. */
static cJSON *rpc_fail(struct transfers *tr, int code, int *rpc_err, const char **msg, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static cJSON *rpc_fail(struct transfers *tr, int code, int *rpc_err, const char **msg, const char *fmt, ...)
{
	size_t len;
	char *buf = transfers_msgbuf(tr, &len);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	*rpc_err = code;
	*msg = buf;
	return NULL;
}

/* Newest task first, a page at a time; the cursor names a task and an index into its
 * entries, so a page boundary inside a task's artifacts resumes where it was. */
cJSON *resources_list(struct transfers *tr, const cJSON *params, int *rpc_err, const char **msg)
{
	struct supervisor *sv = transfers_supervisor(tr);
	const cJSON *cursor = cJSON_GetObjectItemCaseSensitive(params, "cursor");
	struct task *t = tasks_newest(sv->tasks);
	long skip = 0;
	if (cursor) {
		/* Opaque to clients: "<task id>:<index of the next resource of that task>". */
		char id[33];
		char *end = NULL;
		if (!cJSON_IsString(cursor) || strlen(cursor->valuestring) < 34 || cursor->valuestring[32] != ':')
			return rpc_fail(tr, -32602, rpc_err, msg, "resources/list: invalid cursor");
		memcpy(id, cursor->valuestring, 32);
		id[32] = 0;
		skip = strtol(cursor->valuestring + 33, &end, 10);
		if (!end || *end || skip < 0 || !(t = tasks_find(sv->tasks, id)))
			return rpc_fail(tr, -32602, rpc_err, msg, "resources/list: invalid cursor (the task it points at may have expired)");
	}
	cJSON *r = cJSON_CreateObject();
	cJSON *out = cJSON_AddArrayToObject(r, "resources");
	int n = 0;
	for (; t; t = t->next, skip = 0) {
		cJSON *all = task_entries(sv, t);
		int k = cJSON_GetArraySize(all);
		for (int i = (int)skip; i < k; i++) {
			if (n == LIST_PAGE) {
				char c[64];
				snprintf(c, sizeof c, "%s:%d", t->id, i);
				cJSON_AddStringToObject(r, "nextCursor", c);
				cJSON_Delete(all);
				return r;
			}
			cJSON_AddItemToArray(out, cJSON_Duplicate(cJSON_GetArrayItem(all, i), 1));
			n++;
		}
		cJSON_Delete(all);
	}
	return r;
}

/* Fixed: the three URI shapes, for clients that build URIs themselves. */
cJSON *resources_templates(struct transfers *tr)
{
	static const struct { const char *tpl, *name, *title, *desc, *mime; } v[] = {
		{ RES_SCHEME "tasks/{taskId}/result", "task-result", "Result of a task",
		  "The outcome of a finished task as JSON: its result, or {status, error} when it failed or "
		  "was cancelled.", "application/json" },
		{ RES_SCHEME "tasks/{taskId}/log", "task-log", "Output of a task",
		  "The job's captured stdout and stderr (the last 1 MiB).", "text/plain" },
		{ RES_SCHEME "tasks/{taskId}/artifacts/{name}", "task-artifact", "File produced by a task",
		  "A file the job wrote to its outputs folder; text or base64 blob. Larger than 8 MiB: "
		  "download it with file_transfer_open.", NULL },
	};
	(void)tr;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(r, "resourceTemplates");
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "uriTemplate", v[i].tpl);
		cJSON_AddStringToObject(e, "name", v[i].name);
		cJSON_AddStringToObject(e, "title", v[i].title);
		cJSON_AddStringToObject(e, "description", v[i].desc);
		if (v[i].mime)
			cJSON_AddStringToObject(e, "mimeType", v[i].mime);
		cJSON_AddItemToArray(arr, e);
	}
	return r;
}

/* ---- resources/read ---------------------------------------------------------------------- */

/* A resources/read result with one content block, text or base64 blob. */
static cJSON *content_of(const char *uri, const char *mime, const char *text, const char *blob)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(r, "contents");
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "uri", uri);
	cJSON_AddStringToObject(c, "mimeType", mime);
	if (text)
		cJSON_AddStringToObject(c, "text", text);
	else
		cJSON_AddStringToObject(c, "blob", blob);
	cJSON_AddItemToArray(arr, c);
	return r;
}

/* What a finished task's result resource holds: its result, or {status, error}. */
static cJSON *outcome_json(const struct task *t)
{
	if (t->status == TASK_COMPLETED)
		return t->result ? cJSON_Duplicate(t->result, 1) : cJSON_CreateNull();
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", task_status_name(t->status));
	if (t->error)
		cJSON_AddItemToObject(o, "error", cJSON_Duplicate(t->error, 1));
	return o;
}

/* The log's last RES_LOG_TAIL bytes as text: logs are the job's bytes, so invalid UTF-8 is
 * replaced rather than refused. */
static cJSON *read_log(struct transfers *tr, struct supervisor *sv, const char *uri, const char *id,
                       int *rpc_err, const char **msg)
{
	char p[PATH_MAX + 64];
	struct stat st;
	unsigned char *raw = NULL;
	char *text = NULL;
	cJSON *r = NULL;
	int fd = layout_task(p, sizeof p, sv->state_dir, id, LAYOUT_TASK_LOG) == 0
	       ? open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		r = rpc_fail(tr, -32002, rpc_err, msg, "Resource not found: %.300s (the task has no output yet)", uri);
		goto out;
	}
	int64_t start = st.st_size > RES_LOG_TAIL ? st.st_size - RES_LOG_TAIL : 0;
	size_t n = (size_t)(st.st_size - start);
	raw = malloc(n + 1);
	text = malloc(3 * n + 1);
	ssize_t got = raw && text ? pread(fd, raw, n, (off_t)start) : -1;
	if (got < 0) {
		r = rpc_fail(tr, -32603, rpc_err, msg, "Cannot read the log: %s", strerror(errno ? errno : ENOMEM));
		goto out;
	}
	size_t from = 0;
	/* A tail may begin inside a character: skip its continuation bytes. */
	if (start > 0)
		from = utf8_resync((const char *)raw, (size_t)got);
	utf8_sanitize((const char *)raw + from, (size_t)got - from, text);   /* bad bytes: U+FFFD */
	r = content_of(uri, "text/plain", text, NULL);
out:
	if (fd >= 0)
		close(fd);
	free(raw);
	free(text);
	return r;
}

/* An artifact up to RES_READ_MAX inline: text when its type is text and its bytes are UTF-8,
 * base64 otherwise; larger ones are downloaded with the transfer tools. */
static cJSON *read_artifact(struct transfers *tr, struct supervisor *sv, const char *uri, const struct artifacts_uri *u,
                            int *rpc_err, const char **msg)
{
	char err[600];
	struct stat st;
	unsigned char *raw = NULL;
	char *enc = NULL;
	cJSON *r = NULL;
	int fd = -1;
	if (artifacts_open(sv, u->id, u->name, &fd, &st, err, sizeof err) < 0) {
		r = rpc_fail(tr, -32002, rpc_err, msg, "Resource not found: %.300s (%s)", uri, err);
		goto out;
	}
	if (st.st_size > RES_READ_MAX) {
		r = rpc_fail(tr, -32602, rpc_err, msg, "%.300s is %lld bytes, more than resources/read returns "
		             "(%u); download it with file_transfer_open {direction: \"download\", path: \"%.300s\"}",
		             uri, (long long)st.st_size, RES_READ_MAX, uri);
		goto out;
	}
	size_t n = (size_t)st.st_size;
	raw = malloc(n + 1);
	ssize_t got = raw ? pread(fd, raw, n, 0) : -1;
	if (got != (ssize_t)n) {
		r = rpc_fail(tr, -32603, rpc_err, msg, "Cannot read %.300s", uri);
		goto out;
	}
	int text;
	const char *mime = res_mime_type(u->name, &text);
	if (text && utf8_valid((const char *)raw, n)) {
		raw[n] = 0;
		r = content_of(uri, mime, (const char *)raw, NULL);
	} else {
		if (!(enc = malloc(B64_ENCODED_SIZE(n)))) {
			r = rpc_fail(tr, -32603, rpc_err, msg, "out of memory");
			goto out;
		}
		b64_encode(raw, n, enc);
		r = content_of(uri, mime, NULL, enc);
	}
out:
	if (fd >= 0)
		close(fd);
	free(raw);
	free(enc);
	return r;
}

static cJSON *too_large_to_read(struct transfers *tr, const char *uri, uint64_t bytes, int *rpc_err,
                               const char **msg)
{
	return rpc_fail(tr, -32602, rpc_err, msg, "%.300s is %llu bytes of JSON, more than resources/read returns "
	                "(%u as a JSON string); download it with file_transfer_open {direction: \"download\", "
	                "path: \"%.300s\"}", uri, (unsigned long long)bytes, RES_READ_MAX, uri);
}

/* A result kept in the blob store is its own JSON text: it is read (its sha256 checked) and
 * quoted into the response as it is, never parsed or printed as a tree, so serving it costs a
 * few linear passes over at most resultMaxBytes.  A missing or damaged blob is said as such
 * (task_lost), and the task remembers it. */
static cJSON *read_result_blob(struct transfers *tr, struct supervisor *sv, const char *uri, struct task *t,
                               int *rpc_err, const char **msg)
{
	void *d = NULL;
	size_t n = 0;
	char *lit = NULL;
	/* The response carries the text as a JSON string: bounded like an artifact's. */
	if (t->result_bytes > RES_READ_MAX)
		return too_large_to_read(tr, uri, t->result_bytes, rpc_err, msg);
	uint64_t size = 0;
	int rc = t->result_lost ? -EBADMSG : blobs_size(persist_blobs(sv->persist), t->result_blob, &size);
	if (rc == 0 && size != t->result_bytes)
		rc = -EBADMSG;   /* never read a blob that is not the size recorded for it */
	if (rc == 0)
		rc = blobs_get(persist_blobs(sv->persist), t->result_blob, &d, &n);
	if (rc == -ENOENT || rc == -EBADMSG) {
		if (!t->result_lost)
			fplog(&sv->log, FPLOG_ERROR, t->id, "result blob %s is %s", t->result_blob,
			      rc == -ENOENT ? "missing" : "damaged");
		t->result_lost = 1;
		return rpc_fail(tr, -32603, rpc_err, msg, "task_lost: task %s completed, but its stored result "
		                "(blob %s) is missing or damaged; call the tool again (forkpoint fsck reports "
		                "the damage)", t->id, t->result_blob);
	}
	if (rc < 0)
		return rpc_fail(tr, -32603, rpc_err, msg, "Cannot read the result of task %s: %s", t->id, strerror(-rc));
	rc = frame_json_quote(d, n, &lit, &n);
	free(d);
	if (rc < 0)
		return rpc_fail(tr, -32603, rpc_err, msg, "out of memory");
	if (n > RES_READ_MAX) {
		free(lit);
		return too_large_to_read(tr, uri, t->result_bytes, rpc_err, msg);
	}
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(r, "contents");
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "uri", uri);
	cJSON_AddStringToObject(c, "mimeType", "application/json");
	cJSON_AddRawToObject(c, "text", lit);
	cJSON_AddItemToArray(arr, c);
	free(lit);
	return r;
}

/* Not found is said with why (expired, still running, no output yet): a client acts on it. */
cJSON *resources_read(struct transfers *tr, const char *uri, int *rpc_err, const char **msg)
{
	struct supervisor *sv = transfers_supervisor(tr);
	struct artifacts_uri u;
	if (!uri || artifacts_uri_parse(uri, &u) < 0)
		return rpc_fail(tr, -32602, rpc_err, msg, "Invalid resource URI '%.300s': expected "
		                RES_SCHEME "tasks/{taskId}/result, /log or /artifacts/{name}", uri ? uri : "");
	struct task *t = tasks_find(sv->tasks, u.id);
	if (!t)
		return rpc_fail(tr, -32002, rpc_err, msg, "Resource not found: %.300s (%s)", uri,
		                tasks_tombstone_find(sv->tasks, u.id) ? "the task has expired" : "no such task");
	if (u.kind == RES_LOG)
		return read_log(tr, sv, uri, u.id, rpc_err, msg);
	if (u.kind == RES_ARTIFACT)
		return read_artifact(tr, sv, uri, &u, rpc_err, msg);
	if (!TASK_TERMINAL(t->status))
		return rpc_fail(tr, -32002, rpc_err, msg, "Resource not found: %.300s (the task is still %s; "
		                "it has no result yet)", uri, task_status_name(t->status));
	if (t->status == TASK_COMPLETED && !t->result && t->result_blob[0])
		return read_result_blob(tr, sv, uri, t, rpc_err, msg);
	cJSON *o = outcome_json(t);
	char *s = o ? jsontext_pretty(o) : NULL;
	cJSON_Delete(o);
	if (!s)
		return rpc_fail(tr, -32603, rpc_err, msg, "out of memory");
	cJSON *r = content_of(uri, "application/json", s, NULL);
	free(s);
	return r;
}

/* ---- large results ----------------------------------------------------------------------- */

/* A one-line shape of a JSON value (an object's first keys, an array's length) for a model
 * deciding whether to fetch the whole result. */
static void describe(const cJSON *v, char *buf, size_t len)
{
	if (cJSON_IsObject(v)) {
		size_t o = (size_t)snprintf(buf, len, "an object with keys: ");
		int i = 0;
		const cJSON *c;
		cJSON_ArrayForEach(c, v) {
			if (o + 4 >= len)
				break;
			if (i == 20) {
				snprintf(buf + o, len - o, ", …");
				return;
			}
			int k = snprintf(buf + o, len - o, "%s%.60s", i ? ", " : "", c->string);
			o += k > 0 ? (size_t)k : 0;
			i++;
		}
	} else if (cJSON_IsArray(v)) {
		snprintf(buf, len, "an array of %d items", cJSON_GetArraySize(v));
	} else if (cJSON_IsString(v)) {
		snprintf(buf, len, "a string of %zu bytes", strlen(v->valuestring));
	} else {
		snprintf(buf, len, "a JSON value");
	}
}

/* The summary keeps what every task view shows (times, artifacts, sandbox) so that standing
 * in for the whole result loses nothing but the result itself. */
cJSON *resources_result_link(const struct task *t)
{
	char uri[200], what[1200], note[600], title[300], ts[64];
	size_t bytes = (size_t)t->result_bytes;
	if (t->result) {
		char *s = cJSON_PrintUnformatted(t->result);
		bytes = s ? strlen(s) : 0;
		free(s);
		describe(t->result, what, sizeof what);
	} else {
		snprintf(what, sizeof what, "%s", t->result_summary ? t->result_summary : "a JSON value");
	}
	artifacts_uri_format(uri, sizeof uri, RES_RESULT, t->id, NULL);
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "taskId", t->id);
	cJSON_AddStringToObject(o, "status", task_status_name(t->status));
	cJSON_AddNumberToObject(o, "attempt", t->attempt);
	views_iso_time(t->created_ms, ts);
	cJSON_AddStringToObject(o, "createdAt", ts);
	views_iso_time(t->updated_ms, ts);
	cJSON_AddStringToObject(o, "updatedAt", ts);
	views_iso_time(t->expires_ms, ts);
	cJSON_AddStringToObject(o, "expiresAt", ts);
	cJSON_AddStringToObject(o, "resultUri", uri);
	cJSON_AddNumberToObject(o, "resultBytes", (double)bytes);
	cJSON_AddStringToObject(o, "summary", what);
	/* The summary stands in for the whole view, so it keeps what every view shows. */
	if (t->artifacts)
		cJSON_AddItemToObject(o, "artifacts", cJSON_Duplicate(t->artifacts, 1));
	if (t->sandbox)
		cJSON_AddItemToObject(o, "sandbox", cJSON_Duplicate(t->sandbox, 1));
	if (bytes > RES_READ_MAX)
		snprintf(note, sizeof note, "The result (%zu bytes) is too large to include here or to read as a "
		         "resource. Download it with file_transfer_open {direction: \"download\", path: \"%s\"} "
		         "and file_transfer_read when you need it.", bytes, uri);
	else
		snprintf(note, sizeof note, "The result (%zu bytes) is too large to include here. Read it with "
		         "resources/read {uri: \"%s\"} when you need it, or fetch only the parts you need.", bytes, uri);
	cJSON_AddStringToObject(o, "note", note);
	cJSON *r = toolresult_wrap(o, 0);
	cJSON *link = cJSON_CreateObject();
	cJSON_AddStringToObject(link, "type", "resource_link");
	cJSON_AddStringToObject(link, "uri", uri);
	cJSON_AddStringToObject(link, "name", uri + strlen(RES_SCHEME));
	snprintf(title, sizeof title, "Result of %s task %.8s", t->tool_name, t->id);
	cJSON_AddStringToObject(link, "title", title);
	cJSON_AddStringToObject(link, "mimeType", "application/json");
	cJSON_AddNumberToObject(link, "size", (double)bytes);
	cJSON_AddItemToArray(cJSON_GetObjectItem(r, "content"), link);
	return r;
}
