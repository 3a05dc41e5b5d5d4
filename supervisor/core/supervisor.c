/* supervisor/core/supervisor.c — see supervisor.h. */
#include "supervisor/core/supervisor.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runner/sandbox/sandbox.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "supervisor/core/workers.h"

/* The order matters: the pool is made before anything that may hand it work, the task table
 * and the transfers exist before the replay that fills them, and read-only opens (ls, show)
 * skip what would write or hold the state dir (transfers stage uploads; the pool would only
 * serve them).  One function, so every program that runs the core (the server, the offline
 * commands, the fuzz target, the tests) builds the same thing. */
int supervisor_open(struct supervisor *sv, const struct supervisor_opts *o, char *err, size_t errlen)
{
	static const struct supervisor_opts none;
	int rc;
	if (!o)
		o = &none;
	if (!sv->loop && !(sv->loop = loop_new())) {
		rc = -errno;
		snprintf(err, errlen, "event loop: %s", strerror(-rc));
		goto fail;
	}
	if (o->workers && !o->read_only && (rc = workers_new(sv->loop, o->workers, &sv->workers)) < 0) {
		snprintf(err, errlen, "cannot start worker threads: %s", strerror(-rc));
		goto fail;
	}
	if (!(sv->tasks = tasks_new(sv)) || (!o->read_only && !(sv->transfers = transfers_new(sv)))) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (o->store)
		rc = persist_open_store(sv, o->store, o->read_only, o->tap, o->tap_arg, &sv->persist, err, errlen);
	else
		rc = persist_open_tap(sv, o->read_only, o->tap, o->tap_arg, &sv->persist, err, errlen);
	return rc < 0 ? rc : 0;
fail:
	if (o->store)
		store_close(o->store);
	return rc;
}

void supervisor_recover(struct supervisor *sv)
{
	tasks_recover(sv->tasks);
	if (sv->transfers)
		transfers_recover(sv->transfers);
	tasks_collect(sv->tasks, loop_wall_ms());
	if (sv->transfers)
		transfers_collect(sv->transfers, loop_wall_ms());
}

/* The pool goes first: a done callback may still append (a checkpoint whose blob it finished)
 * and answer into the server's sessions.  What it appended is made durable here; it is never
 * acknowledged, as nothing is sent any more. */
int supervisor_quiesce(struct supervisor *sv)
{
	workers_free(sv->workers);
	sv->workers = NULL;
	return sv->persist ? persist_commit(sv->persist) : 0;
}

void supervisor_close(struct supervisor *sv)
{
	workers_free(sv->workers);
	sv->workers = NULL;
	tasks_free(sv->tasks);
	sv->tasks = NULL;
	sandbox_free(sv->sandbox);
	sv->sandbox = NULL;
	persist_close(sv->persist);
	sv->persist = NULL;
	transfers_free(sv->transfers);
	sv->transfers = NULL;
	loop_free(sv->loop);
	sv->loop = NULL;
}
