/* supervisor/core/task_expiry.c — see task_expiry.h. */
#include "supervisor/core/task_expiry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/layout.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/rmtree.h"
#include "supervisor/core/tasks.h"

struct tomb {
	char id[33];
	int64_t until;
	struct tomb *next;
};

/* Tombstones are few (expired ids, for a limited time); a list is enough. */
struct task_tombs {
	struct tomb *head;          /* newest first */
	size_t n;
};

struct task_tombs *task_tombs_new(void)
{
	return calloc(1, sizeof(struct task_tombs));
}

void task_tombs_free(struct task_tombs *tb)
{
	if (!tb)
		return;
	for (struct tomb *b = tb->head, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	free(tb);
}

int task_tombs_add(struct task_tombs *tb, const char *id, int64_t until)
{
	struct tomb *b = calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	snprintf(b->id, sizeof b->id, "%s", id);
	b->until = until;
	b->next = tb->head;
	tb->head = b;
	tb->n++;
	return 0;
}

int64_t task_tombs_find(const struct task_tombs *tb, const char *id)
{
	for (const struct tomb *b = tb->head; b; b = b->next)
		if (strcmp(b->id, id) == 0)
			return b->until;
	return 0;
}

void task_tombs_each(const struct task_tombs *tb, void (*fn)(void *arg, const char *id, int64_t until),
                     void *arg)
{
	for (const struct tomb *b = tb->head; b; b = b->next)
		fn(arg, b->id, b->until);
}

static void remove_task_dir(struct supervisor *sv, const char *id)
{
	char path[4200];
	if (layout_task(path, sizeof path, sv->state_dir, id, LAYOUT_TASK_DIR) < 0)
		return;
	/* In the background (rmtree.h): a job's output may be a large tree. */
	rmtree_later(sv, path);
}

size_t task_expiry_collect(struct supervisor *sv, struct tasks *ts, struct task_tombs *tb, int64_t now)
{
	size_t n = 0;
	/* While commits fail an expiry could not be recorded: keep everything until they work. */
	if (persist_fault(sv->persist) < 0)
		return 0;
	for (struct tomb **pp = &tb->head; *pp;) {
		if ((*pp)->until <= now) {
			struct tomb *b = *pp;
			*pp = b->next;
			free(b);
			tb->n--;
		} else {
			pp = &(*pp)->next;
		}
	}
	for (struct task *t = tasks_newest(ts), *next; t; t = next) {
		next = t->next;
		if (!TASK_TERMINAL(t->status) || t->expires_ms > now || t->job)
			continue;
		/* Expired ids answer `expired` for as long again as they lived (at least an hour,
		 * at most a week), then `unknown_task`. */
		int64_t ttl = t->expires_ms - t->finished_ms;
		int64_t keep = ttl < 3600000 ? 3600000 : ttl > 604800000 ? 604800000 : ttl;
		char id[33];
		memcpy(id, t->id, sizeof id);
		/* Forgotten only once the journal says so; otherwise the next collection retries. */
		if (persist_expired(sv->persist, id, now + keep) < 0)
			continue;
		persist_release(sv->persist, t);
		task_tombs_add(tb, id, now + keep);
		tasks_remove(ts, t);
		remove_task_dir(sv, id);
		n++;
	}
	return n;
}
