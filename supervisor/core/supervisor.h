/* supervisor/supervisor.h — the context passed to every supervisor module.  There is one per
 * process; it owns the loop, the logger, the loaded config and the modules below.  Nothing in
 * the supervisor keeps state in globals: whatever a module needs, it reaches through here. */
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

#endif
