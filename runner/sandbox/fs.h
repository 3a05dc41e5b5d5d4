/* runner/sandbox_fs.h — the job's private filesystem view: a fresh tmpfs root holding only what
 * the job may see, each thing at the path it has on the host, and nothing else (no state dir,
 * no config, no other task).
 *
 * The plan is made in the supervisor, where paths can be resolved and stat'ed and memory
 * allocated; fs_plan_build() carries it out in the child, inside new user and mount namespaces,
 * with system calls only.  The order is bubblewrap's: make every mount private; mount a small
 * staging tmpfs and pivot into it, so the host's root stays reachable at /oldroot; build the new
 * root in a second tmpfs from bind mounts of /oldroot/...; pivot into that, detach the old root,
 * and make the new root read-only.
 *
 * Views: fs_plan_view() exposes a host path read-only (with execute), read-write, or as a
 * device node.  A path already visible through an earlier view is not bound again; a symlink
 * is recreated and its target exposed; a missing path is an error only if required.  Binds
 * are nosuid and (except devices) nodev, devices and read-only views read-only; the kernel's
 * locked flags of the source are kept.
 *
 * The planner resolves links once, in the supervisor; the child then opens every bind source
 * by the resolved path with no symbolic link allowed anywhere on the way (openat2
 * RESOLVE_NO_SYMLINKS) and binds the opened mount (open_tree + move_mount), so a path some
 * job swapped for a link since is refused with ELOOP rather than followed. */
#ifndef FP_SANDBOX_FS_H
#define FP_SANDBOX_FS_H

#include <stddef.h>

enum fs_mode { FS_RO, FS_RW, FS_DEV };
/* FS_MASK_RO: a read-only bind of the path over itself.  FS_MASK_EMPTY: an empty read-only
 * folder over a folder, the jail's /dev/null over a file. */
enum fs_mask { FS_MASK_RO, FS_MASK_EMPTY };

struct fs_plan;

int fs_plan_new(struct fs_plan **out);
void fs_plan_free(struct fs_plan *p);

/* 0, or -errno with a reason in err (only for a required path, or out of memory). */
int fs_plan_view(struct fs_plan *p, const char *path, enum fs_mode mode, int required,
                 char *err, size_t errlen);
/* An empty tmpfs of at most bytes at path (mode 1777). */
int fs_plan_tmpfs(struct fs_plan *p, const char *path, long long bytes);
/* A fresh proc at path: it shows the job's own PID namespace only. */
int fs_plan_proc(struct fs_plan *p, const char *path);
/* A symlink at path pointing at target (no host counterpart needed). */
int fs_plan_symlink(struct fs_plan *p, const char *path, const char *target);
/* Hide path, inside the jail's /proc (see enum fs_mask).  A path this kernel lacks is skipped. */
int fs_plan_mask(struct fs_plan *p, const char *path, enum fs_mask how);
/* Order the plan and pick the staging folder.  0 or -errno with a reason. */
int fs_plan_finish(struct fs_plan *p, char *err, size_t errlen);

/* Child side, async-signal-safe, in the new mount namespace.  fs_plan_open() opens every bind
 * source (call it while this process may still walk the host's paths, e.g. before giving up
 * a host identity); fs_plan_build() opens what is not open yet, builds the view, makes it the
 * root and closes the sources.  Needs CAP_SYS_ADMIN in the mount namespace's user namespace.
 * 0, or -errno with the step in msg. */
int fs_plan_open(struct fs_plan *p, char *msg, size_t msglen);
int fs_plan_build(struct fs_plan *p, char *msg, size_t msglen);

#endif
