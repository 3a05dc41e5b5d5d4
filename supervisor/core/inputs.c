/* supervisor/core/inputs.c — see inputs.h. */
#include "supervisor/core/inputs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/io.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/workers.h"

/* A copy, not a link: a later change to the original does not reach the job, and the job
 * cannot write through to the original (the copy is 0444 as well).  copy_file_range lets the
 * file system share extents or copy in the kernel; where it cannot (EXDEV across some file
 * systems, ENOSYS, EOPNOTSUPP, EINVAL) the rest is copied by hand from the offset reached.  The temp name plus rename means the job never sees a half-copied input, and
 * O_EXCL | O_NOFOLLOW keeps a planted link from receiving the bytes. */
int inputs_copy_file(int src, int64_t size, int dirfd, const char *name, unsigned char *buf, size_t buflen)
{
	char tmp[NAME_MAX + 16];
	int out = -1, rc = 0;
	snprintf(tmp, sizeof tmp, ".%.200s.tmp", name);
	unlinkat(dirfd, tmp, 0);
	out = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	loff_t in_off = 0;
	while (in_off < size) {
		ssize_t n = copy_file_range(src, &in_off, out, NULL, (size_t)(size - in_off), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && errno != EXDEV && errno != ENOSYS && errno != EOPNOTSUPP && errno != EINVAL) {
				rc = -errno;
				goto fail;
			}
			/* No copy offload here (or a short source): plain reads and writes. */
			while (in_off < size) {
				ssize_t r = io_pread_upto(src, buf, buflen, in_off);
				if (r <= 0) {
					rc = r < 0 ? (int)r : -EIO;
					goto fail;
				}
				if ((rc = io_pwrite_full(out, buf, (size_t)r, in_off)) < 0)
					goto fail;
				in_off += r;
			}
			break;
		}
	}
	if (fchmod(out, 0444) < 0 || renameat(dirfd, tmp, dirfd, name) < 0) {
		rc = -errno;
		goto fail;
	}
	close(out);
	return 0;
fail:
	close(out);
	unlinkat(dirfd, tmp, 0);
	return rc;
}


/* ---- copies made later ---------------------------------------------------------------- */

#define COPY_BUF (1u << 20)

struct copy {
	int src, dirfd;
	int64_t size;
	char name[NAME_MAX + 1];
	char arg[NAME_MAX + 1];
};

struct inputs {
	struct copy *v;
	size_t n, cap;
	struct supervisor *sv;
	char task_id[33];
	inputs_done_fn done;
	void *done_arg;
	size_t failed;              /* index of the copy that failed */
	int rc;                     /* from the worker */
};

/* The descriptors are duplicated because the copies run later, possibly on a worker thread,
 * after the caller has closed its own: the caller's lifetime and the copy's stay separate. */
int inputs_add(struct inputs **list, int src, int64_t size, int dirfd, const char *name, const char *arg)
{
	struct inputs *l = *list;
	if (strlen(name) > NAME_MAX || strlen(arg) > NAME_MAX)
		return -ENAMETOOLONG;
	if (!l && !(l = *list = calloc(1, sizeof *l)))
		return -ENOMEM;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		struct copy *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	struct copy *c = &l->v[l->n];
	c->src = fcntl(src, F_DUPFD_CLOEXEC, 0);
	c->dirfd = c->src >= 0 ? fcntl(dirfd, F_DUPFD_CLOEXEC, 0) : -1;
	if (c->dirfd < 0) {
		int rc = -errno;
		if (c->src >= 0)
			close(c->src);
		return rc;
	}
	c->size = size;
	snprintf(c->name, sizeof c->name, "%s", name);
	snprintf(c->arg, sizeof c->arg, "%s", arg);
	l->n++;
	return 0;
}

void inputs_free(struct inputs *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->n; i++) {
		close(list->v[i].src);
		close(list->v[i].dirfd);
	}
	free(list->v);
	free(list);
}

/* Retryable and internal: the model gave a valid argument, so a failed copy (a full disk, an
 * I/O error) is the server's problem, not a wrong call. */
cJSON *inputs_copy_error(const char *arg, int rc)
{
	char msg[NAME_MAX + 300];
	snprintf(msg, sizeof msg, "The file for argument %s could not be copied into the job's folder: %s.", arg,
	         strerror(-rc));
	return task_envelope("internal_error", msg, 1, "Call the tool again; if it keeps failing, tell the operator.");
}

/* Make every copy, in order, until one fails (w: the pool, whose stop ends the work early;
 * NULL inline). */
static void copy_all(struct workers *w, struct inputs *l)
{
	unsigned char *buf = malloc(COPY_BUF);
	l->rc = buf ? 0 : -ENOMEM;
	for (l->failed = 0; l->rc == 0 && l->failed < l->n; l->failed++) {
		const struct copy *c = &l->v[l->failed];
		if (w && workers_stopping(w))
			l->rc = -ECANCELED;
		else
			l->rc = inputs_copy_file(c->src, c->size, c->dirfd, c->name, buf, COPY_BUF);
		if (l->rc < 0)
			break;
	}
	free(buf);
}

static void copy_run(struct workers *w, void *arg)
{
	copy_all(w, arg);
}

/* The loop hears how the copies went; ran 0: the pool stopped before they were made. */
/* Runs on the loop thread, which owns the task table, so done may look the task up.  Only a
 * real failure gets an envelope; -ECANCELED means the server is exiting and nobody is told. */
static void copy_done(void *arg, int ran)
{
	struct inputs *l = arg;
	int rc = ran ? l->rc : -ECANCELED;
	cJSON *env = NULL;
	if (rc < 0 && rc != -ECANCELED)
		env = inputs_copy_error(l->failed < l->n ? l->v[l->failed].arg : "?", rc);
	l->done(l->done_arg, l->task_id, rc, env);
	inputs_free(l);
}

/* A refused submit (no pool, -ENOMEM, or a pool being freed) falls back to copying inline
 * rather than failing the start: slower for the loop, but the task still starts. */
void inputs_run(struct supervisor *sv, struct inputs *list, const char *task_id, inputs_done_fn done,
                void *arg)
{
	list->sv = sv;
	snprintf(list->task_id, sizeof list->task_id, "%s", task_id);
	list->done = done;
	list->done_arg = arg;
	if (sv->workers && workers_submit(sv->workers, copy_run, copy_done, list) == 0)
		return;
	copy_all(NULL, list);
	copy_done(list, 1);
}
