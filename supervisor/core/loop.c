/* supervisor/core/loop.c — see loop.h.
 *
 * fds are kept in a table indexed by fd number with a generation counter packed into the
 * epoll cookie, so an fd deleted (and maybe reused) by an earlier callback in the same turn
 * never receives a stale event.  Timers live in a binary min-heap; cancelled timers stay in
 * the heap marked dead and are freed when they reach the top (lazy deletion keeps cancel O(1)
 * without back-pointers into the heap). */
#include "supervisor/core/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

struct fd_slot {
	loop_fd_cb cb;
	void *arg;
	uint32_t gen;
	int used;
};

struct loop_timer {
	int64_t when;
	uint64_t seq;        /* FIFO order among timers due at the same ms */
	loop_timer_cb cb;
	void *arg;
	int dead;
};

struct loop {
	int epfd;
	int stop;
	struct fd_slot *fds;
	size_t nfds;
	struct loop_timer **heap;
	size_t nheap, capheap;
	uint64_t seq;
	loop_turn_cb turn_cb;
	void *turn_arg;
};

/* Deadlines use CLOCK_MONOTONIC so a wall-clock step (NTP, an operator's date) neither fires
 * every timer at once nor postpones them; milliseconds are the finest any deadline here
 * needs and what epoll_wait takes. */
int64_t loop_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wall time only for what is shown or stored (timestamps in answers and records), never for
 * scheduling. */
int64_t loop_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct loop *loop_new(void)
{
	struct loop *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int e = errno;
		free(l);
		errno = e;
		return NULL;
	}
	return l;
}

/* Timers are owned by the loop (the handle is only a reference), fds by whoever added them:
 * so only the timers are freed here. */
void loop_free(struct loop *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nheap; i++)
		free(l->heap[i]);
	free(l->heap);
	free(l->fds);
	close(l->epfd);
	free(l);
}

/* fd in the low half, its slot's generation in the high half: an event fetched before a
 * callback deleted (and perhaps reused) the fd no longer matches the slot and is dropped. */
static uint64_t cookie(int fd, uint32_t gen)
{
	return (uint64_t)gen << 32 | (uint32_t)fd;
}

/* The table grows by doubling to cover fd, so lookup is an index; fds are small and dense.
 * The generation moves on add as well as on delete, so a reused fd number never matches an
 * older cookie still in this turn's event array. */
int loop_add_fd(struct loop *l, int fd, uint32_t events, loop_fd_cb cb, void *arg)
{
	if (fd < 0)
		return -EBADF;
	if ((size_t)fd >= l->nfds) {
		size_t n = l->nfds ? l->nfds : 64;
		while (n <= (size_t)fd)
			n *= 2;
		struct fd_slot *s = realloc(l->fds, n * sizeof *s);
		if (!s)
			return -ENOMEM;
		memset(s + l->nfds, 0, (n - l->nfds) * sizeof *s);
		l->fds = s;
		l->nfds = n;
	}
	struct fd_slot *slot = &l->fds[fd];
	if (slot->used)
		return -EEXIST;
	slot->gen++;
	struct epoll_event ev = { .events = events, .data.u64 = cookie(fd, slot->gen) };
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	slot->cb = cb;
	slot->arg = arg;
	slot->used = 1;
	return 0;
}

int loop_mod_fd(struct loop *l, int fd, uint32_t events)
{
	if (fd < 0 || (size_t)fd >= l->nfds || !l->fds[fd].used)
		return -ENOENT;
	struct epoll_event ev = { .events = events, .data.u64 = cookie(fd, l->fds[fd].gen) };
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	return 0;
}

/* Safe inside a callback: the generation bump makes the rest of this turn's events for fd
 * stale, so a callback that closed another fd cannot have it dispatched after the close. */
void loop_del_fd(struct loop *l, int fd)
{
	if (fd < 0 || (size_t)fd >= l->nfds || !l->fds[fd].used)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	l->fds[fd].used = 0;
	l->fds[fd].gen++;
}

/* ---- timers --------------------------------------------------------------- */

/* Ties break by creation order, so timers armed for the same millisecond fire in the order
 * they were set (a zero-delay timer queued after another runs after it). */
static int timer_less(const struct loop_timer *a, const struct loop_timer *b)
{
	return a->when < b->when || (a->when == b->when && a->seq < b->seq);
}

static void heap_swap(struct loop *l, size_t i, size_t j)
{
	struct loop_timer *t = l->heap[i];
	l->heap[i] = l->heap[j];
	l->heap[j] = t;
}

static void heap_up(struct loop *l, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!timer_less(l->heap[i], l->heap[p]))
			break;
		heap_swap(l, i, p);
		i = p;
	}
}

static void heap_down(struct loop *l, size_t i)
{
	for (;;) {
		size_t c = 2 * i + 1, m = i;
		if (c < l->nheap && timer_less(l->heap[c], l->heap[m]))
			m = c;
		if (c + 1 < l->nheap && timer_less(l->heap[c + 1], l->heap[m]))
			m = c + 1;
		if (m == i)
			break;
		heap_swap(l, i, m);
		i = m;
	}
}

static struct loop_timer *heap_pop(struct loop *l)
{
	struct loop_timer *t = l->heap[0];
	l->heap[0] = l->heap[--l->nheap];
	if (l->nheap)
		heap_down(l, 0);
	return t;
}

/* The heap slot is reserved before the timer is allocated, so a failure leaves nothing
 * half-inserted: NULL and the heap unchanged. */
struct loop_timer *loop_timer_at(struct loop *l, int64_t when, loop_timer_cb cb, void *arg)
{
	if (l->nheap == l->capheap) {
		size_t n = l->capheap ? l->capheap * 2 : 64;
		struct loop_timer **h = realloc(l->heap, n * sizeof *h);
		if (!h)
			return NULL;
		l->heap = h;
		l->capheap = n;
	}
	struct loop_timer *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->when = when;
	t->seq = l->seq++;
	t->cb = cb;
	t->arg = arg;
	l->heap[l->nheap++] = t;
	heap_up(l, l->nheap - 1);
	return t;
}

struct loop_timer *loop_timer_in(struct loop *l, int64_t ms, loop_timer_cb cb, void *arg)
{
	return loop_timer_at(l, loop_now() + (ms < 0 ? 0 : ms), cb, arg);
}

/* O(1): the timer is only marked; it is freed when it reaches the top of the heap.  That is
 * why a handle must not be cancelled after it fired: the memory is gone then. */
void loop_timer_cancel(struct loop *l, struct loop_timer *t)
{
	(void)l;
	if (t)
		t->dead = 1;
}

void loop_set_turn_hook(struct loop *l, loop_turn_cb cb, void *arg)
{
	l->turn_cb = cb;
	l->turn_arg = arg;
}

/* ms until the next live timer (-1 if none), capped at a minute; dead heads are freed.
 * Dead timers at the top are freed here, where lazy deletion catches up with them: a
 * cancelled timer never makes the loop wake for nothing. */
static int next_wait(struct loop *l)
{
	while (l->nheap && l->heap[0]->dead)
		free(heap_pop(l));
	if (!l->nheap)
		return -1;
	int64_t d = l->heap[0]->when - loop_now();
	if (d < 0)
		d = 0;
	return d > 60000 ? 60000 : (int)d;
}

/* Fire due timers; return ms until the next live one (-1 if none).
 * Each due timer is popped before its callback runs, so a callback may arm or cancel other
 * timers (and the heap may reallocate) without disturbing this walk.  now is read once: a
 * timer armed for "now" by a callback waits for the next turn instead of starving fds. */
static int run_timers(struct loop *l)
{
	int64_t now = loop_now();
	while (l->nheap) {
		struct loop_timer *t = l->heap[0];
		if (t->dead) {
			free(heap_pop(l));
			continue;
		}
		if (t->when > now)
			break;
		heap_pop(l);
		t->cb(l, t->arg);
		free(t);
		if (l->stop)
			return 0;
	}
	return next_wait(l);
}

/* Order: timers, the turn hook, the sleep, fds.  epoll_wait's EINTR is a normal wakeup, not
 * an error: signals reach the supervisor as a signalfd, so whatever interrupted the wait is
 * an fd event on a later turn. */
int loop_run_once(struct loop *l, int max_wait_ms)
{
	int wait = run_timers(l);
	if (l->stop)
		return 0;
	/* The turn hook runs before sleeping so work queued by timers is flushed too.  It may arm
	 * timers of its own (the commit retry), so the sleep is computed after it: a deadline set
	 * there must bound this very wait, not the next one. */
	if (l->turn_cb) {
		l->turn_cb(l, l->turn_arg);
		wait = next_wait(l);
	}
	if (max_wait_ms >= 0 && (wait < 0 || wait > max_wait_ms))
		wait = max_wait_ms;
	struct epoll_event evs[64];
	int n = epoll_wait(l->epfd, evs, 64, wait);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		return -errno;
	}
	for (int i = 0; i < n && !l->stop; i++) {
		int fd = (int)(uint32_t)evs[i].data.u64;
		uint32_t gen = (uint32_t)(evs[i].data.u64 >> 32);
		if ((size_t)fd >= l->nfds || !l->fds[fd].used || l->fds[fd].gen != gen)
			continue;
		l->fds[fd].cb(l, fd, evs[i].events, l->fds[fd].arg);
	}
	return 0;
}

int loop_run(struct loop *l)
{
	while (!l->stop) {
		int rc = loop_run_once(l, -1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void loop_stop(struct loop *l)
{
	l->stop = 1;
}

int loop_stopped(const struct loop *l)
{
	return l->stop;
}
