/* tests/unit/test_roots.c — path confinement (supervisor/roots.c): "..", absolute paths
 * outside the roots and look-alike prefixes, a symlink at every component (pointing out and
 * pointing back in), a folder swapped for a symlink after it was opened, hard links, /proc
 * magic links, FIFOs, nested and symlinked roots, and an empty roots list.  Every check runs
 * twice: with openat2 and with the component walk used where openat2 is missing.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "supervisor/core/roots.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void put(const char *path, const char *text)
{
	check_put(path, text, strlen(text));
}

struct env {
	char top[512], root[600], out[600];
};

/* root/ holds real files, and links of every kind; outside/ holds what must stay unreachable. */
static void build(struct env *e)
{
	char p[1024], q[1024];
	check_tmpdir(e->top, sizeof e->top, "roots");
	snprintf(e->root, sizeof e->root, "%s/root", e->top);
	snprintf(e->out, sizeof e->out, "%s/outside", e->top);
	check_mkdir(e->root);
	check_mkdir(e->out);
	snprintf(p, sizeof p, "%s/secret", e->out); put(p, "SECRET\n");
	snprintf(p, sizeof p, "%s/a/b/c", e->out); check_mkdir(e->out); snprintf(q, sizeof q, "%s/a", e->out); check_mkdir(q);
	snprintf(q, sizeof q, "%s/a/b", e->out); check_mkdir(q); check_mkdir(p);
	snprintf(p, sizeof p, "%s/a/b/c/file", e->out); put(p, "OUTSIDE\n");
	snprintf(p, sizeof p, "%s/a.txt", e->root); put(p, "A\n");
	snprintf(p, sizeof p, "%s/sub", e->root); check_mkdir(p);
	snprintf(p, sizeof p, "%s/sub/b.txt", e->root); put(p, "B\n");
	snprintf(p, sizeof p, "%s/a", e->root); check_mkdir(p);
	snprintf(p, sizeof p, "%s/a/b", e->root); check_mkdir(p);
	snprintf(p, sizeof p, "%s/a/b/c", e->root); check_mkdir(p);
	snprintf(p, sizeof p, "%s/a/b/c/file", e->root); put(p, "INSIDE\n");
	snprintf(p, sizeof p, "%s/link_out", e->root); snprintf(q, sizeof q, "%s/secret", e->out); check_symlink(q, p);
	snprintf(p, sizeof p, "%s/link_rel_out", e->root); check_symlink("../outside/secret", p);
	snprintf(p, sizeof p, "%s/link_in", e->root); check_symlink("a.txt", p);
	snprintf(p, sizeof p, "%s/dirlink", e->root); check_symlink(e->out, p);
	snprintf(p, sizeof p, "%s/sub/deeplink", e->root); check_symlink("../../outside", p);
	snprintf(p, sizeof p, "%s/proclink", e->root); check_symlink("/proc/self/root", p);
	snprintf(p, sizeof p, "%s/hardlink", e->root); snprintf(q, sizeof q, "%s/secret", e->out);
	check_link(q, p);
	snprintf(p, sizeof p, "%s/fifo", e->root);
	if (mkfifo(p, 0600) < 0) {
		perror("mkfifo");
		exit(2);
	}
	snprintf(p, sizeof p, "%s/work", e->root); check_mkdir(p);
	snprintf(p, sizeof p, "%s/rootx", e->top); check_mkdir(p);
	snprintf(p, sizeof p, "%s/rootx/file", e->top); put(p, "LOOKALIKE\n");
}

static int open_rc(const struct roots *r, const char *path, unsigned flags, char *err, size_t errlen)
{
	int fd = -1;
	struct stat st;
	int rc = roots_open_file(r, path, flags, &fd, &st, NULL, err, errlen);
	if (rc == 0)
		close(fd);
	return rc;
}

static int read_is(const struct roots *r, const char *path, const char *want)
{
	int fd = -1;
	struct stat st;
	char buf[64] = "", err[512];
	if (roots_open_file(r, path, ROOTS_SINGLE_LINK, &fd, &st, NULL, err, sizeof err) < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return strcmp(buf, want) == 0;
}

static void run(struct tally *t, struct env *e, unsigned rflags, const char *mode)
{
	char p[1600], err[1024], what[300];
	struct roots *r = NULL;
	char *paths[1] = { e->root };
	int rc;
#define W(s) (snprintf(what, sizeof what, "%s: %s", mode, (s)), what)
	CHECK(t, roots_new(paths, 1, rflags, &r) == 0, W("roots_new"));

	CHECK(t, read_is(r, "a.txt", "A\n"), W("relative path inside the root"));
	CHECK(t, read_is(r, "./sub//b.txt", "B\n"), W("'.' and repeated slashes are normalised"));
	snprintf(p, sizeof p, "%s/sub/b.txt", e->root);
	CHECK(t, read_is(r, p, "B\n"), W("absolute path inside the root"));
	CHECK(t, read_is(r, "a/b/c/file", "INSIDE\n"), W("deep path inside the root"));

	/* ".." in every position */
	CHECK(t, open_rc(r, "../outside/secret", 0, err, sizeof err) == -EINVAL, W("'..' at the start refused"));
	CHECK(t, open_rc(r, "sub/../a.txt", 0, err, sizeof err) == -EINVAL, W("'..' in the middle refused, even when it stays inside"));
	snprintf(p, sizeof p, "%s/../outside/secret", e->root);
	CHECK(t, open_rc(r, p, 0, err, sizeof err) == -EINVAL, W("absolute path with '..' refused"));
	CHECK(t, strstr(err, "..") != NULL, W("the message names the '..'"));

	/* absolute paths outside */
	rc = open_rc(r, "/etc/hostname", 0, err, sizeof err);
	CHECK(t, rc == -EPERM, W("absolute path outside every root refused"));
	CHECK(t, strstr(err, e->root) != NULL && strstr(err, "Allowed roots") != NULL, W("the message lists the allowed roots"));
	snprintf(p, sizeof p, "%s/rootx/file", e->top);
	CHECK(t, open_rc(r, p, 0, err, sizeof err) == -EPERM, W("a sibling whose name starts like the root is outside"));
	snprintf(p, sizeof p, "%s/secret", e->out);
	CHECK(t, open_rc(r, p, 0, err, sizeof err) == -EPERM, W("the outside file by its own absolute path"));

	/* symlinks */
	CHECK(t, open_rc(r, "link_out", 0, err, sizeof err) == -ELOOP, W("symlink to an absolute path outside refused"));
	CHECK(t, strstr(err, "symbolic link") != NULL, W("the message says symbolic link"));
	CHECK(t, open_rc(r, "link_rel_out", 0, err, sizeof err) == -ELOOP, W("relative symlink climbing out refused"));
	CHECK(t, open_rc(r, "link_in", 0, err, sizeof err) == -ELOOP, W("symlink pointing inside the root refused too (documented)"));
	CHECK(t, open_rc(r, "dirlink/secret", 0, err, sizeof err) == -ELOOP, W("symlinked folder as first component refused"));
	CHECK(t, open_rc(r, "sub/deeplink/secret", 0, err, sizeof err) == -ELOOP, W("symlinked folder as middle component refused"));
	CHECK(t, open_rc(r, "proclink/etc/hostname", 0, err, sizeof err) == -ELOOP, W("link to /proc/self/root refused"));

	/* A symlink at every component of a/b/c/file, in turn. */
	const char *comps[] = { "a", "a/b", "a/b/c", "a/b/c/file" };
	const char *outs[] = { "a", "a/b", "a/b/c", "a/b/c/file" };
	for (int i = 0; i < 4; i++) {
		char real[1200], aside[1300], target[1200];
		snprintf(real, sizeof real, "%s/%s", e->root, comps[i]);
		snprintf(aside, sizeof aside, "%s.aside", real);
		snprintf(target, sizeof target, "%s/%s", e->out, outs[i]);
		if (rename(real, aside) < 0 || symlink(target, real) < 0) {
			perror("swap");
			exit(2);
		}
		char msg[100];
		snprintf(msg, sizeof msg, "symlink as component %d of 4 refused", i + 1);
		CHECK(t, open_rc(r, "a/b/c/file", 0, err, sizeof err) == -ELOOP, W(msg));
		unlink(real);
		rename(aside, real);
	}
	CHECK(t, read_is(r, "a/b/c/file", "INSIDE\n"), W("after restoring, the real path works again"));

	/* hard links, FIFOs, folders, missing */
	CHECK(t, open_rc(r, "hardlink", ROOTS_SINGLE_LINK, err, sizeof err) == -EMLINK, W("hard-linked file refused"));
	CHECK(t, strstr(err, "hard link") != NULL, W("the message says hard link"));
	CHECK(t, open_rc(r, "fifo", 0, err, sizeof err) == -EINVAL, W("FIFO refused without blocking"));
	CHECK(t, open_rc(r, "sub", 0, err, sizeof err) == -EISDIR, W("a folder is not a file"));
	CHECK(t, open_rc(r, "nope.txt", 0, err, sizeof err) == -ENOENT, W("missing file: -ENOENT"));
	CHECK(t, open_rc(r, "", 0, err, sizeof err) == -EINVAL, W("empty path refused"));
	CHECK(t, open_rc(r, e->root, 0, err, sizeof err) == -EISDIR, W("the root itself is not a file"));

	/* parents for uploads */
	struct roots_loc loc;
	int d = -1;
	CHECK(t, roots_open_parent(r, "sub/new.txt", &d, &loc, err, sizeof err) == 0 && d >= 0, W("parent of a new file opens"));
	CHECK(t, strcmp(loc.name, "new.txt") == 0 && strcmp(loc.rel, "sub/new.txt") == 0, W("loc names the file and its path below the root"));
	snprintf(p, sizeof p, "%s/sub/new.txt", e->root);
	CHECK(t, strcmp(loc.abs, p) == 0, W("loc.abs is the absolute path"));
	if (d >= 0)
		close(d);
	CHECK(t, roots_open_parent(r, "top.txt", &d, &loc, err, sizeof err) == 0, W("parent of a file at the top is the root"));
	if (d >= 0)
		close(d);
	CHECK(t, roots_open_parent(r, "dirlink/new.txt", &d, &loc, err, sizeof err) == -ELOOP, W("parent through a symlink refused"));
	CHECK(t, roots_open_parent(r, "sub/deeplink/new.txt", &d, &loc, err, sizeof err) == -ELOOP, W("parent through a deeper symlink refused"));
	CHECK(t, roots_open_parent(r, "missing/new.txt", &d, &loc, err, sizeof err) == -ENOENT, W("missing parent folder: -ENOENT"));
	CHECK(t, roots_open_parent(r, e->root, &d, &loc, err, sizeof err) == -EISDIR, W("the root itself has no parent here"));

	/* Swap the folder for a symlink after it was opened: work through the descriptor still
	 * lands in the original folder, never outside. */
	CHECK(t, roots_open_parent(r, "work/x.txt", &d, &loc, err, sizeof err) == 0, W("parent opened before the swap"));
	char wk[1200], wk2[1300], ox[1200];
	snprintf(wk, sizeof wk, "%s/work", e->root);
	snprintf(wk2, sizeof wk2, "%s/work.moved", e->root);
	snprintf(ox, sizeof ox, "%s/x.txt", e->out);
	rename(wk, wk2);
	check_symlink(e->out, wk);
	int f = openat(d, "x.txt", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	CHECK(t, f >= 0, W("file created through the held descriptor"));
	if (f >= 0)
		close(f);
	CHECK(t, access(ox, F_OK) != 0, W("nothing appeared outside the root"));
	snprintf(p, sizeof p, "%s/x.txt", wk2);
	CHECK(t, access(p, F_OK) == 0, W("the file is in the folder that was opened"));
	int d2 = -1;
	CHECK(t, roots_open_parent(r, "work/y.txt", &d2, &loc, err, sizeof err) == -ELOOP,
	      W("a fresh resolution of the swapped path is refused"));
	close(d);
	unlink(wk);
	unlink(p);
	rename(wk2, wk);

	CHECK(t, roots_openat_beneath(AT_FDCWD, "/etc/hostname", O_RDONLY, 0, rflags & ROOTS_WALK) == -EINVAL,
	      W("the primitive refuses absolute names"));
	roots_free(r);

	/* nested roots, and a root configured through a symlink */
	char sub[700], rl[700];
	snprintf(sub, sizeof sub, "%s/sub", e->root);
	char *two[2] = { e->root, sub };
	CHECK(t, roots_new(two, 2, rflags, &r) == 0, W("two nested roots"));
	snprintf(p, sizeof p, "%s/sub/b.txt", e->root);
	CHECK(t, roots_locate(r, p, &loc, err, sizeof err) == 0 && loc.root == 1 && strcmp(loc.rel, "b.txt") == 0,
	      W("the innermost root holds a path"));
	CHECK(t, read_is(r, p, "B\n"), W("and the file opens through it"));
	roots_free(r);
	snprintf(rl, sizeof rl, "%s/rootlink", e->top);
	check_symlink(e->root, rl);
	char *viasym[1] = { rl };
	CHECK(t, roots_new(viasym, 1, rflags, &r) == 0, W("root configured through a symlink"));
	snprintf(p, sizeof p, "%s/a.txt", rl);
	CHECK(t, read_is(r, p, "A\n"), W("path under the configured name works"));
	snprintf(p, sizeof p, "%s/a.txt", e->root);
	CHECK(t, read_is(r, p, "A\n"), W("path under the real name works"));
	CHECK(t, open_rc(r, "link_out", 0, err, sizeof err) == -ELOOP, W("links inside it are still refused"));
	roots_free(r);
	unlink(rl);

	/* /proc as a root: magic links below it are refused */
	char *procroot[1] = { "/proc/self" };
	CHECK(t, roots_new(procroot, 1, rflags, &r) == 0, W("/proc/self as a root"));
	CHECK(t, open_rc(r, "root/etc/hostname", 0, err, sizeof err) == -ELOOP, W("/proc/self/root magic link refused"));
	CHECK(t, open_rc(r, "cwd/x", 0, err, sizeof err) == -ELOOP, W("/proc/self/cwd magic link refused"));
	CHECK(t, open_rc(r, "fd/0", 0, err, sizeof err) == -ELOOP, W("/proc/self/fd/0 magic link refused"));
	roots_free(r);

	/* no roots at all */
	CHECK(t, roots_new(NULL, 0, rflags, &r) == 0, W("an empty roots list"));
	rc = open_rc(r, "a.txt", 0, err, sizeof err);
	CHECK(t, rc == -EPERM && strstr(err, "fileRoots") != NULL, W("every path refused, naming server.fileRoots"));
	char desc[200];
	roots_describe(r, desc, sizeof desc);
	CHECK(t, strstr(desc, "none") != NULL, W("described as none"));
	roots_free(r);
	char *rel[1] = { "relative/root" };
	CHECK(t, roots_new(rel, 1, rflags, &r) == -EINVAL, W("a relative root is refused"));
#undef W
}

int main(void)
{
	struct tally t = { 0, 0 };
	struct env e;
	build(&e);
	run(&t, &e, 0, "openat2");
	run(&t, &e, ROOTS_WALK, "walk");
	check_rm_rf(e.top);
	return check_done(&t);
}
