/* forkpoint.h — libforkpoint, the C side of the forkpoint job protocol (docs/job-protocol.md).
 *
 * A job is a program the forkpoint supervisor runs as a task.  It talks to the supervisor
 * over the socket whose fd number is in FORKPOINT_FD: progress, checkpoints, questions, the
 * result.  This library speaks that protocol; link it with `pkg-config --libs forkpoint`.
 *
 *     fp_job *job = fp_open();
 *     if (!job) { perror("fp_open"); return 1; }
 *     const void *ck; size_t cklen;
 *     int rc = fp_restore(job, &ck, &cklen);
 *     if (rc == 0) { ...continue from ck... }
 *     else if (rc != -ENOENT) return 1;       (the supervisor is gone: stop, never start over)
 *     fp_progress(job, 0.5, "halfway");
 *     fp_result_json(job, "{\"ok\":true}");
 *     fp_close(job);
 *
 * Conventions.  Every int-returning function returns 0 on success and a negative errno on
 * failure, never prints and never exits:
 *   -EINVAL      bad argument (invalid JSON, unknown log level, missing message)
 *   -ECANCELED   the task was cancelled (from the blocking calls: checkpoint and ask)
 *   -EPIPE       the supervisor is gone: stop at once.  Another attempt resumes from the last
 *                durable checkpoint, so carrying on (or starting over) would run steps twice.
 *   -EPROTO      the supervisor sent something this library cannot make sense of
 *   -EMSGSIZE    the frame would exceed 8 MiB or 1,048,576 values (checkpoints: see
 *                FP_CHECKPOINT_MAX)
 *   -EALREADY    a result or failure was already sent
 * After -EPIPE or -EPROTO the connection is dead and every later call returns that error.
 *
 * Detached mode.  Without FORKPOINT_FD the job is being run by hand: fp_open() succeeds, the
 * arguments come from FORKPOINT_ARGS (or "{}"), sends are no-ops that succeed, fp_ask()
 * answers the first choice (or ""), fp_restore() finds no checkpoint.
 *
 * A handle is used by one thread at a time.  Strings returned by the accessors belong to the
 * handle and stay valid until fp_close() (or, for fp_args_json/fp_restore, the next
 * fp_refresh()). */
#ifndef FORKPOINT_H
#define FORKPOINT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define FP_PRINTF(f, a)
#endif

/* The library is built with hidden visibility: what this header declares is its whole API. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define FP_PROTOCOL_VERSION 1
/* Largest checkpoint the supervisor accepts: it must fit in the start frame that gives it back,
 * with the task's arguments (less when they are large) and the tool's maxCheckpointMB. */
#define FP_CHECKPOINT_MAX ((8u << 20) - 4096u)

typedef struct fp_job fp_job;

/* Connect: read FORKPOINT_FD and wait for the supervisor's start frame.  The socket is
 * marked close-on-exec, so programs the job runs cannot speak for it.  Returns a handle
 * (detached if FORKPOINT_FD is unset), or NULL with errno set on a real error: EBADF (the
 * variable is not an open fd), EPROTO / EPROTONOSUPPORT (bad or foreign start frame),
 * EPIPE (the supervisor closed the socket before its start frame: the job must exit, it cannot
 * know whether a checkpoint exists), EINVAL (detached, FORKPOINT_ARGS is not a JSON object),
 * ENOMEM. */
fp_job *fp_open(void);

/* For programs that share the socket with other, successive processes of the same job (the
 * forkpoint-job shell helper is one).  Does not wait for a start frame: it reads the frames
 * already pending, without blocking and whole frames only, and remembers a cancel among
 * them.  Task data (arguments, checkpoint, attempt) is fetched with fp_refresh(). */
fp_job *fp_open_shared(void);

/* Ask the supervisor for a fresh start frame ("hello") and wait for it.  Replaces the task
 * data the accessors return, and picks up a cancel requested earlier.  -ECANCELED is not
 * returned: check fp_cancelled() afterwards. */
int fp_refresh(fp_job *job);

int fp_detached(const fp_job *job);            /* 1 when not run under forkpoint */
const char *fp_task_id(const fp_job *job);     /* "" when detached and FORKPOINT_TASK_ID unset */
const char *fp_tool(const fp_job *job);        /* the tool name; "" when unknown */
int fp_attempt(const fp_job *job);             /* 1-based */
const char *fp_args_json(const fp_job *job);   /* the arguments as JSON text, never NULL */

/* The checkpoint this attempt starts from, as the supervisor's start frame says:
 *   0         found: *data / *len set (owned by the handle)
 *   -ENOENT   there is none: start from scratch (also when detached)
 *   -ECANCELED there is none and the task was cancelled: stop (the checkpoint of a
 *             cancelled task may already be freed; it is never reported as "none")
 *   -EPIPE    the supervisor is gone (or -EPROTO / -ENOMEM: the connection broke), whether
 *             or not its start frame came first: the job must stop.  Never treat this as
 *             "no checkpoint".
 * A shared handle without a current start frame fetches one first (fp_refresh). */
int fp_restore(fp_job *job, const void **data, size_t *len);

/* Report progress.  fraction in [0, 1] (values above 1 are clamped), or < 0 for none.  fmt
 * may be NULL for no message.  Never blocks on the supervisor's answer. */
int fp_progress(fp_job *job, double fraction, const char *fmt, ...) FP_PRINTF(3, 4);

/* Save a checkpoint and block until the supervisor says it is durable.  Each checkpoint
 * replaces the previous one; a resumed attempt gets the last durable one from fp_restore().
 * -ECANCELED if a cancel arrives first (the data may still have been stored).  -EMSGSIZE,
 * with nothing sent, if it is over FP_CHECKPOINT_MAX or, with the task's arguments (as the
 * start frame packed them), over 8 MiB - 512 bytes: the supervisor would refuse it. */
int fp_checkpoint(fp_job *job, const void *data, size_t len);

/* Ask a question and block until it is answered.  id names the question stably, so a
 * resumed attempt asking again gets the recorded answer instead of a new round trip to the
 * user; NULL derives it from the prompt ("q-" + 16 hex digits, see fp_question_id).
 * choices is a NULL-terminated list or NULL for a free-form answer.  On success *answer is
 * a malloc'd string the caller frees (a non-string response arrives as its JSON text). */
int fp_ask(fp_job *job, const char *id, const char *prompt, const char *const *choices,
           char **answer);

/* The id fp_ask() derives from a prompt: "q-" + FNV-1a-64 of the prompt's bytes in hex.
 * buf needs 19 bytes.  Returns buf. */
char *fp_question_id(const char *prompt, char *buf, size_t buflen);

/* Finish with a result: any JSON value (plain result), or an explicit MCP CallToolResult
 * object ({"content":[...], "structuredContent"?:{...}, "isError"?:bool}).  -EINVAL if the
 * text is not valid JSON (or not a CallToolResult), and then nothing is sent. */
int fp_result_json(fp_job *job, const char *json);
int fp_result_mcp(fp_job *job, const char *json);

/* Finish with a failure.  code NULL means "job_failed"; hint may be NULL; message must not
 * be NULL.  retryable != 0 says that running the job again may succeed. */
int fp_fail(fp_job *job, const char *code, const char *message, int retryable,
            const char *hint);

/* A line for the task's log.  level: debug, info, notice, warning or error. */
int fp_log(fp_job *job, const char *level, const char *fmt, ...) FP_PRINTF(3, 4);

/* Non-blocking: 1 if a cancel has arrived (or the connection to the supervisor is lost, so
 * nobody awaits the result), else 0.  Jobs call it between steps and stop promptly when it says 1. */
int fp_cancelled(fp_job *job);
/* The reason that came with the cancel; "" if none. */
const char *fp_cancel_reason(const fp_job *job);

/* Free the handle and close its end of the socket.  NULL is fine. */
void fp_close(fp_job *job);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
