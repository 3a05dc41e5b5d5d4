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
#include "frame.h"
#include "supervisor.h"

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
	/* A decoded frame.  Return 0 to go on, or -1 (with *why set to a static string) to declare
	 * a protocol violation: the job is then killed and on_exit reports the violation. */
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
	const struct sandbox_cfg *sandbox;   /* NULL: the default profile */
	const char *work_dir;      /* the task's writable folder (NULL: cwd) */
};

/* Spawn.  0 and *out, or -errno with a message in err (e.g. exec failure with its errno);
 * -ENOTSUP means the tool's sandbox.require cannot be met on this host (and nothing ran). */
int job_start(struct supervisor *sv, const struct job_spec *spec, const struct job_callbacks *cb,
              void *owner, struct job **out, char *err, size_t errlen);
/* Queue a frame built with frame_begin/frame_finish (the sbuffer's bytes are copied). */
int job_send(struct job *j, const void *bytes, size_t len);
/* Kill the whole tree now with SIGKILL; on_exit follows from the loop. */
void job_kill(struct job *j, const char *violation);
/* Kill after ms unless it has exited by then (cancel grace, post-result grace). */
void job_kill_after(struct job *j, long ms);
pid_t job_pid(const struct job *j);
/* The effective sandbox of the job as a JSON object text (see sandbox_job_json). */
const char *job_sandbox_json(const struct job *j);
/* Synchronous teardown for shutdown: SIGKILL the tree, reap, no callbacks. */
void job_free(struct job *j);

#endif
