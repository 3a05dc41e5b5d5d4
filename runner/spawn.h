/* runner/spawn.h — start a job process.  Everything between clone and exec happens here, in the
 * order the established jails use: clone3 with the sandbox's namespace flags (and straight into
 * its cgroup v2 folder), then in the child the parent-death signal, the sandbox's identity maps,
 * cgroups and private root, the job's fds placed at 0-3 and every other fd closed on exec, a
 * new session (no controlling terminal), signal mask and dispositions reset; then, in the
 * process that will exec, the working directory, rlimits, no_new_privs, Landlock and seccomp as
 * the very last step before execve.
 *
 * With a PID namespace the first child is the namespace's init: it forks the job, reaps
 * whatever gets orphaned inside, and when the job exits writes the job's wait status to a pipe
 * and exits, which makes the kernel kill everything left in the namespace.  So SIGKILL to the
 * init (or its exit) ends the whole tree, even processes that called setsid and double-forked,
 * and the job itself keeps ordinary signal semantics (it is not PID 1: SIGXCPU, SIGXFSZ and
 * friends still kill it).
 *
 * Without a PID namespace (profile none) the first child is the job's keeper: the leader of
 * the job's process group and the job's parent.  It reports the job's end the same way, and
 * when the supervisor dies (its pidfd says so) it SIGKILLs the group, so a job's children do
 * not outlive the supervisor either; processes that left the group (setsid) are not covered.
 * The job has the parent-death signal (SIGKILL) towards its init or keeper, checked against
 * the race with that parent's death; an init has it towards the supervisor, while the keeper
 * watches the supervisor's pidfd instead (it must outlive the supervisor to kill the group).
 *
 * A failure anywhere in a child is reported back through a close-on-exec pipe with the step and
 * errno, and the child exits 127; so spawn_start() either returns a running, exec'd process or
 * an error message, never a half-started child. */
#ifndef FP_SPAWN_H
#define FP_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

struct sandbox_job;

/* argv, envp and cwd must not point into this process's own argv or environ strings: the
 * jail's init blanks its copy of those (sandbox_job_blanks), and spawn_start refuses them. */
struct spawn_req {
	char *const *argv;          /* argv[0]: absolute path */
	char *const *envp;
	const char *cwd;            /* may be NULL */
	int fd_stdin;               /* becomes 0 (normally /dev/null) */
	int fd_out;                 /* becomes 1 and 2 */
	int fd_sock;                /* becomes 3 (FORKPOINT_FD) */
	const struct sandbox_job *sandbox;   /* NULL: no containment beyond session and fds */
	/* 0: spawn_start waits until the job has exec'd (or failed).  1: it returns right after
	 * the clone, and the caller learns the outcome from spawn_proc.execfd without blocking —
	 * so an event loop never waits for a sandbox to be built. */
	int async;
};

struct spawn_proc {
	pid_t pid;                  /* our child: the init of the job's PID namespace, the job's
	                               keeper, or (a kernel without pidfd_open) the job itself */
	int pidfd;                  /* O_CLOEXEC */
	int statusfd;               /* -1, or (init or keeper) where the job's status arrives */
	int execfd;                 /* async only: readable when the job has exec'd (EOF) or failed
	                               (a report); O_CLOEXEC|O_NONBLOCK; -1 when not async */
};

/* The job's end as the init saw it. */
struct spawn_status {
	int exited;                 /* 1: status is an exit code; 0: a signal number */
	int status;
	long long cpu_ms;           /* user + system time of the job and its reaped children */
	int seccomp_kill;           /* a SIGSYS death: 1 the filter did it (the zombie's seccomp
	                               mode said "dead"), 0 it did not, -1 unknown */
};

/* 0 with *out set, or -errno with a one-line reason in err. */
int spawn_start(const struct spawn_req *r, struct spawn_proc *out, char *err, size_t errlen);
/* For an async start: 1 if the child has neither exec'd nor failed yet, 0 if it has exec'd,
 * or -errno with the child's one-line reason in err if it failed before exec. */
int spawn_exec_result(int execfd, char *err, size_t errlen);
/* Read the init's report without blocking: 1 and *st, or 0 if there is none (the init was
 * killed before the job ended). */
int spawn_read_status(int statusfd, struct spawn_status *st);

/* clone3 without a new stack (fork semantics) into namespaces `flags`, optionally straight into
 * the cgroup v2 folder cgroup_fd (-1: none), with a pidfd in *pidfd.  The child gets 0 and must
 * stay async-signal-safe until it execs or exits.  Returns the pid, or -errno. */
pid_t spawn_clone(unsigned long long flags, int cgroup_fd, int *pidfd);

#endif
