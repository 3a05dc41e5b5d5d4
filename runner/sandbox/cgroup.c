/* runner/sandbox/cgroup.c — see cgroup.h.
 *
 * Layout: <our cgroup>/forkpoint-<supervisor pid>/<job name>, in each hierarchy used.  Our own
 * cgroup is the parent (not the hierarchy root) so the jobs stay charged to whatever limits the
 * supervisor itself runs under. */
#include "runner/sandbox/cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/io.h"

enum { H_V2, H_MEM, H_PIDS, H_N };

struct cg_host {
	char *base[H_N];           /* our folder in each hierarchy, NULL if unusable */
	int mem_src, pids_src;     /* which hierarchy sets the limit: H_V2, H_MEM/H_PIDS, -1 */
	int v2_kill;
	char **pending;            /* job folders that were still busy when freed */
	size_t n_pending;
	unsigned long seq;
	char note[512];
};

struct cg_job {
	struct cg_host *h;
	char *dir[H_N];
	int procs_fd[H_N];         /* v1 cgroup.procs, opened here for the child to write */
	int v2_fd;
};

/* ---- small file helpers -------------------------------------------------------------- */

/* One write of the whole value: cgroup files take a value per write() and reject a partial
 * one, so a short write is an error (-EIO), never retried in pieces. */
static int write_file(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p)
		return -ENAMETOOLONG;
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(text);
	ssize_t n = write(fd, text, len);
	int rc = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}

static int read_file(const char *dir, const char *name, char *buf, size_t len)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof p, "%s/%s", dir, name) >= (int)sizeof p)
		return -ENAMETOOLONG;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* cgroup files answer in one read; a failed read gives an empty value. */
	ssize_t got = io_read_upto(fd, buf, len - 1);
	buf[got > 0 ? got : 0] = 0;
	close(fd);
	return 0;
}

/* The value of "key N" in a flat keyed file (memory.events, memory.oom_control). */
static long long keyed_value(const char *dir, const char *file, const char *key)
{
	char buf[4096];
	if (!dir || read_file(dir, file, buf, sizeof buf) < 0)
		return 0;
	size_t kl = strlen(key);
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			return strtoll(line + kl + 1, NULL, 10);
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* Whole words only: "pids" must not match inside "pids_foo", and cgroup lists separate by
 * spaces (v2) or commas (v1 mount options). */
static int has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += wl) {
		int start = p == list || p[-1] == ' ' || p[-1] == ',';
		int end = p[wl] == 0 || p[wl] == ' ' || p[wl] == ',' || p[wl] == '\n';
		if (start && end)
			return 1;
	}
	return 0;
}

/* ---- finding our place in each hierarchy ------------------------------------------------ */

struct mnt {
	char point[PATH_MAX];
	char root[PATH_MAX];
	int found;
};

/* Mount points of the v2 tree and the v1 memory and pids controllers, from mountinfo. */
static void find_mounts(struct mnt m[H_N])
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		char root[PATH_MAX], point[PATH_MAX];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2)
			continue;
		char fstype[64], src[256], opts[1024];
		if (sscanf(dash + 3, "%63s %255s %1023s", fstype, src, opts) != 3)
			continue;
		int which = -1;
		if (strcmp(fstype, "cgroup2") == 0)
			which = H_V2;
		else if (strcmp(fstype, "cgroup") == 0 && has_word(opts, "memory"))
			which = H_MEM;
		else if (strcmp(fstype, "cgroup") == 0 && has_word(opts, "pids"))
			which = H_PIDS;
		if (which < 0 || m[which].found)
			continue;
		snprintf(m[which].point, sizeof m[which].point, "%s", point);
		snprintf(m[which].root, sizeof m[which].root, "%s", root);
		m[which].found = 1;
	}
	fclose(f);
}

/* Our cgroup path in each hierarchy, from /proc/self/cgroup. */
static void find_paths(char paths[H_N][PATH_MAX], int have[H_N])
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096];
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		const char *ctrls = c1 + 1, *path = c2 + 1;
		int which = -1;
		if (strncmp(line, "0", 1) == 0 && c1 == line + 1 && *ctrls == 0)
			which = H_V2;
		else if (has_word(ctrls, "memory"))
			which = H_MEM;
		else if (has_word(ctrls, "pids"))
			which = H_PIDS;
		if (which >= 0 && !have[which]) {
			snprintf(paths[which], PATH_MAX, "%s", path);
			have[which] = 1;
		}
	}
	fclose(f);
}

/* EPERM means the process exists but is someone else's: alive, so its folder is left alone. */
static int pid_alive(long pid)
{
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* Folders left by supervisors that died: their jobs died with them (parent-death signal and
 * PID namespace), so what is left is empty and can go. */
static void remove_stale(const char *parent)
{
	DIR *d = opendir(parent);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		long pid;
		char extra;
		if (sscanf(e->d_name, "forkpoint-%ld%c", &pid, &extra) != 1 || pid_alive(pid))
			continue;
		char dir[PATH_MAX];
		if (snprintf(dir, sizeof dir, "%s/%s", parent, e->d_name) >= (int)sizeof dir)
			continue;
		DIR *sub = opendir(dir);
		struct dirent *s;
		while (sub && (s = readdir(sub))) {
			char p[PATH_MAX];
			struct stat st;
			if (s->d_name[0] == '.' ||
			    snprintf(p, sizeof p, "%s/%s", dir, s->d_name) >= (int)sizeof p)
				continue;
			if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
				rmdir(p);
		}
		if (sub)
			closedir(sub);
		rmdir(dir);
	}
	closedir(d);
}

/* The base is created under our own cgroup as the mount shows it; inside a container the
 * mount is often a subtree, so our path from /proc/self/cgroup is made relative to the
 * mount's root first.  Stale bases of dead supervisors are swept on the way. */
static char *make_base(struct cg_host *h, int which, const struct mnt *m, const char *path,
                       char *why, size_t whylen)
{
	char parent[PATH_MAX], base[PATH_MAX];
	size_t rl = strlen(m->root);
	const char *rel = path;
	/* Our path is relative to the hierarchy's root; the mount may show a subtree of it. */
	if (strcmp(m->root, "/") != 0) {
		if (strncmp(path, m->root, rl) != 0 || (path[rl] != 0 && path[rl] != '/')) {
			snprintf(why, whylen, "our cgroup is outside the mounted part of the tree");
			return NULL;
		}
		rel = path + rl;
	}
	if (snprintf(parent, sizeof parent, "%s%s", m->point, strcmp(rel, "/") == 0 ? "" : rel) >=
	    (int)sizeof parent ||
	    snprintf(base, sizeof base, "%s/forkpoint-%ld", parent, (long)getpid()) >= (int)sizeof base) {
		snprintf(why, whylen, "path too long");
		return NULL;
	}
	remove_stale(parent);
	if (mkdir(base, 0755) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "cannot create a cgroup: %s", strerror(errno));
		return NULL;
	}
	(void)h;
	(void)which;
	return strdup(base);
}

/* Probed once per supervisor: which hierarchies exist, whether this folder may delegate
 * memory and pids to children (v2 needs them in subtree_control), and whether cgroup.kill is
 * there.  v2 is preferred per controller, v1 fills the gaps, and folders that would give
 * nothing are removed again.  Never fails for lack of cgroups: every gap becomes a line of
 * the note that sandbox-check and the degraded list show. */
int cg_host_new(struct cg_host **out)
{
	struct cg_host *h = calloc(1, sizeof *h);
	struct mnt m[H_N];
	char paths[H_N][PATH_MAX];
	int have[H_N] = { 0 };
	char why[H_N][300];
	static const char *const names[H_N] = { "v2", "v1 memory", "v1 pids" };
	if (!h)
		return -ENOMEM;
	memset(m, 0, sizeof m);
	memset(why, 0, sizeof why);
	h->mem_src = h->pids_src = -1;
	find_mounts(m);
	find_paths(paths, have);
	for (int i = 0; i < H_N; i++) {
		if (!m[i].found)
			snprintf(why[i], sizeof why[i], "not mounted");
		else if (!have[i])
			snprintf(why[i], sizeof why[i], "not in /proc/self/cgroup");
		else
			h->base[i] = make_base(h, i, &m[i], paths[i], why[i], sizeof why[i]);
	}
	if (h->base[H_V2]) {
		char ctl[512] = "";
		read_file(h->base[H_V2], "cgroup.controllers", ctl, sizeof ctl);
		int mem = has_word(ctl, "memory"), pids = has_word(ctl, "pids");
		/* Job folders get the controllers only if this folder passes them down. */
		if (mem && write_file(h->base[H_V2], "cgroup.subtree_control", "+memory") == 0)
			h->mem_src = H_V2;
		if (pids && write_file(h->base[H_V2], "cgroup.subtree_control", "+pids") == 0)
			h->pids_src = H_V2;
		char kp[PATH_MAX];
		snprintf(kp, sizeof kp, "%s/cgroup.kill", h->base[H_V2]);
		h->v2_kill = access(kp, W_OK) == 0;
		if (!mem || !pids)
			snprintf(why[H_V2], sizeof why[H_V2], "controllers delegated here: %s",
			         ctl[0] ? strtok(ctl, "\n") : "none");
	}
	if (h->mem_src < 0 && h->base[H_MEM])
		h->mem_src = H_MEM;
	if (h->pids_src < 0 && h->base[H_PIDS])
		h->pids_src = H_PIDS;
	/* A v1 folder we will not use is not worth keeping. */
	for (int i = H_MEM; i <= H_PIDS; i++) {
		if (h->base[i] && h->mem_src != i && h->pids_src != i) {
			rmdir(h->base[i]);
			free(h->base[i]);
			h->base[i] = NULL;
		}
	}
	if (h->base[H_V2] && !h->v2_kill && h->mem_src != H_V2 && h->pids_src != H_V2) {
		rmdir(h->base[H_V2]);
		free(h->base[H_V2]);
		h->base[H_V2] = NULL;
		snprintf(why[H_V2], sizeof why[H_V2], "no controllers and no cgroup.kill");
	}
	size_t off = 0;
	for (int i = 0; i < H_N; i++)
		if (why[i][0] && off < sizeof h->note)
			off += (size_t)snprintf(h->note + off, sizeof h->note - off, "%s%s: %s",
			                        off ? "; " : "", names[i], why[i]);
	*out = h;
	return 0;
}

void cg_host_caps(const struct cg_host *h, struct cg_caps *c)
{
	memset(c, 0, sizeof *c);
	if (!h)
		return;
	c->memory = h->mem_src >= 0;
	c->pids = h->pids_src >= 0;
	c->kill = h->v2_kill;
	if (h->mem_src == H_V2 || h->pids_src == H_V2)
		c->version = 2;
	else if (h->mem_src >= 0 || h->pids_src >= 0)
		c->version = 1;
}

const char *cg_host_note(const struct cg_host *h)
{
	return h ? h->note : "";
}

/* Job folders whose last members were still exiting when the job was freed: retried on each
 * new job and at exit, so they do not pile up over a long run. */
static void retry_pending(struct cg_host *h)
{
	size_t w = 0;
	for (size_t i = 0; i < h->n_pending; i++) {
		if (rmdir(h->pending[i]) == 0 || errno == ENOENT)
			free(h->pending[i]);
		else
			h->pending[w++] = h->pending[i];
	}
	h->n_pending = w;
}

void cg_host_free(struct cg_host *h)
{
	if (!h)
		return;
	retry_pending(h);
	for (size_t i = 0; i < h->n_pending; i++)
		free(h->pending[i]);
	free(h->pending);
	for (int i = 0; i < H_N; i++) {
		if (h->base[i])
			rmdir(h->base[i]);
		free(h->base[i]);
	}
	free(h);
}

/* ---- one job ---------------------------------------------------------------------------- */

/* A folder per job and hierarchy, named after the job plus a counter so a retried attempt
 * never meets its predecessor's folder.  The limits are written before any process enters.
 * cgroup.procs is opened now, by the supervisor, because the child that writes it later may
 * have lost the right to open it (a new user namespace). */
int cg_job_new(struct cg_host *h, const char *name, long long memory_bytes, long pids_max,
               struct cg_job **out)
{
	struct cg_job *j = NULL;
	int rc = 0;
	char num[32];
	*out = NULL;
	if (!h || (!h->base[H_V2] && !h->base[H_MEM] && !h->base[H_PIDS]))
		return 0;
	retry_pending(h);
	if (!(j = calloc(1, sizeof *j)))
		return -ENOMEM;
	j->h = h;
	j->v2_fd = -1;
	for (int i = 0; i < H_N; i++)
		j->procs_fd[i] = -1;
	h->seq++;
	for (int i = 0; i < H_N; i++) {
		if (!h->base[i])
			continue;
		if (asprintf(&j->dir[i], "%s/%.40s-%lu", h->base[i], name, h->seq) < 0) {
			j->dir[i] = NULL;
			rc = -ENOMEM;
			goto fail;
		}
		if (mkdir(j->dir[i], 0755) < 0) {
			rc = -errno;
			free(j->dir[i]);
			j->dir[i] = NULL;
			goto fail;
		}
	}
	if (memory_bytes > 0 && h->mem_src >= 0) {
		snprintf(num, sizeof num, "%lld", memory_bytes);
		if (h->mem_src == H_V2) {
			rc = write_file(j->dir[H_V2], "memory.max", num);
			/* Swap would stretch the limit; a whole-group OOM kill ends the tree at once. */
			write_file(j->dir[H_V2], "memory.swap.max", "0");
			write_file(j->dir[H_V2], "memory.oom.group", "1");
		} else {
			rc = write_file(j->dir[H_MEM], "memory.limit_in_bytes", num);
			write_file(j->dir[H_MEM], "memory.memsw.limit_in_bytes", num);
		}
		if (rc < 0)
			goto fail;
	}
	if (pids_max > 0 && h->pids_src >= 0) {
		snprintf(num, sizeof num, "%ld", pids_max);
		if ((rc = write_file(j->dir[h->pids_src], "pids.max", num)) < 0)
			goto fail;
	}
	for (int i = H_MEM; i <= H_PIDS; i++) {
		char p[PATH_MAX];
		if (!j->dir[i])
			continue;
		snprintf(p, sizeof p, "%s/cgroup.procs", j->dir[i]);
		if ((j->procs_fd[i] = open(p, O_WRONLY | O_CLOEXEC)) < 0) {
			rc = -errno;
			goto fail;
		}
	}
	if (j->dir[H_V2] && (j->v2_fd = open(j->dir[H_V2], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = -errno;
		goto fail;
	}
	*out = j;
	return 0;
fail:
	cg_job_free(j);
	return rc;
}

/* For clone3's CLONE_INTO_CGROUP: the child starts inside the v2 folder, with no moment
 * outside its limits. */
int cg_job_dirfd(const struct cg_job *j)
{
	return j ? j->v2_fd : -1;
}

/* v1 has no CLONE_INTO_CGROUP: the child moves itself in, through the descriptors opened for
 * it, before it runs anything of the job's. */
int cg_job_enter(const struct cg_job *j)
{
	if (!j)
		return 0;
	for (int i = H_MEM; i <= H_PIDS; i++) {
		if (j->procs_fd[i] < 0)
			continue;
		/* "0" is the writer itself; the supervisor opened the file, so its rights apply. */
		if (write(j->procs_fd[i], "0", 1) != 1)
			return -errno;
	}
	return 0;
}

/* Once the child has exec'd nothing more enters the folders: the descriptors go, so the
 * supervisor holds no fds per running job that it no longer needs. */
void cg_job_spawned(struct cg_job *j)
{
	if (!j)
		return;
	for (int i = 0; i < H_N; i++) {
		if (j->procs_fd[i] >= 0)
			close(j->procs_fd[i]);
		j->procs_fd[i] = -1;
	}
	if (j->v2_fd >= 0)
		close(j->v2_fd);
	j->v2_fd = -1;
}

int cg_job_kill(struct cg_job *j)
{
	if (!j)
		return 0;
	if (j->dir[H_V2] && j->h->v2_kill && write_file(j->dir[H_V2], "cgroup.kill", "1") == 0)
		return 1;
	/* v1 has no kill switch: signal every member, a few rounds to catch fresh forks (the
	 * pids limit bounds how many there can be). */
	const char *dir = j->dir[H_PIDS] ? j->dir[H_PIDS] : j->dir[H_MEM];
	if (!dir)
		return 0;
	for (int round = 0; round < 8; round++) {
		char buf[16384];
		int any = 0;
		if (read_file(dir, "cgroup.procs", buf, sizeof buf) < 0)
			break;
		for (char *p = buf; *p;) {
			char *end;
			long pid = strtol(p, &end, 10);
			if (end == p)
				break;
			if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
				any = 1;
			p = end;
			while (*p && isspace((unsigned char)*p))
				p++;
		}
		if (!any)
			break;
	}
	return 1;
}

/* Asked after the job ended, so a memory-limit kill is reported as such rather than as a bare
 * SIGKILL. */
int cg_job_oom(const struct cg_job *j)
{
	if (!j || j->h->mem_src < 0)
		return 0;
	if (j->h->mem_src == H_V2)
		return keyed_value(j->dir[H_V2], "memory.events", "oom_kill") > 0 ||
		       keyed_value(j->dir[H_V2], "memory.events", "oom_group_kill") > 0;
	return keyed_value(j->dir[H_MEM], "memory.oom_control", "oom_kill") > 0;
}

/* rmdir fails with EBUSY while killed members are still exiting; such folders are kept for
 * retry_pending instead of waiting here, which would stall the loop. */
void cg_job_free(struct cg_job *j)
{
	if (!j)
		return;
	cg_job_spawned(j);
	for (int i = 0; i < H_N; i++) {
		if (!j->dir[i])
			continue;
		if (rmdir(j->dir[i]) == 0 || errno == ENOENT) {
			free(j->dir[i]);
			continue;
		}
		/* Members that are still exiting keep the folder busy for a moment. */
		char **np = realloc(j->h->pending, (j->h->n_pending + 1) * sizeof *np);
		if (np) {
			j->h->pending = np;
			np[j->h->n_pending++] = j->dir[i];
		} else {
			free(j->dir[i]);
		}
	}
	free(j);
}
