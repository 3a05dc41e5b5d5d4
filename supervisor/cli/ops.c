/* supervisor/ops.c — see ops.h. */
#include "supervisor/cli/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state/blob.h"
#include "supervisor/mcp/views.h"
#include "state/journal.h"
#include "state/layout.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/tasks.h"
#include "proto/termsafe.h"
#include "proto/io.h"
#include "proto/jsontext.h"

/* FORKPOINT_STATE first, then the XDG base directory rule, then ~/.local/state: the order
 * the usage text documents (main.c), so the inspection commands look where it says.  Empty
 * values count as unset, as XDG says. */
char *ops_default_state_dir(void)
{
	const char *s = getenv("FORKPOINT_STATE");
	char *out = NULL;
	if (s && *s)
		return strdup(s);
	s = getenv("XDG_STATE_HOME");
	if (s && *s)
		return asprintf(&out, "%s/forkpoint", s) < 0 ? NULL : out;
	s = getenv("HOME");
	if (!s || !*s)
		return NULL;
	return asprintf(&out, "%s/.local/state/forkpoint", s) < 0 ? NULL : out;
}

/* A read-only view of the state: the journal replayed into a task table, nothing written. */
struct view {
	struct supervisor sv;
	struct persist *p;
};

static void view_close(struct view *v);

/* Open the state dir read-only.  0, or -1 with the reason printed and v closed again.
 * read_only means these commands can run next to a live server: no lock is taken, nothing is
 * written, and a torn tail is ignored rather than cut (journal.h).  realpath comes first,
 * so a missing state dir is reported by name before anything is opened. */
static int view_open(struct view *v, const char *state, persist_tap tap, void *tap_arg)
{
	char err[1024];
	memset(v, 0, sizeof *v);
	fplog_init(&v->sv.log, 2, FPLOG_WARNING);
	char *def = state ? NULL : ops_default_state_dir();
	const char *dir = state ? state : def;
	if (!dir) {
		fprintf(stderr, "forkpoint: no state dir: pass --state DIR or set FORKPOINT_STATE\n");
		goto fail;
	}
	v->sv.state_dir = realpath(dir, NULL);
	if (!v->sv.state_dir) {
		fprintf(stderr, "forkpoint: state dir %s: %s\n", dir, strerror(errno));
		goto fail;
	}
	free(def);
	def = NULL;
	const struct supervisor_opts so = { .read_only = 1, .tap = tap, .tap_arg = tap_arg };
	if (supervisor_open(&v->sv, &so, err, sizeof err) < 0) {
		fprintf(stderr, "forkpoint: %s\n", err);
		goto fail;
	}
	v->p = v->sv.persist;
	return 0;
fail:
	free(def);
	view_close(v);
	return -1;
}

/* Safe to call again, and after a failed view_open. */
static void view_close(struct view *v)
{
	supervisor_close(&v->sv);
	free(v->sv.state_dir);
	memset(v, 0, sizeof *v);
}

/* --raw, for the commands that print what jobs wrote: taken out of the arguments (a value
 * of --state excepted); 1 if it was there.  Taken out first so that parse_common need not
 * know about it, and a state dir that happens to be named --raw is still a state dir. */
static int take_raw(int *argc, char **argv)
{
	int raw = 0, n = 0;
	for (int i = 0; i < *argc; i++) {
		if (strcmp(argv[i], "--raw") == 0 && !(i > 0 && strcmp(argv[i - 1], "--state") == 0)) {
			raw = 1;
			continue;
		}
		argv[n++] = argv[i];
	}
	*argc = n;
	return raw;
}

/* What a job or a client controls, made safe for the terminal unless --raw (one line:
 * newlines and tabs are escaped too).  malloc'd; NULL when out of memory. */
static char *shown(const char *s, int raw)
{
	return raw ? strdup(s ? s : "") : termsafe_str(s, 0);
}

/* The options the commands share; a NULL out-pointer means the command does not take that
 * option, so it is refused as unexpected instead of silently ignored.  1 after --help (exit
 * 0), 2 on a usage error (exit 2), 0 to go on.  --new-head wins over --repair whatever
 * their order. */
static int parse_common(int argc, char **argv, const char **state, const char **id, int *follow,
                        int *repair, const char *usage)
{
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return 1;
		} else if (strcmp(argv[i], "--state") == 0 && i + 1 < argc) {
			*state = argv[++i];
		} else if (follow && (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--follow") == 0)) {
			*follow = 1;
		} else if (repair && strcmp(argv[i], "--repair") == 0) {
			if (*repair == 0)
				*repair = 1;
		} else if (repair && strcmp(argv[i], "--new-head") == 0) {
			*repair = JOURNAL_FSCK_NEW_HEAD;
		} else if (id && !*id && argv[i][0] != '-') {
			*id = argv[i];
		} else {
			fprintf(stderr, "forkpoint: unexpected argument '%s'\n\n%s", argv[i], usage);
			return 2;
		}
	}
	if (id && !*id) {
		fprintf(stderr, "forkpoint: TASK is required\n\n%s", usage);
		return 2;
	}
	return 0;
}

/* A clock that went backwards (or a record from the future) shows 0s rather than a
 * negative age. */
static void age(int64_t ms, char *out, size_t n)
{
	int64_t s = (loop_wall_ms() - ms) / 1000;
	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(out, n, "%llds", (long long)s);
	else if (s < 7200)
		snprintf(out, n, "%lldm", (long long)(s / 60));
	else if (s < 172800)
		snprintf(out, n, "%lldh", (long long)(s / 3600));
	else
		snprintf(out, n, "%lldd", (long long)(s / 86400));
}

/* A completed task shows full even if its job never reported 1.0; a negative fraction means
 * the job never reported one, and prints as blank padding so the columns stay aligned. */
static void bar(const struct task *t, char *out, size_t n)
{
	double f = t->status == TASK_COMPLETED ? 1.0 : t->fraction;
	if (f < 0) {
		snprintf(out, n, "%-16s", "");
		return;
	}
	char b[11];
	int k = (int)(f * 10 + 0.5);
	for (int i = 0; i < 10; i++)
		b[i] = i < k ? '#' : '.';
	b[10] = 0;
	snprintf(out, n, "[%s] %3d%%", b, (int)(f * 100 + 0.5));
}

/* Every string printed that a job or client chose goes through shown(): the journal is
 * written by untrusted jobs, and escape sequences in a tool name must not reach the
 * terminal of the operator listing tasks. */
int ops_ls(int argc, char **argv)
{
	static const char usage[] = "usage: forkpoint ls [--state DIR] [--raw]\n\nTasks, newest first: id, tool, status, progress, age.\n"
		"Text from the journal is shown with control characters escaped; --raw prints it as it is.\n";
	const char *state = NULL;
	int raw = take_raw(&argc, argv);
	int rc = parse_common(argc, argv, &state, NULL, NULL, NULL, usage);
	if (rc)
		return rc == 1 ? 0 : rc;
	/* A state dir that does not exist yet is the normal state before the first task, not
	 * an error: say so and succeed. */
	char *def = state ? NULL : ops_default_state_dir();
	const char *dir = state ? state : def;
	struct stat st;
	if (dir && lstat(dir, &st) < 0 && errno == ENOENT) {
		char *d = shown(dir, raw);
		printf("no tasks yet (state dir %s does not exist)\n", d ? d : "?");
		free(d);
		free(def);
		return 0;
	}
	free(def);
	struct view v;
	if (view_open(&v, state, NULL, NULL) < 0)
		return 1;
	printf("%-32s  %-20s  %-14s  %-16s  %s\n", "ID", "TOOL", "STATUS", "PROGRESS", "AGE");
	for (struct task *t = tasks_newest(v.sv.tasks); t; t = t->next) {
		char b[32], a[16];
		bar(t, b, sizeof b);
		age(t->created_ms, a, sizeof a);
		char *id = shown(t->id, raw), *tool = shown(t->tool_name, raw);
		printf("%-32s  %-20s  %-14s  %-16s  %s\n", id ? id : "?", tool ? termsafe_cut(tool, 20) : "?",
		       task_status_name(t->status), b, a);
		free(id);
		free(tool);
	}
	view_close(&v);
	return 0;
}

/* Find a task by id or unique prefix (at least 4 characters).  An ambiguous prefix finds
 * nothing rather than the newest match: acting on a task the user did not mean is worse
 * than asking for more characters. */
static struct task *lookup(struct view *v, const char *id)
{
	struct task *t = tasks_find(v->sv.tasks, id), *found = NULL;
	if (t)
		return t;
	size_t n = strlen(id);
	if (n < 4)
		return NULL;
	for (t = tasks_newest(v->sv.tasks); t; t = t->next) {
		if (strncmp(t->id, id, n) == 0) {
			if (found)
				return NULL;   /* ambiguous */
			found = t;
		}
	}
	return found;
}

struct timeline {
	const char *want;    /* id or prefix */
	int raw;             /* --raw: job text as it is */
	char *lines;
	size_t len, cap;
};

/* Called from the replay tap, which cannot fail, so on allocation failure the line is
 * dropped and the timeline is just shorter. */
static void tl_add(struct timeline *tl, const char *s)
{
	size_t n = strlen(s);
	if (tl->len + n + 1 > tl->cap) {
		size_t c = tl->cap ? tl->cap * 2 : 4096;
		while (c < tl->len + n + 1)
			c *= 2;
		char *d = realloc(tl->lines, c);
		if (!d)
			return;
		tl->lines = d;
		tl->cap = c;
	}
	memcpy(tl->lines + tl->len, s, n + 1);
	tl->len += n;
}

/* The persist tap sees every record as the view replays it, which is the only place the
 * history still exists: the task table keeps only the latest state.  A snapshot record
 * stands for everything before it and carries no time of its own, so the task's updated
 * time is shown.  Job text is cut to a bounded length before escaping, so one huge message
 * cannot blow up the output. */
static void tap(void *arg, const struct store_rec *r)
{
	struct timeline *tl = arg;
	if (strncmp(r->task_id, tl->want, strlen(tl->want)) != 0)
		return;
	int64_t at = r->type == STORE_REC_SNAP_TASK ? r->u.snap.updated : r->at;
	char ts[64], line[1700], detail[400] = "";
	views_iso_time(at, ts);
	const char *s = NULL;
	if (r->type == STORE_REC_START)
		snprintf(detail, sizeof detail, "attempt %lld", (long long)r->u.start.attempt);
	else if (r->type == STORE_REC_PROGRESS || r->type == STORE_REC_RETRY)
		s = r->type == STORE_REC_PROGRESS ? r->u.progress.msg : r->u.retry.msg;
	else if (r->type == STORE_REC_CHECKPOINT)
		snprintf(detail, sizeof detail, "seq %lld", (long long)r->u.checkpoint.seq);
	else if (r->type == STORE_REC_ASK && r->u.ask.qid)
		snprintf(detail, sizeof detail, "question %.100s", r->u.ask.qid);
	else if (r->type == STORE_REC_ANSWER && r->u.answer.qid)
		snprintf(detail, sizeof detail, "question %.100s", r->u.answer.qid);
	else if (r->type == STORE_REC_FINISH && r->u.finish.status)
		snprintf(detail, sizeof detail, "%.30s", r->u.finish.status);
	if (s)
		snprintf(detail, sizeof detail, "%.200s", s);
	/* The details are the job's words: one line each, whatever they hold. */
	char *d = shown(detail, tl->raw);
	snprintf(line, sizeof line, "  %s  %-10s %s\n", ts, store_rec_type_name(r->type), d ? d : "?");
	free(d);
	tl_add(tl, line);
}

/* key, then the value as indented JSON, its strings made safe for the terminal unless raw
 * (the escapes are JSON's own, so the text still parses to the same value). */
static void print_kv_json(const char *k, const cJSON *v, int raw)
{
	char *s = jsontext_pretty(v);
	char *safe = s && !raw ? termsafe_str(s, TERMSAFE_JSON | TERMSAFE_TEXT) : NULL;
	printf("%-12s %s\n", k, raw && s ? s : safe ? safe : "null");
	free(safe);
	free(s);
}

/* key, then a one-line value that a job or client controls. */
static void print_kv(const char *k, const char *prefix, const char *v, int raw)
{
	char *s = shown(v, raw);
	printf("%-12s %s%s\n", k, prefix, s ? s : "?");
	free(s);
}

/* Everything `show` prints about one task but its timeline.  Status names, times and
 * numbers are ours and printed as they are; every other string went through a job or a
 * client and goes through print_kv or print_kv_json. */
static void show_task(const struct view *v, const struct task *t, int raw)
{
	char ts[64];
	print_kv("task", "", t->id, raw);
	print_kv("tool", "", t->tool_name, raw);
	printf("%-12s %s\n", "status", task_status_name(t->status));
	printf("%-12s %d%s\n", "attempt", t->attempt, t->retries_used ? " (after retries)" : "");
	views_iso_time(t->created_ms, ts);
	printf("%-12s %s\n", "created", ts);
	views_iso_time(t->updated_ms, ts);
	printf("%-12s %s\n", "updated", ts);
	if (t->progress_msg || t->fraction >= 0) {
		char b[40];
		bar(t, b, sizeof b - 1);
		strcat(b, " ");
		print_kv("progress", b, t->progress_msg ? t->progress_msg : "", raw);
	}
	if (t->checkpoint || t->checkpoint_blob[0]) {
		/* Read-only views do not load blobs: take a blob's size from the file. */
		size_t len = t->checkpoint_len;
		uint64_t bsize;
		if (t->checkpoint_blob[0] && blobs_size(persist_blobs(v->p), t->checkpoint_blob, &bsize) == 0)
			len = (size_t)bsize;
		printf("%-12s seq %lld, %zu bytes%s%s\n", "checkpoint", (long long)t->checkpoint_seq,
		       len, t->checkpoint_blob[0] ? ", blob " : "", t->checkpoint_blob);
	}
	if (t->question_id) {
		char *qid = shown(t->question_id, raw);
		char pre[300];
		snprintf(pre, sizeof pre, "[%.280s] ", qid ? qid : "?");
		free(qid);
		print_kv("question", pre, t->question_prompt ? t->question_prompt : "", raw);
		if (t->question_choices)
			print_kv_json("choices", t->question_choices, raw);
	}
	print_kv_json("arguments", t->args, raw);
	if (t->sandbox)
		print_kv_json("sandbox", t->sandbox, raw);
	if (t->artifacts)
		print_kv_json("artifacts", t->artifacts, raw);
	if (t->result) {
		print_kv_json("result", t->result, raw);
	} else if (t->result_blob[0]) {
		/* Kept in the blob store: its size and summary (job text: shown like the rest). */
		char pre[200];
		snprintf(pre, sizeof pre, "%llu bytes of JSON in blob %s: ", (unsigned long long)t->result_bytes,
		         t->result_blob);
		print_kv("result", pre, t->result_summary ? t->result_summary : "a JSON value", raw);
	}
	if (t->error)
		print_kv_json("error", t->error, raw);
	if (TASK_TERMINAL(t->status)) {
		views_iso_time(t->expires_ms, ts);
		printf("%-12s %s\n", "expires", ts);
	}
}

/* The timeline is collected by the tap during view_open, before the task is looked up, so
 * the prefix in tl.want matches records of any task it starts; the lookup after replay is
 * what enforces one task.  An expired id is told apart from an unknown one by its
 * tombstone. */
int ops_show(int argc, char **argv)
{
	static const char usage[] = "usage: forkpoint show TASK [--state DIR] [--raw]\n\n"
		"One task: status, progress, question, result or error, and its event timeline.\n"
		"TASK is an id or a unique prefix of at least 4 characters.  Text that jobs and\n"
		"clients wrote is shown with control characters escaped; --raw prints it as it is.\n";
	const char *state = NULL, *id = NULL;
	int raw = take_raw(&argc, argv);
	int rc = parse_common(argc, argv, &state, &id, NULL, NULL, usage);
	if (rc)
		return rc == 1 ? 0 : rc;
	struct view v;
	struct timeline tl = { .want = id, .raw = raw };
	if (view_open(&v, state, tap, &tl) < 0) {
		free(tl.lines);
		return 1;
	}
	struct task *t = lookup(&v, id);
	if (!t) {
		int64_t until = tasks_tombstone_find(v.sv.tasks, id);
		if (until)
			fprintf(stderr, "forkpoint: expired task '%s'\n", id);
		else if (strlen(id) < 4)
			fprintf(stderr, "forkpoint: no task '%s' (a prefix needs at least 4 characters)\n", id);
		else
			fprintf(stderr, "forkpoint: no (or no unique) task '%s'\n", id);
		view_close(&v);
		free(tl.lines);
		return 1;
	}
	show_task(&v, t, raw);
	printf("timeline\n%s", tl.lines ? tl.lines : "");
	view_close(&v);
	free(tl.lines);
	return 0;
}

/* The one mutable global: a signal flag, the only kind the style allows. */
static volatile sig_atomic_t stop_follow;

static void on_int(int s)
{
	(void)s;
	stop_follow = 1;
}

/* Write n bytes of the log to stdout: escaped through ts into esc, or as they are when esc is
 * NULL (--raw).  <0 once stdout is gone. */
static int emit(struct termsafe *ts, char *esc, const char *buf, size_t n)
{
	if (!esc)
		return io_write_full(1, buf, n);
	size_t o = termsafe_feed(ts, buf, n, esc);
	return o ? io_write_full(1, esc, o) : 0;
}

/* The view is closed before the log is read, so following a log holds no journal view open
 * between polls (only the log's fd); the task's state is re-read from the journal once a
 * second to know when to stop.  O_NOFOLLOW keeps a symlink planted at the log's path from
 * making this command print another file. */
int ops_logs(int argc, char **argv)
{
	static const char usage[] = "usage: forkpoint logs TASK [-f] [--state DIR] [--raw]\n\n"
		"The job's captured stdout and stderr.  -f follows the log until the task finishes.\n"
		"Control characters, escape sequences and invalid UTF-8 are shown escaped (\\x1b),\n"
		"on a terminal and in a pipe alike; --raw writes the bytes as they are.\n";
	const char *state = NULL, *id = NULL;
	int follow = 0;
	int raw = take_raw(&argc, argv);
	int rc = parse_common(argc, argv, &state, &id, &follow, NULL, usage);
	if (rc)
		return rc == 1 ? 0 : rc;
	struct view v;
	if (view_open(&v, state, NULL, NULL) < 0)
		return 1;
	struct task *t = lookup(&v, id);
	if (!t) {
		fprintf(stderr, "forkpoint: no (or no unique) task '%s'\n", id);
		view_close(&v);
		return 1;
	}
	char path[4200], tid[33];
	memcpy(tid, t->id, sizeof tid);
	layout_task(path, sizeof path, v.sv.state_dir, tid, LAYOUT_TASK_LOG);
	char *dir = strdup(v.sv.state_dir);
	int terminal = TASK_TERMINAL(t->status);
	view_close(&v);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && !follow) {
		fprintf(stderr, "forkpoint: %s: %s (the job has not written anything yet?)\n", path, strerror(errno));
		free(dir);
		return 1;
	}
	char buf[65536];
	struct termsafe ts;
	termsafe_init(&ts, TERMSAFE_TEXT);
	char *esc = raw ? NULL : malloc(TERMSAFE_OUT_MAX(sizeof buf));
	if (!raw && !esc) {
		fprintf(stderr, "forkpoint: out of memory\n");
		if (fd >= 0)
			close(fd);
		free(dir);
		return 1;
	}
	signal(SIGINT, on_int);
	int64_t last_check = loop_now();
	for (;;) {
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : 0;
		if (n > 0) {
			if (emit(&ts, esc, buf, (size_t)n) < 0)
				break;
			continue;
		}
		if (!follow || stop_follow || terminal)
			break;
		poll(NULL, 0, 200);
		if (fd < 0)
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (loop_now() - last_check >= 1000) {
			/* Stop following once the task has finished (one more read drains the rest). */
			last_check = loop_now();
			if (view_open(&v, dir, NULL, NULL) == 0) {
				struct task *tt = tasks_find(v.sv.tasks, tid);
				/* A task that is gone (expired) ends the follow as well. */
				terminal = !tt || (TASK_TERMINAL(tt->status) && !tt->job);
			}
			view_close(&v);
		}
	}
	/* A sequence the log ends inside is shown as the bytes it is. */
	if (esc)
		(void)!io_write_full(1, esc, termsafe_flush(&ts, esc));
	free(esc);
	if (fd >= 0)
		close(fd);
	free(dir);
	return 0;
}

/* Two passes: the journal's own checks first (records, segments, snapshots), then a replay
 * that reads every referenced blob through blobs_get, which verifies its sha256.  A damaged
 * blob is reported, never repaired: the task that refers to it answers task_lost. */
int ops_fsck(int argc, char **argv)
{
	static const char usage[] = "usage: forkpoint fsck [--repair | --new-head] [--state DIR]\n\n"
		"Verify every journal record, the segment chain (nothing missing, duplicated or\n"
		"renumbered), every snapshot and every blob a task refers to, exactly as start-up does.\n"
		"--repair (which needs the state dir's lock, so no server may run) cuts a torn tail of the\n"
		"newest segment, keeping the removed bytes in a side file; damage anywhere else is\n"
		"reported with file and offset, never repaired.  --new-head (also with the lock) is for\n"
		"after cutting a damaged journal back by hand: it records the journal as it now is in\n"
		"journal/HEAD, accepting that what was cut is lost.  Exit 0 if clean (or repaired), 1 if\n"
		"damage remains.\n";
	const char *state = NULL;
	int repair = 0;
	int rc = parse_common(argc, argv, &state, NULL, NULL, &repair, usage);
	if (rc)
		return rc == 1 ? 0 : rc;
	char *def = state ? NULL : ops_default_state_dir();
	const char *dir = state ? state : def;
	if (!dir) {
		fprintf(stderr, "forkpoint: no state dir: pass --state DIR or set FORKPOINT_STATE\n");
		return 2;
	}
	char err[1024] = "";
	uint64_t records = 0;
	rc = journal_fsck(dir, repair, &records, err, sizeof err);
	if (rc < 0) {
		fprintf(stderr, "forkpoint: fsck: %s\n", err);
		free(def);
		return 1;
	}
	if (repair && err[0])
		printf("repaired: %s\n", err);
	printf("journal: %llu records, all checksums good\n", (unsigned long long)records);
	struct view v;
	if (view_open(&v, dir, NULL, NULL) < 0) {
		free(def);
		return 1;
	}
	int bad = 0;
	size_t nblobs = 0;
	for (struct task *t = tasks_newest(v.sv.tasks); t; t = t->next) {
		const char *refs[2] = { t->checkpoint_blob, t->result_blob };
		for (int i = 0; i < 2; i++) {
			if (!refs[i][0])
				continue;
			nblobs++;
			void *d;
			size_t n;
			int r = blobs_get(persist_blobs(v.p), refs[i], &d, &n);
			if (r < 0) {
				printf("task %s: %s blob %s: %s (the task answers task_lost)\n", t->id,
				       i ? "result" : "checkpoint", refs[i],
				       r == -EBADMSG ? "content does not match its sha256" : strerror(-r));
				bad = 1;
			} else {
				free(d);
			}
		}
	}
	printf("tasks: %zu, blobs referenced: %zu, %s\n", tasks_count(v.sv.tasks), nblobs,
	       bad ? "DAMAGED blobs listed above" : "all present and intact");
	view_close(&v);
	free(def);
	return bad ? 1 : 0;
}
