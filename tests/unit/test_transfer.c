/* tests/unit/test_transfer.c — file transfers (supervisor/transfer.c) and task resources
 * (supervisor/resources.c), driven through transfer_call() with the tools' own input schemas
 * on a supervisor built by hand (loop, config, task table, journal in a temp state dir).
 *
 * Uploads: wrong offsets, a repeated chunk, a racing duplicate (same and different bytes),
 * invalid base64, oversized chunks, size and sha256 mismatches with every recoveryHint
 * followed, an existing destination, a folder swapped for a symlink mid-upload, path escapes;
 * a restart mid-upload (journal replayed by a second instance, unacknowledged staged bytes
 * cut, hash rebuilt once) then resume and commit with the right sha256; a lost handle found
 * again by opening the same path; compaction.  Downloads: ranges, sequential reads to eof,
 * whole-file sha256, a file changed under an open download.  Expiry and staging cleanup.
 * Files into jobs (transfer_prepare_args), artifacts, resources/list (with pagination),
 * templates, resources/read, the result link.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "transfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b64.h"
#include "blob.h"
#include "config.h"
#include "persist.h"
#include "resources.h"
#include "tasks.h"

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
};

static void sv_start(struct sv *v, const struct env *e)
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
	if (!v->s.loop || !v->s.tasks || !v->s.transfers)
		check_die("setup");
	if (persist_open(&v->s, 0, &v->s.persist, err, sizeof err) < 0) {
		fprintf(stderr, "persist_open: %s\n", err);
		exit(2);
	}
	transfers_recover(v->s.transfers);
	v->tools = cJSON_CreateArray();
	transfer_list_tools(v->tools);
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
	cJSON *r = transfer_call(v->s.transfers, name, schema_of(v, name), args);
	cJSON_Delete(args);
	if (!r)
		check_die("transfer_call returned NULL");
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
	snprintf(p, sizeof p, "%s/up/.fp-upload-%s.part", e->root, h);
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
	snprintf(p, sizeof p, "%s/up/.fp-upload-%s.part", e->root, h);
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
	snprintf(p, sizeof p, "%s/.fp-upload-%s.part", e->root, h);
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
	snprintf(p, sizeof p, "%s/.fp-upload-%s.part", e->root, h);
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

	/* A crash between the rename and the journal record of the commit. */
	CHECK(t, open_upload(&v, "torn.bin", 1000, NULL, h, NULL) == 0, "an upload to commit in a torn way");
	CHECK(t, send_range(&v, h, data, 0, 1000, 1000) == 0, "its bytes");
	sv_stop(&v);
	char from[1600], to[1600];
	snprintf(from, sizeof from, "%s/.fp-upload-%s.part", e->root, h);
	snprintf(to, sizeof to, "%s/torn.bin", e->root);
	rename(from, to);
	sv_start(&v, e);
	sc = call(&v, "file_transfer_status", h_args(h), &err);
	char s1000[65];
	blob_sha256_hex(data, 1000, s1000);
	CHECK(t, !err && strcmp(str(sc, "status"), "completed") == 0 && strcmp(str(sc, "sha256"), s1000) == 0,
	      "a commit cut short by a crash is recognised as committed");
	cJSON_Delete(sc);

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
	snprintf(p, sizeof p, "%s/.fp-upload-%s.part", e->root, h);
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
	CHECK(t, transfer_prepare_args(v.s.transfers, schema, args, work, &env) == -1 && env &&
	      strcmp(str(env, "code"), "not_active") == 0 && strcmp(str(env, "param"), "data") == 0,
	      "an uncommitted upload as input: not_active naming the argument");
	cJSON_Delete(env);
	CHECK(t, send_range(&v, h, (const unsigned char *)"a,b\n1,2\n3,4\n", 0, 12, 12) == 0, "input bytes");
	cJSON *sc = call(&v, "file_transfer_commit", h_args(h), &err);
	cJSON_Delete(sc);
	CHECK(t, transfer_prepare_args(v.s.transfers, schema, args, work, &env) == 0, "a committed upload as input");
	snprintf(p, sizeof p, "%s/inputs/data/input.csv", work);
	CHECK(t, strcmp(str(args, "data"), p) == 0, "the argument now holds the path of the copy");
	CHECK(t, strcmp(str(args, "other"), h) == 0, "arguments without the format are left alone");
	struct stat st;
	CHECK(t, stat(p, &st) == 0 && (st.st_mode & 0777) == 0444 && st.st_size == 12, "the copy is read-only and whole");
	snprintf(q, sizeof q, "%s/outputs", work);
	CHECK(t, stat(q, &st) == 0 && S_ISDIR(st.st_mode), "outputs/ is created for the job");
	CHECK(t, transfer_prepare_args(v.s.transfers, schema, args, work, &env) == 0 && strcmp(str(args, "data"), p) == 0,
	      "preparing the same arguments again changes nothing");
	cJSON_Delete(args);
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "data", "input.csv");
	CHECK(t, transfer_prepare_args(v.s.transfers, schema, args, work, &env) == 0 && strcmp(str(args, "data"), p) == 0,
	      "a path inside the roots works as input too");
	cJSON_Delete(args);
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "data", "../outside/secret");
	CHECK(t, transfer_prepare_args(v.s.transfers, schema, args, work, &env) == -1 &&
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
	cJSON *arts = transfer_collect_artifacts(v.s.transfers, tk, work);
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
	CHECK(t, transfer_prepare_args(v.s.transfers, schema, args, work2, &env) == 0, "an artifact URI as input");
	snprintf(p, sizeof p, "%s/inputs/data/with space.json", work2);
	CHECK(t, strcmp(str(args, "data"), p) == 0 && access(p, R_OK) == 0, "placed under its decoded name");
	cJSON_Delete(args);
	cJSON_Delete(schema);

	/* resources */
	struct transfers *tr = v.s.transfers;
	int rpc = 0;
	const char *msg = NULL;
	cJSON *lst = transfer_resources_list(tr, NULL, &rpc, &msg);
	cJSON *res = cJSON_GetObjectItem(lst, "resources");
	CHECK(t, cJSON_GetArraySize(res) == 5, "resources/list: result, log and three artifacts");
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/result", id);
	CHECK(t, strcmp(str(cJSON_GetArrayItem(res, 0), "uri"), uri) == 0 &&
	      strcmp(str(cJSON_GetArrayItem(res, 0), "mimeType"), "application/json") == 0, "the result first, as JSON");
	CHECK(t, strcmp(str(cJSON_GetArrayItem(res, 1), "mimeType"), "text/plain") == 0 && num(cJSON_GetArrayItem(res, 1), "size") == (double)(sizeof logtext - 1),
	      "then the log, text/plain with its size");
	CHECK(t, !cJSON_GetObjectItem(lst, "nextCursor"), "no next page");
	cJSON_Delete(lst);
	cJSON *tpl = transfer_resource_templates(tr);
	CHECK(t, cJSON_GetArraySize(cJSON_GetObjectItem(tpl, "resourceTemplates")) == 3, "three resource templates");
	cJSON_Delete(tpl);

	cJSON *rd = transfer_resource_read(tr, uri, &rpc, &msg);
	cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rd, "contents"), 0);
	cJSON *val = c0 ? cJSON_Parse(str(c0, "text")) : NULL;
	CHECK(t, val && num(val, "rows") == 3, "resources/read of the result: its JSON");
	cJSON_Delete(val);
	cJSON_Delete(rd);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/log", id);
	rd = transfer_resource_read(tr, uri, &rpc, &msg);
	c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rd, "contents"), 0);
	CHECK(t, c0 && strstr(str(c0, "text"), "line three") && strstr(str(c0, "text"), "\xEF\xBF\xBD"),
	      "the log as text, invalid bytes replaced");
	cJSON_Delete(rd);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/image.png", id);
	rd = transfer_resource_read(tr, uri, &rpc, &msg);
	c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rd, "contents"), 0);
	CHECK(t, c0 && strcmp(str(c0, "blob"), "iVBORw0KGgoAAA==") == 0 && strcmp(str(c0, "mimeType"), "image/png") == 0,
	      "a binary artifact as a base64 blob");
	cJSON_Delete(rd);
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/report.txt", id);
	rd = transfer_resource_read(tr, uri, &rpc, &msg);
	c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(rd, "contents"), 0);
	CHECK(t, c0 && strcmp(str(c0, "text"), "hello report\n") == 0, "a text artifact as text");
	cJSON_Delete(rd);
	rd = transfer_resource_read(tr, "forkpoint://tasks/ffffffffffffffffffffffffffffffff/result", &rpc, &msg);
	CHECK(t, !rd && rpc == -32002, "unknown task: -32002");
	snprintf(uri, sizeof uri, "forkpoint://tasks/%s/artifacts/nope.txt", id);
	rd = transfer_resource_read(tr, uri, &rpc, &msg);
	CHECK(t, !rd && rpc == -32002 && msg && strstr(msg, "nope.txt"), "unknown artifact: -32002 naming it");
	const char *malformed[] = { "http://x/y", "forkpoint://tasks/123/result", "forkpoint://tasks/0123456789abcdef0123456789abcdef/other",
	                            "forkpoint://tasks/0123456789abcdef0123456789abcdef/artifacts/../x",
	                            "forkpoint://tasks/0123456789abcdef0123456789abcdef/artifacts/a%2Fb" };
	int allbad = 1;
	for (int i = 0; i < 5; i++) {
		rd = transfer_resource_read(tr, malformed[i], &rpc, &msg);
		if (rd || rpc != -32602)
			allbad = 0;
		cJSON_Delete(rd);
	}
	CHECK(t, allbad, "malformed URIs: -32602");

	/* the result link */
	cJSON *link = transfer_result_link(tr, tk);
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
	arts = transfer_collect_artifacts(tr, tk2, w2);
	CHECK(t, cJSON_GetArraySize(arts) == ARTIFACTS_MAX_COUNT, "artifacts are bounded in number");
	cJSON_Delete(arts);
	int total = 0, pages = 0;
	cJSON *params = NULL;
	for (;;) {
		lst = transfer_resources_list(tr, params, &rpc, &msg);
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
	lst = transfer_resources_list(tr, params, &rpc, &msg);
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
	printf("# upload through transfer_call: %.0f MiB/s; base64+sha256 alone: %.0f MiB/s; "
	       "pwrite+fdatasync of a 256 KiB chunk: %.2f ms\n", 16 / (t1 - t0), 16 / (t3 - t2), (t5 - t4) * 1000 / 16);
	free(enc);
	free(dec);
	free(data);
	sv_stop(&v);
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
	void (*parts[])(struct tally *, struct env *) = { t_b64, t_upload_basics, t_paths, t_restart, t_download,
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
