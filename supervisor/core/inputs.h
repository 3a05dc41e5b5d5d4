/* supervisor/core/inputs.h — files into jobs: the arguments of a tool call that name a file
 * (their property schema has "format":"forkpoint-upload") get a read-only copy of it in the
 * job's work folder, and the argument then holds the copy's path.  The files come from the
 * transfers (transfer_open_input). */
#ifndef FP_INPUTS_H
#define FP_INPUTS_H

#include <cJSON.h>

struct transfers;

/* inputs_prepare: creates work_dir/inputs/ and work_dir/outputs/; then for every argument
 * whose property schema has "format":"forkpoint-upload", the value (the handle of a committed
 * upload, a path inside a file root, or a forkpoint:// artifact URI) is replaced by the path of a
 * read-only copy placed at work_dir/inputs/<argument>/<file name>.  Safe to call at every start
 * of the same task: a value already pointing into inputs/ is left alone, and a handle that has
 * expired meanwhile falls back to the copy an earlier attempt made.  0, or -1 with an envelope
 * {code, message, retryable, recoveryHint, param} in *err (caller frees). */
int inputs_prepare(struct transfers *tr, const cJSON *schema, cJSON *args,
                   const char *work_dir, cJSON **err);

#endif
