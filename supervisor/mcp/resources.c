/* supervisor/resources.c — tasks' results, logs and artifacts as MCP resources, artifact
 * collection, and the resource link that replaces a large result.  See resources.h for the
 * URI scheme and transfer.h for the entry points. */
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
#include "supervisor/mcp/facade.h"
#include "proto/frame.h"
#include "proto/utf8.h"
#include "supervisor/core/roots.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "proto/jsontext.h"

#define LIST_PAGE  100

/* ---- names and URIs ---------------------------------------------------------------------- */

/* 1 if the UTF-8 sequence at p is a character that changes how text around it is shown: a C1
 * control (U+0080..U+009F), a bidirectional mark, embedding, override or isolate (U+061C,
 * U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) or a line/paragraph separator (U+2028,
 * U+2029).  A name holding one can display as a different name ("report\u202Efdp.exe"). */
static int display_control(const unsigned char *p)
{
	if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
		return 1;
	if (p[0] == 0xd8 && p[1] == 0x9c)
		return 1;
	if (p[0] == 0xe2 && p[1] == 0x80)
		return p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xa8 && p[2] <= 0xae);
	return p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9;
}

int res_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > NAME_MAX || name[0] == '.' || strchr(name, '/'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return 0;
	if (!utf8_valid(name, n))
		return 0;
	/* Valid UTF-8 and NUL-terminated: a lead byte's continuation bytes are there to look at. */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] >= 0xc2 && display_control((const unsigned char *)name + i))
			return 0;
	return 1;
}

static int unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

int res_uri_format(char *buf, size_t len, enum res_kind kind, const char *id, const char *name)
{
	static const char hx[] = "0123456789ABCDEF";
	if (kind == RES_RESULT)
		return snprintf(buf, len, RES_SCHEME "tasks/%s/result", id);
	if (kind == RES_LOG)
		return snprintf(buf, len, RES_SCHEME "tasks/%s/log", id);
	char enc[3 * NAME_MAX + 1];
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)name; *p && o + 4 < sizeof enc; p++) {
		if (unreserved(*p)) {
			enc[o++] = (char)*p;
		} else {
			enc[o++] = '%';
			enc[o++] = hx[*p >> 4];
			enc[o++] = hx[*p & 15];
		}
	}
	enc[o] = 0;
	return snprintf(buf, len, RES_SCHEME "tasks/%s/artifacts/%s", id, enc);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int res_uri_parse(const char *uri, struct res_uri *u)
{
	const char *p = uri;
	size_t sl = strlen(RES_SCHEME "tasks/");
	memset(u, 0, sizeof *u);
	if (strncmp(p, RES_SCHEME "tasks/", sl) != 0)
		return -EINVAL;
	p += sl;
	for (int i = 0; i < 32; i++) {
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return -EINVAL;
		u->id[i] = p[i];
	}
	u->id[32] = 0;
	p += 32;
	if (strcmp(p, "/result") == 0) {
		u->kind = RES_RESULT;
		return 0;
	}
	if (strcmp(p, "/log") == 0) {
		u->kind = RES_LOG;
		return 0;
	}
	if (strncmp(p, "/artifacts/", 11) != 0)
		return -EINVAL;
	p += 11;
	size_t o = 0;
	for (; *p; p++) {
		int c = (unsigned char)*p;
		if (c == '%') {
			int a = hexval(p[1]), b = a >= 0 ? hexval(p[2]) : -1;
			if (b < 0)
				return -EINVAL;
			c = a * 16 + b;
			p += 2;
		} else if (c == '/' || c == '?' || c == '#') {
			return -EINVAL;
		}
		if (c == 0 || o + 1 >= sizeof u->name)
			return -EINVAL;
		u->name[o++] = (char)c;
	}
	u->name[o] = 0;
	if (!res_name_ok(u->name))
		return -EINVAL;
	u->kind = RES_ARTIFACT;
	return 0;
}

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

/* ---- task files -------------------------------------------------------------------------- */

static void task_path(const struct supervisor *sv, const char *id, const char *rest, char *buf, size_t len)
{
	snprintf(buf, len, "%s/tasks/%s/%s", sv->state_dir, id, rest);
}

/* The outputs folder of a task, opened without following links. */
static int open_outputs(const struct supervisor *sv, const char *id)
{
	char dir[PATH_MAX + 64];
	snprintf(dir, sizeof dir, "%s/tasks/%s", sv->state_dir, id);
	int base = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (base < 0)
		return -errno;
	int fd = roots_openat_beneath(base, "work/outputs", O_RDONLY | O_DIRECTORY, 0, 0);
	close(base);
	return fd;
}

int res_result_open(struct supervisor *sv, const char *id, int *fd, struct stat *st, char *err, size_t errlen)
{
	uint64_t size;
	*fd = -1;
	struct task *t = tasks_find(sv->tasks, id);
	if (!t) {
		snprintf(err, errlen, "No task %s (it may have expired, taking its result with it).", id);
		return -ESRCH;
	}
	if (t->status != TASK_COMPLETED) {
		snprintf(err, errlen, "Task %s is %s; a result exists once it has completed.", id, task_status_name(t->status));
		return t->status == TASK_FAILED || t->status == TASK_CANCELLED ? -ENOENT : -EAGAIN;
	}
	if (!t->result_blob[0] || t->result) {
		snprintf(err, errlen, "The result of task %s is small: read it with resources/read.", id);
		return -ENOENT;
	}
	int rc = t->result_lost ? -EBADMSG : blobs_open(persist_blobs(sv->persist), t->result_blob, fd, &size);
	if (rc == 0 && fstat(*fd, st) < 0)
		rc = -errno;
	if (rc < 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		t->result_lost = 1;
		snprintf(err, errlen, "task_lost: task %s completed, but its stored result (blob %s) is missing or "
		         "damaged.", id, t->result_blob);
		return -ENOENT;
	}
	return 0;
}

int res_artifact_open(struct supervisor *sv, const char *id, const char *name, int *fd, struct stat *st,
                      char *err, size_t errlen)
{
	int d = -1, f = -1, rc;
	*fd = -1;
	struct task *t = tasks_find(sv->tasks, id);
	if (!t) {
		snprintf(err, errlen, "No task %s (it may have expired, taking its artifacts with it).", id);
		return -ESRCH;
	}
	if (t->status != TASK_COMPLETED) {
		snprintf(err, errlen, "Task %s is %s; artifacts exist once it has completed.", id, task_status_name(t->status));
		return t->status == TASK_FAILED || t->status == TASK_CANCELLED ? -ENOENT : -EAGAIN;
	}
	if (!res_name_ok(name)) {
		snprintf(err, errlen, "'%.300s' is not a valid artifact name.", name);
		return -ENOENT;
	}
	if ((d = open_outputs(sv, id)) < 0 ||
	    (f = roots_openat_beneath(d, name, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, 0)) < 0 ||
	    fstat(f, st) < 0 || !S_ISREG(st->st_mode) || st->st_nlink > 1) {
		snprintf(err, errlen, "Task %s has no artifact named '%.300s'.", id, name);
		rc = -ENOENT;
		goto fail;
	}
	close(d);
	*fd = f;
	return 0;
fail:
	if (f >= 0)
		close(f);
	if (d >= 0)
		close(d);
	return rc;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names of the candidate artifacts in an outputs folder, sorted (regular files with one link
 * and a valid name; the rest are skipped).  A malloc'd array of malloc'd names, or NULL. */
static char **list_outputs(int d, size_t *count, const struct fplog *lg, const char *id)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	int dd = fcntl(d, F_DUPFD_CLOEXEC, 0);
	DIR *dir = dd >= 0 ? fdopendir(dd) : NULL;
	struct dirent *de;
	*count = 0;
	if (!dir) {
		if (dd >= 0)
			close(dd);
		return NULL;
	}
	while ((de = readdir(dir))) {
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (!res_name_ok(de->d_name) || fstatat(d, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_nlink > 1) {
			if (lg)
				fplog(lg, FPLOG_NOTICE, id, "outputs: '%.200s' is not an artifact (only regular files "
				      "with one link and a plain name are)", de->d_name);
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			char **v = realloc(names, nc * sizeof *v);
			if (!v)
				break;
			names = v;
			cap = nc;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(dir);
	if (names)
		qsort(names, n, sizeof *names, cmp_name);
	*count = n;
	return names;
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

cJSON *transfer_collect_artifacts(struct transfers *tr, const struct task *t, const char *work_dir)
{
	struct supervisor *sv = transfers_supervisor(tr);
	char dir[PATH_MAX], uri[PATH_MAX], sha[65];
	cJSON *arr = NULL;
	size_t n = 0;
	int64_t total = 0;
	char **names = NULL;
	snprintf(dir, sizeof dir, "%s", work_dir);
	int base = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int d = base >= 0 ? roots_openat_beneath(base, "outputs", O_RDONLY | O_DIRECTORY, 0, 0) : -1;
	if (d < 0)
		goto out;
	names = list_outputs(d, &n, &sv->log, t->id);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (arr && cJSON_GetArraySize(arr) >= ARTIFACTS_MAX_COUNT) {
			fplog(&sv->log, FPLOG_WARNING, t->id, "more than %d files in outputs/: the rest are not artifacts",
			      ARTIFACTS_MAX_COUNT);
			break;
		}
		int f = roots_openat_beneath(d, names[i], O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, 0);
		if (f < 0)
			continue;
		if (fstat(f, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1 ||
		    total + st.st_size > ARTIFACTS_MAX_BYTES) {
			if (total + st.st_size > ARTIFACTS_MAX_BYTES)
				fplog(&sv->log, FPLOG_WARNING, t->id, "outputs/%s left out: artifacts are limited to "
				      "%lld bytes per task", names[i], (long long)ARTIFACTS_MAX_BYTES);
			close(f);
			continue;
		}
		/* Read-only before it is hashed: the hash in the task's record describes these bytes.
		 * Large ones are hashed in the worker pool (the list says sha256Status "pending"
		 * until then), very large ones not at all. */
		fchmod(f, 0444);
		int hr = transfer_hash_artifact(tr, t, names[i], f, &st, sha);
		close(f);
		if (hr < 0)
			continue;
		total += st.st_size;
		if (!arr && !(arr = cJSON_CreateArray()))
			goto out;
		cJSON *a = cJSON_CreateObject();
		res_uri_format(uri, sizeof uri, RES_ARTIFACT, t->id, names[i]);
		cJSON_AddStringToObject(a, "name", names[i]);
		cJSON_AddNumberToObject(a, "size", (double)st.st_size);
		artifact_set_sha(a, hr == 0 ? sha : NULL, hr == ARTIFACT_SKIPPED ? "skipped" : "pending");
		cJSON_AddStringToObject(a, "uri", uri);
		cJSON_AddItemToArray(arr, a);
	}
out:
	free_names(names, n);
	if (d >= 0)
		close(d);
	if (base >= 0)
		close(base);
	return arr;
}

/* ---- resources/list ---------------------------------------------------------------------- */

static cJSON *entry(const struct task *t, enum res_kind kind, const char *name, const char *mime, int64_t size)
{
	char uri[PATH_MAX], nm[PATH_MAX], title[600];
	cJSON *e = cJSON_CreateObject();
	res_uri_format(uri, sizeof uri, kind, t->id, name);
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
	task_path(sv, t->id, "output.log", p, sizeof p);
	if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
		cJSON_AddItemToArray(arr, entry(t, RES_LOG, NULL, "text/plain", st.st_size));
	if (t->status == TASK_COMPLETED) {
		int d = open_outputs(sv, t->id);
		if (d >= 0) {
			size_t n = 0;
			char **names = list_outputs(d, &n, NULL, t->id);
			for (size_t i = 0; i < n && i < ARTIFACTS_MAX_COUNT; i++) {
				int text;
				const char *mime = res_mime_type(names[i], &text);
				if (fstatat(d, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
					cJSON_AddItemToArray(arr, entry(t, RES_ARTIFACT, names[i], mime, st.st_size));
			}
			free_names(names, n);
			close(d);
		}
	}
	return arr;
}

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

cJSON *transfer_resources_list(struct transfers *tr, const cJSON *params, int *rpc_err, const char **msg)
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

cJSON *transfer_resource_templates(struct transfers *tr)
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

static cJSON *read_log(struct transfers *tr, struct supervisor *sv, const char *uri, const char *id,
                       int *rpc_err, const char **msg)
{
	char p[PATH_MAX + 64];
	struct stat st;
	unsigned char *raw = NULL;
	char *text = NULL;
	cJSON *r = NULL;
	task_path(sv, id, "output.log", p, sizeof p);
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
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

static cJSON *read_artifact(struct transfers *tr, struct supervisor *sv, const char *uri, const struct res_uri *u,
                            int *rpc_err, const char **msg)
{
	char err[600];
	struct stat st;
	unsigned char *raw = NULL;
	char *enc = NULL;
	cJSON *r = NULL;
	int fd = -1;
	if (res_artifact_open(sv, u->id, u->name, &fd, &st, err, sizeof err) < 0) {
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

cJSON *transfer_resource_read(struct transfers *tr, const char *uri, int *rpc_err, const char **msg)
{
	struct supervisor *sv = transfers_supervisor(tr);
	struct res_uri u;
	if (!uri || res_uri_parse(uri, &u) < 0)
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

cJSON *transfer_result_link(struct transfers *tr, const struct task *t)
{
	char uri[200], what[1200], note[600], title[300], ts[64];
	(void)tr;
	size_t bytes = (size_t)t->result_bytes;
	if (t->result) {
		char *s = cJSON_PrintUnformatted(t->result);
		bytes = s ? strlen(s) : 0;
		free(s);
		describe(t->result, what, sizeof what);
	} else {
		snprintf(what, sizeof what, "%s", t->result_summary ? t->result_summary : "a JSON value");
	}
	res_uri_format(uri, sizeof uri, RES_RESULT, t->id, NULL);
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "taskId", t->id);
	cJSON_AddStringToObject(o, "status", task_status_name(t->status));
	cJSON_AddNumberToObject(o, "attempt", t->attempt);
	facade_iso_time(t->created_ms, ts);
	cJSON_AddStringToObject(o, "createdAt", ts);
	facade_iso_time(t->updated_ms, ts);
	cJSON_AddStringToObject(o, "updatedAt", ts);
	facade_iso_time(t->expires_ms, ts);
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
	cJSON *r = facade_result(o, 0);
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
