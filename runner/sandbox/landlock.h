/* runner/sandbox_landlock.h — Landlock for jobs: which ABI the kernel offers (asked once, in the
 * supervisor) and applying a ruleset to the calling process (in the child between fork and exec,
 * so only system calls, no allocation).  Rules name paths as the job will see them; a path that
 * does not exist is skipped.  The distro headers are older than the kernel, so the structures and
 * bits past ABI 1 are defined here. */
#ifndef FP_SANDBOX_LANDLOCK_H
#define FP_SANDBOX_LANDLOCK_H

#include <stddef.h>

enum ll_access {
	LL_READ,      /* read files and list directories */
	LL_EXEC,      /* read plus execute */
	LL_WRITE,     /* everything: create, write, remove, rename (not device nodes) */
	LL_DEVICE,    /* read, write, truncate and ioctl an existing device node */
};

struct ll_rule {
	const char *path;
	enum ll_access access;
};

/* The Landlock ABI version, or 0 when the kernel has none (or it is disabled). */
int landlock_abi(void);

/* Restrict the calling process and its future children to rules.  deny_tcp: no TCP bind or
 * connect at all (ABI >= 4).  scope: no signals to, and no abstract unix sockets of, processes
 * outside the domain (ABI >= 6).  The caller must have set no_new_privs.
 * Async-signal-safe.  0, or -errno with the failing step in msg. */
int landlock_apply(int abi, const struct ll_rule *rules, size_t n, int deny_tcp, int scope,
                   char *msg, size_t msglen);

#endif
