/* supervisor/core/transfer.c — see transfer.h; docs/files.md is the model-facing description.
 * Calls answer with a struct transfer_reply; the tools over them are supervisor/mcp/files.c.
 *
 * An upload is staged in <state>/uploads/<handle>.part, where no job can reach it, and its
 * commit links those very bytes (or a verified copy) into a folder whose descriptor was
 * opened (through roots.c) when the upload was opened: nothing done to the path afterwards
 * can redirect it.  Every chunk is
 * written at the cursor with pwrite and fdatasync'd before its journal record is appended;
 * the record becomes durable with the turn's group commit, before the answer is released.
 * The running sha256 is an EVP_MD_CTX fed each chunk once; after a restart it is rebuilt from
 * the staged bytes (cut back to the journaled cursor) exactly once, in transfers_recover().
 *
 * A download keeps the descriptor it hashed at open, so the bytes read are the bytes hashed.
 *
 * Journal records (types 64..95, msgpack maps):
 *   64 open    {h, dir, path, size, want, ow, at, dev, ino, sha}
 *   65 chunk   {h, off, len, at}                 the cursor is off + len
 *   66 end     {h, state, sha, size, msg, at}    committed or failed
 *   67 gone    {h, until}                        removed; answers transfer_expired until `until`
 *   68 cursor  {h, cursor, at}                   fewer staged bytes survived than journaled
 *   80 snap    a whole transfer (compaction)
 *   81 tomb    {h, until}                        (compaction) */
#include "supervisor/core/transfer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "proto/b64.h"
#include "state/blob.h"
#include "state/layout.h"
#include "proto/frame.h"
#include "supervisor/core/artifacts.h"
#include "supervisor/core/persist.h"
#include "supervisor/core/task_apply.h"
#include "supervisor/core/roots.h"
#include "supervisor/core/tasks.h"
#include "supervisor/core/tombs.h"
#include "proto/io.h"
#include "supervisor/core/workers.h"

#define XFER_TTL_MS     (7LL * 24 * 3600 * 1000)
#define CHUNK_SIZE      (256 * 1024)
#define CHUNK_MAX       (1024 * 1024)
#define CHUNK_B64_MAX   ((CHUNK_MAX + 2) / 3 * 4)
#define XFER_MAX_BYTES  (64LL << 30)
#define STAGE_PREFIX    ".fp-upload-"   /* reserved in roots: the commit's temporary name */
#define STAGE_DIR       LAYOUT_UPLOADS  /* staged bytes: <state>/uploads/<handle>.part */
#define FH_MAX          128             /* MAX_HANDLE_SZ */
#define FH_HEX          (2 * (FH_MAX + 4) + 1)
#define IO_BUF          (1 << 20)
#define MAX_READY       64          /* transfers holding descriptors at once */
#define JSON_INT_MAX    9007199254740991.0   /* 2^53 - 1: larger integers do not survive JSON */
#define HASH_INLINE_MAX (1 << 20)  /* files up to this are hashed on the loop: quicker than a hop */

enum {
	REC_X_OPEN = 64, REC_X_CHUNK = 65, REC_X_END = 66, REC_X_GONE = 67, REC_X_CURSOR = 68,
	REC_X_INTENT = 69, REC_X_ARTSHA = 70, REC_X_SNAP = 80, REC_X_TOMB = 81,
};

/* Which file or folder, in a way that survives a reboot.  st_dev is only a number the kernel
 * gave the mount this time; the inode number, the file handle (which carries the inode's
 * generation, so a reused inode number differs) and, on most file systems, f_fsid (ext4 and
 * btrfs derive it from the file system's UUID) stay.  See fid_same. */
struct fid {
	uint64_t dev, ino, fsid;
	char fh[FH_HEX];            /* name_to_handle_at, hex of type + bytes; "" if unsupported */
};

enum xdir { X_UPLOAD, X_DOWNLOAD };
enum xstate { XS_ACTIVE, XS_COMMITTED, XS_FAILED };

struct xfer {
	char h[33];
	enum xdir dir;
	enum xstate state;
	char *path;                 /* absolute path inside a root, or a forkpoint:// artifact URI */
	int64_t size;               /* upload: declared (-1: not given); download: the file's */
	char want[65];              /* upload: declared sha256 ("" if none) */
	char sha[65];               /* committed upload, download: the file's sha256 */
	int overwrite;
	int64_t cursor;             /* upload: bytes acknowledged; download: default next offset */
	int64_t last_off, last_len; /* upload: the last acknowledged chunk (duplicate detection) */
	int64_t created_ms, touched_ms, finished_ms;
	struct fid id;              /* upload: destination folder; download: the file */
	struct fid pub;             /* upload: the inode its commit publishes (intent record) */
	int intent;                 /* pub is set: the commit may have been published */
	char *msg;                  /* failed: why */
	/* runtime, not journaled */
	int ready;                  /* descriptors (and hash state) set up */
	int parked;                 /* descriptors closed to save them; hash state kept */
	int committing;             /* a cross-file-system copy for its commit is in the pool */
	struct xack *acks;          /* upload: chunks waiting for their sync, oldest first */
	int rehashing;              /* upload: its staged bytes are being hashed in the pool */
	struct xwait *waiters;      /* calls waiting for that hash, oldest first */
	int64_t dlast_off, dlast_len; /* the last chunk journaled, while acks are pending */
	int dirfd, fd;
	int pubfd;                  /* upload: the inode the commit publishes (fd itself, or a copy) */
	struct timespec mtime, ctime; /* download: the file's times when hashed */
	EVP_MD_CTX *md;
	struct xfer *next;
};

/* An upload chunk written but not acknowledged yet: its staged bytes are being synced in the
 * worker pool.  Answered (and journaled) in order once a sync that covers it is done. */
struct xack {
	int64_t off, len;
	int dup;                    /* a repeat of this chunk: answered as a duplicate */
	struct transfer_later later;
	struct xack *next;
};

/* A write or commit that came while the upload's hash was being rebuilt in the pool. */
struct xwait {
	int commit;                 /* 1 commit, 0 write */
	int64_t off;                /* write: its offset and data (base64, owned) */
	char *data;
	struct transfer_later later;
	struct xwait *next;
};

struct transfers {
	struct supervisor *sv;
	struct roots *roots;
	int updir;                  /* <state>/uploads: staging no job can reach */
	struct xfer *list;
	struct tombs *tombs;        /* removed handles (tombs.h) */
	unsigned char *buf, *buf2;  /* IO_BUF each: chunk decode, duplicate compare, hashing */
	char *enc;                  /* B64_ENCODED_SIZE(CHUNK_MAX) */
	size_t jobs;                /* jobs in the worker pool */
	unsigned long deferred;     /* answers taken to be given later (transfers_deferred) */
	char msg[1024];             /* transfers_msgbuf */
};

/* ---- small helpers ----------------------------------------------------------------------- */

static int64_t now_ms(void)
{
	return loop_wall_ms();
}

static int is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[n] == 0;
}

/* Feed bytes [0, len) of fd into md.  0, -EIO if the file is shorter, or -errno. */
static int hash_range(struct transfers *tr, int fd, int64_t len, EVP_MD_CTX *md)
{
	int64_t off = 0;
	while (off < len) {
		size_t want = (size_t)(len - off < IO_BUF ? len - off : IO_BUF);
		ssize_t r = io_pread_upto(fd, tr->buf2, want, off);
		if (r < 0)
			return (int)r;
		if ((size_t)r < want)
			return -EIO;
		EVP_DigestUpdate(md, tr->buf2, (size_t)r);
		off += r;
	}
	return 0;
}

/* A fresh sha256 context, or NULL: the callers turn NULL into out of memory. */
static EVP_MD_CTX *md_new(void)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		md = NULL;
	}
	return md;
}

/* The hex digest of md so far, leaving md as it is (uploads keep appending after a failed
 * commit). */
static int md_peek(EVP_MD_CTX *md, char out[65])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	int rc = -ENOMEM;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (c && EVP_MD_CTX_copy_ex(c, md) == 1 && EVP_DigestFinal_ex(c, d, &n) == 1 && n == 32) {
		io_hex(d, 32, out);
		rc = 0;
	}
	EVP_MD_CTX_free(c);
	return rc;
}

/* The staged bytes' name in <state>/uploads, and the temporary name a commit with overwrite
 * links them to in the destination folder. */
static void stage_name(const struct xfer *x, char *buf, size_t len)
{
	snprintf(buf, len, "%s.part", x->h);
}

static void temp_name(const struct xfer *x, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s.part", STAGE_PREFIX, x->h);
}

/* A cross-file-system copy's name where O_TMPFILE is missing. */
static void copy_name(const struct xfer *x, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s.copy", STAGE_PREFIX, x->h);
}

/* Everything that identifies the object behind fd across a reboot (see struct fid); the fsid
 * and file handle are best effort and stay 0 / "" where the file system has none. */
static void fid_of_stat(const struct stat *st, int fd, struct fid *f)
{
	struct statfs sf;
	union { struct file_handle h; char b[sizeof(struct file_handle) + FH_MAX]; } u;
	int mnt;
	memset(f, 0, sizeof *f);
	f->dev = (uint64_t)st->st_dev;
	f->ino = (uint64_t)st->st_ino;
	if (fstatfs(fd, &sf) == 0) {
		uint32_t a, b;
		memcpy(&a, &sf.f_fsid, 4);
		memcpy(&b, (char *)&sf.f_fsid + 4, 4);
		f->fsid = (uint64_t)a << 32 | b;
	}
	u.h.handle_bytes = FH_MAX;
	if (name_to_handle_at(fd, "", &u.h, &mnt, AT_EMPTY_PATH) == 0 && u.h.handle_bytes <= FH_MAX) {
		unsigned char t[4];
		memcpy(t, &u.h.handle_type, 4);
		io_hex(t, 4, f->fh);
		io_hex(u.h.f_handle, u.h.handle_bytes, f->fh + 8);
	}
}

/* The identity of an open file or folder.  0 or -errno. */
static int fid_of(int fd, struct fid *f)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	fid_of_stat(&st, fd, f);
	return 0;
}

/* Is `now` the object `rec` was recorded from?  The inode number must match, and then one
 * more thing that tells file systems apart: the same st_dev (no reboot since), the same
 * non-zero f_fsid (a UUID-derived fsid survives reboots), or the same file handle (inode
 * number and generation; also for file systems whose fsid is the device number, like XFS).
 * The threat is a folder or file replaced under the same path, which gets another inode (or
 * generation); a different file system mounted at the same path by the operator whose root
 * happens to look the same is not one. */
static int fid_same(const struct fid *rec, const struct fid *now)
{
	if (rec->ino != now->ino)
		return 0;
	return rec->dev == now->dev || (rec->fsid && rec->fsid == now->fsid) ||
	       (rec->fh[0] && strcmp(rec->fh, now->fh) == 0);
}

static const char *last_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* ---- failures ---------------------------------------------------------------------------- */

/* Fill a failure: code, hint and a printf-style message.  No cursor, parameter or roots unless
 * the caller adds them. */
void transfer_error_set(struct transfer_error *e, const char *code, int retryable, const char *hint,
                        const char *fmt, ...)
{
	va_list ap;
	memset(e, 0, sizeof *e);
	snprintf(e->code, sizeof e->code, "%s", code);
	snprintf(e->hint, sizeof e->hint, "%s", hint ? hint : "");
	e->retryable = retryable;
	e->cursor = -1;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
}

/* The same, with where the upload goes on (the client resumes there). */
static void with_cursor(struct transfer_error *e, int64_t cursor)
{
	e->cursor = cursor;
}

void transfer_error_param(struct transfer_error *e, const char *param, const char *hint, const char *msg)
{
	transfer_error_set(e, "invalid_param", 1,
		hint ? hint : "Fix the named parameter (see the tool's inputSchema) and call again.", "%s", msg);
	snprintf(e->param, sizeof e->param, "%s", param);
}

/* A path that roots.c refused: not_found when it simply is not there, invalid_param (with the
 * allowed roots) for everything that is not allowed. */
static void path_error(struct transfer_error *e, int rc, const char *msg)
{
	if (rc == -ENOENT || rc == -ENOTDIR)
		transfer_error_set(e, "not_found", 0,
			"Check the path: it is relative to the first file root, or absolute inside one of "
			"allowedRoots. Symbolic links are not followed.", "%s", msg);
	else
		transfer_error_param(e, "path", "Give a path inside one of allowedRoots (relative paths start "
		              "at the first root), without '..' or symbolic links.", msg);
	e->roots = 1;
}

/* A handle that names no transfer: expired (a tombstone remembers it for a while) or never
 * known. */
static void unknown_handle(const struct transfers *tr, const char *h, struct transfer_error *e)
{
	if (tombs_find(tr->tombs, h) != 0) {
		transfer_error_set(e, "transfer_expired", 0,
			"Start again with file_transfer_open; transfers expire 7 days after their last use.",
			"Transfer %s expired and was removed (with its staged bytes).", h);
		return;
	}
	transfer_error_set(e, "unknown_transfer", 0,
		"Check the handle (32 hex digits, as file_transfer_open returned it). If it is lost, "
		"call file_transfer_open again with the same path, size and sha256: an unfinished "
		"upload of that path is resumed under its old handle.",
		"No transfer has handle '%.64s'.", h);
}

/* The envelope tasks and tools carry: task_envelope, then the optional parts in the order the
 * tools have always answered with them (param, partial, allowedRoots). */
cJSON *transfer_error_envelope(const struct transfer_error *e, const struct roots *roots)
{
	cJSON *env = task_envelope(e->code, e->message, e->retryable, e->hint);
	if (!env)
		return NULL;
	if (e->param[0])
		cJSON_AddStringToObject(env, "param", e->param);
	if (e->cursor >= 0) {
		cJSON *p = cJSON_AddObjectToObject(env, "partial");
		cJSON_AddNumberToObject(p, "cursor", (double)e->cursor);
	}
	if (e->roots) {
		cJSON *a = cJSON_AddArrayToObject(env, "allowedRoots");
		for (size_t i = 0; roots && i < roots_count(roots); i++)
			cJSON_AddItemToArray(a, cJSON_CreateString(roots_path(roots, i)));
	}
	return env;
}

const struct roots *transfers_roots(const struct transfers *tr)
{
	return tr->roots;
}

/* ---- journal ----------------------------------------------------------------------------- */

/* Append a transfer record.  0 or -errno (logged: a transfer's promise could not be made). */
static int rec_put(struct transfers *tr, struct store_rec *r)
{
	int rc = persist_append_rec(tr->sv->persist, r);
	if (rc < 0)
		fplog(&tr->sv->log, FPLOG_CRITICAL, NULL, "journal append of a transfer record failed: %s",
		      strerror(-rc));
	return rc;
}

static const char *dir_name(enum xdir d)
{
	return d == X_UPLOAD ? "upload" : "download";
}

static const char *state_name(enum xstate s)
{
	return s == XS_ACTIVE ? "active" : s == XS_COMMITTED ? "completed" : "failed";
}

static void fid_rec(const struct fid *f, struct store_fid *out)
{
	out->dev = (int64_t)f->dev;
	out->ino = (int64_t)f->ino;
	out->fsid = (int64_t)f->fsid;
	out->fh = f->fh;
}

/* A record of type about x: its handle, and the fields open and snap records share
 * (replay_new reads them). */
static void rec_of(struct store_rec *r, enum store_rec_type type, const struct xfer *x)
{
	memset(r, 0, sizeof *r);
	r->type = type;
	struct store_xfer *o = &r->u.xfer;
	o->h = x->h;
	o->dir = dir_name(x->dir);
	o->path = x->path;
	o->size = x->size;
	o->want = x->want;
	o->ow = x->overwrite;
	o->at = x->created_ms;
	fid_rec(&x->id, &o->id);
	o->sha = x->sha;
}

/* The inode a commit is about to publish, durable before it appears at the destination: after
 * a crash, finding that inode there means the commit happened. */
static void rec_intent(struct store_rec *r, const struct xfer *x)
{
	r->u.xfer.has_intent = 1;
	fid_rec(&x->pub, &r->u.xfer.pub);
	r->u.xfer.psha = x->sha;
}

static int j_intent(struct transfers *tr, const struct xfer *x)
{
	struct store_rec r;
	rec_of(&r, STORE_REC_X_INTENT, x);
	rec_intent(&r, x);
	return rec_put(tr, &r);
}

static void j_open(struct transfers *tr, const struct xfer *x)
{
	struct store_rec r;
	rec_of(&r, STORE_REC_X_OPEN, x);
	rec_put(tr, &r);
}

static void j_chunk_at(struct transfers *tr, const struct xfer *x, int64_t off, int64_t len)
{
	struct store_rec r;
	rec_of(&r, STORE_REC_X_CHUNK, x);
	r.u.xfer.off = off;
	r.u.xfer.len = len;
	r.u.xfer.at = x->touched_ms;
	rec_put(tr, &r);
}

static void j_chunk(struct transfers *tr, const struct xfer *x)
{
	j_chunk_at(tr, x, x->last_off, x->last_len);
}

static void j_end(struct transfers *tr, const struct xfer *x)
{
	struct store_rec r;
	rec_of(&r, STORE_REC_X_END, x);
	r.u.xfer.state = state_name(x->state);
	r.u.xfer.msg = x->msg ? x->msg : "";
	r.u.xfer.at = x->finished_ms;
	rec_put(tr, &r);
}

static void j_cursor(struct transfers *tr, const struct xfer *x)
{
	struct store_rec r;
	rec_of(&r, STORE_REC_X_CURSOR, x);
	r.u.xfer.cursor = x->cursor;
	r.u.xfer.at = x->touched_ms;
	rec_put(tr, &r);
}

static int j_tomb(struct transfers *tr, uint8_t type, const char *h, int64_t until)
{
	struct store_rec r = { .type = (enum store_rec_type)type };
	r.u.xfer.h = h;
	r.u.xfer.until = until;
	return rec_put(tr, &r);
}

static int j_snap(struct transfers *tr, const struct xfer *x)
{
	struct store_rec r;
	rec_of(&r, STORE_REC_X_SNAP, x);
	if (x->intent)
		rec_intent(&r, x);
	r.u.xfer.touched = x->touched_ms;
	r.u.xfer.finished = x->finished_ms;
	r.u.xfer.cursor = x->cursor;
	r.u.xfer.loff = x->last_off;
	r.u.xfer.llen = x->last_len;
	r.u.xfer.state = state_name(x->state);
	r.u.xfer.msg = x->msg ? x->msg : "";
	return rec_put(tr, &r);
}

/* ---- the table ----------------------------------------------------------------------------- */

static struct xfer *find(struct transfers *tr, const char *h)
{
	for (struct xfer *x = tr->list; x; x = x->next)
		if (strcmp(x->h, h) == 0)
			return x;
	return NULL;
}

/* A transfer with no descriptors and no declared size yet; the caller fills the rest. */
static struct xfer *xfer_alloc(const char *h)
{
	struct xfer *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	snprintf(x->h, sizeof x->h, "%s", h);
	x->dirfd = x->fd = x->pubfd = -1;
	x->size = -1;
	return x;
}

/* Close the descriptors; the hash state stays, so a parked upload is not hashed again. */
static void xfer_park(struct xfer *x)
{
	if (x->fd >= 0)
		close(x->fd);
	if (x->dirfd >= 0)
		close(x->dirfd);
	if (x->pubfd >= 0)
		close(x->pubfd);
	x->fd = x->dirfd = x->pubfd = -1;
	x->parked = x->ready;
	x->ready = 0;
}

static void xfer_close(struct xfer *x)
{
	xfer_park(x);
	x->parked = 0;
	EVP_MD_CTX_free(x->md);
	x->md = NULL;
}

typedef void reply_fn(const struct xfer *x, struct transfer_reply *r);
static void answer_acks(struct xfer *x, reply_fn *r_of);

/* Calls still waiting on x are dropped, not answered: x goes away only when the table does or
 * when it expires, and neither has an answer to give. */
static void xfer_free(struct xfer *x)
{
	answer_acks(x, NULL);
	while (x->waiters) {
		struct xwait *w = x->waiters;
		x->waiters = w->next;
		if (w->later.drop)
			w->later.drop(w->later.ctx);
		free(w->data);
		free(w);
	}
	xfer_close(x);
	free(x->path);
	free(x->msg);
	free(x);
}

/* Take x out of the list (it is not freed). */
static void unlink_xfer(struct transfers *tr, struct xfer *x)
{
	for (struct xfer **pp = &tr->list; *pp; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			return;
		}
	}
}

static void set_msg(struct xfer *x, const char *msg)
{
	free(x->msg);
	x->msg = msg ? strdup(msg) : NULL;
}

/* Best effort: remove an upload's staged bytes (in the state dir) and the temporary name a
 * commit with overwrite may have left in the destination folder (only through the folder
 * descriptor the upload holds: a same-named folder made later is someone else's). */
static void remove_stage(struct transfers *tr, struct xfer *x)
{
	char name[80];
	if (x->dir != X_UPLOAD)
		return;
	stage_name(x, name, sizeof name);
	if (tr->updir >= 0)
		unlinkat(tr->updir, name, 0);
	if (x->dirfd >= 0) {
		temp_name(x, name, sizeof name);
		unlinkat(x->dirfd, name, 0);
		copy_name(x, name, sizeof name);
		unlinkat(x->dirfd, name, 0);
	}
}

/* A transfer that cannot go on answers not_active from now on; an upload's staged bytes are
 * dropped. */
static void ack_not_active(const struct xfer *x, struct transfer_reply *r);

static void run_waiters(struct transfers *tr, struct xfer *x, int ran);

/* A transfer that cannot go on: its end record says why, calls waiting on it answer
 * not_active now, and an upload's staged bytes go. */
static void fail_xfer(struct transfers *tr, struct xfer *x, const char *why)
{
	remove_stage(tr, x);
	xfer_close(x);
	x->state = XS_FAILED;
	x->rehashing = 0;
	set_msg(x, why);
	x->finished_ms = x->touched_ms = now_ms();
	j_end(tr, x);
	answer_acks(x, ack_not_active);
	run_waiters(tr, x, 1);   /* they answer not_active now */
}

/* Forget a transfer: staged bytes deleted, the handle answers transfer_expired for a TTL. */
static void remove_xfer(struct transfers *tr, struct xfer *x, int64_t now)
{
	if (x->dir == X_UPLOAD && x->state == XS_ACTIVE)
		remove_stage(tr, x);
	unlink_xfer(tr, x);
	tombs_add(tr->tombs, x->h, now + XFER_TTL_MS);
	j_tomb(tr, REC_X_GONE, x->h, now + XFER_TTL_MS);
	xfer_free(x);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

/* The table, its I/O buffers (allocated once: every chunk goes through them) and the file
 * roots.  Staged bytes live where no job can write: a job that can write a file root must not
 * be able to swap them between the hash and the commit. */
struct transfers *transfers_new(struct supervisor *sv)
{
	struct transfers *tr = calloc(1, sizeof *tr);
	if (!tr)
		return NULL;
	tr->sv = sv;
	tr->updir = -1;
	if (sv->state_dir) {
		/* Staged bytes live where no job can write: a job that can write a file root must
		 * not be able to swap them between the hash and the commit. */
		int sd = open(sv->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sd >= 0 && (mkdirat(sd, STAGE_DIR, 0700) == 0 || errno == EEXIST))
			tr->updir = openat(sd, STAGE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sd >= 0)
			close(sd);
	}
	tr->buf = malloc(IO_BUF + 16);
	tr->buf2 = malloc(IO_BUF + 16);
	tr->enc = malloc(B64_ENCODED_SIZE(CHUNK_MAX));
	tr->tombs = tombs_new();
	if (!tr->buf || !tr->buf2 || !tr->enc || !tr->tombs)
		goto fail;
	if (roots_new(sv->cfg ? sv->cfg->server.file_roots : NULL, sv->cfg ? sv->cfg->server.n_file_roots : 0, 0,
	              &tr->roots) < 0)
		goto fail;
	return tr;
fail:
	transfers_free(tr);
	return NULL;
}

/* Everything goes; calls still waiting on a transfer are dropped, not answered. */
void transfers_free(struct transfers *tr)
{
	if (!tr)
		return;
	while (tr->list) {
		struct xfer *x = tr->list;
		tr->list = x->next;
		xfer_free(x);
	}
	tombs_free(tr->tombs);
	roots_free(tr->roots);
	if (tr->updir >= 0)
		close(tr->updir);
	free(tr->buf);
	free(tr->buf2);
	free(tr->enc);
	free(tr);
}

/* ---- replay --------------------------------------------------------------------------------- */

/* A string into a fixed buffer, as the records have always been read: only when it is there
 * and fits (the buffer is left as it was otherwise).  0, or -1 when it was not copied. */
static int copy_fit(char *dst, size_t size, const char *src)
{
	if (!src || strlen(src) >= size)
		return -1;
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/* A record's failure message; an empty one means none. */
static void replay_msg(struct xfer *x, const struct store_xfer *m)
{
	char *msg = m->msg && *m->msg ? strdup(m->msg) : NULL;
	free(x->msg);
	x->msg = msg;
}

static int parse_state(const char *s)
{
	if (strcmp(s, "active") == 0)
		return XS_ACTIVE;
	if (strcmp(s, "completed") == 0)
		return XS_COMMITTED;
	if (strcmp(s, "failed") == 0)
		return XS_FAILED;
	return -1;
}

/* A state field: its value, or -1 when absent, too long or unknown. */
static int rec_state(const struct store_xfer *m)
{
	char st[16];
	return copy_fit(st, sizeof st, m->state) == 0 ? parse_state(st) : -1;
}

/* An intent record's fields (also in a snap record of a transfer that has one). */
static void replay_intent(struct xfer *x, const struct store_xfer *m)
{
	if (!m->has_intent)
		return;
	x->intent = 1;
	x->pub.dev = (uint64_t)m->pub.dev;
	x->pub.ino = (uint64_t)m->pub.ino;
	x->pub.fsid = (uint64_t)m->pub.fsid;
	copy_fit(x->pub.fh, sizeof x->pub.fh, m->pub.fh);
	copy_fit(x->sha, sizeof x->sha, m->psha);
}

/* The fields open and snap records share. */
static struct xfer *replay_new(struct transfers *tr, const char *h, const struct store_xfer *m,
                               char *err, size_t errlen)
{
	char dir[16];
	struct xfer *x = NULL;
	if (find(tr, h)) {
		snprintf(err, errlen, "transfer %s opened twice", h);
		return NULL;
	}
	if (copy_fit(dir, sizeof dir, m->dir) < 0 || (strcmp(dir, "upload") && strcmp(dir, "download"))) {
		snprintf(err, errlen, "transfer %s: record without a direction", h);
		return NULL;
	}
	x = xfer_alloc(h);
	if (!x || !m->path || !(x->path = strdup(m->path))) {
		snprintf(err, errlen, "transfer %s: record without a path", h);
		if (x)
			xfer_free(x);
		return NULL;
	}
	x->dir = strcmp(dir, "upload") == 0 ? X_UPLOAD : X_DOWNLOAD;
	x->size = m->has_size ? m->size : -1;
	copy_fit(x->want, sizeof x->want, m->want);
	copy_fit(x->sha, sizeof x->sha, m->sha);
	x->overwrite = m->ow != 0;
	x->created_ms = x->touched_ms = m->at;
	x->id.dev = (uint64_t)m->id.dev;
	x->id.ino = (uint64_t)m->id.ino;
	x->id.fsid = (uint64_t)m->id.fsid;
	copy_fit(x->id.fh, sizeof x->id.fh, m->id.fh);
	replay_intent(x, m);
	x->next = tr->list;
	tr->list = x;
	return x;
}

/* An artifact hashed after its task finished: its digest goes into the task's list. */
static int replay_artsha(struct supervisor *sv, const struct store_xfer *m, char *err, size_t errlen)
{
	char id[33], name[NAME_MAX + 1], sha[65] = "", status[16] = "failed";
	if (copy_fit(id, sizeof id, m->task) < 0 || copy_fit(name, sizeof name, m->name) < 0) {
		snprintf(err, errlen, "artifact digest record without a task or name");
		return -1;
	}
	copy_fit(sha, sizeof sha, m->sha);
	if (copy_fit(status, sizeof status, m->status) < 0 || !status[0])
		snprintf(status, sizeof status, "failed");
	struct task *t = sv->tasks ? tasks_find(sv->tasks, id) : NULL;
	if (!t)
		return 0;   /* the task expired later in the journal */
	struct store_rec r = { .type = STORE_REC_X_ARTSHA };
	r.u.xfer.name = name;
	r.u.xfer.sha = sha;
	r.u.xfer.status = status;
	return task_apply(t, &r, err, errlen) < 0 ? -1 : 0;
}

int transfer_replay_tasks(struct supervisor *sv, int type, const struct store_xfer *rec)
{
	char err[200];
	if (type == REC_X_ARTSHA)
		replay_artsha(sv, rec, err, sizeof err);
	return 0;
}

/* A record that changes a transfer already known. */
static int replay_change(struct xfer *x, int type, const struct store_xfer *m, char *err, size_t errlen)
{
	switch (type) {
	case REC_X_CHUNK:
		x->last_off = m->off;
		x->last_len = m->len;
		x->cursor = x->last_off + x->last_len;
		x->touched_ms = m->has_at ? m->at : x->touched_ms;
		return 0;
	case REC_X_INTENT:
		replay_intent(x, m);
		return x->intent ? 0 : (snprintf(err, errlen, "transfer %s: intent record without an inode", x->h), -1);
	case REC_X_CURSOR:
		x->cursor = m->cursor;
		x->last_off = x->cursor;
		x->last_len = 0;
		x->touched_ms = m->has_at ? m->at : x->touched_ms;
		return 0;
	case REC_X_END: {
		int s = rec_state(m);
		if (s != XS_COMMITTED && s != XS_FAILED) {
			snprintf(err, errlen, "transfer %s: end record with a bad state", x->h);
			return -1;
		}
		x->state = (enum xstate)s;
		copy_fit(x->sha, sizeof x->sha, m->sha);
		x->size = m->has_size ? m->size : x->size;
		replay_msg(x, m);
		x->finished_ms = x->touched_ms = m->has_at ? m->at : x->touched_ms;
		return 0;
	}
	default:
		snprintf(err, errlen, "unknown transfer record type %d (written by a newer forkpoint?)", type);
		return -1;
	}
}

int transfer_replay(struct transfers *tr, int type, const struct store_xfer *m, char *err, size_t errlen)
{
	char h[33];
	if (type == REC_X_ARTSHA)
		return replay_artsha(tr->sv, m, err, errlen);
	if (copy_fit(h, sizeof h, m->h) < 0 || strlen(h) != 32) {
		snprintf(err, errlen, "transfer record of type %d has no valid handle", type);
		return -1;
	}
	struct xfer *x = find(tr, h);
	switch (type) {
	case REC_X_OPEN:
		return replay_new(tr, h, m, err, errlen) ? 0 : -1;
	case REC_X_SNAP: {
		if (!(x = replay_new(tr, h, m, err, errlen)))
			return -1;
		x->touched_ms = m->has_touched ? m->touched : x->created_ms;
		x->finished_ms = m->finished;
		x->cursor = m->cursor;
		x->last_off = m->loff;
		x->last_len = m->llen;
		int s = rec_state(m);
		if (s < 0) {
			snprintf(err, errlen, "transfer %s: unknown state", h);
			return -1;
		}
		x->state = (enum xstate)s;
		replay_msg(x, m);
		return 0;
	}
	case REC_X_GONE:
	case REC_X_TOMB:
		if (x) {
			unlink_xfer(tr, x);
			xfer_free(x);
		}
		return tombs_add(tr->tombs, h, m->until) < 0 ? -1 : 0;
	default:
		break;
	}
	if (!x) {
		snprintf(err, errlen, "transfer record of type %d for unknown transfer %s", type, h);
		return -1;
	}
	return replay_change(x, type, m, err, errlen);
}

struct snap_tombs {
	struct transfers *tr;
	int rc;
};

/* One tombstone into the snapshot; after a failure the rest are skipped. */
static void snap_tomb(void *arg, const char *h, int64_t until)
{
	struct snap_tombs *st = arg;
	if (st->rc == 0)
		st->rc = j_tomb(st->tr, REC_X_TOMB, h, until);
}

int transfer_snapshot(struct transfers *tr)
{
	int rc = 0;
	for (struct xfer *x = tr->list; x && rc == 0; x = x->next)
		rc = j_snap(tr, x);
	struct snap_tombs st = { tr, rc };
	tombs_each(tr->tombs, snap_tomb, &st);
	return st.rc;
}

/* ---- recovery -------------------------------------------------------------------------------- */

/* Did a commit of x reach its destination?  1 when the name holds the inode the intent
 * record named (the commit was published, its end record may not have been), else 0. */
static int published(struct xfer *x, const char *name)
{
	struct fid now;
	if (!x->intent || x->dirfd < 0)
		return 0;
	int f = openat(x->dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int same = f >= 0 && fid_of(f, &now) == 0 && fid_same(&x->pub, &now);
	if (f >= 0)
		close(f);
	return same;
}

/* The upload is in place: record it (the caller answers). */
static void mark_committed(struct transfers *tr, struct xfer *x)
{
	char name[80];
	x->size = x->cursor;
	x->state = XS_COMMITTED;
	x->finished_ms = x->touched_ms = now_ms();
	if (x->dirfd >= 0) {
		copy_name(x, name, sizeof name);
		unlinkat(x->dirfd, name, 0);
	}
	stage_name(x, name, sizeof name);
	xfer_close(x);
	j_end(tr, x);
	if (tr->updir >= 0)
		unlinkat(tr->updir, name, 0);
}

/* The destination folder again, by path, and check it is the folder the upload was opened in
 * (fid_same: a reboot that renumbered its st_dev is fine, a replaced folder is not). */
static int reopen_folder(struct transfers *tr, struct xfer *x, struct roots_loc *loc, char *why, size_t whylen)
{
	char err[600];
	struct fid now;
	int rc;
	if (!tr->roots || (rc = roots_open_parent(tr->roots, x->path, &x->dirfd, loc, err, sizeof err)) < 0) {
		snprintf(why, whylen, "The destination folder could not be opened again: %s",
		         tr->roots ? err : "no file roots");
		return -ENOENT;
	}
	if (fid_of(x->dirfd, &now) < 0 || !fid_same(&x->id, &now)) {
		snprintf(why, whylen, "The destination folder of %s is no longer the folder the upload was "
		         "opened in (it was replaced)", x->path);
		return -ESTALE;
	}
	if (now.dev != x->id.dev)
		fplog(&tr->sv->log, FPLOG_NOTICE, NULL, "transfer %s: the destination folder's device number "
		      "changed (a reboot?); same inode and file system, so the upload goes on", x->h);
	return 0;
}

static int rehash_later(struct transfers *tr, struct xfer *x);

/* Set up an upload's descriptors and hash state from what is on disk (after a restart, or when
 * a parked upload is used again).  0, or -errno with the reason in why (the caller then fails
 * the upload). */
static int upload_reopen(struct transfers *tr, struct xfer *x, char *why, size_t whylen)
{
	char name[80];
	struct roots_loc loc;
	struct stat st;
	int rc;
	if ((rc = reopen_folder(tr, x, &loc, why, whylen)) < 0)
		return rc;
	if (published(x, loc.name)) {
		/* Published, but the end record did not make it to the journal before a crash. */
		mark_committed(tr, x);
		return 0;
	}
	stage_name(x, name, sizeof name);
	x->fd = tr->updir < 0 ? -1 : openat(tr->updir, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (x->fd < 0 && errno == ENOENT) {
		/* The staged bytes are gone: start the upload over under the same handle. */
		x->fd = openat(tr->updir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		EVP_MD_CTX_free(x->md);
		x->md = NULL;
		if (x->fd >= 0 && x->cursor != 0) {
			fplog(&tr->sv->log, FPLOG_WARNING, NULL, "transfer %s: staging file was missing; the upload "
			      "restarts at offset 0", x->h);
			x->cursor = x->last_off = x->last_len = 0;
			j_cursor(tr, x);
		}
	}
	if (x->fd < 0 || fstat(x->fd, &st) < 0) {
		rc = -errno;
		snprintf(why, whylen, "The staged bytes could not be opened again: %s", strerror(-rc));
		return rc;
	}
	if (st.st_size < x->cursor) {
		/* Fewer bytes survived than were acknowledged (a lying disk): go back to what is
		 * there; the client is told the lower cursor by offset_mismatch. */
		fplog(&tr->sv->log, FPLOG_WARNING, NULL, "transfer %s: %lld staged bytes, %lld acknowledged; "
		      "resuming at %lld", x->h, (long long)st.st_size, (long long)x->cursor, (long long)st.st_size);
		x->cursor = st.st_size;
		x->last_off = x->cursor;
		x->last_len = 0;
		EVP_MD_CTX_free(x->md);
		x->md = NULL;
		j_cursor(tr, x);
	}
	/* Bytes past the cursor were written but never acknowledged: they will be sent again. */
	if (st.st_size > x->cursor && ftruncate(x->fd, x->cursor) < 0) {
		rc = -errno;
		snprintf(why, whylen, "The staged bytes could not be cut back to the cursor: %s", strerror(-rc));
		return rc;
	}
	/* A parked upload kept its hash state: only a restart hashes the staged bytes again — in
	 * the pool when they are large; writes and commits wait for it (rehash_later). */
	if (!x->md && !x->rehashing && rehash_later(tr, x) < 0) {
		if (!(x->md = md_new()))
			return -ENOMEM;
		if ((rc = hash_range(tr, x->fd, x->cursor, x->md)) < 0) {
			snprintf(why, whylen, "The staged bytes could not be read: %s", strerror(-rc));
			return rc;
		}
	}
	x->ready = 1;
	x->parked = 0;
	return 0;
}

static void limit_ready(struct transfers *tr, const struct xfer *keep);
static void rehash_artifacts(struct transfers *tr);

/* After replay: expired transfers go, active uploads get their descriptors and hash back (or
 * fail with the reason in the log); downloads are reopened on first use instead, since checking
 * one means hashing the whole file again. */
void transfers_recover(struct transfers *tr)
{
	int64_t now = now_ms();
	char why[1000];
	for (struct xfer *x = tr->list, *next; x; x = next) {
		next = x->next;
		int64_t base = x->state == XS_ACTIVE ? x->touched_ms : x->finished_ms;
		if (base + XFER_TTL_MS <= now) {
			remove_xfer(tr, x, now);
			continue;
		}
		if (x->dir != X_UPLOAD || x->state != XS_ACTIVE)
			continue;   /* downloads reopen (and re-verify) on first use */
		why[0] = 0;
		if (upload_reopen(tr, x, why, sizeof why) < 0) {
			fplog(&tr->sv->log, FPLOG_ERROR, NULL, "transfer %s: %s", x->h, why);
			fail_xfer(tr, x, why[0] ? why : "The staged bytes could not be recovered after a restart.");
		}
		limit_ready(tr, NULL);
	}
	tombs_prune(tr->tombs, now);   /* their handles become merely unknown */
	rehash_artifacts(tr);
}

/* Transfers unused for XFER_TTL_MS are forgotten (their handles answer transfer_expired for
 * another TTL); the number removed is returned for the log. */
size_t transfers_collect(struct transfers *tr, int64_t now)
{
	size_t n = 0;
	for (struct xfer *x = tr->list, *next; x; x = next) {
		next = x->next;
		int64_t base = x->state == XS_ACTIVE ? x->touched_ms : x->finished_ms;
		if (base + XFER_TTL_MS <= now) {
			fplog(&tr->sv->log, FPLOG_INFO, NULL, "transfer %s (%s of %s) expired", x->h,
			      dir_name(x->dir), x->path);
			remove_xfer(tr, x, now);
			n++;
		}
	}
	tombs_prune(tr->tombs, now);   /* their handles become merely unknown */
	return n;
}

/* At most MAX_READY transfers hold descriptors: beyond that the one unused longest is parked.
 * A parked transfer is opened again, and checked, on its next use, exactly as after a restart. */
static void limit_ready(struct transfers *tr, const struct xfer *keep)
{
	size_t n = 0;
	struct xfer *lru = NULL;
	for (struct xfer *x = tr->list; x; x = x->next) {
		if (!x->ready)
			continue;
		n++;
		if (x != keep && !x->committing && (!lru || x->touched_ms < lru->touched_ms))
			lru = x;
	}
	if (n > MAX_READY && lru)
		xfer_park(lru);
}

/* An active upload with its descriptors and hash state; -1 if they cannot be had (the upload
 * is failed then, and answers not_active). */
static int upload_ready(struct transfers *tr, struct xfer *x)
{
	char why[1000] = "";
	if (x->ready || x->state != XS_ACTIVE)
		return 0;
	if (upload_reopen(tr, x, why, sizeof why) == 0)
		return 0;
	fail_xfer(tr, x, why[0] ? why : "The staged bytes could not be opened again.");
	return -1;
}

/* ---- replies ------------------------------------------------------------------------------ */

static int64_t expires_at(const struct xfer *x)
{
	return (x->state == XS_ACTIVE ? x->touched_ms : x->finished_ms) + XFER_TTL_MS;
}

/* A reply of this kind about x: the transfer's fields, no failure. */
static void reply_of(const struct xfer *x, enum transfer_kind kind, struct transfer_reply *r)
{
	memset(r, 0, sizeof *r);
	r->kind = kind;
	r->err.cursor = r->failure.cursor = -1;
	memcpy(r->handle, x->h, sizeof r->handle);
	r->upload = x->dir == X_UPLOAD;
	r->path = x->path;
	r->size = x->size;
	memcpy(r->want, x->want, sizeof r->want);
	memcpy(r->sha, x->sha, sizeof r->sha);
	r->state = x->state == XS_ACTIVE ? TRANSFER_ACTIVE : x->state == XS_COMMITTED ? TRANSFER_COMMITTED
	                                                                            : TRANSFER_FAILED;
	r->next_offset = x->cursor;
	r->expires_ms = expires_at(x);
	r->chunk_size = CHUNK_SIZE;
	r->max_chunk_size = CHUNK_MAX;
}

/* Clear r for a failure and return its error to fill. */
static struct transfer_error *failure(struct transfer_reply *r)
{
	memset(r, 0, sizeof *r);
	r->failure.cursor = -1;
	return &r->err;
}

static void upload_opened(const struct xfer *x, int resumed, struct transfer_reply *r)
{
	reply_of(x, TRANSFER_OPENED, r);
	r->again = resumed;
}

static void committed_view(const struct xfer *x, int again, struct transfer_reply *r)
{
	reply_of(x, TRANSFER_DONE, r);
	r->again = again;
}

/* ---- open ------------------------------------------------------------------------------------ */

static struct xfer *active_upload_of(struct transfers *tr, const char *abs)
{
	for (struct xfer *x = tr->list; x; x = x->next)
		if (x->dir == X_UPLOAD && x->state == XS_ACTIVE && strcmp(x->path, abs) == 0)
			return x;
	return NULL;
}

/* Checks that need no folder: the declared size and sha256 (either case; kept lowercase in
 * want).  0, or -1 with r filled. */
static int upload_declared(int64_t size, const char *sha256, char want[65], struct transfer_reply *r)
{
	want[0] = 0;
	if (sha256) {
		size_t n = strlen(sha256);
		for (size_t i = 0; i < n && i < 64; i++)
			want[i] = (char)(sha256[i] >= 'A' && sha256[i] <= 'F' ? sha256[i] - 'A' + 'a' : sha256[i]);
		want[n < 64 ? n : 64] = 0;
		if (n != 64 || !is_hex(want, 64)) {
			transfer_error_param(failure(r), "sha256", "Give the sha256 as 64 hexadecimal digits, or leave it out.",
			              "sha256 must be 64 hexadecimal digits.");
			return -1;
		}
	}
	if (size > XFER_MAX_BYTES) {
		transfer_error_set(failure(r), "file_too_large", 0, "Split the file into parts of at most 64 GiB.",
		          "The declared size %lld is over the limit of %lld bytes.", (long long)size,
		          (long long)XFER_MAX_BYTES);
		return -1;
	}
	return 0;
}

/* An existing file at the destination is replaced only with overwrite, and only if it is a
 * regular file.  0, or -1 with r filled. */
static int upload_destination(int dirfd, const struct roots_loc *loc, int overwrite, struct transfer_reply *r)
{
	struct stat st;
	if (fstatat(dirfd, loc->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (!overwrite) {
		transfer_error_set(failure(r), "file_exists", 0, "Choose another path, or call file_transfer_open again with "
		          "overwrite: true to replace the file when the upload is committed.",
		          "'%s' already exists.", loc->abs);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		transfer_error_param(failure(r), "path", NULL, "The path exists and is not a regular file; only "
		              "regular files can be replaced.");
		return -1;
	}
	return 0;
}

/* A new upload: the staging file in <state>/uploads, made durable by name before the open
 * record is appended (the journal must never name a staging file a crash can lose).  The
 * folder descriptor is taken (*dirfd = -1).  0, or -1 with r filled. */
static int upload_create(struct transfers *tr, int *dirfd, const struct roots_loc *loc, int64_t size,
                         const char *want, int overwrite, struct transfer_reply *r)
{
	char name[80];
	struct xfer *x = xfer_alloc("");
	if (!x || io_random_hex(x->h) < 0 || !(x->path = strdup(loc->abs)) || !(x->md = md_new())) {
		transfer_error_set(failure(r), "internal_error", 1, "Call file_transfer_open again.", "Out of memory.");
		goto fail;
	}
	x->dir = X_UPLOAD;
	x->size = size;
	snprintf(x->want, sizeof x->want, "%s", want);
	x->overwrite = overwrite;
	x->created_ms = x->touched_ms = now_ms();
	stage_name(x, name, sizeof name);
	x->fd = tr->updir < 0 ? (errno = ENOENT, -1)
	      : openat(tr->updir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (x->fd < 0 || fid_of(*dirfd, &x->id) < 0) {
		transfer_error_set(failure(r), "internal_error", 1, "Tell the operator: the server's state folder must be "
		          "writable. Then call file_transfer_open again.", "Cannot create the staging file for '%s' "
		          "in %s/" STAGE_DIR ": %s.", loc->abs, tr->sv->state_dir ? tr->sv->state_dir : "(no state)",
		          strerror(errno));
		goto fail;
	}
	fsync(tr->updir);
	x->dirfd = *dirfd;
	*dirfd = -1;
	x->ready = 1;
	x->next = tr->list;
	tr->list = x;
	j_open(tr, x);
	upload_opened(x, 0, r);
	return 0;
fail:
	if (x && x->fd >= 0) {
		stage_name(x, name, sizeof name);
		unlinkat(tr->updir, name, 0);
	}
	if (x)
		xfer_free(x);
	return -1;
}

/* An open of a path that already has an unfinished upload with the same declarations resumes
 * it (the client may have lost the handle); a different one replaces it. */
int transfer_open_upload(struct transfers *tr, const char *path, int64_t size, const char *sha256, int overwrite,
                         struct transfer_reply *r)
{
	char err[1000], want[65];
	struct roots_loc loc;
	int dirfd = -1, rc;
	if (upload_declared(size, sha256, want, r) < 0)
		goto out;
	if ((rc = roots_open_parent(tr->roots, path, &dirfd, &loc, err, sizeof err)) < 0) {
		path_error(failure(r), rc, err);
		goto out;
	}
	if (strncmp(loc.name, STAGE_PREFIX, strlen(STAGE_PREFIX)) == 0) {
		transfer_error_param(failure(r), "path", NULL, "Names starting with " STAGE_PREFIX " are reserved for "
		              "uploads in progress; choose another name.");
		goto out;
	}
	struct xfer *old = active_upload_of(tr, loc.abs);
	if (old && old->size == size && strcmp(old->want, want) == 0 && old->overwrite == overwrite &&
	    upload_ready(tr, old) == 0 && old->state == XS_ACTIVE) {
		old->touched_ms = now_ms();
		upload_opened(old, 1, r);
		goto out;
	}
	if (old && old->state == XS_ACTIVE)
		fail_xfer(tr, old, "Replaced by a newer file_transfer_open of the same path.");
	if (upload_destination(dirfd, &loc, overwrite, r) < 0)
		goto out;
	upload_create(tr, &dirfd, &loc, size, want, overwrite, r);
out:
	if (dirfd >= 0)
		close(dirfd);
	limit_ready(tr, tr->list);
	return 0;
}

/* Open the file behind a download path: a file in the roots or an artifact URI. */
static int download_fd(struct transfers *tr, const char *path, int *fd, struct stat *st, char *abs, size_t abslen,
                       struct transfer_error *e)
{
	char err[1000];
	int rc;
	if (strncmp(path, RES_SCHEME, strlen(RES_SCHEME)) == 0) {
		struct artifacts_uri u;
		if (artifacts_uri_parse(path, &u) < 0 || u.kind == RES_LOG) {
			transfer_error_param(e, "path", "Use forkpoint://tasks/ID/artifacts/NAME as listed in the task's "
			              "artifacts, or forkpoint://tasks/ID/result for a large result; read logs "
			              "with resources/read.", "Only task artifacts and results can be downloaded by URI.");
			return -EINVAL;
		}
		rc = u.kind == RES_RESULT ? artifacts_result_open(tr->sv, u.id, fd, st, err, sizeof err)
		                          : artifacts_open(tr->sv, u.id, u.name, fd, st, err, sizeof err);
		if (rc < 0) {
			transfer_error_set(e, "not_found", rc == -EAGAIN,
				rc == -EAGAIN ? "Wait until durable_task_get shows the task completed, then open again."
				              : "Check the URI against the task's artifacts (durable_task_get or resources/list).",
				"%s", err);
			return rc;
		}
		snprintf(abs, abslen, "%s", path);
		return 0;
	}
	struct roots_loc loc;
	if ((rc = roots_open_file(tr->roots, path, ROOTS_SINGLE_LINK, fd, st, &loc, err, sizeof err)) < 0) {
		path_error(e, rc, err);
		return rc;
	}
	snprintf(abs, abslen, "%s", loc.abs);
	return 0;
}

/* ---- hashing off the loop -------------------------------------------------------------------- */

/* sha256 of bytes [0, size) of fd.  Only data extents are read (SEEK_DATA/SEEK_HOLE): a hole is
 * fed to the digest as zeros without a read, which is what makes a sparse file cheap to hash
 * apart from the digest itself.  Gives up with -ECANCELED once the pool stops (w may be NULL),
 * -EAGAIN if the file's size or mtime differ from *before at the end (it was being written).
 * Touches nothing but its arguments: safe on a worker thread. */
static int hash_into(struct workers *w, int fd, int64_t size, EVP_MD_CTX *md)
{
	static const unsigned char zeros[1 << 16];
	unsigned char *buf = malloc(IO_BUF);
	int64_t off = 0;
	int rc = buf && md ? 0 : -ENOMEM;
	while (rc == 0 && off < size) {
		if (w && workers_stopping(w)) {
			rc = -ECANCELED;
			break;
		}
		off_t data = lseek(fd, (off_t)off, SEEK_DATA);
		if (data < 0)
			data = errno == ENXIO ? (off_t)size : (off_t)off;   /* no data past off / no SEEK_DATA */
		if (data > size)
			data = (off_t)size;
		for (; off < data; ) {
			size_t n = (size_t)(data - off < (int64_t)sizeof zeros ? data - off : (int64_t)sizeof zeros);
			EVP_DigestUpdate(md, zeros, n);
			off += (int64_t)n;
		}
		off_t hole = off < size ? lseek(fd, (off_t)off, SEEK_HOLE) : (off_t)size;
		if (hole < 0 || hole <= off || hole > size)
			hole = (off_t)size;
		while (rc == 0 && off < hole) {
			size_t want = (size_t)(hole - off < IO_BUF ? hole - off : IO_BUF);
			ssize_t r = io_pread_upto(fd, buf, want, (uint64_t)off);
			if (r < 0)
				rc = (int)r;
			else if ((size_t)r < want)
				rc = -EAGAIN;
			else
				EVP_DigestUpdate(md, buf, (size_t)r);
			off += r > 0 ? r : 0;
			if (w && workers_stopping(w))
				rc = -ECANCELED;
		}
	}
	free(buf);
	return rc;
}

/* The hex sha256 of a whole file, refused (-EAGAIN) when its size or mtime moved meanwhile:
 * a digest of a file being written describes no version of it. */
static int hash_file(struct workers *w, int fd, int64_t size, const struct stat *before, char out[65])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	EVP_MD_CTX *md = md_new();
	int rc = md ? hash_into(w, fd, size, md) : -ENOMEM;
	struct stat st;
	unsigned n = 0;
	if (rc == 0 && (fstat(fd, &st) < 0 || st.st_size != before->st_size || st.st_mtim.tv_sec != before->st_mtim.tv_sec ||
	                st.st_mtim.tv_nsec != before->st_mtim.tv_nsec))
		rc = -EAGAIN;
	if (rc == 0 && (EVP_DigestFinal_ex(md, d, &n) != 1 || n != 32))
		rc = -ENOMEM;
	if (rc == 0)
		io_hex(d, 32, out);
	EVP_MD_CTX_free(md);
	return rc;
}

static int copy_verified(struct workers *w, int src, int dirfd, int64_t len, const char *sha, const char *cname,
                         int *out);

enum hkind { H_OPEN, H_READ, H_ARTIFACT, H_COPY, H_SYNC, H_REHASH };

/* One file hashed in the worker pool, and what to do with the digest back on the loop. */
struct hjob {
	struct transfers *tr;
	enum hkind kind;
	int fd;
	struct stat st;
	char abs[PATH_MAX + 64];    /* H_OPEN: the download's path or URI */
	char h[33];                 /* H_READ: the download being reopened */
	int64_t roff, rlen;         /* H_READ: the read's offset and length (-1: defaults) */
	char task[33];              /* H_ARTIFACT */
	char name[NAME_MAX + 1];    /* H_ARTIFACT; H_COPY: the named copy's name */
	int dirfd, out;             /* H_COPY: destination folder, the verified copy */
	EVP_MD_CTX *md;             /* H_REHASH: the upload's running hash, rebuilt */
	struct transfer_later later;
	int rc;                     /* from the worker */
	char sha[65];
};

/* A pool job with no descriptors yet (all -1, so hj_done closes only what was set). */
static struct hjob *hj_new(struct transfers *tr)
{
	struct hjob *j = calloc(1, sizeof *j);
	if (j) {
		j->tr = tr;
		j->fd = j->dirfd = j->out = -1;
	}
	return j;
}

/* On a worker thread: only the job's own descriptors and buffers are touched here. */
static void hj_run(struct workers *w, void *arg)
{
	struct hjob *j = arg;
	if (j->kind == H_SYNC)
		j->rc = fdatasync(j->fd) < 0 ? -errno : 0;
	else if (j->kind == H_REHASH)
		j->rc = hash_into(w, j->fd, j->st.st_size, j->md);
	else if (j->kind == H_COPY)
		j->rc = copy_verified(w, j->fd, j->dirfd, j->st.st_size, j->sha, j->name, &j->out);
	else
		j->rc = hash_file(w, j->fd, j->st.st_size, &j->st, j->sha);
}

static void hj_done(void *arg, int ran);

/* Hand j to the pool.  0; or -errno, and then j is the caller's still. */
static int hj_submit(struct transfers *tr, struct hjob *j)
{
	int rc = workers_submit(tr->sv->workers, hj_run, hj_done, j);
	if (rc == 0) {
		tr->jobs++;
		tr->deferred += j->later.answer != NULL;
	}
	return rc;
}

/* Should this file be hashed in the pool?  Small files are hashed at once. */
static int hash_later(const struct transfers *tr, int64_t size)
{
	return tr->sv->workers && size > HASH_INLINE_MAX;
}

static void hash_failure(const char *abs, int rc, struct transfer_reply *r)
{
	transfer_error_set(failure(r), "internal_error", 1, "Call file_transfer_open again when the file is no longer "
	          "being written.", "'%s' could not be read whole: %s.", abs,
	          rc == -EAGAIN || rc == -EIO ? "it changed while it was being read" :
	          rc == -ECANCELED ? "the server is stopping" : strerror(-rc));
}

/* The download is hashed: it gets its handle (fd is taken). */
static void download_opened(struct transfers *tr, int *fd, const struct stat *st, const char *abs, const char *sha,
                            struct transfer_reply *r)
{
	struct xfer *x = xfer_alloc("");
	if (!x || io_random_hex(x->h) < 0 || !(x->path = strdup(abs))) {
		if (x)
			xfer_free(x);
		transfer_error_set(failure(r), "internal_error", 1, "Call file_transfer_open again.", "Out of memory.");
		return;
	}
	memcpy(x->sha, sha, 65);
	x->dir = X_DOWNLOAD;
	x->size = st->st_size;
	fid_of_stat(st, *fd, &x->id);
	x->mtime = st->st_mtim;
	x->ctime = st->st_ctim;
	x->created_ms = x->touched_ms = now_ms();
	x->fd = *fd;
	*fd = -1;
	x->ready = 1;
	x->next = tr->list;
	tr->list = x;
	j_open(tr, x);
	reply_of(x, TRANSFER_OPENED, r);
	limit_ready(tr, x);
}

/* The whole file's sha256 is computed at open, from the descriptor the reads then use.  A
 * large file is hashed in the worker pool and the open answers through later when it is done
 * (TRANSFER_LATER); the loop goes on serving meanwhile. */
int transfer_open_download(struct transfers *tr, const char *path, const struct transfer_later *later,
                           struct transfer_reply *r)
{
	char abs[PATH_MAX + 64], sha[65];
	struct stat st;
	int fd = -1, rc;
	if (download_fd(tr, path, &fd, &st, abs, sizeof abs, failure(r)) < 0)
		goto out;
	if (st.st_size > XFER_MAX_BYTES) {
		transfer_error_set(failure(r), "file_too_large", 0, "Ask for a smaller file.", "'%s' is %lld bytes, over the "
		          "limit of %lld.", abs, (long long)st.st_size, (long long)XFER_MAX_BYTES);
		goto out;
	}
	if (later && hash_later(tr, st.st_size)) {
		struct hjob *j = hj_new(tr);
		if (j) {
			j->kind = H_OPEN;
			j->fd = fd;
			j->st = st;
			j->later = *later;
			snprintf(j->abs, sizeof j->abs, "%s", abs);
			if (hj_submit(tr, j) == 0) {
				limit_ready(tr, tr->list);
				return TRANSFER_LATER;
			}
			free(j);
		}
	}
	rc = hash_file(NULL, fd, st.st_size, &st, sha);
	if (rc < 0)
		hash_failure(abs, rc, r);
	else
		download_opened(tr, &fd, &st, abs, sha, r);
out:
	if (fd >= 0)
		close(fd);
	limit_ready(tr, tr->list);
	return 0;
}

/* ---- write / read / commit / status ------------------------------------------------------------ */

/* Why a transfer that is over takes no more calls, and how to start again. */
static void not_active(const struct xfer *x, struct transfer_error *e)
{
	if (x->state == XS_COMMITTED)
		transfer_error_set(e, "not_active", 0, "The upload is finished; open a new transfer to send another file.",
		          "Upload %s was already committed to %s.", x->h, x->path);
	else
		transfer_error_set(e, "not_active", 0,
			x->dir == X_UPLOAD
				? "Start over: call file_transfer_open again with the same path (and size, sha256), then "
				  "send the file from offset 0."
				: "Call file_transfer_open again to download the file as it is now.",
			"Transfer %s failed: %s", x->h, x->msg ? x->msg : "no reason recorded");
}

static void write_view(const struct xfer *x, int64_t n, int64_t end, struct transfer_reply *r)
{
	reply_of(x, TRANSFER_WRITTEN, r);
	r->received = n;
	r->next_offset = end;
}

static void dup_view(const struct xfer *x, struct transfer_reply *r)
{
	reply_of(x, TRANSFER_DUPLICATE, r);
	r->next_offset = x->last_off + x->last_len;
}

/* Queue the answer to a chunk (or to a repeat of it) until a sync covers it.  0 or -ENOMEM. */
static int ack_later(struct transfers *tr, struct xfer *x, int64_t off, int64_t len, int dup,
                     const struct transfer_later *later)
{
	struct xack *a = calloc(1, sizeof *a), **pp = &x->acks;
	if (!a)
		return -ENOMEM;
	a->off = off;
	a->len = len;
	a->dup = dup;
	a->later = *later;
	if (!x->acks) {
		x->dlast_off = x->last_off;
		x->dlast_len = x->last_len;
	}
	while (*pp)
		pp = &(*pp)->next;
	*pp = a;
	tr->deferred++;
	return 0;
}

/* The bytes up to end are durable: journal and answer the chunks they hold, in order. */
static void flush_acks(struct transfers *tr, struct xfer *x, int64_t end)
{
	while (x->acks && x->acks->off + x->acks->len <= end) {
		struct xack *a = x->acks;
		x->acks = a->next;
		if (!a->dup) {
			j_chunk_at(tr, x, a->off, a->len);
			x->dlast_off = a->off;
			x->dlast_len = a->len;
		}
		struct transfer_reply r;
		if (a->dup)
			dup_view(x, &r);
		else
			write_view(x, a->len, a->off + a->len, &r);
		a->later.answer(a->later.ctx, &r);
		free(a);
	}
}

/* Answer every queued chunk with r_of(x) (NULL: drop them, the server is stopping). */
static void answer_acks(struct xfer *x, reply_fn *r_of)
{
	while (x->acks) {
		struct xack *a = x->acks;
		x->acks = a->next;
		if (r_of) {
			struct transfer_reply r;
			r_of(x, &r);
			a->later.answer(a->later.ctx, &r);
		} else if (a->later.drop) {
			a->later.drop(a->later.ctx);
		}
		free(a);
	}
}

static void ack_not_active(const struct xfer *x, struct transfer_reply *r)
{
	not_active(x, failure(r));
}

static void sync_failed(const struct xfer *x, struct transfer_reply *r)
{
	transfer_error_set(failure(r), "internal_error", 1, "Send the chunks again from partial.cursor; if the "
	          "disk is full, tell the operator.", "The staged bytes could not be synced.");
	with_cursor(&r->err, x->cursor);
}

/* A sync failed (or never ran): the queued chunks are not acknowledged.  The cursor goes back
 * to the last chunk journaled, and the upload is reopened on its next use (staged bytes cut
 * back, hash rebuilt). */
static void fail_acks(struct transfers *tr, struct xfer *x, int rc)
{
	if (!x->acks)
		return;
	fplog(&tr->sv->log, FPLOG_ERROR, NULL, "transfer %s: syncing staged bytes failed: %s", x->h,
	      rc == -ECANCELED ? "the server is stopping" : strerror(-rc));
	x->cursor = x->acks->off;
	x->last_off = x->dlast_off;
	x->last_len = x->dlast_len;
	xfer_close(x);
	answer_acks(x, rc == -ECANCELED ? NULL : sync_failed);
}

static void committing(const struct xfer *x, struct transfer_error *e)
{
	transfer_error_set(e, "not_active", 1, "Wait for the answer of the file_transfer_commit in progress (file_transfer_status "
	          "shows the outcome).", "Upload %s is being committed (its bytes are being copied into place).", x->h);
}

static int store_chunk(struct transfers *tr, struct xfer *x, int64_t off, ssize_t n,
                       const struct transfer_later *later, struct transfer_reply *r);

/* An upload takes writes and commits while it is active and no commit's copy is in the
 * pool.  0, or -1 with r filled. */
static int upload_takes_calls(const struct xfer *x, struct transfer_reply *r)
{
	if (x->state != XS_ACTIVE) {
		not_active(x, failure(r));
		return -1;
	}
	if (x->committing) {
		committing(x, failure(r));
		return -1;
	}
	return 0;
}

/* The chunk's size and encoding: 0 with its bytes in tr->buf (*n of them), or -1 with r
 * filled. */
static int decode_chunk(struct transfers *tr, const struct xfer *x, const char *data, ssize_t *n,
                        struct transfer_reply *r)
{
	size_t elen = strlen(data), bad = 0;
	if (elen > CHUNK_B64_MAX) {
		transfer_error_set(failure(r), "chunk_too_large", 1, "Send at most 1048576 bytes (decoded) per "
			"file_transfer_write; 262144 (chunkSize) is the recommended size. Split the chunk and send "
			"it again from the same offset.", "The chunk is %zu base64 characters, more than 1 MiB of bytes.",
			elen);
		goto fail;
	}
	*n = b64_decode(data, elen, tr->buf, &bad);
	if (*n < 0) {
		char msg[200];
		snprintf(msg, sizeof msg, "data is not valid base64 (bad character at position %zu).", bad);
		transfer_error_param(failure(r), "data", "Encode the chunk's bytes as standard base64 "
			"(A-Z a-z 0-9 + /, '=' padding only at the end, no line breaks) and send it again.", msg);
		goto fail;
	}
	if (*n > CHUNK_MAX) {
		transfer_error_set(failure(r), "chunk_too_large", 1, "Send at most 1048576 bytes per write.",
		          "The chunk has %zd bytes, more than 1 MiB.", *n);
		goto fail;
	}
	return 0;
fail:
	with_cursor(&r->err, x->cursor);
	return -1;
}

/* A chunk at another offset than the cursor.  The answer to the last chunk may have been lost:
 * the same bytes again at the same offset are acknowledged without writing anything (once that
 * chunk is durable).  Anything else is an offset_mismatch naming the cursor. */
static int write_elsewhere(struct transfers *tr, struct xfer *x, int64_t off, ssize_t n,
                           const struct transfer_later *later, struct transfer_reply *r)
{
	if (n > 0 && n == x->last_len && off == x->last_off && off + n == x->cursor &&
	    io_pread_upto(x->fd, tr->buf2, (size_t)n, off) == n && memcmp(tr->buf, tr->buf2, (size_t)n) == 0) {
		x->touched_ms = now_ms();
		if (x->acks && later && ack_later(tr, x, off, n, 1, later) == 0)
			return TRANSFER_LATER;
		dup_view(x, r);
		return 0;
	}
	char hint[300];
	snprintf(hint, sizeof hint, "Send the bytes of the file starting at offset %lld (partial.cursor) "
	         "next; file_transfer_status always shows this offset.", (long long)x->cursor);
	transfer_error_set(failure(r), "offset_mismatch", 1, hint, "Expected offset %lld, got %lld%s.",
		(long long)x->cursor, (long long)off, off < x->cursor ? " (those bytes were already received)"
		                                                        : " (bytes before it are missing)");
	with_cursor(&r->err, x->cursor);
	return 0;
}

/* One chunk of an upload: checks in the order the client can act on them (wrong handle, over,
 * too large or malformed, wrong offset, past the declared size), then store_chunk. */
static int do_write(struct transfers *tr, struct xfer *x, int64_t off, const char *data,
                    const struct transfer_later *later, struct transfer_reply *r)
{
	ssize_t n = 0;
	if (x->dir != X_UPLOAD) {
		transfer_error_param(failure(r), "handle", "Use file_transfer_read with a download handle.",
		              "This handle is a download; file_transfer_write needs an upload handle.");
		return 0;
	}
	upload_ready(tr, x);
	if (upload_takes_calls(x, r) < 0)
		return 0;
	if (decode_chunk(tr, x, data, &n, r) < 0)
		return 0;
	if (off != x->cursor)
		return write_elsewhere(tr, x, off, n, later, r);
	if (x->size >= 0 && off + n > x->size) {
		char hint[400];
		snprintf(hint, sizeof hint, "Send at most %lld more bytes from offset %lld. If the file really is "
		         "larger, call file_transfer_open again with the same path and the right size: that "
		         "starts the upload over.", (long long)(x->size - x->cursor), (long long)x->cursor);
		transfer_error_set(failure(r), "size_mismatch", 1, hint, "The chunk would end at %lld, past the "
			"declared size %lld; nothing was written.", (long long)(off + n), (long long)x->size);
		with_cursor(&r->err, x->cursor);
		return 0;
	}
	if (off + n > XFER_MAX_BYTES) {
		transfer_error_set(failure(r), "file_too_large", 0, "Split the file into parts of at most 64 GiB.",
		          "The upload would exceed %lld bytes.", (long long)XFER_MAX_BYTES);
		with_cursor(&r->err, x->cursor);
		return 0;
	}
	if (n > 0)
		return store_chunk(tr, x, off, n, later, r);
	write_view(x, 0, x->cursor, r);
	return 0;
}

/* Write one chunk at the cursor.  Its bytes are synced before it is acknowledged and before
 * its journal record is appended: here, or — when the answer can wait and there is a worker
 * pool — there (TRANSFER_LATER; the loop goes on serving while the disk syncs). */
static int store_chunk(struct transfers *tr, struct xfer *x, int64_t off, ssize_t n,
                       const struct transfer_later *later, struct transfer_reply *r)
{
	struct hjob *j = later && tr->sv->workers ? hj_new(tr) : NULL;
	int rc = io_pwrite_full(x->fd, tr->buf, (size_t)n, (uint64_t)off);
	if (rc == 0 && j && ((j->fd = fcntl(x->fd, F_DUPFD_CLOEXEC, 0)) < 0 || ack_later(tr, x, off, n, 0, later) < 0)) {
		if (j->fd >= 0)
			close(j->fd);
		free(j);
		j = NULL;
	}
	if (rc == 0 && !j && fdatasync(x->fd) < 0)
		rc = -errno;
	if (rc < 0) {
		if (j)
			free(j);   /* (not reached with an ack queued: rc is the pwrite's) */
		transfer_error_set(failure(r), "internal_error", 1, "Send the same chunk again later; if the disk "
			"is full, tell the operator.", "The chunk could not be stored: %s.", strerror(-rc));
		with_cursor(&r->err, x->cursor);
		return 0;
	}
	EVP_DigestUpdate(x->md, tr->buf, (size_t)n);
	x->last_off = off;
	x->last_len = n;
	x->cursor = off + n;
	x->touched_ms = now_ms();
	if (!j) {
		j_chunk(tr, x);
		write_view(x, n, x->cursor, r);
		return 0;
	}
	j->kind = H_SYNC;
	j->st.st_size = x->cursor;
	memcpy(j->h, x->h, sizeof j->h);
	if (hj_submit(tr, j) == 0)
		return TRANSFER_LATER;
	/* The pool is stopping: sync here; the queued answer goes out with the others. */
	close(j->fd);
	free(j);
	if (fdatasync(x->fd) < 0) {
		fail_acks(tr, x, -errno);
		return TRANSFER_LATER;
	}
	flush_acks(tr, x, x->cursor);
	return TRANSFER_LATER;
}

/* A download handle after a restart or parking: open the same file again and check it is the
 * same file (fid_same) with the same size.  Parked in this process with unchanged mtime and
 * ctime (which no one can set back), it is the same bytes; otherwise its sha256 is computed
 * again — in the pool when it is large and the answer can wait (1: j was submitted and will
 * answer).  0 ready, -ESTALE changed, -1 with *e not there. */
static int download_reopen(struct transfers *tr, struct xfer *x, struct transfer_error *e,
                           const struct transfer_later *later, int64_t off, int64_t len)
{
	char abs[PATH_MAX + 64], sha[65];
	struct stat st;
	struct fid now;
	int fd = -1;
	if (download_fd(tr, x->path, &fd, &st, abs, sizeof abs, e) < 0)
		return -1;
	fid_of_stat(&st, fd, &now);
	int same_times = x->parked && st.st_mtim.tv_sec == x->mtime.tv_sec && st.st_mtim.tv_nsec == x->mtime.tv_nsec &&
	                 st.st_ctim.tv_sec == x->ctime.tv_sec && st.st_ctim.tv_nsec == x->ctime.tv_nsec;
	if (!fid_same(&x->id, &now) || st.st_size != x->size) {
		close(fd);
		return -ESTALE;
	}
	if (!same_times && later && hash_later(tr, st.st_size)) {
		struct hjob *j = hj_new(tr);
		if (j) {
			j->roff = off;
			j->rlen = len;
			j->kind = H_READ;
			j->fd = fd;
			j->st = st;
			j->later = *later;
			memcpy(j->h, x->h, sizeof j->h);
			if (hj_submit(tr, j) == 0)
				return 1;
		}
		free(j);
	}
	if (!same_times && (hash_file(NULL, fd, st.st_size, &st, sha) < 0 || strcmp(sha, x->sha) != 0)) {
		close(fd);
		return -ESTALE;
	}
	x->fd = fd;
	x->mtime = st.st_mtim;
	x->ctime = st.st_ctim;
	x->ready = 1;
	x->parked = 0;
	return 0;
}

static void changed(struct transfers *tr, struct xfer *x, struct transfer_reply *r)
{
	fail_xfer(tr, x, "The file changed after the download was opened.");
	transfer_error_set(failure(r), "checksum_mismatch", 1, "Call file_transfer_open again to download the file as it is "
	          "now, and start from offset 0.", "'%s' changed after the download was opened; its bytes "
	          "no longer match sha256 %s.", x->path, x->sha);
}

/* A download that is not ready (after a restart or parking) is opened and checked again
 * first: 0 ready, TRANSFER_LATER (it is being hashed again), or -1 with r filled. */
static int read_ready(struct transfers *tr, struct xfer *x, int64_t off, int64_t len,
                      const struct transfer_later *later, struct transfer_reply *r)
{
	struct transfer_error e;
	if (x->ready)
		return 0;
	transfer_error_set(&e, "internal_error", 1, "Call file_transfer_open again.", "The file could not be opened again.");
	int rc = download_reopen(tr, x, &e, later, off, len);
	if (rc == 1)
		return TRANSFER_LATER;   /* answered when the file has been hashed again */
	if (rc == -ESTALE) {
		changed(tr, x, r);
		return -1;
	}
	if (rc < 0) {
		fail_xfer(tr, x, "The file is no longer there.");
		*failure(r) = e;
		return -1;
	}
	return 0;
}

/* Read a range of a download from the descriptor that was hashed; a file that changed size or
 * mtime since fails the download (checksum_mismatch) rather than serving other bytes. */
static int do_read(struct transfers *tr, struct xfer *x, int64_t off, int64_t len,
                   const struct transfer_later *later, struct transfer_reply *r)
{
	if (x->dir != X_DOWNLOAD) {
		transfer_error_param(failure(r), "handle", "Use file_transfer_write with an upload handle.",
		              "This handle is an upload; file_transfer_read needs a download handle.");
		return 0;
	}
	if (x->state != XS_ACTIVE) {
		not_active(x, failure(r));
		return 0;
	}
	int rc = read_ready(tr, x, off, len, later, r);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if (off < 0)
		off = x->cursor;
	if (len < 0)
		len = CHUNK_SIZE;
	if (len > CHUNK_MAX) {
		transfer_error_set(failure(r), "chunk_too_large", 1, "Ask for at most 1048576 bytes per read (length).",
		          "length %lld is more than 1 MiB.", (long long)len);
		return 0;
	}
	if (off > x->size) {
		char msg[200];
		snprintf(msg, sizeof msg, "offset %lld is past the end of the file (size %lld).", (long long)off,
		         (long long)x->size);
		transfer_error_param(failure(r), "offset", "Read at an offset between 0 and size.", msg);
		return 0;
	}
	struct stat st;
	if (fstat(x->fd, &st) < 0 || st.st_size != x->size || st.st_mtim.tv_sec != x->mtime.tv_sec ||
	    st.st_mtim.tv_nsec != x->mtime.tv_nsec) {
		changed(tr, x, r);
		return 0;
	}
	size_t n = (size_t)(x->size - off < len ? x->size - off : len);
	ssize_t got = io_pread_upto(x->fd, tr->buf, n, off);
	if (got < 0) {
		transfer_error_set(failure(r), "internal_error", 1, "Read the same range again.", "Read failed: %s.",
		          strerror((int)-got));
		return 0;
	}
	if ((size_t)got != n) {
		changed(tr, x, r);
		return 0;
	}
	b64_encode(tr->buf, n, tr->enc);
	x->cursor = off + (int64_t)n;
	x->touched_ms = now_ms();
	reply_of(x, TRANSFER_READ, r);
	r->data = tr->enc;
	r->bytes = (int64_t)n;
	r->offset = off;
	r->eof = x->cursor == x->size;
	return 0;
}

/* Give the inode behind fd the name dirfd/name (failing with -EEXIST if the name is taken):
 * through /proc/self/fd, or AT_EMPTY_PATH where /proc is missing (that needs
 * CAP_DAC_READ_SEARCH). */
static int link_fd(int fd, int dirfd, const char *name)
{
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	return linkat(fd, "", dirfd, name, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

/* Publish x->pubfd (the inode that was hashed, or its verified copy) at the destination, from
 * the descriptor and never by the staging name, then check the name holds that very inode: a
 * job that can write the folder may race the link or the rename, and then the commit fails
 * instead of reporting the job's bytes as the client's. */
static int publish(struct xfer *x, const char *name)
{
	char tmp[80];
	int rc;
	if (!x->overwrite) {
		rc = link_fd(x->pubfd, x->dirfd, name);
	} else {
		temp_name(x, tmp, sizeof tmp);
		unlinkat(x->dirfd, tmp, 0);
		if ((rc = link_fd(x->pubfd, x->dirfd, tmp)) == 0 && renameat(x->dirfd, tmp, x->dirfd, name) < 0) {
			rc = -errno;
			unlinkat(x->dirfd, tmp, 0);
		}
	}
	if (rc == 0 && !published(x, name))
		rc = -ESTALE;
	return rc;
}

/* Cross-file-system commits: the staged bytes cannot be linked into the destination folder,
 * so they are copied into a file there that has no name yet (O_TMPFILE; where the file system
 * lacks it, the named file cname, which a job that can write the folder could tamper with
 * until the check below), synced, and hashed again from the copy.  The copy (*out) is what
 * publish() links.  0, or -errno (-EIO: the copy's bytes differ from sha).  Touches only its
 * arguments: runs on a worker thread for large files (w then lets it stop early). */
static int copy_verified(struct workers *w, int src, int dirfd, int64_t len, const char *sha, const char *cname,
                         int *out)
{
	char got[65];
	struct stat st;
	unsigned char *buf = malloc(IO_BUF);
	int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), rc = 0, named = 0;
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		unlinkat(dirfd, cname, 0);
		fd = openat(dirfd, cname, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		named = 1;
	}
	if (fd < 0 || !buf) {
		rc = fd < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	for (int64_t off = 0; off < len && rc == 0;) {
		size_t want = (size_t)(len - off < IO_BUF ? len - off : IO_BUF);
		ssize_t r = io_pread_upto(src, buf, want, (uint64_t)off);
		if (r <= 0)
			rc = r < 0 ? (int)r : -EIO;
		else if ((rc = io_pwrite_full(fd, buf, (size_t)r, (uint64_t)off)) == 0)
			off += r;
		if (rc == 0 && w && workers_stopping(w))
			rc = -ECANCELED;
	}
	if (rc == 0 && (fsync(fd) < 0 || fstat(fd, &st) < 0))
		rc = -errno;
	if (rc == 0 && (rc = hash_file(w, fd, len, &st, got)) == 0 && strcmp(got, sha) != 0)
		rc = -EIO;
	if (rc < 0)
		goto fail;
	/* A named copy keeps its name until the commit is recorded (a file without links cannot
	 * be linked again); publish() verifies the inode either way. */
	free(buf);
	*out = fd;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	if (fd >= 0 && named)
		unlinkat(dirfd, cname, 0);
	free(buf);
	return rc;
}

static int copy_for_publish(struct transfers *tr, struct xfer *x)
{
	char cname[80];
	(void)tr;
	copy_name(x, cname, sizeof cname);
	return copy_verified(NULL, x->fd, x->dirfd, x->cursor, x->sha, cname, &x->pubfd);
}

/* 1 when the staged file and the destination folder are on different file systems. */
static int cross_fs(const struct xfer *x)
{
	struct stat a, b;
	return fstat(x->fd, &a) == 0 && fstat(x->dirfd, &b) == 0 && a.st_dev != b.st_dev;
}

/* The inode this commit will publish, recorded (intent) before it can appear at the
 * destination.  The staged file itself when it is on the destination's file system, else a
 * verified copy.  0 or -errno. */
static int prepare_publish(struct transfers *tr, struct xfer *x, int copy)
{
	struct fid f;
	int rc;
	if (x->pubfd < 0) {
		if (copy || cross_fs(x)) {
			if ((rc = copy_for_publish(tr, x)) < 0)
				return rc;
		} else if ((x->pubfd = fcntl(x->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
			return -errno;
		}
	}
	if ((rc = fid_of(x->pubfd, &f)) < 0)
		return rc;
	if (!x->intent || !fid_same(&x->pub, &f)) {
		x->pub = f;
		x->intent = 1;
		if ((rc = j_intent(tr, x)) < 0)
			return rc;
	}
	return 0;
}

/* Publish a verified upload.  Everything it depends on — its chunk records and the intent
 * record — is made durable first (the journal's group commit, brought forward), so a crash
 * can never leave a published file whose chunks the journal does not have: after a restart
 * the same commit answers completed with the same sha256.  0 or -errno. */
static int commit_publish(struct transfers *tr, struct xfer *x)
{
	int rc = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		if ((rc = prepare_publish(tr, x, attempt)) < 0)
			return rc;
		if (persist_pending(tr->sv->persist) && (rc = persist_commit(tr->sv->persist)) < 0)
			return rc;
		rc = publish(x, last_name(x->path));
		if (rc != -EXDEV)
			break;
		/* The same st_dev but another mount (a bind mount): copy after all. */
		close(x->pubfd);
		x->pubfd = -1;
	}
	if (rc == 0)
		fsync(x->dirfd);
	return rc;
}

static void finish_commit(struct transfers *tr, struct xfer *x, struct transfer_reply *r);
static int commit_later(struct transfers *tr, struct xfer *x, const struct transfer_later *later);

/* Before a commit may publish: the upload is whole and its bytes hash to the declared sha256
 * (a wrong one discards the upload).  0 with x->sha set, or -1 with r filled. */
static int commit_verify(struct transfers *tr, struct xfer *x, struct transfer_reply *r)
{
	char sha[65];
	if (x->size >= 0 && x->cursor < x->size) {
		char hint[300];
		snprintf(hint, sizeof hint, "Send the remaining %lld bytes with file_transfer_write starting at "
		         "offset %lld (partial.cursor), then commit again.", (long long)(x->size - x->cursor),
		         (long long)x->cursor);
		transfer_error_set(failure(r), "size_mismatch", 1, hint, "Only %lld of the declared %lld bytes have "
			"been received; the upload stays open.", (long long)x->cursor, (long long)x->size);
		with_cursor(&r->err, x->cursor);
		return -1;
	}
	if (md_peek(x->md, sha) < 0) {
		transfer_error_set(failure(r), "internal_error", 1, "Call file_transfer_commit again.", "Out of memory.");
		return -1;
	}
	if (x->want[0] && strcmp(sha, x->want) != 0) {
		char why[300];
		snprintf(why, sizeof why, "The received bytes have sha256 %s, not the declared %s.", sha, x->want);
		fail_xfer(tr, x, why);
		transfer_error_set(failure(r), "checksum_mismatch", 1, "The bytes are wrong, so this upload was discarded. Check "
			"the declared sha256 against the file, then call file_transfer_open again with the same path, "
			"size and sha256 and send the whole file from offset 0.", "%s", why);
		return -1;
	}
	memcpy(x->sha, sha, sizeof sha);
	if (fsync(x->fd) < 0) {
		transfer_error_set(failure(r), "internal_error", 1, "Call file_transfer_commit again; if it keeps failing, tell "
			"the operator.", "The staged bytes could not be synced: %s.", strerror(errno));
		return -1;
	}
	return 0;
}

/* Commit an upload: chunks still waiting for their sync are synced (one fsync covers them),
 * the bytes verified, then published — a large cross-file-system copy in the pool. */
static int do_commit(struct transfers *tr, struct xfer *x, const struct transfer_later *later,
                     struct transfer_reply *r)
{
	if (x->dir != X_UPLOAD) {
		transfer_error_param(failure(r), "handle", "Downloads need no commit; just stop reading.",
		              "This handle is a download; only uploads are committed.");
		return 0;
	}
	upload_ready(tr, x);
	if (x->state == XS_COMMITTED) {
		committed_view(x, 1, r);
		return 0;
	}
	if (upload_takes_calls(x, r) < 0)
		return 0;
	if (x->acks) {
		if (fsync(x->fd) < 0) {
			fail_acks(tr, x, -errno);
			sync_failed(x, r);
			return 0;
		}
		flush_acks(tr, x, x->cursor);
	}
	if (commit_verify(tr, x, r) < 0)
		return 0;
	if (later && x->pubfd < 0 && hash_later(tr, x->cursor) && cross_fs(x) && commit_later(tr, x, later) == 0)
		return TRANSFER_LATER;
	finish_commit(tr, x, r);
	return 0;
}

/* Publish, and say how that went. */
static void finish_commit(struct transfers *tr, struct xfer *x, struct transfer_reply *r)
{
	int rc = commit_publish(tr, x);
	if (rc == -EEXIST)
		transfer_error_set(failure(r), "file_exists", 0, "Remove or rename the existing file and call file_transfer_commit "
			"again, or call file_transfer_open again with overwrite: true (that starts the upload over).",
			"'%s' appeared while the upload was running; the upload stays open and nothing was replaced.",
			x->path);
	else if (rc == -ESTALE)
		transfer_error_set(failure(r), "internal_error", 1, "Call file_transfer_commit again; make sure nothing else "
			"writes to the destination folder meanwhile.", "Something replaced '%s' while the upload was being "
			"moved into place; the file there is not the upload's.", x->path);
	else if (rc < 0)
		transfer_error_set(failure(r), "internal_error", 1, "Call file_transfer_commit again; if it keeps failing, tell "
			"the operator.", "The file could not be moved into place: %s.", strerror(-rc));
	if (rc < 0)
		return;
	mark_committed(tr, x);
	committed_view(x, 0, r);
}

static void do_status(const struct xfer *x, struct transfer_reply *r)
{
	reply_of(x, TRANSFER_STATUS, r);
	/* Acknowledged bytes only: chunks still being synced are not. */
	r->next_offset = x->acks ? x->acks->off : x->cursor;
	if (x->state == XS_FAILED)
		not_active(x, &r->failure);
}

/* A download reopened in the pool: if its bytes still hash to the sha256 of its open, the
 * read that asked goes ahead. */
static void read_verified(struct transfers *tr, struct hjob *j, struct transfer_reply *r)
{
	struct xfer *x = find(tr, j->h);
	if (!x) {
		unknown_handle(tr, j->h, failure(r));
		return;
	}
	if (x->state != XS_ACTIVE) {
		not_active(x, failure(r));
		return;
	}
	if (!x->ready) {
		if (j->rc < 0 || strcmp(j->sha, x->sha) != 0) {
			changed(tr, x, r);
			return;
		}
		x->fd = j->fd;
		j->fd = -1;
		x->mtime = j->st.st_mtim;
		x->ctime = j->st.st_ctim;
		x->ready = 1;
		x->parked = 0;
	}
	do_read(tr, x, j->roff, j->rlen, NULL, r);
	limit_ready(tr, x);
}

/* An artifact's digest: into the task's artifact list (sha256Status dropped, or "failed"),
 * and into the journal, so the task's record says it after a restart too. */
static void artifact_hashed(struct transfers *tr, struct hjob *j)
{
	struct task *t = tasks_find(tr->sv->tasks, j->task);
	cJSON *a;
	if (!t)
		return;   /* expired meanwhile */
	cJSON_ArrayForEach(a, t->artifacts) {
		const cJSON *n = cJSON_GetObjectItem(a, "name");
		if (!cJSON_IsString(n) || strcmp(n->valuestring, j->name) != 0)
			continue;
		const char *status = j->rc == -EFBIG ? "skipped" : "failed";
		if (j->rc < 0)
			fplog(&tr->sv->log, FPLOG_WARNING, t->id, "artifact %s could not be hashed: %s", j->name,
			      j->rc == -EAGAIN ? "it changed while it was read" : strerror(-j->rc));
		/* Recorded, then applied to the task by task_apply, as replay applies it. */
		struct store_rec r = { .type = STORE_REC_X_ARTSHA };
		char err[200];
		r.u.xfer.task = t->id;
		r.u.xfer.name = j->name;
		r.u.xfer.size = (int64_t)j->st.st_size;
		r.u.xfer.sha = j->rc == 0 ? j->sha : "";
		r.u.xfer.status = j->rc == 0 ? "" : status;
		rec_put(tr, &r);
		if (task_apply(t, &r, err, sizeof err) < 0)
			fplog(&tr->sv->log, FPLOG_ERROR, t->id, "%s", err);
		return;
	}
}

/* A cross-file-system commit of a large upload: the copy is made and verified in the pool,
 * and the commit answers through later when it is published.  0, or -errno (then the caller
 * copies inline). */
static int commit_later(struct transfers *tr, struct xfer *x, const struct transfer_later *later)
{
	struct hjob *j = hj_new(tr);
	if (!j)
		return -ENOMEM;
	j->kind = H_COPY;
	j->later = *later;
	j->st.st_size = x->cursor;
	memcpy(j->h, x->h, sizeof j->h);
	memcpy(j->sha, x->sha, sizeof j->sha);
	copy_name(x, j->name, sizeof j->name);
	if ((j->fd = fcntl(x->fd, F_DUPFD_CLOEXEC, 0)) < 0 || (j->dirfd = fcntl(x->dirfd, F_DUPFD_CLOEXEC, 0)) < 0 ||
	    hj_submit(tr, j) < 0) {
		if (j->fd >= 0)
			close(j->fd);
		if (j->dirfd >= 0)
			close(j->dirfd);
		free(j);
		return -ENOMEM;
	}
	x->committing = 1;
	return 0;
}

/* A commit's cross-file-system copy is made and verified: publish it. */
static void copied(struct transfers *tr, struct hjob *j, struct transfer_reply *r)
{
	struct xfer *x = find(tr, j->h);
	if (!x) {
		unknown_handle(tr, j->h, failure(r));
		return;
	}
	if (x->state == XS_COMMITTED) {
		committed_view(x, 1, r);
		return;
	}
	if (x->state != XS_ACTIVE || !x->committing) {
		not_active(x, failure(r));
		return;
	}
	x->committing = 0;
	if (j->rc < 0) {
		transfer_error_set(failure(r), "internal_error", 1, "Call file_transfer_commit again; if it keeps failing, tell "
			"the operator.", "The file could not be copied into place: %s.",
			j->rc == -EIO ? "the copy did not read back as the same bytes" : strerror(-j->rc));
		return;
	}
	x->pubfd = j->out;
	j->out = -1;
	finish_commit(tr, x, r);
	limit_ready(tr, x);
}

static int dispatch_write(struct transfers *tr, const char *h, int64_t off, const char *data, int commit,
                          const struct transfer_later *later, struct transfer_reply *r);

/* After a restart, a large staged upload's running hash is rebuilt in the pool (the upload is
 * usable meanwhile: status and resuming opens answer, writes and commits wait).  0 when
 * submitted, -errno to hash inline instead. */
static int rehash_later(struct transfers *tr, struct xfer *x)
{
	if (!hash_later(tr, x->cursor))
		return -EAGAIN;
	struct hjob *j = hj_new(tr);
	if (!j || !(j->md = md_new()) || (j->fd = fcntl(x->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		if (j)
			EVP_MD_CTX_free(j->md);
		free(j);
		return -ENOMEM;
	}
	j->kind = H_REHASH;
	j->st.st_size = x->cursor;
	memcpy(j->h, x->h, sizeof j->h);
	if (hj_submit(tr, j) < 0) {
		close(j->fd);
		EVP_MD_CTX_free(j->md);
		free(j);
		return -ENOMEM;
	}
	x->rehashing = 1;
	return 0;
}

/* Park a write or commit until the hash is rebuilt.  0 or -ENOMEM. */
static int wait_rehash(struct transfers *tr, struct xfer *x, int commit, int64_t off, const char *data,
                       const struct transfer_later *later)
{
	struct xwait *w = calloc(1, sizeof *w), **pp = &x->waiters;
	if (!w || (data && !(w->data = strdup(data)))) {
		free(w);
		return -ENOMEM;
	}
	w->commit = commit;
	w->off = off;
	w->later = *later;
	while (*pp)
		pp = &(*pp)->next;
	*pp = w;
	tr->deferred++;
	return 0;
}

/* Run (ran) or drop the calls that waited for x's hash. */
static void run_waiters(struct transfers *tr, struct xfer *x, int ran)
{
	while (x->waiters) {
		struct xwait *w = x->waiters;
		x->waiters = w->next;
		if (ran) {
			struct transfer_reply r;
			if (dispatch_write(tr, x->h, w->off, w->data, w->commit, &w->later, &r) == 0)
				w->later.answer(w->later.ctx, &r);
		} else if (w->later.drop) {
			w->later.drop(w->later.ctx);
		}
		free(w->data);
		free(w);
	}
}

/* An upload's hash was rebuilt in the pool: it takes the result (or fails, or is reopened on
 * its next use when the pool stopped), then the calls that waited for it run. */
static void rehashed(struct transfers *tr, struct hjob *j, int ran)
{
	struct xfer *x = find(tr, j->h);
	if (!x || !x->rehashing)
		return;
	x->rehashing = 0;
	if (ran && j->rc == 0 && !x->md) {
		x->md = j->md;
		j->md = NULL;
	} else if (ran && j->rc < 0 && x->state == XS_ACTIVE) {
		fail_xfer(tr, x, "The staged bytes could not be read after a restart.");
	} else if (!ran) {
		xfer_close(x);   /* reopened (and hashed) on its next use */
	}
	run_waiters(tr, x, ran);
}

/* A pool job is over (ran: it ran; else the pool stopped first): back on the loop, its
 * outcome goes where it belongs, and the caller waiting for it is answered (or dropped). */
static void hj_done(void *arg, int ran)
{
	struct hjob *j = arg;
	struct transfers *tr = j->tr;
	struct transfer_reply r;
	tr->jobs--;
	if (j->kind == H_REHASH) {
		rehashed(tr, j, ran);
	} else if (j->kind == H_SYNC) {
		struct xfer *x = find(tr, j->h);
		if (x && (!ran || j->rc < 0))
			fail_acks(tr, x, ran ? j->rc : -ECANCELED);
		else if (x)
			flush_acks(tr, x, j->st.st_size);
	} else if (!ran) {
		struct xfer *x = j->kind == H_COPY ? find(tr, j->h) : NULL;
		if (x)
			x->committing = 0;
		if (j->kind != H_ARTIFACT && j->later.drop)
			j->later.drop(j->later.ctx);
	} else if (j->kind == H_ARTIFACT) {
		artifact_hashed(tr, j);
	} else {
		if (j->kind == H_OPEN && j->rc < 0)
			hash_failure(j->abs, j->rc, &r);
		else if (j->kind == H_OPEN)
			download_opened(tr, &j->fd, &j->st, j->abs, j->sha, &r);
		else if (j->kind == H_READ)
			read_verified(tr, j, &r);
		else
			copied(tr, j, &r);
		j->later.answer(j->later.ctx, &r);
	}
	if (j->out >= 0)
		close(j->out);
	if (j->dirfd >= 0)
		close(j->dirfd);
	if (j->fd >= 0)
		close(j->fd);
	EVP_MD_CTX_free(j->md);
	free(j);
}

/* Small artifacts are hashed at once; large ones in the pool, so collecting a task's outputs
 * never stalls the loop; very large ones not at all (artifactHashMaxBytes). */
int transfer_hash_artifact(struct transfers *tr, const struct task *t, const char *name, int fd,
                           const struct stat *st, char sha[65])
{
	long cap = tr->sv->cfg ? tr->sv->cfg->server.artifact_hash_max_bytes : ARTIFACT_HASH_MAX_DEFAULT;
	if (st->st_size > cap)
		return ARTIFACT_SKIPPED;
	if (hash_later(tr, st->st_size)) {
		struct hjob *j = hj_new(tr);
		if (j && (j->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0) {
			j->tr = tr;
			j->kind = H_ARTIFACT;
			j->st = *st;
			snprintf(j->task, sizeof j->task, "%s", t->id);
			snprintf(j->name, sizeof j->name, "%s", name);
			if (hj_submit(tr, j) == 0)
				return ARTIFACT_PENDING;
			close(j->fd);
		}
		free(j);
	}
	return hash_file(NULL, fd, st->st_size, st, sha);
}

/* After a restart: artifacts whose hashing was cut short are hashed again. */
static void rehash_artifacts(struct transfers *tr)
{
	for (struct task *t = tr->sv->tasks ? tasks_newest(tr->sv->tasks) : NULL; t; t = t->next) {
		cJSON *a;
		cJSON_ArrayForEach(a, t->artifacts) {
			const cJSON *n = cJSON_GetObjectItem(a, "name"), *stt = cJSON_GetObjectItem(a, "sha256Status");
			char err[600], sha[65];
			struct stat st;
			int fd;
			if (!cJSON_IsString(n) || !cJSON_IsString(stt) || strcmp(stt->valuestring, "pending") != 0 ||
			    artifacts_open(tr->sv, t->id, n->valuestring, &fd, &st, err, sizeof err) < 0)
				continue;
			int rc = transfer_hash_artifact(tr, t, n->valuestring, fd, &st, sha);
			if (rc == 0 || rc == ARTIFACT_SKIPPED || rc < 0) {
				struct hjob j = { .tr = tr, .rc = rc == ARTIFACT_SKIPPED ? -EFBIG : rc, .st = st };
				snprintf(j.task, sizeof j.task, "%s", t->id);
				snprintf(j.name, sizeof j.name, "%s", n->valuestring);
				memcpy(j.sha, sha, sizeof sha);
				artifact_hashed(tr, &j);
			}
			close(fd);
		}
	}
}

/* The calls on an existing handle. */
static struct xfer *handle_of(struct transfers *tr, const char *h, struct transfer_reply *r)
{
	struct xfer *x = find(tr, h);
	if (!x)
		unknown_handle(tr, h, failure(r));
	return x;
}

/* Writes and commits wait while an upload's hash is rebuilt after a restart (or are told to
 * call again in a moment when they cannot wait). */
static int dispatch_write(struct transfers *tr, const char *h, int64_t off, const char *data, int commit,
                          const struct transfer_later *later, struct transfer_reply *r)
{
	struct xfer *x = handle_of(tr, h, r);
	int rc;
	if (!x)
		return 0;
	if (x->rehashing) {
		if (later && wait_rehash(tr, x, commit, off, data, later) == 0)
			return TRANSFER_LATER;
		transfer_error_set(failure(r), "not_active", 1, "Call again in a moment: the upload's staged bytes are "
			"being checked after a restart.", "Upload %s is being checked after a restart.", x->h);
		with_cursor(&r->err, x->cursor);
		return 0;
	}
	rc = commit ? do_commit(tr, x, later, r) : do_write(tr, x, off, data, later, r);
	limit_ready(tr, x);
	return rc;
}

int transfer_write(struct transfers *tr, const char *handle, int64_t offset, const char *data,
                   const struct transfer_later *later, struct transfer_reply *r)
{
	return dispatch_write(tr, handle, offset, data, 0, later, r);
}

int transfer_commit(struct transfers *tr, const char *handle, const struct transfer_later *later,
                    struct transfer_reply *r)
{
	return dispatch_write(tr, handle, 0, NULL, 1, later, r);
}

/* Reads need no waiting list: only a download's reopen may go to the pool, and it carries the
 * read with it. */
int transfer_read(struct transfers *tr, const char *handle, int64_t offset, int64_t length,
                  const struct transfer_later *later, struct transfer_reply *r)
{
	struct xfer *x = handle_of(tr, handle, r);
	if (!x)
		return 0;
	int rc = do_read(tr, x, offset, length, later, r);
	limit_ready(tr, x);
	return rc;
}

/* Status never waits and never fails a transfer: it is what a client calls after a reconnect. */
int transfer_status(struct transfers *tr, const char *handle, struct transfer_reply *r)
{
	struct xfer *x = handle_of(tr, handle, r);
	if (x) {
		do_status(x, r);
		limit_ready(tr, x);
	}
	return 0;
}

/* ---- files into jobs ---------------------------------------------------------------------------- */

/* A handle resolves to its committed file's path, which is then opened like any path: through
 * the roots again, so a file replaced since its commit is not taken on trust. */
int transfer_open_input(struct transfers *tr, const char *v, int *fd, int64_t *size, char *base, size_t baselen,
                        struct transfer_error *e)
{
	char abs[PATH_MAX + 64];
	struct stat st;
	const char *path = v;
	if (strlen(v) == 32 && is_hex(v, 32)) {
		struct xfer *x = find(tr, v);
		if (!x) {
			unknown_handle(tr, v, e);
			return -1;
		}
		if (x->dir != X_UPLOAD) {
			transfer_error_param(e, "handle", "Pass the handle of a committed upload, or a path.",
			              "This handle is a download, not an uploaded file.");
			return -1;
		}
		if (x->state != XS_COMMITTED) {
			transfer_error_set(e, "not_active", 1, "Call file_transfer_commit with the handle first, then call the tool "
			          "again.", "Upload %s is not committed yet.", x->h);
			return -1;
		}
		path = x->path;
	}
	if (download_fd(tr, path, fd, &st, abs, sizeof abs, e) < 0)
		return -1;
	*size = st.st_size;
	struct artifacts_uri u;
	const char *b = artifacts_uri_parse(abs, &u) == 0 ? u.name : last_name(abs);
	size_t bl = strlen(b);
	if (bl >= baselen) {
		close(*fd);
		*fd = -1;
		transfer_error_param(e, "path", NULL, "The file name is too long.");
		return -1;
	}
	memcpy(base, b, bl + 1);
	return 0;
}

unsigned long transfers_deferred(const struct transfers *tr)
{
	return tr->deferred;
}

struct supervisor *transfers_supervisor(struct transfers *tr)
{
	return tr->sv;
}

char *transfers_msgbuf(struct transfers *tr, size_t *len)
{
	*len = sizeof tr->msg;
	return tr->msg;
}
