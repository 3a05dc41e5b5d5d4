/* tests/unit/test_transfer.c — file transfers (supervisor/core/transfer.c, mcp/files.c) and task resources
 * (supervisor/mcp/resources.c), driven through files_call() with the tools' own input schemas
 * on a supervisor built by hand (loop, config, task table, journal in a temp state dir).
 *
 * Uploads: wrong offsets, a repeated chunk, a racing duplicate (same and different bytes),
 * invalid base64, oversized chunks, size and sha256 mismatches with every recoveryHint
 * followed, an existing destination, a folder swapped for a symlink mid-upload, path escapes;
 * a restart mid-upload (journal replayed by a second instance, unacknowledged staged bytes
 * cut, hash rebuilt once) then resume and commit with the right sha256; a lost handle found
 * again by opening the same path; compaction.  Downloads: ranges, sequential reads to eof,
 * whole-file sha256, a file changed under an open download.  Expiry and staging cleanup.
 * Files into jobs (inputs_prepare), artifacts, resources/list (with pagination),
 * templates, resources/read, the result link.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "supervisor/core/transfer.h"
#include "supervisor/core/inputs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "proto/b64.h"
#include "state/blob.h"
#include "supervisor/core/config.h"
#include "supervisor/core/persist.h"
#include "supervisor/mcp/files.h"
#include "supervisor/mcp/resources.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/workers.h"

#include "check.h"

static unsigned char *slurp(const char *path, size_t *n)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		*n = 0;
		return NULL;
	}
	unsigned char *b = malloc((size_t)st.st_size + 1);
	ssize_t r = b ? read(fd, b, (size_t)st.st_size) : -1;
	close(fd);
	*n = r > 0 ? (size_t)r : 0;
	return b;
}

/* ---- a supervisor built by hand ------------------------------------------------------------- */

struct env {
	char top[512], state[600], root[600], out[600];
};

struct sv {
	struct supervisor s;
	cJSON *tools;
	atomic_int gate;            /* sv_start_with(pool 2): opens the two held worker threads */
};

/* A job that holds a worker thread until *arg (an atomic_int gate, if given) opens or the pool
 * stops. */
static void hold_run(struct workers *w, void *arg)
{
	atomic_int *gate = arg;
	while (!workers_stopping(w) && !(gate && atomic_load(gate)))
		usleep(1000);
}

static void hold_done(void *arg, int ran)
{
	(void)arg;
	(void)ran;
}

static void sv_start_with(struct sv *v, const struct env *e, int pool);

static void sv_start(struct sv *v, const struct env *e)
{
	sv_start_with(v, e, 0);
}

/* pool: a worker pool from the start (before recovery), as the server has. */
static void sv_start_with(struct sv *v, const struct env *e, int pool)
{
	char cfg[2000], err[512];
	memset(v, 0, sizeof *v);
	fplog_init(&v->s.log, 2, FPLOG_CRITICAL);
	snprintf(cfg, sizeof cfg, "{\"server\":{\"fileRoots\":[\"%s\"]},\"tools\":[{\"name\":\"t\","
	         "\"inputSchema\":{\"type\":\"object\"},\"command\":[\"/bin/true\"]}]}", e->root);
	if (config_parse(cfg, strlen(cfg), e->top, &v->s.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "config: %s\n", err);
		exit(2);
	}
	v->s.state_dir = strdup(e->state);
	v->s.loop = loop_new();
	v->s.tasks = tasks_new(&v->s);
	v->s.transfers = transfers_new(&v->s);
	if (!v->s.loop || !v->s.tasks || !v->s.transfers || (pool && workers_new(v->s.loop, 2, &v->s.workers) < 0))
		check_die("setup");
	/* pool 2: both threads held (until v->gate opens), so recovery's jobs wait in the queue */
	for (int i = 0; pool == 2 && i < 2; i++)
		workers_submit(v->s.workers, hold_run, hold_done, &v->gate);
	if (persist_open(&v->s, 0, &v->s.persist, err, sizeof err) < 0) {
		fprintf(stderr, "persist_open: %s\n", err);
		exit(2);
	}
	transfers_recover(v->s.transfers);
	v->tools = cJSON_CreateArray();
	files_list_tools(v->tools);
}

/* A crash: whatever was appended but not committed is lost. */
static void sv_stop(struct sv *v)
{
	persist_close(v->s.persist);
	transfers_free(v->s.transfers);
	tasks_free(v->s.tasks);
	loop_free(v->s.loop);
	config_free(v->s.cfg);
	free(v->s.state_dir);
	cJSON_Delete(v->tools);
}

static const cJSON *schema_of(struct sv *v, const char *name)
{
	const cJSON *t;
	cJSON_ArrayForEach(t, v->tools)
		if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, name) == 0)
			return cJSON_GetObjectItem(t, "inputSchema");
	return NULL;
}

/* One tool call in its own turn: the journal is committed before the answer counts, as the
 * server's turn hook does.  Returns structuredContent (caller frees); *is_error set. */
static cJSON *call_nocommit(struct sv *v, const char *name, cJSON *args, int *is_error)
{
	cJSON *r = files_call(v->s.transfers, name, schema_of(v, name), args);
	cJSON_Delete(args);
	if (!r)
		check_die("files_call returned NULL");
	cJSON *sc = cJSON_DetachItemFromObject(r, "structuredContent");
	const cJSON *content = cJSON_GetObjectItem(r, "content");
	const cJSON *text = cJSON_GetObjectItem(cJSON_GetArrayItem(content, 0), "text");
	cJSON *again = text ? cJSON_Parse(text->valuestring) : NULL;
	if (!again || !cJSON_Compare(again, sc, 1))
		check_die("text block differs from structuredContent");
	cJSON_Delete(again);
	*is_error = cJSON_IsTrue(cJSON_GetObjectItem(r, "isError"));
	cJSON_Delete(r);
	return sc;
}

static cJSON *call(struct sv *v, const char *name, cJSON *args, int *is_error)
{
	cJSON *sc = call_nocommit(v, name, args, is_error);
	if (persist_commit(v->s.persist) < 0)
		check_die("persist_commit");
	return sc;
}

static const char *code_of(const cJSON *sc)
{
	const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(sc, "error"), "code");
	return cJSON_IsString(c) ? c->valuestring : "";
}

static const char *hint_of(const cJSON *sc)
{
	const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(sc, "error"), "recoveryHint");
	return cJSON_IsString(c) ? c->valuestring : "";
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *c = cJSON_GetObjectItem(o, k);
	return cJSON_IsNumber(c) ? c->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *c = cJSON_GetObjectItem(o, k);
	return cJSON_IsString(c) ? c->valuestring : "";
}

static double cursor_of(const cJSON *sc)
{
	return num(cJSON_GetObjectItem(cJSON_GetObjectItem(sc, "error"), "partial"), "cursor");
}

static cJSON *open_args(const char *dir, const char *path, long long size, const char *sha)
{
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "direction", dir);
	cJSON_AddStringToObject(a, "path", path);
	if (size >= 0)
		cJSON_AddNumberToObject(a, "size", (double)size);
	if (sha)
		cJSON_AddStringToObject(a, "sha256", sha);
	return a;
}

static cJSON *write_args(const char *h, long long off, const unsigned char *p, size_t n)
{
	char *enc = malloc(B64_ENCODED_SIZE(n));
	b64_encode(p, n, enc);
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "handle", h);
	cJSON_AddNumberToObject(a, "offset", (double)off);
	cJSON_AddStringToObject(a, "data", enc);
	free(enc);
	return a;
}

static cJSON *h_args(const char *h)
{
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "handle", h);
	return a;
}

static cJSON *read_args(const char *h, long long off, long long len)
{
	cJSON *a = h_args(h);
	if (off >= 0)
		cJSON_AddNumberToObject(a, "offset", (double)off);
	if (len >= 0)
		cJSON_AddNumberToObject(a, "length", (double)len);
	return a;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}

/* Open an upload and return its handle in h (0 on success). */
static int open_upload(struct sv *v, const char *path, long long size, const char *sha, char h[33], cJSON **out)
{
	int err;
	cJSON *sc = call(v, "file_transfer_open", open_args("upload", path, size, sha), &err);
	h[0] = 0;
	if (!err)
		snprintf(h, 33, "%s", str(sc, "handle"));
	if (out)
		*out = sc;
	else
		cJSON_Delete(sc);
	return err ? -1 : 0;
}

/* Write [from, to) in chunks of csize; 0 if every write was acknowledged in order. */
static int send_range(struct sv *v, const char *h, const unsigned char *data, size_t from, size_t to, size_t csize)
{
	for (size_t off = from; off < to;) {
		size_t n = to - off < csize ? to - off : csize;
		int err;
		cJSON *sc = call(v, "file_transfer_write", write_args(h, (long long)off, data + off, n), &err);
		int ok = !err && num(sc, "nextOffset") == (double)(off + n);
		cJSON_Delete(sc);
		if (!ok)
			return -1;
		off += n;
	}
	return 0;
}

/* ---- the tests ----------------------------------------------------------------------------- */

static void t_upload_basics(struct tally *t, struct env *e)
{
	struct sv v;
	char h[33], sha[65], p[1200];
	int err;
	size_t N = 700 * 1024 + 123;
	unsigned char *data = malloc(N);
	fill(data, N, 1);
	blob_sha256_hex(data, N, sha);
	sv_start(&v, e);
	cJSON *sc;

	CHECK(t, open_upload(&v, "up/basic.bin", (long long)N, sha, h, &sc) == -1, "upload into a missing folder fails");
	CHECK(t, strcmp(code_of(sc), "not_found") == 0, "... with not_found");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/up", e->root);
	check_mkdir(p);
	CHECK(t, open_upload(&v, "up/basic.bin", (long long)N, sha, h, &sc) == 0, "upload opens");
	CHECK(t, strlen(h) == 32, "handle is 32 hex digits");
	CHECK(t, num(sc, "chunkSize") == 262144 && num(sc, "nextOffset") == 0, "chunkSize 256 KiB, nextOffset 0");
	CHECK(t, strlen(str(sc, "expiresAt")) == 24 && strlen(str(sc, "note")) > 20, "expiresAt and a note");
	cJSON_Delete(sc);

	/* wrong offsets */
	sc = call(&v, "file_transfer_write", write_args(h, 4096, data, 1000), &err);
	CHECK(t, err && strcmp(code_of(sc), "offset_mismatch") == 0 && cursor_of(sc) == 0, "write ahead of the cursor: offset_mismatch, cursor 0");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_write", write_args(h, 0, data, 262144), &err);
	CHECK(t, !err && num(sc, "received") == 262144 && num(sc, "nextOffset") == 262144, "first chunk acknowledged");
	cJSON_Delete(sc);

	/* the same chunk again (a lost answer): acknowledged, nothing written twice */
	sc = call(&v, "file_transfer_write", write_args(h, 0, data, 262144), &err);
	CHECK(t, !err && cJSON_IsTrue(cJSON_GetObjectItem(sc, "duplicate")) && num(sc, "nextOffset") == 262144,
	      "repeated chunk: duplicate, nextOffset unchanged");
	CHECK(t, strstr(str(sc, "note"), "already") != NULL, "... and the note says so");
	cJSON_Delete(sc);
	/* different bytes at the old offset are not a duplicate */
	sc = call(&v, "file_transfer_write", write_args(h, 0, data + 1, 262144), &err);
	CHECK(t, err && strcmp(code_of(sc), "offset_mismatch") == 0 && cursor_of(sc) == 262144,
	      "other bytes at an old offset: offset_mismatch with the cursor");
	CHECK(t, strstr(hint_of(sc), "262144") != NULL, "the hint names the offset to resume at");
	cJSON_Delete(sc);
	/* a shorter prefix of the old chunk is not a duplicate either */
	sc = call(&v, "file_transfer_write", write_args(h, 0, data, 1000), &err);
	CHECK(t, err && strcmp(code_of(sc), "offset_mismatch") == 0, "part of an old chunk: offset_mismatch");
	cJSON_Delete(sc);

	/* racing writes in one turn: exactly one advances the cursor */
	int e1, e2;
	cJSON *a1 = call_nocommit(&v, "file_transfer_write", write_args(h, 262144, data + 262144, 262144), &e1);
	cJSON *a2 = call_nocommit(&v, "file_transfer_write", write_args(h, 262144, data + 262144, 262144), &e2);
	persist_commit(v.s.persist);
	CHECK(t, !e1 && !e2 && num(a1, "received") == 262144 && num(a2, "received") == 0 &&
	      cJSON_IsTrue(cJSON_GetObjectItem(a2, "duplicate")), "racing identical writes: one stored, one a duplicate");
	cJSON_Delete(a1);
	cJSON_Delete(a2);
	unsigned char other[1000];
	memset(other, 'x', sizeof other);
	a1 = call_nocommit(&v, "file_transfer_write", write_args(h, 524288, data + 524288, 1000), &e1);
	a2 = call_nocommit(&v, "file_transfer_write", write_args(h, 524288, other, sizeof other), &e2);
	persist_commit(v.s.persist);
	CHECK(t, !e1 && e2 && strcmp(code_of(a2), "offset_mismatch") == 0 && cursor_of(a2) == 525288,
	      "racing different writes: the first wins, the second gets offset_mismatch");
	cJSON_Delete(a1);
	cJSON_Delete(a2);

	/* invalid base64, oversized chunks */
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "handle", h);
	cJSON_AddNumberToObject(a, "offset", 525288);
	cJSON_AddStringToObject(a, "data", "QUJD!!==");
	sc = call(&v, "file_transfer_write", a, &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0 &&
	      strcmp(str(cJSON_GetObjectItem(sc, "error"), "param"), "data") == 0, "invalid base64: invalid_param on data");
	cJSON_Delete(sc);
	a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "handle", h);
	cJSON_AddNumberToObject(a, "offset", 525288);
	cJSON_AddStringToObject(a, "data", "QUJDRA\n==");
	sc = call(&v, "file_transfer_write", a, &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "a line break inside base64 is refused");
	cJSON_Delete(sc);
	unsigned char *big = calloc(1, (1 << 20) + 3);
	sc = call(&v, "file_transfer_write", write_args(h, 525288, big, (1 << 20) + 3), &err);
	CHECK(t, err && strcmp(code_of(sc), "chunk_too_large") == 0 && cursor_of(sc) == 525288, "1 MiB + 3 bytes: chunk_too_large");
	cJSON_Delete(sc);
	free(big);

	/* past the declared size: refused, cursor unchanged, the transfer stays usable */
	size_t rest = N - 525288;
	unsigned char *tail = malloc(rest + 10);
	memcpy(tail, data + 525288, rest);
	memset(tail + rest, 0, 10);
	sc = call(&v, "file_transfer_write", write_args(h, 525288, tail, rest + 10), &err);
	CHECK(t, err && strcmp(code_of(sc), "size_mismatch") == 0 && cursor_of(sc) == 525288, "chunk past the declared size: size_mismatch");
	char want[40];
	snprintf(want, sizeof want, "at most %zu more bytes", rest);
	CHECK(t, strstr(hint_of(sc), want) != NULL, "the hint says how many bytes may still come");
	cJSON_Delete(sc);
	free(tail);

	/* commit too early: size_mismatch, the transfer stays open */
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, err && strcmp(code_of(sc), "size_mismatch") == 0 && cursor_of(sc) == 525288, "early commit: size_mismatch with the cursor");
	CHECK(t, strstr(hint_of(sc), "525288") != NULL, "its hint names the offset");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_status", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "status"), "active") == 0 && num(sc, "nextOffset") == 525288, "status: still active at the cursor");
	cJSON_Delete(sc);
	/* following the hints: send the rest, commit */
	CHECK(t, send_range(&v, h, data, 525288, N, 100000) == 0, "the rest goes in after the size_mismatch");
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "status"), "completed") == 0 && strcmp(str(sc, "sha256"), sha) == 0 &&
	      num(sc, "size") == (double)N, "commit: completed with the declared size and sha256");
	cJSON_Delete(sc);
	size_t got = 0;
	snprintf(p, sizeof p, "%s/up/basic.bin", e->root);
	unsigned char *back = slurp(p, &got);
	CHECK(t, back && got == N && memcmp(back, data, N) == 0, "the file on disk is exactly the bytes sent");
	free(back);
	snprintf(p, sizeof p, "%s/uploads/%s.part", e->state, h);
	CHECK(t, access(p, F_OK) != 0, "no staging file left behind");
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "status"), "completed") == 0, "commit again: the same answer");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_write", write_args(h, (long long)N, data, 10), &err);
	CHECK(t, err && strcmp(code_of(sc), "not_active") == 0, "write after commit: not_active");
	cJSON_Delete(sc);

	/* the destination exists now */
	CHECK(t, open_upload(&v, "up/basic.bin", 5, NULL, h, &sc) < 0 && strcmp(code_of(sc), "file_exists") == 0,
	      "upload onto an existing file: file_exists");
	CHECK(t, strstr(hint_of(sc), "overwrite") != NULL, "the hint offers overwrite");
	cJSON_Delete(sc);
	a = open_args("upload", "up/basic.bin", 5, NULL);
	cJSON_AddBoolToObject(a, "overwrite", 1);
	sc = call(&v, "file_transfer_open", a, &err);
	snprintf(h, sizeof h, "%s", str(sc, "handle"));
	CHECK(t, !err, "overwrite: true opens");
	cJSON_Delete(sc);
	CHECK(t, send_range(&v, h, (const unsigned char *)"hello", 0, 5, 5) == 0, "five bytes sent");
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err, "commit replaces the file");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/up/basic.bin", e->root);
	back = slurp(p, &got);
	CHECK(t, back && got == 5 && memcmp(back, "hello", 5) == 0, "the replaced file holds the new bytes");
	free(back);

	/* checksum mismatch: discarded; the hint (open again, send again) works */
	char bad[65];
	memset(bad, 'a', 64);
	bad[64] = 0;
	CHECK(t, open_upload(&v, "up/sum.bin", 1000, bad, h, NULL) == 0, "upload with a wrong sha256 opens");
	CHECK(t, send_range(&v, h, data, 0, 1000, 1000) == 0, "its bytes go in");
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, err && strcmp(code_of(sc), "checksum_mismatch") == 0, "commit: checksum_mismatch");
	CHECK(t, strstr(hint_of(sc), "file_transfer_open again") != NULL, "the hint says to open again");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/uploads/%s.part", e->state, h);
	CHECK(t, access(p, F_OK) != 0, "the wrong bytes were deleted");
	snprintf(p, sizeof p, "%s/up/sum.bin", e->root);
	CHECK(t, access(p, F_OK) != 0, "nothing was placed");
	sc = call(&v, "file_transfer_status", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "status"), "failed") == 0, "status: failed");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_write", write_args(h, 1000, data, 10), &err);
	CHECK(t, err && strcmp(code_of(sc), "not_active") == 0 && strstr(hint_of(sc), "file_transfer_open") != NULL,
	      "writes to it: not_active, hint to open again");
	cJSON_Delete(sc);
	char sha1000[65], h2[33];
	blob_sha256_hex(data, 1000, sha1000);
	CHECK(t, open_upload(&v, "up/sum.bin", 1000, sha1000, h2, NULL) == 0 && strcmp(h, h2) != 0, "following it: a new upload");
	CHECK(t, send_range(&v, h2, data, 0, 1000, 400) == 0, "bytes sent again from 0");
	sc = call(&v, "file_transfer_commit", h_args(h2), &err);
	CHECK(t, !err && strcmp(str(sc, "sha256"), sha1000) == 0, "and it commits");
	cJSON_Delete(sc);

	/* a bad sha256 parameter, downloads with upload options, unknown handles */
	sc = call(&v, "file_transfer_open", open_args("upload", "up/x.bin", 1, "xyz"), &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "sha256 not 64 hex: invalid_param");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_open", open_args("download", "up/sum.bin", 5, NULL), &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "download with size: invalid_param");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_status", h_args("0123456789abcdef0123456789abcdef"), &err);
	CHECK(t, err && strcmp(code_of(sc), "unknown_transfer") == 0, "unknown handle: unknown_transfer");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_write", cJSON_Parse("{\"handle\":\"x\"}"), &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "missing parameters: invalid_param");
	cJSON_Delete(sc);

	sv_stop(&v);
	free(data);
}

static void t_paths(struct tally *t, struct env *e)
{
	struct sv v;
	char p[1600], q[1600], h[33];
	int err;
	sv_start(&v, e);
	cJSON *sc;
	snprintf(p, sizeof p, "%s/secret", e->out);
	check_put(p, "SECRET\n", 7);
	snprintf(q, sizeof q, "%s/link_out", e->root);
	check_symlink(p, q);
	const char *bad[] = { "../outside/secret", "link_out", "/etc/hostname" };
	for (int i = 0; i < 3; i++) {
		char what[200];
		sc = call(&v, "file_transfer_open", open_args("download", bad[i], -1, NULL), &err);
		snprintf(what, sizeof what, "download '%s' refused with invalid_param and allowedRoots", bad[i]);
		CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0 &&
		      cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(sc, "error"), "allowedRoots")) == 1, what);
		cJSON_Delete(sc);
		sc = call(&v, "file_transfer_open", open_args("upload", bad[i], 1, NULL), &err);
		snprintf(what, sizeof what, "upload to '%s' refused", bad[i]);
		CHECK(t, err && (strcmp(code_of(sc), "invalid_param") == 0 || (i == 1 && strcmp(code_of(sc), "file_exists") == 0)), what);
		cJSON_Delete(sc);
	}
	snprintf(p, sizeof p, "%s/etc/passwd", e->root);
	sc = call(&v, "file_transfer_open", open_args("download", "missing.txt", -1, NULL), &err);
	CHECK(t, err && strcmp(code_of(sc), "not_found") == 0, "download of a missing file: not_found");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/outdir", e->root);
	snprintf(q, sizeof q, "%s", e->out);
	check_symlink(q, p);
	sc = call(&v, "file_transfer_open", open_args("upload", "outdir/evil.bin", 1, NULL), &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "upload through a symlinked folder refused");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_open", open_args("upload", ".fp-upload-x.part", 1, NULL), &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "the staging name prefix is reserved");
	cJSON_Delete(sc);

	/* the destination folder swapped for a symlink to the outside mid-upload */
	snprintf(p, sizeof p, "%s/swap", e->root);
	check_mkdir(p);
	CHECK(t, open_upload(&v, "swap/f.bin", 3, NULL, h, NULL) == 0, "upload into swap/ opens");
	CHECK(t, send_range(&v, h, (const unsigned char *)"abc", 0, 2, 2) == 0, "two bytes in");
	snprintf(q, sizeof q, "%s/swap.moved", e->root);
	rename(p, q);
	check_symlink(e->out, p);
	CHECK(t, send_range(&v, h, (const unsigned char *)"abc", 2, 3, 1) == 0, "the last byte after the swap");
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err, "commit after the swap succeeds");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/f.bin", e->out);
	CHECK(t, access(p, F_OK) != 0, "nothing was written outside the root");
	snprintf(p, sizeof p, "%s/swap.moved/f.bin", e->root);
	CHECK(t, access(p, F_OK) == 0, "the file is in the folder the upload was opened in");
	sv_stop(&v);
}

static void t_restart(struct tally *t, struct env *e)
{
	struct sv v;
	char h[33], h2[33], sha[65], p[1600];
	int err;
	size_t N = 3 * 262144 + 5000, C = 262144;
	unsigned char *data = malloc(N);
	fill(data, N, 7);
	blob_sha256_hex(data, N, sha);
	sv_start(&v, e);
	cJSON *sc;
	CHECK(t, open_upload(&v, "restart.bin", (long long)N, sha, h, NULL) == 0, "upload for the restart opens");
	CHECK(t, send_range(&v, h, data, 0, 2 * C, C) == 0, "two chunks acknowledged");
	/* The third chunk is written and synced, but the turn never commits: the crash comes first. */
	sc = call_nocommit(&v, "file_transfer_write", write_args(h, (long long)(2 * C), data + 2 * C, C), &err);
	CHECK(t, !err, "third chunk stored (its answer would wait for the commit)");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/uploads/%s.part", e->state, h);
	struct stat st;
	CHECK(t, stat(p, &st) == 0 && st.st_size == (off_t)(3 * C), "the staging file holds three chunks");
	sv_stop(&v);   /* crash */

	sv_start(&v, e);
	CHECK(t, stat(p, &st) == 0 && st.st_size == (off_t)(2 * C), "after the restart, the unacknowledged bytes are cut off");
	sc = call(&v, "file_transfer_status", h_args(h), &err);
	CHECK(t, !err && num(sc, "nextOffset") == (double)(2 * C) && strcmp(str(sc, "status"), "active") == 0,
	      "status after the restart: active at the journaled cursor");
	cJSON_Delete(sc);
	/* A client that lost its handle opens the same path again and gets it back. */
	CHECK(t, open_upload(&v, "restart.bin", (long long)N, sha, h2, &sc) == 0 && strcmp(h, h2) == 0 &&
	      cJSON_IsTrue(cJSON_GetObjectItem(sc, "resumed")) && num(sc, "nextOffset") == (double)(2 * C),
	      "opening the same path, size and sha256 again resumes the same handle");
	cJSON_Delete(sc);
	/* The client retries the chunk it never got an answer for. */
	sc = call(&v, "file_transfer_write", write_args(h, (long long)(2 * C), data + 2 * C, C), &err);
	CHECK(t, !err && num(sc, "nextOffset") == (double)(3 * C), "the third chunk again, after the restart");
	cJSON_Delete(sc);
	sv_stop(&v);   /* a second crash, this time after the commit */

	sv_start(&v, e);
	sc = call(&v, "file_transfer_write", write_args(h, (long long)(2 * C), data + 2 * C, C), &err);
	CHECK(t, !err && cJSON_IsTrue(cJSON_GetObjectItem(sc, "duplicate")),
	      "a repeat of the last chunk is still recognised after a restart");
	cJSON_Delete(sc);
	CHECK(t, send_range(&v, h, data, 3 * C, N, C) == 0, "the last bytes");
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "sha256"), sha) == 0, "commit after two restarts: the sha256 matches (hash rebuilt once)");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/restart.bin", e->root);
	size_t got;
	unsigned char *back = slurp(p, &got);
	CHECK(t, back && got == N && memcmp(back, data, N) == 0, "the committed file is the original");
	free(back);
	unlink(p);

	/* A staging file that lost acknowledged bytes (a lying disk): the cursor moves back. */
	CHECK(t, open_upload(&v, "lossy.bin", (long long)N, sha, h, NULL) == 0, "another upload");
	CHECK(t, send_range(&v, h, data, 0, 2 * C, C) == 0, "two chunks in");
	sv_stop(&v);
	snprintf(p, sizeof p, "%s/uploads/%s.part", e->state, h);
	if (truncate(p, (off_t)C + 10) < 0)
		check_die("truncate");
	sv_start(&v, e);
	sc = call(&v, "file_transfer_write", write_args(h, (long long)(2 * C), data + 2 * C, C), &err);
	CHECK(t, err && strcmp(code_of(sc), "offset_mismatch") == 0 && cursor_of(sc) == (double)(C + 10),
	      "lost bytes: offset_mismatch at what survived");
	cJSON_Delete(sc);
	CHECK(t, send_range(&v, h, data, C + 10, N, C) == 0, "resend from there");
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "sha256"), sha) == 0, "and the sha256 still matches");
	cJSON_Delete(sc);

	/* Pipelined: a chunk and the commit in one turn, then a crash before the turn's journal
	 * commit.  The commit made its chunk records durable before publishing, so the upload
	 * is completed after the restart, and committing again answers the same sha256. */
	char s1000[65];
	blob_sha256_hex(data, 1000, s1000);
	CHECK(t, open_upload(&v, "torn.bin", 1000, NULL, h, NULL) == 0, "an upload to commit in a torn way");
	CHECK(t, send_range(&v, h, data, 0, 500, 500) == 0, "half of it acknowledged");
	sc = call_nocommit(&v, "file_transfer_write", write_args(h, 500, data + 500, 500), &err);
	CHECK(t, !err, "the second half, not committed yet");
	cJSON_Delete(sc);
	sc = call_nocommit(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "status"), "completed") == 0, "commit in the same turn");
	cJSON_Delete(sc);
	sv_stop(&v);   /* crash: the end record was never committed */
	sv_start(&v, e);
	sc = call(&v, "file_transfer_status", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "status"), "completed") == 0 && strcmp(str(sc, "sha256"), s1000) == 0 &&
	      num(sc, "nextOffset") == 1000, "after the crash: completed at 1000, never back to an older cursor");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "status"), "completed") == 0 && strcmp(str(sc, "sha256"), s1000) == 0,
	      "the commit retried after the crash: completed, the same sha256");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/uploads/%s.part", e->state, h);
	CHECK(t, access(p, F_OK) != 0, "and its staged bytes are gone");
	snprintf(p, sizeof p, "%s/torn.bin", e->root);
	back = slurp(p, &got);
	CHECK(t, back && got == 1000 && memcmp(back, data, 1000) == 0, "the published file is whole");
	free(back);

	/* Compaction keeps live transfers and tombstones. */
	CHECK(t, open_upload(&v, "compact.bin", 10, NULL, h, NULL) == 0, "an upload before compaction");
	CHECK(t, send_range(&v, h, data, 0, 4, 4) == 0, "four bytes");
	CHECK(t, persist_compact(v.s.persist) == 0, "compaction");
	sv_stop(&v);
	sv_start(&v, e);
	sc = call(&v, "file_transfer_status", h_args(h), &err);
	CHECK(t, !err && num(sc, "nextOffset") == 4, "after compaction and restart the upload is at 4");
	cJSON_Delete(sc);
	sv_stop(&v);
	free(data);
}

static void t_download(struct tally *t, struct env *e)
{
	struct sv v;
	char p[1600], sha[65], h[33];
	int err;
	size_t N = 1000000;
	unsigned char *data = malloc(N);
	fill(data, N, 3);
	blob_sha256_hex(data, N, sha);
	snprintf(p, sizeof p, "%s/down.bin", e->root);
	check_put(p, data, N);
	sv_start(&v, e);
	cJSON *sc = call(&v, "file_transfer_open", open_args("download", "down.bin", -1, NULL), &err);
	CHECK(t, !err && num(sc, "size") == (double)N && strcmp(str(sc, "sha256"), sha) == 0, "download opens with size and sha256");
	snprintf(h, sizeof h, "%s", str(sc, "handle"));
	cJSON_Delete(sc);
	unsigned char *buf = malloc(2 << 20);
	size_t bad = 0;
	/* ranges */
	long long ranges[][2] = { { 0, 1000 }, { 12345, 5000 }, { 999000, 5000 }, { 500000, 1048576 } };
	for (int i = 0; i < 4; i++) {
		sc = call(&v, "file_transfer_read", read_args(h, ranges[i][0], ranges[i][1]), &err);
		long long want = (long long)N - ranges[i][0] < ranges[i][1] ? (long long)N - ranges[i][0] : ranges[i][1];
		const char *d = str(sc, "data");
		ssize_t n = b64_decode(d, strlen(d), buf, &bad);
		char what[120];
		snprintf(what, sizeof what, "read %lld bytes at %lld: the right bytes", ranges[i][1], ranges[i][0]);
		CHECK(t, !err && n == want && num(sc, "bytes") == (double)want && memcmp(buf, data + ranges[i][0], (size_t)n) == 0, what);
		cJSON_Delete(sc);
	}
	/* sequential reads from 0 to eof */
	unsigned char *all = malloc(N);
	size_t off = 0;
	int eof = 0, steps = 0;
	char esha[65] = "";
	sc = call(&v, "file_transfer_read", read_args(h, 0, 1), &err);
	cJSON_Delete(sc);
	off = 1;
	all[0] = data[0];
	while (!eof && steps++ < 100) {
		sc = call(&v, "file_transfer_read", read_args(h, -1, -1), &err);
		const char *d = str(sc, "data");
		ssize_t n = b64_decode(d, strlen(d), all + off, &bad);
		if (err || n < 0 || num(sc, "offset") != (double)off)
			break;
		off += (size_t)n;
		eof = cJSON_IsTrue(cJSON_GetObjectItem(sc, "eof"));
		if (eof)
			snprintf(esha, sizeof esha, "%s", str(sc, "sha256"));
		cJSON_Delete(sc);
	}
	CHECK(t, eof && off == N && memcmp(all, data, N) == 0, "reads without offset continue where the last ended, up to eof");
	CHECK(t, strcmp(esha, sha) == 0, "eof carries the whole file's sha256");
	free(all);
	sc = call(&v, "file_transfer_read", read_args(h, (long long)N, 10), &err);
	CHECK(t, !err && num(sc, "bytes") == 0 && cJSON_IsTrue(cJSON_GetObjectItem(sc, "eof")), "read at the end: 0 bytes, eof");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_read", read_args(h, (long long)N + 1, 10), &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "read past the end: invalid_param");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_read", read_args(h, 0, (1 << 20) + 1), &err);
	CHECK(t, err && strcmp(code_of(sc), "chunk_too_large") == 0, "length over 1 MiB: chunk_too_large");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_write", write_args(h, 0, data, 10), &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "write with a download handle: invalid_param");
	cJSON_Delete(sc);

	/* the download handle survives a restart; a change to the file is caught */
	sv_stop(&v);
	sv_start(&v, e);
	sc = call(&v, "file_transfer_read", read_args(h, 100, 100), &err);
	const char *d = str(sc, "data");
	ssize_t n = b64_decode(d, strlen(d), buf, &bad);
	CHECK(t, !err && n == 100 && memcmp(buf, data + 100, 100) == 0, "a download handle works after a restart");
	cJSON_Delete(sc);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, "XYZ", 3, 10) != 3)
		check_die("modify");
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 1, 0 } };
	futimens(fd, ts);
	close(fd);
	sc = call(&v, "file_transfer_read", read_args(h, 0, 100), &err);
	CHECK(t, err && strcmp(code_of(sc), "checksum_mismatch") == 0 && strstr(hint_of(sc), "file_transfer_open") != NULL,
	      "the file changed under the download: checksum_mismatch, open again");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_open", open_args("download", "down.bin", -1, NULL), &err);
	CHECK(t, !err && strcmp(str(sc, "sha256"), sha) != 0, "following the hint: a new download with the new sha256");
	cJSON_Delete(sc);
	/* hard links are refused for downloads */
	char q[1600];
	snprintf(q, sizeof q, "%s/down-link.bin", e->root);
	check_link(p, q);
	sc = call(&v, "file_transfer_open", open_args("download", "down-link.bin", -1, NULL), &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "a file with two hard links is refused");
	cJSON_Delete(sc);
	unlink(q);
	free(buf);
	free(data);
	sv_stop(&v);
}

static void t_expiry(struct tally *t, struct env *e)
{
	struct sv v;
	char h[33], hc[33], p[1600];
	int err;
	sv_start(&v, e);
	CHECK(t, open_upload(&v, "expire.bin", 100, NULL, h, NULL) == 0, "an upload left idle");
	CHECK(t, send_range(&v, h, (const unsigned char *)"0123456789", 0, 10, 10) == 0, "ten bytes");
	CHECK(t, open_upload(&v, "expire2.bin", 1, NULL, hc, NULL) == 0, "an upload that completes");
	CHECK(t, send_range(&v, hc, (const unsigned char *)"x", 0, 1, 1) == 0, "one byte");
	cJSON *sc = call(&v, "file_transfer_commit", h_args(hc), &err);
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/uploads/%s.part", e->state, h);
	CHECK(t, access(p, F_OK) == 0, "its staging file exists");
	int64_t now = loop_wall_ms();
	CHECK(t, transfers_collect(v.s.transfers, now + 6LL * 86400000) == 0, "nothing expires within 7 days");
	CHECK(t, transfers_collect(v.s.transfers, now + 7LL * 86400000 + 1000) == 2, "both expire after 7 days");
	persist_commit(v.s.persist);
	CHECK(t, access(p, F_OK) != 0, "the staging file was deleted");
	snprintf(p, sizeof p, "%s/expire2.bin", e->root);
	CHECK(t, access(p, F_OK) == 0, "a committed file stays");
	sc = call(&v, "file_transfer_status", h_args(h), &err);
	CHECK(t, err && strcmp(code_of(sc), "transfer_expired") == 0, "an expired handle: transfer_expired");
	cJSON_Delete(sc);
	sv_stop(&v);
	sv_start(&v, e);
	sc = call(&v, "file_transfer_write", write_args(h, 10, (const unsigned char *)"x", 1), &err);
	CHECK(t, err && strcmp(code_of(sc), "transfer_expired") == 0, "still transfer_expired after a restart");
	cJSON_Delete(sc);
	transfers_collect(v.s.transfers, loop_wall_ms() + 15LL * 86400000);
	sc = call(&v, "file_transfer_write", write_args(h, 10, (const unsigned char *)"x", 1), &err);
	CHECK(t, err && strcmp(code_of(sc), "unknown_transfer") == 0, "much later: unknown_transfer");
	cJSON_Delete(sc);
	sv_stop(&v);
}

/* The strict base64 codec the chunks go through. */
static void t_b64(struct tally *t, struct env *e)
{
	unsigned char in[64], out[80];
	char enc[B64_ENCODED_SIZE(64)];
	size_t bad = 0;
	int ok = 1;
	(void)e;
	fill(in, sizeof in, 9);
	for (size_t n = 0; n <= sizeof in; n++) {
		size_t k = b64_encode(in, n, enc);
		ssize_t d = b64_decode(enc, k, out, &bad);
		if (d != (ssize_t)n || memcmp(in, out, n) != 0)
			ok = 0;
		/* without padding too */
		while (k && enc[k - 1] == '=')
			k--;
		d = b64_decode(enc, k, out, &bad);
		if (d != (ssize_t)n || memcmp(in, out, n) != 0)
			ok = 0;
	}
	CHECK(t, ok, "base64 round trips for 0..64 bytes, with and without padding");
	CHECK(t, b64_encode("foobar", 6, enc) == 8 && strcmp(enc, "Zm9vYmFy") == 0, "RFC 4648 vector foobar");
	const char *bads[] = { "Zg=", "Zh==", "Zm9=Zg==", "Z", "Zm9v YmFy", "Zm9v\nYmFy", "Zm9vYmF-", "Zg===" };
	int allbad = 1;
	for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++)
		if (b64_decode(bads[i], strlen(bads[i]), out, &bad) >= 0)
			allbad = 0;
	CHECK(t, allbad, "bad padding, stray bits, whitespace, URL alphabet and lone characters are refused");
	CHECK(t, b64_decode("Zm9v!mFy", 8, out, &bad) < 0 && bad == 4, "the first bad character's offset is reported");
}

/* More open transfers than may hold descriptors: the oldest are parked and come back on use. */
static void t_parking(struct tally *t, struct env *e)
{
	struct sv v;
	char first[33], h[33], p[1600], sha[65], dh[33];
	int err, okall = 1;
	unsigned char data[1000];
	fill(data, sizeof data, 5);
	blob_sha256_hex(data, sizeof data, sha);
	snprintf(p, sizeof p, "%s/park", e->root);
	check_mkdir(p);
	snprintf(p, sizeof p, "%s/park/src.bin", e->root);
	check_put(p, data, sizeof data);
	sv_start(&v, e);
	cJSON *sc = call(&v, "file_transfer_open", open_args("download", "park/src.bin", -1, NULL), &err);
	snprintf(dh, sizeof dh, "%s", str(sc, "handle"));
	cJSON_Delete(sc);
	CHECK(t, open_upload(&v, "park/first.bin", 1000, sha, first, NULL) == 0, "first upload opens");
	CHECK(t, send_range(&v, first, data, 0, 500, 500) == 0, "half of it");
	for (int i = 0; i < 100; i++) {
		char name[64];
		snprintf(name, sizeof name, "park/f%d.bin", i);
		if (open_upload(&v, name, 10, NULL, h, NULL) < 0)
			okall = 0;
	}
	CHECK(t, okall, "100 more uploads open");
	int fds = 0;
	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			fds++;
	CHECK(t, fds < 200, "descriptors stay bounded (at most 64 transfers hold them)");
	CHECK(t, send_range(&v, first, data, 500, 1000, 500) == 0, "the parked first upload takes the rest");
	sc = call(&v, "file_transfer_commit", h_args(first), &err);
	CHECK(t, !err && strcmp(str(sc, "sha256"), sha) == 0, "and commits with the right sha256 (hash rebuilt on unpark)");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_read", read_args(dh, 0, 1000), &err);
	CHECK(t, !err && num(sc, "bytes") == 1000, "the parked download reads again");
	cJSON_Delete(sc);
	sv_stop(&v);
}

/* A completed task inserted by hand, with a log and outputs. */
static struct task *fake_task(struct sv *v, const char *id, enum task_status st)
{
	struct task *t = task_alloc(id);
	t->tool_name = strdup("maker");
	t->args = cJSON_CreateObject();
	t->status = st;
	t->result = cJSON_Parse("{\"rows\":3,\"ok\":true}");
	t->created_ms = t->updated_ms = t->finished_ms = loop_wall_ms();
	t->expires_ms = t->finished_ms + 86400000;
	if (tasks_insert(v->s.tasks, t) < 0)
		check_die("tasks_insert");
	return t;
}

static void t_jobs_and_resources(struct tally *t, struct env *e)
{
	struct sv v;
	char h[33], p[1600], work[1200], q[1600];
	int err;
	sv_start(&v, e);
	const char *id = "0123456789abcdef0123456789abcdef";
	snprintf(work, sizeof work, "%s/tasks/%s/work", e->state, id);
	snprintf(p, sizeof p, "%s/tasks", e->state); check_mkdir(p);
	snprintf(p, sizeof p, "%s/tasks/%s", e->state, id); check_mkdir(p);
	check_mkdir(work);

	/* inputs */
	CHECK(t, open_upload(&v, "input.csv", 12, NULL, h, NULL) == 0, "upload of a job input");
	cJSON *schema = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"data\":{\"type\":\"string\","
	                            "\"format\":\"forkpoint-upload\"},\"other\":{\"type\":\"string\"}}}");
	cJSON *args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "data", h);
	cJSON_AddStringToObject(args, "other", h);
	cJSON *env = NULL;
	CHECK(t, inputs_prepare(v.s.transfers, schema, args, work, &env) == -1 && env &&
	      strcmp(str(env, "code"), "not_active") == 0 && strcmp(str(env, "param"), "data") == 0,
	      "an uncommitted upload as input: not_active naming the argument");
	cJSON_Delete(env);
	CHECK(t, send_range(&v, h, (const unsigned char *)"a,b\n1,2\n3,4\n", 0, 12, 12) == 0, "input bytes");
	cJSON *sc = call(&v, "file_transfer_commit", h_args(h), &err);
	cJSON_Delete(sc);
	CHECK(t, inputs_prepare(v.s.transfers, schema, args, work, &env) == 0, "a committed upload as input");
	snprintf(p, sizeof p, "%s/inputs/data/input.csv", work);
	CHECK(t, strcmp(str(args, "data"), p) == 0, "the argument now holds the path of the copy");
	CHECK(t, strcmp(str(args, "other"), h) == 0, "arguments without the format are left alone");
	struct stat st;
	CHECK(t, stat(p, &st) == 0 && (st.st_mode & 0777) == 0444 && st.st_size == 12, "the copy is read-only and whole");
	snprintf(q, sizeof q, "%s/outputs", work);
	CHECK(t, stat(q, &st) == 0 && S_ISDIR(st.st_mode), "outputs/ is created for the job");
	CHECK(t, inputs_prepare(v.s.transfers, schema, args, work, &env) == 0 && strcmp(str(args, "data"), p) == 0,
	      "preparing the same arguments again changes nothing");
	cJSON_Delete(args);
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "data", "input.csv");
	CHECK(t, inputs_prepare(v.s.transfers, schema, args, work, &env) == 0 && strcmp(str(args, "data"), p) == 0,
	      "a path inside the roots works as input too");
	cJSON_Delete(args);
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "data", "../outside/secret");
	CHECK(t, inputs_prepare(v.s.transfers, schema, args, work, &env) == -1 &&
	      strcmp(str(env, "code"), "invalid_param") == 0, "a path outside the roots is refused as input");
	cJSON_Delete(env);
	cJSON_Delete(args);

	/* artifacts */
	struct task *tk = fake_task(&v, id, TASK_COMPLETED);
	snprintf(p, sizeof p, "%s/outputs/report.txt", work); check_put(p, "hello report\n", 13);
	snprintf(p, sizeof p, "%s/outputs/image.png", work); check_put(p, "\x89PNG\r\n\x1a\n\0\0", 10);
	snprintf(p, sizeof p, "%s/outputs/with space.json", work); check_put(p, "{\"a\":1}", 7);
	snprintf(p, sizeof p, "%s/outputs/.hidden", work); check_put(p, "h", 1);
	snprintf(p, sizeof p, "%s/outputs/link", work); check_symlink("/etc/hostname", p);
	snprintf(p, sizeof p, "%s/outputs/subdir", work); check_mkdir(p);
	snprintf(p, sizeof p, "%s/outputs/hard1", work); check_put(p, "hh", 2);
	snprintf(q, sizeof q, "%s/outputs/hard2", work); check_link(p, q);
	snprintf(p, sizeof p, "%s/tasks/%s/output.log", e->state, id);
	static const char logtext[] = "line one\n\xff\xfe bad bytes\nline three\n";
	check_put(p, logtext, sizeof logtext - 1);
	cJSON *arts = artifacts_collect(v.s.transfers, tk, work);
	CHECK(t, cJSON_GetArraySize(arts) == 3, "three artifacts: links, hidden files and folders are left out");
	cJSON *a0 = cJSON_GetArrayItem(arts, 0);
	char rsha[65];
	blob_sha256_hex("\x89PNG\r\n\x1a\n\0\0", 10, rsha);
	CHECK(t, strcmp(str(a0, "name"), "image.png") == 0 && num(a0, "size") == 10 && strcmp(str(a0, "sha256"), rsha) == 0,
	      "sorted by name, with size and sha256");
	char uri[300];
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/with%%20space.json", id);
	CHECK(t, strcmp(str(cJSON_GetArrayItem(arts, 2), "uri"), uri) == 0, "names are percent-encoded in the URI");
	snprintf(p, sizeof p, "%s/outputs/report.txt", work);
	CHECK(t, stat(p, &st) == 0 && (st.st_mode & 0222) == 0, "artifacts are made read-only");
	cJSON_Delete(arts);

	/* artifact download through the transfer tools */
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/report.txt", id);
	sc = call(&v, "file_transfer_open", open_args("download", uri, -1, NULL), &err);
	char hd[33];
	snprintf(hd, sizeof hd, "%s", str(sc, "handle"));
	char s13[65];
	blob_sha256_hex("hello report\n", 13, s13);
	CHECK(t, !err && num(sc, "size") == 13 && strcmp(str(sc, "sha256"), s13) == 0, "an artifact opens for download by URI");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_read", read_args(hd, -1, -1), &err);
	CHECK(t, !err && strcmp(str(sc, "data"), "aGVsbG8gcmVwb3J0Cg==") == 0, "and reads back");
	cJSON_Delete(sc);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/link", id);
	sc = call(&v, "file_transfer_open", open_args("download", uri, -1, NULL), &err);
	CHECK(t, err && strcmp(code_of(sc), "not_found") == 0, "a symlink in outputs/ cannot be downloaded");
	cJSON_Delete(sc);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/result", id);
	sc = call(&v, "file_transfer_open", open_args("download", uri, -1, NULL), &err);
	CHECK(t, err && strcmp(code_of(sc), "not_found") == 0, "a small result is read, not downloaded");
	cJSON_Delete(sc);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/log", id);
	sc = call(&v, "file_transfer_open", open_args("download", uri, -1, NULL), &err);
	CHECK(t, err && strcmp(code_of(sc), "invalid_param") == 0, "a log URI is not a download");
	cJSON_Delete(sc);

	/* an artifact as input of another job */
	char work2[1300];
	snprintf(work2, sizeof work2, "%s/tasks/%s/work2", e->state, id);
	check_mkdir(work2);
	args = cJSON_CreateObject();
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/with%%20space.json", id);
	cJSON_AddStringToObject(args, "data", uri);
	CHECK(t, inputs_prepare(v.s.transfers, schema, args, work2, &env) == 0, "an artifact URI as input");
	snprintf(p, sizeof p, "%s/inputs/data/with space.json", work2);
	CHECK(t, strcmp(str(args, "data"), p) == 0 && access(p, R_OK) == 0, "placed under its decoded name");
	cJSON_Delete(args);
	cJSON_Delete(schema);

	/* resources */
	struct transfers *tr = v.s.transfers;
	int rpc = 0;
	const char *msg = NULL;
	cJSON *lst = resources_list(tr, NULL, &rpc, &msg);
	cJSON *res = cJSON_GetObjectItem(lst, "resources");
	CHECK(t, cJSON_GetArraySize(res) == 5, "resources/list: result, log and three artifacts");
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/result", id);
	CHECK(t, strcmp(str(cJSON_GetArrayItem(res, 0), "uri"), uri) == 0 &&
	      strcmp(str(cJSON_GetArrayItem(res, 0), "mimeType"), "application/json") == 0, "the result first, as JSON");
	CHECK(t, strcmp(str(cJSON_GetArrayItem(res, 1), "mimeType"), "text/plain") == 0 && num(cJSON_GetArrayItem(res, 1), "size") == (double)(sizeof logtext - 1),
	      "then the log, text/plain with its size");
	CHECK(t, !cJSON_GetObjectItem(lst, "nextCursor"), "no next page");
	cJSON_Delete(lst);
	cJSON *tpl = resources_templates(tr);
	CHECK(t, cJSON_GetArraySize(cJSON_GetObjectItem(tpl, "resourceTemplates")) == 3, "three resource templates");
	cJSON_Delete(tpl);

	cJSON *rd = resources_read(tr, uri, &rpc, &msg);
	cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rd, "contents"), 0);
	cJSON *val = c0 ? cJSON_Parse(str(c0, "text")) : NULL;
	CHECK(t, val && num(val, "rows") == 3, "resources/read of the result: its JSON");
	cJSON_Delete(val);
	cJSON_Delete(rd);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/log", id);
	rd = resources_read(tr, uri, &rpc, &msg);
	c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rd, "contents"), 0);
	CHECK(t, c0 && strstr(str(c0, "text"), "line three") && strstr(str(c0, "text"), "\xEF\xBF\xBD"),
	      "the log as text, invalid bytes replaced");
	cJSON_Delete(rd);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/image.png", id);
	rd = resources_read(tr, uri, &rpc, &msg);
	c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rd, "contents"), 0);
	CHECK(t, c0 && strcmp(str(c0, "blob"), "iVBORw0KGgoAAA==") == 0 && strcmp(str(c0, "mimeType"), "image/png") == 0,
	      "a binary artifact as a base64 blob");
	cJSON_Delete(rd);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/report.txt", id);
	rd = resources_read(tr, uri, &rpc, &msg);
	c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rd, "contents"), 0);
	CHECK(t, c0 && strcmp(str(c0, "text"), "hello report\n") == 0, "a text artifact as text");
	cJSON_Delete(rd);
	rd = resources_read(tr, "forkpoint://tasks/ffffffffffffffffffffffffffffffff/result", &rpc, &msg);
	CHECK(t, !rd && rpc == -32002, "unknown task: -32002");
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/nope.txt", id);
	rd = resources_read(tr, uri, &rpc, &msg);
	CHECK(t, !rd && rpc == -32002 && msg && strstr(msg, "nope.txt"), "unknown artifact: -32002 naming it");
	const char *malformed[] = { "http://x/y", "forkpoint://tasks/123/result", "forkpoint://tasks/0123456789abcdef0123456789abcdef/other",
	                            "forkpoint://tasks/0123456789abcdef0123456789abcdef/artifacts/../x",
	                            "forkpoint://tasks/0123456789abcdef0123456789abcdef/artifacts/a%2Fb" };
	int allbad = 1;
	for (int i = 0; i < 5; i++) {
		rd = resources_read(tr, malformed[i], &rpc, &msg);
		if (rd || rpc != -32602)
			allbad = 0;
		cJSON_Delete(rd);
	}
	CHECK(t, allbad, "malformed URIs: -32602");

	/* the result link */
	cJSON *link = resources_result_link(tk);
	cJSON *content = cJSON_GetObjectItem(link, "content");
	cJSON *l1 = cJSON_GetArrayItem(content, 1);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/result", id);
	CHECK(t, l1 && strcmp(str(l1, "type"), "resource_link") == 0 && strcmp(str(l1, "uri"), uri) == 0,
	      "result link: a resource_link block to the result");
	cJSON *scl = cJSON_GetObjectItem(link, "structuredContent");
	CHECK(t, strcmp(str(scl, "resultUri"), uri) == 0 && strstr(str(scl, "summary"), "rows") != NULL,
	      "and a summary naming the result's keys");
	cJSON_Delete(link);

	/* pagination: 120 more artifacts in a second task */
	const char *id2 = "fedcba9876543210fedcba9876543210";
	char w2[1000], pp[1100];
	snprintf(w2, sizeof w2, "%s/tasks/%s", e->state, id2); check_mkdir(w2);
	snprintf(w2, sizeof w2, "%s/tasks/%s/work", e->state, id2); check_mkdir(w2);
	snprintf(pp, sizeof pp, "%s/outputs", w2); check_mkdir(pp);
	for (int i = 0; i < 120; i++) {
		snprintf(pp, sizeof pp, "%s/outputs/f%03d.txt", w2, i);
		check_put(pp, "x", 1);
	}
	struct task *tk2 = fake_task(&v, id2, TASK_COMPLETED);
	arts = artifacts_collect(tr, tk2, w2);
	CHECK(t, cJSON_GetArraySize(arts) == ARTIFACTS_MAX_COUNT, "artifacts are bounded in number");
	cJSON_Delete(arts);
	int total = 0, pages = 0;
	cJSON *params = NULL;
	for (;;) {
		lst = resources_list(tr, params, &rpc, &msg);
		cJSON_Delete(params);
		params = NULL;
		if (!lst)
			break;
		pages++;
		total += cJSON_GetArraySize(cJSON_GetObjectItem(lst, "resources"));
		const cJSON *nc = cJSON_GetObjectItem(lst, "nextCursor");
		if (nc) {
			params = cJSON_CreateObject();
			cJSON_AddStringToObject(params, "cursor", nc->valuestring);
		}
		cJSON_Delete(lst);
		if (!params || pages > 10)
			break;
	}
	CHECK(t, pages == 2 && total == 5 + 1 + ARTIFACTS_MAX_COUNT, "resources/list pages through every resource once");
	params = cJSON_Parse("{\"cursor\":\"garbage\"}");
	lst = resources_list(tr, params, &rpc, &msg);
	CHECK(t, !lst && rpc == -32602, "an invalid cursor: -32602");
	cJSON_Delete(params);
	sv_stop(&v);
}

/* How fast is one upload through the tool calls in-process, and what fdatasync alone costs. */
static void t_speed(struct tally *t, struct env *e)
{
	struct sv v;
	char h[33], sha[65];
	size_t N = 16u << 20, C = 256u << 10;
	unsigned char *data = malloc(N);
	fill(data, N, 11);
	blob_sha256_hex(data, N, sha);
	sv_start(&v, e);
	CHECK(t, open_upload(&v, "speed.bin", (long long)N, sha, h, NULL) == 0, "16 MiB upload opens");
	double t0 = check_now();
	int ok = send_range(&v, h, data, 0, N, C) == 0;
	double t1 = check_now();
	int err;
	cJSON *sc = call(&v, "file_transfer_commit", h_args(h), &err);
	ok = ok && !err && strcmp(str(sc, "sha256"), sha) == 0;
	cJSON_Delete(sc);
	CHECK(t, ok, "16 MiB in 256 KiB chunks, committed with the right sha256");
	/* The baseline: the same bytes through base64 decode + sha256 alone. */
	char *enc = malloc(B64_ENCODED_SIZE(C));
	unsigned char *dec = malloc(C + 3);
	size_t bad;
	double t2 = check_now();
	for (size_t off = 0; off < N; off += C) {
		b64_encode(data + off, C, enc);
		b64_decode(enc, strlen(enc), dec, &bad);
	}
	blob_sha256_hex(data, N, sha);
	double t3 = check_now();
	/* fdatasync alone, per chunk, on the same file system */
	char p[1600];
	snprintf(p, sizeof p, "%s/sync.bin", e->root);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	double t4 = check_now();
	for (int i = 0; i < 16; i++) {
		if (pwrite(fd, data, C, (off_t)i * (off_t)C) < 0)
			break;
		fdatasync(fd);
	}
	double t5 = check_now();
	close(fd);
	printf("# upload through files_call: %.0f MiB/s; base64+sha256 alone: %.0f MiB/s; "
	       "pwrite+fdatasync of a 256 KiB chunk: %.2f ms\n", 16 / (t1 - t0), 16 / (t3 - t2), (t5 - t4) * 1000 / 16);
	free(enc);
	free(dec);
	free(data);
	sv_stop(&v);
}

/* Names that display as other names are not artifact names: C1 controls, bidi controls and
 * line separators, as raw UTF-8 and percent-encoded in a URI. */
static void t_names(struct tally *t, struct env *e)
{
	(void)e;
	struct artifacts_uri u;
	static const char *const bad[] = {
		"report\xe2\x80\xae" "fdp.exe", "a\xe2\x80\xaa" "b", "a\xe2\x80\x8f" "b", "a\xe2\x81\xa6" "b",
		"a\xe2\x81\xa9" "b", "a\xd8\x9c" "b", "a\xc2\x80" "b", "a\xc2\x9b" "b", "a\xe2\x80\xa8" "b", "a\x1b[2Jb",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECKF(t, !artifacts_name_ok(bad[i]), "name %zu accepted", i);
	CHECK(t, !artifacts_name_ok(bad[0]) && !artifacts_name_ok(bad[6]), "bidi overrides and C1 controls are refused in names");
	CHECK(t, artifacts_name_ok("caf\xc3\xa9 \xe2\x80\x94 \xe2\x80\xa6.txt") && artifacts_name_ok("\xc2\xa0" "x") &&
	      artifacts_name_ok("\xe2\x80\xaf" "x") && artifacts_name_ok("\xe2\x81\xaa" "x"),
	      "neighbouring characters (U+00A0, U+2014, U+2026, U+202F, U+206A) are fine");
	CHECK(t, artifacts_uri_parse(RES_SCHEME "tasks/0123456789abcdef0123456789abcdef/artifacts/r%E2%80%AEfdp.exe", &u) < 0 &&
	      artifacts_uri_parse(RES_SCHEME "tasks/0123456789abcdef0123456789abcdef/artifacts/a%C2%85b", &u) < 0 &&
	      artifacts_uri_parse(RES_SCHEME "tasks/0123456789abcdef0123456789abcdef/artifacts/a%00b", &u) < 0,
	      "URIs naming such artifacts (or a NUL) are refused");
	CHECK(t, artifacts_uri_parse(RES_SCHEME "tasks/0123456789abcdef0123456789abcdef/artifacts/caf%C3%A9.txt", &u) == 0 &&
	      strcmp(u.name, "caf\xc3\xa9.txt") == 0, "an encoded plain name still parses");
}

/* ---- hashing in the worker pool -------------------------------------------------------------- */

struct answer {
	int answered, dropped;
	cJSON *sc;          /* structuredContent */
	int is_error;
	int64_t at;         /* loop_now() when it came */
};

static void got_answer(void *ctx, cJSON *r)
{
	struct answer *a = ctx;
	a->answered++;
	a->at = loop_now();
	if (r) {
		a->sc = cJSON_DetachItemFromObject(r, "structuredContent");
		a->is_error = cJSON_IsTrue(cJSON_GetObjectItem(r, "isError"));
		cJSON_Delete(r);
	}
}

static void got_drop(void *ctx)
{
	((struct answer *)ctx)->dropped++;
}

/* A call that may answer later; waits (on the pool's completions, not a clock) for it. */
static cJSON *call_later(struct sv *v, const char *name, cJSON *args, struct answer *a, int wait)
{
	struct files_later later = { got_answer, got_drop, a };
	memset(a, 0, sizeof *a);
	cJSON *r = files_call_later(v->s.transfers, name, schema_of(v, name), args, &later);
	cJSON_Delete(args);
	if (r) {
		got_answer(a, r);
		return a->sc;
	}
	while (wait && !a->answered && workers_pending(v->s.workers))
		workers_wait(v->s.workers, 10000);
	persist_commit(v->s.persist);
	return a->sc;
}

static void sv_start_pool(struct sv *v, const struct env *e)
{
	sv_start_with(v, e, 1);
}

static void sv_stop_pool(struct sv *v)
{
	workers_free(v->s.workers);
	v->s.workers = NULL;
	sv_stop(v);
}

/* ---- where staged bytes live, cross-file-system commits, identities across a reboot ------- */

/* The identity transfer.c records for a folder (see fid_of there). */
static void folder_fid(const char *dir, uint64_t *dev, uint64_t *ino, uint64_t *fsid, char *fh)
{
	struct stat st;
	struct statfs sf;
	union { struct file_handle h; char b[sizeof(struct file_handle) + 128]; } u;
	int mnt, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0)
		check_die("folder_fid");
	uint32_t a, b;
	memcpy(&a, &sf.f_fsid, 4);
	memcpy(&b, (char *)&sf.f_fsid + 4, 4);
	*dev = (uint64_t)st.st_dev;
	*ino = (uint64_t)st.st_ino;
	*fsid = (uint64_t)a << 32 | b;
	fh[0] = 0;
	u.h.handle_bytes = 128;
	if (name_to_handle_at(fd, "", &u.h, &mnt, AT_EMPTY_PATH) == 0) {
		unsigned char tb[4];
		memcpy(tb, &u.h.handle_type, 4);
		char *o = fh;
		for (int i = 0; i < 4; i++)
			o += sprintf(o, "%02x", tb[i]);
		for (unsigned i = 0; i < u.h.handle_bytes; i++)
			o += sprintf(o, "%02x", u.h.f_handle[i]);
	}
	close(fd);
}

/* Journal an upload of `path` in progress with the given folder identity, as a server that
 * ran before a reboot would have (open record, one chunk, the staged bytes in uploads/). */
static void plant_upload(struct sv *v, const struct env *e, const char *h, const char *path,
                         const unsigned char *data, size_t n, uint64_t dev, uint64_t ino, uint64_t fsid,
                         const char *fh)
{
	char p[1600];
	struct frame_map r;
	frame_map_begin(&r, 12);
	frame_pack_kv_str(&r.pk, "h", h);
	frame_pack_kv_str(&r.pk, "dir", "upload");
	frame_pack_kv_str(&r.pk, "path", path);
	frame_pack_kv_int(&r.pk, "size", (int64_t)(2 * n));
	frame_pack_kv_str(&r.pk, "want", "");
	frame_pack_kv_int(&r.pk, "ow", 0);
	frame_pack_kv_int(&r.pk, "at", loop_wall_ms());
	frame_pack_kv_int(&r.pk, "dev", (int64_t)dev);
	frame_pack_kv_int(&r.pk, "ino", (int64_t)ino);
	frame_pack_kv_int(&r.pk, "fsid", (int64_t)fsid);
	frame_pack_kv_str(&r.pk, "fh", fh);
	frame_pack_kv_str(&r.pk, "sha", "");
	if (persist_append(v->s.persist, 64, r.sb.data, r.sb.size) < 0)
		check_die("persist_append");
	msgpack_sbuffer_destroy(&r.sb);
	frame_map_begin(&r, 4);
	frame_pack_kv_str(&r.pk, "h", h);
	frame_pack_kv_int(&r.pk, "off", 0);
	frame_pack_kv_int(&r.pk, "len", (int64_t)n);
	frame_pack_kv_int(&r.pk, "at", loop_wall_ms());
	if (persist_append(v->s.persist, 65, r.sb.data, r.sb.size) < 0 || persist_commit(v->s.persist) < 0)
		check_die("persist_append");
	msgpack_sbuffer_destroy(&r.sb);
	snprintf(p, sizeof p, "%s/uploads/%s.part", e->state, h);
	check_put(p, data, n);
}

static void t_identity(struct tally *t, struct env *e)
{
	static const struct { const char *what; int dev, ino, fsid, fh, resumes; } cases[] = {
		{ "the same folder, nothing renumbered", 0, 0, 0, 0, 1 },
		{ "another st_dev (a reboot), same inode and fsid: resumed", 1, 0, 0, 0, 1 },
		{ "another st_dev and fsid (fsid from the device), same file handle: resumed", 1, 0, 1, 0, 1 },
		{ "another inode (the folder was replaced): failed", 0, 1, 0, 0, 0 },
		{ "another st_dev, fsid and file handle: failed", 1, 0, 1, 1, 0 },
	};
	unsigned char data[4000];
	char base[500], path[1200], fh[300], h[33];
	uint64_t dev, ino, fsid;
	fill(data, sizeof data, 12);
	snprintf(base, sizeof base, "%.480s", e->state);
	folder_fid(e->root, &dev, &ino, &fsid, fh);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct env ei = *e;
		struct sv v;
		int err;
		snprintf(ei.state, sizeof ei.state, "%s/id%zu", base, i);
		check_mkdir(ei.state);
		snprintf(h, sizeof h, "%031zx%c", i, 'a');
		snprintf(path, sizeof path, "%s/ident%zu.bin", e->root, i);
		sv_start(&v, &ei);
		plant_upload(&v, &ei, h, path, data, 2000, cases[i].dev ? dev + 77 : dev, cases[i].ino ? ino + 1 : ino,
		             cases[i].fsid ? fsid ^ 0x5a5a : fsid, cases[i].fh ? "01000000ffff" : fh);
		sv_stop(&v);
		sv_start(&v, &ei);   /* the "reboot" */
		cJSON *sc = call(&v, "file_transfer_status", h_args(h), &err);
		int active = !err && strcmp(str(sc, "status"), "active") == 0 && num(sc, "nextOffset") == 2000;
		cJSON_Delete(sc);
		if (cases[i].resumes) {
			int sent = active && send_range(&v, h, data, 2000, 4000, 2000) == 0;
			sc = call(&v, "file_transfer_commit", h_args(h), &err);
			size_t got = 0;
			unsigned char *back = slurp(path, &got);
			CHECK(t, sent && !err && back && got == 4000 && memcmp(back, data, 4000) == 0, cases[i].what);
			free(back);
			cJSON_Delete(sc);
		} else {
			sc = call(&v, "file_transfer_status", h_args(h), &err);
			const cJSON *er = cJSON_GetObjectItem(sc, "error");
			CHECK(t, !err && strcmp(str(sc, "status"), "failed") == 0 && er &&
			      strstr(str(er, "message"), "replaced") != NULL, cases[i].what);
			cJSON_Delete(sc);
		}
		sv_stop(&v);
	}
}

/* No job-reachable staging: nothing of an upload is in the destination folder until the
 * commit, and a file planted at the reserved temporary name cannot take the upload's place. */
static void t_staging(struct tally *t, struct env *e)
{
	struct sv v;
	char h[33], p[1600], sha[65];
	unsigned char data[70000];
	int err;
	fill(data, sizeof data, 21);
	blob_sha256_hex(data, sizeof data, sha);
	sv_start(&v, e);
	CHECK(t, open_upload(&v, "staged.bin", (long long)sizeof data, sha, h, NULL) == 0, "an upload");
	CHECK(t, send_range(&v, h, data, 0, sizeof data, 65536) == 0, "its bytes");
	DIR *d = opendir(e->root);
	struct dirent *de;
	int seen = 0;
	while (d && (de = readdir(d)))
		seen |= strncmp(de->d_name, ".fp-upload-", 11) == 0 || strcmp(de->d_name, "staged.bin") == 0;
	if (d)
		closedir(d);
	snprintf(p, sizeof p, "%s/uploads/%s.part", e->state, h);
	struct stat st;
	CHECK(t, !seen && stat(p, &st) == 0 && st.st_size == (off_t)sizeof data && (st.st_mode & 0777) == 0600,
	      "the bytes are staged in the state dir, nothing in the file root");
	/* The job plants its own bytes at the names a commit might use. */
	snprintf(p, sizeof p, "%s/.fp-upload-%s.part", e->root, h);
	check_put(p, "job bytes", 9);
	snprintf(p, sizeof p, "%s/uploads/%s.part", e->state, h);
	cJSON *sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "sha256"), sha) == 0, "commit: completed");
	cJSON_Delete(sc);
	size_t got = 0;
	snprintf(p, sizeof p, "%s/staged.bin", e->root);
	unsigned char *back = slurp(p, &got);
	CHECK(t, back && got == sizeof data && memcmp(back, data, got) == 0 && stat(p, &st) == 0 && st.st_nlink == 1,
	      "the published file is the hashed bytes, with one link");
	free(back);

	/* overwrite goes through the reserved temporary name: a planted file there is replaced */
	cJSON *a = open_args("upload", "staged.bin", 5, NULL);
	cJSON_AddBoolToObject(a, "overwrite", 1);
	sc = call(&v, "file_transfer_open", a, &err);
	snprintf(h, sizeof h, "%s", str(sc, "handle"));
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/.fp-upload-%s.part", e->root, h);
	check_put(p, "job bytes", 9);
	CHECK(t, send_range(&v, h, (const unsigned char *)"fresh", 0, 5, 5) == 0, "an overwrite upload");
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err, "its commit");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/staged.bin", e->root);
	back = slurp(p, &got);
	CHECK(t, back && got == 5 && memcmp(back, "fresh", 5) == 0, "the overwrite holds the upload's bytes");
	free(back);
	snprintf(p, sizeof p, "%s/.fp-upload-%s.part", e->root, h);
	CHECK(t, access(p, F_OK) != 0, "and the temporary name is gone");
	sv_stop(&v);
}

/* The state dir on another file system than the root (tmpfs against the test's folder): the
 * commit copies from the hashed descriptor, syncs, verifies and links the copy. */
static void t_crossfs(struct tally *t, struct env *e)
{
	struct stat a, b;
	struct env ex = *e;
	snprintf(ex.state, sizeof ex.state, "/dev/shm/fp-xfs-XXXXXX");
	if (stat("/dev/shm", &a) < 0 || stat(e->root, &b) < 0 || a.st_dev == b.st_dev || !mkdtemp(ex.state)) {
		printf("# skip cross-file-system commit: /dev/shm is missing or on the root's file system\n");
		return;
	}
	struct sv v;
	char h[33], sha[65], p[1600];
	size_t N = 3 * 1048576 + 77;
	unsigned char *data = malloc(N);
	int err;
	fill(data, N, 5);
	blob_sha256_hex(data, N, sha);
	sv_start(&v, &ex);
	CHECK(t, open_upload(&v, "xfs.bin", (long long)N, sha, h, NULL) == 0, "cross-fs: an upload");
	CHECK(t, send_range(&v, h, data, 0, N, 1048576) == 0, "cross-fs: its bytes");
	cJSON *sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "sha256"), sha) == 0, "cross-fs: commit completed");
	cJSON_Delete(sc);
	snprintf(p, sizeof p, "%s/xfs.bin", e->root);
	size_t got = 0;
	unsigned char *back = slurp(p, &got);
	CHECK(t, back && got == N && memcmp(back, data, N) == 0 && stat(p, &a) == 0 && (a.st_mode & 0777) == 0600,
	      "cross-fs: the copy in place is whole, mode 0600");
	free(back);
	snprintf(p, sizeof p, "%s/uploads/%s.part", ex.state, h);
	CHECK(t, access(p, F_OK) != 0, "cross-fs: the staged bytes are removed");
	DIR *d = opendir(e->root);
	struct dirent *de;
	int left = 0;
	while (d && (de = readdir(d)))
		left |= strncmp(de->d_name, ".fp-upload-", 11) == 0 && strstr(de->d_name, h) != NULL;
	if (d)
		closedir(d);
	CHECK(t, !left, "cross-fs: no temporary file left in the root");
	sv_stop(&v);

	/* With a worker pool the copy is made there; the commit answers when it is in place. */
	sv_start_pool(&v, &ex);
	CHECK(t, open_upload(&v, "xfs2.bin", (long long)N, sha, h, NULL) == 0, "cross-fs with a pool: an upload");
	CHECK(t, send_range(&v, h, data, 0, N, 1048576) == 0, "cross-fs with a pool: its bytes");
	struct answer an;
	struct files_later later = { got_answer, got_drop, &an };
	memset(&an, 0, sizeof an);
	cJSON *args = h_args(h);
	cJSON *r = files_call_later(v.s.transfers, "file_transfer_commit", schema_of(&v, "file_transfer_commit"), args, &later);
	cJSON_Delete(args);
	CHECK(t, r == NULL && !an.answered, "cross-fs with a pool: the commit answers later");
	sc = call(&v, "file_transfer_write", write_args(h, (long long)N, data, 1), &err);
	CHECK(t, err && strcmp(code_of(sc), "not_active") == 0 && cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(sc, "error"), "retryable")),
	      "a write meanwhile: not_active, retryable (the commit is in progress)");
	cJSON_Delete(sc);
	while (!an.answered && workers_pending(v.s.workers))
		workers_wait(v.s.workers, 10000);
	CHECK(t, an.answered == 1 && !an.is_error && an.sc && strcmp(str(an.sc, "sha256"), sha) == 0,
	      "cross-fs with a pool: completed with the sha256");
	cJSON_Delete(an.sc);
	snprintf(p, sizeof p, "%s/xfs2.bin", e->root);
	back = slurp(p, &got);
	CHECK(t, back && got == N && memcmp(back, data, N) == 0, "cross-fs with a pool: the file is whole");
	free(back);
	sv_stop_pool(&v);
	free(data);
	check_rm_rf(ex.state);
}


static void t_async(struct tally *t, struct env *e)
{
	struct sv v;
	struct answer a, b;
	char p[1600], sha[65], h[33], hu[33];
	int err;
	snprintf(p, sizeof p, "%s/sparse.bin", e->root);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, 64 << 20) < 0 || pwrite(fd, "middle", 6, 32 << 20) != 6)
		check_die("sparse file");
	if (blob_sha256_fd(fd, 64 << 20, sha) < 0)
		check_die("sha");
	close(fd);
	sv_start_pool(&v, e);
	CHECK(t, open_upload(&v, "side.bin", 10, NULL, hu, NULL) == 0, "an upload to talk to meanwhile");

	/* The open answers later; other calls are answered at once meanwhile. */
	struct files_later later = { got_answer, got_drop, &a };
	memset(&a, 0, sizeof a);
	cJSON *args = open_args("download", "sparse.bin", -1, NULL);
	int64_t t0 = loop_now();
	cJSON *r = files_call_later(v.s.transfers, "file_transfer_open", schema_of(&v, "file_transfer_open"), args, &later);
	int64_t t1 = loop_now();
	cJSON_Delete(args);
	CHECK(t, r == NULL && !a.answered, "a 64 MiB download open is hashed in the pool: no answer yet");
	cJSON *sc = call(&v, "file_transfer_status", h_args(hu), &err);
	CHECK(t, !err && !a.answered, "another call is answered while the hash runs");
	cJSON_Delete(sc);
	while (!a.answered && workers_pending(v.s.workers))
		workers_wait(v.s.workers, 10000);
	CHECK(t, a.answered == 1 && !a.is_error && a.sc && strcmp(str(a.sc, "sha256"), sha) == 0 && num(a.sc, "size") == 64 << 20,
	      "the open's answer comes with the right sha256");
	printf("# download open of a 64 MiB sparse file: %lld ms on the loop, answered after %lld ms\n",
	       (long long)(t1 - t0), (long long)(a.at - t0));
	snprintf(h, sizeof h, "%s", str(a.sc, "handle"));
	cJSON_Delete(a.sc);
	persist_commit(v.s.persist);
	sc = call(&v, "file_transfer_read", read_args(h, 32 << 20, 6), &err);
	size_t n = 0;
	unsigned char dec[16];
	CHECK(t, !err && b64_decode(str(sc, "data"), strlen(str(sc, "data")), dec, &n) == 6 && memcmp(dec, "middle", 6) == 0,
	      "and reads come from the hashed descriptor");
	cJSON_Delete(sc);
	sv_stop_pool(&v);

	/* After a restart the first read verifies the file again, in the pool. */
	sv_start_pool(&v, e);
	sc = call_later(&v, "file_transfer_read", read_args(h, 32 << 20, 6), &a, 1);
	CHECK(t, a.answered == 1 && !a.is_error && sc && num(sc, "bytes") == 6, "a read after a restart: verified in the pool, then read");
	cJSON_Delete(sc);
	sv_stop_pool(&v);
	/* The same size, other bytes: the check after the restart finds it. */
	fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, "MIDDLE", 6, 32 << 20) != 6)
		check_die("rewrite");
	close(fd);
	sv_start_pool(&v, e);
	sc = call_later(&v, "file_transfer_read", read_args(h, 0, 6), &a, 1);
	CHECK(t, a.answered == 1 && a.is_error && strcmp(code_of(sc), "checksum_mismatch") == 0,
	      "a file changed while the server was down: checksum_mismatch after the hash");
	cJSON_Delete(sc);

	/* The pool stops with a hash queued: its caller is told by drop, exactly once. */
	for (int i = 0; i < 2; i++)
		workers_submit(v.s.workers, hold_run, hold_done, NULL);   /* both threads busy */
	memset(&b, 0, sizeof b);
	sc = call_later(&v, "file_transfer_open", open_args("download", "sparse.bin", -1, NULL), &b, 0);
	CHECK(t, sc == NULL && !b.answered, "an open waiting for its hash");
	workers_free(v.s.workers);
	v.s.workers = NULL;
	CHECK(t, b.dropped == 1 && !b.answered, "stopping the pool with the hash still queued drops the answer, once");
	cJSON_Delete(b.sc);
	sv_stop(&v);
	unlink(p);
}

/* Artifacts over 1 MiB are hashed in the pool; over server.artifactHashMaxBytes not at all.
 * The digest reaches the task's list and, through the journal, the next start. */
static void t_artifact_hash(struct tally *t, struct env *e)
{
	struct sv v;
	char work[1200], p[1600], sha[65];
	const char *id = "fedcba9876543210fedcba9876543210";
	sv_start_pool(&v, e);
	snprintf(p, sizeof p, "%s/tasks", e->state); check_mkdir(p);
	snprintf(p, sizeof p, "%s/tasks/%s", e->state, id); check_mkdir(p);
	snprintf(work, sizeof work, "%s/tasks/%s/work", e->state, id); check_mkdir(work);
	snprintf(p, sizeof p, "%s/outputs", work); check_mkdir(p);
	snprintf(p, sizeof p, "%s/outputs/big.bin", work);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, 48 << 20) < 0 || pwrite(fd, "x", 1, 1 << 20) != 1 || blob_sha256_fd(fd, 48 << 20, sha) < 0)
		check_die("big artifact");
	close(fd);
	snprintf(p, sizeof p, "%s/outputs/huge.bin", work);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, 96 << 20) < 0)
		check_die("huge artifact");
	close(fd);
	snprintf(p, sizeof p, "%s/outputs/small.txt", work); check_put(p, "small", 5);
	v.s.cfg->server.artifact_hash_max_bytes = 64 << 20;
	struct task *tk = fake_task(&v, id, TASK_COMPLETED);
	tk->tool = config_tool(v.s.cfg, "t");
	persist_created(v.s.persist, tk);
	int64_t t0 = loop_now();
	tk->artifacts = artifacts_collect(v.s.transfers, tk, work);
	int64_t t1 = loop_now();
	persist_finished(v.s.persist, tk);
	persist_commit(v.s.persist);
	const cJSON *big = cJSON_GetArrayItem(tk->artifacts, 0), *huge = cJSON_GetArrayItem(tk->artifacts, 1),
	            *small = cJSON_GetArrayItem(tk->artifacts, 2);
	CHECK(t, cJSON_GetArraySize(tk->artifacts) == 3 && strcmp(str(big, "sha256Status"), "pending") == 0 &&
	      !cJSON_GetObjectItem(big, "sha256"), "a 48 MiB artifact: listed at once, sha256Status pending");
	CHECK(t, strcmp(str(huge, "sha256Status"), "skipped") == 0 && num(huge, "size") == 96 << 20,
	      "over artifactHashMaxBytes: listed with its size, sha256Status skipped");
	CHECK(t, strlen(str(small, "sha256")) == 64, "a small one is hashed at once");
	printf("# collecting 48 + 96 MiB of sparse artifacts: %lld ms on the loop\n", (long long)(t1 - t0));
	while (workers_pending(v.s.workers))
		workers_wait(v.s.workers, 10000);
	CHECK(t, strcmp(str(big, "sha256"), sha) == 0 && !cJSON_GetObjectItem(big, "sha256Status"),
	      "when the pool is done, the list has its sha256");
	persist_commit(v.s.persist);
	sv_stop_pool(&v);
	sv_start(&v, e);
	tk = tasks_find(v.s.tasks, id);
	big = tk ? cJSON_GetArrayItem(tk->artifacts, 0) : NULL;
	CHECK(t, big && strcmp(str(big, "sha256"), sha) == 0, "the digest is journaled: there after a restart");
	sv_stop(&v);

	/* Read-only, as forkpoint show and ls replay it: no transfers table, the digest still lands. */
	char cfg[2000], err[512];
	memset(&v, 0, sizeof v);
	fplog_init(&v.s.log, 2, FPLOG_CRITICAL);
	snprintf(cfg, sizeof cfg, "{\"tools\":[{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\"},"
	         "\"command\":[\"/bin/true\"]}]}");
	if (config_parse(cfg, strlen(cfg), e->top, &v.s.cfg, err, sizeof err) < 0)
		check_die("config");
	v.s.state_dir = strdup(e->state);
	v.s.loop = loop_new();
	v.s.tasks = tasks_new(&v.s);
	CHECK(t, persist_open(&v.s, 1, &v.s.persist, err, sizeof err) == 0, "a read-only replay without transfers");
	tk = tasks_find(v.s.tasks, id);
	big = tk ? cJSON_GetArrayItem(tk->artifacts, 0) : NULL;
	CHECK(t, big && strcmp(str(big, "sha256"), sha) == 0, "the read-only replay has the digest too");
	persist_close(v.s.persist);
	tasks_free(v.s.tasks);
	loop_free(v.s.loop);
	config_free(v.s.cfg);
	free(v.s.state_dir);
}

/* With a worker pool, a chunk's staged bytes are synced there: the answer (and the journal
 * record) come when the sync is done, in order, and a pipelined client's chunks overlap. */
static void t_async_write(struct tally *t, struct env *e)
{
	struct sv v;
	struct answer a[4];
	char h[33], sha[65];
	unsigned char data[4 * 65536];
	int err;
	fill(data, sizeof data, 33);
	blob_sha256_hex(data, sizeof data, sha);
	sv_start_pool(&v, e);
	CHECK(t, open_upload(&v, "pipelined.bin", (long long)sizeof data, sha, h, NULL) == 0, "an upload, pool-synced");
	struct files_later later[4];
	int deferred = 1;
	for (int i = 0; i < 3; i++) {
		memset(&a[i], 0, sizeof a[i]);
		later[i] = (struct files_later){ got_answer, got_drop, &a[i] };
		cJSON *args = write_args(h, (long long)i * 65536, data + i * 65536, 65536);
		cJSON *r = files_call_later(v.s.transfers, "file_transfer_write", schema_of(&v, "file_transfer_write"), args,
		                               &later[i]);
		cJSON_Delete(args);
		deferred &= r == NULL;
		cJSON_Delete(r);
	}
	/* a repeat of the last chunk while it is still being synced: answered after it, as a duplicate */
	memset(&a[3], 0, sizeof a[3]);
	later[3] = (struct files_later){ got_answer, got_drop, &a[3] };
	cJSON *args = write_args(h, 2 * 65536, data + 2 * 65536, 65536);
	cJSON *r = files_call_later(v.s.transfers, "file_transfer_write", schema_of(&v, "file_transfer_write"), args, &later[3]);
	cJSON_Delete(args);
	CHECK(t, deferred && r == NULL, "three pipelined chunks and a repeat: answered later");
	while (workers_pending(v.s.workers))
		workers_wait(v.s.workers, 10000);
	int inorder = 1;
	for (int i = 0; i < 3; i++)
		inorder &= a[i].answered == 1 && !a[i].is_error && num(a[i].sc, "nextOffset") == (double)(i + 1) * 65536;
	CHECK(t, inorder, "each answered once, with its own nextOffset");
	CHECK(t, a[3].answered == 1 && cJSON_IsTrue(cJSON_GetObjectItem(a[3].sc, "duplicate")), "the repeat: a duplicate");
	for (int i = 0; i < 4; i++)
		cJSON_Delete(a[i].sc);
	persist_commit(v.s.persist);
	sv_stop_pool(&v);
	sv_start(&v, e);
	cJSON *sc = call(&v, "file_transfer_status", h_args(h), &err);
	CHECK(t, !err && num(sc, "nextOffset") == 3 * 65536, "the journal has all three chunks, in order");
	cJSON_Delete(sc);
	sv_stop(&v);

	/* A commit right behind a chunk still being synced: the commit's own sync covers it, the
	 * chunk is answered first. */
	sv_start_pool(&v, e);
	char h2[33], s5[65];
	blob_sha256_hex("abcde", 5, s5);
	CHECK(t, open_upload(&v, "behind.bin", 5, s5, h2, NULL) == 0, "an upload for a pipelined commit");
	memset(&a[0], 0, sizeof a[0]);
	later[0] = (struct files_later){ got_answer, got_drop, &a[0] };
	args = write_args(h2, 0, (const unsigned char *)"abcde", 5);
	r = files_call_later(v.s.transfers, "file_transfer_write", schema_of(&v, "file_transfer_write"), args, &later[0]);
	cJSON_Delete(args);
	sc = call(&v, "file_transfer_commit", h_args(h2), &err);
	CHECK(t, r == NULL && a[0].answered == 1 && !a[0].is_error && !err && strcmp(str(sc, "sha256"), s5) == 0,
	      "the chunk is answered before the commit, which completes");
	cJSON_Delete(sc);
	cJSON_Delete(a[0].sc);
	while (workers_pending(v.s.workers))
		workers_wait(v.s.workers, 10000);
	CHECK(t, a[0].answered == 1, "and only once, when its own sync finishes later");
	sv_stop_pool(&v);

	/* The pool stops with syncs queued: those chunks are not acknowledged, the cursor goes back. */
	sv_start_pool(&v, e);
	for (int i = 0; i < 2; i++)
		workers_submit(v.s.workers, hold_run, hold_done, NULL);
	memset(&a[0], 0, sizeof a[0]);
	later[0] = (struct files_later){ got_answer, got_drop, &a[0] };
	args = write_args(h, 3 * 65536, data + 3 * 65536, 65536);
	r = files_call_later(v.s.transfers, "file_transfer_write", schema_of(&v, "file_transfer_write"), args, &later[0]);
	cJSON_Delete(args);
	CHECK(t, r == NULL, "a chunk waiting for its sync");
	sc = call(&v, "file_transfer_status", h_args(h), &err);
	CHECK(t, !err && num(sc, "nextOffset") == 3 * 65536, "status meanwhile: the acknowledged offset only");
	cJSON_Delete(sc);
	workers_free(v.s.workers);
	v.s.workers = NULL;
	CHECK(t, a[0].dropped == 1 && !a[0].answered, "stopping drops its answer");
	sc = call(&v, "file_transfer_write", write_args(h, 3 * 65536, data + 3 * 65536, 65536), &err);
	CHECK(t, !err && num(sc, "nextOffset") == 4 * 65536, "the chunk is accepted again at the old cursor");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "sha256"), sha) == 0, "and the commit's sha256 matches (hash rebuilt)");
	cJSON_Delete(sc);
	sv_stop(&v);
}

/* After a restart a large staged upload's hash is rebuilt in the pool: status answers at once,
 * a write waits for the hash and then goes in, and the commit's sha256 is right. */
static void t_rehash(struct tally *t, struct env *e)
{
	struct sv v;
	struct answer a;
	char h[33], sha[65];
	size_t N = 3 * 1048576 + 11;
	unsigned char *data = malloc(N);
	int err;
	fill(data, N, 44);
	blob_sha256_hex(data, N, sha);
	sv_start(&v, e);
	CHECK(t, open_upload(&v, "rehash.bin", (long long)N, sha, h, NULL) == 0, "an upload to restart");
	CHECK(t, send_range(&v, h, data, 0, 2 * 1048576, 1048576) == 0, "2 MiB of it");
	sv_stop(&v);
	sv_start_with(&v, e, 2);   /* the rehash waits behind two held threads */
	cJSON *sc = call(&v, "file_transfer_status", h_args(h), &err);
	CHECK(t, !err && num(sc, "nextOffset") == 2 * 1048576, "status after the restart answers at once");
	cJSON_Delete(sc);
	sc = call(&v, "file_transfer_write", write_args(h, 2 * 1048576, data + 2 * 1048576, 1048576), &err);
	CHECK(t, err && strcmp(code_of(sc), "not_active") == 0 && cursor_of(sc) == 2 * 1048576,
	      "a write that cannot wait: not_active, retryable, with the cursor");
	cJSON_Delete(sc);
	sc = call_later(&v, "file_transfer_write", write_args(h, 2 * 1048576, data + 2 * 1048576, 1048576), &a, 0);
	CHECK(t, !sc && !a.answered, "a write that can wait waits for the hash");
	atomic_store(&v.gate, 1);
	while (!a.answered && workers_pending(v.s.workers))
		workers_wait(v.s.workers, 10000);
	sc = a.sc;
	CHECK(t, a.answered == 1 && !a.is_error && num(sc, "nextOffset") == 3 * 1048576,
	      "a write after the restart is answered once the hash is rebuilt");
	cJSON_Delete(sc);
	CHECK(t, send_range(&v, h, data, 3 * 1048576, N, 1048576) == 0, "the rest");
	sc = call(&v, "file_transfer_commit", h_args(h), &err);
	CHECK(t, !err && strcmp(str(sc, "sha256"), sha) == 0, "the commit's sha256: the hash was rebuilt right");
	cJSON_Delete(sc);
	sv_stop_pool(&v);
	free(data);
}

int main(void)
{
	struct tally t = { 0, 0 };
	struct env e;
	check_tmpdir(e.top, sizeof e.top, "transfer");
	snprintf(e.root, sizeof e.root, "%s/root", e.top);
	snprintf(e.out, sizeof e.out, "%s/outside", e.top);
	check_mkdir(e.root);
	check_mkdir(e.out);
	/* Each part gets a state dir of its own; they share the root. */
	void (*parts[])(struct tally *, struct env *) = { t_names, t_async, t_async_write, t_rehash, t_artifact_hash, t_identity, t_staging, t_crossfs, t_b64, t_upload_basics, t_paths, t_restart, t_download,
	                                                   t_expiry, t_parking, t_jobs_and_resources, t_speed };
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		snprintf(e.state, sizeof e.state, "%s/state%zu", e.top, i);
		check_mkdir(e.state);
		parts[i](&t, &e);
	}
	if (!getenv("KEEP_TEST_DIRS"))
		check_rm_rf(e.top);
	return check_done(&t);
}
