/* supervisor/mcp/files.c — see files.h.  Every text a model reads here is written to be acted
 * on: it says what happened and what to call next. */
#include "supervisor/mcp/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/schema.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "supervisor/mcp/toolresult.h"
#include "supervisor/mcp/views.h"

#define JSON_INT_MAX    9007199254740991.0   /* 2^53 - 1 */

/* ---- definitions ------------------------------------------------------------------------- */

/* The handle every call but open takes. */
static void handle_prop(cJSON *p)
{
	cJSON *h = toolresult_prop(p, "handle", "string", "The handle file_transfer_open returned.");
	cJSON_AddNumberToObject(h, "minLength", 1);
	cJSON_AddNumberToObject(h, "maxLength", 64);
}

/* A byte offset: 0 up to the largest integer JSON carries exactly. */
static void offset_prop(cJSON *p, const char *desc)
{
	cJSON *q = toolresult_prop(p, "offset", "integer", desc);
	cJSON_AddNumberToObject(q, "minimum", 0);
	cJSON_AddNumberToObject(q, "maximum", JSON_INT_MAX);
}

/* The definitions are what a model reads first: each says what the tool does, in which order
 * the tools are called, and every limit the transfers enforce (JSON_INT_MAX: larger integers do
 * not survive JSON). */
void files_list_tools(cJSON *arr)
{
	cJSON *s, *p, *q;
	s = toolresult_tool_def(arr, "file_transfer_open", "Open a file upload or download",
		"Start moving a file in or out of the server without putting it in the conversation. "
		"upload: the file is written at path (inside the server's file roots) by file_transfer_write "
		"chunks and appears there at file_transfer_commit, checked against size and sha256. "
		"download: path is a file in the roots or a task artifact URI (forkpoint://tasks/ID/artifacts/NAME); "
		"read it with file_transfer_read and compare its sha256. Transfers survive reconnects and "
		"server restarts and expire 7 days after their last use.", 0, 0, 0);
	p = cJSON_GetObjectItem(s, "properties");
	q = toolresult_prop(p, "direction", "string", "upload (to the server) or download (from it).");
	cJSON *en = cJSON_AddArrayToObject(q, "enum");
	cJSON_AddItemToArray(en, cJSON_CreateString("upload"));
	cJSON_AddItemToArray(en, cJSON_CreateString("download"));
	q = toolresult_prop(p, "path", "string", "File path: relative to the first file root, or absolute inside a root. "
	         "For downloads also a forkpoint://tasks/ID/artifacts/NAME URI.");
	cJSON_AddNumberToObject(q, "minLength", 1);
	cJSON_AddNumberToObject(q, "maxLength", 4096);
	q = toolresult_prop(p, "size", "integer", "Upload: the file's exact size in bytes (recommended; checked at commit).");
	cJSON_AddNumberToObject(q, "minimum", 0);
	cJSON_AddNumberToObject(q, "maximum", JSON_INT_MAX);
	toolresult_prop(p, "sha256", "string", "Upload: the file's sha256 as 64 hex digits (recommended; checked at commit).");
	q = toolresult_prop(p, "overwrite", "boolean", "Upload: replace an existing file at path (default false: refuse).");
	cJSON_AddBoolToObject(q, "default", 0);
	toolresult_require(s, "direction", "path");

	s = toolresult_tool_def(arr, "file_transfer_write", "Write one upload chunk",
		"Send the next chunk of an upload: offset must be the nextOffset of the previous answer "
		"(0 at first), data the chunk's bytes in base64 (chunkSize bytes recommended, at most 1 MiB). "
		"On offset_mismatch resume at error.partial.cursor.", 0, 0, 0);
	p = cJSON_GetObjectItem(s, "properties");
	handle_prop(p);
	offset_prop(p, "Byte offset of this chunk in the file: the current nextOffset.");
	toolresult_prop(p, "data", "string", "The chunk's bytes, base64 (standard alphabet, with or without padding).");
	cJSON *r = cJSON_AddArrayToObject(s, "required");
	cJSON_AddItemToArray(r, cJSON_CreateString("handle"));
	cJSON_AddItemToArray(r, cJSON_CreateString("offset"));
	cJSON_AddItemToArray(r, cJSON_CreateString("data"));

	s = toolresult_tool_def(arr, "file_transfer_read", "Read one download chunk",
		"Read bytes of a download: from offset (default: where the last read ended), length bytes "
		"(default chunkSize, at most 1 MiB), returned as base64. At eof the answer carries the "
		"whole file's sha256.", 1, 0, 1);
	p = cJSON_GetObjectItem(s, "properties");
	handle_prop(p);
	offset_prop(p, "Byte offset to read from (default: nextOffset of the previous read).");
	q = toolresult_prop(p, "length", "integer", "Bytes to read (default 262144, at most 1048576).");
	cJSON_AddNumberToObject(q, "minimum", 1);
	cJSON_AddNumberToObject(q, "maximum", JSON_INT_MAX);
	toolresult_require(s, "handle", NULL);

	s = toolresult_tool_def(arr, "file_transfer_commit", "Finish an upload",
		"Check the uploaded bytes against the declared size and sha256 and move the file into place "
		"atomically. Calling it again after success answers the same.", 0, 0, 1);
	p = cJSON_GetObjectItem(s, "properties");
	handle_prop(p);
	toolresult_require(s, "handle", NULL);

	s = toolresult_tool_def(arr, "file_transfer_status", "Show a transfer",
		"State of an upload or download: active, completed or failed, and nextOffset, the offset to "
		"continue at. Use it after a reconnect or a failed call.", 1, 0, 1);
	p = cJSON_GetObjectItem(s, "properties");
	handle_prop(p);
	toolresult_require(s, "handle", NULL);
}

int files_is_tool(const char *name)
{
	return strcmp(name, "file_transfer_open") == 0 || strcmp(name, "file_transfer_write") == 0 ||
	       strcmp(name, "file_transfer_read") == 0 || strcmp(name, "file_transfer_commit") == 0 ||
	       strcmp(name, "file_transfer_status") == 0;
}

/* ---- results ----------------------------------------------------------------------------- */

static const char *state_name(enum transfer_state s)
{
	return s == TRANSFER_ACTIVE ? "active" : s == TRANSFER_COMMITTED ? "completed" : "failed";
}

static void add_common(cJSON *o, const struct transfer_reply *r)
{
	cJSON_AddStringToObject(o, "handle", r->handle);
	cJSON_AddStringToObject(o, "direction", r->upload ? "upload" : "download");
	cJSON_AddStringToObject(o, "path", r->path);
	if (r->size >= 0)
		cJSON_AddNumberToObject(o, "size", (double)r->size);
}

static void add_expiry(cJSON *o, const struct transfer_reply *r)
{
	char t[64];
	views_iso_time(r->expires_ms, t);
	cJSON_AddStringToObject(o, "expiresAt", t);
}

/* An open: the handle, the chunk sizes and how to go on (which differs for a resumed upload
 * and a download). */
static cJSON *opened_view(const struct transfer_reply *r)
{
	cJSON *o = cJSON_CreateObject();
	add_common(o, r);
	if (!r->upload)
		cJSON_AddStringToObject(o, "sha256", r->sha);      /* the file's */
	else if (r->want[0])
		cJSON_AddStringToObject(o, "sha256", r->want);     /* the declared one */
	cJSON_AddNumberToObject(o, "chunkSize", (double)r->chunk_size);
	cJSON_AddNumberToObject(o, "maxChunkSize", (double)r->max_chunk_size);
	cJSON_AddNumberToObject(o, "nextOffset", (double)r->next_offset);
	add_expiry(o, r);
	if (r->upload && r->again)
		cJSON_AddBoolToObject(o, "resumed", 1);
	cJSON_AddStringToObject(o, "note", !r->upload
		? "Download open. Call file_transfer_read {handle} repeatedly (each "
		  "read continues where the last ended) until eof is true, decode each data field from base64 "
		  "and append it; the bytes' sha256 must equal sha256."
		: r->again
		? "An unfinished upload of this path with the same size and sha256 already existed: this is its "
		  "handle. Continue with file_transfer_write at nextOffset, then call file_transfer_commit."
		: "Upload open. Send the file in order with file_transfer_write {handle, offset: nextOffset, data: "
		  "base64 of the next chunkSize bytes}; each answer gives the next offset. Then call "
		  "file_transfer_commit {handle}. After a failed call or a reconnect, file_transfer_status gives "
		  "the offset to resume at.");
	return o;
}

/* A write's answer: where to go on, and when all declared bytes are in, to commit. */
static cJSON *written_view(const struct transfer_reply *r)
{
	cJSON *o = cJSON_CreateObject();
	if (r->kind == TRANSFER_DUPLICATE) {
		cJSON_AddNumberToObject(o, "received", 0);
		cJSON_AddBoolToObject(o, "duplicate", 1);
		cJSON_AddNumberToObject(o, "nextOffset", (double)r->next_offset);
		cJSON_AddStringToObject(o, "note", "This chunk had already been received (same offset, same "
			"bytes); nothing was written twice. Continue with the chunk at nextOffset.");
		return o;
	}
	cJSON_AddNumberToObject(o, "received", (double)r->received);
	cJSON_AddNumberToObject(o, "nextOffset", (double)r->next_offset);
	if (r->size >= 0)
		cJSON_AddNumberToObject(o, "remaining", (double)(r->size - r->next_offset));
	cJSON_AddStringToObject(o, "note", r->size >= 0 && r->next_offset == r->size
		? "All declared bytes received. Call file_transfer_commit {handle} to verify and place the file."
		: "Stored. Send the next chunk at nextOffset; after the last one call file_transfer_commit.");
	return o;
}

/* A read's answer; at eof it carries the whole file's sha256 to check the bytes against. */
static cJSON *read_view(const struct transfer_reply *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "data", r->data);
	cJSON_AddNumberToObject(o, "bytes", (double)r->bytes);
	cJSON_AddNumberToObject(o, "offset", (double)r->offset);
	cJSON_AddNumberToObject(o, "nextOffset", (double)r->next_offset);
	cJSON_AddBoolToObject(o, "eof", r->eof);
	cJSON_AddNumberToObject(o, "size", (double)r->size);
	if (r->eof)
		cJSON_AddStringToObject(o, "sha256", r->sha);
	cJSON_AddStringToObject(o, "note", r->eof
		? "End of file. The sha256 of all the bytes read must equal sha256; if not, read again from offset 0."
		: "Call file_transfer_read {handle} again for the next chunk (it continues at nextOffset).");
	return o;
}

/* A commit's answer (the same for a repeat, which says so). */
static cJSON *committed_view(const struct transfer_reply *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", "completed");
	add_common(o, r);
	cJSON_AddStringToObject(o, "sha256", r->sha);
	cJSON_AddStringToObject(o, "note", r->again
		? "Already committed: the file is in place at path with this size and sha256."
		: "The file is in place at path, verified. Pass path (or this handle, for tool arguments that "
		  "take an uploaded file) to the tool that needs it.");
	return o;
}

/* A status shows only acknowledged bytes, and for a failed transfer the error its calls now
 * answer with (whose recoveryHint says how to start over). */
static cJSON *status_view(struct transfers *tr, const struct transfer_reply *r)
{
	cJSON *o = cJSON_CreateObject();
	const char *note;
	add_common(o, r);
	cJSON_AddStringToObject(o, "status", state_name(r->state));
	cJSON_AddNumberToObject(o, "nextOffset", (double)r->next_offset);
	if (r->upload && r->want[0])
		cJSON_AddStringToObject(o, "declaredSha256", r->want);
	if (r->sha[0])
		cJSON_AddStringToObject(o, "sha256", r->sha);
	add_expiry(o, r);
	if (r->state == TRANSFER_FAILED) {
		cJSON_AddItemToObject(o, "error", transfer_error_envelope(&r->failure, transfers_roots(tr)));
		note = "This transfer failed; error.recoveryHint says how to start over.";
	} else if (r->state == TRANSFER_COMMITTED) {
		note = "Committed: the file is in place at path.";
	} else if (r->upload) {
		note = "Continue with file_transfer_write at nextOffset; after the last chunk call file_transfer_commit.";
	} else {
		note = "Continue with file_transfer_read at nextOffset (or any offset) until eof.";
	}
	cJSON_AddStringToObject(o, "note", note);
	return o;
}

/* The CallToolResult for a reply: a failure envelope, or the view of its kind. */
static cJSON *reply_result(struct transfers *tr, const struct transfer_reply *r)
{
	cJSON *o;
	if (r->err.code[0])
		return toolresult_failure(transfer_error_envelope(&r->err, transfers_roots(tr)));
	switch (r->kind) {
	case TRANSFER_OPENED: o = opened_view(r); break;
	case TRANSFER_WRITTEN:
	case TRANSFER_DUPLICATE: o = written_view(r); break;
	case TRANSFER_READ: o = read_view(r); break;
	case TRANSFER_DONE: o = committed_view(r); break;
	default: o = status_view(tr, r); break;
	}
	return o ? toolresult_wrap(o, 0) : NULL;
}

/* ---- calls ------------------------------------------------------------------------------- */

/* A refusal of the arguments themselves, before any transfer is looked at. */
static cJSON *invalid_param(const char *param, const char *hint, const char *msg)
{
	struct transfer_error e;
	transfer_error_param(&e, param, hint, msg);
	return toolresult_failure(transfer_error_envelope(&e, NULL));
}

/* A deferred answer on its way back: the reply becomes a CallToolResult for the caller's own
 * later. */
struct files_wait {
	struct transfers *tr;
	struct files_later up;
};

static void wait_answer(void *ctx, const struct transfer_reply *r)
{
	struct files_wait *w = ctx;
	w->up.answer(w->up.ctx, reply_result(w->tr, r));
	free(w);
}

static void wait_drop(void *ctx)
{
	struct files_wait *w = ctx;
	if (w->up.drop)
		w->up.drop(w->up.ctx);
	free(w);
}

static int64_t int_arg(const cJSON *args, const char *name, int64_t def)
{
	const cJSON *v = cJSON_GetObjectItem(args, name);
	return v ? (int64_t)v->valuedouble : def;
}

/* file_transfer_open: size, sha256 and overwrite belong to uploads only. */
static int call_open(struct transfers *tr, const cJSON *args, const struct transfer_later *later,
                     struct transfer_reply *r, cJSON **refused)
{
	const char *dir = cJSON_GetObjectItem(args, "direction")->valuestring;
	const char *path = cJSON_GetObjectItem(args, "path")->valuestring;
	const cJSON *sz = cJSON_GetObjectItem(args, "size");
	const cJSON *sha = cJSON_GetObjectItem(args, "sha256");
	const cJSON *ow = cJSON_GetObjectItem(args, "overwrite");
	if (strcmp(dir, "download") != 0)
		return transfer_open_upload(tr, path, sz ? (int64_t)sz->valuedouble : -1, sha ? sha->valuestring : NULL,
		                            cJSON_IsTrue(ow), r);
	if (sz || sha || cJSON_IsTrue(ow)) {
		*refused = invalid_param(sz ? "size" : sha ? "sha256" : "overwrite", "Leave out size, sha256 "
			"and overwrite for downloads: the answer reports the file's size and sha256.",
			"size, sha256 and overwrite apply to uploads only.");
		return -1;
	}
	return transfer_open_download(tr, path, later, r);
}

/* One call, arguments validated: 0 with r filled, TRANSFER_LATER, or -1 with *refused. */
static int call_one(struct transfers *tr, const char *name, const cJSON *args, const struct transfer_later *later,
                    struct transfer_reply *r, cJSON **refused)
{
	const cJSON *h = cJSON_GetObjectItem(args, "handle");
	if (strcmp(name, "file_transfer_open") == 0)
		return call_open(tr, args, later, r, refused);
	if (strcmp(name, "file_transfer_write") == 0)
		return transfer_write(tr, h->valuestring, int_arg(args, "offset", 0),
		                      cJSON_GetObjectItem(args, "data")->valuestring, later, r);
	if (strcmp(name, "file_transfer_read") == 0)
		return transfer_read(tr, h->valuestring, int_arg(args, "offset", -1), int_arg(args, "length", -1),
		                     later, r);
	if (strcmp(name, "file_transfer_commit") == 0)
		return transfer_commit(tr, h->valuestring, later, r);
	if (strcmp(name, "file_transfer_status") == 0)
		return transfer_status(tr, h->valuestring, r);
	char msg[160];
	snprintf(msg, sizeof msg, "Unknown transfer tool %.100s.", name);
	*refused = toolresult_error("internal_error", msg, 0, "Call one of the file_transfer_* tools.");
	return -1;
}

/* The caller's later is wrapped (files_wait) so the domain hands back a reply and the
 * caller still gets a CallToolResult; without memory for the wrapper the call just answers
 * at once. */
cJSON *files_call_later(struct transfers *tr, const char *name, const cJSON *schema, cJSON *args,
                        const struct files_later *later)
{
	char err[256], field[128];
	struct transfer_reply r;
	struct files_wait *w = NULL;
	struct transfer_later tl;
	cJSON *refused = NULL;
	if (schema_validate(schema, args, err, sizeof err, field, sizeof field) < 0)
		return invalid_param(field, NULL, err);
	if (later && (w = calloc(1, sizeof *w))) {
		w->tr = tr;
		w->up = *later;
		tl = (struct transfer_later){ wait_answer, wait_drop, w };
	}
	int rc = call_one(tr, name, args, w ? &tl : NULL, &r, &refused);
	if (rc == TRANSFER_LATER)
		return NULL;   /* w is the domain's now */
	free(w);
	return rc < 0 ? refused : reply_result(tr, &r);
}

cJSON *files_call(struct transfers *tr, const char *name, const cJSON *schema, cJSON *args)
{
	return files_call_later(tr, name, schema, args, NULL);
}
