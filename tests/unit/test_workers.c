/* tests/unit/test_workers.c — supervisor/workers.c: jobs run off the loop thread and their done
 * callbacks run on it, through the loop; a done callback may submit again; the loop keeps
 * serving timers while a job blocks; workers_free drops queued jobs (done with ran=0), lets a
 * running one see workers_stopping() and finish, and calls every done exactly once.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "supervisor/core/workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/core/loop.h"
#include "check.h"

struct job {
	int id;
	pthread_t ran_on;
	int run_count, done_count, ran;
	int resubmit;                 /* done submits job `next` */
	struct job *next;
	struct workers *w;
	atomic_int *gate;             /* run blocks until *gate != 0, or the pool stops */
	int *order, *n_order;
	int started_fd;               /* > 0: run writes a byte here when it starts */
};

static void j_run(struct workers *w, void *arg)
{
	struct job *j = arg;
	j->ran_on = pthread_self();
	j->run_count++;
	if (j->started_fd > 0 && write(j->started_fd, "s", 1) != 1)
		check_die("write");
	while (j->gate && !atomic_load(j->gate) && !workers_stopping(w))
		usleep(1000);
}

static void j_done(void *arg, int ran)
{
	struct job *j = arg;
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
	struct job jobs[20];
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
	struct job slow = { .id = 100, .gate = &gate };
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
	struct job blocker = { .id = 1, .gate = &gate, .started_fd = p[1] };
	struct job queued[5];
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

int main(void)
{
	struct tally t = { 0, 0 };
	t_basic(&t);
	t_shutdown(&t);
	return check_done(&t);
}
