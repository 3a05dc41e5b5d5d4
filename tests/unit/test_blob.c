/* tests/unit/test_blob.c — the blob store interface (state/blob.h): the same cases run over the
 * file-system backend and the in-memory one (put/get/open/size/exists, identical content stored
 * once, names that could escape the store refused, remove, gc with a keep list, write from a
 * worker and blobs_added, faults at each step, the byte count).  Then what only the file
 * system has: the layout and modes on disk, damaged and truncated blob files, leftover temp
 * files and foreign files under gc, counting at open, blobs/ that is a file, read-only.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "state/blob.h"
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One backend under test: how to open a fresh store, and its state dir (file system only). */
struct backend {
	const char *name;
	int fs;                     /* the file system (in state), else memory */
	char state[256];
	struct blobs *b;
};

static void blob_file(char *buf, size_t len, const char *state, const char *hex)
{
	snprintf(buf, len, "%s/blobs/%.2s/%s", state, hex, hex);
}

/* Regular files anywhere under <state>/blobs. */
static int count_files(const char *state)
{
	char top[300], sub[600];
	struct dirent *e, *f;
	DIR *d, *d2;
	int n = 0;

	snprintf(top, sizeof top, "%s/blobs", state);
	d = opendir(top);
	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof sub, "%s/%s", top, e->d_name);
		d2 = opendir(sub);
		if (d2 == NULL)
			continue;
		while ((f = readdir(d2)) != NULL) {
			if (strcmp(f->d_name, ".") != 0 && strcmp(f->d_name, "..") != 0)
				n++;
		}
		closedir(d2);
	}
	closedir(d);
	return n;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A fresh, empty store of the backend's kind. */
static void be_open(struct backend *be)
{
	int rc;
	if (be->fs) {
		if (be->state[0])
			check_rm_rf(be->state);
		check_tmpdir(be->state, sizeof be->state, "blob");
		rc = blob_fs_new(be->state, 0, &be->b);
	} else {
		rc = blob_mem_new(&be->b);
	}
	if (rc < 0)
		check_die("open the blob store");
}

static uint64_t bytes_of(const struct blobs *b)
{
	struct blob_stats st;
	blobs_stats(b, &st);
	return st.bytes;
}

/* "<backend>: what" for CHECK. */
static const char *say(const struct backend *be, const char *what)
{
	static char buf[300];
	snprintf(buf, sizeof buf, "%s: %s", be->name, what);
	return buf;
}

static void test_sha256(struct tally *t)
{
	char hex[BLOB_HEX_LEN + 1];

	blob_sha256_hex("abc", 3, hex);
	CHECK(t, strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
	      "sha256(\"abc\") (FIPS 180-2 vector)");
	blob_sha256_hex("", 0, hex);
	CHECK(t, strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
	      "sha256 of nothing");
}

/* put / get / exists / size, dedupe, the empty and a large blob. */
static void suite_put_get(struct tally *t, struct backend *be)
{
	char hex[BLOB_HEX_LEN + 1], hex2[BLOB_HEX_LEN + 1], want[BLOB_HEX_LEN + 1];
	const char msg[] = "checkpoint: section 3 of 7";
	struct blobs *b = be->b;
	void *data = NULL;
	size_t len = 0;
	uint64_t size = 0;
	int added = -1;

	CHECK(t, blobs_put(b, msg, sizeof msg - 1, hex, &added) == 0 && strlen(hex) == BLOB_HEX_LEN && added == 1,
	      say(be, "put returns the 64-hex name"));
	blob_sha256_hex(msg, sizeof msg - 1, want);
	CHECK(t, strcmp(hex, want) == 0, say(be, "the name is the sha256 of the content"));
	CHECK(t, blobs_exists(b, hex) == 1, say(be, "exists: 1 for a stored blob"));
	CHECK(t, blobs_size(b, hex, &size) == 0 && size == sizeof msg - 1, say(be, "size"));
	CHECK(t, blobs_get(b, hex, &data, &len) == 0 && len == sizeof msg - 1 && memcmp(data, msg, len) == 0,
	      say(be, "get returns the content"));
	free(data);
	data = NULL;
	CHECK(t, blobs_put(b, msg, sizeof msg - 1, hex2, &added) == 0 && strcmp(hex, hex2) == 0 && added == 0,
	      say(be, "the same content again: the same name, nothing added"));

	CHECK(t, blobs_put(b, NULL, 0, hex2, NULL) == 0 &&
	         strcmp(hex2, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
	      say(be, "an empty blob can be stored"));
	CHECK(t, blobs_get(b, hex2, &data, &len) == 0 && len == 0 && data != NULL,
	      say(be, "... and read back (non-NULL, zero length)"));
	free(data);
	data = NULL;

	size_t big = 3u << 20;
	unsigned char *buf = malloc(big);
	if (buf == NULL)
		check_die("malloc");
	for (size_t i = 0; i < big; i++)
		buf[i] = (unsigned char)(i * 31 + (i >> 9));
	CHECK(t, blobs_put(b, buf, big, hex2, NULL) == 0, say(be, "put a 3 MiB blob"));
	CHECK(t, blobs_get(b, hex2, &data, &len) == 0 && len == big && memcmp(data, buf, big) == 0,
	      say(be, "get it back intact"));
	free(data);
	free(buf);
	CHECK(t, blobs_put(b, NULL, 3, hex2, NULL) == -EINVAL, say(be, "put of NULL bytes: -EINVAL"));
}

/* Names that are not blob names never reach the backend; missing blobs are -ENOENT. */
static void suite_names(struct tally *t, struct backend *be)
{
	static const char missing[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	struct blobs *b = be->b;
	void *data = NULL;
	size_t len;
	uint64_t size;
	int fd = 7;

	CHECK(t, blobs_get(b, "../../etc/passwd", &data, &len) == -EINVAL, say(be, "get refuses a path as a name"));
	CHECK(t, blobs_get(b, "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", &data, &len) == -EINVAL,
	      say(be, "get refuses uppercase hex"));
	CHECK(t, blobs_exists(b, "abc") == 0 && blobs_exists(b, NULL) == 0, say(be, "exists is 0 for malformed names"));
	CHECK(t, blobs_open(b, "../x", &fd, &size) == -EINVAL && fd == -1 && blobs_size(b, "", &size) == -EINVAL,
	      say(be, "open and size refuse malformed names"));
	CHECK(t, blobs_remove(b, "../../etc/passwd") == -EINVAL, say(be, "remove refuses a name that is not a blob"));
	CHECK(t, blobs_exists(b, missing) == 0, say(be, "exists is 0 for a blob never stored"));
	CHECK(t, blobs_get(b, missing, &data, &len) == -ENOENT && data == NULL, say(be, "get of a missing blob: -ENOENT"));
	CHECK(t, blobs_size(b, missing, &size) == -ENOENT && blobs_open(b, missing, &fd, &size) == -ENOENT && fd == -1,
	      say(be, "size and open of a missing blob: -ENOENT"));
	CHECK(t, blobs_get(NULL, missing, &data, &len) == -ENOENT && blobs_exists(NULL, missing) == 0,
	      say(be, "a NULL store holds nothing"));
}

/* open gives an fd at offset 0 with the whole content; the size comes with it. */
static void suite_open(struct tally *t, struct backend *be)
{
	char hex[BLOB_HEX_LEN + 1], got[BLOB_HEX_LEN + 1];
	uint64_t size = 0;
	int fd = -1;

	if (blobs_put(be->b, "streamed bytes", 14, hex, NULL) < 0)
		check_die("put");
	CHECK(t, blobs_open(be->b, hex, &fd, &size) == 0 && fd >= 0 && size == 14, say(be, "open gives an fd and the size"));
	CHECK(t, fd >= 0 && read(fd, got, sizeof got) == 14 && memcmp(got, "streamed bytes", 14) == 0,
	      say(be, "the fd reads the content from the start"));
	CHECK(t, fd >= 0 && blob_sha256_fd(fd, size, got) == 0 && strcmp(got, hex) == 0,
	      say(be, "the fd's content hashes to the name"));
	if (fd >= 0)
		close(fd);
}

/* The byte count: put counts new content only, write leaves it to blobs_added, remove and gc
 * take it down. */
static void suite_stats(struct tally *t, struct backend *be)
{
	char hex[BLOB_HEX_LEN + 1], hex2[BLOB_HEX_LEN + 1];
	struct blobs *b = be->b;
	int added = -1;

	CHECK(t, bytes_of(b) == 0, say(be, "an empty store holds 0 bytes"));
	CHECK(t, blobs_put(b, "hello", 5, hex, &added) == 0 && added == 1 && bytes_of(b) == 5, say(be, "put counts its bytes"));
	CHECK(t, blobs_put(b, "hello", 5, hex, &added) == 0 && added == 0 && bytes_of(b) == 5,
	      say(be, "the same content again adds nothing"));
	CHECK(t, blobs_write(b, "world!", 6, hex2, &added) == 0 && added == 1 && bytes_of(b) == 5 && blobs_exists(b, hex2),
	      say(be, "write stores the blob and leaves the count alone"));
	blobs_added(b, 6);
	CHECK(t, bytes_of(b) == 11, say(be, "blobs_added counts it"));
	CHECK(t, blobs_write(b, "world!", 6, hex2, &added) == 0 && added == 0, say(be, "write of stored content: added 0"));
	CHECK(t, blobs_remove(b, hex) == 0 && bytes_of(b) == 6 && !blobs_exists(b, hex), say(be, "remove"));
	CHECK(t, blobs_remove(b, hex) == 0 && bytes_of(b) == 6, say(be, "removing a removed blob is fine"));
	CHECK(t, blobs_gc(b, NULL, 0, NULL) == 0 && bytes_of(b) == 0 && !blobs_exists(b, hex2), say(be, "gc recounts"));
}

/* A fault hook that fails one named step with a given errno, and counts its calls. */
struct fault {
	const char *step;
	int err;
	int calls;
};

static int fault_cb(void *arg, const char *step)
{
	struct fault *f = arg;
	f->calls++;
	return strcmp(step, f->step) == 0 ? -f->err : 0;
}

/* A fault at any step fails put and write with that errno and stores nothing. */
static void suite_faults(struct tally *t, struct backend *be)
{
	static const char *const steps[] = { "write", "fsync", "rename" };
	static const int errs[] = { ENOSPC, EIO, EDQUOT };
	char hex[BLOB_HEX_LEN + 1];
	struct blobs *b = be->b;
	int added = -1;

	if (blobs_put(b, "hello", 5, hex, NULL) < 0)
		check_die("put");
	for (int i = 0; i < 3; i++) {
		char msg[100], h[BLOB_HEX_LEN + 1], d[32];
		struct fault f = { steps[i], errs[i], 0 };
		b->fault = fault_cb;
		b->fault_arg = &f;
		snprintf(d, sizeof d, "faulty content %d", i);
		int rc = blobs_put(b, d, strlen(d), h, &added);
		snprintf(msg, sizeof msg, "a fault at %s fails the put with %s", steps[i], strerror(errs[i]));
		CHECK(t, rc == -errs[i] && added == 0 && bytes_of(b) == 5, say(be, msg));
		CHECK(t, !blobs_exists(b, h) && (!be->fs || count_files(be->state) == 1),
		      say(be, "no blob (and no temp file) left"));
		CHECK(t, blobs_write(b, d, strlen(d), h, &added) == -errs[i] && added == 0 && !blobs_exists(b, h),
		      say(be, "write fails the same way"));
	}
	struct fault f = { "write", ENOSPC, 0 };
	b->fault_arg = &f;
	CHECK(t, blobs_put(b, "hello", 5, hex, &added) == 0 && added == 0,
	      say(be, "stored content needs no write: a dedupe hit does not fail"));
	b->fault = NULL;
	CHECK(t, blobs_put(b, "faulty content 0", 16, hex, &added) == 0 && added == 1 && bytes_of(b) == 21,
	      say(be, "without the fault the put works"));
}

/* gc keeps exactly the listed blobs; an unsorted list is refused before anything goes. */
static void suite_gc(struct tally *t, struct backend *be)
{
	char names[6][BLOB_HEX_LEN + 1];
	const char *keep[3];
	struct blobs *b = be->b;
	size_t removed = 99;

	CHECK(t, blobs_gc(b, NULL, 0, &removed) == 0 && removed == 0, say(be, "gc of an empty store is a no-op"));
	for (int i = 0; i < 6; i++) {
		char content[32];
		snprintf(content, sizeof content, "blob number %d", i);
		if (blobs_put(b, content, strlen(content), names[i], NULL) < 0)
			check_die("put");
	}
	keep[0] = names[1];
	keep[1] = names[3];
	keep[2] = names[4];
	qsort(keep, 3, sizeof *keep, cmp_str);
	const char *unsorted[2] = { keep[2], keep[0] };
	const char *bad[1] = { "../etc" };
	CHECK(t, blobs_gc(b, unsorted, 2, &removed) == -EINVAL && blobs_exists(b, names[0]) && blobs_exists(b, names[5]),
	      say(be, "gc refuses a keep list that is not sorted (and deletes nothing)"));
	CHECK(t, blobs_gc(b, bad, 1, &removed) == -EINVAL && blobs_gc(b, NULL, 1, &removed) == -EINVAL,
	      say(be, "gc refuses a keep list with a name that is not a blob"));
	CHECK(t, blobs_gc(b, keep, 3, &removed) == 0 && removed == 3,
	      say(be, "gc removes the 3 unreferenced blobs"));
	CHECK(t, blobs_exists(b, names[1]) && blobs_exists(b, names[3]) && blobs_exists(b, names[4]),
	      say(be, "kept blobs are still there"));
	CHECK(t, !blobs_exists(b, names[0]) && !blobs_exists(b, names[2]) && !blobs_exists(b, names[5]),
	      say(be, "unreferenced blobs are gone"));
	CHECK(t, bytes_of(b) == 3 * strlen("blob number 0"), say(be, "the count is what is kept"));
	CHECK(t, blobs_gc(b, NULL, 0, &removed) == 0 && removed == 3 && bytes_of(b) == 0,
	      say(be, "gc with an empty keep list empties the store"));
}

static void run_suite(struct tally *t, struct backend *be)
{
	void (*cases[])(struct tally *, struct backend *) = {
		suite_put_get, suite_names, suite_open, suite_stats, suite_faults, suite_gc,
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		be_open(be);
		cases[i](t, be);
		blobs_close(be->b);
		be->b = NULL;
	}
	if (be->fs)
		check_rm_rf(be->state);
}

/* ---- the file system only ------------------------------------------------------------------ */

/* The layout and modes on disk; a dedupe hit does not rewrite the file; a damaged file is
 * detected and a truncated one repaired by the next put of its content. */
static void fs_files(struct tally *t)
{
	char state[256], hex[BLOB_HEX_LEN + 1], hex2[BLOB_HEX_LEN + 1], path[400];
	const char msg[] = "checkpoint: section 3 of 7";
	struct stat st1, st2;
	struct blobs *b;
	void *data = NULL;
	size_t len = 0;

	check_tmpdir(state, sizeof state, "blob");
	if (blob_fs_new(state, 0, &b) < 0 || blobs_put(b, msg, sizeof msg - 1, hex, NULL) < 0)
		check_die("put");
	blob_file(path, sizeof path, state, hex);
	CHECK(t, stat(path, &st1) == 0 && S_ISREG(st1.st_mode) && st1.st_size == (off_t)sizeof msg - 1,
	      "fs: the blob is a file at blobs/<2 hex>/<64 hex>");
	CHECK(t, (st1.st_mode & 077) == 0, "fs: the blob is private to its owner");
	snprintf(path, sizeof path, "%s/blobs", state);
	CHECK(t, stat(path, &st2) == 0 && (st2.st_mode & 0777) == 0700, "fs: blobs/ is created 0700");

	/* Identical content: same name, no rewrite (same inode, same mtime). */
	blob_file(path, sizeof path, state, hex);
	stat(path, &st1);
	usleep(20000);
	int rc = blobs_put(b, msg, sizeof msg - 1, hex2, NULL);
	stat(path, &st2);
	CHECK(t, rc == 0 && strcmp(hex, hex2) == 0 && st1.st_ino == st2.st_ino &&
	         st1.st_mtim.tv_sec == st2.st_mtim.tv_sec && st1.st_mtim.tv_nsec == st2.st_mtim.tv_nsec &&
	         count_files(state) == 1, "fs: putting the same content again does not write it again");

	/* Damage: same size, one byte changed. */
	FILE *f = fopen(path, "r+b");
	if (f != NULL) {
		fseek(f, 5, SEEK_SET);
		fputc('X', f);
		fclose(f);
	}
	CHECK(t, blobs_get(b, hex, &data, &len) == -EBADMSG && data == NULL, "fs: a damaged blob is detected (-EBADMSG)");
	/* Truncated: put notices the size differs and writes it again. */
	CHECK(t, truncate(path, 3) == 0, "fs: truncate the blob file");
	CHECK(t, blobs_put(b, msg, sizeof msg - 1, hex2, NULL) == 0 && blobs_get(b, hex, &data, &len) == 0 &&
	         len == sizeof msg - 1, "fs: putting the content again repairs a blob of the wrong size");
	free(data);
	/* What is under the name is not a file. */
	CHECK(t, unlink(path) == 0 && mkdir(path, 0700) == 0, "fs: a directory where the blob was");
	uint64_t size;
	CHECK(t, blobs_size(b, hex, &size) == -EBADMSG && !blobs_exists(b, hex), "fs: size of a non-file: -EBADMSG");
	blobs_close(b);
	check_rm_rf(state);
}

/* gc collects our temp files, leaves foreign files alone; a new handle counts what is there. */
static void fs_gc_and_count(struct tally *t)
{
	char state[256], hex[BLOB_HEX_LEN + 1], tmp[400], junk[400];
	struct blob_stats st;
	struct blobs *b, *again;
	size_t removed = 0;

	check_tmpdir(state, sizeof state, "blob");
	if (blob_fs_new(state, 0, &b) < 0)
		check_die("open");
	CHECK(t, blobs_put(b, "hello", 5, hex, NULL) == 0 && blobs_put(b, "world!", 6, hex, NULL) == 0,
	      "fs: two blobs");
	CHECK(t, blob_fs_new(state, 0, &again) == 0 && (blobs_stats(again, &st), st.bytes == 11 && st.count_err == 0),
	      "fs: a new handle counts what is there");
	blobs_close(again);
	snprintf(tmp, sizeof tmp, "%s/blobs/%.2s/.tmp-abcdef", state, hex);
	snprintf(junk, sizeof junk, "%s/blobs/%.2s/README", state, hex);
	check_put(tmp, "x", 1);
	check_put(junk, "y", 1);
	const char *keep[1] = { hex };
	CHECK(t, blobs_gc(b, keep, 1, &removed) == 0 && removed == 2, "fs: gc removes the other blob and the temp file");
	CHECK(t, access(tmp, F_OK) != 0 && blobs_exists(b, hex), "fs: the leftover temp file is gone, the kept blob not");
	CHECK(t, access(junk, F_OK) == 0, "fs: a file that is not a blob is left alone");
	blobs_close(b);

	/* Read-only: reads work, nothing is written or deleted. */
	void *data = NULL;
	size_t len;
	CHECK(t, blob_fs_new(state, 1, &b) == 0 && blobs_get(b, hex, &data, &len) == 0 && len == 6,
	      "fs: a read-only store reads");
	free(data);
	CHECK(t, blobs_put(b, "new", 3, tmp, NULL) == -EROFS && blobs_remove(b, hex) == -EROFS &&
	         blobs_gc(b, NULL, 0, &removed) == -EROFS && blobs_exists(b, hex),
	      "fs: a read-only store refuses put, remove and gc (-EROFS)");
	blobs_close(b);
	check_rm_rf(state);
}

/* blobs/ that is a file (a broken store): every put fails, and opening still answers. */
static void fs_broken(struct tally *t)
{
	char state[256], hex[BLOB_HEX_LEN + 1], path[400];
	struct blob_stats st;
	struct blobs *b;

	check_tmpdir(state, sizeof state, "blob");
	snprintf(path, sizeof path, "%s/blobs", state);
	check_put(path, "x", 1);
	CHECK(t, blob_fs_new(state, 0, &b) == 0 && (blobs_stats(b, &st), st.bytes == 0), "fs: open with blobs/ a file");
	CHECK(t, blobs_put(b, "data", 4, hex, NULL) == -ENOTDIR, "fs: put with blobs/ a file: -ENOTDIR");
	blobs_close(b);
	CHECK(t, blob_fs_new(NULL, 0, &b) == -EINVAL && b == NULL, "fs: no state dir: -EINVAL");
	check_rm_rf(state);
}

int main(void)
{
	struct tally t = {0, 0};
	struct backend fs = { .name = "fs", .fs = 1 }, mem = { .name = "memory" };

	test_sha256(&t);
	run_suite(&t, &fs);
	run_suite(&t, &mem);
	fs_files(&t);
	fs_gc_and_count(&t);
	fs_broken(&t);
	return check_done(&t);
}
