/* runner/sandbox_cgroup.h — cgroups for jobs: a memory and a process-count limit, a reliable
 * kill of the whole tree, and the OOM verdict after the fact.
 *
 * cg_host_new() finds the hierarchies this process may use (cgroup v2 with the memory and pids
 * controllers delegated, v1 memory and pids controllers, and v2's cgroup.kill even when the v2
 * tree has no controllers, as on hybrid hosts) and creates one folder per supervisor below our
 * own cgroup, so jobs stay inside whatever limits we run under.  Nothing usable means "none";
 * that is not an error.  Each job then gets its own child folder (cg_job_new), which the job's
 * first process enters before it runs anything (clone3 CLONE_INTO_CGROUP for v2, a write of
 * "0" to a cgroup.procs opened by the supervisor for v1).  cg_job_free() removes the folders;
 * one still busy is retried later.  Stale folders of supervisors that died are cleaned up when
 * the next one starts. */
#ifndef FP_SANDBOX_CGROUP_H
#define FP_SANDBOX_CGROUP_H

#include <stddef.h>

struct cg_host;
struct cg_job;

/* What a host offers, for reports and the effective sandbox. */
struct cg_caps {
	int version;          /* 2, 1 (the limits come from v1 controllers) or 0 */
	int memory, pids;     /* the limit can be set */
	int kill;             /* cgroup.kill (v2) */
};

/* Never fails except for memory (-ENOMEM); *out may offer nothing. */
int cg_host_new(struct cg_host **out);
void cg_host_free(struct cg_host *h);
void cg_host_caps(const struct cg_host *h, struct cg_caps *c);
/* One line describing the layout and why something is missing, for sandbox-check. */
const char *cg_host_note(const struct cg_host *h);

/* A cgroup for one job.  memory_bytes/pids_max 0: no limit.  0 and *out (NULL when the host
 * offers nothing), or -errno. */
int cg_job_new(struct cg_host *h, const char *name, long long memory_bytes, long pids_max,
               struct cg_job **out);
/* The v2 folder as an fd for CLONE_INTO_CGROUP, or -1. */
int cg_job_dirfd(const struct cg_job *j);
/* Child side, async-signal-safe: move the calling process into the v1 cgroups.  0 or -errno. */
int cg_job_enter(const struct cg_job *j);
/* Close what only the child needed. */
void cg_job_spawned(struct cg_job *j);
/* SIGKILL everything in the job's cgroup (cgroup.kill, else each listed pid).  1 if it could. */
int cg_job_kill(struct cg_job *j);
/* 1 if the kernel's OOM killer acted inside the job's cgroup. */
int cg_job_oom(const struct cg_job *j);
void cg_job_free(struct cg_job *j);

#endif
