/* runner/spawn.h — start a job process.  Everything between fork and exec happens here, in a
 * fixed order: new session (no controlling terminal), parent-death signal, signal mask and
 * dispositions reset, the job's fds placed at 0-3 and every other fd closed, working directory,
 * then the caller's `setup` hook (the sandbox slots in there and must load seccomp last), then
 * execve.  A failure anywhere in the child is reported back through a close-on-exec pipe with
 * the step and errno, and the child exits 127; so spawn_start() either returns a running,
 * exec'd process or an error message, never a half-started child. */
#ifndef FP_SPAWN_H
#define FP_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

struct spawn_req {
	char *const *argv;          /* argv[0]: absolute path */
	char *const *envp;
	const char *cwd;            /* may be NULL */
	int fd_stdin;               /* becomes 0 (normally /dev/null) */
	int fd_out;                 /* becomes 1 and 2 */
	int fd_sock;                /* becomes 3 (FORKPOINT_FD) */
	/* Runs in the child just before execve.  Return 0, or -errno with a message in msg. */
	int (*setup)(void *arg, char *msg, size_t msglen);
	void *setup_arg;
};

/* 0 with *pid and *pidfd (O_CLOEXEC) set, or -errno with a one-line reason in err. */
int spawn_start(const struct spawn_req *r, pid_t *pid, int *pidfd, char *err, size_t errlen);

#endif
