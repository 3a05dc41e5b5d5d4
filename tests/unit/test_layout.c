/* tests/unit/test_layout.c — the state-dir layout (state/layout.c): every part of a task's
 * folder, the top-level folders and blob paths as the blob store and the journal use them,
 * refused names that would leave their folder, and paths too long for the buffer (refused
 * and emptied, never truncated).  The blob store is checked to put a blob where layout_blob
 * says, so the two cannot drift apart.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "state/layout.h"
#include "state/blob.h"
#include "check.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char ID[] = "0123456789abcdef0123456789abcdef";

static void test_task_parts(struct tally *t)
{
	static const struct { enum layout_task_part part; const char *want; } parts[] = {
		{ LAYOUT_TASK_DIR, "/s/tasks/0123456789abcdef0123456789abcdef" },
		{ LAYOUT_TASK_LOG, "/s/tasks/0123456789abcdef0123456789abcdef/output.log" },
		{ LAYOUT_TASK_WORK, "/s/tasks/0123456789abcdef0123456789abcdef/work" },
		{ LAYOUT_TASK_INPUTS, "/s/tasks/0123456789abcdef0123456789abcdef/work/inputs" },
		{ LAYOUT_TASK_OUTPUTS, "/s/tasks/0123456789abcdef0123456789abcdef/work/outputs" },
		{ LAYOUT_TASK_ARGS, "/s/tasks/0123456789abcdef0123456789abcdef/work/.forkpoint-args.json" },
	};
	char buf[PATH_MAX];
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		int rc = layout_task(buf, sizeof buf, "/s", ID, parts[i].part);
		CHECKF(t, rc == 0 && strcmp(buf, parts[i].want) == 0, "part %zu: rc %d, '%s'", i, rc, buf);
		/* the relative form is the same path below the task's folder */
		const char *rel = layout_task_rel(parts[i].part);
		char joined[PATH_MAX];
		snprintf(joined, sizeof joined, "/s/tasks/%s%s%s", ID, rel[0] ? "/" : "", rel);
		CHECKF(t, strcmp(joined, parts[i].want) == 0, "part %zu relative: '%s'", i, rel);
	}
	CHECK(t, t->fail == 0, "every part of a task's folder, absolute and relative");
	CHECK(t, strcmp(layout_task_rel(LAYOUT_TASK_OUTPUTS), "work/" LAYOUT_OUTPUTS) == 0 &&
	      strcmp(layout_task_rel(LAYOUT_TASK_INPUTS), "work/" LAYOUT_INPUTS) == 0,
	      "work/inputs and work/outputs are the names jobs see from their cwd");
}

static void test_top_and_blobs(struct tally *t)
{
	char buf[PATH_MAX];
	CHECK(t, layout_dir(buf, sizeof buf, "/s", LAYOUT_JOURNAL) == 0 && strcmp(buf, "/s/journal") == 0,
	      "the journal folder");
	CHECK(t, layout_dir(buf, sizeof buf, "/s", LAYOUT_UPLOADS) == 0 && strcmp(buf, "/s/uploads") == 0,
	      "the uploads folder");
	CHECK(t, layout_dir(buf, sizeof buf, "/s", LAYOUT_TASKS) == 0 && strcmp(buf, "/s/tasks") == 0,
	      "the tasks folder");
	CHECK(t, layout_blob(buf, sizeof buf, "/s", "ab12") == 0 && strcmp(buf, "/s/blobs/ab/ab12") == 0,
	      "a blob goes under its first two hex digits");
}

static void test_refused(struct tally *t)
{
	static const char *const bad[] = { "", ".", "..", "a/b", "../x", "/abs" };
	char buf[PATH_MAX];
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		strcpy(buf, "junk");
		CHECKF(t, layout_task(buf, sizeof buf, "/s", bad[i], LAYOUT_TASK_LOG) == -EINVAL && buf[0] == 0,
		       "task id '%s' accepted", bad[i]);
		strcpy(buf, "junk");
		CHECKF(t, layout_blob(buf, sizeof buf, "/s", bad[i]) == -EINVAL && buf[0] == 0,
		       "blob name '%s' accepted", bad[i]);
		strcpy(buf, "junk");
		CHECKF(t, layout_dir(buf, sizeof buf, "/s", bad[i]) == -EINVAL && buf[0] == 0,
		       "folder '%s' accepted", bad[i]);
	}
	CHECK(t, layout_task(buf, sizeof buf, "/s", NULL, LAYOUT_TASK_DIR) == -EINVAL, "no task id: -EINVAL");
	CHECK(t, layout_blob(buf, sizeof buf, "/s", "a") == -EINVAL, "a one-character blob name: -EINVAL");
	CHECK(t, t->fail == 0, "names that would leave their folder are refused, the buffer emptied");
}

static void test_too_long(struct tally *t)
{
	char small[40];
	strcpy(small, "junk");
	CHECK(t, layout_task(small, sizeof small, "/s", ID, LAYOUT_TASK_DIR) == -ENAMETOOLONG && small[0] == 0,
	      "a task path one byte too long: -ENAMETOOLONG, not a truncated path");
	/* exactly fitting: "/s/tasks/" (9) + 32 + NUL */
	char exact[42];
	CHECK(t, layout_task(exact, sizeof exact, "/s", ID, LAYOUT_TASK_DIR) == 0 && strlen(exact) == 41,
	      "a task path that fits exactly");
	CHECK(t, layout_blob(small, 0, "/s", "abcd") == -ENAMETOOLONG, "a zero-length buffer: -ENAMETOOLONG");
	CHECK(t, layout_dir(small, 8, "/state", LAYOUT_JOURNAL) == -ENAMETOOLONG && small[0] == 0,
	      "a folder path too long: -ENAMETOOLONG");
}

/* The blob store puts a blob exactly where layout_blob says. */
static void test_blob_store_agrees(struct tally *t)
{
	char dir[PATH_MAX], hex[BLOB_HEX_LEN + 1], path[PATH_MAX];
	struct stat st;
	struct blobs *b = NULL;
	check_tmpdir(dir, sizeof dir, "layout");
	CHECK(t, blob_fs_new(dir, 0, &b) == 0 && blobs_put(b, "layout", 6, hex, NULL) == 0, "a blob is stored");
	blobs_close(b);
	CHECK(t, layout_blob(path, sizeof path, dir, hex) == 0 && stat(path, &st) == 0 && st.st_size == 6,
	      "it is at the path layout_blob gives");
	check_rm_rf(dir);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_task_parts(&t);
	test_top_and_blobs(&t);
	test_refused(&t);
	test_too_long(&t);
	test_blob_store_agrees(&t);
	return check_done(&t);
}
