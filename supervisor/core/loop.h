/* supervisor/loop.h — the one event loop: epoll for fds, a binary heap of monotonic timers,
 * and an end-of-turn hook (where the journal's group commit and output flushing happen).
 * Single-threaded; callbacks may add or remove fds and timers freely, including their own.
 * Functions return 0 / -errno. */
#ifndef FP_LOOP_H
#define FP_LOOP_H

#include <stdint.h>

struct loop;
struct loop_timer;

typedef void (*loop_fd_cb)(struct loop *l, int fd, uint32_t events, void *arg);
typedef void (*loop_timer_cb)(struct loop *l, void *arg);
typedef void (*loop_turn_cb)(struct loop *l, void *arg);

struct loop *loop_new(void);
/* Frees the loop and all pending timers; fds are not closed (their owners close them). */
void loop_free(struct loop *l);

/* events: EPOLLIN / EPOLLOUT (level-triggered).  An fd may be registered once. */
int loop_add_fd(struct loop *l, int fd, uint32_t events, loop_fd_cb cb, void *arg);
int loop_mod_fd(struct loop *l, int fd, uint32_t events);
/* Unregister; safe from inside any callback, events already fetched for fd are discarded. */
void loop_del_fd(struct loop *l, int fd);

/* Monotonic milliseconds. */
int64_t loop_now(void);
/* Wall-clock milliseconds since the epoch. */
int64_t loop_wall_ms(void);

/* Call cb at monotonic time `when` (ms).  The returned handle is valid until the timer fires
 * or is cancelled; NULL on ENOMEM. */
struct loop_timer *loop_timer_at(struct loop *l, int64_t when, loop_timer_cb cb, void *arg);
struct loop_timer *loop_timer_in(struct loop *l, int64_t ms, loop_timer_cb cb, void *arg);
/* Cancel a pending timer (NULL is fine).  Must not be called after the timer has fired. */
void loop_timer_cancel(struct loop *l, struct loop_timer *t);

/* Called once after every turn's callbacks, before the loop sleeps again. */
void loop_set_turn_hook(struct loop *l, loop_turn_cb cb, void *arg);

/* Run until loop_stop().  Returns 0, or -errno if epoll_wait fails fatally. */
int loop_run(struct loop *l);
/* One turn: wait up to max_wait_ms (-1 = until an event or timer) and dispatch. */
int loop_run_once(struct loop *l, int max_wait_ms);
void loop_stop(struct loop *l);
int loop_stopped(const struct loop *l);

#endif
