/* tests/unit/test_transfer_api.c — the transfers' plain C API (supervisor/core/transfer.h),
 * called directly, without the MCP tools over it: every call fills a struct transfer_reply,
 * and failures carry their code, parameter and cursor as fields, not JSON.
 *
 * Upload: declarations refused (a bad sha256, a size over the limit), a path outside the
 * roots (invalid_param with the roots), open, a chunk at the wrong offset and one in bad
 * base64 (both with the cursor), a chunk, its repeat (duplicate), status, a commit before the
 * last byte (size_mismatch), the commit and its repeat, a write after it (not_active), an
 * open of an existing file (file_exists), an unfinished upload resumed by a second open, and
 * one failed by a wrong sha256 whose status then holds why.  Download: open, a read to eof
 * with the file's sha256, a read past the end.  Unknown handles.  The error envelope built
 * from a reply.  An input file refused, naming its argument once.  An answer that comes later
 * (the chunk's sync in the worker pool).
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "supervisor/core/transfer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/b64.h"
#include "supervisor/core/config.h"
#include "supervisor/core/inputs.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/roots.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/workers.h"

#include "check.h"

/* sha256 of "hello world" */
#define HELLO_SHA "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"

struct fixture {
	char top[512], state[600], root[600];
	struct supervisor s;
};

/* A supervisor built by hand: config with one file root, loop, tasks, transfers, journal. */
static void start(struct fixture *f, int pool)
{
	char cfg[1200], err[512];
	memset(&f->s, 0, sizeof f->s);
	fplog_init(&f->s.log, 2, FPLOG_CRITICAL);
	snprintf(cfg, sizeof cfg, "{\"server\":{\"fileRoots\":[\"%s\"]},\"tools\":[{\"name\":\"t\","
	         "\"inputSchema\":{\"type\":\"object\"},\"command\":[\"/bin/true\"]}]}", f->root);
	if (config_parse(cfg, strlen(cfg), f->top, &f->s.cfg, err, sizeof err) < 0)
		check_die(err);
	f->s.state_dir = strdup(f->state);
	f->s.loop = loop_new();
	f->s.tasks = tasks_new(&f->s);
	f->s.transfers = transfers_new(&f->s);
	if (!f->s.loop || !f->s.tasks || !f->s.transfers || (pool && workers_new(f->s.loop, 1, &f->s.workers) < 0))
		check_die("setup");
	if (persist_open(&f->s, 0, &f->s.persist, err, sizeof err) < 0)
		check_die(err);
	transfers_recover(f->s.transfers);
}

static void stop(struct fixture *f)
{
	workers_free(f->s.workers);
	persist_close(f->s.persist);
	transfers_free(f->s.transfers);
	tasks_free(f->s.tasks);
	loop_free(f->s.loop);
	config_free(f->s.cfg);
	free(f->s.state_dir);
}

static char *b64(const char *s)
{
	char *enc = malloc(B64_ENCODED_SIZE(strlen(s)));
	if (!enc)
		check_die("malloc");
	b64_encode((const unsigned char *)s, strlen(s), enc);
	return enc;
}

static int failed_with(const struct transfer_reply *r, const char *code)
{
	return strcmp(r->err.code, code) == 0 && r->err.message[0] && r->err.hint[0];
}

static void t_declarations(struct tally *t, struct fixture *f)
{
	struct transfer_reply r;
	struct transfers *tr = f->s.transfers;
	CHECK(t, transfer_open_upload(tr, "a.txt", 11, "xyz", 0, &r) == 0 && failed_with(&r, "invalid_param") &&
	      strcmp(r.err.param, "sha256") == 0 && r.err.cursor == -1 && !r.err.roots,
	      "a malformed sha256: invalid_param naming sha256, no cursor");
	CHECK(t, transfer_open_upload(tr, "a.txt", 65LL << 30, NULL, 0, &r) == 0 && failed_with(&r, "file_too_large") &&
	      !r.err.retryable, "a declared size over 64 GiB: file_too_large, not retryable");
	CHECK(t, transfer_open_upload(tr, "../outside.txt", 11, NULL, 0, &r) == 0 && failed_with(&r, "invalid_param") &&
	      strcmp(r.err.param, "path") == 0 && r.err.roots, "a path leaving the roots: invalid_param with the roots");
	CHECK(t, transfer_open_upload(tr, "nodir/a.txt", 11, NULL, 0, &r) == 0 && failed_with(&r, "not_found") &&
	      r.err.roots, "a missing folder: not_found with the roots");

	cJSON *env = transfer_error_envelope(&r.err, transfers_roots(tr));
	const cJSON *roots = cJSON_GetObjectItem(env, "allowedRoots");
	CHECK(t, env && strcmp(cJSON_GetObjectItem(env, "code")->valuestring, "not_found") == 0 &&
	      cJSON_GetArraySize(roots) == 1 && strcmp(cJSON_GetArrayItem(roots, 0)->valuestring, f->root) == 0 &&
	      !cJSON_GetObjectItem(env, "partial") && !cJSON_GetObjectItem(env, "param"),
	      "its envelope lists the allowed roots, and nothing it does not have");
	cJSON_Delete(env);
	CHECK(t, transfer_status(tr, "0123456789abcdef0123456789abcdef", &r) == 0 && failed_with(&r, "unknown_transfer"),
	      "status of an unknown handle: unknown_transfer");
	CHECK(t, transfer_read(tr, "nope", -1, -1, NULL, &r) == 0 && failed_with(&r, "unknown_transfer"),
	      "read of an unknown handle: unknown_transfer");
}

static void t_upload(struct tally *t, struct fixture *f)
{
	struct transfer_reply r;
	struct transfers *tr = f->s.transfers;
	char h[33], *hello = b64("hello world"), *part = b64("hello"), *rest = b64(" world");

	CHECK(t, transfer_open_upload(tr, "up.txt", 11, HELLO_SHA, 0, &r) == 0 && !r.err.code[0] &&
	      r.kind == TRANSFER_OPENED && r.upload && strlen(r.handle) == 32 && r.size == 11 &&
	      strcmp(r.want, HELLO_SHA) == 0 && r.next_offset == 0 && r.chunk_size > 0 &&
	      r.max_chunk_size >= r.chunk_size && r.expires_ms > 0 && !r.again && strstr(r.path, "/up.txt"),
	      "an upload opens with its handle, declarations and chunk sizes");
	memcpy(h, r.handle, sizeof h);
	CHECK(t, transfer_write(tr, h, 5, part, NULL, &r) == 0 && failed_with(&r, "offset_mismatch") && r.err.cursor == 0,
	      "a chunk at the wrong offset: offset_mismatch with cursor 0");
	CHECK(t, transfer_write(tr, h, 0, "!!!", NULL, &r) == 0 && failed_with(&r, "invalid_param") &&
	      strcmp(r.err.param, "data") == 0 && r.err.cursor == 0, "bad base64: invalid_param on data, with the cursor");
	CHECK(t, transfer_write(tr, h, 0, part, NULL, &r) == 0 && !r.err.code[0] && r.kind == TRANSFER_WRITTEN &&
	      r.received == 5 && r.next_offset == 5, "a chunk is stored");
	CHECK(t, transfer_write(tr, h, 0, part, NULL, &r) == 0 && r.kind == TRANSFER_DUPLICATE && r.next_offset == 5,
	      "the same chunk again: a duplicate, nothing written");
	CHECK(t, transfer_status(tr, h, &r) == 0 && r.kind == TRANSFER_STATUS && r.state == TRANSFER_ACTIVE &&
	      r.next_offset == 5 && r.upload && !r.sha[0], "status: active at 5");
	CHECK(t, transfer_commit(tr, h, NULL, &r) == 0 && failed_with(&r, "size_mismatch") && r.err.cursor == 5,
	      "a commit before the last byte: size_mismatch at the cursor");
	CHECK(t, transfer_open_upload(tr, "up.txt", 11, HELLO_SHA, 0, &r) == 0 && r.kind == TRANSFER_OPENED &&
	      r.again && strcmp(r.handle, h) == 0 && r.next_offset == 5,
	      "the same open again resumes the unfinished upload under its handle");
	CHECK(t, transfer_write(tr, h, 5, rest, NULL, &r) == 0 && r.kind == TRANSFER_WRITTEN && r.next_offset == 11,
	      "the last chunk");
	CHECK(t, transfer_commit(tr, h, NULL, &r) == 0 && !r.err.code[0] && r.kind == TRANSFER_DONE && !r.again &&
	      strcmp(r.sha, HELLO_SHA) == 0 && r.state == TRANSFER_COMMITTED, "the commit puts the file in place");
	CHECK(t, transfer_commit(tr, h, NULL, &r) == 0 && r.kind == TRANSFER_DONE && r.again,
	      "committing again answers the same, marked again");
	CHECK(t, transfer_write(tr, h, 11, part, NULL, &r) == 0 && failed_with(&r, "not_active"),
	      "a write after the commit: not_active");
	CHECK(t, transfer_read(tr, h, -1, -1, NULL, &r) == 0 && failed_with(&r, "invalid_param") &&
	      strcmp(r.err.param, "handle") == 0, "reading an upload: invalid_param on handle");
	CHECK(t, transfer_open_upload(tr, "up.txt", 11, NULL, 0, &r) == 0 && failed_with(&r, "file_exists"),
	      "an upload onto the committed file without overwrite: file_exists");
	persist_commit(f->s.persist);
	free(hello);
	free(part);
	free(rest);
}

static void t_failed_upload(struct tally *t, struct fixture *f)
{
	struct transfer_reply r;
	struct transfers *tr = f->s.transfers;
	char h[33], *other = b64("hello WORLD");
	transfer_open_upload(tr, "bad.txt", 11, HELLO_SHA, 0, &r);
	memcpy(h, r.handle, sizeof h);
	CHECK(t, transfer_write(tr, h, 0, other, NULL, &r) == 0 && r.kind == TRANSFER_WRITTEN, "wrong bytes are stored");
	CHECK(t, transfer_commit(tr, h, NULL, &r) == 0 && failed_with(&r, "checksum_mismatch"),
	      "their commit: checksum_mismatch");
	CHECK(t, transfer_status(tr, h, &r) == 0 && r.kind == TRANSFER_STATUS && r.state == TRANSFER_FAILED &&
	      strcmp(r.failure.code, "not_active") == 0 && strstr(r.failure.message, "sha256"),
	      "the failed upload's status holds why, as its calls now answer");
	persist_commit(f->s.persist);
	free(other);
}

static void t_download(struct tally *t, struct fixture *f)
{
	struct transfer_reply r;
	struct transfers *tr = f->s.transfers;
	char h[33];
	CHECK(t, transfer_open_download(tr, "up.txt", NULL, &r) == 0 && !r.err.code[0] && r.kind == TRANSFER_OPENED &&
	      !r.upload && r.size == 11 && strcmp(r.sha, HELLO_SHA) == 0 && r.next_offset == 0,
	      "a download opens with the file's size and sha256");
	memcpy(h, r.handle, sizeof h);
	CHECK(t, transfer_read(tr, h, -1, 5, NULL, &r) == 0 && r.kind == TRANSFER_READ && r.bytes == 5 && r.offset == 0 &&
	      !r.eof && strcmp(r.data, "aGVsbG8=") == 0, "the first 5 bytes, base64");
	CHECK(t, transfer_read(tr, h, -1, -1, NULL, &r) == 0 && r.kind == TRANSFER_READ && r.offset == 5 && r.bytes == 6 &&
	      r.eof && r.next_offset == 11 && strcmp(r.sha, HELLO_SHA) == 0, "the rest continues where it ended, to eof");
	CHECK(t, transfer_read(tr, h, 12, 1, NULL, &r) == 0 && failed_with(&r, "invalid_param") &&
	      strcmp(r.err.param, "offset") == 0, "a read past the end: invalid_param on offset");
	CHECK(t, transfer_read(tr, h, 0, (1 << 20) + 1, NULL, &r) == 0 && failed_with(&r, "chunk_too_large"),
	      "a read over 1 MiB: chunk_too_large");
	CHECK(t, transfer_write(tr, h, 0, "aGk=", NULL, &r) == 0 && failed_with(&r, "invalid_param") &&
	      strcmp(r.err.param, "handle") == 0, "writing to a download: invalid_param on handle");
	CHECK(t, transfer_open_download(tr, "missing.txt", NULL, &r) == 0 && failed_with(&r, "not_found"),
	      "a download of a missing file: not_found");
	CHECK(t, transfer_open_download(tr, "forkpoint://tasks/0123456789abcdef0123456789abcdef/log", NULL, &r) == 0 &&
	      failed_with(&r, "invalid_param") && strcmp(r.err.param, "path") == 0, "a log URI cannot be downloaded");
	persist_commit(f->s.persist);
}

/* A refused input file names the argument once: the envelope has one "param", the argument's
 * name, even when the underlying failure named a parameter of its own (path). */
static void t_inputs(struct tally *t, struct fixture *f)
{
	char work[900];
	snprintf(work, sizeof work, "%s/work", f->top);
	check_mkdir(work);
	cJSON *schema = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"data\":{\"type\":\"string\","
	                            "\"format\":\"forkpoint-upload\"}}}");
	cJSON *args = cJSON_Parse("{\"data\":\"../outside/secret\"}");
	cJSON *env = NULL;
	int params = 0;
	const cJSON *c;
	CHECK(t, inputs_prepare(f->s.transfers, schema, args, work, &env) == -1 && env, "a path outside the roots is refused");
	cJSON_ArrayForEach(c, env)
		params += c->string && strcmp(c->string, "param") == 0;
	CHECK(t, params == 1 && strcmp(cJSON_GetObjectItem(env, "param")->valuestring, "data") == 0 &&
	      strcmp(cJSON_GetObjectItem(env, "code")->valuestring, "invalid_param") == 0 &&
	      cJSON_GetArraySize(cJSON_GetObjectItem(env, "allowedRoots")) == 1,
	      "its envelope names the argument once, with the allowed roots");
	cJSON_Delete(env);
	cJSON_Delete(args);
	args = cJSON_Parse("{\"data\":\"0123456789abcdef0123456789abcdef\"}");
	env = NULL;
	CHECK(t, inputs_prepare(f->s.transfers, schema, args, work, &env) == -1 && env &&
	      strcmp(cJSON_GetObjectItem(env, "code")->valuestring, "unknown_transfer") == 0 &&
	      strcmp(cJSON_GetObjectItem(env, "param")->valuestring, "data") == 0,
	      "an unknown handle with no earlier copy: unknown_transfer naming the argument");
	cJSON_Delete(env);
	cJSON_Delete(args);
	cJSON_Delete(schema);
}

struct later_box {
	int answered, dropped;
	struct transfer_reply r;
};

static void got(void *ctx, const struct transfer_reply *r)
{
	struct later_box *b = ctx;
	b->answered++;
	b->r = *r;
	b->r.path = NULL;   /* valid during the call only */
}

static void dropped(void *ctx)
{
	((struct later_box *)ctx)->dropped++;
}

/* With a worker pool a chunk's sync happens there, and the answer comes through later. */
static void t_later(struct tally *t, struct fixture *f)
{
	struct transfer_reply r;
	struct transfers *tr = f->s.transfers;
	struct later_box box = { 0 };
	struct transfer_later later = { got, dropped, &box };
	char h[33], *hello = b64("hello world");
	transfer_open_upload(tr, "later.txt", 11, HELLO_SHA, 0, &r);
	memcpy(h, r.handle, sizeof h);
	unsigned long before = transfers_deferred(tr);
	CHECK(t, transfer_write(tr, h, 0, hello, &later, &r) == TRANSFER_LATER && transfers_deferred(tr) == before + 1,
	      "a chunk with a pool: answered later, counted as deferred");
	while (!box.answered && !box.dropped && workers_pending(f->s.workers))
		workers_wait(f->s.workers, 10000);
	CHECK(t, box.answered == 1 && !box.dropped && box.r.kind == TRANSFER_WRITTEN && box.r.received == 11 &&
	      box.r.next_offset == 11, "the later answer is the chunk's reply");
	CHECK(t, transfer_status(tr, h, &r) == 0 && r.next_offset == 11, "status counts it once it is synced");
	CHECK(t, transfer_commit(tr, h, &later, &r) == 0 && r.kind == TRANSFER_DONE,
	      "a small same-file-system commit answers at once even when it could wait");
	persist_commit(f->s.persist);
	free(hello);
}

int main(void)
{
	struct tally t = { 0, 0 };
	struct fixture f;
	check_tmpdir(f.top, sizeof f.top, "transfer-api");
	snprintf(f.root, sizeof f.root, "%s/root", f.top);
	snprintf(f.state, sizeof f.state, "%s/state", f.top);
	check_mkdir(f.root);
	check_mkdir(f.state);
	start(&f, 0);
	t_declarations(&t, &f);
	t_upload(&t, &f);
	t_failed_upload(&t, &f);
	t_download(&t, &f);
	t_inputs(&t, &f);
	stop(&f);
	start(&f, 1);
	t_later(&t, &f);
	stop(&f);
	if (!getenv("KEEP_TEST_DIRS"))
		check_rm_rf(f.top);
	return check_done(&t);
}
