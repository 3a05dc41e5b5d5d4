/* supervisor/core/inputs.c — see inputs.h. */
#include "supervisor/core/inputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/io.h"
#include "state/layout.h"
#include "supervisor/core/artifacts.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "supervisor/core/workers.h"

/* A copy, not a link: a later change to the original does not reach the job, and the job
 * cannot write through to the original (the copy is 0444 as well).  copy_file_range lets the
 * file system share extents or copy in the kernel; where it cannot (EXDEV across some file
 * systems, ENOSYS, EOPNOTSUPP, EINVAL) the rest is copied by hand from the offset reached.
 * The temp name plus rename means the job never sees a half-copied input, and
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

/* A copy that failed, as its argument's failure (the same whether it was made now or later).
 * Retryable and internal: the model gave a valid argument, so a failed copy (a full disk, an
 * I/O error) is the server's problem, not a wrong call. */
static void copy_failure(struct transfer_error *e, const char *arg, int rc)
{
	transfer_error_set(e, "internal_error", 1, "Call the tool again; if it keeps failing, tell the operator.",
	                   "The file for argument %s could not be copied into the job's folder: %s.", arg,
	                   strerror(-rc));
}

cJSON *inputs_copy_error(const char *arg, int rc)
{
	struct transfer_error e;
	copy_failure(&e, arg, rc);
	return transfer_error_envelope(&e, NULL);
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

/* The loop hears how the copies went; ran 0: the pool stopped before they were made.
 * Runs on the loop thread, which owns the task table, so done may look the task up.  Only a
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

/* ---- arguments that name files -------------------------------------------------------- */

/* A copy made now (no pool, or a caller that cannot wait), with a scratch buffer of its own. */
static int copy_now(int src, int64_t size, int dirfd, const char *name)
{
	unsigned char *buf = malloc(COPY_BUF);
	int rc = buf ? inputs_copy_file(src, size, dirfd, name, buf, COPY_BUF) : -ENOMEM;
	free(buf);
	return rc;
}

static int mkdir_at(int dirfd, const char *name)
{
	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* The one file an earlier attempt placed in an argument's input folder.  0 and its name. */
static int placed_before(int pd, char *name, size_t len)
{
	int d = fcntl(pd, F_DUPFD_CLOEXEC, 0), found = 0;
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	struct dirent *de;
	if (!dir) {
		if (d >= 0)
			close(d);
		return -ENOENT;
	}
	while ((de = readdir(dir))) {
		struct stat st;
		if (de->d_name[0] == '.' || fstatat(pd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		snprintf(name, len, "%s", de->d_name);
		found++;
	}
	closedir(dir);
	return found == 1 ? 0 : -ENOENT;
}

/* One argument marked forkpoint-upload: its file copied into inputs/<arg>/ (in: that folder's
 * parent, inputs its path; the copy made now, or noted in *later) and the argument replaced
 * by the copy's path.  0, or -1 with e
 * filled (naming the argument). */
static int place_input(struct transfers *tr, int in, const char *inputs, const char *arg, cJSON *args,
                       const char *v, struct inputs **later, struct transfer_error *e)
{
	char base[NAME_MAX + 1], dest[PATH_MAX + NAME_MAX + 300];
	int pd = -1, src = -1, rc = -1;
	int64_t size = 0;
	/* A name per argument: two arguments may name files with the same base name. */
	if (!artifacts_name_ok(arg) || mkdir_at(in, arg) < 0 ||
	    (pd = openat(in, arg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		transfer_error_set(e, "internal_error", 1, "Call the tool again.", "Cannot prepare the input folder for "
		          "argument %s.", arg);
		goto out;
	}
	size_t il = strlen(inputs);
	if (strncmp(v, inputs, il) == 0 && v[il] == '/') {
		rc = 0;   /* already placed by an earlier attempt of the same task */
		goto out;
	}
	if (transfer_open_input(tr, v, &src, &size, base, sizeof base, e) < 0) {
		/* A retry or resume after the upload's record expired: an earlier attempt of this
		 * task already holds the file. */
		int gone = strcmp(e->code, "unknown_transfer") == 0 || strcmp(e->code, "transfer_expired") == 0;
		if (!(gone && placed_before(pd, base, sizeof base) == 0)) {
			snprintf(e->param, sizeof e->param, "%s", arg);
			goto out;
		}
	} else if ((rc = later ? inputs_add(later, src, size, pd, base, arg) : copy_now(src, size, pd, base)) < 0) {
		copy_failure(e, arg, rc);
		rc = -1;
		goto out;
	}
	snprintf(dest, sizeof dest, "%s/%s/%s", inputs, arg, base);
	cJSON_ReplaceItemInObject(args, arg, cJSON_CreateString(dest));
	rc = 0;
out:
	if (src >= 0)
		close(src);
	if (pd >= 0)
		close(pd);
	return rc;
}

/* inputs/ and outputs/ first (the job finds both), then every marked argument's file.  On
 * failure the copies noted so far are dropped. */
static int prepare(struct transfers *tr, const cJSON *schema, cJSON *args, const char *work_dir,
                   struct inputs **later, cJSON **err)
{
	char inputs[PATH_MAX];
	const cJSON *props = cJSON_GetObjectItem(schema, "properties");
	const cJSON *p;
	struct transfer_error e;
	int wd = -1, in = -1, rc = 0;
	*err = NULL;
	wd = open(work_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wd < 0 || mkdir_at(wd, LAYOUT_INPUTS) < 0 || mkdir_at(wd, LAYOUT_OUTPUTS) < 0 ||
	    (in = openat(wd, LAYOUT_INPUTS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		transfer_error_set(&e, "internal_error", 1, "Call the tool again; if it keeps failing, tell the operator.",
		          "The job's work folder %s could not be prepared: %s.", work_dir, strerror(errno));
		rc = -1;
		goto out;
	}
	snprintf(inputs, sizeof inputs, "%s/" LAYOUT_INPUTS, work_dir);
	cJSON_ArrayForEach(p, props) {
		const cJSON *fmt = cJSON_GetObjectItem(p, "format");
		if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "forkpoint-upload") != 0)
			continue;
		cJSON *v = cJSON_GetObjectItem(args, p->string);
		if (cJSON_IsString(v) && (rc = place_input(tr, in, inputs, p->string, args, v->valuestring, later, &e)) < 0)
			goto out;
	}
out:
	if (rc < 0)
		*err = transfer_error_envelope(&e, transfers_roots(tr));
	if (rc < 0 && later) {
		inputs_free(*later);
		*later = NULL;
	}
	if (in >= 0)
		close(in);
	if (wd >= 0)
		close(wd);
	return rc;
}

int inputs_prepare(struct transfers *tr, const cJSON *schema, cJSON *args, const char *work_dir, cJSON **err)
{
	return prepare(tr, schema, args, work_dir, NULL, err);
}

int inputs_prepare_later(struct transfers *tr, const cJSON *schema, cJSON *args, const char *work_dir,
                         struct inputs **later, cJSON **err)
{
	if (later)
		*later = NULL;
	return prepare(tr, schema, args, work_dir, later, err);
}
