/* supervisor/core/rmtree.h — removing a directory tree without blocking the event loop.
 *
 * An expired task's folder may hold a job's whole output: thousands of files, gigabytes to
 * free.  rmtree_later removes it on the worker pool (workers.h), depth first, never following
 * symlinks and never leaving the file system the tree starts on (a job may have planted links
 * or mounts in its work dir).  Nothing reports back: the caller has already forgotten the tree
 * (an expired task's id is never reused), and a removal cut short by a crash leaves only files
 * nothing refers to.  When the pool stops first, queued removals are done inline then; with no
 * pool (ops commands, unit tests) at once.  Loop thread only. */
#ifndef FP_RMTREE_H
#define FP_RMTREE_H

#include "supervisor/core/supervisor.h"

/* Remove path and everything under it, in the background.  Best effort: entries that cannot
 * be removed stay. */
void rmtree_later(struct supervisor *sv, const char *path);
/* The same, now, on the calling thread (thread-safe). */
void rmtree_now(const char *path);

#endif
