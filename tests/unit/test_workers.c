/* tests/unit/test_workers.c — supervisor/workers.c and the work it takes off the loop.
 *
 * The pool: jobs run off the loop thread, at a lower CPU priority, and their done callbacks run
 * on it, through the loop; a done callback may submit again; the loop keeps serving timers
 * while a job blocks; workers_free drops queued jobs (done with ran=0), lets a running one see
 * workers_stopping() and finish, and calls every done exactly once.
 *
 * Tree removal (rmtree.c): done on the pool, never following a symlink out of the tree; inline
 * without a pool, and inline at shutdown for a removal still queued.
 *
 * Input copies (inputs.c): made on the pool, read-only, in order; the first that fails stops
 * the rest, leaves no temp file and names its argument; dropped at shutdown (-ECANCELED);
 * inline without a pool.
 *
 * Checkpoints (ckpt.c, with job_pause in job.c), on a supervisor built by hand with a real
 * journal and a real job (this binary in its "job" mode, which sends a checkpoint frame and a
 * result frame at once and exits): while the blob write is held on the worker (the blob store's
 * fault hook, called on the worker thread, waits for the test), the loop answers, the task
 * keeps its old checkpoint, and neither the result frame nor the job's exit overtakes the
 * checkpoint; once released, the checkpoint record precedes the finish record in the journal.
 * A write that fails ends the task with internal_error and records no checkpoint; a blob
 * whose temp file vanished (a compaction collected it) is written again.  A task whose input copy
 * waits on the pool holds its slot without a job; cancelled meanwhile, it never starts one.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "supervisor/core/workers.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/frame.h"
#include "proto/io.h"
#include "runner/sandbox/sandbox.h"
#include "state/blob.h"
#include "supervisor/core/config.h"
#include "supervisor/core/inputs.h"
#include "supervisor/core/job.h"
#include "supervisor/core/loop.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/rmtree.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "check.h"

struct tjob {
	int id;
	pthread_t ran_on;
	int run_count, done_count, ran;
	int resubmit;                 /* done submits job `next` */
	struct tjob *next;
	struct workers *w;
	atomic_int *gate;             /* run blocks until *gate != 0, or the pool stops */
	int *order, *n_order;
	int started_fd;               /* > 0: run writes a byte here when it starts */
};

static void j_run(struct workers *w, void *arg)
{
	struct tjob *j = arg;
	j->ran_on = pthread_self();
	j->run_count++;
	if (j->started_fd > 0 && write(j->started_fd, "s", 1) != 1)
		check_die("write");
	while (j->gate && !atomic_load(j->gate) && !workers_stopping(w))
		usleep(1000);
}

static void j_done(void *arg, int ran)
{
	struct tjob *j = arg;
	j->done_count++;
	j->ran = ran;
	if (j->order)
		j->order[(*j->n_order)++] = j->id;
	if (j->resubmit && j->next)
		workers_submit(j->w, j_run, j_done, j->next);
}

static void on_tick(struct loop *l, void *arg)
{
	(void)l;
	(*(int *)arg)++;
}

/* Turn the loop until every job submitted has had its done, or 5 s pass. */
static int drain(struct loop *l, struct workers *w)
{
	int64_t end = loop_now() + 5000;
	while (workers_pending(w) && loop_now() < end)
		loop_run_once(l, 100);
	return workers_pending(w) == 0;
}

static void t_basic(struct tally *t)
{
	struct loop *l = loop_new();
	struct workers *w = NULL;
	CHECK(t, workers_new(l, 0, &w) == -EINVAL && !w, "0 threads is refused");
	CHECK(t, workers_new(l, 2, &w) == 0 && w, "a pool of 2 threads");
	struct tjob jobs[20];
	int order[40], n = 0;
	memset(jobs, 0, sizeof jobs);
	for (int i = 0; i < 20; i++) {
		jobs[i].id = i;
		jobs[i].w = w;
		jobs[i].order = order;
		jobs[i].n_order = &n;
	}
	/* job 0's done submits job 19 */
	jobs[0].resubmit = 1;
	jobs[0].next = &jobs[19];
	for (int i = 0; i < 19; i++)
		workers_submit(w, j_run, j_done, &jobs[i]);
	CHECK(t, drain(l, w), "every done ran, through the loop");
	int once = 1, off_loop = 1;
	for (int i = 0; i < 20; i++) {
		once &= jobs[i].run_count == 1 && jobs[i].done_count == 1 && jobs[i].ran == 1;
		off_loop &= !pthread_equal(jobs[i].ran_on, pthread_self());
	}
	CHECK(t, once && n == 20, "each job ran once and its done was called once (one submitted from a done)");
	CHECK(t, off_loop, "run happens on a worker thread, never the loop's");

	/* A blocked job does not block the loop: a timer fires while it waits. */
	atomic_int gate = 0;
	struct tjob slow = { .id = 100, .gate = &gate };
	int ticks = 0;
	workers_submit(w, j_run, j_done, &slow);
	loop_timer_in(l, 10, on_tick, &ticks);
	int64_t end = loop_now() + 5000;
	while (!ticks && loop_now() < end)
		loop_run_once(l, 100);
	CHECK(t, ticks == 1 && slow.done_count == 0, "the loop serves timers while a job blocks");
	atomic_store(&gate, 1);
	CHECK(t, drain(l, w) && slow.done_count == 1, "the blocked job's done arrives once it returns");
	CHECK(t, workers_wait(w, 0) == 0, "workers_wait with nothing finished returns at once");
	workers_free(w);
	loop_free(l);
}

static void t_shutdown(struct tally *t)
{
	struct loop *l = loop_new();
	struct workers *w = NULL;
	if (workers_new(l, 1, &w) < 0)
		check_die("workers_new");
	atomic_int gate = 0;
	int p[2];
	if (pipe(p) < 0)
		check_die("pipe");
	struct tjob blocker = { .id = 1, .gate = &gate, .started_fd = p[1] };
	struct tjob queued[5];
	memset(queued, 0, sizeof queued);
	workers_submit(w, j_run, j_done, &blocker);
	for (int i = 0; i < 5; i++)
		workers_submit(w, j_run, j_done, &queued[i]);
	/* Wait until the one thread has taken the blocker. */
	char c;
	if (read(p[0], &c, 1) != 1)
		check_die("read");
	workers_free(w);   /* the blocker sees workers_stopping() and returns */
	int dropped = 1;
	for (int i = 0; i < 5; i++)
		dropped &= queued[i].run_count == 0 && queued[i].done_count == 1 && queued[i].ran == 0;
	CHECK(t, blocker.run_count == 1 && blocker.done_count == 1 && blocker.ran == 1,
	      "workers_free waits for the running job, which saw workers_stopping, and calls its done");
	CHECK(t, dropped, "queued jobs are dropped: done(ran=0) once each, never run");
	close(p[0]);
	close(p[1]);
	loop_free(l);
}

/* ---- priority --------------------------------------------------------------------- */

static void nice_run(struct workers *w, void *arg)
{
	(void)w;
	errno = 0;
	int n = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	*(int *)arg = errno ? -100 : n;
}

static void nice_done(void *arg, int ran)
{
	(void)arg;
	(void)ran;
}

static void t_priority(struct tally *t)
{
	struct loop *l = loop_new();
	struct workers *w = NULL;
	if (!l || workers_new(l, 1, &w) < 0)
		check_die("workers_new");
	int worker_nice = -100;
	errno = 0;
	int loop_nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	workers_submit(w, nice_run, nice_done, &worker_nice);
	CHECK(t, drain(l, w), "the priority probe ran");
	/* nice saturates at 19: a loop already near it leaves the workers less room. */
	int want = loop_nice + 10 > 19 ? 19 : loop_nice + 10;
	CHECKF(t, worker_nice == want, "a worker runs at nice %d, the loop at %d", worker_nice, loop_nice);
	workers_free(w);
	loop_free(l);
}

/* ---- tree removal --------------------------------------------------------------------- */

static int exists(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0;
}

/* dir/tree with files, a nested folder, and a link to a file outside it. */
static void make_tree(const char *dir, char *tree, size_t n)
{
	char p[PATH_MAX];
	snprintf(tree, n, "%s/tree", dir);
	check_mkdir(tree);
	snprintf(p, sizeof p, "%s/a", tree);
	check_mkdir(p);
	snprintf(p, sizeof p, "%s/a/b", tree);
	check_mkdir(p);
	for (int i = 0; i < 50; i++) {
		snprintf(p, sizeof p, "%s/a/b/f%d", tree, i);
		check_put(p, "x", 1);
	}
	snprintf(p, sizeof p, "%s/outside", dir);
	check_put(p, "keep", 4);
	char link[PATH_MAX];
	snprintf(link, sizeof link, "%s/a/link", tree);
	if (symlink(p, link) < 0)
		check_die("symlink");
}

static void t_rmtree(struct tally *t)
{
	char dir[256], tree[300], outside[300];
	check_tmpdir(dir, sizeof dir, "rmtree");
	snprintf(outside, sizeof outside, "%s/outside", dir);
	struct supervisor sv;
	memset(&sv, 0, sizeof sv);
	sv.loop = loop_new();
	if (!sv.loop || workers_new(sv.loop, 1, &sv.workers) < 0)
		check_die("workers_new");

	make_tree(dir, tree, sizeof tree);
	rmtree_later(&sv, tree);
	CHECK(t, workers_pending(sv.workers) == 1, "the removal is queued on the pool, not done inline");
	CHECK(t, drain(sv.loop, sv.workers) && !exists(tree), "the pool removes the whole tree");
	CHECK(t, exists(outside), "the file a link in the tree pointed to is untouched");

	/* Queued behind a job that blocks until the pool stops: done inline by workers_free. */
	make_tree(dir, tree, sizeof tree);
	atomic_int gate = 0;
	int p[2];
	if (pipe(p) < 0)
		check_die("pipe");
	struct tjob blocker = { .id = 1, .gate = &gate, .started_fd = p[1] };
	workers_submit(sv.workers, j_run, j_done, &blocker);
	char c;
	if (read(p[0], &c, 1) != 1)
		check_die("read");
	rmtree_later(&sv, tree);
	CHECK(t, exists(tree), "a removal queued behind a busy worker has not run");
	workers_free(sv.workers);
	sv.workers = NULL;
	CHECK(t, !exists(tree) && exists(outside), "a removal the stopping pool dropped is done at once");
	close(p[0]);
	close(p[1]);

	make_tree(dir, tree, sizeof tree);
	rmtree_later(&sv, tree);
	CHECK(t, !exists(tree), "without a pool the tree is removed inline");
	loop_free(sv.loop);
	check_rm_rf(dir);
}

/* ---- input copies --------------------------------------------------------------------- */

struct copied {
	int calls, rc;
	char id[40];
	char *msg, *code;
};

static void copied_cb(void *arg, const char *task_id, int rc, cJSON *env)
{
	struct copied *c = arg;
	c->calls++;
	c->rc = rc;
	snprintf(c->id, sizeof c->id, "%s", task_id);
	free(c->msg);
	free(c->code);
	const char *m = cJSON_GetStringValue(cJSON_GetObjectItem(env, "message"));
	const char *k = cJSON_GetStringValue(cJSON_GetObjectItem(env, "code"));
	c->msg = m ? strdup(m) : NULL;
	c->code = k ? strdup(k) : NULL;
	cJSON_Delete(env);
}

/* path holds exactly the n bytes of want and has the given mode. */
static int same_file(const char *path, const unsigned char *want, size_t n, mode_t mode)
{
	struct stat st;
	unsigned char *got = malloc(n + 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ok = got && fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 07777) == mode &&
	         (size_t)st.st_size == n && io_read_upto(fd, got, n + 1) == (ssize_t)n && memcmp(got, want, n) == 0;
	if (fd >= 0)
		close(fd);
	free(got);
	return ok;
}

static void t_inputs(struct tally *t)
{
	char dir[256], path[400], in[300];
	check_tmpdir(dir, sizeof dir, "inputs");
	snprintf(in, sizeof in, "%s/in", dir);
	check_mkdir(in);
	size_t n = 3u << 20;
	unsigned char *data = malloc(n);
	if (!data)
		check_die("malloc");
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i * 7 + i / 4096);
	snprintf(path, sizeof path, "%s/src.bin", dir);
	check_put(path, data, n);
	int src = open(path, O_RDONLY | O_CLOEXEC), bad = open(path, O_WRONLY | O_CLOEXEC);
	int dfd = open(in, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (src < 0 || bad < 0 || dfd < 0)
		check_die("open");
	struct supervisor sv;
	memset(&sv, 0, sizeof sv);
	sv.loop = loop_new();
	if (!sv.loop || workers_new(sv.loop, 1, &sv.workers) < 0)
		check_die("workers_new");

	struct inputs *l = NULL;
	struct copied c = { 0 };
	CHECK(t, inputs_add(&l, src, (int64_t)n, dfd, "a.bin", "data") == 0 &&
	         inputs_add(&l, src, 100, dfd, "b.bin", "head") == 0, "two copies noted");
	inputs_run(&sv, l, "task1", copied_cb, &c);
	CHECK(t, c.calls == 0 && workers_pending(sv.workers) == 1, "the copies run on the pool, not inline");
	snprintf(path, sizeof path, "%s/a.bin", in);
	CHECK(t, drain(sv.loop, sv.workers) && c.calls == 1 && c.rc == 0 && strcmp(c.id, "task1") == 0,
	      "done once, on the loop, with the task's id and 0");
	CHECK(t, same_file(path, data, n, 0444), "the copy has the bytes, read-only");
	snprintf(path, sizeof path, "%s/b.bin", in);
	CHECK(t, same_file(path, data, 100, 0444), "the second copy, of the first 100 bytes");

	/* A source that cannot be read: the copies stop there, and the envelope names its argument. */
	l = NULL;
	c.calls = 0;
	CHECK(t, inputs_add(&l, bad, (int64_t)n, dfd, "c.bin", "broken") == 0 &&
	         inputs_add(&l, src, 10, dfd, "d.bin", "after") == 0, "a bad copy, then a good one");
	inputs_run(&sv, l, "task2", copied_cb, &c);
	CHECK(t, drain(sv.loop, sv.workers) && c.calls == 1 && c.rc < 0, "a failed copy is reported");
	CHECKF(t, c.code && strcmp(c.code, "internal_error") == 0 && c.msg && strstr(c.msg, "argument broken"),
	       "internal_error naming the argument: %s", c.msg ? c.msg : "(none)");
	snprintf(path, sizeof path, "%s/d.bin", in);
	CHECK(t, !exists(path), "the copies after the failed one are not made");
	snprintf(path, sizeof path, "%s/.c.bin.tmp", in);
	CHECK(t, !exists(path), "the failed copy leaves no temp file");

	/* Queued when the pool stops: -ECANCELED, nothing copied. */
	atomic_int gate = 0;
	int p[2];
	if (pipe(p) < 0)
		check_die("pipe");
	struct tjob blocker = { .id = 1, .gate = &gate, .started_fd = p[1] };
	workers_submit(sv.workers, j_run, j_done, &blocker);
	char ch;
	if (read(p[0], &ch, 1) != 1)
		check_die("read");
	l = NULL;
	c.calls = 0;
	inputs_add(&l, src, (int64_t)n, dfd, "e.bin", "late");
	inputs_run(&sv, l, "task3", copied_cb, &c);
	workers_free(sv.workers);
	sv.workers = NULL;
	snprintf(path, sizeof path, "%s/e.bin", in);
	CHECK(t, c.calls == 1 && c.rc == -ECANCELED && !exists(path), "dropped at shutdown: -ECANCELED, no copy");
	close(p[0]);
	close(p[1]);

	/* No pool: at once. */
	l = NULL;
	c.calls = 0;
	inputs_add(&l, src, 5, dfd, "f.bin", "now");
	inputs_run(&sv, l, "task4", copied_cb, &c);
	snprintf(path, sizeof path, "%s/f.bin", in);
	CHECK(t, c.calls == 1 && c.rc == 0 && same_file(path, data, 5, 0444), "without a pool the copy is made inline");

	free(c.msg);
	free(c.code);
	free(data);
	close(src);
	close(bad);
	close(dfd);
	loop_free(sv.loop);
	check_rm_rf(dir);
}

/* ---- checkpoints off the loop ------------------------------------------------------------- */

#define CKPT_BYTES (64u << 10)

/* The job mode of this binary: a checkpoint frame and a result frame, sent without waiting
 * for any answer, then exit.  A real job (libforkpoint) waits for "checkpointed"; a raw one
 * may not, and its result must still come after its checkpoint. */
static int job_mode(void)
{
	const char *fds = getenv("FORKPOINT_FD");
	int fd = fds ? atoi(fds) : -1;
	unsigned char *data = malloc(CKPT_BYTES);
	msgpack_sbuffer sb;
	msgpack_packer pk;
	if (fd < 0 || !data)
		return 2;
	memset(data, 'k', CKPT_BYTES);
	frame_begin(&sb, &pk);
	msgpack_pack_map(&pk, 3);
	frame_pack_kv_str(&pk, "type", "checkpoint");
	frame_pack_kv_int(&pk, "seq", 7);
	frame_pack_kv_bin(&pk, "data", data, CKPT_BYTES);
	if (frame_finish(&sb) < 0 || io_write_full(fd, sb.data, sb.size) < 0)
		return 1;
	msgpack_sbuffer_destroy(&sb);
	frame_begin(&sb, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", "result");
	frame_pack_kv_str(&pk, "value", "done");
	if (frame_finish(&sb) < 0 || io_write_full(fd, sb.data, sb.size) < 0)
		return 1;
	msgpack_sbuffer_destroy(&sb);
	free(data);
	return 0;
}

/* The blob store's fault hook, on the worker thread: wait while held (3 s at most), then fail the step
 * named by fail_step with fail_rc (fail_times times). */
struct fault {
	atomic_int held;
	atomic_int writes;           /* "write" steps seen */
	const char *fail_step;
	int fail_rc;
	atomic_int fail_times;
};

static int fault_hook(void *arg, const char *step)
{
	struct fault *f = arg;
	if (strcmp(step, "write") == 0)
		atomic_fetch_add(&f->writes, 1);
	/* Bounded: if the write is ever done on the loop thread again, the test must fail, not hang. */
	for (int64_t end = loop_now() + 3000; atomic_load(&f->held) && loop_now() < end;)
		usleep(1000);
	if (f->fail_step && strcmp(step, f->fail_step) == 0 && atomic_load(&f->fail_times) > 0) {
		atomic_fetch_sub(&f->fail_times, 1);
		return f->fail_rc;
	}
	return 0;
}

struct ck_env {
	char dir[256], state[300], bin[PATH_MAX];
	struct supervisor sv;
};

static void ck_turn(struct loop *l, void *arg)
{
	struct supervisor *sv = arg;
	(void)l;
	if (persist_commit(sv->persist) == 0)
		tasks_release(sv->tasks);
}

static void ck_open(struct ck_env *e, const char *exe)
{
	char cfg[2 * PATH_MAX + 800], path[PATH_MAX], err[512];
	memset(&e->sv, 0, sizeof e->sv);
	snprintf(cfg, sizeof cfg, "{\"server\":{\"fileRoots\":[\"./data\"]},"
	         "\"tools\":[{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\"},"
	         "\"command\":[\"%s\",\"job\"],\"sandbox\":{\"profile\":\"none\"}},"
	         "{\"name\":\"takes\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"file\":"
	         "{\"type\":\"string\",\"format\":\"forkpoint-upload\"}}},"
	         "\"command\":[\"%s\",\"job\"],\"sandbox\":{\"profile\":\"none\"}}]}", exe, exe);
	snprintf(path, sizeof path, "%s/config.json", e->dir);
	check_put(path, cfg, strlen(cfg));
	fplog_init(&e->sv.log, 2, FPLOG_CRITICAL);
	if (config_load(path, &e->sv.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "config: %s\n", err);
		exit(2);
	}
	e->sv.state_dir = e->state;
	e->sv.bin_dir = e->bin;
	e->sv.loop = loop_new();
	if (!e->sv.loop || workers_new(e->sv.loop, 1, &e->sv.workers) < 0 || !(e->sv.tasks = tasks_new(&e->sv)) ||
	    !(e->sv.transfers = transfers_new(&e->sv)))
		check_die("setup");
	if (persist_open(&e->sv, 0, &e->sv.persist, err, sizeof err) < 0) {
		fprintf(stderr, "persist_open: %s\n", err);
		exit(2);
	}
	loop_set_turn_hook(e->sv.loop, ck_turn, &e->sv);
}

static void ck_close(struct ck_env *e)
{
	workers_free(e->sv.workers);
	tasks_free(e->sv.tasks);
	persist_close(e->sv.persist);
	transfers_free(e->sv.transfers);
	sandbox_free(e->sv.sandbox);
	loop_free(e->sv.loop);
	config_free(e->sv.cfg);
}

/* Turn the loop until cond(arg) holds or 10 s pass. */
static int turn_until(struct ck_env *e, int (*cond)(const void *), const void *arg)
{
	int64_t end = loop_now() + 10000;
	while (!cond(arg) && loop_now() < end)
		loop_run_once(e->sv.loop, 20);
	return cond(arg);
}

/* Ended, and its job reaped (what is recorded at the end is then in the journal). */
static int is_terminal(const void *arg)
{
	const struct task *t = arg;
	return TASK_TERMINAL(t->status) && !t->job;
}

static int writes_seen(const void *arg)
{
	return atomic_load(&((struct fault *)arg)->writes) > 0;
}

/* The job's process is gone (reaped by the supervisor: kill fails with ESRCH). */
static int pid_gone(const void *arg)
{
	return kill(*(const pid_t *)arg, 0) < 0 && errno == ESRCH;
}

/* The journal's record names for one task, in order, as "created,started,...". */
struct tap_acc {
	const char *id;
	char names[400];
	char blob[BLOB_HEX_LEN + 1];   /* the last checkpoint record's blob name */
};

static void tap_rec(void *arg, const struct store_rec *rec)
{
	struct tap_acc *a = arg;
	if (strcmp(rec->task_id, a->id) != 0)
		return;
	if (rec->type == STORE_REC_CHECKPOINT && rec->u.checkpoint.ckpt.blob)
		snprintf(a->blob, sizeof a->blob, "%s", rec->u.checkpoint.ckpt.blob);
	size_t n = strlen(a->names);
	snprintf(a->names + n, sizeof a->names - n, "%s%s", n ? "," : "", persist_type_name(rec->type));
}

static void journal_names(struct ck_env *e, const char *id, struct tap_acc *a)
{
	char err[512];
	struct persist *p = NULL;
	struct supervisor sv = e->sv;
	memset(a, 0, sizeof *a);
	a->id = id;
	/* What the last fd callback appended is committed by the next turn's hook: now. */
	if (persist_commit(e->sv.persist) < 0)
		check_die("persist_commit");
	sv.tasks = tasks_new(&sv);
	if (!sv.tasks || persist_open_tap(&sv, 1, tap_rec, a, &p, err, sizeof err) < 0)
		check_die("persist_open_tap");
	persist_close(p);
	tasks_free(sv.tasks);
}

/* Start the job's task with the fault hook set; returns it once its write has begun. */
static struct task *ck_start(struct tally *t, struct ck_env *e, struct fault *f)
{
	struct blobs *bs = persist_blobs(e->sv.persist);
	bs->fault = fault_hook;
	bs->fault_arg = f;
	struct task *tk = NULL;
	int rc = tasks_create(e->sv.tasks, &e->sv.cfg->tools[0], cJSON_CreateObject(), &tk);
	ck_turn(e->sv.loop, &e->sv);   /* the end of the turn: its job starts once it is durable */
	CHECKF(t, rc == 0 && tk && tk->job, "the task starts its job: %d", rc);
	if (!tk || !tk->job)
		return NULL;
	CHECK(t, turn_until(e, writes_seen, f), "the checkpoint's blob write reaches the worker");
	return tk;
}

static void t_ckpt_order(struct tally *t, struct ck_env *e)
{
	struct fault f = { .held = 1 };
	struct task *tk = ck_start(t, e, &f);
	if (!tk)
		return;
	char id[33];
	memcpy(id, tk->id, sizeof id);
	pid_t pid = job_pid(tk->job);
	/* The job has sent its result and exited; the supervisor has reaped it. */
	CHECK(t, turn_until(e, pid_gone, &pid), "the loop runs on while the write is held; the job exits");
	CHECK(t, tk->status == TASK_WORKING && !tk->result_held && tk->job,
	      "held: the result frame and the job's end wait behind the checkpoint");
	CHECK(t, tk->checkpoint == NULL && tk->checkpoint_seq == 0 && !tk->checkpoint_blob[0],
	      "held: the task still has its old checkpoint (none)");
	atomic_store(&f.held, 0);
	CHECK(t, turn_until(e, is_terminal, tk), "released: the task ends");
	CHECKF(t, tk->status == TASK_COMPLETED, "the task completed (status %d)", (int)tk->status);
	CHECK(t, atomic_load(&f.writes) == 1, "one blob write");
	struct tap_acc a;
	journal_names(e, id, &a);
	CHECKF(t, strcmp(a.names, "created,started,checkpoint,finished") == 0,
	       "the checkpoint record comes before the finish: %s", a.names);
	char hex[BLOB_HEX_LEN + 1];
	unsigned char *want = malloc(CKPT_BYTES);
	if (!want)
		check_die("malloc");
	memset(want, 'k', CKPT_BYTES);
	blob_sha256_hex(want, CKPT_BYTES, hex);
	free(want);
	CHECKF(t, strcmp(a.blob, hex) == 0, "the record names the blob of the bytes the job sent (%s)", a.blob);
}

static void t_ckpt_fail(struct tally *t, struct ck_env *e)
{
	struct fault f = { .held = 0, .fail_step = "fsync", .fail_rc = -EIO, .fail_times = 1 };
	struct task *tk = ck_start(t, e, &f);
	if (!tk)
		return;
	char id[33];
	memcpy(id, tk->id, sizeof id);
	CHECK(t, turn_until(e, is_terminal, tk), "a failed write ends the task");
	const char *code = cJSON_GetStringValue(cJSON_GetObjectItem(tk->error, "code"));
	const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(tk->error, "message"));
	CHECKF(t, tk->status == TASK_FAILED && code && strcmp(code, "internal_error") == 0 && msg &&
	          strstr(msg, "could not be stored"), "failed with internal_error: %s", msg ? msg : "(none)");
	struct tap_acc a;
	journal_names(e, id, &a);
	CHECKF(t, strcmp(a.names, "created,started,finished") == 0, "no checkpoint was recorded: %s", a.names);
}

static void t_ckpt_vanished(struct tally *t, struct ck_env *e)
{
	/* The first rename finds its temp file gone (as after a compaction's collection). */
	struct fault f = { .held = 0, .fail_step = "rename", .fail_rc = -ENOENT, .fail_times = 1 };
	struct task *tk = ck_start(t, e, &f);
	if (!tk)
		return;
	char id[33];
	memcpy(id, tk->id, sizeof id);
	CHECK(t, turn_until(e, is_terminal, tk), "the task ends");
	CHECKF(t, tk->status == TASK_COMPLETED && atomic_load(&f.writes) == 2,
	       "the blob is written again and the task completes (status %d, %d writes)", (int)tk->status,
	       atomic_load(&f.writes));
	struct tap_acc a;
	journal_names(e, id, &a);
	CHECKF(t, strcmp(a.names, "created,started,checkpoint,finished") == 0, "records: %s", a.names);
}

static int has_job(const void *arg)
{
	const struct task *t = arg;
	return t->job != NULL || TASK_TERMINAL(t->status);
}

/* A task whose input copy waits on the pool holds its slot and has no job; cancelled
 * meanwhile, it never starts one, and the slot goes to the next task once the copy is done. */
static void t_inputs_task(struct tally *t, struct ck_env *e)
{
	char path[PATH_MAX + 64];
	persist_blobs(e->sv.persist)->fault = NULL;
	e->sv.cfg->server.max_concurrent = 1;
	snprintf(path, sizeof path, "%s/data/in.bin", e->dir);
	check_put(path, "hello", 5);
	atomic_int gate = 0;
	int p[2];
	if (pipe(p) < 0)
		check_die("pipe");
	struct tjob blocker = { .id = 1, .gate = &gate, .started_fd = p[1] };
	workers_submit(e->sv.workers, j_run, j_done, &blocker);
	char c;
	if (read(p[0], &c, 1) != 1)
		check_die("read");
	cJSON *args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "file", "in.bin");
	struct task *a = NULL, *b = NULL;
	int rc = tasks_create(e->sv.tasks, &e->sv.cfg->tools[1], args, &a);
	ck_turn(e->sv.loop, &e->sv);   /* the end of the turn: it starts once it is durable */
	CHECKF(t, rc == 0 && a, "a task with an input file: %d", rc);
	if (!a)
		return;
	CHECK(t, a->status == TASK_WORKING && !a->job && !a->queued, "its copy is queued on the pool; no job yet");
	rc = tasks_create(e->sv.tasks, &e->sv.cfg->tools[0], cJSON_CreateObject(), &b);
	ck_turn(e->sv.loop, &e->sv);
	CHECK(t, rc == 0 && b && b->queued && !b->job, "the next task waits: the copying one holds the only slot");
	CHECK(t, tasks_cancel(e->sv.tasks, a, "test") == 0 && a->status == TASK_CANCELLED, "cancelled while copying");
	CHECK(t, b && b->queued, "the slot stays taken until the copy is done");
	atomic_store(&gate, 1);
	CHECK(t, b && turn_until(e, has_job, b), "once the copy is done the next task starts");
	snprintf(path, sizeof path, "%s/tasks/%s/output.log", e->state, a->id);
	CHECK(t, !a->job && a->status == TASK_CANCELLED && !exists(path), "the cancelled task never started its job");
	if (b)
		CHECK(t, turn_until(e, is_terminal, b), "the next task ends");
	close(p[0]);
	close(p[1]);
}

static void t_ckpt(struct tally *t)
{
	struct ck_env e;
	char exe[PATH_MAX], data[300];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		check_die("readlink /proc/self/exe");
	exe[n] = 0;
	/* build/tests/test_workers: the binaries (forkpoint-job) are in build/. */
	snprintf(e.bin, sizeof e.bin, "%s", exe);
	snprintf(e.bin, sizeof e.bin, "%s", dirname(dirname(e.bin)));
	check_tmpdir(e.dir, sizeof e.dir, "ckpt");
	snprintf(e.state, sizeof e.state, "%s/state", e.dir);
	check_mkdir(e.state);
	snprintf(data, sizeof data, "%s/data", e.dir);
	check_mkdir(data);
	ck_open(&e, exe);
	t_ckpt_order(t, &e);
	t_ckpt_fail(t, &e);
	t_ckpt_vanished(t, &e);
	t_inputs_task(t, &e);
	ck_close(&e);
	check_rm_rf(e.dir);
}
int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "job") == 0)
		return job_mode();
	struct tally t = { 0, 0 };
	t_basic(&t);
	t_shutdown(&t);
	t_priority(&t);
	t_rmtree(&t);
	t_inputs(&t);
	t_ckpt(&t);
	return check_done(&t);
}
