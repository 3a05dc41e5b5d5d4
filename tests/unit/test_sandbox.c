/* tests/unit/test_sandbox.c — the sandbox modules one by one: the seccomp programs (loaded in
 * forked children, which then try allowed and forbidden calls), Landlock rules, planning a
 * job's sandbox (profiles, require, the effective-sandbox record, verdicts), and spawning into
 * it (exit status through the namespace init, what the job can see, killing a tree that left
 * its session).  Parts whose kernel feature is missing print "skip: …" and count nothing.
 * Prints "N passed, M failed" last. */
#include "runner/sandbox/sandbox.h"
#include "runner/sandbox/landlock.h"
#include "runner/sandbox/seccomp.h"
#include "runner/spawn.h"
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void skip(const char *what, const char *why)
{
	printf("skip: %s: %s\n", what, why);
}

/* ---- running a probe in a child -------------------------------------------------------- */

enum probe {
	P_GETPID, P_UNSHARE, P_INET, P_UNIX, P_CLONE3, P_KILL_ALL, P_FORK, P_PTRACE, P_TIOCSTI,
	P_IO_URING, P_THREAD, P_KILL_PARENT, P_SUID_BIT, P_SUID_CREATE, P_PLAIN_CHMOD, P_MEMFD, P_SHM,
};

/* fchmod with a setuid bit, or an open(O_CREAT) asking for one, on a scratch file. */
static int mode_probe(enum probe p)
{
	char path[64];
	snprintf(path, sizeof path, "/tmp/fp-unit-mode-%ld", (long)getpid());
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, p == P_SUID_CREATE ? 04755 : 0644);
	int e = errno;
	if (fd >= 0 && p != P_SUID_CREATE) {
		if (fchmod(fd, p == P_SUID_BIT ? 04755 : 0755) < 0)
			e = errno;
		else
			e = 0;
	}
	if (fd >= 0)
		close(fd);
	unlink(path);
	return fd >= 0 && e == 0 ? 0 : 10 + e;
}

static void *thread_fn(void *arg)
{
	return arg;
}

/* Exit 0: the call did what the test expects of an allowed call; 10 + errno otherwise. */
static int run_probe(enum probe p)
{
	switch (p) {
	case P_GETPID:
		return getpid() > 0 ? 0 : 1;
	case P_UNSHARE:
		return unshare(CLONE_NEWUSER) == 0 ? 0 : 10 + errno;
	case P_INET: {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		return s >= 0 ? 0 : 10 + errno;
	}
	case P_UNIX: {
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		return s >= 0 ? 0 : 10 + errno;
	}
	case P_CLONE3: {
		uint64_t args[11] = { 0 };
		args[4] = SIGCHLD;
		long r = syscall(SYS_clone3, args, sizeof args);
		if (r == 0)
			_exit(0);
		return r > 0 ? 0 : 10 + errno;
	}
	case P_KILL_ALL:
		return kill(-1, 0) == 0 ? 0 : 10 + errno;
	case P_FORK: {
		pid_t c = fork();
		if (c == 0)
			_exit(0);
		int st;
		return c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) ? 0 : 10 + errno;
	}
	case P_PTRACE:
		return ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0 ? 0 : 10 + errno;
	case P_TIOCSTI: {
		char ch = 'x';
		return ioctl(0, TIOCSTI, &ch) == 0 ? 0 : 10 + errno;
	}
	case P_IO_URING: {
		unsigned char params[120] = { 0 };
		return syscall(SYS_io_uring_setup, 1, params) >= 0 ? 0 : 10 + errno;
	}
	case P_THREAD: {
		pthread_t t;
		return pthread_create(&t, NULL, thread_fn, NULL) == 0 && pthread_join(t, NULL) == 0 ? 0 : 1;
	}
	case P_KILL_PARENT:
		return kill(getppid(), 0) == 0 ? 0 : 10 + errno;
	case P_SUID_BIT:
	case P_SUID_CREATE:
	case P_PLAIN_CHMOD:
		return mode_probe(p);
	case P_MEMFD:
		return syscall(SYS_memfd_create, "probe", 0U) >= 0 ? 0 : 10 + errno;
	case P_SHM:
		return syscall(SYS_shmget, 0 /* IPC_PRIVATE */, 4096UL, 01600) >= 0 ? 0 : 10 + errno;
	}
	return 1;
}

/* The wait status of a child that loads prog (if any) and runs the probe. */
static int in_filter(const struct sock_fprog *prog, enum probe p)
{
	fflush(NULL);
	pid_t c = fork();
	if (c == 0) {
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || (prog && sc_load(prog) < 0))
			_exit(2);
		_exit(run_probe(p));
	}
	int st = 0;
	waitpid(c, &st, 0);
	return st;
}

#define KILLED_BY_SYS(st) (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
#define EXITED_WITH(st, code) (WIFEXITED(st) && WEXITSTATUS(st) == (code))

/* No setuid/setgid bits, under either policy; memfd and shm refused only with no_shm. */
static void test_seccomp_modes(struct tally *t)
{
	struct sock_fprog def, strict, noshm;
	char err[256] = "";
	struct sc_variant v = { .policy = SC_DEFAULT, .pidns = 1 };
	int ok = sc_build(&v, &def, err, sizeof err) == 0;
	v.no_shm = 1;
	ok &= sc_build(&v, &noshm, err, sizeof err) == 0;
	v.no_shm = 0;
	v.policy = SC_STRICT;
	ok &= sc_build(&v, &strict, err, sizeof err) == 0;
	CHECKF(t, ok, "mode and shm filters: %s", err);
	if (!ok || EXITED_WITH(in_filter(&def, P_GETPID), 2))
		return;
	CHECKF(t, EXITED_WITH(in_filter(NULL, P_SUID_BIT), 0), "no filter: fchmod 04755 works here");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_SUID_BIT), 10 + EPERM), "default: fchmod 04755 refused");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_SUID_CREATE), 10 + EPERM), "default: open(O_CREAT, 04755) refused");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_PLAIN_CHMOD), 0), "default: fchmod 0755 allowed");
	CHECKF(t, KILLED_BY_SYS(in_filter(&strict, P_SUID_BIT)), "strict: fchmod 04755 kills");
	CHECKF(t, KILLED_BY_SYS(in_filter(&strict, P_SUID_CREATE)), "strict: open(O_CREAT, 04755) kills");
	CHECKF(t, EXITED_WITH(in_filter(&strict, P_PLAIN_CHMOD), 0), "strict: fchmod 0755 allowed");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_MEMFD), 0), "default: memfd_create allowed");
	CHECKF(t, EXITED_WITH(in_filter(&noshm, P_MEMFD), 10 + ENOSYS), "no_shm: memfd_create is ENOSYS");
	CHECKF(t, EXITED_WITH(in_filter(&noshm, P_SHM), 10 + ENOSYS), "no_shm: shmget is ENOSYS");
	CHECKF(t, EXITED_WITH(in_filter(&noshm, P_GETPID), 0), "no_shm: getpid allowed");
	sc_free(&def);
	sc_free(&noshm);
	sc_free(&strict);
}

static void test_seccomp(struct tally *t)
{
	struct sock_fprog def, net, strict, nopid;
	char err[256] = "";
	struct sc_variant v = { .policy = SC_DEFAULT, .pidns = 1 };
	int rc = sc_build(&v, &def, err, sizeof err);
	CHECKF(t, rc == 0, "default filter: %s", err);
	v.network = 1;
	CHECKF(t, sc_build(&v, &net, err, sizeof err) == 0, "network filter: %s", err);
	v.network = 0;
	v.pidns = 0;
	v.supervisor = getpid();
	CHECKF(t, sc_build(&v, &nopid, err, sizeof err) == 0, "no-pidns filter: %s", err);
	v.policy = SC_STRICT;
	CHECKF(t, sc_build(&v, &strict, err, sizeof err) == 0, "strict filter: %s", err);
	if (rc < 0)
		return;
	if (EXITED_WITH(in_filter(&def, P_GETPID), 2)) {
		skip("seccomp", "the kernel refused to load a filter");
		goto out;
	}

	CHECKF(t, EXITED_WITH(in_filter(&def, P_GETPID), 0), "default: getpid allowed");
	CHECKF(t, KILLED_BY_SYS(in_filter(&def, P_UNSHARE)), "default: unshare kills");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_INET), 10 + EAFNOSUPPORT), "default: AF_INET refused");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_UNIX), 0), "default: AF_UNIX allowed");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_CLONE3), 10 + ENOSYS), "default: clone3 is ENOSYS");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_KILL_ALL), 10 + EPERM), "default: kill(-1) refused");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_FORK), 0), "default: fork allowed (clone fallback)");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_THREAD), 0), "default: threads allowed");
	CHECKF(t, KILLED_BY_SYS(in_filter(&def, P_PTRACE)), "default: ptrace kills");
	CHECKF(t, KILLED_BY_SYS(in_filter(&def, P_TIOCSTI)), "default: TIOCSTI kills");
	CHECKF(t, KILLED_BY_SYS(in_filter(&def, P_IO_URING)), "default: io_uring kills");
	CHECKF(t, EXITED_WITH(in_filter(&def, P_KILL_PARENT), 0), "default (pidns): kill(parent, 0) allowed");
	CHECKF(t, EXITED_WITH(in_filter(&net, P_INET), 0), "network: AF_INET allowed");
	/* The no-PID-namespace variant knows the supervisor's pid: here, the test process. */
	CHECKF(t, KILLED_BY_SYS(in_filter(&nopid, P_KILL_PARENT)), "no pidns: signalling the supervisor kills");
	CHECKF(t, EXITED_WITH(in_filter(&strict, P_GETPID), 0), "strict: getpid allowed");
	CHECKF(t, EXITED_WITH(in_filter(&strict, P_THREAD), 0), "strict: threads allowed");
	CHECKF(t, KILLED_BY_SYS(in_filter(&strict, P_FORK)), "strict: fork kills");
	CHECKF(t, KILLED_BY_SYS(in_filter(&strict, P_UNIX)), "strict: sockets kill");
out:
	sc_free(&def);
	sc_free(&net);
	sc_free(&nopid);
	sc_free(&strict);
}

/* ---- Landlock ----------------------------------------------------------------------------- */

static void test_landlock(struct tally *t, const char *scratch)
{
	int abi = landlock_abi();
	if (abi <= 0) {
		skip("landlock", "not available in this kernel");
		return;
	}
	char in[PATH_MAX], out[PATH_MAX], f[PATH_MAX + 16];
	snprintf(in, sizeof in, "%s/ll-in", scratch);
	snprintf(out, sizeof out, "%s/ll-out", scratch);
	mkdir(in, 0700);
	mkdir(out, 0700);
	snprintf(f, sizeof f, "%s/secret", out);
	int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 1) < 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &al) < 0) {
		CHECKF(t, 0, "listener: %s", strerror(errno));
		return;
	}
	fflush(NULL);
	pid_t c = fork();
	if (c == 0) {
		struct ll_rule rules[] = { { in, LL_WRITE }, { "/usr", LL_EXEC }, { "/nonexistent", LL_READ } };
		char msg[200] = "";
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    landlock_apply(abi, rules, 3, 1, 1, msg, sizeof msg) < 0)
			_exit(2);
		char p[PATH_MAX + 16];
		snprintf(p, sizeof p, "%s/new", in);
		if (open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) < 0)
			_exit(3);              /* inside: must work */
		if (open(f, O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES)
			_exit(4);              /* outside: must be refused */
		if (abi >= 4) {
			int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0)
				_exit(5);
		}
		if (abi >= 6 && kill(getppid(), 0) == 0)
			_exit(6);              /* signal scoping */
		_exit(0);
	}
	int st = 0;
	waitpid(c, &st, 0);
	close(ls);
	CHECKF(t, EXITED_WITH(st, 0), "landlock child exited %d (2 apply, 3 inside, 4 outside, 5 tcp, 6 signal)",
	      WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
}

/* ---- planning ------------------------------------------------------------------------------ */

static struct sandbox_policy cfg_of(const char *profile)
{
	struct sandbox_policy c;
	memset(&c, 0, sizeof c);
	snprintf(c.profile, sizeof c.profile, "%s", profile);
	return c;
}

static void test_plan(struct tally *t, struct sandbox *sb, const char *work)
{
	struct sandbox_policy c = cfg_of("default");
	struct sandbox_paths p = { .program = "/bin/sh", .work_dir = work, .cwd = work, .name = "unit" };
	struct sandbox_job *sj = NULL;
	char err[512] = "";

	int rc = sandbox_job_new(sb, &c, &p, &sj, err, sizeof err);
	CHECKF(t, rc == 0, "default plan: %s", err);
	if (rc == 0) {
		const char *j = sandbox_job_json(sj);
		CHECKF(t, strstr(j, "\"profile\":\"default\"") && strstr(j, "\"rlimits\":true") &&
		         strstr(j, "\"degraded\":"), "record: %s", j);
		CHECKF(t, !sandbox_job_trusted(sj), "default is not trusted");
		struct sandbox_verdict v;
		sandbox_job_verdict(sj, 1, 0, 0, -1, &v);
		CHECKF(t, v.code == NULL, "exit 0: no verdict");
		sandbox_job_verdict(sj, 1, 1, 0, -1, &v);
		CHECKF(t, v.code == NULL, "exit 1: no verdict");
		sandbox_job_verdict(sj, 0, SIGXCPU, 0, -1, &v);
		CHECKF(t, v.code && !strcmp(v.code, "resource_limit") && !strcmp(v.limit, "cpuSeconds") &&
		         v.value == SB_DEFAULT_CPU_SECONDS, "SIGXCPU: cpuSeconds");
		sandbox_job_verdict(sj, 0, SIGKILL, (long long)SB_DEFAULT_CPU_SECONDS * 1000 + 5, -1, &v);
		CHECKF(t, v.code && !strcmp(v.limit, "cpuSeconds"), "SIGKILL past the CPU limit: cpuSeconds");
		sandbox_job_verdict(sj, 0, SIGKILL, 10, -1, &v);
		CHECKF(t, v.code == NULL, "SIGKILL early: no verdict");
		sandbox_job_verdict(sj, 0, SIGXFSZ, 0, -1, &v);
		CHECKF(t, v.code && !strcmp(v.limit, "maxFileMB"), "SIGXFSZ: maxFileMB");
		sandbox_job_verdict(sj, 0, SIGSYS, 0, -1, &v);
		if (strstr(j, "\"seccomp\":\"none\""))
			CHECKF(t, v.code == NULL, "SIGSYS without a filter: no verdict");
		else
			CHECKF(t, v.code && !strcmp(v.code, "sandbox_violation"), "SIGSYS: sandbox_violation");
		sandbox_job_verdict(sj, 0, SIGSYS, 0, 1, &v);
		if (!strstr(j, "\"seccomp\":\"none\""))
			CHECKF(t, v.code && !strcmp(v.code, "sandbox_violation"), "SIGSYS by the filter: sandbox_violation");
		sandbox_job_verdict(sj, 0, SIGSYS, 0, 0, &v);
		CHECKF(t, v.code == NULL, "SIGSYS the job raised itself: no verdict");
		sandbox_job_free(sj);
	}

	c = cfg_of("none");
	char *req[] = { "seccomp" };
	rc = sandbox_job_new(sb, &c, &p, &sj, err, sizeof err);
	CHECKF(t, rc == 0 && sandbox_job_trusted(sj) && strstr(sandbox_job_json(sj), "\"profile\":\"none\""),
	      "none plan: %d %s", rc, err);
	if (rc == 0)
		sandbox_job_free(sj);
	c.require = req;
	c.n_require = 1;
	rc = sandbox_job_new(sb, &c, &p, &sj, err, sizeof err);
	CHECKF(t, rc == -ENOTSUP && strstr(err, "seccomp"), "none + require seccomp: %d %s", rc, err);

	c = cfg_of("strict");
	p.program = "/nonexistent/program";
	rc = sandbox_job_new(sb, &c, &p, &sj, err, sizeof err);
	CHECKF(t, rc == -ENOENT && strstr(err, "/nonexistent/program"), "missing program: %d %s", rc, err);

	char *report = sandbox_host_report(sb);
	CHECKF(t, report && strstr(report, "landlock:") && strstr(report, "seccomp:"), "host report");
	free(report);
}

/* ---- spawning into it -------------------------------------------------------------------- */

/* Spawn /bin/sh -c script under the default profile; 0 and *proc, or -errno. */
static int spawn_sh(struct sandbox *sb, const char *work, const char *script, struct sandbox_job **sj,
                    struct spawn_proc *proc, char *err, size_t errlen)
{
	struct sandbox_policy c = cfg_of("default");
	struct sandbox_paths p = { .program = "/bin/sh", .work_dir = work, .cwd = work, .name = "unit" };
	int rc = sandbox_job_new(sb, &c, &p, sj, err, errlen);
	if (rc < 0)
		return rc;
	char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", NULL };
	int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct spawn_req r = { .argv = argv, .envp = envp, .cwd = work, .fd_stdin = dn, .fd_out = dn,
	                       .fd_sock = dn, .sandbox = *sj };
	rc = spawn_start(&r, proc, err, errlen);
	close(dn);
	if (rc < 0) {
		sandbox_job_free(*sj);
		*sj = NULL;
	}
	return rc;
}

static int wait_proc(struct spawn_proc *p, struct spawn_status *st)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED);
	int have = spawn_read_status(p->statusfd, st);
	if (!have) {
		st->exited = si.si_code == CLD_EXITED;
		st->status = si.si_status;
	}
	close(p->pidfd);
	if (p->statusfd >= 0)
		close(p->statusfd);
	return have;
}

/* Files the job makes are owned by its host uid: nobody for a root test run, ours otherwise.
 * Its init shows its own argv; /proc's secrets read empty and its knobs cannot be opened for
 * writing (nothing is written). */
static void test_identity(struct tally *t, struct sandbox *sb, const char *work)
{
	struct sandbox_job *sj = NULL;
	struct spawn_proc proc;
	struct spawn_status st;
	char err[512] = "", script[2 * PATH_MAX], made[PATH_MAX + 16];
	snprintf(made, sizeof made, "%s/made", work);
	unlink(made);
	snprintf(script, sizeof script,
	         "echo x > %s || exit 10; tr '\\0' ' ' </proc/1/cmdline | grep -q '^forkpoint-init *$' || exit 11; "
	         "[ -s /proc/keys ] && exit 12; (exec 3>/proc/sys/kernel/core_pattern) 2>/dev/null && exit 13; "
	         "(exec 3>/proc/sysrq-trigger) 2>/dev/null && exit 14; touch /dev/null 2>/dev/null && exit 15; "
	         "echo ok >/dev/null || exit 16; exit 0", made);
	int rc = spawn_sh(sb, work, script, &sj, &proc, err, sizeof err);
	CHECKF(t, rc == 0, "spawn: %s", err);
	if (rc < 0)
		return;
	wait_proc(&proc, &st);
	CHECKF(t, st.exited && st.status == 0, "identity and /proc: status %d (10 work, 11 cmdline, "
	       "12 keys, 13 sysctl, 14 sysrq, 15 /dev/null, 16 writing /dev/null)", st.status);
	struct stat sst;
	struct passwd *pw = getpwnam("nobody");
	uid_t want = geteuid() == 0 ? (pw ? pw->pw_uid : 65534) : geteuid();
	CHECKF(t, stat(made, &sst) == 0 && sst.st_uid == want, "the job's file belongs to uid %u (is %u)",
	       (unsigned)want, (unsigned)sst.st_uid);
	CHECKF(t, strstr(sandbox_job_json(sj), "\"memoryLimit\":") != NULL, "the record names the memory limit");
	sandbox_job_free(sj);
	if (geteuid() != 0)
		return;
	/* A retry: what the supervisor places now, in folders the first attempt owns, is handed
	 * over too; a link the job left is not followed. */
	char in[PATH_MAX + 16], f[PATH_MAX + 32], lk[PATH_MAX + 32];
	snprintf(in, sizeof in, "%s/inputs", work);
	mkdir(in, 0700);
	CHECKF(t, chown(in, want, want) == 0, "chown %s", in);
	snprintf(in, sizeof in, "%s/inputs/arg", work);
	mkdir(in, 0700);
	snprintf(f, sizeof f, "%s/file", in);
	int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
	if (fd >= 0)
		close(fd);
	char top[PATH_MAX + 32];
	snprintf(top, sizeof top, "%s/.args.json", work);
	fd = open(top, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	char target[PATH_MAX + 16];
	snprintf(target, sizeof target, "%s/../target", work);
	fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	snprintf(lk, sizeof lk, "%s/inputs/link", work);
	CHECKF(t, symlink(target, lk) == 0, "symlink %s", lk);
	struct sandbox_policy c = cfg_of("default");
	struct sandbox_paths p = { .program = "/bin/true", .work_dir = work, .cwd = work, .name = "unit" };
	CHECKF(t, sandbox_job_new(sb, &c, &p, &sj, err, sizeof err) == 0, "plan again: %s", err);
	struct stat a, b, h;
	CHECKF(t, stat(in, &a) == 0 && a.st_uid == want && stat(f, &b) == 0 && b.st_uid == want,
	       "a retry's inputs are handed over (%u %u)", (unsigned)a.st_uid, (unsigned)b.st_uid);
	CHECKF(t, stat(target, &h) == 0 && h.st_uid == 0, "a link in the work dir is not followed");
	CHECKF(t, stat(top, &h) == 0 && h.st_uid == want, "a file placed at the top is handed over");
	sandbox_job_free(sj);
}

/* A readPath swapped for a symbolic link between planning and the start is refused, never
 * followed. */
static void test_swap(struct tally *t, struct sandbox *sb, const char *scratch, const char *work)
{
	char ro[PATH_MAX + 16], old[PATH_MAX + 32], err[512] = "";
	snprintf(ro, sizeof ro, "%s/ro", scratch);
	snprintf(old, sizeof old, "%s/ro.old", scratch);
	rmdir(ro);
	unlink(ro);
	if (mkdir(ro, 0755) < 0)
		return;
	struct sandbox_policy c = cfg_of("default");
	char *rp[] = { ro };
	c.read_paths = rp;
	c.n_read_paths = 1;
	struct sandbox_paths p = { .program = "/bin/true", .work_dir = work, .cwd = work, .name = "unit" };
	struct sandbox_job *sj = NULL;
	int rc = sandbox_job_new(sb, &c, &p, &sj, err, sizeof err);
	CHECKF(t, rc == 0, "plan with a readPath: %s", err);
	if (rc < 0)
		return;
	if (!strstr(sandbox_job_json(sj), "private root")) {
		skip("readPath swap", "no private root here");
		sandbox_job_free(sj);
		return;
	}
	rename(ro, old);
	CHECKF(t, symlink(scratch, ro) == 0, "swap %s for a link", ro);
	char *argv[] = { "/bin/true", NULL };
	char *envp[] = { NULL };
	struct spawn_proc proc;
	int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct spawn_req r = { .argv = argv, .envp = envp, .cwd = work, .fd_stdin = dn, .fd_out = dn,
	                       .fd_sock = dn, .sandbox = sj };
	rc = spawn_start(&r, &proc, err, sizeof err);
	close(dn);
	CHECKF(t, rc == -ELOOP && strstr(err, "symbolic link") && strstr(err, ro),
	       "a swapped readPath is refused: %d %s", rc, err);
	if (rc == 0) {
		struct spawn_status st;
		wait_proc(&proc, &st);
	}
	sandbox_job_free(sj);
	unlink(ro);
	rmdir(old);
}

static void test_spawn(struct tally *t, struct sandbox *sb, const char *scratch, const char *work)
{
	struct sandbox_job *sj = NULL;
	struct spawn_proc proc;
	struct spawn_status st;
	char err[512] = "", script[3 * PATH_MAX];

	/* Without a sandbox: an exec failure comes back as an error, not a running child. */
	char *argv[] = { "/nonexistent/prog", NULL };
	char *envp[] = { NULL };
	int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct spawn_req r = { .argv = argv, .envp = envp, .fd_stdin = dn, .fd_out = dn, .fd_sock = dn };
	int rc = spawn_start(&r, &proc, err, sizeof err);
	close(dn);
	CHECKF(t, rc == -ENOENT && strstr(err, "exec"), "exec failure: %d %s", rc, err);

	rc = spawn_sh(sb, work, "exit 3", &sj, &proc, err, sizeof err);
	CHECKF(t, rc == 0, "spawn: %s", err);
	if (rc < 0)
		return;
	int pidns = sandbox_job_pidns(sj);
	wait_proc(&proc, &st);
	CHECKF(t, st.exited && st.status == 3, "exit status through the sandbox: %d %d", st.exited, st.status);
	sandbox_job_free(sj);

	/* What the job sees: its work dir writable; the scratch folder's secret and the shadow
	 * file not at all.  Exit codes name the first thing that went wrong. */
	char secret[PATH_MAX + 16];
	snprintf(secret, sizeof secret, "%s/secret", scratch);
	int fd = open(secret, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	snprintf(script, sizeof script,
	         "echo x > %s/probe || exit 10; cat %s >/dev/null 2>&1 && exit 11; "
	         "cat /etc/shadow >/dev/null 2>&1 && exit 12; echo y > /usr/probe 2>/dev/null && exit 13; "
	         "exit 0", work, secret);
	rc = spawn_sh(sb, work, script, &sj, &proc, err, sizeof err);
	CHECKF(t, rc == 0, "spawn: %s", err);
	if (rc == 0) {
		wait_proc(&proc, &st);
		CHECKF(t, st.exited && st.status == 0, "visibility: status %d (10 work, 11 secret, 12 shadow, 13 /usr)",
		      st.status);
		sandbox_job_free(sj);
	}

	test_identity(t, sb, work);
	test_swap(t, sb, scratch, work);

	if (!pidns) {
		skip("tree kill", "no PID namespace here");
		return;
	}
	/* A grandchild in its own session must die with the job's init. */
	char mark[64];
	snprintf(mark, sizeof mark, "1000.%06ld", (long)getpid() % 1000000);
	snprintf(script, sizeof script, "setsid sleep %s & sleep %s", mark, mark);
	rc = spawn_sh(sb, work, script, &sj, &proc, err, sizeof err);
	CHECKF(t, rc == 0, "spawn: %s", err);
	if (rc < 0)
		return;
	/* The shell carries the mark in its script too: 3 processes in all. */
	for (int i = 0; i < 200 && check_count_procs(mark) < 3; i++) {
		struct timespec ms = { 0, 10000000 };
		nanosleep(&ms, NULL);
	}
	CHECKF(t, check_count_procs(mark) == 3, "the shell and both sleepers run: %d", check_count_procs(mark));
	syscall(SYS_pidfd_send_signal, proc.pidfd, SIGKILL, NULL, 0);
	int have = wait_proc(&proc, &st);
	CHECKF(t, !have && !st.exited && st.status == SIGKILL, "killed init: no job report, SIGKILL");
	int left = 1;
	for (int i = 0; i < 200 && (left = check_count_procs(mark)) > 0; i++) {
		struct timespec ms = { 0, 10000000 };
		nanosleep(&ms, NULL);
	}
	CHECKF(t, left == 0, "%d sleepers outlived the kill", left);
	sandbox_job_free(sj);
}

/* Run argv under profile; the job's status as the init (or keeper) saw it.  0 or -errno. */
static int run_job(struct sandbox *sb, const char *profile, const char *work, char **argv,
                   struct spawn_status *st, char *err, size_t errlen)
{
	struct sandbox_policy c = cfg_of(profile);
	struct sandbox_paths p = { .program = argv[0], .work_dir = work, .cwd = work, .name = "unit" };
	struct sandbox_job *sj = NULL;
	int rc = sandbox_job_new(sb, &c, &p, &sj, err, errlen);
	if (rc < 0)
		return rc;
	char *envp[] = { "PATH=/usr/bin:/bin", NULL };
	int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct spawn_req r = { .argv = argv, .envp = envp, .cwd = work, .fd_stdin = dn, .fd_out = dn,
	                       .fd_sock = dn, .sandbox = sj };
	struct spawn_proc proc;
	rc = spawn_start(&r, &proc, err, errlen);
	close(dn);
	if (rc == 0 && !wait_proc(&proc, st))
		rc = -ECHILD;
	sandbox_job_free(sj);
	return rc;
}

/* SIGSYS from the filter is told apart from one the job raised itself, by the init of a PID
 * namespace and by the keeper of a job without one. */
static void test_sigsys(struct tally *t, struct sandbox *sb, const char *work)
{
	struct spawn_status st;
	char err[512] = "";
	char *forbidden[] = { "/usr/bin/unshare", "-U", "/bin/true", NULL };
	char *raised[] = { "/bin/sh", "-c", "kill -SYS $$", NULL };
	memset(&st, 0, sizeof st);
	int rc = run_job(sb, "default", work, forbidden, &st, err, sizeof err);
	CHECKF(t, rc == 0 && !st.exited && st.status == SIGSYS && st.seccomp_kill == 1,
	       "a forbidden call: SIGSYS, the filter's (%d %s; %d %d %d)", rc, err, st.exited, st.status,
	       st.seccomp_kill);
	memset(&st, 0, sizeof st);
	rc = run_job(sb, "default", work, raised, &st, err, sizeof err);
	CHECKF(t, rc == 0 && !st.exited && st.status == SIGSYS && st.seccomp_kill == 0,
	       "a SIGSYS the job raised: not the filter's (%d %s; %d %d %d)", rc, err, st.exited,
	       st.status, st.seccomp_kill);
	memset(&st, 0, sizeof st);
	rc = run_job(sb, "none", work, raised, &st, err, sizeof err);
	CHECKF(t, rc == 0 && !st.exited && st.status == SIGSYS && st.seccomp_kill == 0,
	       "under the keeper: not the filter's (%d %s; %d %d %d)", rc, err, st.exited, st.status,
	       st.seccomp_kill);
}

/* A request whose strings live in our own argv area (which the jail's init blanks) is refused
 * before anything is cloned. */
static void test_blanked(struct tally *t, struct sandbox *sb, const char *work, char *own_arg)
{
	struct sandbox_policy c = cfg_of("default");
	struct sandbox_paths p = { .program = "/bin/true", .work_dir = work, .cwd = work, .name = "unit" };
	struct sandbox_job *sj = NULL;
	char err[512] = "";
	if (sandbox_job_new(sb, &c, &p, &sj, err, sizeof err) < 0 || !sandbox_job_pidns(sj)) {
		skip("argv area", "no PID namespace here");
		sandbox_job_free(sj);
		return;
	}
	char *argv[] = { "/bin/true", NULL };
	char *envp[] = { NULL };
	struct spawn_proc proc;
	struct spawn_req r = { .argv = argv, .envp = envp, .cwd = own_arg, .fd_stdin = 0, .fd_out = 1,
	                       .fd_sock = 2, .sandbox = sj };
	int rc = spawn_start(&r, &proc, err, sizeof err);
	CHECKF(t, rc == -EINVAL && strstr(err, "argv"), "cwd in our own argv area refused: %d %s", rc, err);
	sandbox_job_free(sj);
}

int main(int argc, char **argv)
{
	struct tally t = { 0, 0 };
	char scratch[512], work[PATH_MAX];
	struct sandbox *sb = NULL;

	signal(SIGPIPE, SIG_IGN);
	check_tmpdir(scratch, sizeof scratch, "test-sandbox");
	snprintf(work, sizeof work, "%s/state/tasks/unit/work", scratch);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", work);
	if (system(cmd) != 0)
		return 2;

	test_seccomp(&t);
	test_seccomp_modes(&t);
	test_landlock(&t, scratch);
	CHECKF(&t, sandbox_new(&sb) == 0, "sandbox_new");
	if (sb) {
		test_plan(&t, sb, work);
		test_spawn(&t, sb, scratch, work);
		test_blanked(&t, sb, work, argc > 0 ? argv[0] : NULL);
		test_sigsys(&t, sb, work);
		sandbox_free(sb);
	}
	check_rm_rf(scratch);
	return check_done(&t);
}
