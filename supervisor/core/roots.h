/* supervisor/roots.h — paths confined to server.fileRoots.
 *
 * A path a model gives is checked lexically first (no "..", no empty name, inside one of the
 * roots when absolute, relative to the first root otherwise), then opened from a descriptor of
 * its root with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), or, where
 * openat2 is missing or filtered, with an equivalent walk that opens one component at a time
 * with O_NOFOLLOW and checks each is a real folder.  Symbolic links are refused at every
 * component, including ones that point back inside the root: that rule is simple to state and
 * leaves no window between checking a link and following it.
 *
 * Callers keep the descriptors they get and work relative to them, so a folder replaced by a
 * symlink after the check cannot redirect later operations.
 *
 * Functions return 0 or -errno and, on failure, one sentence in err naming the path and, where
 * the path is not inside a root, the allowed roots:
 *   -EINVAL  empty or malformed path, a ".." component ("." components are dropped)
 *   -EPERM   absolute path outside every root (or no roots configured)
 *   -ELOOP   a symbolic link on the way
 *   -EXDEV   the kernel saw the resolution leave the root
 *   -EMLINK  a regular file with more than one hard link (ROOTS_SINGLE_LINK)
 *   -ENOENT, -ENOTDIR, -EISDIR, -EACCES … as the file system says */
#ifndef FP_ROOTS_H
#define FP_ROOTS_H

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

struct roots;

/* roots_new flags */
#define ROOTS_WALK 1u            /* never use openat2 (tests of the fallback) */

/* roots_open_file flags */
#define ROOTS_SINGLE_LINK 1u     /* refuse regular files with st_nlink > 1 */

struct roots_loc {
	size_t root;                 /* index of the root that holds the path */
	char abs[PATH_MAX];          /* root + "/" + rel, without "." or repeated slashes */
	char rel[PATH_MAX];          /* below the root; "" for the root itself */
	char name[NAME_MAX + 1];     /* last component of rel ("" for the root itself) */
};

/* paths: absolute folder names (server.fileRoots).  Copies them, normalised; n may be 0. */
int roots_new(char *const *paths, size_t n, unsigned flags, struct roots **out);
void roots_free(struct roots *r);
size_t roots_count(const struct roots *r);
const char *roots_path(const struct roots *r, size_t i);
/* "/a, /b" — or "(none: server.fileRoots is empty)" — for messages. */
void roots_describe(const struct roots *r, char *buf, size_t len);

/* The lexical part only: which root, and the path below it. */
int roots_locate(const struct roots *r, const char *path, struct roots_loc *loc, char *err, size_t errlen);

/* Open an existing regular file for reading (O_RDONLY|O_NONBLOCK, so a FIFO planted in a root
 * cannot block the caller; anything but a regular file is refused with -EINVAL).  *st is its
 * fstat.  loc may be NULL. */
int roots_open_file(const struct roots *r, const char *path, unsigned flags, int *fd, struct stat *st,
                    struct roots_loc *loc, char *err, size_t errlen);
/* Open (O_RDONLY|O_DIRECTORY) the existing folder that holds path's last component, for
 * creating or replacing that name with *at() calls.  loc->name is that name (never empty). */
int roots_open_parent(const struct roots *r, const char *path, int *dirfd, struct roots_loc *loc,
                      char *err, size_t errlen);

/* The primitive: open rel below dirfd ("" is dirfd itself; no ".." components), with no
 * symbolic link followed anywhere and the result never outside dirfd.  flags as for openat
 * (O_CLOEXEC is added; a symlink as last component is refused even with O_PATH); mode only
 * with O_CREAT.  Returns an fd or -errno.  walk: 1 forces the component walk. */
int roots_openat_beneath(int dirfd, const char *rel, int flags, mode_t mode, int walk);

#endif
