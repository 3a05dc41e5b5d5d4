/* supervisor/core/task_table.c — see task_table.h. */
#include "supervisor/core/task_table.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/core/tasks.h"

struct hnode {
	struct task *t;
	struct hnode *next;
};

struct task_table {
	struct hnode **b;
	size_t n;         /* buckets, a power of two */
	size_t count;     /* tasks indexed */
};

static uint64_t hash_id(const char *id)
{
	/* FNV-1a; ids are random already, this only needs to spread them. */
	uint64_t h = 1469598103934665603ull;
	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 1099511628211ull;
	return h;
}

/* Double the buckets (1024 at first) and move every node over.  -ENOMEM leaves the table as
 * it was: still correct, only longer chains. */
static int grow(struct task_table *tb)
{
	size_t n = tb->n ? tb->n * 2 : 1024;
	struct hnode **b = calloc(n, sizeof *b);
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < tb->n; i++) {
		struct hnode *h = tb->b[i];
		while (h) {
			struct hnode *nx = h->next;
			size_t k = hash_id(h->t->id) & (n - 1);
			h->next = b[k];
			b[k] = h;
			h = nx;
		}
	}
	free(tb->b);
	tb->b = b;
	tb->n = n;
	return 0;
}

struct task_table *task_table_new(void)
{
	struct task_table *tb = calloc(1, sizeof *tb);
	if (tb && grow(tb) < 0) {
		free(tb);
		return NULL;
	}
	return tb;
}

void task_table_free(struct task_table *tb)
{
	if (!tb)
		return;
	for (size_t i = 0; i < tb->n; i++)
		for (struct hnode *h = tb->b[i], *nx; h; h = nx) {
			nx = h->next;
			free(h);
		}
	free(tb->b);
	free(tb);
}

int task_table_put(struct task_table *tb, struct task *t)
{
	if (tb->count + 1 > tb->n)
		grow(tb);   /* a failure only costs speed */
	struct hnode *h = malloc(sizeof *h);
	if (!h)
		return -ENOMEM;
	size_t k = hash_id(t->id) & (tb->n - 1);
	h->t = t;
	h->next = tb->b[k];
	tb->b[k] = h;
	tb->count++;
	return 0;
}

void task_table_del(struct task_table *tb, const struct task *t)
{
	size_t k = hash_id(t->id) & (tb->n - 1);
	for (struct hnode **pp = &tb->b[k]; *pp; pp = &(*pp)->next) {
		if ((*pp)->t == t) {
			struct hnode *h = *pp;
			*pp = h->next;
			free(h);
			tb->count--;
			return;
		}
	}
}

struct task *task_table_find(const struct task_table *tb, const char *id)
{
	if (!id || !tb)
		return NULL;
	size_t k = hash_id(id) & (tb->n - 1);
	for (struct hnode *h = tb->b[k]; h; h = h->next)
		if (strcmp(h->t->id, id) == 0)
			return h->t;
	return NULL;
}
