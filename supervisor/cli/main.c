/* supervisor/main.c — the forkpoint command line.  Only main() and the commands it runs print
 * or exit; everything below them returns errors. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/cli/call.h"
#include "supervisor/core/config.h"
#include "supervisor/cli/ops.h"
#include "supervisor/core/persist.h"
#include "runner/sandbox/sandbox.h"
#include "supervisor/mcp/server.h"
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/transfer.h"
#include "supervisor/core/workers.h"

static const char usage_main[] =
	"usage: forkpoint COMMAND [OPTIONS]\n"
	"\n"
	"Runs long, untrusted jobs as durable background tasks for MCP clients.\n"
	"\n"
	"commands:\n"
	"  mcp --config FILE [--state DIR]     serve MCP on stdin/stdout (what MCP hosts launch)\n"
	"  call TOOL ['JSON'] --config FILE    run one tool as a person would, with a progress bar\n"
	"  ls [--state DIR]                    tasks as a table\n"
	"  show TASK [--state DIR]             one task, with its event timeline\n"
	"  logs TASK [-f] [--state DIR]        the job's captured output\n"
	"  fsck [--repair|--new-head] [--state DIR]  verify the journal and blobs; cut a torn tail\n"
	"  sandbox-check                       what job containment this host supports\n"
	"\n"
	"  forkpoint --version | forkpoint COMMAND --help\n"
	"\n"
	"Config defaults to $FORKPOINT_CONFIG; state to $FORKPOINT_STATE, else\n"
	"${XDG_STATE_HOME:-$HOME/.local/state}/forkpoint.  Exit codes: 0 ok, 1 failure, 2 usage.\n";

static const char usage_mcp[] =
	"usage: forkpoint mcp --config FILE [--state DIR] [--log-level LEVEL]\n"
	"\n"
	"Serve MCP (newline-delimited JSON-RPC) on stdin/stdout.  Logs go to stderr.\n"
	"Exits 0 when stdin closes or on SIGTERM, stopping its jobs.\n"
	"\n"
	"  --config FILE      the tools and server settings (docs/config.md); default $FORKPOINT_CONFIG\n"
	"  --state DIR        the state dir (journal, task folders); default $FORKPOINT_STATE\n"
	"  --log-level LEVEL  debug, info, notice, warning or error (default info)\n";

static int usage_error(const char *msg, const char *usage)
{
	fprintf(stderr, "forkpoint: %s\n\n%s", msg, usage);
	return 2;
}

static int mkdirs(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Create the state dir 0700 and refuse one that others can read or write. */
static int prepare_state_dir(const char *dir, char **abs_out)
{
	int rc = mkdirs(dir, 0700);
	if (rc < 0) {
		fprintf(stderr, "forkpoint: state dir %s: %s\n", dir, strerror(-rc));
		return -1;
	}
	char *abs = realpath(dir, NULL);
	struct stat st;
	if (!abs || stat(abs, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "forkpoint: state dir %s: not a usable directory\n", dir);
		free(abs);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		fprintf(stderr, "forkpoint: state dir %s: owned by uid %u, not by us\n", abs, (unsigned)st.st_uid);
		free(abs);
		return -1;
	}
	if ((st.st_mode & 077) && chmod(abs, 0700) < 0) {
		fprintf(stderr, "forkpoint: state dir %s: cannot make it private: %s\n", abs, strerror(errno));
		free(abs);
		return -1;
	}
	*abs_out = abs;
	return 0;
}

static char *binary_dir(void)
{
	char *p = realpath("/proc/self/exe", NULL);
	if (!p)
		return strdup("/usr/local/bin");
	char *slash = strrchr(p, '/');
	if (slash && slash != p)
		*slash = 0;
	return p;
}

struct sigctx {
	struct supervisor *sv;
	int fd;
};

static void on_signal(struct loop *l, int fd, uint32_t ev, void *arg)
{
	struct sigctx *sc = arg;
	struct signalfd_siginfo si;
	(void)ev;
	while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
		fplog(&sc->sv->log, FPLOG_NOTICE, NULL, "received %s; shutting down", strsignal((int)si.ssi_signo));
		loop_stop(l);
	}
}

#define COMMIT_RETRY_MS 200   /* a failing commit is retried this often, whatever else happens */

struct runctx {
	struct supervisor *sv;
	struct loop_timer *retry;      /* commit retry after a failed fdatasync */
	struct loop_timer *collect;    /* periodic expiry of finished tasks */
	int commit_failing;
};

static void wake_cb(struct loop *l, void *arg)
{
	struct runctx *rc = arg;
	(void)l;
	rc->retry = NULL;   /* the turn hook after this timer retries the commit */
}

/* End of every loop turn: make this turn's promises durable (one write, one fdatasync), and
 * only then let the responses and job frames that depend on them go out. */
static void on_turn(struct loop *l, void *arg)
{
	struct runctx *rc = arg;
	struct supervisor *sv = rc->sv;
	int err = persist_commit(sv->persist);
	if (err < 0) {
		if (!rc->commit_failing)
			fplog(&sv->log, FPLOG_CRITICAL, NULL, "journal commit failed (%s); answers that depend on it "
			      "are held until it succeeds, new changes are refused (storage_unavailable)", strerror(-err));
		rc->commit_failing = 1;
		if (!rc->retry)
			rc->retry = loop_timer_in(l, COMMIT_RETRY_MS, wake_cb, rc);
		/* What depends on nothing uncommitted (ping, reads of durable tasks, refusals) still
		 * goes out. */
		server_flush(sv->server);
		return;
	}
	if (rc->commit_failing)
		fplog(&sv->log, FPLOG_NOTICE, NULL, "journal commit works again");
	rc->commit_failing = 0;
	tasks_release(sv->tasks);
	server_release(sv->server);
	server_flush(sv->server);
	persist_maybe_compact(sv->persist);
}

/* At shutdown: one last commit.  If it fails, what is held was never promised and is never
 * sent; but the caller must not claim a clean exit, so this says so on stderr. */
static int shutdown_commit(struct supervisor *sv)
{
	size_t pending = persist_pending(sv->persist);
	int rc = persist_commit(sv->persist);
	if (rc < 0) {
		fprintf(stderr, "forkpoint: exiting with %zu journal bytes that could not be made durable (%s): "
		        "the answers that depended on them were never sent\n", pending, strerror(-rc));
		fplog(&sv->log, FPLOG_CRITICAL, NULL, "shutting down with uncommitted changes: %s", strerror(-rc));
	}
	return rc;
}

static void collect_cb(struct loop *l, void *arg)
{
	struct runctx *rc = arg;
	size_t n = tasks_collect(rc->sv->tasks, loop_wall_ms());
	if (n)
		fplog(&rc->sv->log, FPLOG_INFO, NULL, "expired %zu finished tasks", n);
	n = transfers_collect(rc->sv->transfers, loop_wall_ms());
	if (n)
		fplog(&rc->sv->log, FPLOG_INFO, NULL, "expired %zu idle file transfers", n);
	rc->collect = loop_timer_in(l, 30000, collect_cb, rc);
}

struct mcp_args {
	const char *config_path, *state, *level;
};

/* `forkpoint mcp`'s command line.  1: done (help printed), 0: go on, else the exit status of a
 * usage error. */
static int mcp_args(int argc, char **argv, struct mcp_args *a)
{
	a->config_path = getenv("FORKPOINT_CONFIG");
	a->state = NULL;
	a->level = "info";
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage_mcp, stdout);
			return 1;
		} else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
			a->config_path = argv[++i];
		} else if (strcmp(argv[i], "--state") == 0 && i + 1 < argc) {
			a->state = argv[++i];
		} else if (strcmp(argv[i], "--log-level") == 0 && i + 1 < argc) {
			a->level = argv[++i];
		} else {
			char msg[300];
			snprintf(msg, sizeof msg, "mcp: unexpected argument '%s'", argv[i]);
			return usage_error(msg, usage_mcp);
		}
	}
	if (!a->config_path || !*a->config_path)
		return usage_error("mcp: --config FILE is required (or set FORKPOINT_CONFIG)", usage_mcp);
	if (fplog_level_parse(a->level) < 0)
		return usage_error("mcp: --log-level must be debug, info, notice, warning or error", usage_mcp);
	return 0;
}

/* SIGTERM, SIGINT and SIGHUP arrive through a signalfd on the loop (a handler could not touch
 * the loop safely); SIGPIPE is ignored, as a client or job that goes away is an event, not a
 * reason to die.  The process is made non-dumpable first: a job running as our uid must not
 * be able to ptrace us or read our memory.  Returns the signalfd, or -1. */
static int prepare_process(void)
{
	prctl(PR_SET_DUMPABLE, 0);
	signal(SIGPIPE, SIG_IGN);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* Probe the sandbox once, before any job, and say plainly what is missing and which tools run
 * unconfined. */
static int probe_sandbox(struct supervisor *sv)
{
	if (sandbox_new(&sv->sandbox) < 0)
		return -ENOMEM;
	char line[512];
	int degraded = sandbox_host_summary(sv->sandbox, line, sizeof line);
	fplog(&sv->log, degraded ? FPLOG_WARNING : FPLOG_INFO, NULL, "%s", line);
	for (size_t i = 0; i < sv->cfg->n_tools; i++)
		if (strcmp(sv->cfg->tools[i].sandbox.profile, "none") == 0)
			fplog(&sv->log, FPLOG_WARNING, NULL, "tool %s has sandbox profile none: its jobs "
			      "run UNCONFINED, with all of this server's rights", sv->cfg->tools[i].name);
	return 0;
}

/* The end of `forkpoint mcp`: one last commit, then what it made durable goes out (bounded),
 * then the core comes down.  Jobs end with us; tasks are left as they were (a later run
 * resumes them).  The pool goes first (supervisor_quiesce): its last done callbacks still
 * answer into the server's sessions.  -1 when the last commit failed (the exit status must
 * say so). */
static int close_mcp(struct supervisor *sv, int sig_fd)
{
	int rc = 0;
	if (sv->server && shutdown_commit(sv) < 0) {
		rc = -1;
	} else if (sv->server) {
		server_release(sv->server);
		server_flush(sv->server);
		server_drain(sv->server, 2000);
	}
	(void)supervisor_quiesce(sv);
	server_free(sv->server);
	sv->server = NULL;
	supervisor_close(sv);
	if (sig_fd >= 0)
		close(sig_fd);
	config_free(sv->cfg);
	free(sv->state_dir);
	free(sv->bin_dir);
	return rc;
}

/* `forkpoint mcp`: load, open the core, serve stdio until its end or a signal, shut down with
 * a last commit (whose failure is the exit status: see shutdown_commit). */
static int cmd_mcp(int argc, char **argv)
{
	struct mcp_args a;
	int arc = mcp_args(argc, argv, &a);
	if (arc)
		return arc == 1 ? 0 : arc;
	const char *config_path = a.config_path, *state = a.state;
	int lvl = fplog_level_parse(a.level);

	struct supervisor sv;
	memset(&sv, 0, sizeof sv);
	struct sigctx sc = { .sv = &sv, .fd = -1 };
	struct runctx run = { .sv = &sv };
	int ret = 1;
	char err[1024];
	char *state_default = NULL;

	fplog_init(&sv.log, 2, (enum fplog_level)lvl);
	if (config_load(config_path, &sv.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "forkpoint: %s\n", err);
		goto out;
	}
	if (!state) {
		state_default = ops_default_state_dir();
		if (!state_default) {
			fprintf(stderr, "forkpoint: no state dir: pass --state DIR or set FORKPOINT_STATE\n");
			goto out;
		}
		state = state_default;
	}
	umask(077);
	if (prepare_state_dir(state, &sv.state_dir) < 0)
		goto out;
	sv.bin_dir = binary_dir();
	sc.fd = prepare_process();
	if (probe_sandbox(&sv) < 0) {
		fprintf(stderr, "forkpoint: out of memory\n");
		goto out;
	}
	if (sc.fd < 0) {
		fprintf(stderr, "forkpoint: signalfd: %s\n", strerror(errno));
		goto out;
	}
	/* Blocking file work (hashing, syncing upload chunks, checkpoint blobs, input copies,
	 * tree removal) happens on two worker threads, off the loop. */
	const struct supervisor_opts so = { .workers = 2 };
	int64_t t0 = loop_now();
	if (supervisor_open(&sv, &so, err, sizeof err) < 0) {
		fprintf(stderr, "forkpoint: %s\n", err);
		goto out;
	}
	loop_add_fd(sv.loop, sc.fd, EPOLLIN, on_signal, &sc);
	fplog(&sv.log, FPLOG_INFO, NULL, "journal replayed: %llu records, %zu tasks in %lld ms",
	      (unsigned long long)persist_records_replayed(sv.persist), tasks_count(sv.tasks),
	      (long long)(loop_now() - t0));
	sv.server = server_new(&sv);
	if (!sv.server || server_attach(sv.server, 0, 1, 1) < 0) {
		fprintf(stderr, "forkpoint: cannot start the server: %s\n", strerror(errno));
		goto out;
	}
	supervisor_recover(&sv);
	run.collect = loop_timer_in(sv.loop, 30000, collect_cb, &run);
	loop_set_turn_hook(sv.loop, on_turn, &run);
	fplog(&sv.log, FPLOG_INFO, NULL, "forkpoint %s serving %zu tools, state %s", FORKPOINT_VERSION,
	      sv.cfg->n_tools, sv.state_dir);
	if (loop_run(sv.loop) < 0) {
		fplog(&sv.log, FPLOG_ERROR, NULL, "event loop failed: %s", strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (close_mcp(&sv, sc.fd) < 0)
		ret = 1;
	free(state_default);
	return ret;
}

static int cmd_sandbox_check(int argc, char **argv)
{
	struct sandbox *sb = NULL;
	if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
		fputs("usage: forkpoint sandbox-check\n\nProbes (with a trial job) which containment "
		      "mechanisms this host allows for the\ncurrent user and prints them.  Exit status 0 "
		      "if the default profile is complete,\n1 if jobs would run degraded.\n", stdout);
		return 0;
	}
	if (argc > 0)
		return usage_error("sandbox-check: no arguments expected", usage_main);
	if (sandbox_new(&sb) < 0) {
		fprintf(stderr, "forkpoint: out of memory\n");
		return 1;
	}
	char *report = sandbox_host_report(sb);
	char line[512];
	int degraded = sandbox_host_summary(sb, line, sizeof line);
	fputs(report ? report : "out of memory\n", stdout);
	printf("%s\n", degraded ? "verdict:           degraded (jobs run with what works; each task records what it got)"
	                        : "verdict:           complete");
	free(report);
	sandbox_free(sb);
	return degraded ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage_error("missing command", usage_main);
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		fputs(usage_main, stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0) {
		printf("forkpoint %s\n", FORKPOINT_VERSION);
		return 0;
	}
	if (strcmp(cmd, "mcp") == 0)
		return cmd_mcp(argc - 2, argv + 2);
	if (strcmp(cmd, "call") == 0)
		return call_main(argc - 2, argv + 2);
	if (strcmp(cmd, "ls") == 0)
		return ops_ls(argc - 2, argv + 2);
	if (strcmp(cmd, "show") == 0)
		return ops_show(argc - 2, argv + 2);
	if (strcmp(cmd, "logs") == 0)
		return ops_logs(argc - 2, argv + 2);
	if (strcmp(cmd, "fsck") == 0)
		return ops_fsck(argc - 2, argv + 2);
	if (strcmp(cmd, "sandbox-check") == 0)
		return cmd_sandbox_check(argc - 2, argv + 2);
	char msg[200];
	snprintf(msg, sizeof msg, "unknown command '%.100s'", cmd);
	return usage_error(msg, usage_main);
}
