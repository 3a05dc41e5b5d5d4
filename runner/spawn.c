/* runner/spawn.c — see spawn.h. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

struct child_report {
	int err;            /* positive errno */
	char step[24];
	char msg[200];
};

/* Only async-signal-safe calls from here on: the child of a fork may not use malloc or stdio. */
static void report(int fd, const char *step, int err, const char *msg)
{
	struct child_report r;
	memset(&r, 0, sizeof r);
	r.err = err;
	for (size_t i = 0; step[i] && i < sizeof r.step - 1; i++)
		r.step[i] = step[i];
	for (size_t i = 0; msg && msg[i] && i < sizeof r.msg - 1; i++)
		r.msg[i] = msg[i];
	ssize_t w;
	do {
		w = write(fd, &r, sizeof r);
	} while (w < 0 && errno == EINTR);
	_exit(127);
}

static void child(const struct spawn_req *r, int errfd, pid_t parent)
{
	/* Move the job's fds above 3 first, so placing them at 0..3 never clobbers one another. */
	int src[3] = { r->fd_stdin, r->fd_out, r->fd_sock };
	int hi[3];
	for (int i = 0; i < 3; i++) {
		hi[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 10);
		if (hi[i] < 0)
			report(errfd, "dup", errno, NULL);
	}
	if (errfd < 10) {
		int e = fcntl(errfd, F_DUPFD_CLOEXEC, 10);
		if (e < 0)
			report(errfd, "dup", errno, NULL);
		errfd = e;
	}
	if (dup2(hi[0], 0) < 0 || dup2(hi[1], 1) < 0 || dup2(hi[1], 2) < 0 || dup2(hi[2], 3) < 0)
		report(errfd, "dup2", errno, NULL);
	/* Everything else (including the supervisor's stdout, which is the MCP transport) is
	 * closed on exec; CLOEXEC rather than close keeps errfd usable until execve. */
	if (syscall(SYS_close_range, 4U, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
		for (int fd = 4; fd < 65536; fd++)
			if (fd != errfd)
				fcntl(fd, F_SETFD, FD_CLOEXEC);
	}

	if (setsid() < 0)
		report(errfd, "setsid", errno, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		report(errfd, "pdeathsig", errno, NULL);
	/* The supervisor may have died between fork and prctl: then nobody would kill us. */
	if (getppid() != parent)
		report(errfd, "pdeathsig", ESRCH, "supervisor exited during spawn");

	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);

	if (r->cwd && chdir(r->cwd) < 0)
		report(errfd, "chdir", errno, r->cwd);
	if (r->setup) {
		char msg[200] = "";
		int rc = r->setup(r->setup_arg, msg, sizeof msg);
		if (rc < 0)
			report(errfd, "sandbox", -rc, msg);
	}
	execve(r->argv[0], r->argv, r->envp);
	report(errfd, "exec", errno, r->argv[0]);
}

int spawn_start(const struct spawn_req *r, pid_t *pid_out, int *pidfd_out, char *err, size_t errlen)
{
	int p[2] = { -1, -1 };
	int pidfd = -1;
	pid_t pid = -1;
	int rc;

	if (pipe2(p, O_CLOEXEC) < 0) {
		rc = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	pid_t parent = getpid();
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		snprintf(err, errlen, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		close(p[0]);
		child(r, p[1], parent);
		_exit(127);
	}
	close(p[1]);
	p[1] = -1;

	/* Blocks only until exec or failure: the child does no waiting of its own before exec. */
	struct child_report rep;
	ssize_t n;
	do {
		n = read(p[0], &rep, sizeof rep);
	} while (n < 0 && errno == EINTR);
	if (n > 0) {
		rc = rep.err ? -rep.err : -EIO;
		rep.step[sizeof rep.step - 1] = 0;
		rep.msg[sizeof rep.msg - 1] = 0;
		snprintf(err, errlen, "%s%s%s: %s", rep.step, rep.msg[0] ? " " : "", rep.msg,
		         strerror(rep.err ? rep.err : EIO));
		waitpid(pid, NULL, 0);
		pid = -1;
		goto fail;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "pidfd_open: %s", strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		goto fail;
	}
	close(p[0]);
	*pid_out = pid;
	*pidfd_out = pidfd;
	return 0;
fail:
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	return rc;
}
