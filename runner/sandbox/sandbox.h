/* runner/sandbox.h — containment of untrusted jobs, by profile (docs/sandbox.md).
 *
 *   default  own user, PID, mount, network (unless allowed), IPC and UTS namespaces; a private
 *            root holding the system's libraries, the program, the forkpoint-job helper, the
 *            task's work dir (writable), a small private /tmp, a few /dev nodes and its own
 *            /proc; Landlock on the same paths, TCP and signal scoping; rlimits; a cgroup with
 *            memory and process limits; no_new_privs; the default seccomp filter, last.
 *   strict   default with the allowlist seccomp filter for pure computation.
 *   none     trusted: new session, parent-death signal and closed fds only.
 *
 * One struct sandbox per supervisor: sandbox_new() probes once what this host allows (a trial
 * child builds a whole jail) and keeps the compiled seccomp programs.  What is missing is
 * recorded, never fatal: jobs then run under the strongest combination that works, and each
 * job's sandbox_job says what it got (sandbox_job_json) — unless the tool's `require` list
 * names a mechanism that is missing, in which case sandbox_job_new() refuses with -ENOTSUP.
 *
 * Life of a job's sandbox: sandbox_job_new() plans everything in the supervisor (paths
 * resolved, cgroup made, filter compiled); spawn.c clones with sandbox_job_clone_flags(), and
 * the child calls sandbox_child_enter() (identity maps, cgroup, new root) and, in the process
 * that will exec, sandbox_child_exec() (rlimits, no_new_privs, Landlock, seccomp last).  Those
 * two are async-signal-safe.  After the spawn, sandbox_job_spawned() drops the plan; at exit
 * sandbox_job_verdict() says whether a limit or the filter ended the job; sandbox_job_free()
 * removes the cgroup. */
#ifndef FP_SANDBOX_H
#define FP_SANDBOX_H

#include <stddef.h>
#include <sys/types.h>

struct sandbox;
struct sandbox_job;

/* What a tool asks of the sandbox (the supervisor's config fills it from a tool's "sandbox"
 * object, docs/config.md).  The sandbox only reads it, during sandbox_job_new(); the caller
 * owns the strings.  A zeroed struct with profile "default" is the default policy. */
struct sandbox_policy {
	char profile[16];        /* "default", "strict", "none" */
	int network;             /* 1: keep the host's network */
	long memory_mb;          /* 0 = the profile's default (SB_DEFAULT_*) */
	long cpu_seconds;
	long max_processes;
	long max_file_mb;
	char **read_paths;  size_t n_read_paths;   /* absolute */
	char **write_paths; size_t n_write_paths;
	char **require;     size_t n_require;      /* mechanisms demanded, e.g. "seccomp" */
};

/* Limits a profile applies when the tool's config leaves them at 0. */
#define SB_DEFAULT_MEMORY_MB    1024
#define SB_DEFAULT_CPU_SECONDS  3600
#define SB_DEFAULT_PROCESSES    64
#define SB_DEFAULT_FILE_MB      1024
#define SB_DEFAULT_OPEN_FILES   1024
#define SB_DEFAULT_TMP_MB       64

/* Probe the host.  0 and *out, or -ENOMEM. */
int sandbox_new(struct sandbox **out);
void sandbox_free(struct sandbox *sb);
/* What this host supports, as text lines (malloc'd; NULL when out of memory). */
char *sandbox_host_report(const struct sandbox *sb);
/* The same in one line, for the log; 1 if something is missing for the default profile. */
int sandbox_host_summary(const struct sandbox *sb, char *buf, size_t len);

struct sandbox_paths {
	const char *program;    /* argv[0], absolute */
	const char *helper;     /* the forkpoint-job helper, may be NULL */
	const char *work_dir;   /* the task's writable folder */
	const char *cwd;        /* the job's cwd if not work_dir, may be NULL */
	const char *name;       /* names the job's cgroup (task id) */
	/* A root supervisor's jobs run as this host uid/gid (server.jobUser); 0: nobody/nogroup.
	 * The work dir is handed to that uid.  Ignored by an unprivileged supervisor, whose jobs
	 * are always its own uid. */
	long job_uid, job_gid;
};

/* Plan a job's sandbox.  0 and *out; -ENOTSUP when cfg->require cannot be met here (or, with
 * no require list, when neither a private root nor Landlock could limit its files); another
 * -errno (a required path is missing, out of memory).  err says why. */
int sandbox_job_new(struct sandbox *sb, const struct sandbox_policy *cfg,
                    const struct sandbox_paths *paths, struct sandbox_job **out,
                    char *err, size_t errlen);
void sandbox_job_free(struct sandbox_job *sj);
/* The effective sandbox as a JSON object text, e.g. {"profile":"default","namespaces":[…],
 * "landlock":7,"seccomp":"default","cgroup":"v1","rlimits":{…},"degraded":[…]}. */
const char *sandbox_job_json(const struct sandbox_job *sj);
/* 1 for the none profile. */
int sandbox_job_trusted(const struct sandbox_job *sj);
/* The job's first process is the init of its own PID namespace. */
int sandbox_job_pidns(const struct sandbox_job *sj);
/* The plan is no longer needed once the child has exec'd. */
void sandbox_job_spawned(struct sandbox_job *sj);
/* SIGKILL everything in the job's cgroup; 1 if there was one. */
int sandbox_job_kill(struct sandbox_job *sj);

/* 1 if p lies in this process's own argv or environ strings, which the jail's init blanks in
 * its copy (so that /proc/1/cmdline shows nothing of the supervisor's): spawn refuses a
 * request whose strings live there. */
int sandbox_job_blanks(const struct sandbox_job *sj, const void *p);

/* A root supervisor writes the job's uid/gid maps itself (the child could map only uid 0):
 * 1 if spawn must call sandbox_job_write_maps(pid) after the clone and only then let the
 * child go on. */
int sandbox_job_parent_maps(const struct sandbox_job *sj);
int sandbox_job_write_maps(const struct sandbox_job *sj, pid_t pid, char *err, size_t errlen);

/* How a job ended, as far as the sandbox is concerned. */
struct sandbox_verdict {
	const char *code;        /* NULL, "sandbox_violation" or "resource_limit" */
	const char *limit;       /* resource_limit: "memoryMB", "cpuSeconds", "maxFileMB" */
	long value;              /* the limit's value */
	char message[256];
};
/* exited/status as from waitid (CLD_EXITED → exit code, else signal); cpu_ms the job's CPU time.
 * filter_kill: 1 if the kernel's record shows the seccomp filter killed the job (its main
 * thread's seccomp mode was "dead", see spawn_status), 0 if it shows it did not, -1 unknown.
 * A SIGSYS death is sandbox_violation only with 1 or -1: a job that raises SIGSYS itself
 * does not get to blame the sandbox. */
void sandbox_job_verdict(const struct sandbox_job *sj, int exited, int status, long long cpu_ms,
                         int filter_kill, struct sandbox_verdict *v);

/* ---- child side: async-signal-safe ------------------------------------------------------ */

unsigned long long sandbox_job_clone_flags(const struct sandbox_job *sj);
/* A cgroup v2 folder fd for CLONE_INTO_CGROUP, or -1. */
int sandbox_job_cgroup_fd(const struct sandbox_job *sj);
/* In the first child, right after clone: uid/gid maps, cgroups, the private root, hostname. */
int sandbox_child_enter(const struct sandbox_job *sj, char *msg, size_t msglen);
/* In the process about to exec: rlimits, no_new_privs, Landlock, then seccomp. */
int sandbox_child_exec(const struct sandbox_job *sj, char *msg, size_t msglen);

/* msg = a + b, truncated, without stdio (for children between fork and exec). */
void sandbox_msg(char *msg, size_t msglen, const char *a, const char *b);

#endif
