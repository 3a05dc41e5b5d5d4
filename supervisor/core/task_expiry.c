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
#include "supervisor/core/tombs.h"

static void remove_task_dir(struct supervisor *sv, const char *id)
{
	char path[4200];
	if (layout_task(path, sizeof path, sv->state_dir, id, LAYOUT_TASK_DIR) < 0)
		return;
	/* In the background (rmtree.h): a job's output may be a large tree. */
	rmtree_later(sv, path);
}

size_t task_expiry_collect(struct supervisor *sv, struct tasks *ts, struct tombs *tb, int64_t now)
{
	size_t n = 0;
	/* While commits fail an expiry could not be recorded: keep everything until they work. */
	if (persist_fault(sv->persist) < 0)
		return 0;
	tombs_prune(tb, now);
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
		tombs_add(tb, id, now + keep);
		tasks_remove(ts, t);
		remove_task_dir(sv, id);
		n++;
	}
	return n;
}
