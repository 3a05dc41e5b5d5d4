/* supervisor/core/rmtree.c — see rmtree.h. */
#include "supervisor/core/rmtree.h"

#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/core/workers.h"

/* Errors are ignored entry by entry: removal is best effort, and one file that cannot go must
 * not keep the rest of the tree on disk. */
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* FTW_PHYS: symlinks are removed, never followed, so a link a job left in its folder cannot
 * point the removal at a file outside.  FTW_MOUNT: the walk stays on the tree's file system
 * and does not descend into anything mounted inside it. */
void rmtree_now(const char *path)
{
	/* nftw without FTW_CHDIR keeps no state outside its call: safe on any thread. */
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static void rm_run(struct workers *w, void *arg)
{
	(void)w;
	rmtree_now(arg);
}

/* ran 0: the pool stopped before the job ran; the server is exiting, so the removal is done
 * now rather than left behind. */
static void rm_done(void *arg, int ran)
{
	if (!ran)
		rmtree_now(arg);
	free(arg);
}

/* Off the loop when there is a pool (a job's tree may hold millions of files); inline when
 * there is none or it refuses, so the tree is never leaked. */
void rmtree_later(struct supervisor *sv, const char *path)
{
	char *p = sv->workers ? strdup(path) : NULL;
	if (!p || workers_submit(sv->workers, rm_run, rm_done, p) < 0) {
		free(p);
		rmtree_now(path);
	}
}
