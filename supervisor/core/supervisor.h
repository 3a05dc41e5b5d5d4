/* supervisor/core/supervisor.h — the context passed to every supervisor module.  There is one
 * per process; it owns the loop, the logger, the loaded config and the modules below.  Nothing
 * in the supervisor keeps state in globals: whatever a module needs, it reaches through here.
 *
 * supervisor_open() assembles the core in the one order that works (the loop, the worker pool,
 * the task table, the transfers, then the store, whose replay fills the last two), and
 * supervisor_close() takes it apart in reverse; the MCP server (a layer above) is made and
 * freed by the caller between supervisor_open() and supervisor_quiesce(). */
#ifndef FP_SUPERVISOR_H
#define FP_SUPERVISOR_H

#include "supervisor/core/config.h"
#include "supervisor/core/log.h"
#include "supervisor/core/loop.h"

struct tasks;
struct server;
struct persist;
struct transfers;
struct sandbox;
struct workers;
struct store;
struct store_rec;

struct supervisor {
	struct loop *loop;
	struct fplog log;
	struct config *cfg;        /* owned */
	char *state_dir;           /* absolute, created 0700 */
	char *bin_dir;             /* folder of the forkpoint binary (forkpoint-job lives there) */
	struct tasks *tasks;
	struct server *server;
	struct persist *persist;   /* NULL: nothing is journaled (unit tests) */
	struct transfers *transfers; /* file transfers (transfer.c); NULL in ops commands */
	struct sandbox *sandbox;   /* host probe + compiled filters; made on first use if NULL */
	struct workers *workers;   /* threads for blocking work (workers.h); NULL: done inline */
};

/* How to open the core.  Zero is a read-write supervisor over the journal in state_dir, with
 * no worker threads (blocking work then runs inline). */
struct supervisor_opts {
	int read_only;          /* ls/show/logs: no transfers, no lock, nothing written */
	unsigned workers;       /* threads for blocking work */
	struct store *store;    /* NULL: the journal in state_dir; else this store (taken, also
	                           on failure) */
	void (*tap)(void *arg, const struct store_rec *rec);   /* each replayed task record */
	void *tap_arg;
};

/* Build sv's loop (unless set), worker pool, task table, transfers and store, and replay the
 * store into them.  The caller has set sv->log, sv->cfg (NULL for read-only), sv->state_dir
 * and sv->bin_dir; sv->sandbox may be set or is made on first use.  Recovery of interrupted
 * work is the caller's next step (supervisor_recover), once it has attached what must hear of
 * it.  0, or -errno with a message in err; on failure supervisor_close() frees what was made. */
int supervisor_open(struct supervisor *sv, const struct supervisor_opts *o, char *err, size_t errlen);
/* Resume what the last run left: interrupted tasks and transfers, then expiry. */
void supervisor_recover(struct supervisor *sv);
/* At shutdown, before the server goes: stop the worker pool (its last completions still answer
 * into the server) and commit what they recorded.  0, or the commit's -errno. */
int supervisor_quiesce(struct supervisor *sv);
/* Free the core (after the caller freed the server).  Safe on a partly opened supervisor and
 * twice.  Leaves cfg, state_dir, bin_dir and the log to the caller. */
void supervisor_close(struct supervisor *sv);

#endif
