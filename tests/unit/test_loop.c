/* tests/unit/test_loop.c — supervisor/loop.c: timers fire in order, a cancelled timer never
 * fires, and a timer armed by the end-of-turn hook bounds the very sleep that follows the hook
 * (the commit retry after a failed fdatasync depends on it: without it, the retry waited for
 * the next unrelated timer, tens of seconds away).
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "supervisor/core/loop.h"
#include "check.h"

#include <stdio.h>

struct hookctx {
	int armed;       /* the hook armed its timer */
	int fired;       /* that timer fired */
	int far_fired;
	double fired_at; /* check_now() when it fired */
};

static void fired_cb(struct loop *l, void *arg)
{
	(void)l;
	(*(int *)arg)++;
}

static void hook_timer_cb(struct loop *l, void *arg)
{
	struct hookctx *c = arg;
	(void)l;
	c->fired++;
	c->fired_at = check_now();
}

static void hook(struct loop *l, void *arg)
{
	struct hookctx *c = arg;
	if (!c->armed) {
		c->armed = 1;
		loop_timer_in(l, 20, hook_timer_cb, c);
	}
}

static void test_timer_from_hook(struct tally *t)
{
	struct hookctx c = { 0, 0, 0, 0 };
	struct loop *l = loop_new();
	if (!l)
		check_die("loop_new");
	/* Only a distant timer is armed when the first turn computes its sleep. */
	loop_timer_in(l, 5000, fired_cb, &c.far_fired);
	loop_set_turn_hook(l, hook, &c);
	double t0 = check_now();
	/* Bounded turns, so a loop that oversleeps fails here instead of hanging the test. */
	for (int i = 0; i < 5 && !c.fired; i++)
		loop_run_once(l, 2000);
	double took = c.fired_at - t0;
	CHECKF(t, c.fired == 1 && c.far_fired == 0, "hook timer fired %d, far timer %d", c.fired, c.far_fired);
	CHECKF(t, took < 1.0, "a 20 ms timer armed by the turn hook fired after %.3f s", took);
	loop_free(l);
}

static void test_order_and_cancel(struct tally *t)
{
	struct loop *l = loop_new();
	if (!l)
		check_die("loop_new");
	int a = 0, b = 0, dead = 0;
	loop_timer_in(l, 10, fired_cb, &a);
	struct loop_timer *x = loop_timer_in(l, 5, fired_cb, &dead);
	loop_timer_in(l, 30, fired_cb, &b);
	loop_timer_cancel(l, x);
	for (int i = 0; i < 10 && !b; i++)
		loop_run_once(l, 200);
	CHECKF(t, a == 1 && b == 1 && dead == 0, "a %d b %d cancelled %d", a, b, dead);
	loop_free(l);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_timer_from_hook(&t);
	test_order_and_cancel(&t);
	return check_done(&t);
}
