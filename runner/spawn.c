/* runner/spawn.c — see spawn.h. */
#include "runner/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/sandbox/sandbox.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#define FP_CLONE_INTO_CGROUP 0x200000000ULL

/* The kernel's struct clone_args (version 2, with cgroup); the distro header may be older. */
struct fp_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls,
	         set_tid, set_tid_size, cgroup;
};

struct child_report {
	int err;            /* positive errno */
	char step[24];
	char msg[200];
};

pid_t spawn_clone(unsigned long long flags, int cgroup_fd, int *pidfd)
{
	struct fp_clone_args a;
	memset(&a, 0, sizeof a);
	a.flags = flags | (pidfd ? CLONE_PIDFD : 0) | (cgroup_fd >= 0 ? FP_CLONE_INTO_CGROUP : 0);
	a.pidfd = (uint64_t)(uintptr_t)pidfd;
	a.exit_signal = SIGCHLD;
	a.cgroup = cgroup_fd >= 0 ? (uint64_t)cgroup_fd : 0;
	long r = syscall(SYS_clone3, &a, sizeof a);
	if (r < 0 && errno == ENOSYS && flags == 0 && cgroup_fd < 0) {
		/* Kernels before 5.3: a plain fork, and the pidfd afterwards. */
		r = fork();
		if (r > 0 && pidfd) {
			*pidfd = (int)syscall(SYS_pidfd_open, (pid_t)r, 0);
			if (*pidfd < 0) {
				int e = errno;
				kill((pid_t)r, SIGKILL);
				waitpid((pid_t)r, NULL, 0);
				return -e;
			}
		}
	}
	return r < 0 ? -errno : (pid_t)r;
}

/* ---- the child: only async-signal-safe calls from here on ------------------------------- */

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

/* Keep an fd we still need clear of 0..3, where the job's fds go. */
static int lift(int fd, int errfd)
{
	if (fd < 0 || fd >= 10)
		return fd;
	int h = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	if (h < 0)
		report(errfd, "dup", errno, NULL);
	return h;
}

static void exec_job(const struct spawn_req *r, int errfd)
{
	if (r->cwd && chdir(r->cwd) < 0)
		report(errfd, "chdir", errno, r->cwd);
	if (r->sandbox) {
		char msg[200] = "";
		int rc = sandbox_child_exec(r->sandbox, msg, sizeof msg);
		if (rc < 0)
			report(errfd, "sandbox", -rc, msg);
	}
	execve(r->argv[0], r->argv, r->envp);
	report(errfd, "exec", errno, r->argv[0]);
}

/* Did the seccomp filter kill pid, a zombie not yet reaped?  The kernel marks the thread that
 * made the forbidden call with seccomp mode 3 ("dead", Linux >= 5.17) before it sends SIGSYS;
 * a process that raised SIGSYS itself still shows mode 2 (or 0 without a filter).  1, 0, or -1 when /proc cannot say
 * (none in the jail, an older kernel).  Only the main thread's mode survives to be read, so
 * a forbidden call from another thread reads as 0. */
static int seccomp_killed(pid_t pid)
{
	char path[40] = "/proc/", buf[4096];
	size_t k = strlen(path);
	char digits[16];
	int nd = 0;
	for (unsigned v = (unsigned)pid; v || nd == 0; v /= 10)
		digits[nd++] = (char)('0' + v % 10);
	while (nd)
		path[k++] = digits[--nd];
	memcpy(path + k, "/status", 8);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	for (char *p = buf; (p = strstr(p, "\nSeccomp:")); p++) {
		p += strlen("\nSeccomp:");
		while (*p == ' ' || *p == '\t')
			p++;
		return *p == '3' ? 1 : (*p >= '0' && *p <= '2') ? 0 : -1;
	}
	return -1;
}

/* PID 1 of the job's namespace: reap everything, report the job, then exit (which takes the
 * rest of the namespace with it). */
static void init_main(pid_t job, int statusfd)
{
	/* Hold nothing of the job's or the supervisor's open: EOFs must come when the job goes. */
	if (statusfd > 0)
		syscall(SYS_close_range, 0U, (unsigned)statusfd - 1, 0U);
	syscall(SYS_close_range, (unsigned)statusfd + 1, ~0U, 0U);
	for (;;) {
		int st;
		struct rusage ru;
		siginfo_t si;
		/* Look at the dead one before reaping it: the job's zombie still shows its seccomp
		 * mode. */
		memset(&si, 0, sizeof si);
		if (waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) < 0) {
			if (errno == EINTR)
				continue;
			_exit(127);
		}
		int filter_kill = 0;
		if (si.si_pid == job && (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) &&
		    si.si_status == SIGSYS)
			filter_kill = seccomp_killed(job);
		pid_t p = wait4(si.si_pid, &st, 0, &ru);
		if (p < 0) {
			if (errno == EINTR)
				continue;
			_exit(127);
		}
		if (p != job)
			continue;
		struct spawn_status s;
		memset(&s, 0, sizeof s);
		s.seccomp_kill = filter_kill;
		s.exited = WIFEXITED(st);
		s.status = s.exited ? WEXITSTATUS(st) : WTERMSIG(st);
		s.cpu_ms = (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
		           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
		(void)!write(statusfd, &s, sizeof s);
		_exit(s.exited ? s.status : 128 + s.status);
	}
}

/* Close every fd but the n (at most 4) in keep. */
static void close_all_but(int *keep, int n)
{
	for (int i = 1; i < n; i++)      /* insertion sort: n is tiny */
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int x = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = x;
		}
	unsigned lo = 0;
	for (int i = 0; i < n; i++) {
		if ((unsigned)keep[i] > lo)
			syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0U);
		lo = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, lo, ~0U, 0U);
}

/* The job's end as the keeper saw it, for spawn_read_status(). */
static void keeper_report(int statusfd, int st, const struct rusage *ru, int filter_kill)
{
	struct spawn_status s;
	memset(&s, 0, sizeof s);
	s.seccomp_kill = filter_kill;
	s.exited = WIFEXITED(st);
	s.status = s.exited ? WEXITSTATUS(st) : WTERMSIG(st);
	s.cpu_ms = (long long)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
	           (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000;
	(void)!write(statusfd, &s, sizeof s);
}

/* Without a PID namespace, the keeper: our direct child, the leader of the job's process group
 * and the job's parent.  The parent-death signal reaches only the process it is set in, so
 * without a keeper the children of a job (under profile none) would outlive a supervisor that
 * died, still at work beside the attempt that resumes their task.  The keeper waits on two
 * pidfds: when the job ends it reports the job's status like an init; when the supervisor ends
 * (or poll fails and it cannot tell) it stops waiting.  Either way it then SIGKILLs its process
 * group, itself included: the same tree the supervisor kills when a job ends or is cancelled. */
static void keeper_main(pid_t job, int jobfd, int statusfd, int ppidfd)
{
	int keep[3] = { jobfd, statusfd, ppidfd };
	close_all_but(keep, 3);
	/* The job may signal its own group (`kill 0`, a shell's exit trap): that must not end the
	 * keeper, or its parent-death kill would take the job down with it. */
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD)
			signal(s, SIG_IGN);
	struct pollfd pf[2] = { { .fd = ppidfd, .events = POLLIN }, { .fd = jobfd, .events = POLLIN } };
	for (;;) {
		int n = poll(pf, 2, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || pf[0].revents)
			break;
		int st, filter_kill = 0;
		struct rusage ru;
		siginfo_t si;
		/* As the init does: the zombie's seccomp mode tells a filter kill from a SIGSYS the
		 * job raised itself. */
		memset(&si, 0, sizeof si);
		if (pf[1].revents && waitid(P_PID, (id_t)job, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == job && (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) &&
		    si.si_status == SIGSYS)
			filter_kill = seccomp_killed(job);
		pid_t p = pf[1].revents ? wait4(job, &st, WNOHANG, &ru) : 0;
		if (p == job) {
			keeper_report(statusfd, st, &ru, filter_kill);
			break;
		}
		if (p < 0 && errno != EINTR)
			break;
	}
	kill(0, SIGKILL);
	_exit(127);
}

/* The first child becomes the job's keeper; the job is its child, in its process group (no
 * setsid: the group is what the keeper and the supervisor kill). */
static void run_keeper(const struct spawn_req *r, int errfd, int statusfd, int ppidfd)
{
	/* The keeper must outlive the supervisor long enough to kill the group: from here on
	 * the pidfd tells it of the supervisor's death, even of one that already happened. */
	if (prctl(PR_SET_PDEATHSIG, 0) < 0)
		report(errfd, "pdeathsig", errno, NULL);
	pid_t self = (pid_t)syscall(SYS_getpid);
	int jobfd = -1;
	pid_t job = spawn_clone(0, -1, &jobfd);
	if (job < 0)
		report(errfd, "fork", -job, "of the job under its keeper");
	if (job == 0) {
		close(statusfd);
		close(ppidfd);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
			report(errfd, "pdeathsig", errno, NULL);
		if (getppid() != self)
			report(errfd, "pdeathsig", ESRCH, "keeper exited during spawn");
		exec_job(r, errfd);
	}
	close(errfd);
	keeper_main(job, jobfd, statusfd, ppidfd);
}

/* A root supervisor writes the child's id maps after the clone: wait for its word. */
static void await_maps(int gatefd, int errfd)
{
	char c = 0;
	ssize_t n;
	do {
		n = read(gatefd, &c, 1);
	} while (n < 0 && errno == EINTR);
	close(gatefd);
	if (n != 1)
		report(errfd, "sandbox", EPERM, "the supervisor did not map the job's user");
}

static void child(const struct spawn_req *r, int errfd, int statusfd, int ppidfd, pid_t ppid,
                  int gatefd)
{
	const struct sandbox_job *sj = r->sandbox;
	int pidns = sj && sandbox_job_pidns(sj);

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		report(errfd, "pdeathsig", errno, NULL);
	/* The supervisor may have died before prctl: then nobody would kill us.  In a PID
	 * namespace getppid() says 0, so ask the pidfd instead. */
	if (ppidfd >= 0) {
		struct pollfd pf = { .fd = ppidfd, .events = POLLIN };
		if (poll(&pf, 1, 0) != 0)
			report(errfd, "pdeathsig", ESRCH, "supervisor exited during spawn");
	} else if (getppid() != ppid) {
		report(errfd, "pdeathsig", ESRCH, "supervisor exited during spawn");
	}
	if (gatefd >= 0)
		await_maps(gatefd, errfd);
	if (sj) {
		char msg[200] = "";
		int rc = sandbox_child_enter(sj, msg, sizeof msg);
		if (rc < 0)
			report(errfd, "sandbox", -rc, msg);
		/* Taking the job's ids re-armed the parent-death signal: check again that the
		 * supervisor did not go in between. */
		struct pollfd pf = { .fd = ppidfd, .events = POLLIN };
		if (ppidfd >= 0 && poll(&pf, 1, 0) != 0)
			report(errfd, "pdeathsig", ESRCH, "supervisor exited during spawn");
	}

	/* Move the job's fds above 3 first, so placing them at 0..3 never clobbers one another. */
	errfd = lift(errfd, errfd);
	statusfd = lift(statusfd, errfd);
	ppidfd = lift(ppidfd, errfd);
	int src[3] = { r->fd_stdin, r->fd_out, r->fd_sock };
	int hi[3];
	for (int i = 0; i < 3; i++) {
		hi[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 10);
		if (hi[i] < 0)
			report(errfd, "dup", errno, NULL);
	}
	if (dup2(hi[0], 0) < 0 || dup2(hi[1], 1) < 0 || dup2(hi[1], 2) < 0 || dup2(hi[2], 3) < 0)
		report(errfd, "dup2", errno, NULL);
	/* Everything else (including the supervisor's stdout, which is the MCP transport) is
	 * closed on exec; CLOEXEC rather than close keeps errfd usable until execve. */
	if (syscall(SYS_close_range, 4U, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
		for (int fd = 4; fd < 65536; fd++)
			fcntl(fd, F_SETFD, FD_CLOEXEC);
	}

	if (setsid() < 0)
		report(errfd, "setsid", errno, NULL);
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);

	if (pidns) {
		/* A plain fork by raw system call: no atfork handlers run in this half-copied
		 * process. */
		long job = syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
		if (job < 0)
			report(errfd, "fork", errno, "of the job inside its PID namespace");
		if (job == 0) {
			close(statusfd);
			if (setsid() < 0)
				report(errfd, "setsid", errno, NULL);
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
				report(errfd, "pdeathsig", errno, NULL);
			exec_job(r, errfd);
		}
		close(errfd);
		init_main((pid_t)job, statusfd);
	}
	if (statusfd >= 0)
		run_keeper(r, errfd, statusfd, ppidfd);
	exec_job(r, errfd);
}

/* ---- the supervisor's side ------------------------------------------------------------ */

/* The child's failure report as one line in err; returns it as -errno. */
static int report_text(struct child_report *rep, char *err, size_t errlen)
{
	int e = rep->err ? rep->err : EIO;
	rep->step[sizeof rep->step - 1] = 0;
	rep->msg[sizeof rep->msg - 1] = 0;
	snprintf(err, errlen, "%s%s%s: %s", rep->step, rep->msg[0] ? " " : "", rep->msg, strerror(e));
	return -e;
}

/* The child of a root supervisor waits at the gate for its id maps: write them, then let it
 * go (a few small writes; the child has done nothing yet).  Closes gatefd.  0 or -errno. */
static int release(const struct sandbox_job *sj, pid_t pid, int gatefd, char *err, size_t errlen)
{
	int rc = sandbox_job_write_maps(sj, pid, err, errlen);
	if (rc == 0 && write(gatefd, "m", 1) != 1) {
		rc = -errno;
		snprintf(err, errlen, "releasing the job: %s", strerror(errno));
	}
	close(gatefd);
	return rc;
}

/* Does any string of the request live where the jail's init will blank its memory? */
static int uses_blanked(const struct spawn_req *r)
{
	const struct sandbox_job *sj = r->sandbox;
	if (!sj)
		return 0;
	if (sandbox_job_blanks(sj, r->cwd))
		return 1;
	for (size_t i = 0; r->argv[i]; i++)
		if (sandbox_job_blanks(sj, r->argv[i]))
			return 1;
	for (size_t i = 0; r->envp[i]; i++)
		if (sandbox_job_blanks(sj, r->envp[i]))
			return 1;
	return 0;
}

/* The descriptors spawn_start() holds while it builds a job: ep is the exec pipe (the child's
 * failure report, or EOF at exec), sp the status pipe (the job's end, from its init or keeper),
 * gp the gate (a root supervisor writes the id maps before the child may go on); -1 when not
 * open. */
struct spawn_fds {
	int ep[2], sp[2], gp[2];
	int pidfd, ppidfd;
};

static void fds_close(struct spawn_fds *f)
{
	for (int i = 0; i < 2; i++) {
		if (f->ep[i] >= 0)
			close(f->ep[i]);
		if (f->sp[i] >= 0)
			close(f->sp[i]);
		if (f->gp[i] >= 0)
			close(f->gp[i]);
	}
	if (f->ppidfd >= 0)
		close(f->ppidfd);
	if (f->pidfd >= 0)
		close(f->pidfd);
}

/* The pipes and the pidfd of this process, which the keeper waits on so a job never outlives
 * its supervisor.  A kernel without pidfd_open (before 5.3) gets none; there the job alone has
 * the parent-death signal, and no keeper runs, so the status pipe goes too.  Inside a PID
 * namespace the pidfd is required: the init cannot see this process otherwise.  0 or -errno. */
static int fds_open(struct spawn_fds *f, int gate, int pidns, pid_t parent, char *err, size_t errlen)
{
	/* The status pipe carries the job's end from an init or, without a PID namespace, from
	 * the keeper. */
	if (pipe2(f->ep, O_CLOEXEC) < 0 || pipe2(f->sp, O_CLOEXEC) < 0 ||
	    (gate && pipe2(f->gp, O_CLOEXEC) < 0)) {
		int e = errno;
		snprintf(err, errlen, "pipe: %s", strerror(e));
		return -e;
	}
	if ((f->ppidfd = (int)syscall(SYS_pidfd_open, parent, 0)) < 0 && pidns) {
		int e = errno;
		snprintf(err, errlen, "pidfd_open: %s", strerror(e));
		return -e;
	}
	if (f->ppidfd < 0) {
		close(f->sp[0]);
		close(f->sp[1]);
		f->sp[0] = f->sp[1] = -1;
	}
	return 0;
}

/* A child that failed before exec is killed through its pidfd (never a recycled pid) and
 * reaped here, so no zombie is left behind for a caller that never heard of it. */
static void kill_reap(int pidfd, pid_t pid)
{
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	waitpid(pid, NULL, 0);
}

/* The synchronous caller's wait for exec: the exec pipe is CLOEXEC, so EOF means exec
 * succeeded and a report means a step failed.  Blocks only until exec or failure: no child
 * waits for anything before exec.  0, or -errno with the child's report in err (the child is
 * killed and reaped then). */
static int await_exec(struct spawn_fds *f, pid_t pid, char *err, size_t errlen)
{
	struct child_report rep;
	ssize_t n;
	do {
		n = read(f->ep[0], &rep, sizeof rep);
	} while (n < 0 && errno == EINTR);
	if (n > 0) {
		int rc = report_text(&rep, err, errlen);
		kill_reap(f->pidfd, pid);
		return rc;
	}
	close(f->ep[0]);
	f->ep[0] = -1;
	return 0;
}

/* Every pipe exists before clone3 so the child inherits its ends; the parent then drops its
 * write ends, so EOF on the CLOEXEC exec pipe means the child reached exec (or died).  Under a
 * gate the child can do nothing before its id maps are written, so a failed release kills a
 * child that has not yet touched anything.  Strings in this process's own argv or environ are
 * refused up front: the jail's init blanks those in its copy, under the job's feet. */
int spawn_start(const struct spawn_req *r, struct spawn_proc *out, char *err, size_t errlen)
{
	struct spawn_fds f = { { -1, -1 }, { -1, -1 }, { -1, -1 }, -1, -1 };
	pid_t pid = -1;
	int rc;
	const struct sandbox_job *sj = r->sandbox;
	int pidns = sj && sandbox_job_pidns(sj);

	int gate = sj && sandbox_job_parent_maps(sj);
	if (uses_blanked(r)) {
		snprintf(err, errlen, "spawn: argv, envp and cwd must not point into this process's own "
		         "argv or environ");
		return -EINVAL;
	}
	pid_t parent = getpid();
	if ((rc = fds_open(&f, gate, pidns, parent, err, errlen)) < 0)
		goto fail;
	pid = spawn_clone(sj ? sandbox_job_clone_flags(sj) : 0, sj ? sandbox_job_cgroup_fd(sj) : -1,
	                  &f.pidfd);
	if (pid < 0) {
		rc = pid;
		snprintf(err, errlen, "clone3: %s", strerror(-rc));
		pid = -1;
		goto fail;
	}
	if (pid == 0) {
		close(f.ep[0]);
		if (f.sp[0] >= 0)
			close(f.sp[0]);
		if (f.gp[1] >= 0)
			close(f.gp[1]);
		child(r, f.ep[1], f.sp[1], f.ppidfd, parent, f.gp[0]);
		_exit(127);
	}
	if (gate) {
		close(f.gp[0]);
		f.gp[0] = -1;
		rc = release(sj, pid, f.gp[1], err, errlen);
		f.gp[1] = -1;
		if (rc < 0) {
			kill_reap(f.pidfd, pid);
			pid = -1;
			goto fail;
		}
	}
	close(f.ep[1]);
	f.ep[1] = -1;
	if (f.sp[1] >= 0)
		close(f.sp[1]);
	f.sp[1] = -1;

	if (r->async)
		fcntl(f.ep[0], F_SETFL, O_NONBLOCK);
	else if ((rc = await_exec(&f, pid, err, errlen)) < 0)
		goto fail;
	if (f.ppidfd >= 0)
		close(f.ppidfd);
	if (f.sp[0] >= 0)
		fcntl(f.sp[0], F_SETFL, O_NONBLOCK);
	out->pid = pid;
	out->pidfd = f.pidfd;
	out->statusfd = f.sp[0];
	out->execfd = f.ep[0];
	return 0;
fail:
	fds_close(&f);
	return rc;
}

int spawn_exec_result(int execfd, char *err, size_t errlen)
{
	struct child_report rep;
	ssize_t n;
	do {
		n = read(execfd, &rep, sizeof rep);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 1;
	if (n <= 0)
		return 0;   /* EOF: the close-on-exec write end went away at exec */
	return report_text(&rep, err, errlen);
}

int spawn_read_status(int statusfd, struct spawn_status *st)
{
	if (statusfd < 0)
		return 0;
	ssize_t n;
	do {
		n = read(statusfd, st, sizeof *st);
	} while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof *st;
}
