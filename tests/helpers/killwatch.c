/* tests/helpers/killwatch.c — the crash test's kill switch on file system events: SIGKILLs a
 * process the instant it touches a file, so a crash lands inside a compaction, a segment roll,
 * a blob write, an upload commit or start-up recovery instead of wherever a timer happens to.
 *
 *   killwatch EVENT GLOB NTH DIR...
 *
 * EVENT is one of create, open, access, modify, close_write, moved_from, moved_to, delete; GLOB
 * (fnmatch) matches the file's name (not its folder); NTH > 0 picks the NTH matching event.
 * Each DIR is watched with its subfolders, including ones created later (blobs/xx/).
 *
 * Protocol on stdin/stdout: once every watch is in place it prints "ready"; it then reads the
 * target's pid as one line (the caller starts the target after "ready", so no event of the
 * target's is missed: events wait in the inotify queue until the pid is known).  On the NTH
 * match it sends SIGKILL, prints "fired EVENT NAME" and exits 0.  When stdin ends first (the
 * target's life ended some other way) it exits 0 without printing.  Exit 2: bad usage; 1: an
 * inotify or I/O error (with a message on stderr). */
#include <errno.h>
#include <dirent.h>
#include <fnmatch.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#define MAX_DEPTH 3

struct ev_name {
	const char *name;
	uint32_t mask;
};

static const struct ev_name events[] = {
	{ "create", IN_CREATE },        { "open", IN_OPEN },
	{ "access", IN_ACCESS },        { "modify", IN_MODIFY },
	{ "close_write", IN_CLOSE_WRITE }, { "moved_from", IN_MOVED_FROM },
	{ "moved_to", IN_MOVED_TO },    { "delete", IN_DELETE },
};

struct watch {
	int fd;                 /* the inotify instance */
	uint32_t mask;          /* the event looked for */
	const char *ename;
	const char *glob;
	long nth;
	pid_t pid;              /* 0 until read from stdin */
};

/* Watch dir and its subfolders up to MAX_DEPTH; a folder that vanished meanwhile is skipped,
 * since the target may be deleting what is being walked. */
static int add_tree(const struct watch *w, const char *dir, int depth)
{
	if (inotify_add_watch(w->fd, dir, w->mask | IN_CREATE | IN_ONLYDIR) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (depth >= MAX_DEPTH)
		return 0;
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		char sub[PATH_MAX];
		if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= sizeof sub)
			continue;
		rc = add_tree(w, sub, depth + 1);
	}
	closedir(d);
	return rc;
}

/* Read the pid line.  1: got it; 0: stdin ended; -errno on a read error or a bad line. */
static int read_pid(struct watch *w)
{
	char line[32];
	if (!fgets(line, sizeof line, stdin))
		return ferror(stdin) ? -EIO : 0;
	char *end;
	long v = strtol(line, &end, 10);
	if (v <= 0 || (*end != '\n' && *end != '\0'))
		return -EINVAL;
	w->pid = (pid_t)v;
	return 1;
}

/* Handle one buffer of inotify events.  1: fired; 0: go on; -errno on error.  Only names
 * matter, so watch descriptors are not mapped back to folders. */
static int handle_events(struct watch *w, const char *buf, ssize_t len)
{
	for (const char *p = buf; p < buf + len;) {
		const struct inotify_event *ev = (const struct inotify_event *)p;
		p += sizeof *ev + ev->len;
		if (ev->len == 0)
			continue;
		if (!(ev->mask & w->mask) || fnmatch(w->glob, ev->name, 0) != 0)
			continue;
		if (--w->nth > 0)
			continue;
		if (kill(w->pid, SIGKILL) < 0 && errno != ESRCH)
			return -errno;
		printf("fired %s %s\n", w->ename, ev->name);
		fflush(stdout);
		return 1;
	}
	return 0;
}

/* Does any event in buf create a folder?  Then the trees are walked again for new watches. */
static int creates_dir(const char *buf, ssize_t len)
{
	for (const char *p = buf; p < buf + len;) {
		const struct inotify_event *ev = (const struct inotify_event *)p;
		p += sizeof *ev + ev->len;
		if ((ev->mask & IN_CREATE) && (ev->mask & IN_ISDIR))
			return 1;
	}
	return 0;
}

/* The event loop: stdin (end = stop) and the inotify fd.  Events are acted on only once the
 * pid is known; until then they stay queued in the kernel. */
static int run(struct watch *w, char **dirs, int ndirs)
{
	char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		struct pollfd pf[2] = { { .fd = 0, .events = POLLIN }, { .fd = w->fd, .events = POLLIN } };
		int n = poll(pf, w->pid ? 2 : 1, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (pf[0].revents) {
			if (w->pid)
				return 0;   /* anything after the pid line means: stop */
			int rc = read_pid(w);
			if (rc <= 0)
				return rc;
			continue;
		}
		ssize_t len = read(w->fd, buf, sizeof buf);
		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0)
			return -errno;
		int rc = handle_events(w, buf, len);
		if (rc != 0)
			return rc < 0 ? rc : 0;
		for (int i = 0; creates_dir(buf, len) && i < ndirs; i++)
			if ((rc = add_tree(w, dirs[i], 0)) < 0)
				return rc;
	}
}

int main(int argc, char **argv)
{
	struct watch w = { .fd = -1 };
	if (argc < 5) {
		fprintf(stderr, "usage: killwatch EVENT GLOB NTH DIR...\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
		if (strcmp(argv[1], events[i].name) == 0) {
			w.mask = events[i].mask;
			w.ename = events[i].name;
		}
	w.glob = argv[2];
	w.nth = strtol(argv[3], NULL, 10);
	if (!w.mask || w.nth <= 0) {
		fprintf(stderr, "killwatch: unknown event %s or bad count %s\n", argv[1], argv[3]);
		return 2;
	}
	int rc;
	if ((w.fd = inotify_init1(IN_CLOEXEC)) < 0) {
		rc = -errno;
		goto fail;
	}
	for (int i = 4; i < argc; i++)
		if ((rc = add_tree(&w, argv[i], 0)) < 0)
			goto fail;
	printf("ready\n");
	fflush(stdout);
	rc = run(&w, argv + 4, argc - 4);
	if (rc < 0)
		goto fail;
	close(w.fd);
	return 0;
fail:
	fprintf(stderr, "killwatch: %s\n", strerror(-rc));
	if (w.fd >= 0)
		close(w.fd);
	return 1;
}
