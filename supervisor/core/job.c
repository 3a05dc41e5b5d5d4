/* supervisor/job.c — see job.h.
 *
 * The job is a hostile peer.  Reads are non-blocking and bounded per loop turn, so a job that
 * floods its socket or its stdout cannot starve other jobs or the MCP clients; frames go through
 * frame_reader (length checked before allocating); sustained frame or byte rates above the
 * quota kill the job.
 *
 * Killing the tree: a sandboxed job's first process is the init of its PID namespace, so
 * SIGKILL through its pidfd ends every process in it, including ones that left the session;
 * the job's cgroup (cgroup.kill) and its process group are signalled too, for jobs without a
 * PID namespace.  The group is signalled while the main process is still a zombie, when its
 * pid (and so the group id) cannot have been reused. */
#include "supervisor/core/job.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/sandbox/sandbox.h"
#include "runner/spawn.h"
#include "proto/io.h"
#include "proto/utf8.h"

#define READ_PER_TURN   (256u << 10)   /* per fd per loop turn: fairness between jobs */
#define TAIL_BYTES      4096
#define QUOTA_WINDOW_MS 2000
#define QUOTA_FRAMES    4000            /* per window: 2000 frames/s sustained */
#define QUOTA_BYTES     (128u << 20)    /* per window: 64 MiB/s sustained */
#define OUTQ_MAX        (64u << 20)     /* a job that stops reading its socket is killed */
#define HELLO_MIN_MS    20              /* at most 50 start frames a second in answer to hello */
#define HELLO_RATE      (16u << 20)     /* and at most 16 MiB of them a second */
#define LOGSUM_MS       10000           /* log frames: one line in the supervisor's log per window */
#define LOGSUM_TEXT     200             /* bytes of a job's log message shown there */

struct job {
	struct supervisor *sv;
	const struct job_callbacks *cb;
	void *owner;
	char task_id[40];
	pid_t pid;
	int pidfd, sock, out, logfd;
	int statusfd;              /* the PID namespace init's report of the job's end, or -1 */
	int execfd;                /* until the job has exec'd: the spawn's report pipe, or -1 */
	char start_error[300];     /* why it never ran, if so */
	int start_errno;           /* and the errno of that step */
	struct sandbox_job *sb;
	struct sandbox_verdict verdict;
	long log_max, log_written;
	int log_truncated;
	struct frame_reader *reader;
	struct wbuf outq;
	char tail[TAIL_BYTES];
	size_t tail_len;           /* ring: bytes valid */
	size_t tail_pos;           /* next write position */
	int64_t win_start;
	long win_frames, win_bytes;
	struct loop_timer *kill_timer;
	int killed_by_us;
	const char *violation;     /* NULL, or violation_buf */
	char violation_buf[320];
	int exited;
	int sock_eof, out_eof;
	int sock_polled;           /* sock is registered in the loop */
	int64_t hello_next;        /* loop ms: no start frame before this */
	struct loop_timer *hello_timer;
	int (*hello_send)(void *arg);
	void *hello_arg;
	int64_t logsum_start;      /* window of the log frame summary (LOGSUM_MS) */
	long logsum_count;         /* log frames in it after the first (shown) one */
	enum fplog_level logsum_max;
	/* job_pause: frames wait (in the reader, then in the socket) while paused > 0, and so
	 * does the end of a job that was reaped meanwhile (its status is kept until then). */
	int paused;
	struct frame cur;          /* the frame being handled; kept while a pause it began lasts */
	int cur_kept;
	struct loop_timer *resume_timer;
	int reaped;
	siginfo_t reap_si;
	struct rusage reap_ru;
	size_t exit_budget;        /* socket bytes still read after the end (see on_pidfd) */
};

/* Close *fd (taking it out of the loop first when the loop watches it) and mark it closed. */
static void drop_fd(struct job *j, int *fd, int watched)
{
	if (*fd < 0)
		return;
	if (watched)
		loop_del_fd(j->sv->loop, *fd);
	close(*fd);
	*fd = -1;
}

static void job_close_fds(struct job *j)
{
	drop_fd(j, &j->sock, 1);
	drop_fd(j, &j->out, 1);
	drop_fd(j, &j->pidfd, 1);
	drop_fd(j, &j->logfd, 0);
	drop_fd(j, &j->execfd, 1);
	drop_fd(j, &j->statusfd, 0);
}

static void kill_tree(struct job *j)
{
	/* Once reaped, the pid (and the group id) may belong to someone else. */
	if (j->pid > 0 && !j->exited && !j->reaped) {
		if (j->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
		kill(-j->pid, SIGKILL);
		if (j->sb)
			sandbox_job_kill(j->sb);
	}
}

void job_kill(struct job *j, const char *violation)
{
	if (violation && !j->violation) {
		snprintf(j->violation_buf, sizeof j->violation_buf, "%s", violation);
		j->violation = j->violation_buf;
	}
	j->killed_by_us = 1;
	kill_tree(j);
}

static void kill_timer_cb(struct loop *l, void *arg)
{
	struct job *j = arg;
	(void)l;
	j->kill_timer = NULL;
	job_kill(j, NULL);
}

void job_kill_after(struct job *j, long ms)
{
	if (j->kill_timer || j->exited)
		return;
	j->kill_timer = loop_timer_in(j->sv->loop, ms, kill_timer_cb, j);
	if (!j->kill_timer)
		job_kill(j, NULL);
}

pid_t job_pid(const struct job *j)
{
	return j->pid;
}

const char *job_sandbox_json(const struct job *j)
{
	return j->sb ? sandbox_job_json(j->sb) : "{}";
}

/* ---- captured output -------------------------------------------------------- */

/* Append to the task's log file within logMaxBytes.  The first byte that does not fit gets
 * the truncation note, also when an earlier write filled the budget exactly. */
static void log_append(struct job *j, const char *buf, size_t n)
{
	if (j->logfd < 0 || n == 0)
		return;
	size_t room = j->log_written < j->log_max ? (size_t)(j->log_max - j->log_written) : 0;
	size_t w = n < room ? n : room;
	if (w > 0 && io_write_full(j->logfd, buf, w) == 0)
		j->log_written += (long)w;
	if (w < n && !j->log_truncated) {
		static const char note[] = "\n[forkpoint: output truncated at logMaxBytes]\n";
		(void)!write(j->logfd, note, sizeof note - 1);
		j->log_truncated = 1;
	}
}

static void capture(struct job *j, const char *buf, size_t n)
{
	log_append(j, buf, n);
	/* The tail is a ring of the most recent bytes, for a plain program's result. */
	if (n >= TAIL_BYTES) {
		memcpy(j->tail, buf + n - TAIL_BYTES, TAIL_BYTES);
		j->tail_pos = 0;
		j->tail_len = TAIL_BYTES;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		j->tail[j->tail_pos] = buf[i];
		j->tail_pos = (j->tail_pos + 1) % TAIL_BYTES;
	}
	j->tail_len = j->tail_len + n > TAIL_BYTES ? TAIL_BYTES : j->tail_len + n;
}

/* Report the log frames of the closing window that did not reach the supervisor's log. */
static void logsum_flush(struct job *j)
{
	if (j->logsum_count > 0)
		fplog(&j->sv->log, j->logsum_max, j->task_id,
		      "job: %ld more log messages in %d s went only to the task log (forkpoint logs %s)",
		      j->logsum_count, LOGSUM_MS / 1000, j->task_id);
	j->logsum_count = 0;
	j->logsum_max = FPLOG_DEBUG;
}

/* A job picks its log frames' level and rate itself, so they must not reach the supervisor's
 * own log (stderr, MCP clients) as given: the lines go to the task's log under its byte budget,
 * and the supervisor's log shows the first message of each LOGSUM_MS window and then a count,
 * at no more than warning level. */
void job_log_line(struct job *j, enum fplog_level lv, const char *level, const char *msg, size_t len)
{
	char head[40];
	int hn = snprintf(head, sizeof head, "[job log %s] ", level);
	log_append(j, head, (size_t)hn);
	log_append(j, msg, len);
	log_append(j, "\n", 1);
	if (lv > FPLOG_WARNING)
		lv = FPLOG_WARNING;
	int64_t now = loop_now();
	if (j->logsum_start && now - j->logsum_start < LOGSUM_MS) {
		j->logsum_count++;
		if (lv > j->logsum_max)
			j->logsum_max = lv;
		return;
	}
	logsum_flush(j);
	j->logsum_start = now;
	/* Cut on a character boundary: the text reaches clients as JSON. */
	size_t n = utf8_clip(msg, len, LOGSUM_TEXT);
	fplog(&j->sv->log, lv, j->task_id, "job: %.*s%s", (int)n, msg, n < len ? "..." : "");
}

static void drain_out(struct job *j, size_t budget)
{
	char buf[16384];
	while (j->out >= 0 && budget > 0) {
		ssize_t n = read(j->out, buf, sizeof buf);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			n = 0;
		}
		if (n == 0) {
			drop_fd(j, &j->out, 1);
			j->out_eof = 1;
			return;
		}
		capture(j, buf, (size_t)n);
		budget = (size_t)n > budget ? 0 : budget - (size_t)n;
	}
}

static void on_out(struct loop *l, int fd, uint32_t ev, void *arg)
{
	(void)l; (void)fd; (void)ev;
	drain_out(arg, READ_PER_TURN);
}

/* ---- the frame socket ----------------------------------------------------------- */

static void on_sock(struct loop *l, int fd, uint32_t ev, void *arg);

/* Poll the socket for input until its EOF (and not while the owner has paused the job), and
 * for output while frames wait to be sent.  With neither, the fd leaves the loop (it stays
 * open for job_send until exit): epoll reports a hang-up whatever the mask, so a job that
 * closed its end and runs on, whose keeper has not yet been reaped, or that checkpointed and
 * exited while the checkpoint is being stored, would otherwise wake every turn and spin the
 * loop. */
static void update_sock_events(struct job *j)
{
	if (j->sock < 0)
		return;
	uint32_t ev = (j->sock_eof || j->paused ? 0 : EPOLLIN) | (wbuf_pending(&j->outq) ? EPOLLOUT : 0);
	if (!ev) {
		if (j->sock_polled)
			loop_del_fd(j->sv->loop, j->sock);
		j->sock_polled = 0;
	} else if (j->sock_polled) {
		loop_mod_fd(j->sv->loop, j->sock, ev);
	} else if (loop_add_fd(j->sv->loop, j->sock, ev, on_sock, j) == 0) {
		j->sock_polled = 1;
	}
}

static void flush_outq(struct job *j)
{
	while (j->sock >= 0 && wbuf_pending(&j->outq)) {
		ssize_t n = send(j->sock, j->outq.data + j->outq.off, wbuf_pending(&j->outq),
		                 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			/* The job closed its end: nothing more can be delivered, drop the queue. */
			wbuf_consume(&j->outq, wbuf_pending(&j->outq));
			break;
		}
		wbuf_consume(&j->outq, (size_t)n);
	}
	update_sock_events(j);
}

static int quota(struct job *j, long frames, long bytes);

int job_send(struct job *j, const void *bytes, size_t len)
{
	if (j->sock < 0 || j->exited)
		return -EPIPE;
	if (quota(j, 0, (long)len) < 0)
		return -ENOBUFS;
	if (wbuf_pending(&j->outq) + len > OUTQ_MAX) {
		job_kill(j, "job does not read its socket");
		return -ENOBUFS;
	}
	int rc = wbuf_append(&j->outq, bytes, len);
	if (rc < 0)
		return rc;
	flush_outq(j);
	return 0;
}

void job_hello_sent(struct job *j, size_t len)
{
	int64_t wait = (int64_t)(len / (HELLO_RATE / 1000u));
	j->hello_next = loop_now() + (wait > HELLO_MIN_MS ? wait : HELLO_MIN_MS);
}

static void hello_timer_cb(struct loop *l, void *arg)
{
	struct job *j = arg;
	(void)l;
	j->hello_timer = NULL;
	if (!j->exited && j->hello_send(j->hello_arg) < 0)
		job_kill(j, "the start frame could not be sent again (too large, or the job does not read)");
}

int job_hello(struct job *j, int (*send)(void *arg), void *arg)
{
	int64_t now = loop_now();
	if (j->hello_timer)
		return 0;
	if (now >= j->hello_next)
		return send(arg);
	j->hello_send = send;
	j->hello_arg = arg;
	j->hello_timer = loop_timer_in(j->sv->loop, j->hello_next - now, hello_timer_cb, j);
	return j->hello_timer ? 0 : -ENOMEM;
}

static int quota(struct job *j, long frames, long bytes)
{
	int64_t now = loop_now();
	if (now - j->win_start >= QUOTA_WINDOW_MS) {
		j->win_start = now;
		j->win_frames = 0;
		j->win_bytes = 0;
	}
	j->win_frames += frames;
	j->win_bytes += bytes;
	if (j->win_frames > QUOTA_FRAMES) {
		job_kill(j, "frame flood: more than 2000 frames per second");
		return -1;
	}
	if (j->win_bytes > (long)QUOTA_BYTES) {
		job_kill(j, "byte flood: more than 64 MiB per second on the job socket");
		return -1;
	}
	return 0;
}

/* Hand the frames the reader holds to the owner, one at a time, until none is left (0) or
 * the owner paused, killed or lost the job (-1: the rest stay in the reader). */
static int deliver_frames(struct job *j)
{
	for (;;) {
		struct frame *f = &j->cur;
		if (j->paused)
			return -1;
		int rc = frame_reader_next(j->reader, f);
		if (rc == 0)
			return 0;
		if (rc < 0) {
			job_kill(j, rc == -ELOOP ? "protocol violation: frame nested too deeply"
			          : rc == -E2BIG ? "protocol violation: frame holds more than 1048576 values"
			                         : "protocol violation: malformed frame");
			return -1;
		}
		if (quota(j, 1, 0) < 0) {
			frame_release(f);
			return -1;
		}
		const char *why = NULL;
		rc = j->cb->on_frame(j->owner, j, f, &why);
		/* A pause the frame began keeps it (the owner still reads its bytes) until it ends. */
		if (j->paused)
			j->cur_kept = 1;
		else
			frame_release(f);
		if (rc < 0) {
			job_kill(j, why ? why : "protocol violation");
			return -1;
		}
		if (j->exited || j->sock < 0 || j->violation)
			return -1;
	}
}

/* Read and deliver up to budget bytes of frames; returns the budget left.  Frames a pause
 * left in the reader go first, so the owner sees them in the order the job sent them. */
static size_t drain_sock(struct job *j, size_t budget)
{
	char buf[65536];
	if (deliver_frames(j) < 0)
		return budget;
	while (j->sock >= 0 && !j->violation && !j->paused && budget > 0) {
		ssize_t n = recv(j->sock, buf, sizeof buf, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return budget;
			n = 0;
		}
		if (n == 0) {
			/* Keep the fd for sending until exit, but stop polling it for input. */
			j->sock_eof = 1;
			update_sock_events(j);
			return budget;
		}
		budget = (size_t)n > budget ? 0 : budget - (size_t)n;
		if (quota(j, 0, n) < 0)
			return budget;
		int rc = frame_reader_feed(j->reader, buf, (size_t)n);
		if (rc == -EMSGSIZE) {
			job_kill(j, "protocol violation: frame larger than the limit");
			return budget;
		} else if (rc < 0) {
			job_kill(j, "out of memory reading job frames");
			return budget;
		}
		if (deliver_frames(j) < 0)
			return budget;
	}
	return budget;
}

static void on_sock(struct loop *l, int fd, uint32_t ev, void *arg)
{
	struct job *j = arg;
	(void)l; (void)fd;
	/* On a hang-up too: the failing send drops frames that can no longer be delivered, and
	 * with them the wish for EPOLLOUT. */
	if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		flush_outq(j);
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
		drain_sock(j, READ_PER_TURN);
	/* A peer that hung up with nothing left to read must not spin the loop. */
	if ((ev & (EPOLLHUP | EPOLLERR)) && j->sock >= 0 && !j->sock_eof && !(ev & EPOLLIN) && !j->paused) {
		j->sock_eof = 1;
		update_sock_events(j);
	}
}

/* ---- exit ------------------------------------------------------------------------ */

static void tail_text(const struct job *j, char *out, size_t outlen)
{
	size_t n = j->tail_len < outlen - 1 ? j->tail_len : outlen - 1;
	size_t start = (j->tail_pos + TAIL_BYTES - j->tail_len) % TAIL_BYTES;
	start = (start + (j->tail_len - n)) % TAIL_BYTES;
	for (size_t i = 0; i < n; i++)
		out[i] = j->tail[(start + i) % TAIL_BYTES];
	out[n] = 0;
	/* Keep the text valid UTF-8 and printable: cut a split sequence at the front, replace
	 * bytes that cannot be sent in JSON. */
	size_t k = utf8_resync(out, n);
	size_t w = 0;
	for (size_t i = k; i < n;) {
		unsigned char c = (unsigned char)out[i];
		size_t len = utf8_char_len(out + i, n - i);
		if (len == 0) {
			out[w++] = '?';
			i++;
			continue;
		}
		if (len == 1 && c < 0x20 && c != '\n' && c != '\t')
			c = '?';
		if (len == 1) {
			out[w++] = (char)c;
			i++;
		} else {
			memmove(out + w, out + i, len);
			w += len;
			i += len;
		}
	}
	out[w] = 0;
}

/* The sandbox is built in the child, between clone and exec; the loop only hears how it went. */
static void check_exec(struct job *j)
{
	if (j->execfd < 0)
		return;
	int rc = spawn_exec_result(j->execfd, j->start_error, sizeof j->start_error);
	if (rc == 1)
		return;
	if (rc == 0)
		j->start_error[0] = 0;
	j->start_errno = rc < 0 ? -rc : 0;
	drop_fd(j, &j->execfd, 1);
}

static void on_exec(struct loop *l, int fd, uint32_t ev, void *arg)
{
	(void)l; (void)fd; (void)ev;
	check_exec(arg);
}

static void finish_exit(struct job *j);

/* The leader has ended: kill what is left of its tree, reap it, and end the job, unless the
 * owner has paused it; then the end waits for job_resume (the pidfd leaves the loop, which
 * would report it again every turn). */
static void on_pidfd(struct loop *l, int fd, uint32_t ev, void *arg)
{
	struct job *j = arg;
	(void)l; (void)fd; (void)ev;
	check_exec(j);
	/* Kill what is left of the tree while the leader is a zombie and its pgid still ours. */
	kill(-j->pid, SIGKILL);
	if (j->sb)
		sandbox_job_kill(j->sb);
	memset(&j->reap_si, 0, sizeof j->reap_si);
	memset(&j->reap_ru, 0, sizeof j->reap_ru);
	/* The raw call: glibc's waitid() does not return the rusage. */
	if (syscall(SYS_waitid, P_PIDFD, j->pidfd, &j->reap_si, WEXITED | WNOHANG, &j->reap_ru) < 0 ||
	    j->reap_si.si_pid == 0)
		return;   /* spurious wake-up */
	j->reaped = 1;
	/* Frames and output written just before exit are still buffered: take them first, within
	 * a bound (a grandchild may hold the pipes open forever). */
	j->exit_budget = 4u << 20;
	loop_del_fd(j->sv->loop, j->pidfd);
	finish_exit(j);
}

/* The end of a reaped job: its last frames (unless they pause it again), its last output,
 * then on_exit with everything known about how it ended. */
static void finish_exit(struct job *j)
{
	j->exit_budget = drain_sock(j, j->exit_budget);
	if (j->paused)
		return;
	drain_out(j, 4u << 20);
	logsum_flush(j);
	siginfo_t si = j->reap_si;
	struct rusage ru = j->reap_ru;
	j->exited = 1;
	if (j->kill_timer) {
		loop_timer_cancel(j->sv->loop, j->kill_timer);
		j->kill_timer = NULL;
	}
	if (j->hello_timer) {
		loop_timer_cancel(j->sv->loop, j->hello_timer);
		j->hello_timer = NULL;
	}
	struct job_exit x;
	memset(&x, 0, sizeof x);
	x.exited = si.si_code == CLD_EXITED;
	x.status = si.si_status;
	long long cpu_ms = (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	                   (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
	/* With a PID namespace our child is its init: the job's own end comes from its report
	 * (absent if we killed the init first, and then the init's SIGKILL is the answer). */
	struct spawn_status st;
	int filter_kill = -1;
	if (spawn_read_status(j->statusfd, &st)) {
		x.exited = st.exited;
		x.status = st.status;
		cpu_ms = st.cpu_ms;
		filter_kill = st.seccomp_kill;
	}
	x.killed_by_us = j->killed_by_us;
	x.violation = j->violation;
	if (j->sb && !j->killed_by_us) {
		sandbox_job_verdict(j->sb, x.exited, x.status, cpu_ms, filter_kill, &j->verdict);
		x.sandbox_code = j->verdict.code;
		x.sandbox_message = j->verdict.code ? j->verdict.message : NULL;
		x.limit = j->verdict.limit;
		x.limit_value = j->verdict.value;
	}
	char tail[TAIL_BYTES + 1];
	tail_text(j, tail, sizeof tail);
	x.tail = tail;
	if (j->start_error[0]) {
		x.start_error = j->start_error;
		x.start_errno = j->start_errno;
	}
	job_close_fds(j);
	j->cb->on_exit(j->owner, j, &x);
}

/* ---- pause / resume ---------------------------------------------------------------- */

void job_pause(struct job *j)
{
	j->paused++;
	update_sock_events(j);
}

/* The loop turn after the last job_resume: frames left in the reader, then the socket, then
 * an end that came meanwhile.  Not done inside job_resume, whose caller may still use the
 * job (on_exit frees it). */
static void resume_cb(struct loop *l, void *arg)
{
	struct job *j = arg;
	(void)l;
	j->resume_timer = NULL;
	if (j->paused)
		return;
	if (j->reaped) {
		finish_exit(j);
		return;
	}
	update_sock_events(j);
	drain_sock(j, READ_PER_TURN);
}

void job_resume(struct job *j)
{
	if (j->paused > 0)
		j->paused--;
	if (!j->paused && j->cur_kept) {
		frame_release(&j->cur);
		j->cur_kept = 0;
	}
	if (j->paused || j->resume_timer)
		return;
	j->resume_timer = loop_timer_in(j->sv->loop, 0, resume_cb, j);
	if (!j->resume_timer)
		job_kill(j, "out of memory resuming the job's frames");
}

/* ---- start / free ------------------------------------------------------------------ */

static int plan_sandbox(struct supervisor *sv, const struct job_spec *spec, struct job *j,
                        char *err, size_t errlen)
{
	static const struct sandbox_policy default_cfg = { .profile = "default" };
	const struct sandbox_policy *cfg = spec->sandbox ? spec->sandbox : &default_cfg;
	char helper[4200];
	int rc;
	if (!sv->sandbox && (rc = sandbox_new(&sv->sandbox)) < 0) {
		snprintf(err, errlen, "sandbox: %s", strerror(-rc));
		return rc;
	}
	snprintf(helper, sizeof helper, "%s/forkpoint-job", sv->bin_dir ? sv->bin_dir : "/usr/local/bin");
	struct sandbox_paths paths = {
		.program = spec->argv[0], .helper = helper,
		.work_dir = spec->work_dir ? spec->work_dir : spec->cwd, .cwd = spec->cwd,
		.name = spec->task_id,
		.job_uid = sv->cfg ? sv->cfg->server.job_uid : 0,
		.job_gid = sv->cfg ? sv->cfg->server.job_gid : 0,
	};
	if ((rc = sandbox_job_new(sv->sandbox, cfg, &paths, &j->sb, err, errlen)) < 0)
		return rc;
	if (sandbox_job_trusted(j->sb))
		fplog(&sv->log, FPLOG_WARNING, spec->task_id,
		      "sandbox profile none: %s runs UNCONFINED, with all of this server's rights",
		      spec->argv[0]);
	return 0;
}

/* The log is opened for appending (O_NOFOLLOW: a job cannot swap it for a link to a file of
 * the supervisor's) and its size taken as what is already written, so a retried attempt keeps
 * counting against the same budget instead of starting afresh.  0 or -errno. */
static int open_log(struct job *j, const char *path, char *err, size_t errlen)
{
	j->logfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (j->logfd < 0) {
		int e = errno;
		snprintf(err, errlen, "open %s: %s", path, strerror(e));
		return -e;
	}
	struct stat st;
	if (fstat(j->logfd, &st) == 0)
		j->log_written = st.st_size;
	/* An earlier attempt went past the budget: only the truncation note can have done that. */
	j->log_truncated = j->log_written > j->log_max;
	return 0;
}

/* The job's ends: the frame socketpair, the output pipe and /dev/null for stdin.  All
 * CLOEXEC; spawn dups the child's ends into place.  On failure what was opened stays in the
 * arrays for the caller to close.  0 or -errno. */
static int open_ends(int sock[2], int pp[2], int *devnull, char *err, size_t errlen)
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) < 0 ||
	    pipe2(pp, O_CLOEXEC) < 0) {
		int e = errno;
		snprintf(err, errlen, "socketpair/pipe: %s", strerror(e));
		return -e;
	}
	*devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (*devnull < 0) {
		int e = errno;
		snprintf(err, errlen, "/dev/null: %s", strerror(e));
		return -e;
	}
	return 0;
}

/* Watch a spawned job's descriptors: its end (pidfd), its frames (socket), its output, and
 * the exec pipe that reports a failure before exec.  On failure the caller frees the job:
 * job_free() kills and reaps the child and takes these back out of the loop.  0 or -errno. */
static int watch(struct job *j, char *err, size_t errlen)
{
	struct loop *l = j->sv->loop;
	int rc;
	if ((rc = loop_add_fd(l, j->pidfd, EPOLLIN, on_pidfd, j)) < 0 ||
	    (rc = loop_add_fd(l, j->sock, EPOLLIN, on_sock, j)) < 0 ||
	    (rc = loop_add_fd(l, j->out, EPOLLIN, on_out, j)) < 0 ||
	    (j->execfd >= 0 && (rc = loop_add_fd(l, j->execfd, EPOLLIN, on_exec, j)) < 0)) {
		snprintf(err, errlen, "event loop: %s", strerror(-rc));
		return rc;
	}
	j->sock_polled = 1;
	return 0;
}

/* The job's ends are made before the spawn so the child inherits them: stdin is /dev/null
 * (a job never reads the supervisor's stdin, which is the MCP stream), stdout and stderr share
 * one pipe into the log, and a socketpair carries frames.  After the spawn the parent closes
 * the child's ends at once, so EOF on them means the job is gone. */
int job_start(struct supervisor *sv, const struct job_spec *spec, const struct job_callbacks *cb,
              void *owner, struct job **out, char *err, size_t errlen)
{
	int sv_sock[2] = { -1, -1 }, pp[2] = { -1, -1 }, devnull = -1;
	int rc;
	struct job *j = calloc(1, sizeof *j);
	if (!j) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	j->sv = sv;
	j->cb = cb;
	j->owner = owner;
	j->pidfd = j->sock = j->out = j->logfd = j->statusfd = j->execfd = -1;
	j->log_max = spec->log_max_bytes;
	j->win_start = loop_now();
	snprintf(j->task_id, sizeof j->task_id, "%s", spec->task_id);
	j->reader = frame_reader_new(spec->max_frame);
	if (!j->reader) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if ((rc = open_log(j, spec->log_path, err, errlen)) < 0)
		goto fail;
	if ((rc = open_ends(sv_sock, pp, &devnull, err, errlen)) < 0)
		goto fail;
	if ((rc = plan_sandbox(sv, spec, j, err, errlen)) < 0)
		goto fail;
	struct spawn_req req = {
		.argv = spec->argv, .envp = spec->envp, .cwd = spec->cwd,
		.fd_stdin = devnull, .fd_out = pp[1], .fd_sock = sv_sock[1], .sandbox = j->sb,
		.async = 1,
	};
	struct spawn_proc proc;
	rc = spawn_start(&req, &proc, err, errlen);
	if (rc < 0) {
		/* Reserved for an unmet sandbox.require; a child's own ENOTSUP is just a failure. */
		if (rc == -ENOTSUP)
			rc = -EIO;
		goto fail;
	}
	j->pid = proc.pid;
	j->pidfd = proc.pidfd;
	j->statusfd = proc.statusfd;
	j->execfd = proc.execfd;
	sandbox_job_spawned(j->sb);
	close(devnull);
	close(pp[1]);
	close(sv_sock[1]);
	devnull = pp[1] = sv_sock[1] = -1;
	j->sock = sv_sock[0];
	j->out = pp[0];
	fcntl(j->sock, F_SETFL, O_NONBLOCK);
	fcntl(j->out, F_SETFL, O_NONBLOCK);
	if ((rc = watch(j, err, errlen)) < 0) {
		job_free(j);
		return rc;
	}
	*out = j;
	return 0;
fail:
	if (devnull >= 0)
		close(devnull);
	for (int i = 0; i < 2; i++) {
		if (sv_sock[i] >= 0)
			close(sv_sock[i]);
		if (pp[i] >= 0)
			close(pp[i]);
	}
	frame_reader_free(j->reader);
	if (j->logfd >= 0)
		close(j->logfd);
	sandbox_job_free(j->sb);
	free(j);
	return rc;
}

void job_free(struct job *j)
{
	if (!j)
		return;
	if (!j->exited && !j->reaped && j->pid > 0) {
		kill_tree(j);
		siginfo_t si;
		if (j->pidfd >= 0)
			waitid(P_PIDFD, (id_t)j->pidfd, &si, WEXITED);
		else
			waitpid(j->pid, NULL, 0);
		j->exited = 1;
	}
	if (j->kill_timer)
		loop_timer_cancel(j->sv->loop, j->kill_timer);
	if (j->hello_timer)
		loop_timer_cancel(j->sv->loop, j->hello_timer);
	if (j->resume_timer)
		loop_timer_cancel(j->sv->loop, j->resume_timer);
	job_close_fds(j);
	if (j->cur_kept)
		frame_release(&j->cur);
	frame_reader_free(j->reader);
	wbuf_free(&j->outq);
	/* Only now is the tree gone, so the cgroup can be removed. */
	sandbox_job_free(j->sb);
	free(j);
}
