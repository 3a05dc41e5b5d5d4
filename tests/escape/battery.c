/* tests/escape/battery.c — the sandbox escape battery.  Every attempt in tests/escape/attempts
 * runs as a real job through the real supervisor (`forkpoint mcp`, driven over stdio here),
 * beside a well-behaved sibling task.  Each test asserts that the attempt failed the way it
 * should, that the supervisor still answers, that the sibling kept beating, that nothing of
 * the attempt outlived it, and that the task shows its effective sandbox.
 *
 *   battery --bin DIR --dir DIR [--label L] [--suid PATH] [--only NAME,...]
 *
 * --bin holds forkpoint, forkpoint-job and the attempt programs; --dir is a scratch folder this
 * user can write (config, state, canaries).  --suid names a setuid binary owned by another
 * user (run.sh makes one when it can).  An attempt the host cannot contain because a kernel
 * feature is missing, as the task's own sandbox record says, is skipped with the reason; one
 * that is contained anyway passes.  Prints "ok N - …", "not ok N - …", "skip N - …" lines and
 * last "P passed, F failed, S skipped".  Exit 0 if nothing failed. */
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/check.h"

/* ---- what to try ---------------------------------------------------------------------------- */

enum {
	A_CANCEL = 1,       /* cancel the task once it reports progress */
	A_COUNT = 2,        /* count its processes while it runs (max_procs) */
	A_TCP = 4,          /* nothing may have connected to the listener */
	A_HOSTFILES = 8,    /* none of the ';'-separated paths in arg may exist on the host */
	A_HOSTTMP = 16,     /* no file named after the marker may appear in the host's /tmp */
	A_SUID = 32,        /* needs the setuid probe */
	A_MEM = 64,         /* the supervisor's VmHWM and VmRSS grow by less than a bound */
	A_BLOBS = 128,      /* at most two 512 KiB checkpoint blobs are left in the state dir */
	A_STDERR = 256,     /* the supervisor's stderr grows by less than 16 KiB */
	A_CLEAN = 512,      /* the task as the client sees it has no job _meta and no file:// */
	A_QUICK = 1024,     /* ends within 5 s of its start, and ping then answers within 1 s */
	A_ARTS = 2048,      /* its one artifact is unchanged and its sha256 matches the bytes */
};

struct attempt {
	const char *name;      /* also the tool name */
	const char *prog;      /* in --bin */
	const char *arg;       /* template: {SVPID} {STATE} {STATEFILE} {CONFIG} {SECRET} {SCRATCH}
	                          {SIBWORK} {PORT} {SUID} {MARK} */
	const char *sandbox;   /* the tool's sandbox config, JSON */
	double timeout;
	const char *expect;    /* accepted outcomes: contained, completed, violation, limit:KEY,
	                          limit, timeout, protocol, cancelled, unmet */
	const char *needs;     /* what contains it (for a skip): seccomp, pidns, procs, landlock */
	int flags;
	int max_procs;
};

static const struct attempt attempts[] = {
	{ "fork_bomb", "fork_bomb", "", "{\"maxProcesses\":16}", 3, "timeout,limit", "procs", A_COUNT, 18 },
	{ "memory_bomb", "memory_bomb", "64", "{\"memoryMB\":64}", 30, "limit:memoryMB,contained", NULL, 0, 0 },
	{ "cpu_spin", "cpu_spin", "", "{\"cpuSeconds\":1}", 30, "limit:cpuSeconds", NULL, 0, 0 },
	{ "stop_self", "stop_self", "", "{}", 2, "timeout", NULL, 0, 0 },
	{ "disk_fill", "file_fill", "8", "{\"maxFileMB\":8}", 30, "limit:maxFileMB", NULL, 0, 0 },
	{ "tmp_fill", "tmp_fill", "64", "{}", 30, "contained", "pidns", A_HOSTTMP, 0 },
	{ "read_state_dir", "read_paths", "D={STATE}=tasks;D={STATE}/tasks=;F={STATE}/{STATEFILE}", "{}", 10,
	  "contained", "landlock", 0, 0 },
	{ "read_config", "read_paths", "F={CONFIG};F={SECRET}", "{}", 10, "contained", "landlock", 0, 0 },
	{ "read_other_task", "read_paths", "F={SIBWORK}/heartbeat;D={SIBWORK}=", "{}", 10, "contained", "landlock", 0, 0 },
	{ "read_shadow", "read_paths", "F=/etc/shadow;F=/etc/gshadow", "{}", 10, "contained", "landlock", 0, 0 },
	{ "write_outside", "write_paths",
	  "{STATE}/pwned-{MARK};{SCRATCH}/pwned-{MARK};{SIBWORK}/pwned-{MARK};/usr/pwned-{MARK};"
	  "/etc/pwned-{MARK};/tmp/pwned-{MARK}", "{}", 10, "contained", "landlock", A_HOSTFILES, 0 },
	{ "inherited_fds", "fd_scan", "", "{}", 10, "contained", NULL, 0, 0 },
	{ "kill_all", "kill_all", "", "{}", 10, "contained,violation", NULL, 0, 0 },
	{ "kill_supervisor", "kill_pid", "{SVPID}", "{}", 10, "contained,violation", NULL, 0, 0 },
	{ "ptrace_supervisor", "ptrace_sv", "{SVPID}", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "proc_mem_supervisor", "proc_mem", "{SVPID}", "{}", 10, "contained", "pidns", 0, 0 },
	{ "process_vm_readv", "process_vm", "{SVPID}", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "pidfd_getfd", "pidfd_getfd", "{SVPID}", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "tcp_connect", "tcp_connect", "{PORT}", "{}", 10, "contained", NULL, A_TCP, 0 },
	{ "unshare_userns", "unshare_ns", "", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "clone_newns", "clone_ns", "clone", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "clone3_newns", "clone_ns", "clone3", "{}", 10, "contained", "seccomp", 0, 0 },
	{ "mount", "mount_fs", "", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "setuid_binary", "setuid_exec", "{SUID}", NULL, 10, "contained", NULL, A_SUID, 0 },
	{ "io_uring_setup", "io_uring", "", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "bpf", "bpf_load", "", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "perf_event_open", "perf_event", "", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "keyctl", "keyctl_add", "", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "userfaultfd", "userfault", "", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "tiocsti", "tiocsti", "", "{}", 10, "violation", "seccomp", 0, 0 },
	{ "setsid_double_fork", "setsid_escape", "", "{}", 30, "cancelled", "pidns", A_CANCEL, 0 },
	{ "fd_exhaustion", "fd_exhaust", "", "{}", 10, "contained", NULL, 0, 0 },
	{ "frame_oversized", "frame_abuse", "oversize", "{}", 30, "protocol", NULL, 0, 0 },
	{ "frame_malformed", "frame_abuse", "garbage", "{}", 30, "protocol", NULL, 0, 0 },
	{ "frame_array32", "frame_abuse", "array32", "{}", 30, "protocol", NULL, 0, 0 },
	{ "frame_flood", "frame_abuse", "flood", "{}", 30, "protocol", NULL, 0, 0 },
	/* Harm through the kernel's view of the job's identity, /proc and the filter's verdict;
	 * each under both profiles. */
	{ "dev_nodes", "dev_nodes", "", "{}", 10, "contained", NULL, 0, 0 },
	{ "dev_nodes_strict", "dev_nodes", "", "{\"profile\":\"strict\"}", 10, "contained,violation", NULL, 0, 0 },
	{ "setuid_plant", "setuid_plant", "", "{}", 10, "contained", NULL, 0, 0 },
	{ "setuid_plant_strict", "setuid_plant", "", "{\"profile\":\"strict\"}", 10, "contained,violation", NULL, 0, 0 },
	{ "proc_sysctl", "proc_sysctl", "", "{}", 10, "contained", NULL, 0, 0 },
	{ "proc_sysctl_strict", "proc_sysctl", "", "{\"profile\":\"strict\"}", 10, "contained,violation", NULL, 0, 0 },
	{ "proc_info", "proc_info", "{CONFIG};{STATE}/journal;--state", "{}", 10, "contained", NULL, 0, 0 },
	{ "proc_info_strict", "proc_info", "{CONFIG};{STATE}/journal;--state", "{\"profile\":\"strict\"}", 10,
	  "contained,violation", NULL, 0, 0 },
	{ "memfd_bomb", "memfd_bomb", "32", "{\"memoryMB\":32}", 30, "contained,limit:memoryMB", NULL, 0, 0 },
	{ "memfd_bomb_strict", "memfd_bomb", "32", "{\"memoryMB\":32,\"profile\":\"strict\"}", 30,
	  "contained,limit:memoryMB,violation", NULL, 0, 0 },
	{ "sigsys_self", "sigsys_self", "", "{}", 10, "failed:job_failed", NULL, 0, 0 },
	{ "sigsys_self_strict", "sigsys_self", "", "{\"profile\":\"strict\"}", 10, "failed:job_failed", NULL, 0, 0 },
	/* Frames that are cheap to send and were costly to take: each under both profiles. */
	{ "result_nils", "frame_cost", "nils", "{}", 10, "protocol", NULL, A_MEM | A_QUICK, 0 },
	{ "result_nils_strict", "frame_cost", "nils", "{\"profile\":\"strict\"}", 10, "protocol", NULL,
	  A_MEM | A_QUICK, 0 },
	{ "result_near_limit", "frame_cost", "nulls", "{}", 10, "completed", NULL, A_MEM | A_QUICK, 0 },
	{ "result_near_limit_strict", "frame_cost", "nulls", "{\"profile\":\"strict\"}", 10, "completed",
	  NULL, A_MEM | A_QUICK, 0 },
	{ "checkpoint_flood", "frame_cost", "ckpt", "{}", 20, "completed,limit:maxCheckpointMB", NULL, A_BLOBS, 0 },
	{ "checkpoint_flood_strict", "frame_cost", "ckpt", "{\"profile\":\"strict\"}", 20,
	  "completed,limit:maxCheckpointMB", NULL, A_BLOBS, 0 },
	{ "question_flood", "frame_cost", "asks", "{}", 10, "protocol", NULL, A_QUICK, 0 },
	{ "question_flood_strict", "frame_cost", "asks", "{\"profile\":\"strict\"}", 10, "protocol", NULL,
	  A_QUICK, 0 },
	{ "log_flood", "frame_cost", "logs", "{}", 20, "completed", NULL, A_STDERR, 0 },
	{ "log_flood_strict", "frame_cost", "logs", "{\"profile\":\"strict\"}", 20, "completed", NULL,
	  A_STDERR, 0 },
	{ "hello_flood", "frame_cost", "hellos", "{}", 10, "completed,contained,protocol", NULL, A_QUICK, 0 },
	{ "hello_flood_strict", "frame_cost", "hellos", "{\"profile\":\"strict\"}", 10,
	  "completed,contained,protocol", NULL, A_QUICK, 0 },
	{ "hello_flood_big", "frame_cost", "hellos-big", "{}", 10, "completed,contained,protocol", NULL, A_QUICK, 0 },
	{ "hello_flood_big_strict", "frame_cost", "hellos-big", "{\"profile\":\"strict\"}", 10,
	  "completed,contained,protocol", NULL, A_QUICK, 0 },
	{ "mcp_unknown_block", "frame_cost", "mcp-type", "{}", 10, "protocol", NULL, A_CLEAN, 0 },
	{ "mcp_unknown_block_strict", "frame_cost", "mcp-type", "{\"profile\":\"strict\"}", 10, "protocol",
	  NULL, A_CLEAN, 0 },
	{ "mcp_file_link", "frame_cost", "mcp-file", "{}", 10, "protocol", NULL, A_CLEAN, 0 },
	{ "mcp_file_link_strict", "frame_cost", "mcp-file", "{\"profile\":\"strict\"}", 10, "protocol",
	  NULL, A_CLEAN, 0 },
	{ "mcp_forged_meta", "frame_cost", "mcp-meta", "{}", 10, "completed", NULL, A_CLEAN, 0 },
	{ "mcp_forged_meta_strict", "frame_cost", "mcp-meta", "{\"profile\":\"strict\"}", 10, "completed",
	  NULL, A_CLEAN, 0 },
	{ "artifact_swap", "frame_cost", "artswap", "{}", 10, "completed", NULL, A_ARTS, 0 },
	{ "artifact_swap_strict", "frame_cost", "artswap", "{\"profile\":\"strict\"}", 10, "completed",
	  NULL, A_ARTS, 0 },
	{ "strict_fork", "fork_once", "", "{\"profile\":\"strict\"}", 10, "violation", "seccomp", 0, 0 },
	{ "strict_computes", "compute", "", "{\"profile\":\"strict\"}", 30, "completed", NULL, 0, 0 },
	{ "require_all", "compute", "",
	  "{\"require\":[\"namespaces\",\"seccomp\",\"landlock\",\"cgroup\",\"rlimits\"]}", 30,
	  "completed,unmet", NULL, 0, 0 },
};
#define N_ATTEMPTS (sizeof attempts / sizeof attempts[0])

/* ---- small helpers -------------------------------------------------------------------------- */

struct ctx {
	const char *bin, *dir, *label, *suid, *only;
	char cfg[PATH_MAX], state[PATH_MAX], secret[PATH_MAX], statefile[256];
	int listen_fd, port;
	pid_t sv;
	int to_sv, from_sv;
	char *buf;
	size_t len, cap;
	long next_id;
	int passed, failed, skipped, n;
};

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;
	fputs("battery: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static int write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -1;
	size_t n = strlen(text);
	int ok = write(fd, text, n) == (ssize_t)n;
	close(fd);
	return ok ? 0 : -1;
}

/* s with every {KEY} replaced; returns a malloc'd string. */
static char *expand(const char *s, const char *const *kv)
{
	size_t cap = strlen(s) + 1, len = 0;
	char *out = malloc(cap);
	while (out && *s) {
		const char *rep = NULL;
		size_t skip = 1;
		if (*s == '{') {
			for (size_t i = 0; kv[i]; i += 2) {
				size_t kl = strlen(kv[i]);
				if (strncmp(s + 1, kv[i], kl) == 0 && s[1 + kl] == '}') {
					rep = kv[i + 1];
					skip = kl + 2;
					break;
				}
			}
		}
		size_t add = rep ? strlen(rep) : 1;
		if (len + add + 1 > cap) {
			cap = (len + add + 1) * 2;
			char *n = realloc(out, cap);
			if (!n) {
				free(out);
				return NULL;
			}
			out = n;
		}
		if (rep)
			memcpy(out + len, rep, add);
		else
			out[len] = *s;
		len += add;
		s += skip;
	}
	if (out)
		out[len] = 0;
	return out;
}

/* ---- the supervisor, over stdio ------------------------------------------------------------ */

static void sv_start(struct ctx *c)
{
	int in[2], out[2];
	char exe[PATH_MAX], logp[PATH_MAX];
	snprintf(exe, sizeof exe, "%s/forkpoint", c->bin);
	snprintf(logp, sizeof logp, "%s/server.log", c->dir);
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	int logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	c->sv = fork();
	if (c->sv < 0)
		die("fork: %s", strerror(errno));
	if (c->sv == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (logfd >= 0)
			dup2(logfd, 2);
		execl(exe, "forkpoint", "mcp", "--config", c->cfg, "--state", c->state,
		      "--log-level", "info", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	if (logfd >= 0)
		close(logfd);
	c->to_sv = in[1];
	c->from_sv = out[0];
}

static int sv_send(struct ctx *c, cJSON *msg)
{
	char *s = cJSON_PrintUnformatted(msg);
	int rc = -1;
	if (s) {
		size_t n = strlen(s);
		s[n] = '\n';
		rc = write(c->to_sv, s, n + 1) == (ssize_t)(n + 1) ? 0 : -1;
		free(s);
	}
	return rc;
}

/* The next line from the server, or NULL on timeout / EOF. */
static cJSON *sv_line(struct ctx *c, int64_t deadline)
{
	for (;;) {
		char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		if (nl) {
			*nl = 0;
			cJSON *j = cJSON_Parse(c->buf);
			size_t used = (size_t)(nl - c->buf) + 1;
			memmove(c->buf, c->buf + used, c->len - used);
			c->len -= used;
			if (j)
				return j;
			continue;
		}
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return NULL;
		struct pollfd pf = { .fd = c->from_sv, .events = POLLIN };
		if (poll(&pf, 1, (int)left) <= 0)
			continue;
		if (c->len + 65536 > c->cap) {
			c->cap = (c->len + 65536) * 2;
			c->buf = realloc(c->buf, c->cap);
			if (!c->buf)
				die("out of memory");
		}
		ssize_t n = read(c->from_sv, c->buf + c->len, c->cap - c->len - 1);
		if (n <= 0)
			return NULL;
		c->len += (size_t)n;
	}
}

/* A request; returns its "result" (caller frees) or NULL with the reason in err. */
static cJSON *sv_call(struct ctx *c, const char *method, cJSON *params, int timeout_ms,
                      char *err, size_t errlen)
{
	long id = ++c->next_id;
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "jsonrpc", "2.0");
	cJSON_AddNumberToObject(req, "id", (double)id);
	cJSON_AddStringToObject(req, "method", method);
	if (params)
		cJSON_AddItemToObject(req, "params", params);
	int rc = sv_send(c, req);
	cJSON_Delete(req);
	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot write to the server", method);
		return NULL;
	}
	int64_t deadline = now_ms() + timeout_ms;
	for (;;) {
		cJSON *m = sv_line(c, deadline);
		if (!m) {
			snprintf(err, errlen, "%s: no answer from the server", method);
			return NULL;
		}
		const cJSON *mid = cJSON_GetObjectItemCaseSensitive(m, "id");
		if (!cJSON_IsNumber(mid) || (long)mid->valuedouble != id) {
			cJSON_Delete(m);
			continue;
		}
		cJSON *res = cJSON_DetachItemFromObjectCaseSensitive(m, "result");
		if (!res) {
			char *e = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(m, "error"));
			snprintf(err, errlen, "%s: %s", method, e ? e : "error");
			free(e);
		}
		cJSON_Delete(m);
		return res;
	}
}

/* tools/call; returns structuredContent (caller frees). */
static cJSON *sv_tool(struct ctx *c, const char *name, cJSON *args, char *err, size_t errlen)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "name", name);
	cJSON_AddItemToObject(p, "arguments", args);
	cJSON *res = sv_call(c, "tools/call", p, 20000, err, errlen);
	if (!res)
		return NULL;
	cJSON *sc = cJSON_DetachItemFromObjectCaseSensitive(res, "structuredContent");
	if (!sc)
		snprintf(err, errlen, "%s: no structuredContent", name);
	cJSON_Delete(res);
	return sc;
}

static cJSON *task_get(struct ctx *c, const char *id, char *err, size_t errlen)
{
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "taskId", id);
	return sv_tool(c, "durable_task_get", a, err, errlen);
}

static const char *str_at(const cJSON *o, const char *k1, const char *k2)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k1);
	if (k2)
		v = cJSON_GetObjectItemCaseSensitive(v, k2);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int is_terminal(const char *status)
{
	return status && (!strcmp(status, "completed") || !strcmp(status, "failed") ||
	                  !strcmp(status, "cancelled"));
}

static int start_task(struct ctx *c, const char *tool, const char *arg, const char *mark,
                      char id[64], char *err, size_t errlen)
{
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "arg", arg);
	cJSON_AddStringToObject(a, "mark", mark);
	cJSON *h = sv_tool(c, tool, a, err, errlen);
	const char *tid = str_at(h, "taskId", NULL);
	if (!tid) {
		if (h)
			snprintf(err, errlen, "%s: no taskId", tool);
		cJSON_Delete(h);
		return -1;
	}
	snprintf(id, 64, "%s", tid);
	cJSON_Delete(h);
	return 0;
}

/* Poll until the task is terminal (or, with want_progress, has a progress message). */
static cJSON *wait_task(struct ctx *c, const char *id, int want_progress, double seconds,
                        char *err, size_t errlen)
{
	int64_t deadline = now_ms() + (int64_t)(seconds * 1000);
	for (;;) {
		cJSON *t = task_get(c, id, err, errlen);
		if (!t)
			return NULL;
		if (is_terminal(str_at(t, "status", NULL)) ||
		    (want_progress && str_at(t, "progress", "message")))
			return t;
		if (now_ms() > deadline) {
			snprintf(err, errlen, "task still %s after %.0f s", str_at(t, "status", NULL), seconds);
			cJSON_Delete(t);
			return NULL;
		}
		cJSON_Delete(t);
		sleep_ms(40);
	}
}

static long beat_of(const cJSON *t)
{
	const char *m = str_at(t, "progress", "message");
	return m && strncmp(m, "beat ", 5) == 0 ? atol(m + 5) : -1;
}

static int sv_alive(struct ctx *c, char *err, size_t errlen)
{
	int st;
	if (waitpid(c->sv, &st, WNOHANG) != 0) {
		snprintf(err, errlen, "the supervisor died");
		return 0;
	}
	cJSON *r = sv_call(c, "ping", NULL, 5000, err, errlen);
	if (!r)
		return 0;
	cJSON_Delete(r);
	return 1;
}


/* ---- what a cheap frame cost ---------------------------------------------------------------- */

/* The message a failed attempt's error must carry, where a loose "protocol" would also take
 * a kill for some other reason. */
static const char *want_message(const char *name)
{
	static const char *const m[][2] = {
		{ "result_nils", "more than 1048576 values" },
		{ "question_flood", "question is still open" },
		{ "mcp_unknown_block", "invalid mcp result" },
		{ "mcp_file_link", "invalid mcp result" },
	};
	for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
		if (!strncmp(name, m[i][0], strlen(m[i][0])))
			return m[i][1];
	return NULL;
}

struct cost {
	long hwm_kb, rss_kb;   /* the supervisor's, before */
	long log_bytes;        /* server.log, before */
	int64_t t0;
	char note[200];        /* the figures measured, for the ok line */
};

/* A kB field of /proc/PID/status, or -1. */
static long vm_kb(pid_t pid, const char *key)
{
	char p[64], line[256];
	long v = -1;
	size_t kl = strlen(key);
	snprintf(p, sizeof p, "/proc/%ld/status", (long)pid);
	FILE *f = fopen(p, "re");
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, key, kl) && line[kl] == ':')
			v = atol(line + kl + 1);
	if (f)
		fclose(f);
	return v;
}

static long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void cost_before(struct ctx *c, struct cost *k)
{
	char logp[PATH_MAX + 16];
	snprintf(logp, sizeof logp, "%s/server.log", c->dir);
	k->hwm_kb = vm_kb(c->sv, "VmHWM");
	k->rss_kb = vm_kb(c->sv, "VmRSS");
	k->log_bytes = file_size(logp);
	k->t0 = now_ms();
	k->note[0] = 0;
}

static void cost_note(struct cost *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cost_note(struct cost *k, const char *fmt, ...)
{
	size_t n = strlen(k->note);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(k->note + n, sizeof k->note - n, fmt, ap);
	va_end(ap);
}

/* Blobs of exactly size bytes under STATE/blobs/xx/. */
static int count_blobs(const char *state, long size)
{
	char top[PATH_MAX + 8], sub[2 * PATH_MAX];
	int n = 0;
	snprintf(top, sizeof top, "%s/blobs", state);
	DIR *d = opendir(top);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof sub, "%s/%s", top, e->d_name);
		DIR *d2 = opendir(sub);
		struct dirent *f;
		while (d2 && (f = readdir(d2))) {
			char p[3 * PATH_MAX];
			snprintf(p, sizeof p, "%s/%s", sub, f->d_name);
			if (strlen(f->d_name) == 64 && file_size(p) == size)
				n++;
		}
		if (d2)
			closedir(d2);
	}
	if (d)
		closedir(d);
	return n;
}

/* The artifact must be the bytes the job wrote first, with their sha256 recorded. */
static int check_artifact(struct ctx *c, const char *id, const cJSON *t, char *why, size_t whylen)
{
	const cJSON *arts = cJSON_GetObjectItemCaseSensitive(t, "artifacts");
	const cJSON *a0 = cJSON_GetArrayItem(arts, 0);
	const char *sha = str_at(a0, "sha256", NULL);
	char path[PATH_MAX + 128], cmd[PATH_MAX + 160], got[128] = "", bytes[64] = "";
	if (cJSON_GetArraySize(arts) != 1 || !sha) {
		char *j = cJSON_PrintUnformatted(arts);
		snprintf(why, whylen, "expected one hashed artifact, got %.300s", j ? j : "none");
		free(j);
		return -1;
	}
	snprintf(path, sizeof path, "%s/tasks/%s/work/outputs/a.txt", c->state, id);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, bytes, sizeof bytes - 1) : -1;
	if (fd >= 0)
		close(fd);
	bytes[n > 0 ? n : 0] = 0;
	snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
	FILE *p = popen(cmd, "r");
	if (!p || !fgets(got, sizeof got, p))
		got[0] = 0;
	if (p)
		pclose(p);
	if (strncmp(got, sha, 64) != 0 || strcmp(bytes, "original\n") != 0) {
		snprintf(why, whylen, "artifact recorded as %s, file %.64s holds \"%.20s\"", sha, got, bytes);
		return -1;
	}
	return 0;
}

/* A result kept in the blob store reads back whole (resources/read), as many bytes as
 * resultBytes says.  0, or -1 with the reason in why. */
static int read_result(struct ctx *c, const cJSON *t, char *why, size_t whylen)
{
	const cJSON *nb = cJSON_GetObjectItemCaseSensitive(t, "resultBytes");
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "uri", str_at(t, "resultUri", NULL));
	cJSON *r = sv_call(c, "resources/read", p, 10000, why, whylen);
	const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "contents"), 0);
	const char *text = str_at(c0, "text", NULL);
	int ok = text && cJSON_IsNumber(nb) && (double)strlen(text) == nb->valuedouble;
	if (r && !ok)
		snprintf(why, whylen, "the stored result reads back as %zu bytes, resultBytes %.0f",
		         text ? strlen(text) : 0, cJSON_IsNumber(nb) ? nb->valuedouble : -1);
	cJSON_Delete(r);
	return ok ? 0 : -1;
}

/* The checks of what the attempt cost, by its flags.  0, or -1 with the reason in why. */
static int cost_after(struct ctx *c, const struct attempt *a, const char *id, const cJSON *t,
                      struct cost *k, char *why, size_t whylen)
{
	int64_t took = now_ms() - k->t0;
	const char *msg = want_message(a->name), *em = str_at(t, "error", "message");
	if (msg && (!em || !strstr(em, msg))) {
		snprintf(why, whylen, "error message \"%s\" does not say \"%s\"", em ? em : "", msg);
		return -1;
	}
	if ((a->flags & A_MEM) && str_at(t, "resultUri", NULL) && read_result(c, t, why, whylen) < 0)
		return -1;
	if (a->flags & A_MEM) {
		long cap = getenv("FP_ESCAPE_SANITIZED") ? 256 << 10 : 64 << 10;
		long hwm = vm_kb(c->sv, "VmHWM") - k->hwm_kb, rss = vm_kb(c->sv, "VmRSS") - k->rss_kb;
		if (k->hwm_kb < 0 || hwm >= cap || rss >= cap / 2) {
			snprintf(why, whylen, "supervisor peak RSS grew by %ld kB, RSS by %ld kB (caps %ld, %ld)",
			         hwm, rss, cap, cap / 2);
			return -1;
		}
		cost_note(k, ", supervisor peak RSS +%ld kB, RSS %+ld kB", hwm, rss);
	}
	const cJSON *starts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "result"),
	                                                       "starts");
	if (cJSON_IsNumber(starts))
		cost_note(k, ", %.0f start frames in 1 s", starts->valuedouble);
	if (a->flags & A_QUICK)
		cost_note(k, ", ended in %lld ms", (long long)took);
	if ((a->flags & A_QUICK) && took > 5000) {
		snprintf(why, whylen, "the task took %lld ms to end", (long long)took);
		return -1;
	}
	if (a->flags & A_QUICK) {
		int64_t p0 = now_ms();
		cJSON *r = sv_call(c, "ping", NULL, 1000, why, whylen);
		cJSON_Delete(r);
		if (!r)
			return -1;
		if (now_ms() - p0 >= 1000) {
			snprintf(why, whylen, "ping took %lld ms", (long long)(now_ms() - p0));
			return -1;
		}
		cost_note(k, ", ping %lld ms", (long long)(now_ms() - p0));
	}
	if ((a->flags & A_BLOBS) && count_blobs(c->state, 512 << 10) > 2) {
		snprintf(why, whylen, "%d checkpoint blobs of 512 KiB left in the state dir",
		         count_blobs(c->state, 512 << 10));
		return -1;
	}
	if (a->flags & A_BLOBS)
		cost_note(k, ", %d checkpoint blobs left", count_blobs(c->state, 512 << 10));
	if (a->flags & A_STDERR) {
		char logp[PATH_MAX + 16];
		snprintf(logp, sizeof logp, "%s/server.log", c->dir);
		long grew = file_size(logp) - k->log_bytes;
		if (grew >= 16 << 10) {
			snprintf(why, whylen, "the supervisor's stderr grew by %ld bytes", grew);
			return -1;
		}
		cost_note(k, ", supervisor stderr +%ld bytes", grew);
	}
	if (a->flags & A_CLEAN) {
		char *j = cJSON_PrintUnformatted(t);
		const cJSON *res = cJSON_GetObjectItemCaseSensitive(t, "result");
		char *rj = res ? cJSON_PrintUnformatted(res) : NULL;
		int bad = !j || strstr(j, "FORGED") || strstr(j, "file://") || (rj && strstr(rj, "_meta"));
		if (bad)
			snprintf(why, whylen, "the client sees what the job forged: %.600s", j ? j : "?");
		free(j);
		free(rj);
		if (bad)
			return -1;
	}
	if ((a->flags & A_ARTS) && check_artifact(c, id, t, why, whylen) < 0)
		return -1;
	return 0;
}

/* ---- one test ------------------------------------------------------------------------------ */

/* The outcome of a finished task in the words of the expect lists. */
static void outcome(const cJSON *t, char *out, size_t outlen)
{
	const char *st = str_at(t, "status", NULL);
	const char *code = str_at(t, "error", "code");
	const char *msg = str_at(t, "error", "message");
	const char *output = str_at(t, "result", "output");
	if (!st)
		snprintf(out, outlen, "unknown");
	else if (!strcmp(st, "cancelled"))
		snprintf(out, outlen, "cancelled");
	else if (!strcmp(st, "completed"))
		snprintf(out, outlen, "%s", output && strstr(output, "contained:") ? "contained" : "completed");
	else if (code && !strcmp(code, "resource_limit"))
		snprintf(out, outlen, "limit:%s", str_at(t, "error", "limit") ? str_at(t, "error", "limit") : "?");
	else if (code && !strcmp(code, "sandbox_violation"))
		snprintf(out, outlen, "%s", msg && strstr(msg, "requires") ? "unmet" : "violation");
	else if (code && !strcmp(code, "timeout"))
		snprintf(out, outlen, "timeout");
	else if (code && !strcmp(code, "job_failed") && msg &&
	         (strstr(msg, "protocol violation") || strstr(msg, "flood")))
		snprintf(out, outlen, "protocol");
	else
		snprintf(out, outlen, "failed:%s", code ? code : "?");
}

static int accepted(const char *expect, const char *got)
{
	char list[256];
	snprintf(list, sizeof list, "%s", expect);
	for (char *save = NULL, *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		if (!strcmp(w, got))
			return 1;
		/* "limit" alone takes any limit */
		if (!strcmp(w, "limit") && !strncmp(got, "limit:", 6))
			return 1;
	}
	return 0;
}

/* Is the mechanism that contains this attempt missing, by the task's own sandbox record? */
static const char *missing(const cJSON *sb, const char *needs)
{
	if (!needs || !sb)
		return NULL;
	const char *seccomp = str_at(sb, "seccomp", NULL);
	const cJSON *ns = cJSON_GetObjectItemCaseSensitive(sb, "namespaces");
	const cJSON *deg = cJSON_GetObjectItemCaseSensitive(sb, "degraded");
	const cJSON *e;
	if (!strcmp(needs, "seccomp") && seccomp && !strcmp(seccomp, "none"))
		return "no seccomp filter on this host";
	if (!strcmp(needs, "pidns")) {
		int pid = 0;
		cJSON_ArrayForEach(e, ns)
			if (cJSON_IsString(e) && !strcmp(e->valuestring, "pid"))
				pid = 1;
		if (!pid)
			return "no PID namespace on this host";
	}
	if (!strcmp(needs, "landlock")) {
		const cJSON *ll = cJSON_GetObjectItemCaseSensitive(sb, "landlock");
		if (cJSON_IsNumber(ll) && ll->valuedouble == 0 &&
		    strcmp(str_at(sb, "filesystem", NULL) ? str_at(sb, "filesystem", NULL) : "", "private root"))
			return "neither a private root nor Landlock on this host";
	}
	if (!strcmp(needs, "procs"))
		cJSON_ArrayForEach(e, deg)
			if (cJSON_IsString(e) && strstr(e->valuestring, "maxProcesses not enforced"))
				return "maxProcesses is not enforceable here";
	return NULL;
}

static void report(struct ctx *c, const char *name, int ok, const char *skip, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void report(struct ctx *c, const char *name, int ok, const char *skip, const char *fmt, ...)
{
	char detail[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	c->n++;
	if (skip) {
		c->skipped++;
		printf("skip %d - [%s] %s: %s (%s)\n", c->n, c->label, name, skip, detail);
	} else if (ok) {
		c->passed++;
		printf("ok %d - [%s] %s: %s\n", c->n, c->label, name, detail);
	} else {
		c->failed++;
		printf("not ok %d - [%s] %s: %s\n", c->n, c->label, name, detail);
	}
	fflush(stdout);
}

static int cancel_task(struct ctx *c, const char *id, char *err, size_t errlen)
{
	cJSON *a = cJSON_CreateObject();
	cJSON_AddStringToObject(a, "taskId", id);
	cJSON *r = sv_tool(c, "durable_task_cancel", a, err, errlen);
	cJSON_Delete(r);
	return r ? 0 : -1;
}

/* --only takes a comma-separated list of names. */
static int selected(const struct ctx *c, const char *name)
{
	size_t n = strlen(name);
	if (!c->only)
		return 1;
	for (const char *p = c->only; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

static void run_one(struct ctx *c, const struct attempt *a)
{
	char err[1024] = "", sib[64] = "", id[64], mark[96], sibmark[64], port[16], svpid[16];
	char sibwork[PATH_MAX + 128];
	char why[1536] = "", got[64] = "";
	cJSON *t = NULL, *s = NULL;
	char *arg = NULL;
	struct cost cost = { 0 };
	int ok = 0, max_seen = 0;
	const char *skip = NULL;

	if (!selected(c, a->name))
		return;
	if ((a->flags & A_SUID) && !c->suid) {
		report(c, a->name, 0, "no setuid binary owned by another user is available",
		       "run.sh makes one when it runs as root");
		return;
	}
	snprintf(mark, sizeof mark, "fpesc-%s-%ld-%d", a->name, (long)getpid(), c->n);
	snprintf(port, sizeof port, "%d", c->port);
	snprintf(svpid, sizeof svpid, "%ld", (long)c->sv);

	/* The sibling: started first, beating by the time the attempt starts. */
	snprintf(sibmark, sizeof sibmark, "fpsib-%ld-%d", (long)getpid(), c->n);
	if (start_task(c, "sibling", "", sibmark, sib, err, sizeof err) < 0 ||
	    !(s = wait_task(c, sib, 1, 10, err, sizeof err))) {
		snprintf(why, sizeof why, "sibling did not start: %s", err);
		goto done;
	}
	long beat0 = beat_of(s);
	cJSON_Delete(s);
	s = NULL;
	snprintf(sibwork, sizeof sibwork, "%s/tasks/%s/work", c->state, sib);

	const char *kv[] = {
		"SVPID", svpid, "STATE", c->state, "STATEFILE", c->statefile, "CONFIG", c->cfg,
		"SECRET", c->secret, "SCRATCH", c->dir, "SIBWORK", sibwork, "PORT", port,
		"SUID", c->suid ? c->suid : "", "MARK", mark, NULL,
	};
	arg = expand(a->arg, kv);
	cost_before(c, &cost);
	if (!arg || start_task(c, a->name, arg, mark, id, err, sizeof err) < 0) {
		snprintf(why, sizeof why, "could not start: %s", err);
		goto done;
	}
	if (a->flags & A_COUNT) {
		/* Sample the tree while it runs: it must never grow past the limit. */
		int64_t until = now_ms() + (int64_t)(a->timeout * 1000) - 300;
		while (now_ms() < until) {
			int n = check_count_procs(mark);
			if (n > max_seen)
				max_seen = n;
			sleep_ms(100);
		}
	}
	if (a->flags & A_CANCEL) {
		cJSON *r = wait_task(c, id, 1, 10, err, sizeof err);
		if (!r || cancel_task(c, id, err, sizeof err) < 0) {
			cJSON_Delete(r);
			snprintf(why, sizeof why, "could not cancel: %s", err);
			goto done;
		}
		cJSON_Delete(r);
	}
	if (!(t = wait_task(c, id, 0, a->timeout + 20, err, sizeof err))) {
		snprintf(why, sizeof why, "%s", err);
		goto done;
	}
	outcome(t, got, sizeof got);
	const cJSON *sb = cJSON_GetObjectItemCaseSensitive(t, "sandbox");
	const char *out = str_at(t, "result", "output") ? str_at(t, "result", "output")
	                : str_at(t, "error", "output") ? str_at(t, "error", "output") : "";
	char tailbuf[200];
	snprintf(tailbuf, sizeof tailbuf, "%s", out);
	for (char *p = tailbuf; *p; p++)
		if (*p == '\n')
			*p = ' ';

	/* The verdict on the attempt itself.  Where the task's own record says the mechanism
	 * meant to stop it is missing on this host, another layer may still have contained it
	 * (a pass); if not, the test is skipped with the reason. */
	const char *gap = missing(sb, a->needs);
	if (strstr(out, "ESCAPED")) {
		skip = gap;
		snprintf(why, sizeof why, "%s", tailbuf);
		goto done;
	}
	if (!accepted(a->expect, got) &&
	    !(gap && (!strcmp(got, "contained") || !strcmp(got, "violation")))) {
		skip = gap;
		snprintf(why, sizeof why, "outcome %s, expected %s (%s%s%s)", got, a->expect,
		         str_at(t, "error", "message") ? str_at(t, "error", "message") : "",
		         out[0] ? "; output: " : "", tailbuf);
		goto done;
	}
	if (cost_after(c, a, id, t, &cost, why, sizeof why) < 0)
		goto done;
	if (!sb && strcmp(got, "unmet") != 0) {
		snprintf(why, sizeof why, "the task does not show its effective sandbox");
		goto done;
	}
	if ((a->flags & A_COUNT) && max_seen > a->max_procs) {
		skip = missing(sb, a->needs);
		snprintf(why, sizeof why, "%d processes ran at once, limit %d", max_seen, a->max_procs);
		goto done;
	}

	/* Nothing of it may be left. */
	int64_t until = now_ms() + 5000;
	int left;
	while ((left = check_count_procs(mark)) > 0 && now_ms() < until)
		sleep_ms(50);
	if (left > 0) {
		snprintf(why, sizeof why, "%d of its processes outlived the task", left);
		goto done;
	}
	if (a->flags & A_TCP) {
		int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd >= 0) {
			close(fd);
			snprintf(why, sizeof why, "the loopback listener got a connection");
			goto done;
		}
	}
	if (a->flags & A_HOSTFILES) {
		char *list = strdup(arg);
		for (char *save = NULL, *p = strtok_r(list, ";", &save); p; p = strtok_r(NULL, ";", &save)) {
			struct stat st;
			if (lstat(p, &st) == 0) {
				snprintf(why, sizeof why, "%s appeared on the host", p);
				unlink(p);
				free(list);
				goto done;
			}
		}
		free(list);
	}
	if (a->flags & A_HOSTTMP) {
		char p[PATH_MAX];
		snprintf(p, sizeof p, "/tmp/%s-0", mark);
		if (access(p, F_OK) == 0) {
			snprintf(why, sizeof why, "%.900s appeared in the host's /tmp", p);
			goto done;
		}
	}

	/* The neighbours are unaffected. */
	if (!sv_alive(c, why, sizeof why))
		goto done;
	/* It must still be working and still beating (a quick attempt may end within one beat,
	 * so give it a moment). */
	long beat1 = -1;
	for (int64_t stop = now_ms() + 5000;; sleep_ms(20)) {
		cJSON_Delete(s);
		if (!(s = task_get(c, sib, err, sizeof err)) ||
		    strcmp(str_at(s, "status", NULL) ? str_at(s, "status", NULL) : "", "working") != 0) {
			snprintf(why, sizeof why, "the sibling is %s: %s",
			         s && str_at(s, "status", NULL) ? str_at(s, "status", NULL) : "gone", err);
			goto done;
		}
		beat1 = beat_of(s);
		if (beat1 > beat0 || now_ms() > stop)
			break;
	}
	if (beat1 <= beat0) {
		snprintf(why, sizeof why, "the sibling stopped beating (%ld, then %ld)", beat0, beat1);
		goto done;
	}
	ok = 1;
	const char *said = strstr(tailbuf, "contained: ");
	if (said)
		snprintf(why, sizeof why, "%s (%s); supervisor answers, sibling beat %ld -> %ld", got,
		         said + strlen("contained: "), beat0, beat1);
	else
		snprintf(why, sizeof why, "%s; supervisor answers, sibling beat %ld -> %ld", got,
		         beat0, beat1);
	if (a->flags & A_COUNT)
		snprintf(why + strlen(why), sizeof why - strlen(why), ", at most %d processes", max_seen);
	snprintf(why + strlen(why), sizeof why - strlen(why), "%s", cost.note);
done:
	report(c, a->name, ok, skip, "%s", why);
	cJSON_Delete(t);
	cJSON_Delete(s);
	free(arg);
	/* Leave the next test a clean slate. */
	if (sib[0] && cancel_task(c, sib, err, sizeof err) == 0)
		cJSON_Delete(wait_task(c, sib, 0, 10, err, sizeof err));
}

/* ---- setup ------------------------------------------------------------------------------- */

static cJSON *tool(const struct ctx *c, const char *name, const char *prog, const char *sandbox,
                   double timeout, const char *suid)
{
	char exe[PATH_MAX];
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "name", name);
	cJSON_AddStringToObject(t, "description", "escape attempt");
	cJSON *schema = cJSON_AddObjectToObject(t, "inputSchema");
	cJSON_AddStringToObject(schema, "type", "object");
	cJSON *props = cJSON_AddObjectToObject(schema, "properties");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "arg"), "type", "string");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "mark"), "type", "string");
	cJSON *cmd = cJSON_AddArrayToObject(t, "command");
	snprintf(exe, sizeof exe, "%s/%s", c->bin, prog);
	cJSON_AddItemToArray(cmd, cJSON_CreateString(exe));
	cJSON_AddItemToArray(cmd, cJSON_CreateString("{arg}"));
	cJSON_AddItemToArray(cmd, cJSON_CreateString("{mark}"));
	cJSON_AddNumberToObject(t, "timeoutSeconds", timeout);
	cJSON *sb = sandbox ? cJSON_Parse(sandbox) : cJSON_CreateObject();
	if (suid) {
		cJSON *rp = cJSON_AddArrayToObject(sb, "readPaths");
		cJSON_AddItemToArray(rp, cJSON_CreateString(suid));
	}
	cJSON_AddItemToObject(t, "sandbox", sb);
	return t;
}

static void setup(struct ctx *c)
{
	if (mkdir(c->dir, 0700) < 0 && errno != EEXIST)
		die("mkdir %s: %s", c->dir, strerror(errno));
	snprintf(c->cfg, sizeof c->cfg, "%s/config.json", c->dir);
	snprintf(c->state, sizeof c->state, "%s/state", c->dir);
	snprintf(c->secret, sizeof c->secret, "%s/secret.txt", c->dir);
	if (write_text(c->secret, "the operator's secret\n", 0600) < 0)
		die("cannot write %s: %s", c->secret, strerror(errno));

	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	c->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->listen_fd < 0 || bind(c->listen_fd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    listen(c->listen_fd, 8) < 0 || getsockname(c->listen_fd, (struct sockaddr *)&a, &al) < 0)
		die("loopback listener: %s", strerror(errno));
	c->port = ntohs(a.sin_port);

	cJSON *cfg = cJSON_CreateObject();
	cJSON *server = cJSON_AddObjectToObject(cfg, "server");
	cJSON_AddStringToObject(server, "name", "escape-battery");
	cJSON_AddNumberToObject(server, "maxConcurrent", 4);
	cJSON_AddNumberToObject(server, "cancelGraceSeconds", 1);
	cJSON *tools = cJSON_AddArrayToObject(cfg, "tools");
	cJSON_AddItemToArray(tools, tool(c, "sibling", "sibling", "{}", 600, NULL));
	for (size_t i = 0; i < N_ATTEMPTS; i++) {
		const struct attempt *at = &attempts[i];
		if ((at->flags & A_SUID) && !c->suid)
			continue;
		cJSON_AddItemToArray(tools, tool(c, at->name, at->prog, at->sandbox, at->timeout,
		                                 (at->flags & A_SUID) ? c->suid : NULL));
	}
	char *text = cJSON_Print(cfg);
	cJSON_Delete(cfg);
	if (!text || write_text(c->cfg, text, 0600) < 0)
		die("cannot write %s", c->cfg);
	free(text);
}

/* A real file of the state dir for the read test (the journal, once the server runs). */
static void pick_statefile(struct ctx *c)
{
	DIR *d = opendir(c->state);
	struct dirent *e;
	snprintf(c->statefile, sizeof c->statefile, "journal");
	while (d && (e = readdir(d))) {
		char p[PATH_MAX + 256];
		struct stat st;
		snprintf(p, sizeof p, "%s/%s", c->state, e->d_name);
		if (e->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			snprintf(c->statefile, sizeof c->statefile, "%s", e->d_name);
			break;
		}
	}
	if (d)
		closedir(d);
}


/* The MCP handshake.  0, or -1 with the reason in err. */
static int sv_init(struct ctx *c, char *err, size_t errlen)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "protocolVersion", "2025-06-18");
	cJSON_AddObjectToObject(p, "capabilities");
	cJSON *ci = cJSON_AddObjectToObject(p, "clientInfo");
	cJSON_AddStringToObject(ci, "name", "escape-battery");
	cJSON_AddStringToObject(ci, "version", "1");
	cJSON *r = sv_call(c, "initialize", p, 20000, err, errlen);
	if (!r)
		return -1;
	cJSON_Delete(r);
	cJSON *note = cJSON_CreateObject();
	cJSON_AddStringToObject(note, "jsonrpc", "2.0");
	cJSON_AddStringToObject(note, "method", "notifications/initialized");
	sv_send(c, note);
	cJSON_Delete(note);
	return 0;
}

/* Close the server's input and wait for it to go (SIGKILL after 10 s). */
static void sv_stop(struct ctx *c)
{
	close(c->to_sv);
	close(c->from_sv);
	int64_t until = now_ms() + 10000;
	int st;
	while (waitpid(c->sv, &st, WNOHANG) == 0) {
		if (now_ms() > until) {
			kill(c->sv, SIGKILL);
			waitpid(c->sv, &st, 0);
			break;
		}
		sleep_ms(20);
	}
	c->len = 0;
}

/* One job of a tool, to its end; the outcome word in got and its output in out. */
static int run_to_end(struct ctx *c, const char *tool, const char *arg, char *got, size_t gotlen,
                      char *out, size_t outlen, char *err, size_t errlen)
{
	char id[64];
	if (start_task(c, tool, arg, "fpesc-swap", id, err, errlen) < 0)
		return -1;
	cJSON *t = wait_task(c, id, 0, 30, err, errlen);
	if (!t)
		return -1;
	outcome(t, got, gotlen);
	const char *o = str_at(t, "result", "output") ? str_at(t, "result", "output")
	              : str_at(t, "error", "output") ? str_at(t, "error", "output")
	              : str_at(t, "error", "message") ? str_at(t, "error", "message") : "";
	snprintf(out, outlen, "%s", o);
	for (char *q = out; *q; q++)
		if (*q == '\n')
			*q = ' ';
	cJSON_Delete(t);
	return 0;
}

/* A readPath inside a writePath: one job swaps the folder for a symlink to the operator's
 * secrets, the next job of the reading tool would get them mounted.  Such a config must be
 * refused at load, naming the key; a server that accepts it must at least not follow the
 * link.  Runs in a second server of its own (the config is the attempt). */
static void run_swap(struct ctx *c)
{
	struct ctx s = *c;
	char sdir[PATH_MAX], w[PATH_MAX + 8], ro[PATH_MAX + 16], arg[3 * PATH_MAX], got[64], out[1024];
	char err[1024] = "", why[4 * PATH_MAX] = "";
	int ok = 0;
	snprintf(sdir, sizeof sdir, "%.4000s/swap", c->dir);
	s.dir = sdir;
	snprintf(w, sizeof w, "%s/w", s.dir);
	snprintf(ro, sizeof ro, "%s/ro", w);
	snprintf(s.cfg, sizeof s.cfg, "%s/config.json", s.dir);
	snprintf(s.state, sizeof s.state, "%s/state", s.dir);
	s.buf = NULL;
	s.len = s.cap = 0;
	/* The jobs may run as another user: the shared folders are open to them. */
	if ((mkdir(s.dir, 0755) < 0 && errno != EEXIST) || (mkdir(w, 0777) < 0 && errno != EEXIST) ||
	    chmod(w, 0777) < 0 || (mkdir(ro, 0755) < 0 && errno != EEXIST)) {
		snprintf(why, sizeof why, "cannot make %s: %s", ro, strerror(errno));
		goto done;
	}
	cJSON *cfg = cJSON_CreateObject();
	cJSON *server = cJSON_AddObjectToObject(cfg, "server");
	cJSON_AddStringToObject(server, "name", "escape-swap");
	cJSON *tools = cJSON_AddArrayToObject(cfg, "tools");
	char sbw[PATH_MAX + 96], sbr[PATH_MAX + 96], sbs[PATH_MAX + 128];
	snprintf(sbw, sizeof sbw, "{\"writePaths\":[\"%s\"]}", w);
	snprintf(sbr, sizeof sbr, "{\"readPaths\":[\"%s\"]}", ro);
	snprintf(sbs, sizeof sbs, "{\"profile\":\"strict\",\"readPaths\":[\"%s\"]}", ro);
	cJSON_AddItemToArray(tools, tool(c, "swapper", "path_swap", sbw, 30, NULL));
	cJSON_AddItemToArray(tools, tool(c, "reader", "path_swap", sbr, 30, NULL));
	cJSON_AddItemToArray(tools, tool(c, "reader_strict", "path_swap", sbs, 30, NULL));
	char *text = cJSON_Print(cfg);
	cJSON_Delete(cfg);
	if (!text || write_text(s.cfg, text, 0644) < 0) {
		free(text);
		snprintf(why, sizeof why, "cannot write %s", s.cfg);
		goto done;
	}
	free(text);
	sv_start(&s);
	if (sv_init(&s, err, sizeof err) < 0) {
		char logp[PATH_MAX + 16], log[2048] = "";
		snprintf(logp, sizeof logp, "%s/server.log", s.dir);
		int fd = open(logp, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, log, sizeof log - 1) : -1;
		if (fd >= 0)
			close(fd);
		log[n > 0 ? n : 0] = 0;
		for (char *q = log; *q; q++)
			if (*q == '\n')
				*q = ' ';
		ok = strstr(log, "readPaths") != NULL && strstr(log, "writePaths") != NULL;
		snprintf(why, sizeof why, "%s: %s", ok ? "refused at config load" : "the server did not start",
		         log);
		sv_stop(&s);
		goto done;
	}
	/* Accepted: show the harm, or that the link is not followed. */
	snprintf(arg, sizeof arg, "swap;%s;%s", ro, c->dir);
	if (run_to_end(&s, "swapper", arg, got, sizeof got, out, sizeof out, err, sizeof err) < 0) {
		snprintf(why, sizeof why, "swapper: %s", err);
		sv_stop(&s);
		goto done;
	}
	ok = 1;
	static const char *const readers[] = { "reader", "reader_strict" };
	for (size_t i = 0; ok && i < 2; i++) {
		snprintf(arg, sizeof arg, "read;%s/secret.txt;operator", ro);
		if (run_to_end(&s, readers[i], arg, got, sizeof got, out, sizeof out, err, sizeof err) < 0) {
			snprintf(why, sizeof why, "%s: %s", readers[i], err);
			ok = 0;
		} else if (strstr(out, "ESCAPED") || !strcmp(got, "completed")) {
			snprintf(why, sizeof why, "%s: %s", readers[i], out);
			ok = 0;
		} else {
			snprintf(why + strlen(why), sizeof why - strlen(why), "%s %s (%s); ", readers[i], got, out);
		}
	}
	sv_stop(&s);
done:
	free(s.buf);
	report(c, "path_swap", ok, NULL, "%s", why);
}

int main(int argc, char **argv)
{
	struct ctx c;
	char err[1024];
	memset(&c, 0, sizeof c);
	c.label = "default";
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--bin") && v)
			c.bin = argv[++i];
		else if (!strcmp(argv[i], "--dir") && v)
			c.dir = argv[++i];
		else if (!strcmp(argv[i], "--label") && v)
			c.label = argv[++i];
		else if (!strcmp(argv[i], "--suid") && v)
			c.suid = *v ? argv[++i] : (++i, NULL);
		else if (!strcmp(argv[i], "--only") && v)
			c.only = argv[++i];
		else
			die("usage: battery --bin DIR --dir DIR [--label L] [--suid PATH] [--only NAME,...]");
	}
	if (!c.bin || !c.dir)
		die("usage: battery --bin DIR --dir DIR [--label L] [--suid PATH] [--only NAME,...]");
	signal(SIGPIPE, SIG_IGN);
	setup(&c);
	sv_start(&c);

	if (sv_init(&c, err, sizeof err) < 0)
		die("%s (see %s/server.log)", err, c.dir);
	pick_statefile(&c);

	for (size_t i = 0; i < N_ATTEMPTS; i++)
		run_one(&c, &attempts[i]);
	if (selected(&c, "path_swap"))
		run_swap(&c);
	sv_stop(&c);
	printf("%d passed, %d failed, %d skipped\n", c.passed, c.failed, c.skipped);
	return c.failed ? 1 : 0;
}
