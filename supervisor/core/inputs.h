/* supervisor/core/inputs.h — files into jobs: the arguments of a tool call that name a file
 * (their property schema has "format":"forkpoint-upload") get a read-only copy of it in the
 * job's work folder (work/inputs/<argument>/<name>), and the argument then holds the copy's
 * path.  The files come from the transfers (transfer_open_input); a copy can take as long as
 * the file is large, so it is made on the worker pool when there is one.  Functions return 0 /
 * -errno unless they say otherwise. */
#ifndef FP_INPUTS_H
#define FP_INPUTS_H

#include <stddef.h>
#include <stdint.h>
#include <cJSON.h>

#include "supervisor/core/supervisor.h"

/* The copies one start of a task needs, made later (inputs_run). */
struct inputs;

/* Copy the first size bytes of src to dirfd/name as a read-only file, atomically (a temp
 * name, then rename; a leftover temp file of an earlier try is replaced).  buf (buflen bytes)
 * is scratch space for when the file system cannot copy by itself.  Thread-safe: touches only
 * its arguments. */
int inputs_copy_file(int src, int64_t size, int dirfd, const char *name, unsigned char *buf, size_t buflen);

/* Note one copy for later: src (size bytes) to dirfd/name, for the argument arg (named in
 * the error).  src and dirfd are duplicated; the caller keeps its own.  *list starts NULL. */
int inputs_add(struct inputs **list, int src, int64_t size, int dirfd, const char *name, const char *arg);
void inputs_free(struct inputs *list);

/* The envelope (internal_error, retryable) for an argument's file that could not be copied. */
cJSON *inputs_copy_error(const char *arg, int rc);

/* rc 0: every file is in place.  -ECANCELED: the pool stopped first (the server is exiting;
 * nothing is to be started).  Another -errno: env (the caller's to free) says which argument's
 * file could not be copied.  task_id is the id given to inputs_run (look the task up again:
 * it may have ended, or be gone, meanwhile). */
typedef void (*inputs_done_fn)(void *arg, const char *task_id, int rc, cJSON *env);
/* Make the copies in list (taken over) on the worker pool, in order, stopping at the first
 * failure, then call done on the loop thread.  Without a pool, or when it refuses the work,
 * they are made now and done runs before inputs_run returns.  Loop thread only. */
void inputs_run(struct supervisor *sv, struct inputs *list, const char *task_id, inputs_done_fn done,
                void *arg);

struct transfers;

/* inputs_prepare: creates work_dir/inputs/ and work_dir/outputs/; then for every argument
 * whose property schema has "format":"forkpoint-upload", the value (the handle of a committed
 * upload, a path inside a file root, or a forkpoint:// artifact URI) is replaced by the path of a
 * read-only copy placed at work_dir/inputs/<argument>/<file name>.  Safe to call at every start
 * of the same task: a value already pointing into inputs/ is left alone, and a handle that has
 * expired meanwhile falls back to the copy an earlier attempt made.  0, or -1 with an envelope
 * {code, message, retryable, recoveryHint, param} in *err (caller frees). */
int inputs_prepare(struct transfers *tr, const cJSON *schema, cJSON *args, const char *work_dir, cJSON **err);
/* The same, but the copies are only noted in *later (NULL when there are none), for the
 * caller to make with inputs_run before the job starts: the arguments already name where the
 * files will be.  On -1, *later is NULL.  later NULL: inputs_prepare. */
int inputs_prepare_later(struct transfers *tr, const cJSON *schema, cJSON *args, const char *work_dir,
                         struct inputs **later, cJSON **err);

#endif
