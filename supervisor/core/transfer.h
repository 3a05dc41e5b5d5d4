/* supervisor/transfer.h — resumable, sha256-verified file transfers through tool calls
 * (file_transfer_open / write / read / commit / status), confined to server.fileRoots, and the
 * resources that expose tasks' results, logs and artifacts (resources/list, templates/list,
 * read).  docs/files.md is the model-facing reference.
 *
 * Durability: an upload chunk is acknowledged only after its bytes are synced to the staging
 * file (<state>/uploads/) and a journal record with the new cursor is appended (the record
 * becomes durable with the turn's group commit, before the response is released).  A commit
 * makes its chunk records and an intent record durable before it publishes the file.  After a restart the cursor comes from
 * the journal and the running sha256 is rebuilt exactly once from the staged bytes. */
#ifndef FP_TRANSFER_H
#define FP_TRANSFER_H

#include <stddef.h>
#include <cJSON.h>
#include <msgpack.h>
#include "supervisor/core/supervisor.h"
#include "state/store.h"

struct transfers;
struct task;

/* Created before the journal is replayed (replay feeds it records). */
struct transfers *transfers_new(struct supervisor *sv);
void transfers_free(struct transfers *tr);

/* Journal integration (see persist.h): records of types REC_EXT_FIRST..REC_EXT_LAST. */
int transfer_replay(struct transfers *tr, int type, const struct store_xfer *rec, char *err, size_t errlen);
int transfer_snapshot(struct transfers *tr);          /* append the live transfers (compaction) */
/* Without a transfers table (ops commands): the part of those records that changes tasks (an
 * artifact's digest computed after its task finished) is applied to sv->tasks; the rest is
 * skipped.  Always 0. */
int transfer_replay_tasks(struct supervisor *sv, int type, const struct store_xfer *rec);
/* After replay: rebuild hashes of staged uploads, drop expired transfers and their files. */
void transfers_recover(struct transfers *tr);
/* Periodic collection of expired transfers (with the task collector). */
size_t transfers_collect(struct transfers *tr, int64_t now_wall);

/* The five tool definitions for tools/list, appended to arr. */
void transfer_list_tools(cJSON *arr);
int transfer_is_tool(const char *name);
/* Run one (arguments validated against schema here).  Returns a CallToolResult.  Blocking
 * work (hashing a large file) is done inline. */
cJSON *transfer_call(struct transfers *tr, const char *name, const cJSON *schema, cJSON *args);

/* How an answer that is not ready yet reaches the caller: answer(ctx, result) is called once,
 * on the loop thread, with the CallToolResult (consumed; NULL when out of memory) — or, if the
 * worker pool stops first, drop(ctx) instead. */
struct transfer_later {
	void (*answer)(void *ctx, cJSON *result);
	void (*drop)(void *ctx);
	void *ctx;
};
/* transfer_call, but blocking work goes to sv->workers and the answer comes through later
 * (copied; args are not kept) while NULL is returned: hashing for a download open (or for a
 * read that must verify a download again after a restart) of a file over 1 MiB, the sync of an
 * upload chunk's staged bytes, and a cross-file-system commit's copy of a file over 1 MiB.
 * With later NULL or no worker pool, the same as transfer_call.  Other calls are answered at
 * once meanwhile.  transfers_deferred() grows by one for every answer taken to be given later,
 * which tells a NULL that means "later" from one that means "out of memory". */
cJSON *transfer_call_later(struct transfers *tr, const char *name, const cJSON *schema, cJSON *args,
                           const struct transfer_later *later);

/* Files in and out of jobs.
 * transfer_prepare_args: creates work_dir/inputs/ and work_dir/outputs/; then for every argument
 * whose property schema has "format":"forkpoint-upload", the value (the handle of a committed
 * upload, a path inside a file root, or a forkpoint:// artifact URI) is replaced by the path of a
 * read-only copy placed at work_dir/inputs/<argument>/<file name>.  Safe to call at every start
 * of the same task: a value already pointing into inputs/ is left alone, and a handle that has
 * expired meanwhile falls back to the copy an earlier attempt made.  0, or -1 with an envelope
 * {code, message, retryable, recoveryHint, param} in *err (caller frees). */
int transfer_prepare_args(struct transfers *tr, const cJSON *schema, cJSON *args,
                          const char *work_dir, cJSON **err);
/* The same, but the copies are only noted in *later (NULL when there are none; inputs.h), for
 * the caller to make with inputs_run before the job starts: the arguments already name where
 * the files will be.  On -1, *later is NULL.  later NULL: transfer_prepare_args. */
struct inputs;
int transfer_prepare_args_later(struct transfers *tr, const cJSON *schema, cJSON *args,
                                const char *work_dir, struct inputs **later, cJSON **err);
/* After a task finishes: files the job wrote to work_dir/outputs/ become its artifacts:
 * [{name, size, sha256, uri}] sorted by name (caller frees), or NULL if none.  Only regular
 * files directly in outputs/ with one link and a valid name (res_name_ok) count, at most
 * ARTIFACTS_MAX_COUNT of them and ARTIFACTS_MAX_BYTES in all; each is made read-only.
 * (resources.c) */
cJSON *transfer_collect_artifacts(struct transfers *tr, const struct task *t, const char *work_dir);

/* Resources: forkpoint://tasks/{id}/result, /log, /artifacts/{name} (resources.c; the scheme is
 * in resources.h). */
cJSON *transfer_resources_list(struct transfers *tr, const cJSON *params, int *rpc_err, const char **msg);
cJSON *transfer_resource_templates(struct transfers *tr);
/* On error these return NULL with *rpc_err (-32002 not found, -32602 bad uri or cursor) and *msg
 * (owned by tr, valid until the next call). */
cJSON *transfer_resource_read(struct transfers *tr, const char *uri, int *rpc_err, const char **msg);
/* A CallToolResult standing in for a finished task's result that is larger than
 * server.resultInlineBytes: a short summary (the same JSON as text and structuredContent:
 * {taskId, status, resultUri, resultBytes, summary, note}) followed by a resource_link content
 * block to forkpoint://tasks/{id}/result.  NULL when out of memory. */
cJSON *transfer_result_link(struct transfers *tr, const struct task *t);

unsigned long transfers_deferred(const struct transfers *tr);

/* For resources.c: the supervisor a transfers table belongs to, and a buffer for messages. */
struct supervisor *transfers_supervisor(struct transfers *tr);
char *transfers_msgbuf(struct transfers *tr, size_t *len);

#endif
