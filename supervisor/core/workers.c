/* supervisor/core/workers.c — see workers.h.
 *
 * One mutex guards two singly linked FIFOs: jobs waiting for a thread, and jobs whose run has
 * returned and whose done has not been called yet.  A thread that finishes a job moves it to
 * the second list and adds 1 to the eventfd; the loop callback reads the eventfd (which resets
 * it), takes the whole finished list under the lock and calls the done callbacks outside it,
 * so a done callback may submit again without deadlock. */
#include "supervisor/core/workers.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "supervisor/core/loop.h"

#define WORKERS_NICE 10   /* added to the workers' nice value (see worker_main) */

struct wjob {
	workers_run_fn run;
	workers_done_fn done;
	void *arg;
	struct wjob *next;
};

struct wlist {
	struct wjob *head, *tail;
};

struct workers {
	struct loop *loop;
	int efd;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct wlist queued, finished;
	atomic_int stopping;
	size_t pending;             /* submitted, done not yet called (loop thread only) */
	unsigned n_threads;
	pthread_t threads[WORKERS_MAX];
};

/* FIFO order, so jobs run and complete in the order they were submitted when one thread
 * serves them; callers that care about order (the copies of one task) submit one job. */
static void list_push(struct wlist *l, struct wjob *j)
{
	j->next = NULL;
	if (l->tail)
		l->tail->next = j;
	else
		l->head = j;
	l->tail = j;
}

/* The whole list at once, so the lock is held for two stores however many jobs finished. */
static struct wjob *list_take(struct wlist *l)
{
	struct wjob *j = l->head;
	l->head = l->tail = NULL;
	return j;
}

/* A worker: take the oldest queued job, run it without the lock, hand it to the loop.
 * Workers run at a lower CPU priority than the loop thread (nice is per thread on Linux):
 * on a busy host the loop, which every client and job waits on, must win the CPU over a
 * hash or a copy that only its own caller waits for.  A refusal (RLIMIT_NICE, seccomp) is
 * harmless: the worker just competes as an equal. */
static void *worker_main(void *arg)
{
	struct workers *w = arg;
	/* A thread starts at its creator's nice value; "lower" is relative to it (a supervisor
	 * started under nice 5 puts its workers at 15), and nice saturates at 19. */
	id_t self = (id_t)syscall(SYS_gettid);
	errno = 0;
	int base = getpriority(PRIO_PROCESS, self);
	if (base != -1 || errno == 0)
		(void)setpriority(PRIO_PROCESS, self, base + WORKERS_NICE > 19 ? 19 : base + WORKERS_NICE);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->queued.head && !atomic_load(&w->stopping))
			pthread_cond_wait(&w->cv, &w->mu);
		if (atomic_load(&w->stopping))
			break;
		struct wjob *j = w->queued.head;
		w->queued.head = j->next;
		if (!w->queued.head)
			w->queued.tail = NULL;
		pthread_mutex_unlock(&w->mu);
		j->run(w, j->arg);
		pthread_mutex_lock(&w->mu);
		list_push(&w->finished, j);
		uint64_t one = 1;
		/* Cannot fail short of a counter overflow (2^64 - 1 unread completions). */
		if (write(w->efd, &one, sizeof one) < 0) {
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Call the done callbacks of every finished job (loop thread). */
static size_t dispatch_finished(struct workers *w)
{
	uint64_t n;
	size_t count = 0;
	if (read(w->efd, &n, sizeof n) < 0) {
		/* EAGAIN: nothing signalled since the last read; the list may still hold jobs. */
	}
	pthread_mutex_lock(&w->mu);
	struct wjob *j = list_take(&w->finished);
	pthread_mutex_unlock(&w->mu);
	while (j) {
		struct wjob *next = j->next;
		w->pending--;
		j->done(j->arg, 1);
		free(j);
		j = next;
		count++;
	}
	return count;
}

/* The eventfd became readable: one or more jobs finished since the last turn. */
static void on_event(struct loop *l, int fd, uint32_t events, void *arg)
{
	(void)l;
	(void)fd;
	(void)events;
	dispatch_finished(arg);
}

/* Threads are created with every signal blocked (they inherit the mask), so the signals the
 * supervisor handles (SIGTERM, SIGINT, SIGHUP) are only ever taken by the loop's signalfd. */
int workers_new(struct loop *l, unsigned threads, struct workers **out)
{
	sigset_t all, old;
	int rc;
	*out = NULL;
	if (threads < 1 || threads > WORKERS_MAX)
		return -EINVAL;
	struct workers *w = calloc(1, sizeof *w);
	if (!w)
		return -ENOMEM;
	w->loop = l;
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0) {
		rc = -errno;
		free(w);
		return rc;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if ((rc = loop_add_fd(l, w->efd, EPOLLIN, on_event, w)) < 0)
		goto fail;
	/* Signals belong to the loop's signalfd: no worker may take one. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (; w->n_threads < threads; w->n_threads++) {
		if ((rc = -pthread_create(&w->threads[w->n_threads], NULL, worker_main, w)) < 0)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0)
		goto fail;
	*out = w;
	return 0;
fail:
	workers_free(w);
	return rc;
}

void workers_free(struct workers *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	atomic_store(&w->stopping, 1);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (unsigned i = 0; i < w->n_threads; i++)
		pthread_join(w->threads[i], NULL);
	dispatch_finished(w);
	for (struct wjob *j = list_take(&w->queued), *next; j; j = next) {
		next = j->next;
		j->done(j->arg, 0);
		free(j);
	}
	loop_del_fd(w->loop, w->efd);
	close(w->efd);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

/* pending is counted on the loop thread only, so it needs no atomics; a done callback that
 * submits again keeps the count right because dispatch decrements before calling done. */
int workers_submit(struct workers *w, workers_run_fn run, workers_done_fn done, void *arg)
{
	if (atomic_load(&w->stopping))
		return -ESHUTDOWN;
	struct wjob *j = calloc(1, sizeof *j);
	if (!j)
		return -ENOMEM;
	j->run = run;
	j->done = done;
	j->arg = arg;
	pthread_mutex_lock(&w->mu);
	list_push(&w->queued, j);
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	w->pending++;
	return 0;
}

size_t workers_pending(const struct workers *w)
{
	return w->pending;
}

int workers_stopping(struct workers *w)
{
	return atomic_load(&w->stopping);
}

/* For tests that drive the pool without running the loop: waits on the eventfd, then
 * dispatches as the loop would. */
size_t workers_wait(struct workers *w, int timeout_ms)
{
	struct pollfd p = { .fd = w->efd, .events = POLLIN };
	if (poll(&p, 1, timeout_ms) <= 0)
		return 0;
	return dispatch_finished(w);
}
