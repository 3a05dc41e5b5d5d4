/* runner/sandbox_landlock.c — see sandbox_landlock.h. */
#include "runner/sandbox/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runner/sandbox/sandbox.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

#define FS_EXECUTE     (1ULL << 0)
#define FS_WRITE_FILE  (1ULL << 1)
#define FS_READ_FILE   (1ULL << 2)
#define FS_READ_DIR    (1ULL << 3)
#define FS_MAKE_CHAR   (1ULL << 6)
#define FS_MAKE_BLOCK  (1ULL << 11)
#define FS_REFER       (1ULL << 13)   /* ABI 2 */
#define FS_TRUNCATE    (1ULL << 14)   /* ABI 3 */
#define FS_IOCTL_DEV   (1ULL << 15)   /* ABI 5 */
#define NET_BIND_TCP   (1ULL << 0)    /* ABI 4 */
#define NET_CONNECT_TCP (1ULL << 1)
#define SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define SCOPE_SIGNAL   (1ULL << 1)

/* The kernel takes the attribute struct by size: older kernels reject non-zero fields they do
 * not know, so the size passed grows with the ABI. */
struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

/* The version query never fails harmfully: 0 (no Landlock) on a kernel without it or with it
 * disabled at boot, so callers fall back to the other mechanisms and report the gap. */
int landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	return v < 0 ? 0 : (int)v;
}

/* Every right this ABI knows is "handled", so anything not granted by a rule is denied.
 * Asking for a right the kernel does not know makes ruleset creation fail, hence the
 * per-ABI set. */
static uint64_t handled_fs(int abi)
{
	uint64_t m = (1ULL << 13) - 1;      /* ABI 1: EXECUTE .. MAKE_SYM */
	if (abi >= 2)
		m |= FS_REFER;
	if (abi >= 3)
		m |= FS_TRUNCATE;
	if (abi >= 5)
		m |= FS_IOCTL_DEV;
	return m;
}

/* Each access level maps to the least set of rights it needs, clipped to what this ABI
 * handles (a right the ruleset does not handle cannot be granted). */
static uint64_t rule_access(int abi, enum ll_access a, int is_dir)
{
	uint64_t all = handled_fs(abi);
	uint64_t m;
	switch (a) {
	case LL_READ:
		m = FS_READ_FILE | FS_READ_DIR;
		break;
	case LL_EXEC:
		m = FS_READ_FILE | FS_READ_DIR | FS_EXECUTE;
		break;
	case LL_WRITE:
		/* Device nodes cannot be made without privilege anyway; not granting it keeps a
		 * future privilege slip from turning into raw disk access. */
		m = all & ~(FS_MAKE_CHAR | FS_MAKE_BLOCK);
		break;
	default:
		m = FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV;
		break;
	}
	/* Rights on directory contents are rejected (EINVAL) on a rule for a single file. */
	if (!is_dir)
		m &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV;
	return m & all;
}

/* The attribute struct is passed at the size this ABI understands: a kernel refuses a
 * larger struct with unknown non-zero fields, and net rules (ABI 4) and scoping (ABI 6) are
 * only asked for where they exist.  A rule path that does not exist is skipped (nothing
 * there to grant); any other failure stops the job, never runs it with fewer rules than
 * planned.  The ruleset fd is closed after restrict_self: the restriction stays with the
 * process. */
int landlock_apply(int abi, const struct ll_rule *rules, size_t n, int deny_tcp, int scope,
                   char *msg, size_t msglen)
{
	struct ll_ruleset_attr attr = { .handled_access_fs = handled_fs(abi) };
	size_t attr_size = sizeof attr.handled_access_fs;
	int rs = -1, rc = 0;

	if (abi >= 4 && deny_tcp) {
		attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
		attr_size = 2 * sizeof(uint64_t);
	}
	if (abi >= 6 && scope) {
		attr.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL;
		attr_size = sizeof attr;
	}
	rs = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (rs < 0) {
		rc = -errno;
		sandbox_msg(msg, msglen, "landlock_create_ruleset", NULL);
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		int fd = open(rules[i].path, O_PATH | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			rc = -errno;
			sandbox_msg(msg, msglen, "landlock open ", rules[i].path);
			goto fail;
		}
		struct stat st;
		struct ll_path_beneath pb = { .parent_fd = fd };
		if (fstat(fd, &st) < 0) {
			rc = -errno;
			close(fd);
			sandbox_msg(msg, msglen, "landlock stat ", rules[i].path);
			goto fail;
		}
		pb.allowed_access = rule_access(abi, rules[i].access, S_ISDIR(st.st_mode));
		long r = syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &pb, 0);
		int e = errno;
		close(fd);
		if (r < 0) {
			rc = -e;
			sandbox_msg(msg, msglen, "landlock_add_rule ", rules[i].path);
			goto fail;
		}
	}
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) {
		rc = -errno;
		sandbox_msg(msg, msglen, "landlock_restrict_self", NULL);
		goto fail;
	}
fail:
	if (rs >= 0)
		close(rs);
	return rc;
}
