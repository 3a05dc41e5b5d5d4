/* runner/sandbox_seccomp.h — the system-call filters of the sandbox profiles.
 *
 * sc_build() compiles a policy with libseccomp into a classic BPF program, once per variant, in
 * the supervisor: libseccomp allocates, which a freshly forked child must not do.  sc_load()
 * installs a compiled program in the calling process and is async-signal-safe; it is the last
 * step before execve.  Every policy kills the whole process (SIGSYS) on a forbidden call and on a
 * foreign architecture or ABI (x32, int 0x80).
 *
 *   default  everything except the calls a job never needs and a jail must not allow: new
 *            namespaces, mount, ptrace and cross-process memory, pidfd_getfd, bpf,
 *            perf_event_open, userfaultfd, keys, io_uring, module and kexec loading, TIOCSTI;
 *            sockets other than AF_UNIX fail with EAFNOSUPPORT unless network is allowed;
 *            setting a setuid or setgid bit (chmod, or a mode at creation) fails with EPERM,
 *            and openat2, whose mode the filter cannot see, with ENOSYS.
 *   strict   an allowlist for pure computation: files, memory, time, threads (no fork) and the
 *            job socket; a setuid or setgid bit kills.
 *
 * clone3 fails with ENOSYS in both, so the C library falls back to clone(), whose flags the
 * filter can see.  The built program is owned by the caller (sc_free). */
#ifndef FP_SANDBOX_SECCOMP_H
#define FP_SANDBOX_SECCOMP_H

#include <stddef.h>
#include <sys/types.h>
#include <linux/filter.h>

enum sc_policy { SC_DEFAULT, SC_STRICT };

struct sc_variant {
	enum sc_policy policy;
	int network;          /* sockets of every family allowed */
	int pidns;            /* the job has its own PID namespace */
	pid_t supervisor;     /* without a PID namespace: signals to this pid kill the job */
	int no_shm;           /* memfd_create, memfd_secret and System V shm fail (ENOSYS):
	                         nothing (no memory cgroup) would count their pages */
};

/* 0 and *out (a malloc'd program), or -errno with a reason in err. */
int sc_build(const struct sc_variant *v, struct sock_fprog *out, char *err, size_t errlen);
void sc_free(struct sock_fprog *p);
/* Install p in the calling process (no_new_privs must be set).  0 or -errno. */
int sc_load(const struct sock_fprog *p);

#endif
