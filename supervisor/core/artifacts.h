/* supervisor/core/artifacts.h — the files a task leaves behind, as the domain sees them: the
 * forkpoint:// URI scheme that names them, which names may be artifacts, opening an artifact
 * or a large result for reading, and collecting a finished task's outputs/ into its artifact
 * list.  The MCP resources (resources/list, templates/list, read) are in supervisor/mcp.
 *
 *   forkpoint://tasks/{taskId}/result            the task's outcome, JSON
 *   forkpoint://tasks/{taskId}/log               the job's captured output (the last 1 MiB), text
 *   forkpoint://tasks/{taskId}/artifacts/{name}  a file the job left in work_dir/outputs/
 *
 * {name} is percent-encoded (RFC 3986 unreserved characters stay as they are).
 * A task's files: <state>/tasks/<id>/output.log and <state>/tasks/<id>/work/outputs/<name>
 * (the layout tasks.c creates); they are removed with the task. */
#ifndef FP_ARTIFACTS_H
#define FP_ARTIFACTS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <cJSON.h>
#include "supervisor/core/supervisor.h"

#define RES_SCHEME          "forkpoint://"
#define ARTIFACTS_MAX_COUNT 100                  /* files per task; more are left out */
#define ARTIFACTS_MAX_BYTES (4ll << 30)          /* total per task; files past it are left out */

enum res_kind { RES_RESULT, RES_LOG, RES_ARTIFACT };

struct artifacts_uri {
	enum res_kind kind;
	char id[33];
	char name[NAME_MAX + 1];   /* RES_ARTIFACT: decoded */
};

struct fplog;
struct task;
struct transfers;

/* Parse a forkpoint:// URI.  0, or -EINVAL when it is not one of the three shapes (a task
 * id is 32 lowercase hex digits; an artifact name must be a valid one, see artifacts_name_ok). */
int artifacts_uri_parse(const char *uri, struct artifacts_uri *u);
/* The URI of a task's resource (name: for RES_ARTIFACT).  Returns the length, as snprintf. */
int artifacts_uri_format(char *buf, size_t len, enum res_kind kind, const char *id, const char *name);
/* 1 if name may be an artifact: valid UTF-8, 1..NAME_MAX bytes, no '/', no C0 or C1 control
 * characters, no bidirectional controls (U+061C, U+200E/F, U+202A..E, U+2066..9) or line
 * separators (U+2028/9), not starting with '.'. */
int artifacts_name_ok(const char *name);

/* Open the result of task `id` kept in the blob store, for a download (a result too large for
 * resources/read).  Same contract as artifacts_open; -ENOENT also when the result is small
 * (read it with resources/read) or its blob is missing or damaged. */
int artifacts_result_open(struct supervisor *sv, const char *id, int *fd, struct stat *st, char *err, size_t errlen);

/* Open the artifact `name` of task `id` for reading (O_RDONLY, no symlink followed, a regular
 * file with one link).  The task must exist and be completed.  0, or -errno with a sentence in
 * err: -ESRCH no such task, -EAGAIN not completed, -ENOENT no such artifact. */
int artifacts_open(struct supervisor *sv, const char *id, const char *name, int *fd, struct stat *st,
                      char *err, size_t errlen);

/* The outputs folder of task id, opened without following links: a descriptor or -errno. */
int artifacts_open_outputs(const struct supervisor *sv, const char *id);
/* Names of the candidate artifacts in an outputs folder d, sorted (regular files with one link
 * and a valid name; the rest are skipped, and logged to lg unless it is NULL).  A malloc'd
 * array of *count malloc'd names (artifacts_names_free), or NULL. */
char **artifacts_list(int d, size_t *count, const struct fplog *lg, const char *id);
void artifacts_names_free(char **v, size_t n);

/* After a task finishes: files the job wrote to work_dir/outputs/ become its artifacts:
 * [{name, size, sha256, uri}] sorted by name (caller frees), or NULL if none.  Only regular
 * files directly in outputs/ with one link and a valid name (artifacts_name_ok) count, at most
 * ARTIFACTS_MAX_COUNT of them and ARTIFACTS_MAX_BYTES in all; each is made read-only. */
cJSON *artifacts_collect(struct transfers *tr, const struct task *t, const char *work_dir);

/* Set an artifact entry's "sha256", or (sha NULL or "") its "sha256Status": pending, skipped
 * or failed. */
void artifact_set_sha(cJSON *a, const char *sha, const char *status);

#endif
