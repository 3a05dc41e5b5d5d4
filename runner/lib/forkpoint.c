/* runner/lib/forkpoint.c — libforkpoint, see forkpoint.h.
 *
 * Frames are read with frame_read(): exactly one header and one payload at a time, never a
 * byte beyond, because the socket may be shared by successive processes (the shell helper)
 * and a byte read too many would be lost with the process. */
#include "runner/lib/forkpoint.h"
#include "proto/frame.h"
#include "proto/io.h"
#include "proto/utf8.h"

_Static_assert(FP_CHECKPOINT_MAX == FRAME_CHECKPOINT_MAX, "one checkpoint limit on both sides");

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct fp_job {
	int fd;              /* -1 when detached */
	int shared;          /* fp_open_shared(): task data only after fp_refresh() */
	int err;             /* sticky connection error (-EPIPE / -EPROTO / -ENOMEM) */
	int finished;        /* result or fail sent */
	int cancelled;
	char *cancel_reason;
	char *task_id;
	char *tool;
	int attempt;
	char *args_json;
	unsigned char *ckpt;
	size_t ckpt_len;
	int has_ckpt;
	size_t ckpt_room;    /* largest checkpoint the supervisor takes beside these arguments */
	int64_t seq;         /* highest checkpoint seq known to be used */
	int have_start;      /* the fields above come from a start frame */
};

static const char *const log_levels[] = { "debug", "info", "notice", "warning", "error", NULL };

/* ---- small helpers ---------------------------------------------------------- */

/* A msgpack writer that only counts, so a value's packed size is known without a buffer. */
static int count_bytes(void *data, const char *buf, size_t len)
{
	(void)buf;
	*(size_t *)data += len;
	return 0;
}

/* A checkpoint goes back to the job in a start frame beside the task's arguments, so the
 * supervisor refuses (as a protocol violation, killing the job) one that would not fit there
 * with them.  The arguments came in this start frame, packed as the supervisor packs them:
 * packing them again gives the size it subtracts, and fp_checkpoint() can refuse such a
 * checkpoint with -EMSGSIZE instead. */
static size_t checkpoint_room(const msgpack_object *args)
{
	size_t alen = 0, top = FRAME_MAX_DEFAULT - FRAME_START_FIELDS_MAX;
	msgpack_packer pk;
	msgpack_packer_init(&pk, &alen, count_bytes);
	msgpack_pack_object(&pk, *args);
	size_t room = alen < top ? top - alen : 0;
	return room < FP_CHECKPOINT_MAX ? room : FP_CHECKPOINT_MAX;
}

/* msgpack strings are not NUL-terminated: every one kept is copied with a terminator. */
static char *dup_bytes(const void *p, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	if (n)
		memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* Free text from the job (messages, prompts) may carry bytes from anywhere: invalid UTF-8
 * becomes U+FFFD instead of failing the call, since the supervisor refuses invalid text. */
static char *clean_text(const char *s)
{
	size_t len = strlen(s);
	if (utf8_valid(s, len))
		return strdup(s);
	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	char *out = malloc(len * 3 + 1);
	if (out)
		utf8_sanitize(s, len, out);
	return out;
}

/* NULL-safe, and UTF-8 with no NUL before strlen: what the supervisor accepts as a string. */
static int str_ok(const char *s)
{
	return s && utf8_valid(s, strlen(s));
}

/* Every string and key of a parsed JSON value must be UTF-8: the supervisor would treat
 * anything else in a result as a protocol violation. */
static int json_utf8_ok(const cJSON *v)
{
	if (v->string && !str_ok(v->string))
		return 0;
	if (cJSON_IsString(v) && !str_ok(v->valuestring))
		return 0;
	for (const cJSON *c = v->child; c; c = c->next)
		if (!json_utf8_ok(c))
			return 0;
	return 1;
}

/* FORKPOINT_FD may name something other than a socket (ENOTSOCK, e.g. a pipe): then plain
 * write is used, without MSG_NOSIGNAL's protection. */
static int send_all(int fd, const unsigned char *p, size_t len)
{
	while (len > 0) {
		/* MSG_NOSIGNAL: a vanished supervisor is an error to report, not a SIGPIPE. */
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOTSOCK)
				return io_write_full(fd, p, len);
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Finish the frame in sbuf and send it; the sbuffer is destroyed either way. */
static int send_frame(fp_job *job, msgpack_sbuffer *sbuf)
{
	int rc = frame_finish(sbuf);
	if (rc == -E2BIG)
		rc = -EMSGSIZE;   /* too many values: over a frame's limits, like too many bytes */
	if (rc < 0)
		goto out;
	rc = send_all(job->fd, (const unsigned char *)sbuf->data, sbuf->size);
	if (rc == -ECONNRESET || rc == -ENOTCONN)
		rc = -EPIPE;
	if (rc < 0)
		job->err = rc;
out:
	msgpack_sbuffer_destroy(sbuf);
	return rc;
}

/* ---- receiving ------------------------------------------------------------------ */

/* Read one frame.  block == 0: only if bytes are already waiting.  1 with *f filled, 0 if
 * nothing was waiting, <0 on a (sticky) connection error. */
static int recv_frame(fp_job *job, struct frame *f, int block)
{
	if (job->err)
		return job->err;
	if (!block) {
		struct pollfd pfd = { .fd = job->fd, .events = POLLIN };
		int n;
		do
			n = poll(&pfd, 1, 0);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
	}
	int rc = frame_read(job->fd, FRAME_MAX_DEFAULT, f);
	if (rc < 0) {
		job->err = rc == -EPIPE || rc == -ECONNRESET ? -EPIPE :
			   rc == -ENOMEM ? -ENOMEM : -EPROTO;
		return job->err;
	}
	return 1;
}

/* The reason is kept (invalid or missing becomes ""), and cancelled stays set for good: a
 * job cannot be un-cancelled. */
static int note_cancel(fp_job *job, const struct frame *f)
{
	const char *s = "";
	size_t len = 0;
	if (frame_get_str(&f->root, "reason", &s, &len) < 0 || !utf8_valid(s, len)) {
		s = "";
		len = 0;
	}
	char *r = dup_bytes(s, len);
	if (!r)
		return -ENOMEM;
	free(job->cancel_reason);
	job->cancel_reason = r;
	job->cancelled = 1;
	return 0;
}

/* The start frame's checkpoint (optional: a first attempt has none; an empty one is still
 * one, so *have is what says) and the sequence number it was saved under (optional too).
 * The bytes are copied: the frame's buffer is released once the start is applied.
 * 0, -EPROTO for a field of the wrong type, -ENOMEM. */
static int read_checkpoint(const msgpack_object *root, unsigned char **ckpt, size_t *cklen,
                           int *have, int64_t *seq)
{
	const void *ck = NULL;
	int rc = frame_get_bin(root, "checkpoint", &ck, cklen);
	if (rc == 0) {
		*have = 1;
		if (!(*ckpt = malloc(*cklen ? *cklen : 1)))
			return -ENOMEM;
		if (*cklen)
			memcpy(*ckpt, ck, *cklen);
	} else if (rc != -ENOENT) {
		return -EPROTO;
	}
	rc = frame_get_int(root, "checkpointSeq", seq);
	if (rc < 0 && rc != -ENOENT)
		return -EPROTO;
	return 0;
}

/* Take over the task data of a start frame; nothing changes unless all of it is valid: every
 * field is checked (UTF-8, ranges, types) and copied first, and only then do the copies replace
 * the job's current data.  A version mismatch is its own error (-EPROTONOSUPPORT), so a job
 * built against another protocol says so instead of misreading frames. */
static int apply_start(fp_job *job, const struct frame *f)
{
	const msgpack_object *root = &f->root;
	const char *s;
	size_t len;
	int64_t v;
	size_t cklen = 0;
	int have_ck = 0, flag = 0;
	int64_t seq = 0;
	char *task_id = NULL, *tool = NULL, *args = NULL;
	unsigned char *ckpt = NULL;
	cJSON *j = NULL;
	int rc = -EPROTO;

	if (frame_get_int(root, "version", &v) < 0)
		goto fail;
	if (v != FP_PROTOCOL_VERSION) {
		rc = -EPROTONOSUPPORT;
		goto fail;
	}
	if (frame_get_str(root, "taskId", &s, &len) < 0 || !utf8_valid(s, len))
		goto fail;
	if (!(task_id = dup_bytes(s, len)))
		goto nomem;
	if (frame_get_str(root, "tool", &s, &len) == 0 && utf8_valid(s, len))
		tool = dup_bytes(s, len);
	else
		tool = strdup("");
	if (!tool)
		goto nomem;
	if (frame_get_int(root, "attempt", &v) < 0 || v < 1 || v > INT_MAX)
		goto fail;
	int attempt = (int)v;
	const msgpack_object *a = frame_get(root, "arguments");
	if (!a || a->type != MSGPACK_OBJECT_MAP || !(j = frame_to_json(a)))
		goto fail;
	if (!(args = cJSON_PrintUnformatted(j)))
		goto nomem;
	if ((rc = read_checkpoint(root, &ckpt, &cklen, &have_ck, &seq)) < 0)
		goto fail;
	if (frame_get_bool(root, "cancelled", &flag) == 0 && flag && !job->cancelled) {
		job->cancelled = 1;
		if (!job->cancel_reason && !(job->cancel_reason = strdup("")))
			goto nomem;
	}

	free(job->task_id);
	free(job->tool);
	free(job->args_json);
	free(job->ckpt);
	job->task_id = task_id;
	job->tool = tool;
	job->args_json = args;
	job->attempt = attempt;
	job->ckpt = ckpt;
	job->ckpt_len = cklen;
	job->has_ckpt = have_ck;
	job->ckpt_room = checkpoint_room(a);
	if (seq > job->seq)
		job->seq = seq;
	job->have_start = 1;
	cJSON_Delete(j);
	return 0;
nomem:
	rc = -ENOMEM;
fail:
	free(task_id);
	free(tool);
	free(args);
	free(ckpt);
	cJSON_Delete(j);
	return rc;
}

/* What the waiting caller is after. */
enum wait_kind { WAIT_NONE, WAIT_START, WAIT_CHECKPOINTED, WAIT_ANSWER };

struct wait_ctx {
	enum wait_kind kind;
	int64_t seq;          /* WAIT_CHECKPOINTED */
	const char *id;       /* WAIT_ANSWER */
	char *answer;         /* WAIT_ANSWER result */
	int done;
};

/* A string answer is handed over as it is; any other JSON value (a number, an object from a
 * form) as its compact JSON text, so the caller always gets a string. */
static int take_answer(struct wait_ctx *w, const struct frame *f)
{
	const msgpack_object *r = frame_get(&f->root, "response");
	if (!r)
		return -EPROTO;
	if (r->type == MSGPACK_OBJECT_STR) {
		if (!utf8_valid(r->via.str.ptr, r->via.str.size))
			return -EPROTO;
		w->answer = dup_bytes(r->via.str.ptr, r->via.str.size);
		return w->answer ? 0 : -ENOMEM;
	}
	cJSON *j = frame_to_json(r);
	if (!j)
		return errno == ENOMEM ? -ENOMEM : -EPROTO;
	w->answer = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return w->answer ? 0 : -ENOMEM;
}

/* Act on one received frame: cancels are remembered whatever we wait for, the awaited
 * frame completes the wait, anything else (including unknown types) is passed over. */
static int dispatch(fp_job *job, const struct frame *f, struct wait_ctx *w)
{
	char type[32];
	const char *s;
	size_t len;
	int64_t seq;

	frame_type(f, type, sizeof type);
	if (!type[0]) {
		const msgpack_object *t = frame_get(&f->root, "type");
		/* A long type name is a future frame type; a missing one is malformed. */
		return t && t->type == MSGPACK_OBJECT_STR && t->via.str.size >= sizeof type ? 0 : -EPROTO;
	}
	if (strcmp(type, "cancel") == 0)
		return note_cancel(job, f);
	if (strcmp(type, "start") == 0) {
		int rc = apply_start(job, f);
		if (rc < 0)
			return rc;
		if (w->kind == WAIT_START)
			w->done = 1;
		return 0;
	}
	if (strcmp(type, "checkpointed") == 0) {
		if (frame_get_int(&f->root, "seq", &seq) < 0)
			return -EPROTO;
		/* Acknowledgements are cumulative: a later seq being durable covers ours. */
		if (w->kind == WAIT_CHECKPOINTED && seq >= w->seq)
			w->done = 1;
		return 0;
	}
	if (strcmp(type, "answer") == 0) {
		if (frame_get_str(&f->root, "id", &s, &len) < 0)
			return -EPROTO;
		if (w->kind == WAIT_ANSWER && !w->done && len == strlen(w->id) &&
		    memcmp(s, w->id, len) == 0) {
			int rc = take_answer(w, f);
			if (rc < 0)
				return rc;
			w->done = 1;
		}
		return 0;
	}
	return 0;
}

/* A protocol error is sticky (job->err): once the stream is suspect every later call fails
 * with the same error instead of reading a misaligned frame. */
static int handle(fp_job *job, struct frame *f, struct wait_ctx *w)
{
	int rc = dispatch(job, f, w);
	frame_release(f);
	if (rc < 0 && !job->err)
		job->err = rc;
	return rc;
}

/* Read whatever is already waiting, without blocking. */
static int drain(fp_job *job)
{
	struct wait_ctx w = { .kind = WAIT_NONE };
	for (;;) {
		struct frame f;
		int rc = recv_frame(job, &f, 0);
		if (rc <= 0)
			return rc;
		if ((rc = handle(job, &f, &w)) < 0)
			return rc;
	}
}

/* Block until the awaited frame arrives.  A cancel ends the wait with -ECANCELED unless we
 * are waiting for a start frame, which the supervisor sends even to a cancelled job. */
static int wait_for(fp_job *job, struct wait_ctx *w)
{
	while (!w->done) {
		if (job->cancelled && w->kind != WAIT_START)
			return -ECANCELED;
		struct frame f;
		int rc = recv_frame(job, &f, 1);
		if (rc < 0)
			return rc;
		if ((rc = handle(job, &f, w)) < 0)
			return rc;
	}
	return 0;
}

/* Common preamble of the calls that send: detached → nothing to do (1); dead → error. */
static int can_send(fp_job *job)
{
	if (!job)
		return -EINVAL;
	if (job->fd < 0)
		return 1;
	return job->err;
}

/* ---- opening ---------------------------------------------------------------------- */

/* attempt defaults to 1, the first, for a detached job and for an environment that does not
 * say. */
static fp_job *job_alloc(void)
{
	fp_job *job = calloc(1, sizeof *job);
	if (!job)
		return NULL;
	job->fd = -1;
	job->attempt = 1;
	return job;
}

/* Defaults from the environment: all a detached job has, and what a shared handle shows
 * until fp_refresh(). */
static int env_defaults(fp_job *job, int strict)
{
	const char *id = getenv("FORKPOINT_TASK_ID");
	const char *att = getenv("FORKPOINT_ATTEMPT");
	const char *args = getenv("FORKPOINT_ARGS");
	cJSON *j = NULL;
	int rc = -ENOMEM;

	if (!(job->task_id = strdup(id && str_ok(id) ? id : "")) || !(job->tool = strdup("")))
		goto fail;
	if (att) {
		char *end;
		errno = 0;
		long a = strtol(att, &end, 10);
		if (!errno && end != att && !*end && a >= 1 && a <= INT_MAX)
			job->attempt = (int)a;
	}
	if (args && *args) {
		j = cJSON_Parse(args);
		if (!j || !cJSON_IsObject(j) || !json_utf8_ok(j)) {
			if (strict) {
				rc = -EINVAL;
				goto fail;
			}
			cJSON_Delete(j);
			j = NULL;
		}
	}
	job->args_json = j ? cJSON_PrintUnformatted(j) : strdup("{}");
	if (!job->args_json)
		goto fail;
	cJSON_Delete(j);
	return 0;
fail:
	cJSON_Delete(j);
	return rc;
}

/* Parse FORKPOINT_FD: 1 and *fd set, 0 if absent (detached), or -EBADF. */
static int env_fd(int *fd)
{
	const char *s = getenv("FORKPOINT_FD");
	if (!s || !*s)
		return 0;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT_MAX)
		return -EBADF;
	int flags = fcntl((int)v, F_GETFD);
	if (flags < 0)
		return -EBADF;
	/* Children of the job must not inherit the protocol socket: they would be able to
	 * speak for the job. */
	if (fcntl((int)v, F_SETFD, flags | FD_CLOEXEC) < 0)
		return -errno;
	/* Blocking I/O throughout: waits are explicit, and a non-blocking description would
	 * turn them into busy loops. */
	int fl = fcntl((int)v, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK))
		(void)fcntl((int)v, F_SETFL, fl & ~O_NONBLOCK);
	*fd = (int)v;
	return 1;
}

/* A detached process (no FORKPOINT_FD) gets a working handle whose sends do nothing, so a job
 * can run outside forkpoint unchanged; a malformed FORKPOINT_ARGS is an error there, since
 * it is all the job has.  Under forkpoint the start frame is the truth and the environment
 * only a fallback. */
static fp_job *open_common(int shared)
{
	int fd = -1, rc;
	fp_job *job = job_alloc();
	if (!job) {
		errno = ENOMEM;
		return NULL;
	}
	rc = env_fd(&fd);
	if (rc < 0)
		goto fail;
	if (rc == 0) {
		if ((rc = env_defaults(job, 1)) < 0)
			goto fail;
		return job;
	}
	job->fd = fd;
	job->shared = shared;
	if ((rc = env_defaults(job, 0)) < 0)
		goto fail;
	if (shared) {
		if ((rc = drain(job)) < 0)
			goto fail;
		/* A start frame drained here is whichever one was last sent; it is not trusted
		 * to be current, fp_refresh() fetches a fresh one. */
		job->have_start = 0;
		return job;
	}
	struct wait_ctx w = { .kind = WAIT_START };
	if ((rc = wait_for(job, &w)) < 0)
		goto fail;
	return job;
fail:
	job->fd = -1;    /* the fd belongs to the process, not to a failed handle */
	fp_close(job);
	errno = -rc;
	return NULL;
}

fp_job *fp_open(void)
{
	return open_common(0);
}

fp_job *fp_open_shared(void)
{
	return open_common(1);
}

/* hello asks the supervisor for a fresh start frame: the only way a second process on a
 * shared socket learns the current arguments, checkpoint and sequence number. */
int fp_refresh(fp_job *job)
{
	int rc = can_send(job);
	if (rc)
		return rc > 0 ? 0 : rc;
	msgpack_sbuffer sbuf;
	msgpack_packer pk;
	frame_begin(&sbuf, &pk);
	msgpack_pack_map(&pk, 1);
	frame_pack_kv_str(&pk, "type", "hello");
	if ((rc = send_frame(job, &sbuf)) < 0)
		return rc;
	struct wait_ctx w = { .kind = WAIT_START };
	return wait_for(job, &w);
}

/* ---- accessors ------------------------------------------------------------------------ */

int fp_detached(const fp_job *job)
{
	return job && job->fd < 0;
}

const char *fp_task_id(const fp_job *job)
{
	return job && job->task_id ? job->task_id : "";
}

const char *fp_tool(const fp_job *job)
{
	return job && job->tool ? job->tool : "";
}

int fp_attempt(const fp_job *job)
{
	return job ? job->attempt : 1;
}

const char *fp_args_json(const fp_job *job)
{
	return job && job->args_json ? job->args_json : "{}";
}

/* "No checkpoint" must only ever mean that the supervisor said so in a start frame: a job
 * that took a lost connection for a fresh start would redo steps already acknowledged as
 * checkpointed, alongside the attempt that resumes them.  So a dead connection wins over the
 * data at hand, and a shared handle fetches its start frame first. */
int fp_restore(fp_job *job, const void **data, size_t *len)
{
	int rc;
	if (!job || !data || !len)
		return -EINVAL;
	if (job->fd < 0)
		return -ENOENT;
	if (job->err)
		return job->err;
	if (!job->have_start && (rc = fp_refresh(job)) < 0)
		return rc;
	/* A cancel outranks "none": the supervisor may already have freed the checkpoint of a
	 * task it is cancelling, and a job told "start from scratch" would re-run steps that
	 * were acknowledged as done.  A checkpoint that is still there is handed out: the job
	 * hears of the cancel at its next call. */
	if (!job->has_ckpt)
		return job->cancelled ? -ECANCELED : -ENOENT;
	*data = job->ckpt;
	*len = job->ckpt_len;
	return 0;
}

const char *fp_cancel_reason(const fp_job *job)
{
	return job && job->cancel_reason ? job->cancel_reason : "";
}

/* ---- sending ---------------------------------------------------------------------------- */

/* Progress is fire and forget: no acknowledgement is awaited, so reporting often costs a
 * write.  NaN means "no fraction" and values above 1 are clipped rather than refused, since a
 * rounding error in the job must not fail the call. */
int fp_progress(fp_job *job, double fraction, const char *fmt, ...)
{
	char *msg = NULL, *clean = NULL;
	int rc = can_send(job);
	if (rc)
		return rc > 0 ? 0 : rc;
	if (isnan(fraction))
		fraction = -1;
	if (fraction > 1)
		fraction = 1;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		int n = vasprintf(&msg, fmt, ap);
		va_end(ap);
		if (n < 0) {
			msg = NULL;
			return -ENOMEM;
		}
		if (!(clean = clean_text(msg))) {
			rc = -ENOMEM;
			goto out;
		}
	}
	msgpack_sbuffer sbuf;
	msgpack_packer pk;
	frame_begin(&sbuf, &pk);
	msgpack_pack_map(&pk, 1 + (clean != NULL) + (fraction >= 0));
	frame_pack_kv_str(&pk, "type", "progress");
	if (clean)
		frame_pack_kv_str(&pk, "message", clean);
	if (fraction >= 0)
		frame_pack_kv_double(&pk, "fraction", fraction);
	rc = send_frame(job, &sbuf);
out:
	free(msg);
	free(clean);
	return rc;
}

/* Waits for "checkpointed": the call returns only once the supervisor has made the
 * checkpoint durable, so a job may discard what it covers.  A cancelled job gets -ECANCELED
 * before anything is sent, as the wait would give it afterwards. */
int fp_checkpoint(fp_job *job, const void *data, size_t len)
{
	int rc = can_send(job);
	if (rc)
		return rc > 0 ? 0 : rc;
	if (!data && len)
		return -EINVAL;
	if (len > FP_CHECKPOINT_MAX)
		return -EMSGSIZE;
	if (job->cancelled)
		return -ECANCELED;
	/* A process sharing the socket does not know the last seq used; the start frame
	 * says it, and seqs must keep increasing across processes and attempts. */
	if (job->shared && !job->have_start && (rc = fp_refresh(job)) < 0)
		return rc;
	if (job->cancelled)
		return -ECANCELED;
	if (job->have_start && len > job->ckpt_room)
		return -EMSGSIZE;   /* it would not fit beside the arguments: see checkpoint_room */
	int64_t seq = job->seq + 1;
	msgpack_sbuffer sbuf;
	msgpack_packer pk;
	frame_begin(&sbuf, &pk);
	msgpack_pack_map(&pk, 3);
	frame_pack_kv_str(&pk, "type", "checkpoint");
	frame_pack_kv_int(&pk, "seq", seq);
	frame_pack_kv_bin(&pk, "data", data ? data : "", len);
	if ((rc = send_frame(job, &sbuf)) < 0)
		return rc;
	job->seq = seq;
	struct wait_ctx w = { .kind = WAIT_CHECKPOINTED, .seq = seq };
	return wait_for(job, &w);
}

/* FNV-1a of the prompt: a stable id, so asking the same question in a later attempt gets the
 * recorded answer rather than asking again.  Not cryptographic; it only has to be stable. */
char *fp_question_id(const char *prompt, char *buf, size_t buflen)
{
	uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a 64 offset basis */
	for (const unsigned char *p = (const unsigned char *)(prompt ? prompt : ""); *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	if (buf && buflen)
		snprintf(buf, buflen, "q-%016llx", (unsigned long long)h);
	return buf;
}

int fp_ask(fp_job *job, const char *id, const char *prompt, const char *const *choices,
           char **answer)
{
	char idbuf[24];
	char *clean = NULL;
	size_t n = 0;
	int rc;

	if (!job || !prompt || !answer)
		return -EINVAL;
	*answer = NULL;
	if (!id)
		id = fp_question_id(prompt, idbuf, sizeof idbuf);
	if (!*id || !str_ok(id))
		return -EINVAL;
	for (n = 0; choices && choices[n]; n++)
		if (!str_ok(choices[n]))
			return -EINVAL;
	if (job->fd < 0) {
		*answer = strdup(n ? choices[0] : "");
		return *answer ? 0 : -ENOMEM;
	}
	if (job->err)
		return job->err;
	if (job->cancelled)
		return -ECANCELED;
	if (!(clean = clean_text(prompt)))
		return -ENOMEM;
	msgpack_sbuffer sbuf;
	msgpack_packer pk;
	frame_begin(&sbuf, &pk);
	msgpack_pack_map(&pk, 3 + (choices != NULL));
	frame_pack_kv_str(&pk, "type", "ask");
	frame_pack_kv_str(&pk, "id", id);
	frame_pack_kv_str(&pk, "prompt", clean);
	if (choices) {
		frame_pack_str(&pk, "choices");
		msgpack_pack_array(&pk, n);
		for (size_t i = 0; i < n; i++)
			frame_pack_str(&pk, choices[i]);
	}
	free(clean);
	if ((rc = send_frame(job, &sbuf)) < 0)
		return rc;
	struct wait_ctx w = { .kind = WAIT_ANSWER, .id = id };
	rc = wait_for(job, &w);
	if (rc < 0) {
		free(w.answer);
		return rc;
	}
	*answer = w.answer;
	return 0;
}

/* A CallToolResult as MCP defines it: content blocks that each name their type. */
static int mcp_result_ok(const cJSON *r)
{
	if (!cJSON_IsObject(r))
		return 0;
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(r, "content");
	if (!cJSON_IsArray(content))
		return 0;
	for (const cJSON *b = content->child; b; b = b->next)
		if (!cJSON_IsObject(b) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b, "type")))
			return 0;
	const cJSON *sc = cJSON_GetObjectItemCaseSensitive(r, "structuredContent");
	if (sc && !cJSON_IsObject(sc))
		return 0;
	const cJSON *ie = cJSON_GetObjectItemCaseSensitive(r, "isError");
	if (ie && !cJSON_IsBool(ie))
		return 0;
	return 1;
}

/* Parsed and checked here (valid JSON, UTF-8, and for MCP results the content shape) so a
 * bad result is the caller's -EINVAL, not a protocol violation that kills the job.  One
 * result per job: a second is -EALREADY. */
static int send_result(fp_job *job, const char *json, int mcp)
{
	cJSON *v = NULL;
	int rc = can_send(job);
	if (rc < 0)
		return rc;
	if (!json)
		return -EINVAL;
	if (job->finished)
		return -EALREADY;
	const char *end = NULL;
	v = cJSON_ParseWithOpts(json, &end, 1);
	if (!v || !json_utf8_ok(v) || (mcp && !mcp_result_ok(v))) {
		rc = -EINVAL;
		goto out;
	}
	if (rc > 0) {     /* detached: validated, nothing to send */
		rc = 0;
		job->finished = 1;
		goto out;
	}
	msgpack_sbuffer sbuf;
	msgpack_packer pk;
	frame_begin(&sbuf, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", "result");
	frame_pack_str(&pk, mcp ? "mcp" : "value");
	rc = frame_pack_json(&pk, v);
	if (rc < 0) {
		msgpack_sbuffer_destroy(&sbuf);
		goto out;
	}
	rc = send_frame(job, &sbuf);
	if (rc == 0)
		job->finished = 1;
out:
	cJSON_Delete(v);
	return rc;
}

int fp_result_json(fp_job *job, const char *json)
{
	return send_result(job, json, 0);
}

int fp_result_mcp(fp_job *job, const char *json)
{
	return send_result(job, json, 1);
}

/* The code must be valid text (it becomes a machine-readable error code); the message and
 * hint are free text and are repaired instead of refused. */
int fp_fail(fp_job *job, const char *code, const char *message, int retryable,
            const char *hint)
{
	char *msg = NULL, *h = NULL;
	int rc = can_send(job);
	if (rc < 0)
		return rc;
	if (!message || (code && (!*code || !str_ok(code))))
		return -EINVAL;
	if (job->finished)
		return -EALREADY;
	if (rc > 0) {
		job->finished = 1;
		return 0;
	}
	rc = -ENOMEM;
	if (!(msg = clean_text(message)) || (hint && !(h = clean_text(hint))))
		goto out;
	msgpack_sbuffer sbuf;
	msgpack_packer pk;
	frame_begin(&sbuf, &pk);
	msgpack_pack_map(&pk, 4 + (h != NULL));
	frame_pack_kv_str(&pk, "type", "fail");
	frame_pack_kv_str(&pk, "code", code ? code : "job_failed");
	frame_pack_kv_str(&pk, "message", msg);
	frame_pack_kv_bool(&pk, "retryable", retryable);
	if (h)
		frame_pack_kv_str(&pk, "hint", h);
	rc = send_frame(job, &sbuf);
	if (rc == 0)
		job->finished = 1;
out:
	free(msg);
	free(h);
	return rc;
}

/* Fire and forget like progress; the level is checked against the protocol's five. */
int fp_log(fp_job *job, const char *level, const char *fmt, ...)
{
	char *msg = NULL, *clean = NULL;
	size_t i;
	int rc = can_send(job);
	if (rc < 0)
		return rc;
	if (!level || !fmt)
		return -EINVAL;
	for (i = 0; log_levels[i] && strcmp(log_levels[i], level) != 0; i++)
		;
	if (!log_levels[i])
		return -EINVAL;
	if (rc > 0)
		return 0;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	rc = -ENOMEM;
	if (!(clean = clean_text(msg)))
		goto out;
	msgpack_sbuffer sbuf;
	msgpack_packer pk;
	frame_begin(&sbuf, &pk);
	msgpack_pack_map(&pk, 3);
	frame_pack_kv_str(&pk, "type", "log");
	frame_pack_kv_str(&pk, "level", level);
	frame_pack_kv_str(&pk, "message", clean);
	rc = send_frame(job, &sbuf);
out:
	free(msg);
	free(clean);
	return rc;
}

/* Reads what is already waiting (never blocks), so a job's loop can poll this cheaply.  A
 * broken connection counts as cancelled: the job should stop either way. */
int fp_cancelled(fp_job *job)
{
	if (!job || job->fd < 0)
		return 0;
	if (!job->cancelled && !job->err)
		(void)drain(job);
	return job->cancelled || job->err != 0;
}

/* Only the descriptor goes; nothing is sent, so closing a shared handle does not end the task
 * (another process may still speak for it). */
void fp_close(fp_job *job)
{
	if (!job)
		return;
	if (job->fd >= 0)
		close(job->fd);
	free(job->cancel_reason);
	free(job->task_id);
	free(job->tool);
	free(job->args_json);
	free(job->ckpt);
	free(job);
}
