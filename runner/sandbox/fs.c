/* runner/sandbox_fs.c — see sandbox_fs.h. */
#include "runner/sandbox/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "runner/sandbox/sandbox.h"

#define OLDROOT "/oldroot"
#define NEWROOT "/newroot"
#define MAX_LINK_DEPTH 8
/* A plan is a few dozen entries; the bound keeps the child's fd use small and fixed. */
#define MAX_OPS 512

enum op_kind { OP_BIND, OP_TMPFS, OP_PROC, OP_SYMLINK, OP_MASK };

struct fs_op {
	enum op_kind kind;
	enum fs_mode mode;
	int is_file;          /* bind of something that is not a directory */
	int identity;         /* directory bind shown at its own real path */
	char *path;           /* where the job sees it */
	char *dst;            /* NEWROOT + path */
	char *src;            /* bind: OLDROOT + real path; symlink: target; tmpfs: options */
	enum fs_mask mask;    /* OP_MASK: how */
	int fd;               /* child only: O_PATH of the bind source, opened without links */
};

struct fs_plan {
	struct fs_op *ops;
	size_t n, cap;
	char stage[32];
};

int fs_plan_new(struct fs_plan **out)
{
	*out = calloc(1, sizeof **out);
	return *out ? 0 : -ENOMEM;
}

void fs_plan_free(struct fs_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) {
		free(p->ops[i].path);
		free(p->ops[i].dst);
		free(p->ops[i].src);
	}
	free(p->ops);
	free(p);
}

/* The plan is bounded (MAX_OPS, -E2BIG) because its paths come from an operator's readPaths
 * and writePaths and from following symlinks: a plan that grew without limit would make every
 * job start slower.  Each op keeps its path inside the new root and its source under the old
 * root, computed once in the supervisor so the child only makes system calls. */
static int add_op(struct fs_plan *p, enum op_kind kind, enum fs_mode mode, const char *path,
                  const char *src_prefix, const char *src, int is_file, int identity)
{
	if (p->n >= MAX_OPS)
		return -E2BIG;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 32;
		struct fs_op *ops = realloc(p->ops, cap * sizeof *ops);
		if (!ops)
			return -ENOMEM;
		p->ops = ops;
		p->cap = cap;
	}
	struct fs_op *o = &p->ops[p->n];
	memset(o, 0, sizeof *o);
	o->kind = kind;
	o->mode = mode;
	o->is_file = is_file;
	o->identity = identity;
	o->fd = -1;
	o->path = strdup(path);
	if (asprintf(&o->dst, "%s%s", NEWROOT, path) < 0)
		o->dst = NULL;
	if (asprintf(&o->src, "%s%s", src_prefix, src) < 0)
		o->src = NULL;
	if (!o->path || !o->dst || !o->src) {
		free(o->path);
		free(o->dst);
		free(o->src);
		return -ENOMEM;
	}
	p->n++;
	return 0;
}

/* a is a/ b/ … prefix of b, component-wise ("/usr" covers "/usr/bin", not "/usrx"). */
static int is_under(const char *base, const char *path)
{
	size_t n = strlen(base);
	return strncmp(base, path, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* A directory already bound at the same place and at least as permissively (rw covers ro)
 * makes a bind below it redundant; single files, devices and binds that land elsewhere than
 * their source never cover anything. */
static int covered(const struct fs_plan *p, const char *path, enum fs_mode mode)
{
	if (mode == FS_DEV)
		return 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct fs_op *o = &p->ops[i];
		if (o->kind != OP_BIND || o->is_file || !o->identity)
			continue;
		if (mode == FS_RW && o->mode != FS_RW)
			continue;
		if (o->mode == FS_DEV)
			continue;
		if (is_under(o->path, path))
			return 1;
	}
	return 0;
}

/* The path goes through a symlink we recreate, so inside it resolves as it does outside. */
static int via_symlink(const struct fs_plan *p, const char *path)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->ops[i].kind == OP_SYMLINK && strcmp(p->ops[i].path, path) != 0 &&
		    is_under(p->ops[i].path, path))
			return 1;
	return 0;
}

/* A symlink on the path is recreated inside the jail and its target bound as well, so paths
 * resolve inside as they do outside; the depth bound stops link loops and chains.  A missing
 * optional path is fine (not every host has /lib64); a missing required one is the job's
 * error. */
static int view(struct fs_plan *p, const char *path, enum fs_mode mode, int required, int depth,
                char *err, size_t errlen)
{
	struct stat lst, st;
	char *real = NULL;
	int rc = 0;

	if (path[0] != '/') {
		snprintf(err, errlen, "%s: not an absolute path", path);
		return -EINVAL;
	}
	if (covered(p, path, mode))
		return 0;
	if (lstat(path, &lst) < 0 || !(real = realpath(path, NULL)) || stat(real, &st) < 0) {
		rc = -errno;
		if (!required)
			rc = 0;
		else
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	int through = via_symlink(p, path);
	if (covered(p, real, mode) && (strcmp(real, path) == 0 || through))
		goto out;
	if (S_ISLNK(lst.st_mode) && !through && depth < MAX_LINK_DEPTH) {
		char target[PATH_MAX];
		ssize_t n = readlink(path, target, sizeof target - 1);
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "readlink %s: %s", path, strerror(errno));
			goto out;
		}
		target[n] = 0;
		if ((rc = add_op(p, OP_SYMLINK, mode, path, "", target, 0, 0)) < 0)
			goto out;
		rc = view(p, real, mode, required, depth + 1, err, errlen);
		goto out;
	}
	/* Through one of our symlinks the job reaches the real path; bind it there. */
	const char *dst = through ? real : path;
	rc = add_op(p, OP_BIND, mode, dst, OLDROOT, real, !S_ISDIR(st.st_mode),
	            S_ISDIR(st.st_mode) && strcmp(real, dst) == 0);
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	free(real);
	return rc;
}

int fs_plan_view(struct fs_plan *p, const char *path, enum fs_mode mode, int required,
                 char *err, size_t errlen)
{
	return view(p, path, mode, required, 0, err, errlen);
}

int fs_plan_tmpfs(struct fs_plan *p, const char *path, long long bytes)
{
	char opts[96];
	/* Inodes cost kernel memory too: bound them along with the bytes. */
	snprintf(opts, sizeof opts, "size=%lld,nr_inodes=16384,mode=1777", bytes);
	return add_op(p, OP_TMPFS, FS_RW, path, "", opts, 0, 0);
}

/* A fresh proc for the job's own PID namespace, never a bind of the host's: only the job's
 * processes are visible. */
int fs_plan_proc(struct fs_plan *p, const char *path)
{
	return add_op(p, OP_PROC, FS_RO, path, "", "", 0, 0);
}

int fs_plan_symlink(struct fs_plan *p, const char *path, const char *target)
{
	return add_op(p, OP_SYMLINK, FS_RO, path, "", target, 0, 0);
}

/* Masks are ops like any other, so they are sorted after what they hide and applied after
 * the proc mount they refine. */
int fs_plan_mask(struct fs_plan *p, const char *path, enum fs_mask how)
{
	int rc = add_op(p, OP_MASK, FS_RO, path, "", "", 0, 0);
	if (rc == 0)
		p->ops[p->n - 1].mask = how;
	return rc;
}

int fs_plan_finish(struct fs_plan *p, char *err, size_t errlen)
{
	/* A path sorts after every path it is under, so mounts are made outside in.  Insertion
	 * sort: stable, and plans are a few dozen entries. */
	for (size_t i = 1; i < p->n; i++) {
		struct fs_op o = p->ops[i];
		size_t k = i;
		while (k > 0 && strcmp(p->ops[k - 1].path, o.path) > 0) {
			p->ops[k] = p->ops[k - 1];
			k--;
		}
		p->ops[k] = o;
	}
	/* The staging tmpfs hides the folder it is mounted on only inside the job's namespace,
	 * and the host's copy stays reachable under /oldroot. */
	static const char *const stages[] = { "/tmp", "/mnt", "/run", "/var/tmp", "/media", "/srv", NULL };
	for (size_t i = 0; stages[i]; i++) {
		struct stat st;
		if (lstat(stages[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			snprintf(p->stage, sizeof p->stage, "%s", stages[i]);
			return 0;
		}
	}
	snprintf(err, errlen, "no folder to stage the new root in");
	return -ENOENT;
}

/* ---- child side: system calls only ---------------------------------------------------- */

/* The child reports one line (step and path) through the exec pipe and returns -errno; it
 * never prints. */
static int fail_at(int e, char *msg, size_t msglen, const char *step, const char *path)
{
	sandbox_msg(msg, msglen, step, path);
	return -e;
}

/* An O_PATH fd of path that no symbolic link took part in finding: openat2 with
 * RESOLVE_NO_SYMLINKS, or on kernels without it a walk one component at a time with
 * O_NOFOLLOW.  -errno (ELOOP when a link is on the way). */
static int open_nofollow(const char *path)
{
	struct open_how how;
	memset(&how, 0, sizeof how);
	how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
	how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
	if (fd >= 0)
		return (int)fd;
	if (errno != ENOSYS)
		return -errno;
	int dir = open("/", O_PATH | O_CLOEXEC | O_DIRECTORY);
	char name[NAME_MAX + 1];
	const char *s = path;
	while (dir >= 0 && *s) {
		while (*s == '/')
			s++;
		size_t n = 0;
		while (s[n] && s[n] != '/')
			n++;
		if (n == 0)
			break;
		if (n > NAME_MAX || (n == 2 && s[0] == '.' && s[1] == '.')) {
			close(dir);
			return -EINVAL;
		}
		memcpy(name, s, n);
		name[n] = 0;
		int next = openat(dir, name, O_PATH | O_CLOEXEC | O_NOFOLLOW);
		int e = errno;
		struct stat st;
		if (next >= 0 && fstat(next, &st) == 0 && S_ISLNK(st.st_mode)) {
			close(next);
			next = -1;
			e = ELOOP;
		}
		close(dir);
		if (next < 0)
			return -e;
		dir = next;
		s += n;
	}
	return dir >= 0 ? dir : -errno;
}

/* Open every bind source, while the host's root is still ours to walk. */
static int open_sources(struct fs_plan *p, char *msg, size_t msglen)
{
	size_t skip = strlen(OLDROOT);
	for (size_t i = 0; i < p->n; i++) {
		struct fs_op *o = &p->ops[i];
		if (o->kind != OP_BIND)
			continue;
		int fd = open_nofollow(o->src + skip);
		struct stat st;
		/* With O_PATH|O_NOFOLLOW a trailing link is opened, not refused: refuse it here,
		 * and anything that is no longer what was planned. */
		if (fd >= 0) {
			int e = fstat(fd, &st) < 0 ? errno : S_ISLNK(st.st_mode) ? ELOOP
			      : (!o->is_file) != (S_ISDIR(st.st_mode) != 0) ? ENOTDIR : 0;
			if (e) {
				close(fd);
				fd = -e;
			}
		}
		if (fd < 0)
			return fail_at(-fd, msg, msglen, fd == -ELOOP ? "a symbolic link is on the way to "
			               : "open ", o->path);
		o->fd = fd;
	}
	return 0;
}

/* The source fds are O_PATH descriptors of host paths: none may leak into the job. */
static void close_sources(struct fs_plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		if (p->ops[i].fd >= 0)
			close(p->ops[i].fd);
		p->ops[i].fd = -1;
	}
}

/* mkdir -p of every component of path (the last one too if last). */
static int make_dirs(const char *path, int last)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof buf)
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		if (buf[i] == 0 && !last)
			break;
		char c = buf[i];
		buf[i] = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		buf[i] = c;
	}
	return 0;
}

/* The flags a bind must keep on remount: in a user namespace the kernel refuses to clear the
 * ones the source mount was given by the host (nosuid, nodev, noexec, ro, atime mode). */
static unsigned long kept_flags(const char *path)
{
	struct statfs s;
	unsigned long f = 0;
	if (statfs(path, &s) < 0)
		return 0;
	if (s.f_flags & ST_RDONLY)
		f |= MS_RDONLY;
	if (s.f_flags & ST_NOSUID)
		f |= MS_NOSUID;
	if (s.f_flags & ST_NODEV)
		f |= MS_NODEV;
	if (s.f_flags & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (s.f_flags & ST_NOATIME)
		f |= MS_NOATIME;
	else if (s.f_flags & ST_RELATIME)
		f |= MS_RELATIME;
	else
		f |= MS_STRICTATIME;
	if (s.f_flags & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	return f;
}

/* Mount points are created with O_EXCL | O_NOFOLLOW inside the new root's tmpfs, which only
 * this process has written to.  Then the remount sets the mode's flags: read-only paths get
 * nodev and nosuid, writable ones nosuid and nodev, devices read-only and noexec. */
static int do_bind(const struct fs_op *o, char *msg, size_t msglen)
{
	int rc;
	if ((rc = make_dirs(o->dst, 0)) < 0)
		return fail_at(-rc, msg, msglen, "mkdir for ", o->path);
	if (o->is_file) {
		struct stat st;
		if (lstat(o->dst, &st) < 0) {
			int fd = open(o->dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
			if (fd < 0)
				return fail_at(errno, msg, msglen, "create mount point ", o->path);
			close(fd);
		}
	} else if (mkdir(o->dst, 0755) < 0 && errno != EEXIST) {
		return fail_at(errno, msg, msglen, "mkdir ", o->path);
	}
	/* A copy of the mount the source fd is on, attached here: what is bound is what was
	 * opened, whatever the path names by now. */
	int t = (int)syscall(SYS_open_tree, o->fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (t < 0)
		return fail_at(errno, msg, msglen, "open_tree ", o->path);
	int r = (int)syscall(SYS_move_mount, t, "", AT_FDCWD, o->dst, MOVE_MOUNT_F_EMPTY_PATH);
	int e = errno;
	close(t);
	if (r < 0)
		return fail_at(e, msg, msglen, "bind ", o->path);
	/* Devices are read-only binds too: the node can be used, never chmod'ed or touched. */
	unsigned long want = MS_NOSUID | MS_RDONLY;
	if (o->mode == FS_RO)
		want |= MS_NODEV;
	else if (o->mode == FS_RW)
		want = MS_NOSUID | MS_NODEV;
	else
		want |= MS_NOEXEC;
	unsigned long flags = MS_BIND | MS_REMOUNT | MS_SILENT | want | kept_flags(o->dst);
	if (mount(NULL, o->dst, NULL, flags, NULL) < 0)
		return fail_at(errno, msg, msglen, "remount ", o->path);
	return 0;
}

/* Hide a file or folder of the job's /proc the way container runtimes do: kernel knobs
 * become read-only, secrets read as empty (a bind of the jail's /dev/null, or an empty
 * read-only tmpfs).  What this kernel does not have needs no hiding. */
static int do_mask(const struct fs_op *o, char *msg, size_t msglen)
{
	struct stat st;
	if (lstat(o->dst, &st) < 0)
		return errno == ENOENT ? 0 : fail_at(errno, msg, msglen, "mask ", o->path);
	const unsigned long ro = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_SILENT;
	if (o->mask == FS_MASK_RO || (o->mask == FS_MASK_EMPTY && !S_ISDIR(st.st_mode))) {
		const char *src = o->mask == FS_MASK_RO ? o->dst : NEWROOT "/dev/null";
		if (mount(src, o->dst, NULL, MS_BIND | MS_REC | MS_SILENT, NULL) < 0)
			return fail_at(errno, msg, msglen, "mask ", o->path);
	} else if (mount("tmpfs", o->dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_SILENT,
	                 "size=4k,nr_inodes=1,mode=0555") < 0) {
		return fail_at(errno, msg, msglen, "mask ", o->path);
	} else {
		return 0;
	}
	/* A bind of the jail's /dev/null is read-only already (a bind copies its source's flags),
	 * and must stay a usable device. */
	if (o->mask == FS_MASK_RO && mount(NULL, o->dst, NULL, ro, NULL) < 0)
		return fail_at(errno, msg, msglen, "mask (read-only) ", o->path);
	return 0;
}

/* Run before the child drops the supervisor's rights (see sandbox.c), so host paths are
 * resolved as the supervisor sees them; on failure nothing stays open. */
int fs_plan_open(struct fs_plan *p, char *msg, size_t msglen)
{
	int rc = open_sources(p, msg, msglen);
	if (rc < 0)
		close_sources(p);
	return rc;
}

static int build(const struct fs_plan *p, char *msg, size_t msglen);

int fs_plan_build(struct fs_plan *p, char *msg, size_t msglen)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < p->n; i++)
		if (p->ops[i].kind == OP_BIND && p->ops[i].fd < 0)
			rc = fs_plan_open(p, msg, msglen);
	if (rc == 0)
		rc = build(p, msg, msglen);
	close_sources(p);
	return rc;
}

/* Order: make every mount private (so nothing propagates back to the host), pivot into a
 * small staging tmpfs, build the new root in a tmpfs under it from the fds opened earlier,
 * then pivot into that and detach the old root (below), so no path leads back out. */
static int build(const struct fs_plan *p, char *msg, size_t msglen)
{
	int rc;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE | MS_SILENT, NULL) < 0)
		return fail_at(errno, msg, msglen, "make mounts private", NULL);
	if (mount("tmpfs", p->stage, "tmpfs", MS_NOSUID | MS_NODEV | MS_SILENT, "size=64k,mode=0755") < 0)
		return fail_at(errno, msg, msglen, "staging tmpfs on ", p->stage);
	if (chdir(p->stage) < 0 || mkdir("newroot", 0755) < 0 || mkdir("oldroot", 0755) < 0)
		return fail_at(errno, msg, msglen, "staging folders in ", p->stage);
	if (syscall(SYS_pivot_root, ".", "oldroot") < 0 || chdir("/") < 0)
		return fail_at(errno, msg, msglen, "pivot_root to the staging tmpfs", NULL);
	if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV | MS_SILENT, "size=1m,mode=0755") < 0)
		return fail_at(errno, msg, msglen, "root tmpfs", NULL);

	for (size_t i = 0; i < p->n; i++) {
		const struct fs_op *o = &p->ops[i];
		switch (o->kind) {
		case OP_BIND:
			if ((rc = do_bind(o, msg, msglen)) < 0)
				return rc;
			break;
		case OP_TMPFS:
			if ((rc = make_dirs(o->dst, 1)) < 0)
				return fail_at(-rc, msg, msglen, "mkdir ", o->path);
			if (mount("tmpfs", o->dst, "tmpfs", MS_NOSUID | MS_NODEV | MS_SILENT, o->src) < 0)
				return fail_at(errno, msg, msglen, "tmpfs on ", o->path);
			break;
		case OP_PROC:
			if ((rc = make_dirs(o->dst, 1)) < 0)
				return fail_at(-rc, msg, msglen, "mkdir ", o->path);
			/* Must happen while the host's /proc is still visible (under /oldroot): the
			 * kernel only lets a user namespace mount proc if it could see one already. */
			if (mount("proc", o->dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_SILENT, NULL) < 0)
				return fail_at(errno, msg, msglen, "mount proc on ", o->path);
			break;
		case OP_SYMLINK:
			if ((rc = make_dirs(o->dst, 0)) < 0)
				return fail_at(-rc, msg, msglen, "mkdir for ", o->path);
			if (symlink(o->src, o->dst) < 0 && errno != EEXIST)
				return fail_at(errno, msg, msglen, "symlink ", o->path);
			break;
		case OP_MASK:
			if ((rc = do_mask(o, msg, msglen)) < 0)
				return rc;
			break;
		}
	}

	/* pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves the
	 * new root alone, with no path back to the host's. */
	if (chdir(NEWROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		return fail_at(errno, msg, msglen, "pivot_root to the new root", NULL);
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return fail_at(errno, msg, msglen, "detach the old root", NULL);
	if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_SILENT, NULL) < 0)
		return fail_at(errno, msg, msglen, "make the root read-only", NULL);
	return 0;
}
