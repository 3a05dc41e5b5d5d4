/* runner/sandbox.c — see sandbox.h.  The mechanisms live in sandbox_fs (private root),
 * sandbox_landlock, sandbox_seccomp and sandbox_cgroup; this file probes the host, turns a
 * tool's sandbox config into one job's plan, runs the plan's child steps in the right order,
 * and describes what a job actually got. */
#include "runner/sandbox/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>
#include <seccomp.h>

#include "runner/sandbox/cgroup.h"
#include "runner/sandbox/fs.h"
#include "runner/sandbox/landlock.h"
#include "runner/sandbox/seccomp.h"
#include "runner/spawn.h"

enum profile { P_NONE, P_DEFAULT, P_STRICT };

#define ALL_NS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
#define HOSTNAME "forkpoint"
#define MAX_RLIMITS 8

struct sb_filter {
	int tried;
	int ok;
	struct sock_fprog prog;
};

struct sandbox {
	unsigned long long ns_flags;   /* namespaces a job gets (0: none) */
	int private_root;              /* a pivot_root'ed view can be built */
	int proc;                      /* ... with a fresh /proc in it */
	int landlock_abi;
	int seccomp;                   /* filters compile and load */
	struct cg_host *cg;
	uid_t uid, in_uid;
	gid_t gid, in_gid;
	uid_t nobody_uid;              /* a root supervisor's jobs run as these by default */
	gid_t nobody_gid;
	pid_t pid;
	unsigned long arg_start, arg_end, env_start, env_end;   /* our argv and environ */
	char ns_note[300], fs_note[300], seccomp_note[300], ll_note[120];
	struct sb_filter filters[2][2][2][2];   /* [strict][network][pidns][no_shm] */
};

struct sb_rlimit {
	int resource;
	struct rlimit lim;
};

struct sandbox_job {
	struct sandbox *sb;
	enum profile profile;
	int network;
	unsigned long long flags;
	char uid_map[48], gid_map[48];
	uid_t host_uid, set_uid;       /* the job's uid on the host; the uid the child takes */
	gid_t host_gid, set_gid;
	int parent_maps;               /* the supervisor writes the id maps (a root supervisor) */
	int set_ids;                   /* the child changes its ids before building the root */
	int no_shm;                    /* memfd and System V shm refused: nothing else bounds them */
	struct fs_plan *fs;
	struct ll_rule *ll;
	size_t n_ll;
	int ll_abi;
	struct sb_rlimit rl[MAX_RLIMITS];
	size_t n_rl;
	const struct sock_fprog *filter;
	struct cg_job *cg;
	struct cg_caps cgc;            /* what this job's cgroup enforces */
	long memory_mb, cpu_seconds, processes, file_mb;
	char *json;
};

void sandbox_msg(char *msg, size_t msglen, const char *a, const char *b)
{
	size_t k = 0;
	if (!msg || msglen == 0)
		return;
	for (const char *s = a; s && *s && k + 1 < msglen; s++)
		msg[k++] = *s;
	for (const char *s = b; s && *s && k + 1 < msglen; s++)
		msg[k++] = *s;
	msg[k] = 0;
}

/* ---- seccomp programs, compiled once per variant ----------------------------------------- */

/* Sixteen variants at most (strict, network, pidns, no_shm), each built on first use and kept
 * for the supervisor's life, so a spawn never recompiles one.  A failure is remembered too,
 * so a variant that cannot be built is not tried again. */
static const struct sock_fprog *get_filter(struct sandbox *sb, int strict, int network, int pidns,
                                           int no_shm, char *err, size_t errlen)
{
	struct sb_filter *f = &sb->filters[!!strict][!!network][!!pidns][!!no_shm];
	if (!f->tried) {
		struct sc_variant v = {
			.policy = strict ? SC_STRICT : SC_DEFAULT, .network = network, .pidns = pidns,
			.supervisor = sb->pid, .no_shm = no_shm,
		};
		f->tried = 1;
		f->ok = sc_build(&v, &f->prog, err, errlen) == 0;
	}
	if (!f->ok && err[0] == 0)
		snprintf(err, errlen, "the seccomp filter could not be built");
	return f->ok ? &f->prog : NULL;
}

/* ---- child steps ------------------------------------------------------------------------- */

/* /proc id-map and setgroups files take their whole content in one write; a partial write is
 * a failure, never retried. */
static int write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = strlen(text);
	int rc = write(fd, text, n) == (ssize_t)n ? 0 : -errno;
	close(fd);
	return rc;
}

/* Take the job's identity: no supplementary groups (a root supervisor's would be root's),
 * then the gid and uid.  Inside a user namespace whose maps the supervisor wrote, the
 * capabilities in the namespace stay (its root is not mapped), so the root can still be built;
 * they go at execve.  A change of ids clears the parent-death signal: set it again. */
static int become(const struct sandbox_job *sj, char *msg, size_t msglen)
{
	if (setgroups(0, NULL) < 0 && errno != EPERM) {
		sandbox_msg(msg, msglen, "setgroups", NULL);
		return -errno;
	}
	if (setresgid(sj->set_gid, sj->set_gid, sj->set_gid) < 0 ||
	    setresuid(sj->set_uid, sj->set_uid, sj->set_uid) < 0) {
		sandbox_msg(msg, msglen, "taking the job's uid and gid", NULL);
		return -errno;
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
		sandbox_msg(msg, msglen, "pdeathsig", NULL);
		return -errno;
	}
	return 0;
}

/* The init of the job's PID namespace is a copy of the supervisor, and its /proc/1/cmdline
 * would show the supervisor's argv (config and state paths): overwrite our copy of the
 * argument and environment areas. */
static void hide_argv(const struct sandbox *sb)
{
	static const char name[] = "forkpoint-init";
	if (sb->arg_start && sb->arg_end > sb->arg_start + sizeof name) {
		memset((void *)sb->arg_start, 0, sb->arg_end - sb->arg_start);
		memcpy((void *)sb->arg_start, name, sizeof name);
	}
	if (sb->env_start && sb->env_end > sb->env_start)
		memset((void *)sb->env_start, 0, sb->env_end - sb->env_start);
}

/* The steps that need the supervisor's view of the host come first (id maps, cgroup, opening
 * the bind sources), then the switch to the job's ids, then the new root, which cuts the
 * host off.  Each step reports one line and returns -errno; the caller sends it up the exec
 * pipe. */
int sandbox_child_enter(const struct sandbox_job *sj, char *msg, size_t msglen)
{
	int rc;
	if ((sj->flags & CLONE_NEWUSER) && !sj->parent_maps) {
		/* The supervisor is not dumpable, and a non-dumpable process's /proc files belong
		 * to root, so an unprivileged copy of it could not write its own maps: be dumpable
		 * just for that.  Unprivileged maps are one line of our own ids, and setgroups
		 * must be denied first. */
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
		if ((rc = write_proc("/proc/self/setgroups", "deny")) < 0 ||
		    (rc = write_proc("/proc/self/gid_map", sj->gid_map)) < 0 ||
		    (rc = write_proc("/proc/self/uid_map", sj->uid_map)) < 0) {
			sandbox_msg(msg, msglen, "user namespace id maps", NULL);
			return rc;
		}
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	}
	if ((rc = cg_job_enter(sj->cg)) < 0) {
		sandbox_msg(msg, msglen, "joining the job's cgroup", NULL);
		return rc;
	}
	/* The sources are opened with the supervisor's own rights to walk the host's paths;
	 * everything after, as the job. */
	if (sj->fs && (rc = fs_plan_open(sj->fs, msg, msglen)) < 0)
		return rc;
	if (sj->set_ids && (rc = become(sj, msg, msglen)) < 0)
		return rc;
	if (sj->flags & CLONE_NEWPID)
		hide_argv(sj->sb);
	if (sj->fs && (rc = fs_plan_build(sj->fs, msg, msglen)) < 0)
		return rc;
	if ((sj->flags & CLONE_NEWUTS) && sethostname(HOSTNAME, sizeof HOSTNAME - 1) < 0) {
		sandbox_msg(msg, msglen, "sethostname", NULL);
		return -errno;
	}
	return 0;
}

/* The restrictions that would also bind the supervisor's own code in this child come last,
 * just before execve: rlimits, no_new_privs, Landlock, then seccomp, which must be the final
 * step because its filter may refuse the calls the earlier steps make. */
int sandbox_child_exec(const struct sandbox_job *sj, char *msg, size_t msglen)
{
	int rc;
	if (sj->profile == P_NONE)
		return 0;
	for (size_t i = 0; i < sj->n_rl; i++) {
		if (setrlimit((__rlimit_resource_t)sj->rl[i].resource, &sj->rl[i].lim) < 0) {
			sandbox_msg(msg, msglen, "setrlimit", NULL);
			return -errno;
		}
	}
	/* Needed for Landlock and an unprivileged seccomp filter, and it makes setuid and file
	 * capabilities inert. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		sandbox_msg(msg, msglen, "no_new_privs", NULL);
		return -errno;
	}
	if (sj->ll_abi > 0 &&
	    (rc = landlock_apply(sj->ll_abi, sj->ll, sj->n_ll, !sj->network, 1, msg, msglen)) < 0)
		return rc;
	/* Last: from here on only execve, which the filter allows. */
	if (sj->filter && (rc = sc_load(sj->filter)) < 0) {
		sandbox_msg(msg, msglen, "seccomp filter", NULL);
		return rc;
	}
	return 0;
}

unsigned long long sandbox_job_clone_flags(const struct sandbox_job *sj)
{
	return sj->flags;
}

int sandbox_job_blanks(const struct sandbox_job *sj, const void *p)
{
	const struct sandbox *sb = sj->sb;
	unsigned long a = (unsigned long)p;
	if (!(sj->flags & CLONE_NEWPID) || !p)
		return 0;
	return (sb->arg_start && a >= sb->arg_start && a < sb->arg_end) ||
	       (sb->env_start && a >= sb->env_start && a < sb->env_end);
}

int sandbox_job_parent_maps(const struct sandbox_job *sj)
{
	return sj->parent_maps;
}

/* A root supervisor writes the maps from outside (see release in spawn.c): the child alone
 * could map only uid 0 (sandbox.h). */
static int write_map(pid_t pid, const char *file, const char *text)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	return write_proc(path, text);
}

int sandbox_job_write_maps(const struct sandbox_job *sj, pid_t pid, char *err, size_t errlen)
{
	int rc;
	/* setgroups stays allowed: the child drops root's supplementary groups itself. */
	if ((rc = write_map(pid, "gid_map", sj->gid_map)) < 0 ||
	    (rc = write_map(pid, "uid_map", sj->uid_map)) < 0)
		snprintf(err, errlen, "writing the job's user namespace id maps: %s", strerror(-rc));
	return rc;
}

int sandbox_job_cgroup_fd(const struct sandbox_job *sj)
{
	return cg_job_dirfd(sj->cg);
}

int sandbox_job_pidns(const struct sandbox_job *sj)
{
	return (sj->flags & CLONE_NEWPID) != 0;
}

int sandbox_job_trusted(const struct sandbox_job *sj)
{
	return sj->profile == P_NONE;
}

/* ---- probing the host -------------------------------------------------------------------- */

/* Run a trial jail: clone into the namespaces, build a root (with /usr and maybe /proc),
 * load the default filter, exit.  0, or -errno with the failing step in msg. */
static int trial(struct sandbox *sb, unsigned long long flags, int root, int proc, int filter,
                 char *msg, size_t msglen)
{
	struct sandbox_job sj;
	int p[2] = { -1, -1 }, pidfd = -1, rc = 0;
	char err[256] = "";
	memset(&sj, 0, sizeof sj);
	sj.sb = sb;
	sj.profile = P_DEFAULT;
	sj.flags = flags;
	snprintf(sj.uid_map, sizeof sj.uid_map, "%u %u 1\n", (unsigned)sb->in_uid, (unsigned)sb->uid);
	snprintf(sj.gid_map, sizeof sj.gid_map, "%u %u 1\n", (unsigned)sb->in_gid, (unsigned)sb->gid);
	sj.set_uid = sb->in_uid;
	sj.set_gid = sb->in_gid;
	if (root) {
		if ((rc = fs_plan_new(&sj.fs)) < 0 ||
		    (rc = fs_plan_view(sj.fs, "/usr", FS_RO, 0, err, sizeof err)) < 0 ||
		    (proc && (rc = fs_plan_proc(sj.fs, "/proc")) < 0) ||
		    (rc = fs_plan_finish(sj.fs, err, sizeof err)) < 0) {
			sandbox_msg(msg, msglen, "planning a root: ", err);
			goto out;
		}
	}
	if (filter && !(sj.filter = get_filter(sb, 0, 0, (flags & CLONE_NEWPID) != 0, 0, err, sizeof err))) {
		rc = -EINVAL;
		sandbox_msg(msg, msglen, err, NULL);
		goto out;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		rc = -errno;
		goto out;
	}
	pid_t pid = spawn_clone(flags, -1, &pidfd);
	if (pid < 0) {
		rc = pid;
		sandbox_msg(msg, msglen, "clone3", NULL);
		goto out;
	}
	if (pid == 0) {
		char m[200] = "";
		int r = sandbox_child_enter(&sj, m, sizeof m);
		if (r == 0 && sj.filter) {
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
				r = -errno;
			else
				r = sc_load(sj.filter);
			if (r < 0)
				sandbox_msg(m, sizeof m, "loading the seccomp filter", NULL);
		}
		if (r < 0) {
			int e = -r;
			(void)!write(p[1], &e, sizeof e);
			(void)!write(p[1], m, strlen(m));
		}
		_exit(r < 0 ? 1 : 0);
	}
	close(p[1]);
	p[1] = -1;
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	int e = 0;
	char m[200] = "";
	if (read(p[0], &e, sizeof e) == (ssize_t)sizeof e) {
		ssize_t n = read(p[0], m, sizeof m - 1);
		m[n > 0 ? n : 0] = 0;
		rc = -e;
		sandbox_msg(msg, msglen, m, NULL);
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		rc = -ECHILD;
		sandbox_msg(msg, msglen, "the trial child died", NULL);
	}
out:
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	if (pidfd >= 0)
		close(pidfd);
	fs_plan_free(sj.fs);
	return rc;
}

/* The probe runs the real child steps in a throwaway child, mechanism by mechanism, instead
 * of reading version numbers: what this kernel, its configuration and any outer sandbox (a
 * container, a seccomp policy) actually allow is the only truth. */
static void probe(struct sandbox *sb)
{
	char msg[200] = "";
	int rc;

	/* Seccomp on its own first (a plain child loads the default filter), then the
	 * namespaces, then a whole root in them. */
	rc = trial(sb, 0, 0, 0, 1, msg, sizeof msg);
	sb->seccomp = rc == 0;
	if (rc < 0)
		snprintf(sb->seccomp_note, sizeof sb->seccomp_note, "%s: %s", msg, strerror(-rc));

	static const unsigned long long tries[] = {
		ALL_NS, ALL_NS & ~(unsigned long long)CLONE_NEWNET,
	};
	for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
		rc = trial(sb, tries[i], 0, 0, 0, msg, sizeof msg);
		if (rc == 0) {
			sb->ns_flags = tries[i];
			break;
		}
		if (i == 0)
			snprintf(sb->ns_note, sizeof sb->ns_note, "%s: %s", msg, strerror(-rc));
	}
	if (!sb->ns_flags)
		return;
	if (!(sb->ns_flags & CLONE_NEWNET))
		snprintf(sb->ns_note + strlen(sb->ns_note), sizeof sb->ns_note - strlen(sb->ns_note),
		         " (network namespace refused; other namespaces work)");
	else
		sb->ns_note[0] = 0;
	rc = trial(sb, sb->ns_flags, 1, 1, 0, msg, sizeof msg);
	if (rc == 0) {
		sb->private_root = sb->proc = 1;
		return;
	}
	snprintf(sb->fs_note, sizeof sb->fs_note, "%s: %s", msg, strerror(-rc));
	rc = trial(sb, sb->ns_flags, 1, 0, 0, msg, sizeof msg);
	sb->private_root = rc == 0;
}

/* Where our argv and environ strings live (fields 48-51 of /proc/self/stat), so that a
 * jail's init can blank its copy of them. */
static void find_argv(struct sandbox *sb)
{
	char buf[2048];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	/* The command name (field 2) may hold spaces: count from its closing parenthesis. */
	char *p = strrchr(buf, ')');
	unsigned long v[4];
	for (int field = 2, k = 0; p && *p && k < 4; ) {
		p = strchr(p, ' ');
		if (!p)
			return;
		p++;
		field++;
		if (field >= 48 && field <= 51)
			v[k++] = strtoul(p, NULL, 10);
		if (k == 4) {
			sb->arg_start = v[0];
			sb->arg_end = v[1];
			sb->env_start = v[2];
			sb->env_end = v[3];
		}
	}
}

int sandbox_new(struct sandbox **out)
{
	struct sandbox *sb = calloc(1, sizeof *sb);
	if (!sb)
		return -ENOMEM;
	sb->pid = getpid();
	sb->uid = geteuid();
	sb->gid = getegid();
	/* Inside, the job is never uid 0: an exec as non-root drops every capability the first
	 * process of a user namespace starts with. */
	sb->in_uid = sb->uid ? sb->uid : 1000;
	sb->in_gid = sb->gid ? sb->gid : 1000;
	/* A root supervisor never lends its own identity: by default its jobs are nobody. */
	struct passwd *pw = getpwnam("nobody");
	sb->nobody_uid = pw ? pw->pw_uid : 65534;
	sb->nobody_gid = pw ? pw->pw_gid : 65534;
	find_argv(sb);
	sb->landlock_abi = landlock_abi();
	/* For testing the weaker boxes on a host that has everything. */
	const char *off = getenv("FORKPOINT_SANDBOX_DISABLE");
	if (off && strstr(off, "landlock") && sb->landlock_abi) {
		sb->landlock_abi = 0;
		snprintf(sb->ll_note, sizeof sb->ll_note, "disabled by FORKPOINT_SANDBOX_DISABLE");
	}
	int rc = cg_host_new(&sb->cg);
	if (rc < 0) {
		free(sb);
		return rc;
	}
	probe(sb);
	*out = sb;
	return 0;
}

void sandbox_free(struct sandbox *sb)
{
	if (!sb)
		return;
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++)
			for (int c = 0; c < 2; c++)
				for (int d = 0; d < 2; d++)
					sc_free(&sb->filters[a][b][c][d].prog);
	cg_host_free(sb->cg);
	free(sb);
}

static const char *landlock_words(int abi)
{
	if (abi >= 6)
		return "filesystem, TCP, signal and abstract-socket scoping";
	if (abi >= 4)
		return "filesystem and TCP; no signal scoping (needs ABI 6)";
	if (abi >= 1)
		return "filesystem only; no TCP rules (ABI 4) or signal scoping (ABI 6)";
	return "not available";
}

char *sandbox_host_report(const struct sandbox *sb)
{
	struct cg_caps c;
	char *out = NULL;
	cg_host_caps(sb->cg, &c);
	static const struct { unsigned long long f; const char *n; } names[] = {
		{ CLONE_NEWUSER, "user" }, { CLONE_NEWPID, "pid" }, { CLONE_NEWNS, "mount" },
		{ CLONE_NEWNET, "net" }, { CLONE_NEWIPC, "ipc" }, { CLONE_NEWUTS, "uts" },
	};
	char ns[128] = "";
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (sb->ns_flags & names[i].f)
			snprintf(ns + strlen(ns), sizeof ns - strlen(ns), "%s%s", ns[0] ? " " : "", names[i].n);
	const char *nproc = !(sb->ns_flags & CLONE_NEWUSER) ? "not applied (no user namespace)"
	                  : "per job (own user namespace)";
	char who[160];
	if (sb->uid == 0)
		snprintf(who, sizeof who, "uid %u inside their namespace, host uid server.jobUser "
		         "(default %u:%u, nobody)", (unsigned)sb->in_uid, (unsigned)sb->nobody_uid,
		         (unsigned)sb->nobody_gid);
	else
		snprintf(who, sizeof who, "uid %u inside their namespace, our own uid on the host",
		         (unsigned)sb->in_uid);
	if (asprintf(&out,
	             "running as:        uid %u, gid %u (jobs run as %s)\n"
	             "namespaces:        %s%s%s\n"
	             "private root:      %s%s%s\n"
	             "/proc in the jail: %s\n"
	             "landlock:          ABI %d (%s%s%s)\n"
	             "seccomp:           %s%s%s (libseccomp %u.%u.%u)\n"
	             "cgroup:            %s; memory limit %s, process limit %s, cgroup.kill %s%s%s\n"
	             "rlimits:           yes; RLIMIT_NPROC %s\n"
	             "profiles:          default%s, strict%s, none (trusted, unconfined)\n",
	             (unsigned)sb->uid, (unsigned)sb->gid, who,
	             ns[0] ? ns : "none", sb->ns_note[0] ? " — " : "", sb->ns_note,
	             sb->private_root ? "yes (tmpfs + pivot_root)" : "no", sb->fs_note[0] ? " — " : "",
	             sb->fs_note,
	             sb->proc ? "yes (own PID namespace)" : "no",
	             sb->landlock_abi, landlock_words(sb->landlock_abi), sb->ll_note[0] ? ": " : "",
	             sb->ll_note,
	             sb->seccomp ? "yes" : "no", sb->seccomp_note[0] ? " — " : "", sb->seccomp_note,
	             seccomp_version()->major, seccomp_version()->minor, seccomp_version()->micro,
	             c.version == 2 ? "v2" : c.version == 1 ? "v1" : "none",
	             c.memory ? "yes" : "no", c.pids ? "yes" : "no", c.kill ? "yes" : "no",
	             cg_host_note(sb->cg)[0] ? " — " : "", cg_host_note(sb->cg),
	             nproc,
	             (sb->ns_flags && sb->private_root && sb->seccomp && sb->landlock_abi) ? "" : " (degraded)",
	             sb->seccomp ? "" : " (degraded: no seccomp)") < 0)
		return NULL;
	return out;
}

int sandbox_host_summary(const struct sandbox *sb, char *buf, size_t len)
{
	struct cg_caps c;
	cg_host_caps(sb->cg, &c);
	int full = (sb->ns_flags & ALL_NS) == ALL_NS && sb->private_root && sb->proc &&
	           sb->landlock_abi >= 6 && sb->seccomp && c.memory && c.pids;
	snprintf(buf, len, "sandbox: namespaces %s, private root %s, landlock ABI %d, seccomp %s, "
	         "cgroup %s (memory %s, pids %s, kill %s)%s",
	         (sb->ns_flags & ALL_NS) == ALL_NS ? "all" : sb->ns_flags ? "some" : "none",
	         sb->private_root ? "yes" : "no", sb->landlock_abi, sb->seccomp ? "yes" : "no",
	         c.version == 2 ? "v2" : c.version == 1 ? "v1" : "none", c.memory ? "yes" : "no",
	         c.pids ? "yes" : "no", c.kill ? "yes" : "no",
	         full ? "" : "; degraded, see forkpoint sandbox-check");
	return !full;
}

/* ---- planning one job ------------------------------------------------------------------- */

static void note(cJSON *arr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* System files every dynamically linked program or shell script needs, read-only. */
static const char *const sys_paths[] = {
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ld.so.cache", "/etc/alternatives", "/etc/passwd", "/etc/group",
	"/etc/nsswitch.conf", "/etc/localtime", "/etc/hosts", NULL,
};
/* Only with network access: name resolution and certificates. */
static const char *const net_paths[] = {
	"/etc/resolv.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/gai.conf", "/etc/services",
	"/etc/protocols", NULL,
};
static const char *const dev_nodes[] = {
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", NULL,
};

/* Landlock rules mirror the binds, so a host without a private root (Landlock alone) still
 * limits the job to the same paths. */
static int add_rule(struct sandbox_job *sj, const char *path, enum ll_access a)
{
	struct ll_rule *r = realloc(sj->ll, (sj->n_ll + 1) * sizeof *r);
	if (!r)
		return -ENOMEM;
	sj->ll = r;
	if (!(r[sj->n_ll].path = strdup(path)))
		return -ENOMEM;
	r[sj->n_ll].access = a;
	sj->n_ll++;
	return 0;
}

/* One path the job may use: in the private root (if any) and in the Landlock rules. */
static int expose(struct sandbox_job *sj, const char *path, enum fs_mode m, int required,
                  char *err, size_t errlen)
{
	int rc;
	if (sj->fs && (rc = fs_plan_view(sj->fs, path, m, required, err, errlen)) < 0)
		return rc;
	if (!sj->fs && required && access(path, F_OK) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	/* In a private root everything visible may be read (one rule for "/" covers it);
	 * on the host each path needs its own rule. */
	if (sj->fs && m == FS_RO)
		return 0;
	enum ll_access a = m == FS_RW ? LL_WRITE : m == FS_DEV ? LL_DEVICE : LL_EXEC;
	if ((rc = add_rule(sj, path, a)) < 0)
		snprintf(err, errlen, "out of memory");
	return rc;
}

/* What container runtimes hide of /proc: global kernel knobs read-only, kernel memory, keys,
 * timers and scheduler internals empty. */
static int plan_masks(struct fs_plan *fs)
{
	static const char *const ro[] = {
		"/proc/sys", "/proc/sysrq-trigger", "/proc/bus", "/proc/fs", "/proc/irq", NULL,
	};
	static const char *const empty[] = {
		"/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list", "/proc/timer_stats",
		"/proc/sched_debug", "/proc/latency_stats", "/proc/kallsyms", "/proc/vmallocinfo",
		"/proc/slabinfo", "/proc/acpi", "/proc/scsi", "/proc/asound", NULL,
	};
	int rc = 0;
	for (size_t i = 0; rc == 0 && ro[i]; i++)
		rc = fs_plan_mask(fs, ro[i], FS_MASK_RO);
	for (size_t i = 0; rc == 0 && empty[i]; i++)
		rc = fs_plan_mask(fs, empty[i], FS_MASK_EMPTY);
	return rc;
}

/* What a job can see: the system's read-only paths, the program and the helper, its work
 * folder (the only writable place of its own), its cwd, and the tool's declared read and
 * write paths.  With a private root also private /tmp and /dev/shm (tmpfs of a bounded size:
 * RLIMIT_AS does not count their pages where no memory cgroup does) and a masked /proc. */
static int plan_paths(struct sandbox_job *sj, const struct sandbox_policy *cfg,
                      const struct sandbox_paths *paths, char *err, size_t errlen)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && sys_paths[i]; i++)
		rc = expose(sj, sys_paths[i], FS_RO, 0, err, errlen);
	for (size_t i = 0; rc == 0 && sj->network && net_paths[i]; i++)
		rc = expose(sj, net_paths[i], FS_RO, 0, err, errlen);
	for (size_t i = 0; rc == 0 && dev_nodes[i]; i++)
		rc = expose(sj, dev_nodes[i], FS_DEV, 0, err, errlen);
	if (rc == 0)
		rc = expose(sj, paths->program, FS_RO, 1, err, errlen);
	if (rc == 0 && paths->helper)
		rc = expose(sj, paths->helper, FS_RO, 0, err, errlen);
	if (rc == 0)
		rc = expose(sj, paths->work_dir, FS_RW, 1, err, errlen);
	if (rc == 0 && paths->cwd && strcmp(paths->cwd, paths->work_dir) != 0)
		rc = expose(sj, paths->cwd, FS_RO, 1, err, errlen);
	for (size_t i = 0; rc == 0 && i < cfg->n_read_paths; i++)
		rc = expose(sj, cfg->read_paths[i], FS_RO, 0, err, errlen);
	for (size_t i = 0; rc == 0 && i < cfg->n_write_paths; i++)
		rc = expose(sj, cfg->write_paths[i], FS_RW, 0, err, errlen);
	if (rc < 0)
		return rc;
	if (sj->fs) {
		long long tmp = (long long)SB_DEFAULT_TMP_MB << 20;
		if ((rc = fs_plan_tmpfs(sj->fs, "/tmp", tmp)) < 0 ||
		    (rc = fs_plan_tmpfs(sj->fs, "/dev/shm", tmp)) < 0 ||
		    (sj->sb->proc && (rc = fs_plan_proc(sj->fs, "/proc")) < 0) ||
		    (sj->sb->proc && (rc = plan_masks(sj->fs)) < 0) ||
		    (rc = fs_plan_symlink(sj->fs, "/dev/fd", "/proc/self/fd")) < 0 ||
		    (rc = fs_plan_symlink(sj->fs, "/dev/stdin", "/proc/self/fd/0")) < 0 ||
		    (rc = fs_plan_symlink(sj->fs, "/dev/stdout", "/proc/self/fd/1")) < 0 ||
		    (rc = fs_plan_symlink(sj->fs, "/dev/stderr", "/proc/self/fd/2")) < 0 ||
		    (rc = add_rule(sj, "/tmp", LL_WRITE)) < 0 ||
		    (rc = add_rule(sj, "/dev/shm", LL_WRITE)) < 0) {
			snprintf(err, errlen, "out of memory");
			return rc;
		}
		if ((rc = fs_plan_finish(sj->fs, err, errlen)) < 0)
			return rc;
	}
	/* With its own /proc the job sees only itself; without, Landlock still has to let the
	 * C library and shells read /proc/self. */
	if ((rc = add_rule(sj, sj->fs ? "/" : "/proc", sj->fs ? LL_EXEC : LL_READ)) < 0)
		snprintf(err, errlen, "out of memory");
	return rc;
}

/* At most MAX_RLIMITS are kept (a fixed array: the child applies them after fork without
 * allocating). */
static void add_rlimit(struct sandbox_job *sj, int res, rlim_t soft, rlim_t hard)
{
	struct rlimit cur;
	/* A limit can only go down: clamp to what we have, so setrlimit cannot fail. */
	if (getrlimit((__rlimit_resource_t)res, &cur) == 0) {
		if (cur.rlim_max != RLIM_INFINITY && (hard == RLIM_INFINITY || hard > cur.rlim_max))
			hard = cur.rlim_max;
	}
	if (soft > hard)
		soft = hard;
	if (sj->n_rl < MAX_RLIMITS) {
		sj->rl[sj->n_rl].resource = res;
		sj->rl[sj->n_rl].lim.rlim_cur = soft;
		sj->rl[sj->n_rl].lim.rlim_max = hard;
		sj->n_rl++;
	}
}

/* No core dumps: a job's memory may hold arguments and secrets, and a core file would land in
 * its folder or wherever core_pattern says. */
static void plan_rlimits(struct sandbox_job *sj)
{
	rlim_t mb = 1ULL << 20;
	add_rlimit(sj, RLIMIT_CORE, 0, 0);
	/* Soft: SIGXCPU, which names the limit; hard a little later in case it is caught. */
	add_rlimit(sj, RLIMIT_CPU, (rlim_t)sj->cpu_seconds, (rlim_t)sj->cpu_seconds + 2);
	add_rlimit(sj, RLIMIT_FSIZE, (rlim_t)sj->file_mb * mb, (rlim_t)sj->file_mb * mb);
	add_rlimit(sj, RLIMIT_NOFILE, SB_DEFAULT_OPEN_FILES, SB_DEFAULT_OPEN_FILES);
	/* Address space is only a backstop: it also counts reservations that are never
	 * touched, so it is used when no memory cgroup can do the real job. */
	if (!sj->cgc.memory)
		add_rlimit(sj, RLIMIT_AS, (rlim_t)sj->memory_mb * mb, (rlim_t)sj->memory_mb * mb);
	/* In the job's own user namespace the count covers this job only (+1 for its init). */
	if (!sj->cgc.pids && (sj->flags & CLONE_NEWUSER) && sj->host_uid != 0)
		add_rlimit(sj, RLIMIT_NPROC, (rlim_t)sj->processes + 1, (rlim_t)sj->processes + 1);
}

/* Hand what the supervisor made in the work dir to the job's uid, so the job can use it as its
 * own: the dir itself and the files it placed there (large arguments), inputs/ and outputs/
 * and what the supervisor placed in them (an input
 * placed for a retry lands in a folder the first attempt already owns).  Only entries we own
 * are changed, nothing is followed, and at most a few thousand entries per folder are looked
 * at: whatever an earlier attempt left is the job's already. */
static int give_tree(int dirfd, uid_t us, uid_t uid, gid_t gid, int depth)
{
	struct stat st;
	int rc = 0, seen = 0;
	if (fstat(dirfd, &st) < 0)
		return -errno;
	if (st.st_uid == us && fchown(dirfd, uid, gid) < 0)
		return -errno;
	int d = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	if (!dir) {
		rc = -errno;
		if (d >= 0)
			close(d);
		return rc;
	}
	struct dirent *e;
	while (rc == 0 && seen++ < 4096 && (e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		/* Of the folders at the top, only those the supervisor makes are walked. */
		if (depth == 0 && S_ISDIR(st.st_mode) && strcmp(e->d_name, "inputs") != 0 &&
		    strcmp(e->d_name, "outputs") != 0)
			continue;
		if (S_ISDIR(st.st_mode) && depth < 3) {
			int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				rc = give_tree(sub, us, uid, gid, depth + 1);
				close(sub);
			}
		} else if (S_ISREG(st.st_mode) && st.st_uid == us &&
		           fchownat(dirfd, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = -errno;
		}
	}
	closedir(dir);
	return rc;
}

/* The job's identity.  An unprivileged supervisor's jobs are its own uid (mapped to in_uid
 * in their namespace); a root supervisor's run as jobUser (default nobody/nogroup) and never
 * as host root: the supervisor writes the maps, the child takes the ids. */
static int plan_identity(struct sandbox_job *sj, const struct sandbox_paths *paths,
                         char *err, size_t errlen)
{
	struct sandbox *sb = sj->sb;
	sj->host_uid = sb->uid;
	sj->host_gid = sb->gid;
	if (sb->uid == 0) {
		sj->host_uid = paths->job_uid > 0 ? (uid_t)paths->job_uid : sb->nobody_uid;
		sj->host_gid = paths->job_gid > 0 ? (gid_t)paths->job_gid : sb->nobody_gid;
	}
	snprintf(sj->uid_map, sizeof sj->uid_map, "%u %u 1\n", (unsigned)sb->in_uid, (unsigned)sj->host_uid);
	snprintf(sj->gid_map, sizeof sj->gid_map, "%u %u 1\n", (unsigned)sb->in_gid, (unsigned)sj->host_gid);
	if (sj->host_uid == sb->uid && sj->host_gid == sb->gid)
		return 0;
	sj->set_ids = 1;
	if (sj->flags & CLONE_NEWUSER) {
		sj->parent_maps = 1;
		sj->set_uid = sb->in_uid;
		sj->set_gid = sb->in_gid;
	} else {
		sj->set_uid = sj->host_uid;
		sj->set_gid = sj->host_gid;
	}
	int fd = open(paths->work_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = fd < 0 ? -errno : give_tree(fd, sb->uid, sj->host_uid, sj->host_gid, 0);
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		snprintf(err, errlen, "handing the work dir %s to uid %u: %s", paths->work_dir,
		         (unsigned)sj->host_uid, strerror(-rc));
	return rc;
}

/* The job's cgroup, and what stands in for the parts of it this host lacks.  RLIMIT_AS does
 * not count memfd or System V shm pages: where no memory cgroup counts them, the filter
 * refuses them (tmpfs /tmp and /dev/shm have their own size). */
static void plan_cgroup(struct sandbox_job *sj, const struct sandbox_paths *paths, cJSON *degraded)
{
	struct sandbox *sb = sj->sb;
	struct cg_caps hc;
	cg_host_caps(sb->cg, &hc);
	int rc = cg_job_new(sb->cg, paths->name, (long long)sj->memory_mb << 20, sj->processes + 1, &sj->cg);
	if (rc < 0)
		note(degraded, "cgroup: cannot create the job's cgroup: %s", strerror(-rc));
	if (sj->cg)
		sj->cgc = hc;
	sj->no_shm = !sj->cgc.memory;
	if (!sj->cgc.memory)
		note(degraded, "no memory cgroup (%s): memoryMB enforced as an address-space rlimit%s",
		     cg_host_note(sb->cg)[0] ? cg_host_note(sb->cg) : "none usable",
		     sb->seccomp ? ", with memfd_create and System V shared memory refused"
		     : "; memfd and System V shared memory are NOT bounded (no seccomp)");
	if (!sj->cgc.pids)
		note(degraded, "no pids cgroup: maxProcesses %s",
		     !(sj->flags & CLONE_NEWUSER) ? "not enforced (RLIMIT_NPROC would count all our processes)"
		     : sj->host_uid == 0 ? "not enforced (RLIMIT_NPROC does not apply to root)"
		     : "enforced as RLIMIT_NPROC in the job's user namespace");
}

/* What Landlock's absence leaves, each part named with what takes its place. */
static void landlock_notes(struct sandbox_job *sj, cJSON *degraded)
{
	const char *why = sj->sb->ll_note[0] ? sj->sb->ll_note : "not in this kernel";
	if (!sj->ll_abi) {
		note(degraded, "no Landlock (%s): files limited by %s", why,
		     sj->fs ? "the private root and the job's own uid only" : "nothing but the job's uid");
		if (!sj->network)
			note(degraded, "no Landlock TCP rules: TCP blocked by %s",
			     (sj->flags & CLONE_NEWNET) ? "the network namespace" : "the seccomp filter only");
		note(degraded, "no Landlock signal scoping: %s",
		     (sj->flags & CLONE_NEWPID) ? "the PID namespace hides every other process"
		     : "signals to the supervisor are refused by the seccomp filter only");
	} else if (sj->ll_abi < 4 && !sj->network) {
		note(degraded, "Landlock ABI %d: no TCP rules", sj->ll_abi);
	} else if (sj->ll_abi < 6 && !(sj->flags & CLONE_NEWPID)) {
		note(degraded, "Landlock ABI %d: no signal scoping", sj->ll_abi);
	}
}

/* "namespaces" means the full set that isolates a job (user, pid, mount and a private root):
 * a partial set would let a tool that requires it run with much less than it declared. */
static int require_met(const struct sandbox_job *sj, const char *mech)
{
	if (strcmp(mech, "namespaces") == 0)
		return (sj->flags & (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS)) ==
		       (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) && sj->fs != NULL;
	if (strcmp(mech, "seccomp") == 0)
		return sj->filter != NULL;
	if (strcmp(mech, "landlock") == 0)
		return sj->ll_abi > 0;
	if (strcmp(mech, "cgroup") == 0)
		return sj->cgc.memory && sj->cgc.pids;
	if (strcmp(mech, "rlimits") == 0)
		return sj->profile != P_NONE;
	return 0;
}

static void describe(struct sandbox_job *sj, cJSON *degraded)
{
	cJSON *o = cJSON_CreateObject();
	static const struct { unsigned long long f; const char *n; } names[] = {
		{ CLONE_NEWUSER, "user" }, { CLONE_NEWPID, "pid" }, { CLONE_NEWNS, "mount" },
		{ CLONE_NEWNET, "net" }, { CLONE_NEWIPC, "ipc" }, { CLONE_NEWUTS, "uts" },
	};
	static const char *const pnames[] = { "none", "default", "strict" };
	if (!o)
		return;
	cJSON_AddStringToObject(o, "profile", pnames[sj->profile]);
	cJSON *ns = cJSON_AddArrayToObject(o, "namespaces");
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (sj->flags & names[i].f)
			cJSON_AddItemToArray(ns, cJSON_CreateString(names[i].n));
	cJSON_AddStringToObject(o, "filesystem", sj->fs ? "private root" : sj->ll_abi ? "host, Landlock rules" : "host");
	cJSON_AddNumberToObject(o, "landlock", sj->ll_abi);
	cJSON_AddStringToObject(o, "seccomp", !sj->filter ? "none" : sj->profile == P_STRICT ? "strict" : "default");
	cJSON_AddBoolToObject(o, "network", sj->network || sj->profile == P_NONE);
	cJSON_AddStringToObject(o, "cgroup", sj->cgc.version == 2 ? "v2" : sj->cgc.version == 1 ? "v1" : "none");
	cJSON_AddBoolToObject(o, "cgroupKill", sj->cgc.kill);
	cJSON_AddBoolToObject(o, "rlimits", sj->profile != P_NONE);
	if (sj->profile != P_NONE) {
		cJSON_AddNumberToObject(o, "uid", (double)sj->host_uid);
		cJSON_AddNumberToObject(o, "gid", (double)sj->host_gid);
		cJSON_AddStringToObject(o, "memoryLimit", sj->cgc.memory
		    ? (sj->cgc.version == 2 ? "cgroup v2 memory.max" : "cgroup v1 memory.limit_in_bytes")
		    : sj->filter ? "RLIMIT_AS; memfd_create and System V shm refused; /tmp and /dev/shm tmpfs"
		    : "RLIMIT_AS only (memfd and System V shm not bounded)");
	}
	if (sj->profile != P_NONE) {
		cJSON *l = cJSON_AddObjectToObject(o, "limits");
		cJSON_AddNumberToObject(l, "memoryMB", (double)sj->memory_mb);
		cJSON_AddNumberToObject(l, "cpuSeconds", (double)sj->cpu_seconds);
		cJSON_AddNumberToObject(l, "maxProcesses", (double)sj->processes);
		cJSON_AddNumberToObject(l, "maxFileMB", (double)sj->file_mb);
		cJSON_AddNumberToObject(l, "openFiles", SB_DEFAULT_OPEN_FILES);
		if (sj->fs)
			cJSON_AddNumberToObject(l, "tmpMB", SB_DEFAULT_TMP_MB);
	}
	cJSON_AddItemToObject(o, "degraded", degraded);
	sj->json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
}

static void note(cJSON *arr, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	cJSON_AddItemToArray(arr, cJSON_CreateString(buf));
}

/* Namespaces, the job's identity and the private root: what the host offers, minus the net
 * namespace when the tool asked for the network.  Each mechanism the host lacks becomes a
 * "degraded" note, so sandbox-check and the job's own record say how weak its confinement is
 * instead of pretending.  0 or -errno. */
static int plan_namespaces(struct sandbox_job *sj, const struct sandbox_paths *paths,
                           cJSON *degraded, char *err, size_t errlen)
{
	const struct sandbox *sb = sj->sb;
	int rc;
	sj->flags = sb->ns_flags;
	if (sj->network)
		sj->flags &= ~(unsigned long long)CLONE_NEWNET;
	if (!sb->ns_flags)
		note(degraded, "no namespaces (%s): no private filesystem view, no PID namespace, "
		     "no network namespace", sb->ns_note);
	else if (!sj->network && !(sb->ns_flags & CLONE_NEWNET))
		note(degraded, "no network namespace: network blocked by seccomp and Landlock only");
	if ((rc = plan_identity(sj, paths, err, errlen)) < 0)
		return rc;
	if (sj->flags && sb->private_root) {
		if ((rc = fs_plan_new(&sj->fs)) < 0) {
			snprintf(err, errlen, "out of memory");
			return rc;
		}
		if (!sb->proc)
			note(degraded, "no /proc inside the sandbox (%s)", sb->fs_note);
	} else if (sj->flags) {
		note(degraded, "no private root (%s): files limited by Landlock only", sb->fs_note);
	}
	return 0;
}

/* The seccomp filter is built last: which syscalls it refuses depends on the profile, the
 * network choice, whether a PID namespace exists and whether memfd and System V shm must be
 * refused (no_shm: no memory cgroup counts their pages, see plan_cgroup).  A host without seccomp, or a filter that cannot be
 * built, is a degraded note, not a failure; a tool that cannot run without it says so in
 * sandbox.require. */
static void plan_seccomp(struct sandbox_job *sj, cJSON *degraded)
{
	struct sandbox *sb = sj->sb;
	if (sb->seccomp) {
		char e[256] = "";
		sj->filter = get_filter(sb, sj->profile == P_STRICT, sj->network,
		                        (sj->flags & CLONE_NEWPID) != 0, sj->no_shm, e, sizeof e);
		if (!sj->filter)
			note(degraded, "seccomp: %s", e);
	} else {
		note(degraded, "no seccomp (%s)", sb->seccomp_note);
	}
}

/* A tool's sandbox.require turns a degraded mechanism into a refusal: the job does not start
 * with less confinement than its operator declared it needs.  0 or -ENOTSUP. */
static int check_required(const struct sandbox_job *sj, const struct sandbox_policy *cfg,
                          char *err, size_t errlen)
{
	for (size_t i = 0; i < cfg->n_require; i++) {
		if (!require_met(sj, cfg->require[i])) {
			snprintf(err, errlen, "the tool requires sandbox mechanism '%s', which %s",
			         cfg->require[i], sj->profile == P_NONE ? "profile none does not use"
			         : "this host cannot provide (forkpoint sandbox-check shows what it has)");
			return -ENOTSUP;
		}
	}
	return 0;
}

/* The plan is made whole here, before any fork: every choice the child will act on (and every
 * refusal) is settled while errors can still be reported as text, since the child can only
 * fail.  Order: limits, namespaces and identity, cgroup, rlimits, Landlock, paths, seccomp
 * last, because the filter depends on what the earlier steps chose. */
int sandbox_job_new(struct sandbox *sb, const struct sandbox_policy *cfg,
                    const struct sandbox_paths *paths, struct sandbox_job **out,
                    char *err, size_t errlen)
{
	struct sandbox_job *sj = calloc(1, sizeof *sj);
	cJSON *degraded = cJSON_CreateArray();
	int rc = 0;
	err[0] = 0;
	if (!sj || !degraded) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	sj->sb = sb;
	sj->profile = strcmp(cfg->profile, "none") == 0 ? P_NONE
	            : strcmp(cfg->profile, "strict") == 0 ? P_STRICT : P_DEFAULT;
	sj->network = cfg->network;
	if (sj->profile == P_NONE) {
		note(degraded, "profile none: the job runs unconfined, as a trusted program");
		goto check;
	}
	sj->memory_mb = cfg->memory_mb > 0 ? cfg->memory_mb : SB_DEFAULT_MEMORY_MB;
	sj->cpu_seconds = cfg->cpu_seconds > 0 ? cfg->cpu_seconds : SB_DEFAULT_CPU_SECONDS;
	sj->processes = cfg->max_processes > 0 ? cfg->max_processes : SB_DEFAULT_PROCESSES;
	sj->file_mb = cfg->max_file_mb > 0 ? cfg->max_file_mb : SB_DEFAULT_FILE_MB;

	if ((rc = plan_namespaces(sj, paths, degraded, err, errlen)) < 0)
		goto fail;

	plan_cgroup(sj, paths, degraded);
	if (!(sj->flags & CLONE_NEWPID) && !sj->cgc.kill)
		note(degraded, "no PID namespace or cgroup.kill: a job that leaves its session can "
		     "outlive cancel");

	plan_rlimits(sj);

	/* Landlock */
	sj->ll_abi = sb->landlock_abi;
	landlock_notes(sj, degraded);
	if (!sj->fs && !sj->ll_abi && !cfg->require) {
		/* Nothing would limit the files the job can reach: refuse, unless the tool's
		 * require list says what it can do without. */
		snprintf(err, errlen, "neither a private root nor Landlock is available, so the job "
		         "would reach every file its uid can; set the tool's sandbox.require to the "
		         "mechanisms it needs (e.g. [\"seccomp\"]) to run it anyway");
		rc = -ENOTSUP;
		goto fail;
	}
	if ((rc = plan_paths(sj, cfg, paths, err, errlen)) < 0)
		goto fail;

	plan_seccomp(sj, degraded);

check:
	if ((rc = check_required(sj, cfg, err, errlen)) < 0)
		goto fail;
	describe(sj, degraded);
	degraded = NULL;
	if (!sj->json) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	*out = sj;
	return 0;
fail:
	cJSON_Delete(degraded);
	sandbox_job_free(sj);
	return rc;
}

void sandbox_job_spawned(struct sandbox_job *sj)
{
	if (!sj)
		return;
	cg_job_spawned(sj->cg);
	fs_plan_free(sj->fs);
	sj->fs = NULL;
	for (size_t i = 0; i < sj->n_ll; i++)
		free((char *)sj->ll[i].path);
	free(sj->ll);
	sj->ll = NULL;
	sj->n_ll = 0;
}

void sandbox_job_free(struct sandbox_job *sj)
{
	if (!sj)
		return;
	sandbox_job_spawned(sj);
	cg_job_free(sj->cg);
	free(sj->json);
	free(sj);
}

const char *sandbox_job_json(const struct sandbox_job *sj)
{
	return sj->json;
}

int sandbox_job_kill(struct sandbox_job *sj)
{
	return cg_job_kill(sj->cg);
}

void sandbox_job_verdict(const struct sandbox_job *sj, int exited, int status, long long cpu_ms,
                         int filter_kill, struct sandbox_verdict *v)
{
	memset(v, 0, sizeof *v);
	if (sj->profile == P_NONE || (exited && status == 0))
		return;
	if (cg_job_oom(sj->cg)) {
		v->code = "resource_limit";
		v->limit = "memoryMB";
		v->value = sj->memory_mb;
		snprintf(v->message, sizeof v->message, "The job ran out of memory: it reached its "
		         "limit of %ld MB (sandbox.memoryMB) and was killed.", sj->memory_mb);
	} else if (!exited && (status == SIGXCPU ||
	           (status == SIGKILL && cpu_ms >= (long long)sj->cpu_seconds * 1000))) {
		v->code = "resource_limit";
		v->limit = "cpuSeconds";
		v->value = sj->cpu_seconds;
		snprintf(v->message, sizeof v->message, "The job used more than its %ld s of CPU time "
		         "(sandbox.cpuSeconds) and was killed.", sj->cpu_seconds);
	} else if (!exited && status == SIGXFSZ) {
		v->code = "resource_limit";
		v->limit = "maxFileMB";
		v->value = sj->file_mb;
		snprintf(v->message, sizeof v->message, "The job wrote a file larger than its limit of "
		         "%ld MB (sandbox.maxFileMB) and was killed.", sj->file_mb);
	} else if (!exited && status == SIGSYS && sj->filter && filter_kill != 0) {
		v->code = "sandbox_violation";
		snprintf(v->message, sizeof v->message, "The job made a system call that its sandbox "
		         "(profile %s) forbids, and was stopped.%s",
		         sj->profile == P_STRICT ? "strict" : "default", filter_kill < 0 ?
		         " (The job died of SIGSYS; without its own /proc the sandbox cannot confirm the "
		         "filter sent it.)" : "");
	}
}
