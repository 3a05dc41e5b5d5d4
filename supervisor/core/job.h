/* supervisor/job.h — one running job process, seen from the supervisor: spawning it inside its
 * sandbox (runner/sandbox.h), its frame socket (a hostile peer: bounded frames, byte and
 * frame-rate quotas), its captured output (bounded log file plus an in-memory tail), timers,
 * and killing its whole process tree (PID namespace, cgroup, process group).
 * The owner (tasks.c) gets frames and the final exit through callbacks; the job never touches
 * task state itself.  After on_exit the owner must job_free() the job. */
#ifndef FP_JOB_H
#define FP_JOB_H

#include <stddef.h>
#include <sys/types.h>
#include "proto/frame.h"
#include "supervisor/core/supervisor.h"

struct job;

struct job_exit {
	int exited;            /* 1: exit status valid; 0: killed by signal */
	int status;            /* exit code or signal number */
	int killed_by_us;      /* we sent SIGKILL (cancel, timeout, violation, shutdown) */
	const char *violation; /* non-NULL if the job was killed for misbehaving on its socket */
	const char *tail;      /* last bytes of its stdout+stderr, NUL-terminated, valid UTF-8 */
	const char *start_error; /* non-NULL: it never ran — the step between fork and exec that
	                            failed, with its reason (the sandbox could not be built, exec) */
	int start_errno;       /* with start_error: that step's errno (E2BIG: argv too long) */
	/* Set when the sandbox ended the job: code "sandbox_violation" (the seccomp filter killed
	 * it) or "resource_limit" (memory, CPU time or file size; limit names the config key). */
	const char *sandbox_code;
	const char *sandbox_message;
	const char *limit;
	long limit_value;
};

struct job_callbacks {
	/* A decoded frame.  Return 0 to go on, or -1 (with *why set to a string that lives until
	 * the callback returns; it is copied) to declare a protocol violation: the job is then
	 * killed and on_exit reports the violation. */
	int (*on_frame)(void *owner, struct job *j, const struct frame *f, const char **why);
	/* The process has exited and was reaped; its tree has been killed. */
	void (*on_exit)(void *owner, struct job *j, const struct job_exit *x);
};

struct job_spec {
	const char *task_id;
	char *const *argv;         /* argv[0] absolute */
	char *const *envp;
	const char *cwd;
	const char *log_path;      /* captured stdout+stderr, created 0600 */
	long log_max_bytes;
	size_t max_frame;
	const struct sandbox_policy *sandbox; /* NULL: the default profile */
	const char *work_dir;      /* the task's writable folder (NULL: cwd) */
};

/* Spawn.  0 and *out, or -errno with a message in err (e.g. exec failure with its errno);
 * -ENOTSUP means the tool's sandbox.require cannot be met on this host (and nothing ran). */
int job_start(struct supervisor *sv, const struct job_spec *spec, const struct job_callbacks *cb,
              void *owner, struct job **out, char *err, size_t errlen);
/* Queue a frame built with frame_begin/frame_finish (the sbuffer's bytes are copied).  The
 * bytes count against the job's socket byte quota, as its own frames do. */
int job_send(struct job *j, const void *bytes, size_t len);
/* A log frame's text (valid UTF-8, len bytes): appended to the task's log as
 * "[job log LEVEL] text" within logMaxBytes (the budget its output shares), and shown in the
 * supervisor's log only as the first message of each 10 s window plus a count of the rest,
 * at warning level at most. */
void job_log_line(struct job *j, enum fplog_level lv, const char *level, const char *msg, size_t len);
/* A hello costs the job 16 bytes and the supervisor a start frame of up to 8 MiB, so answers
 * are rate-limited: send(arg) runs now, or once the job's hello budget allows (at most one
 * start frame per 20 ms and 16 MiB of them per second); hellos that arrive while one waits
 * share its answer.  0, or send's error (<0) when it ran now; a deferred send that fails
 * kills the job.  job_hello_sent() records each start frame sent, with its size. */
int job_hello(struct job *j, int (*send)(void *arg), void *arg);
void job_hello_sent(struct job *j, size_t len);
/* Kill the whole tree now with SIGKILL; on_exit follows from the loop.  violation (copied, may
 * be NULL) is reported in on_exit; the first one given wins. */
void job_kill(struct job *j, const char *violation);
/* Kill after ms unless it has exited by then (cancel grace, post-result grace). */
void job_kill_after(struct job *j, long ms);
/* Stop handing frames to on_frame, after the one being handled, until as many job_resume
 * calls as job_pause calls were made: the owner finishes the work a frame started (storing a
 * checkpoint off the loop) before the job's next frame is looked at.  Meanwhile the socket is
 * not read (the job blocks on a full socket, by design), frames to the job still go out, and
 * if the job ends, its end (on_exit) waits too, so it never overtakes a frame it sent first.
 * Paused from inside on_frame, the frame being handled stays valid (its bytes may be read, from
 * any thread) until the last job_resume, so they need not be copied first.  job_resume
 * delivers the waiting frames from the next loop turn on, never from inside the call. */
void job_pause(struct job *j);
void job_resume(struct job *j);
pid_t job_pid(const struct job *j);
/* The effective sandbox of the job as a JSON object text (see sandbox_job_json). */
const char *job_sandbox_json(const struct job *j);
/* Synchronous teardown for shutdown: SIGKILL the tree, reap, no callbacks. */
void job_free(struct job *j);

#endif
