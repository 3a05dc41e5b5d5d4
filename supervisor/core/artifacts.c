/* supervisor/core/artifacts.c — see artifacts.h: the forkpoint:// URI scheme, artifact names,
 * opening a task's artifacts and large result, and collecting artifacts when a task finishes. */
#include "supervisor/core/artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state/blob.h"
#include "supervisor/core/persist.h"
#include "state/layout.h"
#include "proto/utf8.h"
#include "supervisor/core/roots.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
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

/* Names reach file systems, URIs and a model's screen: besides what a file system refuses,
 * names that hide a dot file or render as another name are refused (display_control). */
int artifacts_name_ok(const char *name)
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

/* Artifact names are percent-encoded so that any valid name makes a URI that parses back to
 * it (artifacts_uri_parse). */
int artifacts_uri_format(char *buf, size_t len, enum res_kind kind, const char *id, const char *name)
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

/* One hex digit's value, or -1. */
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

/* Strict on purpose: a URI is a client's input and names files under the state dir, so
 * anything but the three shapes, a lowercase id and a valid decoded name is refused. */
int artifacts_uri_parse(const char *uri, struct artifacts_uri *u)
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
	if (!artifacts_name_ok(u->name))
		return -EINVAL;
	u->kind = RES_ARTIFACT;
	return 0;
}
/* ---- task files -------------------------------------------------------------------------- */

/* The outputs folder of a task, opened without following links. */
int artifacts_open_outputs(const struct supervisor *sv, const char *id)
{
	char dir[PATH_MAX + 64];
	int rc = layout_task(dir, sizeof dir, sv->state_dir, id, LAYOUT_TASK_DIR);
	if (rc < 0)
		return rc;
	int base = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (base < 0)
		return -errno;
	int fd = roots_openat_beneath(base, layout_task_rel(LAYOUT_TASK_OUTPUTS), O_RDONLY | O_DIRECTORY, 0, 0);
	close(base);
	return fd;
}

/* A large result lives in the blob store; a missing or damaged blob marks the task's result
 * lost (task_lost from then on) instead of serving other bytes. */
int artifacts_result_open(struct supervisor *sv, const char *id, int *fd, struct stat *st, char *err, size_t errlen)
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

/* Opened beneath the task's outputs folder without following links, and only a regular file
 * with one link: the job wrote that folder and may have planted links or hard links there. */
int artifacts_open(struct supervisor *sv, const char *id, const char *name, int *fd, struct stat *st,
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
	if (!artifacts_name_ok(name)) {
		snprintf(err, errlen, "'%.300s' is not a valid artifact name.", name);
		return -ENOENT;
	}
	if ((d = artifacts_open_outputs(sv, id)) < 0 ||
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
char **artifacts_list(int d, size_t *count, const struct fplog *lg, const char *id)
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
		if (!artifacts_name_ok(de->d_name) || fstatat(d, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
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

void artifacts_names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Runs as the task finishes, on the loop: listing and fchmod are cheap, hashing a large file
 * is not, so that goes to the pool (transfer_hash_artifact). */
cJSON *artifacts_collect(struct transfers *tr, const struct task *t, const char *work_dir)
{
	struct supervisor *sv = transfers_supervisor(tr);
	char dir[PATH_MAX], uri[PATH_MAX], sha[65];
	cJSON *arr = NULL;
	size_t n = 0;
	int64_t total = 0;
	char **names = NULL;
	snprintf(dir, sizeof dir, "%s", work_dir);
	int base = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int d = base >= 0 ? roots_openat_beneath(base, LAYOUT_OUTPUTS, O_RDONLY | O_DIRECTORY, 0, 0) : -1;
	if (d < 0)
		goto out;
	names = artifacts_list(d, &n, &sv->log, t->id);
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
		artifacts_uri_format(uri, sizeof uri, RES_ARTIFACT, t->id, names[i]);
		cJSON_AddStringToObject(a, "name", names[i]);
		cJSON_AddNumberToObject(a, "size", (double)st.st_size);
		artifact_set_sha(a, hr == 0 ? sha : NULL, hr == ARTIFACT_SKIPPED ? "skipped" : "pending");
		cJSON_AddStringToObject(a, "uri", uri);
		cJSON_AddItemToArray(arr, a);
	}
out:
	artifacts_names_free(names, n);
	if (d >= 0)
		close(d);
	if (base >= 0)
		close(base);
	return arr;
}

/* An entry has either a digest or a status saying why it has none, never both. */
void artifact_set_sha(cJSON *a, const char *sha, const char *status)
{
	cJSON_DeleteItemFromObject(a, "sha256");
	cJSON_DeleteItemFromObject(a, "sha256Status");
	if (sha && *sha)
		cJSON_AddStringToObject(a, "sha256", sha);
	else
		cJSON_AddStringToObject(a, "sha256Status", status);
}
