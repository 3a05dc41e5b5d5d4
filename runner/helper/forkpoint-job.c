/* runner/helper/forkpoint-job.c — the shell helper: one protocol action per invocation, so a shell
 * script can report progress, checkpoint, ask and finish (docs/job-protocol.md).
 *
 * A script runs this many times over one socket, so each run opens it with
 * fp_open_shared(): whole frames only, nothing left half-read for the next run.  Data that
 * came with the first start frame (arguments, checkpoint) is fetched again with a hello.
 *
 * Exit status: 0 ok, 1 failure, 2 usage, 3 the task was cancelled, 4 (restore only) no
 * checkpoint.  Any command that notices a cancel exits 3 after doing its work, so a `set -e`
 * script stops promptly.  "No checkpoint" has its own status because 1 also covers "the
 * supervisor is gone", after which a script must stop: starting over would redo steps that
 * another attempt resumes. */
#include "runner/lib/forkpoint.h"
#include "proto/io.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_CANCELLED = 3, EXIT_NO_CHECKPOINT = 4 };

static const char usage_text[] =
	"usage: forkpoint-job COMMAND [ARG...]\n"
	"\n"
	"Speaks the forkpoint job protocol for shell jobs (the socket is in FORKPOINT_FD).\n"
	"\n"
	"  progress FRACTION [MESSAGE...]   report progress; FRACTION 0..1, or - for none\n"
	"  checkpoint < FILE                save stdin as the checkpoint, wait until durable\n"
	"  restore > FILE                   print the checkpoint; exit 4 (no output) if none\n"
	"  ask [--id ID] PROMPT [CHOICE...] ask and print the answer\n"
	"  result JSON                      finish with a JSON result (- reads stdin)\n"
	"  result-mcp JSON                  finish with an MCP CallToolResult (- reads stdin)\n"
	"  fail [--code C] [--retryable] [--hint H] MESSAGE...\n"
	"                                   finish with a failure\n"
	"  log LEVEL MESSAGE...             log line; LEVEL debug|info|notice|warning|error\n"
	"  args                             print the task's arguments as JSON\n"
	"  cancelled                        exit 0 if the job should stop (cancelled, or the\n"
	"                                   supervisor is gone), 1 if not\n"
	"  --help                           this text\n"
	"\n"
	"Exit status: 0 ok, 1 failure, 2 usage, 3 cancelled (any command that sees a cancel),\n"
	"4 no checkpoint (restore).  Status 1 includes \"the supervisor is gone\": the job must\n"
	"then stop, since another attempt resumes from the last checkpoint.  The safe idiom:\n"
	"\n"
	"  step=$(forkpoint-job restore) || case $? in 4) step=0 ;; *) exit 1 ;; esac\n"
	"\n"
	"Without FORKPOINT_FD (run by hand) commands describe what they would do on stderr\n"
	"and succeed; ask answers its first choice, restore finds no checkpoint (exit 4).\n";

__attribute__((format(printf, 1, 2)))
/* Usage mistakes exit 2, apart from every runtime failure (1), so a script's author can tell
 * a wrong call from a supervisor that went away. */
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("forkpoint-job: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'forkpoint-job --help'.\n", stderr);
	return EXIT_USAGE;
}

/* The two errors a script must act on get their own words: a cancel (exit 3, stop and clean
 * up) and a lost supervisor (stop; nothing more will be recorded). */
static int fail_errno(const char *what, int rc)
{
	if (rc == -ECANCELED) {
		fprintf(stderr, "forkpoint-job: %s: the task was cancelled\n", what);
		return EXIT_CANCELLED;
	}
	if (rc == -EPIPE) {
		fprintf(stderr, "forkpoint-job: %s: the supervisor is gone; stop this job\n", what);
		return EXIT_FAIL;
	}
	fprintf(stderr, "forkpoint-job: %s: %s\n", what, strerror(-rc));
	return EXIT_FAIL;
}

/* Join argv[0..n) with spaces into a malloc'd string ("" for n == 0). */
static char *join_args(char **argv, int n)
{
	size_t len = 1;
	for (int i = 0; i < n; i++)
		len += strlen(argv[i]) + 1;
	char *s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (int i = 0, off = 0; i < n; i++) {
		off += sprintf(s + off, "%s%s", i ? " " : "", argv[i]);
	}
	return s;
}

/* Read all of stdin, refusing more than max bytes.
 * The buffer doubles up to max and one step past it, so the size limit is enforced while
 * reading: a script that pipes gigabytes by mistake fails fast instead of exhausting memory.
 * A short read ends the input only because io_read_upto returns short at end of file alone. */
static int read_stdin(size_t max, unsigned char **out, size_t *outlen)
{
	size_t cap = 65536, len = 0;
	unsigned char *buf = malloc(cap);
	int rc = -ENOMEM;
	if (!buf)
		goto fail;
	for (;;) {
		if (len == cap) {
			if (cap > max) {
				rc = -EMSGSIZE;
				goto fail;
			}
			unsigned char *nb = realloc(buf, cap * 2);
			if (!nb)
				goto fail;
			buf = nb;
			cap *= 2;
		}
		ssize_t n = io_read_upto(STDIN_FILENO, buf + len, cap - len);
		if (n < 0) {
			rc = (int)n;
			goto fail;
		}
		len += (size_t)n;
		if (len > max) {
			rc = -EMSGSIZE;
			goto fail;
		}
		if (len < cap)
			break;   /* end of input */
	}
	*out = buf;
	*outlen = len;
	return 0;
fail:
	free(buf);
	return rc;
}

/* The exit status after a command that does not itself wait: 3 if a cancel was seen.
 * Commands that only send (progress, checkpoint, log) still look at the cancel state the
 * library saw while sending, so a `set -e` script stops at its next step after a cancel.  A
 * detached run (no forkpoint) is never cancelled. */
static int after(fp_job *job, int rc, const char *what)
{
	if (rc < 0)
		return fail_errno(what, rc);
	if (fp_cancelled(job) && !fp_detached(job)) {
		fprintf(stderr, "forkpoint-job: %s: the task was cancelled\n", what);
		return EXIT_CANCELLED;
	}
	return EXIT_OK;
}

/* "-" or "none" sends a message without a fraction (an indeterminate step). */
static int cmd_progress(fp_job *job, int argc, char **argv)
{
	double fraction = -1;
	if (argc < 1)
		return usage_error("%s: missing FRACTION", "progress");
	if (strcmp(argv[0], "-") != 0 && strcmp(argv[0], "none") != 0) {
		char *end;
		errno = 0;
		fraction = strtod(argv[0], &end);
		if (errno || end == argv[0] || *end || !isfinite(fraction) || fraction < 0 ||
		    fraction > 1)
			return usage_error("progress: FRACTION must be a number from 0 to 1, not '%s'",
					   argv[0]);
	}
	char *msg = argc > 1 ? join_args(argv + 1, argc - 1) : NULL;
	if (argc > 1 && !msg)
		return fail_errno("progress", -ENOMEM);
	if (fp_detached(job))
		fprintf(stderr, "forkpoint-job: progress %s%s%s\n", argv[0], msg ? " " : "",
			msg ? msg : "");
	int rc = msg ? fp_progress(job, fraction, "%s", msg) : fp_progress(job, fraction, NULL);
	free(msg);
	return after(job, rc, "progress");
}

/* From stdin, so a script can checkpoint any bytes (a tar stream, a JSON file) without
 * quoting; capped at the protocol's checkpoint limit before anything is sent. */
static int cmd_checkpoint(fp_job *job, int argc, char **argv)
{
	unsigned char *data = NULL;
	size_t len = 0;
	if (argc != 0)
		return usage_error("checkpoint: unexpected argument '%s' (the data is read from stdin)",
				   argv[0]);
	int rc = read_stdin(FP_CHECKPOINT_MAX, &data, &len);
	if (rc == -EMSGSIZE) {
		fprintf(stderr, "forkpoint-job: checkpoint: more than %u bytes on stdin\n",
			FP_CHECKPOINT_MAX);
		return EXIT_FAIL;
	}
	if (rc < 0)
		return fail_errno("checkpoint: reading stdin", rc);
	if (fp_detached(job))
		fprintf(stderr, "forkpoint-job: checkpoint of %zu bytes (not saved: no forkpoint)\n",
			len);
	rc = fp_checkpoint(job, data, len);
	free(data);
	return after(job, rc, "checkpoint");
}

/* Exit 4 only for "there is none": a script starts from scratch on 4, and must never do so
 * because the connection failed (1), or it would redo work another attempt resumes. */
static int cmd_restore(fp_job *job, int argc, char **argv)
{
	const void *data;
	size_t len;
	if (argc != 0)
		return usage_error("restore: unexpected argument '%s'", argv[0]);
	if (fp_detached(job)) {
		fprintf(stderr, "forkpoint-job: restore: no checkpoint (not running under forkpoint)\n");
		return EXIT_NO_CHECKPOINT;
	}
	/* A shared handle has no current start frame, so this asks for one: only the answer
	 * can say "none"; a lost connection is a failure. */
	int rc = fp_restore(job, &data, &len);
	if (rc == -ENOENT)
		return EXIT_NO_CHECKPOINT;
	if (rc < 0)
		return fail_errno("restore", rc);
	rc = io_write_full(STDOUT_FILENO, data, len);
	if (rc < 0)
		return fail_errno("restore: writing stdout", rc);
	return EXIT_OK;
}

/* The answer goes to stdout, one line, for `answer=$(forkpoint-job ask ...)`.  --id makes the
 * question idempotent across a restart: the same id is answered from the record instead of
 * asked twice. */
static int cmd_ask(fp_job *job, int argc, char **argv)
{
	const char *id = NULL;
	char *answer = NULL;
	if (argc >= 1 && strcmp(argv[0], "--id") == 0) {
		if (argc < 2 || !*argv[1])
			return usage_error("%s: --id needs a value", "ask");
		id = argv[1];
		argc -= 2;
		argv += 2;
	} else if (argc >= 1 && strncmp(argv[0], "--id=", 5) == 0) {
		id = argv[0] + 5;
		argc--;
		argv++;
	}
	if (argc < 1)
		return usage_error("%s: missing PROMPT", "ask");
	const char *prompt = argv[0];
	/* argv is NULL-terminated, so the choices already form the list fp_ask() wants. */
	const char *const *choices = argc > 1 ? (const char *const *)(argv + 1) : NULL;
	if (fp_detached(job)) {
		fprintf(stderr, "forkpoint-job: ask: %s", prompt);
		for (int i = 1; i < argc; i++)
			fprintf(stderr, "%s%s", i == 1 ? " [" : " / ", argv[i]);
		fprintf(stderr, "%s -> answering '%s'\n", argc > 1 ? "]" : "",
			argc > 1 ? argv[1] : "");
	}
	int rc = fp_ask(job, id, prompt, choices, &answer);
	if (rc == -EINVAL)
		return usage_error("ask: the id and the choices must be valid UTF-8 text");
	if (rc < 0)
		return fail_errno("ask", rc);
	printf("%s\n", answer);
	free(answer);
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}

/* A NUL in stdin is refused before parsing: JSON text cannot hold one, and a C string would
 * silently end there. */
static int cmd_result(fp_job *job, int argc, char **argv, int mcp)
{
	const char *what = mcp ? "result-mcp" : "result";
	unsigned char *in = NULL;
	const char *json;
	if (argc != 1)
		return usage_error("%s: expects exactly one JSON argument (or - for stdin)", what);
	json = argv[0];
	if (strcmp(json, "-") == 0) {
		size_t len;
		int rc = read_stdin(FP_CHECKPOINT_MAX, &in, &len);
		if (rc < 0)
			return fail_errno("reading stdin", rc);
		if (memchr(in, '\0', len)) {
			free(in);
			return usage_error("%s: NUL byte in the JSON on stdin", what);
		}
		unsigned char *t = realloc(in, len + 1);
		if (!t) {
			free(in);
			return fail_errno(what, -ENOMEM);
		}
		in = t;
		in[len] = '\0';
		json = (const char *)in;
	}
	if (fp_detached(job))
		fprintf(stderr, "forkpoint-job: %s %s\n", what, json);
	int rc = mcp ? fp_result_mcp(job, json) : fp_result_json(job, json);
	free(in);
	if (rc == -EINVAL)
		return usage_error(mcp ? "%s: not a JSON object with a \"content\" array of blocks"
				       : "%s: not valid JSON (UTF-8)", what);
	return rc < 0 ? fail_errno(what, rc) : EXIT_OK;
}

/* Options stop at "--" or at the first non-option, so a message may start with a dash. */
static int cmd_fail(fp_job *job, int argc, char **argv)
{
	const char *code = NULL, *hint = NULL;
	int retryable = 0;
	while (argc > 0 && strncmp(argv[0], "--", 2) == 0) {
		if (strcmp(argv[0], "--") == 0) {
			argc--;
			argv++;
			break;
		}
		if (strcmp(argv[0], "--retryable") == 0) {
			retryable = 1;
			argc--;
			argv++;
		} else if (strcmp(argv[0], "--code") == 0 || strcmp(argv[0], "--hint") == 0) {
			if (argc < 2)
				return usage_error("fail: %s needs a value", argv[0]);
			if (argv[0][2] == 'c')
				code = argv[1];
			else
				hint = argv[1];
			argc -= 2;
			argv += 2;
		} else {
			return usage_error("fail: unknown option '%s'", argv[0]);
		}
	}
	if (argc < 1)
		return usage_error("%s: missing MESSAGE", "fail");
	if (code && !*code)
		return usage_error("%s: --code must not be empty", "fail");
	char *msg = join_args(argv, argc);
	if (!msg)
		return fail_errno("fail", -ENOMEM);
	if (fp_detached(job))
		fprintf(stderr, "forkpoint-job: fail [%s%s] %s%s%s%s\n", code ? code : "job_failed",
			retryable ? ", retryable" : "", msg, hint ? " (hint: " : "",
			hint ? hint : "", hint ? ")" : "");
	int rc = fp_fail(job, code, msg, retryable, hint);
	free(msg);
	return rc < 0 ? fail_errno("fail", rc) : EXIT_OK;
}

/* Checked here, against the five levels fp_log() takes, so a wrong level is a usage error
 * (exit 2) instead of a protocol failure. */
static int cmd_log(fp_job *job, int argc, char **argv)
{
	static const char *const levels[] = { "debug", "info", "notice", "warning", "error" };
	size_t i;
	if (argc < 2)
		return usage_error("%s: expects LEVEL MESSAGE...", "log");
	for (i = 0; i < sizeof levels / sizeof *levels && strcmp(levels[i], argv[0]) != 0; i++)
		;
	if (i == sizeof levels / sizeof *levels)
		return usage_error("log: LEVEL must be debug, info, notice, warning or error, not '%s'",
				   argv[0]);
	char *msg = join_args(argv + 1, argc - 1);
	if (!msg)
		return fail_errno("log", -ENOMEM);
	if (fp_detached(job))
		fprintf(stderr, "forkpoint-job: log %s: %s\n", argv[0], msg);
	int rc = fp_log(job, argv[0], "%s", msg);
	free(msg);
	return after(job, rc, "log");
}

/* A shared handle has no start frame of its own: the arguments are fetched afresh. */
static int cmd_args(fp_job *job, int argc, char **argv)
{
	if (argc != 0)
		return usage_error("args: unexpected argument '%s'", argv[0]);
	int rc = fp_refresh(job);
	if (rc < 0)
		return fail_errno("args", rc);
	printf("%s\n", fp_args_json(job));
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}

/* Exit 0 means "cancelled, stop", so that `if forkpoint-job cancelled; then exit; fi` reads
 * naturally; every doubt (no supervisor) answers 0 as well, since carrying on alone is the
 * one wrong choice. */
static int cmd_cancelled(fp_job *job, int argc, char **argv)
{
	if (argc != 0)
		return usage_error("cancelled: unexpected argument '%s'", argv[0]);
	if (fp_detached(job))
		return EXIT_FAIL;
	/* A cancel frame drained by this run counts; otherwise the supervisor's fresh start
	 * frame says whether a cancel was sent earlier (and drained by another run). */
	if (fp_cancelled(job))
		return EXIT_OK;
	int rc = fp_refresh(job);
	if (rc < 0) {
		/* "Not cancelled" would tell the script to carry on without a supervisor. */
		fail_errno("cancelled", rc);
		return EXIT_OK;
	}
	return fp_cancelled(job) ? EXIT_OK : EXIT_FAIL;
}

/* The command is checked before the socket is opened, so a typo is a usage error even where
 * no supervisor runs. */
int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		fputs(usage_text, stdout);
		return EXIT_OK;
	}
	static const char *const known[] = { "progress", "checkpoint", "restore", "ask", "result",
					     "result-mcp", "fail", "log", "args", "cancelled" };
	size_t k;
	for (k = 0; k < sizeof known / sizeof *known && strcmp(known[k], cmd) != 0; k++)
		;
	if (k == sizeof known / sizeof *known)
		return usage_error("unknown command '%s'", cmd);

	fp_job *job = fp_open_shared();
	if (!job) {
		if (errno == EPIPE) {
			fprintf(stderr, "forkpoint-job: %s: the supervisor is gone; stop this job\n", cmd);
			/* For `cancelled`, 0 is the answer that stops the script. */
			return strcmp(cmd, "cancelled") == 0 ? EXIT_OK : EXIT_FAIL;
		}
		fprintf(stderr, "forkpoint-job: cannot talk to forkpoint (FORKPOINT_FD=%s): %s\n",
			getenv("FORKPOINT_FD") ? getenv("FORKPOINT_FD") : "", strerror(errno));
		return EXIT_FAIL;
	}
	int sub_argc = argc - 2;
	char **sub_argv = argv + 2;
	int status;
	if (strcmp(cmd, "progress") == 0)
		status = cmd_progress(job, sub_argc, sub_argv);
	else if (strcmp(cmd, "checkpoint") == 0)
		status = cmd_checkpoint(job, sub_argc, sub_argv);
	else if (strcmp(cmd, "restore") == 0)
		status = cmd_restore(job, sub_argc, sub_argv);
	else if (strcmp(cmd, "ask") == 0)
		status = cmd_ask(job, sub_argc, sub_argv);
	else if (strcmp(cmd, "result") == 0)
		status = cmd_result(job, sub_argc, sub_argv, 0);
	else if (strcmp(cmd, "result-mcp") == 0)
		status = cmd_result(job, sub_argc, sub_argv, 1);
	else if (strcmp(cmd, "fail") == 0)
		status = cmd_fail(job, sub_argc, sub_argv);
	else if (strcmp(cmd, "log") == 0)
		status = cmd_log(job, sub_argc, sub_argv);
	else if (strcmp(cmd, "args") == 0)
		status = cmd_args(job, sub_argc, sub_argv);
	else
		status = cmd_cancelled(job, sub_argc, sub_argv);
	fp_close(job);
	return status;
}
