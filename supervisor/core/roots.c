/* supervisor/roots.c — see roots.h. */
#include "supervisor/core/roots.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Each root is kept under two names: the one configured (what messages show and what a model
 * is told) and its realpath, so a path given through either spelling of a root that sits
 * behind a symlink (e.g. /tmp on some systems) is located.  A root that does not exist yet has
 * no realpath; opening it later fails with the file system's reason. */
struct root {
	char *name;       /* as configured, normalised */
	char *real;       /* realpath of it (may equal name; NULL if it does not exist yet) */
};

struct roots {
	struct root *v;
	size_t n;
	unsigned flags;
};

/* ---- lexical --------------------------------------------------------------------------- */

/* Rewrite path without "." components and repeated slashes.  Absolute paths keep their
 * leading '/'; "/" stays "/".  ".." anywhere is refused: a lexical ".." can only ever be
 * an attempt to climb, and refusing it keeps every later check simple. */
static int normalize(const char *in, char *out, size_t outlen)
{
	size_t o = 0;
	int abs = in[0] == '/';
	if (!in[0])
		return -EINVAL;
	if (abs) {
		if (outlen < 2)
			return -ENAMETOOLONG;
		out[o++] = '/';
	}
	const char *p = in;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 1 && p[0] == '.') {
			p += n;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (n > NAME_MAX)
			return -ENAMETOOLONG;
		if (o > (size_t)abs) {
			if (o + 1 >= outlen)
				return -ENAMETOOLONG;
			out[o++] = '/';
		}
		if (o + n >= outlen)
			return -ENAMETOOLONG;
		memcpy(out + o, p, n);
		o += n;
		p += n;
	}
	out[o] = 0;
	return 0;
}

/* If p is root or below it, the part below ("" for root itself); else NULL. */
static const char *below(const char *root, const char *p)
{
	size_t n = strlen(root);
	if (strcmp(root, "/") == 0)
		return p + 1;
	if (strncmp(p, root, n) != 0)
		return NULL;
	if (p[n] == 0)
		return p + n;
	if (p[n] == '/')
		return p + n + 1;
	return NULL;
}

/* Roots are normalised and must be absolute: a relative root would depend on the cwd of
 * whoever starts the server.  The realpath is taken once, here; a root whose own path
 * changes later is still opened by that name, and everything below it is walked afresh on
 * each open. */
int roots_new(char *const *paths, size_t n, unsigned flags, struct roots **out)
{
	struct roots *r = calloc(1, sizeof *r);
	char buf[PATH_MAX];
	int rc = -ENOMEM;
	if (!r)
		return -ENOMEM;
	r->flags = flags;
	r->v = calloc(n ? n : 1, sizeof *r->v);
	if (!r->v)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		if (paths[i][0] != '/' || (rc = normalize(paths[i], buf, sizeof buf)) < 0) {
			rc = -EINVAL;
			goto fail;
		}
		r->v[i].name = strdup(buf);
		char *real = realpath(buf, NULL);
		r->v[i].real = real;
		r->n = i + 1;
		if (!r->v[i].name) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	*out = r;
	return 0;
fail:
	roots_free(r);
	return rc;
}

void roots_free(struct roots *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].name);
		free(r->v[i].real);
	}
	free(r->v);
	free(r);
}

size_t roots_count(const struct roots *r)
{
	return r->n;
}

const char *roots_path(const struct roots *r, size_t i)
{
	return i < r->n ? r->v[i].name : NULL;
}

/* Messages name the allowed roots so a model can correct its path without another call;
 * output is clipped to len, never overflowing. */
void roots_describe(const struct roots *r, char *buf, size_t len)
{
	size_t o = 0;
	if (len == 0)
		return;
	buf[0] = 0;
	if (r->n == 0) {
		snprintf(buf, len, "(none: server.fileRoots is empty)");
		return;
	}
	for (size_t i = 0; i < r->n && o < len; i++) {
		int k = snprintf(buf + o, len - o, "%s%s", i ? ", " : "", r->v[i].name);
		if (k < 0)
			break;
		o += (size_t)k;
	}
}

/* Set the message (if the caller wants one) and return rc, so every failure path is one
 * statement. */
static int errf(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* Lexical only, and therefore safe to call before anything touches the file system.  With
 * nested roots the innermost match wins, so a path is always reported against the root a
 * user would name for it.  A relative path is below the first root (docs/files.md). */
int roots_locate(const struct roots *r, const char *path, struct roots_loc *loc, char *err, size_t errlen)
{
	char norm[PATH_MAX], shown[4200];
	int rc;
	memset(loc, 0, sizeof *loc);
	if (r->n == 0) {
		return errf(err, errlen, -EPERM, "No file roots are configured (server.fileRoots is empty), "
		            "so no path is allowed.");
	}
	if (!path || !*path)
		return errf(err, errlen, -EINVAL, "The path is empty.");
	rc = normalize(path, norm, sizeof norm);
	if (rc == -EINVAL)
		return errf(err, errlen, rc, "'%.300s' contains a '..' component; give the path without it.", path);
	if (rc < 0)
		return errf(err, errlen, rc, "The path is too long.");
	const char *rel = NULL;
	size_t best = 0, bestlen = 0;
	if (norm[0] == '/') {
		for (size_t i = 0; i < r->n; i++) {
			const char *names[2] = { r->v[i].name, r->v[i].real };
			for (int k = 0; k < 2; k++) {
				const char *b = names[k] ? below(names[k], norm) : NULL;
				/* Nested roots: the innermost one holds the path. */
				if (b && (!rel || strlen(names[k]) > bestlen)) {
					rel = b;
					best = i;
					bestlen = strlen(names[k]);
				}
			}
		}
		if (!rel) {
			roots_describe(r, shown, sizeof shown);
			return errf(err, errlen, -EPERM, "'%.300s' is not inside a file root. Allowed roots: %s.",
			            path, shown);
		}
	} else {
		rel = norm;
	}
	loc->root = best;
	snprintf(loc->rel, sizeof loc->rel, "%s", rel);
	const char *rn = r->v[best].name;
	if (snprintf(loc->abs, sizeof loc->abs, "%s%s%s", rn, strcmp(rn, "/") && *rel ? "/" : "", rel)
	    >= (int)sizeof loc->abs)
		return errf(err, errlen, -ENAMETOOLONG, "The path is too long.");
	const char *slash = strrchr(loc->rel, '/');
	const char *last = slash ? slash + 1 : loc->rel;
	size_t nl = strlen(last);   /* normalize() bounded every component by NAME_MAX */
	memcpy(loc->name, last, nl < sizeof loc->name ? nl + 1 : 0);
	return 0;
}

/* ---- opening --------------------------------------------------------------------------- */

/* O_NOFOLLOW on a symlink fails with ELOOP, O_DIRECTORY on one with ENOTDIR: both are
 * mapped to ELOOP after this check, so the message says "symbolic link" rather than "not a
 * folder". */
static int is_symlink_at(int dirfd, const char *name)
{
	struct stat st;
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

/* The fallback: one component at a time, never following a link.  ".." was refused
 * lexically, so the walk can only go down; each step is an O_PATH descriptor of a real
 * folder, so renaming things behind us cannot move the walk elsewhere. */
static int walk_open(int dirfd, const char *rel, int flags, mode_t mode)
{
	char buf[PATH_MAX];
	int cur = dirfd, rc;
	if (snprintf(buf, sizeof buf, "%s", rel) >= (int)sizeof buf)
		return -ENAMETOOLONG;
	char *p = buf;
	for (;;) {
		char *slash = strchr(p, '/');
		if (!slash)
			break;
		*slash = 0;
		int fd = openat(cur, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			if ((rc == -ENOTDIR || rc == -ELOOP) && is_symlink_at(cur, p))
				rc = -ELOOP;
			goto fail;
		}
		if (cur != dirfd)
			close(cur);
		cur = fd;
		p = slash + 1;
	}
	rc = openat(cur, *p ? p : ".", flags | O_NOFOLLOW | O_CLOEXEC, mode);
	if (rc < 0) {
		rc = -errno;
		if ((rc == -ENOTDIR || rc == -ELOOP) && *p && is_symlink_at(cur, p))
			rc = -ELOOP;
	}
fail:
	if (cur != dirfd)
		close(cur);
	return rc;
}

/* RESOLVE_BENEATH makes the kernel refuse any resolution that would leave dirfd (EXDEV),
 * absolute symlinks and ".." included; NO_SYMLINKS and NO_MAGICLINKS refuse every link,
 * /proc/self/fd ones too.  -ENOSYS (kernels before 5.6, or a seccomp filter that blocks
 * openat2) sends the caller to the walk. */
static int openat2_open(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how;
	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC);
	how.mode = (flags & O_CREAT) ? mode : 0;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	long fd = syscall(SYS_openat2, dirfd, *rel ? rel : ".", &how, sizeof how);
	return fd < 0 ? -errno : (int)fd;
}

/* One entry point for both mechanisms, so the callers never decide: openat2 where it works,
 * the walk where it is missing.  Only ENOSYS falls back: any other error is openat2's verdict
 * on the path (EXDEV, ELOOP, ENOENT ...) and stands. */
int roots_openat_beneath(int dirfd, const char *rel, int flags, mode_t mode, int walk)
{
	int fd = -ENOSYS;
	if (rel[0] == '/')
		return -EINVAL;
	if (!walk)
		fd = openat2_open(dirfd, rel, flags, mode);
	if (fd == -ENOSYS)
		fd = walk_open(dirfd, rel, flags, mode);
	if (fd >= 0 && (flags & O_PATH)) {
		/* O_PATH opens a trailing symlink itself instead of failing: refuse it here. */
		struct stat st;
		if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode)) {
			close(fd);
			fd = -ELOOP;
		}
	}
	return fd;
}

/* The root itself is opened by its realpath when known: links in the root's own path are
 * the operator's configuration, not a model's input, so following them is fine. */
static int open_root(const struct roots *r, size_t i)
{
	const char *p = r->v[i].real ? r->v[i].real : r->v[i].name;
	int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* One sentence per errno, written for a model: what was wrong and what to give instead.
 * EMLINK says why hard links are refused (a second link may be a file outside the roots,
 * and nothing in the path shows it). */
static int explain(const struct roots *r, const struct roots_loc *loc, int rc, const char *path,
                   char *err, size_t errlen)
{
	const char *root = r->v[loc->root].name;
	switch (rc) {
	case -ELOOP:
		return errf(err, errlen, rc, "'%.300s' goes through a symbolic link below the root %s; "
		            "symbolic links are never followed. Give the real path.", path, root);
	case -EXDEV:
		return errf(err, errlen, rc, "'%.300s' leads out of the root %s.", path, root);
	case -ENOENT:
		return errf(err, errlen, rc, "'%.300s' does not exist (root %s).", path, root);
	case -ENOTDIR:
		return errf(err, errlen, rc, "A component of '%.300s' is not a folder (root %s).", path, root);
	case -EISDIR:
		return errf(err, errlen, rc, "'%.300s' is a folder, not a file.", path);
	case -EACCES:
	case -EPERM:
		return errf(err, errlen, rc, "Permission denied for '%.300s'.", path);
	case -EMLINK:
		return errf(err, errlen, rc, "'%.300s' has more than one hard link; such files are refused "
		            "because a link may reach a file outside the roots.", path);
	case -EINVAL:
		return errf(err, errlen, rc, "'%.300s' is not a regular file.", path);
	default:
		return errf(err, errlen, rc, "Cannot open '%.300s': %s.", path, strerror(-rc));
	}
}

/* Locate, open the root, open the file beneath it, then check what was opened (fstat on the
 * descriptor, not a stat of the path, so nothing can be swapped in between).  O_NONBLOCK keeps
 * a FIFO from blocking the open; O_NOCTTY keeps a tty from becoming the supervisor's. */
int roots_open_file(const struct roots *r, const char *path, unsigned flags, int *fd, struct stat *st,
                    struct roots_loc *loc, char *err, size_t errlen)
{
	struct roots_loc tmp;
	int rootfd = -1, f = -1, rc;
	if (!loc)
		loc = &tmp;
	*fd = -1;
	if ((rc = roots_locate(r, path, loc, err, errlen)) < 0)
		return rc;
	if (!loc->rel[0]) {
		rc = explain(r, loc, -EISDIR, path, err, errlen);
		goto fail;
	}
	if ((rootfd = open_root(r, loc->root)) < 0) {
		rc = errf(err, errlen, rootfd, "The file root %s cannot be opened: %s.", r->v[loc->root].name,
		          strerror(-rootfd));
		goto fail;
	}
	f = roots_openat_beneath(rootfd, loc->rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, (r->flags & ROOTS_WALK) != 0);
	if (f < 0) {
		rc = explain(r, loc, f, path, err, errlen);
		goto fail;
	}
	if (fstat(f, st) < 0) {
		rc = explain(r, loc, -errno, path, err, errlen);
		goto fail;
	}
	if (S_ISDIR(st->st_mode) || !S_ISREG(st->st_mode)) {
		rc = explain(r, loc, S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL, path, err, errlen);
		goto fail;
	}
	if ((flags & ROOTS_SINGLE_LINK) && st->st_nlink > 1) {
		rc = explain(r, loc, -EMLINK, path, err, errlen);
		goto fail;
	}
	close(rootfd);
	*fd = f;
	return 0;
fail:
	if (f >= 0)
		close(f);
	if (rootfd >= 0)
		close(rootfd);
	return rc;
}

/* Writers create and rename with *at() calls on the returned folder, so the final name is
 * never resolved through a path again.  Missing folders are not created: a model may only
 * write where the operator already made room. */
int roots_open_parent(const struct roots *r, const char *path, int *dirfd, struct roots_loc *loc,
                      char *err, size_t errlen)
{
	char parent[PATH_MAX];
	int rootfd = -1, d = -1, rc;
	*dirfd = -1;
	if ((rc = roots_locate(r, path, loc, err, errlen)) < 0)
		return rc;
	if (!loc->rel[0]) {
		rc = errf(err, errlen, -EISDIR, "'%.300s' is the root folder itself; name a file inside it.", path);
		goto fail;
	}
	snprintf(parent, sizeof parent, "%s", loc->rel);
	char *slash = strrchr(parent, '/');
	if (slash)
		*slash = 0;
	else
		parent[0] = 0;
	if ((rootfd = open_root(r, loc->root)) < 0) {
		rc = errf(err, errlen, rootfd, "The file root %s cannot be opened: %s.", r->v[loc->root].name,
		          strerror(-rootfd));
		goto fail;
	}
	d = roots_openat_beneath(rootfd, parent, O_RDONLY | O_DIRECTORY, 0, (r->flags & ROOTS_WALK) != 0);
	if (d < 0) {
		rc = d == -ENOENT
			? errf(err, errlen, d, "The folder that would hold '%.300s' does not exist (root %s); "
			       "folders are not created.", path, r->v[loc->root].name)
			: explain(r, loc, d, path, err, errlen);
		goto fail;
	}
	close(rootfd);
	*dirfd = d;
	return 0;
fail:
	if (d >= 0)
		close(d);
	if (rootfd >= 0)
		close(rootfd);
	return rc;
}
