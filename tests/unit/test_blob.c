/* tests/unit/test_blob.c — the blob store: sha256 vectors, put/get/exists, identical content
 * stored once, damaged blobs detected, names that could escape the store refused, and
 * garbage collection of unreferenced blobs and leftover temp files.
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

static void test_put_get(struct tally *t)
{
	char state[256], hex[BLOB_HEX_LEN + 1], hex2[BLOB_HEX_LEN + 1], path[400];
	const char msg[] = "checkpoint: section 3 of 7";
	struct stat st1, st2;
	void *data = NULL;
	size_t len = 0;
	int rc;

	check_tmpdir(state, sizeof state, "blob");
	rc = blob_put(state, msg, sizeof msg - 1, hex);
	CHECK(t, rc == 0 && strlen(hex) == BLOB_HEX_LEN, "put returns the 64-hex name");
	char want[BLOB_HEX_LEN + 1];
	blob_sha256_hex(msg, sizeof msg - 1, want);
	CHECK(t, strcmp(hex, want) == 0, "the name is the sha256 of the content");
	blob_file(path, sizeof path, state, hex);
	CHECK(t, stat(path, &st1) == 0 && S_ISREG(st1.st_mode) && st1.st_size == (off_t)sizeof msg - 1,
	      "stored at blobs/<2 hex>/<64 hex>");
	CHECK(t, (st1.st_mode & 077) == 0, "the blob is private to its owner");
	snprintf(path, sizeof path, "%s/blobs", state);
	CHECK(t, stat(path, &st2) == 0 && (st2.st_mode & 0777) == 0700, "blobs/ is created 0700");

	CHECK(t, blob_exists(state, hex) == 1, "exists: 1 for a stored blob");
	rc = blob_get(state, hex, &data, &len);
	CHECK(t, rc == 0 && len == sizeof msg - 1 && memcmp(data, msg, len) == 0,
	      "get returns the content");
	free(data);
	data = NULL;

	/* Identical content: same name, no rewrite (same inode, same mtime). */
	blob_file(path, sizeof path, state, hex);
	stat(path, &st1);
	usleep(20000);
	rc = blob_put(state, msg, sizeof msg - 1, hex2);
	stat(path, &st2);
	CHECK(t, rc == 0 && strcmp(hex, hex2) == 0, "putting the same content again gives the same name");
	CHECK(t, st1.st_ino == st2.st_ino && st1.st_mtim.tv_sec == st2.st_mtim.tv_sec &&
	      st1.st_mtim.tv_nsec == st2.st_mtim.tv_nsec && count_files(state) == 1,
	      "... and does not write it again");

	/* Empty blob. */
	rc = blob_put(state, NULL, 0, hex2);
	CHECK(t, rc == 0 && strcmp(hex2, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
	      "an empty blob can be stored");
	rc = blob_get(state, hex2, &data, &len);
	CHECK(t, rc == 0 && len == 0 && data != NULL, "... and read back (non-NULL, zero length)");
	free(data);
	data = NULL;

	/* A large blob. */
	size_t big = 3u << 20;
	unsigned char *b = malloc(big);
	for (size_t i = 0; i < big; i++)
		b[i] = (unsigned char)(i * 31 + (i >> 9));
	rc = blob_put(state, b, big, hex2);
	CHECK(t, rc == 0, "put a 3 MiB blob");
	rc = blob_get(state, hex2, &data, &len);
	CHECK(t, rc == 0 && len == big && memcmp(data, b, big) == 0, "get it back intact");
	free(data);
	data = NULL;
	free(b);

	/* Damage: same size, one byte changed. */
	blob_file(path, sizeof path, state, hex);
	FILE *f = fopen(path, "r+b");
	if (f != NULL) {
		fseek(f, 5, SEEK_SET);
		fputc('X', f);
		fclose(f);
	}
	rc = blob_get(state, hex, &data, &len);
	CHECK(t, rc == -EBADMSG && data == NULL, "a damaged blob is detected (-EBADMSG)");
	/* Truncated: put notices the size differs and writes it again. */
	CHECK(t, truncate(path, 3) == 0, "truncate the blob file");
	rc = blob_put(state, msg, sizeof msg - 1, hex2);
	CHECK(t, rc == 0 && blob_get(state, hex, &data, &len) == 0 && len == sizeof msg - 1,
	      "putting the content again repairs a blob of the wrong size");
	free(data);
	data = NULL;

	/* Names that are not blob names never reach the filesystem. */
	CHECK(t, blob_get(state, "../../etc/passwd", &data, &len) == -EINVAL, "get refuses a path as a name");
	CHECK(t, blob_get(state, "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
			  &data, &len) == -EINVAL, "get refuses uppercase hex");
	CHECK(t, blob_exists(state, "abc") == 0 && blob_exists(state, NULL) == 0,
	      "exists is 0 for malformed names");
	CHECK(t, blob_exists(state, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
	      "exists is 0 for a blob never stored");
	CHECK(t, blob_get(state, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
			  &data, &len) == -ENOENT, "get of a missing blob is -ENOENT");
	check_rm_rf(state);
}

static void test_gc(struct tally *t)
{
	char state[256], names[6][BLOB_HEX_LEN + 1], tmp[400], junk[400];
	const char *keep[3];
	size_t removed = 99;
	int rc;

	check_tmpdir(state, sizeof state, "blob");
	CHECK(t, blob_gc(state, NULL, 0, &removed) == 0 && removed == 0,
	      "gc without a blobs/ directory is a no-op");
	for (int i = 0; i < 6; i++) {
		char content[32];
		snprintf(content, sizeof content, "blob number %d", i);
		blob_put(state, content, strlen(content), names[i]);
	}
	/* A temp file left by a crash mid-put, and a file that is none of ours. */
	snprintf(tmp, sizeof tmp, "%s/blobs/%.2s/.tmp-abcdef", state, names[0]);
	FILE *f = fopen(tmp, "w");
	if (f != NULL)
		fclose(f);
	snprintf(junk, sizeof junk, "%s/blobs/%.2s/README", state, names[0]);
	f = fopen(junk, "w");
	if (f != NULL)
		fclose(f);

	keep[0] = names[1];
	keep[1] = names[3];
	keep[2] = names[4];
	qsort(keep, 3, sizeof *keep, cmp_str);
	const char *unsorted[2] = { keep[2], keep[0] };
	CHECK(t, blob_gc(state, unsorted, 2, &removed) == -EINVAL && count_files(state) == 8,
	      "gc refuses a keep list that is not sorted (and deletes nothing)");

	rc = blob_gc(state, keep, 3, &removed);
	CHECK(t, rc == 0 && removed == 4, "gc removes the 3 unreferenced blobs and the temp file");
	CHECK(t, blob_exists(state, names[1]) && blob_exists(state, names[3]) && blob_exists(state, names[4]),
	      "kept blobs are still there");
	CHECK(t, !blob_exists(state, names[0]) && !blob_exists(state, names[2]) &&
	      !blob_exists(state, names[5]), "unreferenced blobs are gone");
	CHECK(t, access(tmp, F_OK) != 0, "the leftover temp file is gone");
	CHECK(t, access(junk, F_OK) == 0, "a file that is not a blob is left alone");
	rc = blob_gc(state, NULL, 0, &removed);
	CHECK(t, rc == 0 && removed == 3 && count_files(state) == 1, "gc with an empty keep list empties the store");
	check_rm_rf(state);
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

/* The server's store: bytes counted at init and kept by put / remove / gc; a fault at any
 * disk step fails the put with that errno and leaves no blob and no temp file behind. */
static void test_store(struct tally *t)
{
	char state[256], hex[BLOB_HEX_LEN + 1], hex2[BLOB_HEX_LEN + 1], path[600];
	struct blob_store bs;
	uint64_t size = 0;
	int added = -1, fd = -1;

	check_tmpdir(state, sizeof state, "blob");
	CHECK(t, blob_store_init(&bs, state) == 0 && bs.bytes == 0, "a store with no blobs/ holds 0 bytes");
	CHECK(t, blob_store_put(&bs, "hello", 5, hex, &added) == 0 && added == 1 && bs.bytes == 5, "put counts its bytes");
	CHECK(t, blob_store_put(&bs, "hello", 5, hex, &added) == 0 && added == 0 && bs.bytes == 5,
	      "the same content again adds nothing");
	CHECK(t, blob_size(state, hex, &size) == 0 && size == 5, "blob_size");
	CHECK(t, blob_open(state, hex, &fd, &size) == 0 && fd >= 0 && size == 5, "blob_open");
	if (fd >= 0)
		close(fd);
	CHECK(t, blob_store_put(&bs, "world!", 6, hex2, NULL) == 0 && bs.bytes == 11, "a second blob");

	struct blob_store again;
	CHECK(t, blob_store_init(&again, state) == 0 && again.bytes == 11, "init counts what is there");

	static const char *const steps[] = { "write", "fsync", "rename" };
	static const int errs[] = { ENOSPC, EIO, EDQUOT };
	for (int i = 0; i < 3; i++) {
		char msg[100], h[BLOB_HEX_LEN + 1], d[32];
		struct fault f = { steps[i], errs[i], 0 };
		bs.fault = fault_cb;
		bs.fault_arg = &f;
		snprintf(d, sizeof d, "faulty content %d", i);
		int rc = blob_store_put(&bs, d, strlen(d), h, &added);
		snprintf(msg, sizeof msg, "a fault at %s fails the put with %s", steps[i], strerror(errs[i]));
		CHECK(t, rc == -errs[i] && added == 0 && bs.bytes == 11, msg);
		CHECK(t, !blob_exists(state, h) && count_files(state) == 2, "no blob and no temp file left");
	}
	bs.fault = NULL;

	CHECK(t, blob_store_remove(&bs, hex) == 0 && bs.bytes == 6 && !blob_exists(state, hex), "remove");
	CHECK(t, blob_store_remove(&bs, hex) == 0 && bs.bytes == 6, "removing a removed blob is fine");
	CHECK(t, blob_size(state, hex, &size) == -ENOENT && blob_open(state, hex, &fd, &size) == -ENOENT,
	      "size and open of a missing blob: -ENOENT");
	CHECK(t, blob_store_remove(&bs, "../../etc/passwd") == -EINVAL, "remove refuses a name that is not a blob");
	blob_file(path, sizeof path, state, hex2);
	CHECK(t, blob_store_gc(&bs, NULL, 0, NULL) == 0 && bs.bytes == 0 && !blob_exists(state, hex2),
	      "gc recounts");

	/* blobs/ that is a file (a broken store): every put fails, and init still answers. */
	check_rm_rf(state);
	check_mkdir(state);
	snprintf(path, sizeof path, "%s/blobs", state);
	check_put(path, "x", 1);
	CHECK(t, blob_store_init(&bs, state) == 0 && bs.bytes == 0, "init with blobs/ a file");
	CHECK(t, blob_store_put(&bs, "data", 4, hex, NULL) == -ENOTDIR, "put with blobs/ a file: -ENOTDIR");
	check_rm_rf(state);
}

int main(void)
{
	struct tally t = {0, 0};

	test_sha256(&t);
	test_put_get(&t);
	test_gc(&t);
	test_store(&t);
	return check_done(&t);
}
