/* runner/sandbox_seccomp.c — see sandbox_seccomp.h. */
#include "runner/sandbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>
#include <linux/seccomp.h>

/* Calls no job needs and no jail may allow.  Names unknown to this libseccomp or architecture
 * are skipped: a kernel too old to have a call cannot be asked for it either. */
static const char *const deny_default[] = {
	"unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot",
	"open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
	"process_madvise", "migrate_pages", "move_pages",
	"bpf", "perf_event_open", "userfaultfd", "fanotify_init",
	"keyctl", "add_key", "request_key",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "get_kernel_syms", "query_module", "uselib", "nfsservctl", "_sysctl",
	"iopl", "ioperm", "modify_ldt", "vm86", "vm86old",
	"swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd", "lookup_dcookie",
	"open_by_handle_at", "name_to_handle_at", "syslog", "vhangup",
	"settimeofday", "clock_settime", "stime",
	NULL,
};

/* What pure computation needs: the C runtime, files, memory, time, threads, the job socket. */
static const char *const allow_strict[] = {
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
	"pwritev2", "lseek", "close", "close_range", "fstat", "newfstatat", "stat", "lstat", "statx",
	"fstatfs", "statfs", "access", "faccessat", "faccessat2", "readlink",
	"readlinkat", "getcwd", "chdir", "fchdir", "getdents64", "fcntl", "dup", "dup2", "dup3",
	"pipe", "pipe2", "mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat", "renameat2",
	"rmdir", "ftruncate", "truncate", "fsync", "fdatasync", "utimensat",
	"umask", "flock",
	"mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "msync", "membarrier",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"sigaltstack", "restart_syscall", "exit", "exit_group", "tgkill", "tkill",
	"futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq", "set_tid_address",
	"arch_prctl", "prlimit64", "getrlimit", "getrandom", "sched_yield", "sched_getaffinity",
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
	"getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups",
	"getresuid", "getresgid", "uname", "getrusage", "times", "sysinfo",
	"poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait",
	"epoll_pwait", "sendto", "recvfrom", "sendmsg", "recvmsg", "shutdown",
	"execve", "execveat",
	NULL,
};

#define NS_CLONE_FLAGS { CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, \
                         CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET }

/* Arguments that are C ints arrive in 64-bit registers whose upper half the caller may not
 * have cleared; compare the low 32 bits only. */
#define LOW32(v) SCMP_CMP_MASKED_EQ, 0xffffffffULL, (scmp_datum_t)(uint32_t)(v)

/* By name, through libseccomp, so the lists read as syscall names and a name this
 * architecture lacks (e.g. "open" on arm64) resolves to nothing instead of a wrong number. */
static int resolve(const char *name)
{
	return seccomp_syscall_resolve_name(name);
}

/* A call this libseccomp or architecture does not know is skipped, not an error: a call the
 * kernel cannot run needs no rule.  EEXIST (a call listed twice, or an alias) is fine too. */
static int add_list(scmp_filter_ctx ctx, uint32_t action, const char *const *names)
{
	for (size_t i = 0; names[i]; i++) {
		int nr = resolve(names[i]);
		if (nr == __NR_SCMP_ERROR || nr < 0)
			continue;
		int rc = seccomp_rule_add(ctx, action, nr, 0);
		if (rc < 0 && rc != -EEXIST)
			return rc;
	}
	return 0;
}

/* Where a call takes a file mode: which argument, and which argument holds open flags (-1:
 * the call always creates). */
struct mode_arg {
	const char *name;
	unsigned mode, flags;
	int has_flags;
};
static const struct mode_arg mode_calls[] = {
	{ "chmod", 1, 0, 0 }, { "fchmod", 1, 0, 0 }, { "fchmodat", 2, 0, 0 }, { "fchmodat2", 2, 0, 0 },
	{ "mknod", 1, 0, 0 }, { "mknodat", 2, 0, 0 }, { "creat", 1, 0, 0 },
	{ "open", 2, 1, 1 }, { "openat", 3, 2, 1 },
};
#define FP_O_TMPFILE_BIT 020000000   /* __O_TMPFILE, without O_DIRECTORY */

/* A masked-equality comparison built by hand: the SCMP_A* macros would need a literal
 * argument index. */
static struct scmp_arg_cmp arg_masked(unsigned arg, scmp_datum_t mask, scmp_datum_t value)
{
	struct scmp_arg_cmp c = { .arg = arg, .op = SCMP_CMP_MASKED_EQ, .datum_a = mask, .datum_b = value };
	return c;
}

/* A file a job creates or chmods never gets a setuid or setgid bit: it would keep it on the
 * host, where anyone could run it as the job's uid.  default: those calls fail with EPERM;
 * strict: only calls without the bits are allowed (the rest kill). */
static int add_mode_rules(scmp_filter_ctx ctx, enum sc_policy policy)
{
	static const scmp_datum_t bits[] = { S_ISUID, S_ISGID };
	static const scmp_datum_t creating[] = { O_CREAT, FP_O_TMPFILE_BIT };
	int rc;
	for (size_t i = 0; i < sizeof mode_calls / sizeof mode_calls[0]; i++) {
		const struct mode_arg *m = &mode_calls[i];
		int nr = resolve(m->name);
		if (nr < 0)
			continue;
		if (policy == SC_STRICT) {
			if (strcmp(m->name, "chmod") == 0 || strcmp(m->name, "mknod") == 0 ||
			    strcmp(m->name, "mknodat") == 0 || strcmp(m->name, "creat") == 0 ||
			    strcmp(m->name, "fchmodat2") == 0)
				continue;   /* not on the allowlist at all */
			struct scmp_arg_cmp clean = arg_masked(m->mode, S_ISUID | S_ISGID, 0);
			if ((rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &clean)) < 0)
				return rc;
			if (m->has_flags) {
				/* Without O_CREAT or O_TMPFILE the mode argument is not used. */
				struct scmp_arg_cmp plain = arg_masked(m->flags, O_CREAT | FP_O_TMPFILE_BIT, 0);
				if ((rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &plain)) < 0)
					return rc;
			}
			continue;
		}
		for (size_t b = 0; b < 2; b++) {
			struct scmp_arg_cmp c[2] = { arg_masked(m->mode, bits[b], bits[b]) };
			if (!m->has_flags) {
				if ((rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, c)) < 0)
					return rc;
				continue;
			}
			for (size_t k = 0; k < 2; k++) {
				c[1] = arg_masked(m->flags, creating[k], creating[k]);
				if ((rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2, c)) < 0)
					return rc;
			}
		}
	}
	/* openat2 hides its mode behind a pointer: ENOSYS makes callers fall back to openat. */
	int nr = resolve("openat2");
	if (nr >= 0 && (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0)) < 0)
		return rc;
	return 0;
}

/* memfd and System V shared memory pages count against no rlimit. */
static int add_shm_rules(scmp_filter_ctx ctx)
{
	static const char *const calls[] = { "memfd_create", "memfd_secret", "shmget", NULL };
	for (size_t i = 0; calls[i]; i++) {
		int nr = resolve(calls[i]);
		if (nr < 0)
			continue;
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The argument-checked rules.  seccomp cannot read memory, so clone3 (whose flags live in a
 * struct) is made to fail with ENOSYS and the libc falls back to clone, whose flags sit in a
 * register the filter can test: that is how new namespaces are refused.  One function rather
 * than one per profile (hence its length): the two profiles share the clone3, mode and shm
 * rules, and each branch reads as that profile's whole argument policy. */
static int add_common(scmp_filter_ctx ctx, const struct sc_variant *v)
{
	int rc;
	const unsigned long ns[] = NS_CLONE_FLAGS;
	/* ENOSYS makes glibc fall back to clone(2), whose flags are in a register we can see. */
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
		return rc;
	if ((rc = add_mode_rules(ctx, v->policy)) < 0)
		return rc;
	if (v->no_shm && (rc = add_shm_rules(ctx)) < 0)
		return rc;
	unsigned long all_ns = 0;
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
		all_ns |= ns[i];
	if (v->policy == SC_STRICT) {
		/* Threads only, in no new namespace: a computation has no business starting
		 * programs.  Everything else falls to the default action, kill. */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
		                      SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD | all_ns, CLONE_THREAD));
		if (rc < 0)
			return rc;
		static const unsigned long ok_ioctl[] = { TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIOCLEX };
		for (size_t i = 0; i < sizeof ok_ioctl / sizeof ok_ioctl[0]; i++)
			if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
			                           SCMP_A1(LOW32(ok_ioctl[i])))) < 0)
				return rc;
	} else {
		for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
			rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(clone), 1,
			                      SCMP_A0(SCMP_CMP_MASKED_EQ, ns[i], ns[i]));
			if (rc < 0)
				return rc;
		}
		/* Pushing characters into a terminal's input would type commands for someone else. */
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(ioctl), 1,
		                           SCMP_A1(LOW32(TIOCSTI)))) < 0 ||
		    (rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(ioctl), 1,
		                           SCMP_A1(LOW32(TIOCLINUX)))) < 0)
			return rc;
		/* kill(-1) reaches every process of our uid outside a PID namespace. */
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(kill), 1,
		                           SCMP_A0(LOW32(-1)))) < 0)
			return rc;
		if (!v->network) {
			/* Families above AF_UNIX (or AF_UNSPEC): refused, not killed, so programs that
			 * merely probe for a network carry on.  GT on the full register errs towards
			 * refusing. */
			if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
			                           SCMP_A0(SCMP_CMP_GT, AF_UNIX))) < 0 ||
			    (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
			                           SCMP_A0(LOW32(AF_UNSPEC)))) < 0)
				return rc;
		}
		if (!v->pidns && v->supervisor > 0) {
			/* Without a PID namespace the supervisor's pid means the supervisor. */
			static const char *const sig[] = { "kill", "tkill", "tgkill", "pidfd_open", NULL };
			for (size_t i = 0; sig[i]; i++) {
				int nr = resolve(sig[i]);
				if (nr < 0)
					continue;
				if ((rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 1,
				                           SCMP_A0(LOW32(v->supervisor)))) < 0)
					return rc;
				if (strcmp(sig[i], "kill") == 0 &&
				    (rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 1,
				                           SCMP_A0(LOW32(-v->supervisor)))) < 0)
					return rc;
			}
		}
	}
	return 0;
}

/* libseccomp 2.5 exports only to a file descriptor; a memfd keeps it in memory. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *out)
{
	int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
	struct sock_filter *insns = NULL;
	int rc;
	struct stat st;
	if (fd < 0)
		return -errno;
	if ((rc = seccomp_export_bpf(ctx, fd)) < 0)
		goto fail;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	size_t n = (size_t)st.st_size / sizeof *insns;
	if (n == 0 || n > BPF_MAXINSNS || (size_t)st.st_size % sizeof *insns) {
		rc = -E2BIG;
		goto fail;
	}
	if (!(insns = malloc((size_t)st.st_size))) {
		rc = -ENOMEM;
		goto fail;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = pread(fd, (char *)insns + got, (size_t)st.st_size - got, (off_t)got);
		if (r <= 0) {
			rc = r < 0 ? -errno : -EIO;
			goto fail;
		}
		got += (size_t)r;
	}
	out->filter = insns;
	out->len = (unsigned short)n;
	close(fd);
	return 0;
fail:
	free(insns);
	close(fd);
	return rc;
}

/* Built once per variant in the supervisor and exported as plain BPF, so the child only has
 * to load it: no libseccomp call, no allocation after fork.  strict is an allow list
 * (anything else kills), default a deny list on top of allow; the shared rules (add_common)
 * go into both. */
int sc_build(const struct sc_variant *v, struct sock_fprog *out, char *err, size_t errlen)
{
	int rc;
	scmp_filter_ctx ctx = seccomp_init(v->policy == SC_STRICT ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ALLOW);
	if (!ctx) {
		snprintf(err, errlen, "seccomp_init failed");
		return -ENOMEM;
	}
	/* Another architecture's numbers mean other calls: never let them through. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0) {
		snprintf(err, errlen, "seccomp: bad-arch action: %s", strerror(-rc));
		goto fail;
	}
	if (v->policy == SC_STRICT)
		rc = add_list(ctx, SCMP_ACT_ALLOW, allow_strict);
	else
		rc = add_list(ctx, SCMP_ACT_KILL_PROCESS, deny_default);
	if (rc == 0)
		rc = add_common(ctx, v);
	if (rc < 0) {
		snprintf(err, errlen, "seccomp rules: %s", strerror(-rc));
		goto fail;
	}
	if ((rc = export_bpf(ctx, out)) < 0) {
		snprintf(err, errlen, "seccomp export: %s", strerror(-rc));
		goto fail;
	}
fail:
	seccomp_release(ctx);
	return rc;
}

void sc_free(struct sock_fprog *p)
{
	if (p) {
		free(p->filter);
		p->filter = NULL;
		p->len = 0;
	}
}

/* The raw syscall with flags 0: the caller has set no_new_privs already, which is what lets
 * an unprivileged process install a filter. */
int sc_load(const struct sock_fprog *p)
{
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, p) < 0)
		return -errno;
	return 0;
}
