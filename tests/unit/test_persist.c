/* tests/unit/test_persist.c — the journal as forkpoint uses it (supervisor/persist.c), on a
 * supervisor built by hand (loop, task table, log into a file, journal in a temp state dir):
 * compaction keeps happening across many restarts; a failing compaction backs off and logs
 * once per episode; recovery messages reach the log at the default level; a replay refusal
 * names file and offset; a lost checkpoint blob is named alike by start-up and fsck.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "supervisor/core/persist.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/journal.h"
#include "supervisor/core/loop.h"
#include "supervisor/cli/ops.h"
#include "supervisor/core/tasks.h"

#include "check.h"

/* What the log sink saw, by level. */
struct seen {
	int errors;             /* FPLOG_ERROR and above */
	int compacted;          /* "journal compacted" lines */
	int again;              /* "works again" lines */
	char last[512];
};

static void sink(void *arg, enum fplog_level lv, const char *task, const char *msg)
{
	struct seen *s = arg;
	(void)task;
	if (lv >= FPLOG_ERROR)
		s->errors++;
	if (strstr(msg, "journal compacted") != NULL)
		s->compacted++;
	if (strstr(msg, "works again") != NULL)
		s->again++;
	snprintf(s->last, sizeof s->last, "%s", msg);
}

static unsigned char *slurp(const char *path, size_t *n)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char *b = NULL;
	ssize_t r = -1;

	*n = 0;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && (b = malloc((size_t)st.st_size + 1)) != NULL)
		r = read(fd, b, (size_t)st.st_size);
	close(fd);
	if (r < 0) {
		free(b);
		return NULL;
	}
	b[r] = '\0';
	*n = (size_t)r;
	return b;
}

struct bare {
	struct supervisor sv;
	struct seen seen;
	int logfd;
};

/* A supervisor with a loop, a task table and a log written to logpath at the server's default
 * level (info). */
static int bare_init(struct bare *b, char *state, const char *logpath)
{
	memset(b, 0, sizeof *b);
	b->logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	fplog_init(&b->sv.log, b->logfd, FPLOG_INFO);
	b->sv.log.sink = sink;
	b->sv.log.sink_arg = &b->seen;
	b->sv.state_dir = state;
	b->sv.loop = loop_new();
	b->sv.tasks = b->sv.loop ? tasks_new(&b->sv) : NULL;
	return b->sv.tasks != NULL && b->logfd >= 0 ? 0 : -1;
}

static void bare_free(struct bare *b)
{
	tasks_free(b->sv.tasks);
	loop_free(b->sv.loop);
	if (b->logfd >= 0)
		close(b->logfd);
}

/* A file-transfer record (type 64) of about n bytes: {"x": <bin>}.  With no transfer table
 * replay ignores it, so it only makes the journal grow. */
static int append_filler(struct persist *p, size_t n)
{
	unsigned char *m = malloc(n + 16);
	int rc;

	if (m == NULL)
		return -ENOMEM;
	m[0] = 0x81;
	m[1] = 0xa1;
	m[2] = 'x';
	m[3] = 0xc6;
	m[4] = (unsigned char)(n >> 24);
	m[5] = (unsigned char)(n >> 16);
	m[6] = (unsigned char)(n >> 8);
	m[7] = (unsigned char)n;
	memset(m + 8, 0x5a, n);
	rc = persist_append(p, 64, m, n + 8);
	free(m);
	return rc;
}

static long dir_bytes(const char *state)
{
	char dir[600], path[900];
	struct dirent *e;
	struct stat st;
	long sum = 0;
	DIR *d;

	snprintf(dir, sizeof dir, "%s/journal", state);
	d = opendir(dir);
	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (strstr(e->d_name, ".seg") != NULL && stat(path, &st) == 0)
			sum += (long)st.st_size;
	}
	closedir(d);
	return sum;
}

/* Restarted 40 times, 512 KiB each run: the journal is compacted again and again instead of
 * the threshold rising with each restart. */
static void test_restarts(struct tally *t)
{
	char state[256], logpath[300];
	struct bare b;
	int bad = 0, compactions = 0;
	long most = 0;

	check_tmpdir(state, sizeof state, "persist");
	snprintf(logpath, sizeof logpath, "%s/log", state);
	for (int run = 0; run < 40; run++) {
		struct persist *p = NULL;
		char err[512];
		if (bare_init(&b, state, logpath) < 0 || persist_open(&b.sv, 0, &p, err, sizeof err) < 0) {
			printf("# run %d: %s\n", run, err);
			bad++;
			bare_free(&b);
			break;
		}
		for (int i = 0; i < 8; i++)
			if (append_filler(p, 64 << 10) < 0 || persist_commit(p) < 0)
				bad++;
		persist_maybe_compact(p);
		compactions += b.seen.compacted;
		persist_close(p);
		bare_free(&b);
		long n = dir_bytes(state);
		if (n > most)
			most = n;
	}
	printf("# 40 restarts of 512 KiB each: %d compactions, journal at most %ld bytes\n",
	       compactions, most);
	CHECK(t, bad == 0, "40 restarts, each appending 512 KiB");
	CHECK(t, compactions >= 2, "the journal is compacted after restarts, again and again");
	CHECK(t, most < (10l << 20), "the journal stays bounded (under 10 MiB)");
	check_rm_rf(state);
}

static volatile sig_atomic_t xfsz;

static void on_xfsz(int sig)
{
	(void)sig;
	xfsz++;
}

/* A compaction that fails part-way (file size limit while spilling the snapshot) backs off:
 * one attempt and one log line however often it is asked for, another attempt once the
 * backoff has passed, and a note when it works again. */
static void test_backoff(struct tally *t)
{
	char state[256], logpath[300], err[512], id[33];
	struct sigaction sa = { .sa_handler = on_xfsz }, prev;
	struct rlimit old, lim;
	struct persist *p = NULL;
	struct bare b;
	int bad = 0;

	check_tmpdir(state, sizeof state, "persist");
	snprintf(logpath, sizeof logpath, "%s/log", state);
	if (bare_init(&b, state, logpath) < 0 || persist_open(&b.sv, 0, &p, err, sizeof err) < 0) {
		CHECK(t, 0, "open for the backoff test");
		goto out;
	}
	/* 6000 tasks of 1 KiB arguments: a snapshot of ~6 MiB, spilled at 4 MiB. */
	char *arg = malloc(1100);
	memset(arg, 'a', 1024);
	arg[1024] = '\0';
	for (int i = 0; i < 6000; i++) {
		snprintf(id, sizeof id, "%032x", i + 1);
		struct task *tk = task_alloc(id);
		tk->tool_name = strdup("tool");
		tk->args = cJSON_CreateObject();
		cJSON_AddStringToObject(tk->args, "pad", arg);
		if (tasks_insert(b.sv.tasks, tk) < 0)
			bad++;
		persist_created(p, tk);
	}
	free(arg);
	for (int i = 0; i < 40; i++)
		append_filler(p, 64 << 10);
	CHECK(t, bad == 0 && persist_commit(p) == 0, "6000 tasks and 2.5 MiB of filler committed");

	getrlimit(RLIMIT_FSIZE, &old);
	sigaction(SIGXFSZ, &sa, &prev);
	lim = old;
	lim.rlim_cur = 1 << 20;
	setrlimit(RLIMIT_FSIZE, &lim);
	int errors0 = b.seen.errors;
	for (int i = 0; i < 50; i++)
		persist_maybe_compact(p);
	int first = xfsz, lines = b.seen.errors - errors0;
	int64_t until = loop_now() + 5000;
	while (xfsz == first && loop_now() < until)
		persist_maybe_compact(p);
	int second = xfsz;
	for (int i = 0; i < 50; i++)
		persist_maybe_compact(p);
	setrlimit(RLIMIT_FSIZE, &old);
	sigaction(SIGXFSZ, &prev, NULL);
	printf("# 50 calls: %d attempt(s), %d error line(s); %d after the backoff; %d lines in all\n",
	       first, lines, second, b.seen.errors - errors0);
	CHECK(t, first == 1, "50 compaction requests right after a failure make one attempt");
	CHECK(t, lines == 1, "... and log one error line (not one per task)");
	CHECK(t, second == 2 && xfsz == 2, "one more attempt once the backoff has passed, then none");
	CHECK(t, b.seen.errors - errors0 == 1, "the episode is logged once");
	CHECK(t, persist_compact(p) == 0 && b.seen.again == 1 && strstr(b.seen.last, "2 failed"),
	      "once the cause is gone it works and says so");
	persist_close(p);
out:
	bare_free(&b);
	check_rm_rf(state);
}

/* A journal of one task created (twice if twice = 1) and started, left as a crash after
 * those commits leaves it (HEAD as the open wrote it). */
static int one_task(const char *state, const char *logpath, int twice)
{
	char hp[300], err[512], id[33];
	struct persist *p = NULL;
	unsigned char *head;
	size_t hn;
	struct bare b;

	snprintf(hp, sizeof hp, "%s/journal/HEAD", state);
	if (bare_init(&b, (char *)state, logpath) < 0 || persist_open(&b.sv, 0, &p, err, sizeof err) < 0) {
		bare_free(&b);
		return -1;
	}
	head = slurp(hp, &hn);
	snprintf(id, sizeof id, "%032x", 7);
	struct task *tk = task_alloc(id);
	tk->tool_name = strdup("tool");
	tk->args = cJSON_CreateObject();
	tasks_insert(b.sv.tasks, tk);
	persist_created(p, tk);
	if (twice)
		persist_created(p, tk);
	persist_commit(p);
	persist_started(p, tk);
	persist_commit(p);
	persist_close(p);
	bare_free(&b);
	check_put(hp, head, hn);
	free(head);
	return 0;
}

/* "torn tail cut" reaches the log at the default level, and a replay refusal names the file
 * and offset of the record. */
static void test_messages(struct tally *t)
{
	char state[256], logpath[300], err[512], seg[400];
	struct persist *p = NULL;
	struct stat st;
	struct bare b;
	size_t n = 0;

	check_tmpdir(state, sizeof state, "persist");
	snprintf(logpath, sizeof logpath, "%s/log", state);
	snprintf(seg, sizeof seg, "%s/journal/0000000000000001.seg", state);
	CHECK(t, one_task(state, logpath, 0) == 0 && stat(seg, &st) == 0 &&
	      truncate(seg, st.st_size - 3) == 0, "a journal with its last record torn");
	bare_init(&b, state, logpath);
	int rc = persist_open(&b.sv, 0, &p, err, sizeof err);
	char *log = (char *)slurp(logpath, &n);
	CHECK(t, rc == 0 && tasks_count(b.sv.tasks) == 1, "it opens with the task");
	CHECK(t, log != NULL && strstr(log, "level=warning") && strstr(log, "torn tail cut at offset"),
	      "the torn tail cut is logged at warning level (shown by default)");
	free(log);
	persist_close(p);
	p = NULL;
	bare_free(&b);
	check_rm_rf(state);

	check_tmpdir(state, sizeof state, "persist");
	snprintf(logpath, sizeof logpath, "%s/log", state);
	one_task(state, logpath, 1);
	bare_init(&b, state, logpath);
	rc = persist_open(&b.sv, 0, &p, err, sizeof err);
	CHECK(t, rc < 0 && strstr(err, "0000000000000001.seg: offset ") && strstr(err, "created twice"),
	      "a replay refusal names the file and the offset of the record");
	printf("# %s\n", err);
	bare_free(&b);
	check_rm_rf(state);
}

/* A checkpoint blob lost while the server was down: start-up names it as fsck does and fails
 * the task with task_lost instead of refusing every other task; fsck reports it. */
static void test_lost_checkpoint(struct tally *t)
{
	char state[256], logpath[300], err[512], id[33], blob[400];
	struct persist *p = NULL;
	struct bare b;
	size_t n = 0;

	check_tmpdir(state, sizeof state, "persist");
	snprintf(logpath, sizeof logpath, "%s/log", state);
	if (bare_init(&b, state, logpath) < 0 || persist_open(&b.sv, 0, &p, err, sizeof err) < 0) {
		CHECK(t, 0, "open for the checkpoint test");
		bare_free(&b);
		goto out;
	}
	snprintf(id, sizeof id, "%032x", 9);
	struct task *tk = task_alloc(id);
	tk->tool_name = strdup("tool");
	tk->args = cJSON_CreateObject();
	tasks_insert(b.sv.tasks, tk);
	persist_created(p, tk);
	tk->checkpoint = malloc(4000);
	memset(tk->checkpoint, 'c', 4000);
	tk->checkpoint_len = 4000;
	tk->checkpoint_seq = 1;
	int rc = persist_checkpoint(p, tk);
	char hex[80];
	snprintf(hex, sizeof hex, "%s", tk->checkpoint_blob);
	CHECK(t, rc == 0 && strlen(hex) == 64 && persist_commit(p) == 0, "a 4000-byte checkpoint goes to a blob");
	persist_close(p);
	p = NULL;
	bare_free(&b);

	snprintf(blob, sizeof blob, "%s/blobs/%.2s/%s", state, hex, hex);
	CHECK(t, unlink(blob) == 0, "the blob disappears");
	char *argv[] = { (char *)"--state", state, NULL };
	fflush(stdout);
	CHECK(t, ops_fsck(2, argv) == 1, "fsck reports it (exit 1)");
	bare_init(&b, state, logpath);
	rc = persist_open(&b.sv, 0, &p, err, sizeof err);
	struct task *back = rc == 0 ? tasks_find(b.sv.tasks, id) : NULL;
	cJSON *code = back && back->error ? cJSON_GetObjectItem(back->error, "code") : NULL;
	CHECK(t, back != NULL && back->status == TASK_FAILED && code && strcmp(code->valuestring, "task_lost") == 0,
	      "start-up keeps the other tasks and fails this one with task_lost");
	char *log = (char *)slurp(logpath, &n);
	char want[200];
	snprintf(want, sizeof want, "checkpoint blob %s: No such file or directory", hex);
	CHECK(t, log != NULL && strstr(log, want) != NULL, "start-up names the blob as fsck does");
	free(log);
	persist_close(p);
	bare_free(&b);
out:
	check_rm_rf(state);
}

int main(void)
{
	struct tally t = {0, 0};

	test_restarts(&t);
	test_backoff(&t);
	test_messages(&t);
	test_lost_checkpoint(&t);
	return check_done(&t);
}
