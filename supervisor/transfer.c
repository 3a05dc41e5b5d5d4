/* supervisor/transfer.c — see transfer.h; docs/files.md is the model-facing description.
 *
 * An upload is staged in the destination folder itself, as ".fp-upload-<handle>.part", so the
 * commit is one rename in a folder whose descriptor was opened (through roots.c) when the
 * upload was opened: nothing done to the path afterwards can redirect it.  Every chunk is
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
#include "transfer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "b64.h"
#include "blob.h"
#include "facade.h"
#include "frame.h"
#include "persist.h"
#include "resources.h"
#include "roots.h"
#include "schema.h"
#include "tasks.h"
#include "wire.h"

#define XFER_TTL_MS     (7LL * 24 * 3600 * 1000)
#define CHUNK_SIZE      (256 * 1024)
#define CHUNK_MAX       (1024 * 1024)
#define CHUNK_B64_MAX   ((CHUNK_MAX + 2) / 3 * 4)
#define XFER_MAX_BYTES  (64LL << 30)
#define STAGE_PREFIX    ".fp-upload-"
#define IO_BUF          (1 << 20)
#define MAX_READY       64          /* transfers holding descriptors at once */
#define JSON_INT_MAX    9007199254740991.0   /* 2^53 - 1: larger integers do not survive JSON */

enum {
	REC_X_OPEN = 64, REC_X_CHUNK = 65, REC_X_END = 66, REC_X_GONE = 67, REC_X_CURSOR = 68,
	REC_X_SNAP = 80, REC_X_TOMB = 81,
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
	uint64_t dev, ino;          /* upload: destination folder; download: the file */
	char *msg;                  /* failed: why */
	/* runtime, not journaled */
	int ready;                  /* descriptors (and hash state) set up */
	int dirfd, fd;
	struct timespec mtime;      /* download: the file's mtime when hashed */
	EVP_MD_CTX *md;
	struct xfer *next;
};

struct xtomb {
	char h[33];
	int64_t until;
	struct xtomb *next;
};

struct transfers {
	struct supervisor *sv;
	struct roots *roots;
	struct xfer *list;
	struct xtomb *tombs;
	unsigned char *buf, *buf2;  /* IO_BUF each: chunk decode, duplicate compare, hashing */
	char *enc;                  /* B64_ENCODED_SIZE(CHUNK_MAX) */
	char msg[1024];             /* transfers_msgbuf */
};

/* ---- small helpers ----------------------------------------------------------------------- */

static int64_t now_ms(void)
{
	return loop_wall_ms();
}

static void iso(int64_t ms, char out[64])
{
	facade_iso_time(ms, out);
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
		ssize_t r = wire_pread_upto(fd, tr->buf2, want, off);
		if (r < 0)
			return (int)r;
		if ((size_t)r < want)
			return -EIO;
		EVP_DigestUpdate(md, tr->buf2, (size_t)r);
		off += r;
	}
	return 0;
}

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
		wire_hex(d, 32, out);
		rc = 0;
	}
	EVP_MD_CTX_free(c);
	return rc;
}

static void stage_name(const struct xfer *x, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s.part", STAGE_PREFIX, x->h);
}

static const char *last_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* ---- envelopes --------------------------------------------------------------------------- */

static cJSON *env(const char *code, int retryable, const char *hint, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static cJSON *env(const char *code, int retryable, const char *hint, const char *fmt, ...)
{
	char msg[1200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return task_envelope(code, msg, retryable, hint);
}

static cJSON *with_cursor(cJSON *e, int64_t cursor)
{
	cJSON *p = cJSON_AddObjectToObject(e, "partial");
	cJSON_AddNumberToObject(p, "cursor", (double)cursor);
	return e;
}

static cJSON *invalid_param(const char *param, const char *hint, const char *msg)
{
	cJSON *e = task_envelope("invalid_param", msg, 1,
		hint ? hint : "Fix the named parameter (see the tool's inputSchema) and call again.");
	cJSON_AddStringToObject(e, "param", param);
	return e;
}

static cJSON *roots_array(const struct transfers *tr)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; tr->roots && i < roots_count(tr->roots); i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(roots_path(tr->roots, i)));
	return a;
}

/* A path that roots.c refused: not_found when it simply is not there, invalid_param (with the
 * allowed roots) for everything that is not allowed. */
static cJSON *path_error(const struct transfers *tr, int rc, const char *msg)
{
	cJSON *e;
	if (rc == -ENOENT || rc == -ENOTDIR) {
		e = task_envelope("not_found", msg, 0,
			"Check the path: it is relative to the first file root, or absolute inside one of "
			"allowedRoots. Symbolic links are not followed.");
	} else {
		e = invalid_param("path", "Give a path inside one of allowedRoots (relative paths start "
		                  "at the first root), without '..' or symbolic links.", msg);
	}
	cJSON_AddItemToObject(e, "allowedRoots", roots_array(tr));
	return e;
}

static cJSON *unknown_handle(const struct transfers *tr, const char *h)
{
	for (const struct xtomb *t = tr->tombs; t; t = t->next)
		if (strcmp(t->h, h) == 0)
			return env("transfer_expired", 0,
				"Start again with file_transfer_open; transfers expire 7 days after their last use.",
				"Transfer %s expired and was removed (with its staged bytes).", h);
	return env("unknown_transfer", 0,
		"Check the handle (32 hex digits, as file_transfer_open returned it). If it is lost, "
		"call file_transfer_open again with the same path, size and sha256: an unfinished "
		"upload of that path is resumed under its old handle.",
		"No transfer has handle '%.64s'.", h);
}

/* ---- journal ----------------------------------------------------------------------------- */

static int rec_end(struct transfers *tr, struct frame_map *r, uint8_t type)
{
	int rc = 0;
	if (tr->sv->persist) {
		rc = persist_append(tr->sv->persist, type, r->sb.data, r->sb.size);
		if (rc < 0)
			fplog(&tr->sv->log, FPLOG_CRITICAL, NULL, "journal append of a transfer record failed: %s",
			      strerror(-rc));
	}
	msgpack_sbuffer_destroy(&r->sb);
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

/* The OPEN_KEYS fields that open and snap records share (replay_new reads them). */
#define OPEN_KEYS 10
static void pack_open_fields(struct frame_map *r, const struct xfer *x)
{
	frame_pack_kv_str(&r->pk, "h", x->h);
	frame_pack_kv_str(&r->pk, "dir", dir_name(x->dir));
	frame_pack_kv_str(&r->pk, "path", x->path);
	frame_pack_kv_int(&r->pk, "size", x->size);
	frame_pack_kv_str(&r->pk, "want", x->want);
	frame_pack_kv_int(&r->pk, "ow", x->overwrite);
	frame_pack_kv_int(&r->pk, "at", x->created_ms);
	frame_pack_kv_int(&r->pk, "dev", (int64_t)x->dev);
	frame_pack_kv_int(&r->pk, "ino", (int64_t)x->ino);
	frame_pack_kv_str(&r->pk, "sha", x->sha);
}

static void j_open(struct transfers *tr, const struct xfer *x)
{
	struct frame_map r;
	frame_map_begin(&r, OPEN_KEYS);
	pack_open_fields(&r, x);
	rec_end(tr, &r, REC_X_OPEN);
}

static void j_chunk(struct transfers *tr, const struct xfer *x)
{
	struct frame_map r;
	frame_map_begin(&r, 4);
	frame_pack_kv_str(&r.pk, "h", x->h);
	frame_pack_kv_int(&r.pk, "off", x->last_off);
	frame_pack_kv_int(&r.pk, "len", x->last_len);
	frame_pack_kv_int(&r.pk, "at", x->touched_ms);
	rec_end(tr, &r, REC_X_CHUNK);
}

static void j_end(struct transfers *tr, const struct xfer *x)
{
	struct frame_map r;
	frame_map_begin(&r, 6);
	frame_pack_kv_str(&r.pk, "h", x->h);
	frame_pack_kv_str(&r.pk, "state", state_name(x->state));
	frame_pack_kv_str(&r.pk, "sha", x->sha);
	frame_pack_kv_int(&r.pk, "size", x->size);
	frame_pack_kv_str(&r.pk, "msg", x->msg ? x->msg : "");
	frame_pack_kv_int(&r.pk, "at", x->finished_ms);
	rec_end(tr, &r, REC_X_END);
}

static void j_cursor(struct transfers *tr, const struct xfer *x)
{
	struct frame_map r;
	frame_map_begin(&r, 3);
	frame_pack_kv_str(&r.pk, "h", x->h);
	frame_pack_kv_int(&r.pk, "cursor", x->cursor);
	frame_pack_kv_int(&r.pk, "at", x->touched_ms);
	rec_end(tr, &r, REC_X_CURSOR);
}

static int j_tomb(struct transfers *tr, uint8_t type, const char *h, int64_t until)
{
	struct frame_map r;
	frame_map_begin(&r, 2);
	frame_pack_kv_str(&r.pk, "h", h);
	frame_pack_kv_int(&r.pk, "until", until);
	return rec_end(tr, &r, type);
}

static int j_snap(struct transfers *tr, const struct xfer *x)
{
	struct frame_map r;
	frame_map_begin(&r, OPEN_KEYS + 7);
	pack_open_fields(&r, x);
	frame_pack_kv_int(&r.pk, "touched", x->touched_ms);
	frame_pack_kv_int(&r.pk, "finished", x->finished_ms);
	frame_pack_kv_int(&r.pk, "cursor", x->cursor);
	frame_pack_kv_int(&r.pk, "loff", x->last_off);
	frame_pack_kv_int(&r.pk, "llen", x->last_len);
	frame_pack_kv_str(&r.pk, "state", state_name(x->state));
	frame_pack_kv_str(&r.pk, "msg", x->msg ? x->msg : "");
	return rec_end(tr, &r, REC_X_SNAP);
}

/* ---- the table ----------------------------------------------------------------------------- */

static struct xfer *find(struct transfers *tr, const char *h)
{
	for (struct xfer *x = tr->list; x; x = x->next)
		if (strcmp(x->h, h) == 0)
			return x;
	return NULL;
}

static struct xfer *xfer_alloc(const char *h)
{
	struct xfer *x = calloc(1, sizeof *x);
	if (!x)
		return NULL;
	snprintf(x->h, sizeof x->h, "%s", h);
	x->dirfd = x->fd = -1;
	x->size = -1;
	return x;
}

static void xfer_close(struct xfer *x)
{
	if (x->fd >= 0)
		close(x->fd);
	if (x->dirfd >= 0)
		close(x->dirfd);
	x->fd = x->dirfd = -1;
	EVP_MD_CTX_free(x->md);
	x->md = NULL;
	x->ready = 0;
}

static void xfer_free(struct xfer *x)
{
	xfer_close(x);
	free(x->path);
	free(x->msg);
	free(x);
}

static void unlink_xfer(struct transfers *tr, struct xfer *x)
{
	for (struct xfer **pp = &tr->list; *pp; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			return;
		}
	}
}

static int tomb_add(struct transfers *tr, const char *h, int64_t until)
{
	struct xtomb *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	snprintf(t->h, sizeof t->h, "%s", h);
	t->until = until;
	t->next = tr->tombs;
	tr->tombs = t;
	return 0;
}

static void set_msg(struct xfer *x, const char *msg)
{
	free(x->msg);
	x->msg = msg ? strdup(msg) : NULL;
}

/* Best effort: remove an upload's staging file, through the folder descriptor when there is
 * one, else by resolving the folder again (after a restart, or when recovery failed). */
static void remove_stage(struct transfers *tr, struct xfer *x)
{
	char name[80], err[256];
	struct roots_loc loc;
	int d = x->dirfd;
	if (x->dir != X_UPLOAD)
		return;
	stage_name(x, name, sizeof name);
	if (d < 0 && tr->roots && roots_open_parent(tr->roots, x->path, &d, &loc, err, sizeof err) < 0)
		d = -1;
	if (d >= 0) {
		struct stat st;
		/* Only in the folder the upload was opened in: a same-named folder made later is
		 * someone else's. */
		if (fstat(d, &st) == 0 && (uint64_t)st.st_dev == x->dev && (uint64_t)st.st_ino == x->ino)
			unlinkat(d, name, 0);
		if (d != x->dirfd)
			close(d);
	}
}

/* A transfer that cannot go on answers not_active from now on; an upload's staged bytes are
 * dropped. */
static void fail_xfer(struct transfers *tr, struct xfer *x, const char *why)
{
	remove_stage(tr, x);
	xfer_close(x);
	x->state = XS_FAILED;
	set_msg(x, why);
	x->finished_ms = x->touched_ms = now_ms();
	j_end(tr, x);
}

/* Drop the tombstones whose time is up: their handles become merely unknown. */
static void prune_tombs(struct transfers *tr, int64_t now)
{
	for (struct xtomb **pp = &tr->tombs; *pp;) {
		if ((*pp)->until <= now) {
			struct xtomb *t = *pp;
			*pp = t->next;
			free(t);
		} else {
			pp = &(*pp)->next;
		}
	}
}

/* Forget a transfer: staged bytes deleted, the handle answers transfer_expired for a TTL. */
static void remove_xfer(struct transfers *tr, struct xfer *x, int64_t now)
{
	if (x->dir == X_UPLOAD && x->state == XS_ACTIVE)
		remove_stage(tr, x);
	unlink_xfer(tr, x);
	tomb_add(tr, x->h, now + XFER_TTL_MS);
	j_tomb(tr, REC_X_GONE, x->h, now + XFER_TTL_MS);
	xfer_free(x);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

struct transfers *transfers_new(struct supervisor *sv)
{
	struct transfers *tr = calloc(1, sizeof *tr);
	if (!tr)
		return NULL;
	tr->sv = sv;
	tr->buf = malloc(IO_BUF + 16);
	tr->buf2 = malloc(IO_BUF + 16);
	tr->enc = malloc(B64_ENCODED_SIZE(CHUNK_MAX));
	if (!tr->buf || !tr->buf2 || !tr->enc)
		goto fail;
	if (roots_new(sv->cfg ? sv->cfg->server.file_roots : NULL, sv->cfg ? sv->cfg->server.n_file_roots : 0, 0,
	              &tr->roots) < 0)
		goto fail;
	return tr;
fail:
	transfers_free(tr);
	return NULL;
}

void transfers_free(struct transfers *tr)
{
	if (!tr)
		return;
	while (tr->list) {
		struct xfer *x = tr->list;
		tr->list = x->next;
		xfer_free(x);
	}
	while (tr->tombs) {
		struct xtomb *t = tr->tombs;
		tr->tombs = t->next;
		free(t);
	}
	roots_free(tr->roots);
	free(tr->buf);
	free(tr->buf2);
	free(tr->enc);
	free(tr);
}

/* ---- replay --------------------------------------------------------------------------------- */

static int64_t get_i(const msgpack_object *m, const char *k, int64_t def)
{
	int64_t v;
	return frame_get_int(m, k, &v) == 0 ? v : def;
}

/* A record's failure message; an empty one means none. */
static void replay_msg(struct xfer *x, const msgpack_object *m)
{
	char *msg = frame_get_strdup(m, "msg");
	free(x->msg);
	x->msg = msg && *msg ? msg : NULL;
	if (!x->msg)
		free(msg);
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

/* The fields open and snap records share. */
static struct xfer *replay_new(struct transfers *tr, const char *h, const msgpack_object *m,
                               char *err, size_t errlen)
{
	char dir[16];
	struct xfer *x = NULL;
	if (find(tr, h)) {
		snprintf(err, errlen, "transfer %s opened twice", h);
		return NULL;
	}
	if (frame_get_strcpy(m, "dir", dir, sizeof dir) < 0 || (strcmp(dir, "upload") && strcmp(dir, "download"))) {
		snprintf(err, errlen, "transfer %s: record without a direction", h);
		return NULL;
	}
	x = xfer_alloc(h);
	if (!x || !(x->path = frame_get_strdup(m, "path"))) {
		snprintf(err, errlen, "transfer %s: record without a path", h);
		if (x)
			xfer_free(x);
		return NULL;
	}
	x->dir = strcmp(dir, "upload") == 0 ? X_UPLOAD : X_DOWNLOAD;
	x->size = get_i(m, "size", -1);
	frame_get_strcpy(m, "want", x->want, sizeof x->want);
	frame_get_strcpy(m, "sha", x->sha, sizeof x->sha);
	x->overwrite = get_i(m, "ow", 0) != 0;
	x->created_ms = x->touched_ms = get_i(m, "at", 0);
	x->dev = (uint64_t)get_i(m, "dev", 0);
	x->ino = (uint64_t)get_i(m, "ino", 0);
	x->next = tr->list;
	tr->list = x;
	return x;
}

int transfer_replay(struct transfers *tr, int type, const msgpack_object *m, char *err, size_t errlen)
{
	char h[33], st[16];
	if (frame_get_strcpy(m, "h", h, sizeof h) < 0 || strlen(h) != 32) {
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
		x->touched_ms = get_i(m, "touched", x->created_ms);
		x->finished_ms = get_i(m, "finished", 0);
		x->cursor = get_i(m, "cursor", 0);
		x->last_off = get_i(m, "loff", 0);
		x->last_len = get_i(m, "llen", 0);
		int s = frame_get_strcpy(m, "state", st, sizeof st) == 0 ? parse_state(st) : -1;
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
		return tomb_add(tr, h, get_i(m, "until", 0)) < 0 ? -1 : 0;
	default:
		break;
	}
	if (!x) {
		snprintf(err, errlen, "transfer record of type %d for unknown transfer %s", type, h);
		return -1;
	}
	switch (type) {
	case REC_X_CHUNK:
		x->last_off = get_i(m, "off", 0);
		x->last_len = get_i(m, "len", 0);
		x->cursor = x->last_off + x->last_len;
		x->touched_ms = get_i(m, "at", x->touched_ms);
		return 0;
	case REC_X_CURSOR:
		x->cursor = get_i(m, "cursor", 0);
		x->last_off = x->cursor;
		x->last_len = 0;
		x->touched_ms = get_i(m, "at", x->touched_ms);
		return 0;
	case REC_X_END: {
		int s = frame_get_strcpy(m, "state", st, sizeof st) == 0 ? parse_state(st) : -1;
		if (s != XS_COMMITTED && s != XS_FAILED) {
			snprintf(err, errlen, "transfer %s: end record with a bad state", h);
			return -1;
		}
		x->state = (enum xstate)s;
		frame_get_strcpy(m, "sha", x->sha, sizeof x->sha);
		x->size = get_i(m, "size", x->size);
		replay_msg(x, m);
		x->finished_ms = x->touched_ms = get_i(m, "at", x->touched_ms);
		return 0;
	}
	default:
		snprintf(err, errlen, "unknown transfer record type %d (written by a newer forkpoint?)", type);
		return -1;
	}
}

int transfer_snapshot(struct transfers *tr)
{
	int rc = 0;
	for (struct xfer *x = tr->list; x && rc == 0; x = x->next)
		rc = j_snap(tr, x);
	for (struct xtomb *t = tr->tombs; t && rc == 0; t = t->next)
		rc = j_tomb(tr, REC_X_TOMB, t->h, t->until);
	return rc;
}

/* ---- recovery -------------------------------------------------------------------------------- */

/* Set up an upload's descriptors and hash state from what is on disk (after a restart, or when
 * a parked upload is used again).  0, or -errno with the reason in why (the caller then fails
 * the upload). */
static int upload_reopen(struct transfers *tr, struct xfer *x, char *why, size_t whylen)
{
	char name[80], err[600];
	struct roots_loc loc;
	struct stat st;
	int rc;
	stage_name(x, name, sizeof name);
	if (!tr->roots || (rc = roots_open_parent(tr->roots, x->path, &x->dirfd, &loc, err, sizeof err)) < 0) {
		snprintf(why, whylen, "The destination folder could not be opened again: %s",
		         tr->roots ? err : "no file roots");
		return -ENOENT;
	}
	if (fstat(x->dirfd, &st) < 0 || (uint64_t)st.st_dev != x->dev || (uint64_t)st.st_ino != x->ino) {
		snprintf(why, whylen, "The destination folder of %s is no longer the folder the upload was "
		         "opened in (it was replaced)", x->path);
		return -ESTALE;
	}
	x->fd = openat(x->dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (x->fd < 0 && errno == ENOENT) {
		struct stat dst;
		/* The commit renamed the staging file into place but the end record did not make it
		 * to the journal: the file at the destination with the acknowledged size is ours —
		 * if it also has the declared sha256, or if nothing was there when the upload began. */
		if (fstatat(x->dirfd, loc.name, &dst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(dst.st_mode) &&
		    dst.st_size == x->cursor && (x->size < 0 || x->size == x->cursor) && (x->want[0] || !x->overwrite)) {
			int f = openat(x->dirfd, loc.name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			char sha[65];
			if (f >= 0 && blob_sha256_fd(f, (uint64_t)x->cursor, sha) == 0 &&
			    (!x->want[0] || strcmp(sha, x->want) == 0)) {
				close(f);
				memcpy(x->sha, sha, sizeof sha);
				x->state = XS_COMMITTED;
				x->size = x->cursor;
				x->finished_ms = x->touched_ms;
				xfer_close(x);
				j_end(tr, x);
				return 0;
			}
			if (f >= 0)
				close(f);
		}
		/* The staged bytes are gone: start the upload over under the same handle. */
		x->fd = openat(x->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
		j_cursor(tr, x);
	}
	/* Bytes past the cursor were written but never acknowledged: they will be sent again. */
	if (st.st_size > x->cursor && ftruncate(x->fd, x->cursor) < 0) {
		rc = -errno;
		snprintf(why, whylen, "The staged bytes could not be cut back to the cursor: %s", strerror(-rc));
		return rc;
	}
	if (!(x->md = md_new()))
		return -ENOMEM;
	if ((rc = hash_range(tr, x->fd, x->cursor, x->md)) < 0) {
		snprintf(why, whylen, "The staged bytes could not be read: %s", strerror(-rc));
		return rc;
	}
	x->ready = 1;
	return 0;
}

static void limit_ready(struct transfers *tr, const struct xfer *keep);

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
	prune_tombs(tr, now);
}

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
	prune_tombs(tr, now);
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
		if (x != keep && (!lru || x->touched_ms < lru->touched_ms))
			lru = x;
	}
	if (n > MAX_READY && lru)
		xfer_close(lru);
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

/* ---- tool definitions ----------------------------------------------------------------------- */

static void handle_prop(cJSON *p)
{
	cJSON *h = facade_prop(p, "handle", "string", "The handle file_transfer_open returned.");
	cJSON_AddNumberToObject(h, "minLength", 1);
	cJSON_AddNumberToObject(h, "maxLength", 64);
}

void transfer_list_tools(cJSON *arr)
{
	cJSON *s, *p, *q;
	s = facade_tool_def(arr, "file_transfer_open", "Open a file upload or download",
		"Start moving a file in or out of the server without putting it in the conversation. "
		"upload: the file is written at path (inside the server's file roots) by file_transfer_write "
		"chunks and appears there at file_transfer_commit, checked against size and sha256. "
		"download: path is a file in the roots or a task artifact URI (forkpoint://tasks/ID/artifacts/NAME); "
		"read it with file_transfer_read and compare its sha256. Transfers survive reconnects and "
		"server restarts and expire 7 days after their last use.", 0, 0, 0);
	p = cJSON_GetObjectItem(s, "properties");
	q = facade_prop(p, "direction", "string", "upload (to the server) or download (from it).");
	cJSON *en = cJSON_AddArrayToObject(q, "enum");
	cJSON_AddItemToArray(en, cJSON_CreateString("upload"));
	cJSON_AddItemToArray(en, cJSON_CreateString("download"));
	q = facade_prop(p, "path", "string", "File path: relative to the first file root, or absolute inside a root. "
	         "For downloads also a forkpoint://tasks/ID/artifacts/NAME URI.");
	cJSON_AddNumberToObject(q, "minLength", 1);
	cJSON_AddNumberToObject(q, "maxLength", 4096);
	q = facade_prop(p, "size", "integer", "Upload: the file's exact size in bytes (recommended; checked at commit).");
	cJSON_AddNumberToObject(q, "minimum", 0);
	cJSON_AddNumberToObject(q, "maximum", JSON_INT_MAX);
	facade_prop(p, "sha256", "string", "Upload: the file's sha256 as 64 hex digits (recommended; checked at commit).");
	q = facade_prop(p, "overwrite", "boolean", "Upload: replace an existing file at path (default false: refuse).");
	cJSON_AddBoolToObject(q, "default", 0);
	facade_require(s, "direction", "path");

	s = facade_tool_def(arr, "file_transfer_write", "Write one upload chunk",
		"Send the next chunk of an upload: offset must be the nextOffset of the previous answer "
		"(0 at first), data the chunk's bytes in base64 (chunkSize bytes recommended, at most 1 MiB). "
		"On offset_mismatch resume at error.partial.cursor.", 0, 0, 0);
	p = cJSON_GetObjectItem(s, "properties");
	handle_prop(p);
	q = facade_prop(p, "offset", "integer", "Byte offset of this chunk in the file: the current nextOffset.");
	cJSON_AddNumberToObject(q, "minimum", 0);
	cJSON_AddNumberToObject(q, "maximum", JSON_INT_MAX);
	facade_prop(p, "data", "string", "The chunk's bytes, base64 (standard alphabet, with or without padding).");
	cJSON *r = cJSON_AddArrayToObject(s, "required");
	cJSON_AddItemToArray(r, cJSON_CreateString("handle"));
	cJSON_AddItemToArray(r, cJSON_CreateString("offset"));
	cJSON_AddItemToArray(r, cJSON_CreateString("data"));

	s = facade_tool_def(arr, "file_transfer_read", "Read one download chunk",
		"Read bytes of a download: from offset (default: where the last read ended), length bytes "
		"(default chunkSize, at most 1 MiB), returned as base64. At eof the answer carries the "
		"whole file's sha256.", 1, 0, 1);
	p = cJSON_GetObjectItem(s, "properties");
	handle_prop(p);
	q = facade_prop(p, "offset", "integer", "Byte offset to read from (default: nextOffset of the previous read).");
	cJSON_AddNumberToObject(q, "minimum", 0);
	cJSON_AddNumberToObject(q, "maximum", JSON_INT_MAX);
	q = facade_prop(p, "length", "integer", "Bytes to read (default 262144, at most 1048576).");
	cJSON_AddNumberToObject(q, "minimum", 1);
	cJSON_AddNumberToObject(q, "maximum", JSON_INT_MAX);
	facade_require(s, "handle", NULL);

	s = facade_tool_def(arr, "file_transfer_commit", "Finish an upload",
		"Check the uploaded bytes against the declared size and sha256 and move the file into place "
		"atomically. Calling it again after success answers the same.", 0, 0, 1);
	p = cJSON_GetObjectItem(s, "properties");
	handle_prop(p);
	facade_require(s, "handle", NULL);

	s = facade_tool_def(arr, "file_transfer_status", "Show a transfer",
		"State of an upload or download: active, completed or failed, and nextOffset, the offset to "
		"continue at. Use it after a reconnect or a failed call.", 1, 0, 1);
	p = cJSON_GetObjectItem(s, "properties");
	handle_prop(p);
	facade_require(s, "handle", NULL);
}

int transfer_is_tool(const char *name)
{
	return strcmp(name, "file_transfer_open") == 0 || strcmp(name, "file_transfer_write") == 0 ||
	       strcmp(name, "file_transfer_read") == 0 || strcmp(name, "file_transfer_commit") == 0 ||
	       strcmp(name, "file_transfer_status") == 0;
}

/* ---- views ----------------------------------------------------------------------------------- */

static int64_t expires_at(const struct xfer *x)
{
	return (x->state == XS_ACTIVE ? x->touched_ms : x->finished_ms) + XFER_TTL_MS;
}

static void add_common(cJSON *o, const struct xfer *x)
{
	cJSON_AddStringToObject(o, "handle", x->h);
	cJSON_AddStringToObject(o, "direction", dir_name(x->dir));
	cJSON_AddStringToObject(o, "path", x->path);
	if (x->size >= 0)
		cJSON_AddNumberToObject(o, "size", (double)x->size);
}

static void add_expiry(cJSON *o, const struct xfer *x)
{
	char t[64];
	iso(expires_at(x), t);
	cJSON_AddStringToObject(o, "expiresAt", t);
}

static cJSON *upload_opened(const struct xfer *x, int resumed)
{
	cJSON *o = cJSON_CreateObject();
	add_common(o, x);
	if (x->want[0])
		cJSON_AddStringToObject(o, "sha256", x->want);
	cJSON_AddNumberToObject(o, "chunkSize", CHUNK_SIZE);
	cJSON_AddNumberToObject(o, "maxChunkSize", CHUNK_MAX);
	cJSON_AddNumberToObject(o, "nextOffset", (double)x->cursor);
	add_expiry(o, x);
	if (resumed)
		cJSON_AddBoolToObject(o, "resumed", 1);
	cJSON_AddStringToObject(o, "note", resumed
		? "An unfinished upload of this path with the same size and sha256 already existed: this is its "
		  "handle. Continue with file_transfer_write at nextOffset, then call file_transfer_commit."
		: "Upload open. Send the file in order with file_transfer_write {handle, offset: nextOffset, data: "
		  "base64 of the next chunkSize bytes}; each answer gives the next offset. Then call "
		  "file_transfer_commit {handle}. After a failed call or a reconnect, file_transfer_status gives "
		  "the offset to resume at.");
	return facade_result(o, 0);
}

static cJSON *committed_view(const struct xfer *x, int again)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "status", "completed");
	add_common(o, x);
	cJSON_AddStringToObject(o, "sha256", x->sha);
	cJSON_AddStringToObject(o, "note", again
		? "Already committed: the file is in place at path with this size and sha256."
		: "The file is in place at path, verified. Pass path (or this handle, for tool arguments that "
		  "take an uploaded file) to the tool that needs it.");
	return facade_result(o, 0);
}

/* ---- open ------------------------------------------------------------------------------------ */

static struct xfer *active_upload_of(struct transfers *tr, const char *abs)
{
	for (struct xfer *x = tr->list; x; x = x->next)
		if (x->dir == X_UPLOAD && x->state == XS_ACTIVE && strcmp(x->path, abs) == 0)
			return x;
	return NULL;
}

static cJSON *open_upload(struct transfers *tr, const char *path, int64_t size, const char *want, int overwrite)
{
	char err[1000], name[80];
	struct roots_loc loc;
	struct stat st;
	struct xfer *x = NULL;
	int dirfd = -1, rc;
	cJSON *res;

	if (size > XFER_MAX_BYTES) {
		res = facade_failure(env("file_too_large", 0, "Split the file into parts of at most 64 GiB.",
		               "The declared size %lld is over the limit of %lld bytes.", (long long)size,
		               (long long)XFER_MAX_BYTES));
		goto out;
	}
	if ((rc = roots_open_parent(tr->roots, path, &dirfd, &loc, err, sizeof err)) < 0) {
		res = facade_failure(path_error(tr, rc, err));
		goto out;
	}
	if (strncmp(loc.name, STAGE_PREFIX, strlen(STAGE_PREFIX)) == 0) {
		res = facade_failure(invalid_param("path", NULL, "Names starting with " STAGE_PREFIX " are reserved for "
		                         "uploads in progress; choose another name."));
		goto out;
	}
	struct xfer *old = active_upload_of(tr, loc.abs);
	if (old && old->size == size && strcmp(old->want, want) == 0 && old->overwrite == overwrite &&
	    upload_ready(tr, old) == 0 && old->state == XS_ACTIVE) {
		old->touched_ms = now_ms();
		res = upload_opened(old, 1);
		goto out;
	}
	if (old && old->state == XS_ACTIVE)
		fail_xfer(tr, old, "Replaced by a newer file_transfer_open of the same path.");
	if (fstatat(dirfd, loc.name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!overwrite) {
			cJSON *e = env("file_exists", 0, "Choose another path, or call file_transfer_open again with "
			               "overwrite: true to replace the file when the upload is committed.",
			               "'%s' already exists.", loc.abs);
			res = facade_failure(e);
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			res = facade_failure(invalid_param("path", NULL, "The path exists and is not a regular file; only "
			                         "regular files can be replaced."));
			goto out;
		}
	}
	if (!(x = xfer_alloc("")) || wire_random_hex(x->h) < 0 || !(x->path = strdup(loc.abs)) || !(x->md = md_new())) {
		res = facade_failure(env("internal_error", 1, "Call file_transfer_open again.", "Out of memory."));
		goto out;
	}
	x->dir = X_UPLOAD;
	x->size = size;
	snprintf(x->want, sizeof x->want, "%s", want);
	x->overwrite = overwrite;
	x->created_ms = x->touched_ms = now_ms();
	stage_name(x, name, sizeof name);
	x->fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (x->fd < 0 || fstat(dirfd, &st) < 0) {
		res = facade_failure(env("internal_error", 1, "Check that the folder is writable by the server, then call "
		               "file_transfer_open again.", "Cannot create the staging file in the folder of '%s': %s.",
		               loc.abs, strerror(errno)));
		goto out;
	}
	/* The staging file's name must survive a crash as long as the journal says it exists. */
	fsync(dirfd);
	x->dev = (uint64_t)st.st_dev;
	x->ino = (uint64_t)st.st_ino;
	x->dirfd = dirfd;
	dirfd = -1;
	x->ready = 1;
	x->next = tr->list;
	tr->list = x;
	j_open(tr, x);
	res = upload_opened(x, 0);
	x = NULL;
out:
	if (x) {
		if (x->fd >= 0) {
			stage_name(x, name, sizeof name);
			unlinkat(x->dirfd >= 0 ? x->dirfd : dirfd, name, 0);
		}
		xfer_free(x);
	}
	if (dirfd >= 0)
		close(dirfd);
	return res;
}

/* Open the file behind a download path: a file in the roots or an artifact URI. */
static int download_fd(struct transfers *tr, const char *path, int *fd, struct stat *st, char *abs, size_t abslen,
                       cJSON **e)
{
	char err[1000];
	int rc;
	if (strncmp(path, RES_SCHEME, strlen(RES_SCHEME)) == 0) {
		struct res_uri u;
		if (res_uri_parse(path, &u) < 0 || u.kind == RES_LOG) {
			*e = invalid_param("path", "Use forkpoint://tasks/ID/artifacts/NAME as listed in the task's "
			                   "artifacts, or forkpoint://tasks/ID/result for a large result; read logs "
			                   "with resources/read.", "Only task artifacts and results can be downloaded by URI.");
			return -EINVAL;
		}
		rc = u.kind == RES_RESULT ? res_result_open(tr->sv, u.id, fd, st, err, sizeof err)
		                          : res_artifact_open(tr->sv, u.id, u.name, fd, st, err, sizeof err);
		if (rc < 0) {
			*e = task_envelope("not_found", err, rc == -EAGAIN,
				rc == -EAGAIN ? "Wait until durable_task_get shows the task completed, then open again."
				              : "Check the URI against the task's artifacts (durable_task_get or resources/list).");
			return rc;
		}
		snprintf(abs, abslen, "%s", path);
		return 0;
	}
	struct roots_loc loc;
	if ((rc = roots_open_file(tr->roots, path, ROOTS_SINGLE_LINK, fd, st, &loc, err, sizeof err)) < 0) {
		*e = path_error(tr, rc, err);
		return rc;
	}
	snprintf(abs, abslen, "%s", loc.abs);
	return 0;
}

static cJSON *open_download(struct transfers *tr, const char *path)
{
	char abs[PATH_MAX + 64];
	struct stat st, st2;
	struct xfer *x = NULL;
	cJSON *e = NULL, *res;
	int fd = -1, rc;
	if (download_fd(tr, path, &fd, &st, abs, sizeof abs, &e) < 0) {
		res = facade_failure(e);
		goto out;
	}
	if (st.st_size > XFER_MAX_BYTES) {
		res = facade_failure(env("file_too_large", 0, "Ask for a smaller file.", "'%s' is %lld bytes, over the limit "
		               "of %lld.", abs, (long long)st.st_size, (long long)XFER_MAX_BYTES));
		goto out;
	}
	if (!(x = xfer_alloc("")) || wire_random_hex(x->h) < 0 || !(x->path = strdup(abs))) {
		res = facade_failure(env("internal_error", 1, "Call file_transfer_open again.", "Out of memory."));
		goto out;
	}
	rc = blob_sha256_fd(fd, (uint64_t)st.st_size, x->sha);
	if (rc == 0 && (fstat(fd, &st2) < 0 || st2.st_size != st.st_size ||
	                st2.st_mtim.tv_sec != st.st_mtim.tv_sec || st2.st_mtim.tv_nsec != st.st_mtim.tv_nsec))
		rc = -EAGAIN;
	if (rc < 0) {
		res = facade_failure(env("internal_error", 1, "Call file_transfer_open again when the file is no longer "
		               "being written.", "'%s' could not be read whole: %s.", abs,
		               rc == -EAGAIN || rc == -EIO ? "it changed while it was being read" : strerror(-rc)));
		goto out;
	}
	x->dir = X_DOWNLOAD;
	x->size = st.st_size;
	x->dev = (uint64_t)st.st_dev;
	x->ino = (uint64_t)st.st_ino;
	x->mtime = st.st_mtim;
	x->created_ms = x->touched_ms = now_ms();
	x->fd = fd;
	fd = -1;
	x->ready = 1;
	x->next = tr->list;
	tr->list = x;
	j_open(tr, x);
	cJSON *o = cJSON_CreateObject();
	add_common(o, x);
	cJSON_AddStringToObject(o, "sha256", x->sha);
	cJSON_AddNumberToObject(o, "chunkSize", CHUNK_SIZE);
	cJSON_AddNumberToObject(o, "maxChunkSize", CHUNK_MAX);
	cJSON_AddNumberToObject(o, "nextOffset", 0);
	add_expiry(o, x);
	cJSON_AddStringToObject(o, "note", "Download open. Call file_transfer_read {handle} repeatedly (each "
		"read continues where the last ended) until eof is true, decode each data field from base64 "
		"and append it; the bytes' sha256 must equal sha256.");
	res = facade_result(o, 0);
	x = NULL;
out:
	if (x)
		xfer_free(x);
	if (fd >= 0)
		close(fd);
	return res;
}

/* ---- write / read / commit / status ------------------------------------------------------------ */

static cJSON *not_active(const struct xfer *x)
{
	if (x->state == XS_COMMITTED)
		return env("not_active", 0, "The upload is finished; open a new transfer to send another file.",
		           "Upload %s was already committed to %s.", x->h, x->path);
	return env("not_active", 0,
		x->dir == X_UPLOAD
			? "Start over: call file_transfer_open again with the same path (and size, sha256), then "
			  "send the file from offset 0."
			: "Call file_transfer_open again to download the file as it is now.",
		"Transfer %s failed: %s", x->h, x->msg ? x->msg : "no reason recorded");
}

static cJSON *do_write(struct transfers *tr, struct xfer *x, int64_t off, const char *data)
{
	size_t elen = strlen(data), bad = 0;
	cJSON *o;
	if (x->dir != X_UPLOAD)
		return facade_failure(invalid_param("handle", "Use file_transfer_read with a download handle.",
		                          "This handle is a download; file_transfer_write needs an upload handle."));
	upload_ready(tr, x);
	if (x->state != XS_ACTIVE)
		return facade_failure(not_active(x));
	if (elen > CHUNK_B64_MAX)
		return facade_failure(with_cursor(env("chunk_too_large", 1, "Send at most 1048576 bytes (decoded) per "
			"file_transfer_write; 262144 (chunkSize) is the recommended size. Split the chunk and send "
			"it again from the same offset.", "The chunk is %zu base64 characters, more than 1 MiB of bytes.",
			elen), x->cursor));
	ssize_t n = b64_decode(data, elen, tr->buf, &bad);
	if (n < 0) {
		char msg[200];
		snprintf(msg, sizeof msg, "data is not valid base64 (bad character at position %zu).", bad);
		return facade_failure(with_cursor(invalid_param("data", "Encode the chunk's bytes as standard base64 "
			"(A-Z a-z 0-9 + /, '=' padding only at the end, no line breaks) and send it again.", msg),
			x->cursor));
	}
	if (n > CHUNK_MAX)
		return facade_failure(with_cursor(env("chunk_too_large", 1, "Send at most 1048576 bytes per write.",
		                            "The chunk has %zd bytes, more than 1 MiB.", n), x->cursor));
	if (off != x->cursor) {
		/* The answer to the last chunk may have been lost: the same bytes again at the same
		 * offset are acknowledged without writing anything. */
		if (n > 0 && n == x->last_len && off == x->last_off && off + n == x->cursor &&
		    wire_pread_upto(x->fd, tr->buf2, (size_t)n, off) == n && memcmp(tr->buf, tr->buf2, (size_t)n) == 0) {
			x->touched_ms = now_ms();
			o = cJSON_CreateObject();
			cJSON_AddNumberToObject(o, "received", 0);
			cJSON_AddBoolToObject(o, "duplicate", 1);
			cJSON_AddNumberToObject(o, "nextOffset", (double)x->cursor);
			cJSON_AddStringToObject(o, "note", "This chunk had already been received (same offset, same "
				"bytes); nothing was written twice. Continue with the chunk at nextOffset.");
			return facade_result(o, 0);
		}
		char hint[300];
		snprintf(hint, sizeof hint, "Send the bytes of the file starting at offset %lld (partial.cursor) "
		         "next; file_transfer_status always shows this offset.", (long long)x->cursor);
		return facade_failure(with_cursor(env("offset_mismatch", 1, hint, "Expected offset %lld, got %lld%s.",
			(long long)x->cursor, (long long)off, off < x->cursor ? " (those bytes were already received)"
			                                                        : " (bytes before it are missing)"),
			x->cursor));
	}
	if (x->size >= 0 && off + n > x->size) {
		char hint[400];
		snprintf(hint, sizeof hint, "Send at most %lld more bytes from offset %lld. If the file really is "
		         "larger, call file_transfer_open again with the same path and the right size: that "
		         "starts the upload over.", (long long)(x->size - x->cursor), (long long)x->cursor);
		return facade_failure(with_cursor(env("size_mismatch", 1, hint, "The chunk would end at %lld, past the "
			"declared size %lld; nothing was written.", (long long)(off + n), (long long)x->size), x->cursor));
	}
	if (off + n > XFER_MAX_BYTES)
		return facade_failure(with_cursor(env("file_too_large", 0, "Split the file into parts of at most 64 GiB.",
		                            "The upload would exceed %lld bytes.", (long long)XFER_MAX_BYTES), x->cursor));
	if (n > 0) {
		int rc = wire_pwrite_full(x->fd, tr->buf, (size_t)n, off);
		if (rc == 0 && fdatasync(x->fd) < 0)
			rc = -errno;
		if (rc < 0)
			return facade_failure(with_cursor(env("internal_error", 1, "Send the same chunk again later; if the disk "
				"is full, tell the operator.", "The chunk could not be stored: %s.", strerror(-rc)), x->cursor));
		EVP_DigestUpdate(x->md, tr->buf, (size_t)n);
		x->last_off = off;
		x->last_len = n;
		x->cursor = off + n;
		x->touched_ms = now_ms();
		j_chunk(tr, x);
	}
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "received", (double)n);
	cJSON_AddNumberToObject(o, "nextOffset", (double)x->cursor);
	if (x->size >= 0)
		cJSON_AddNumberToObject(o, "remaining", (double)(x->size - x->cursor));
	cJSON_AddStringToObject(o, "note", x->size >= 0 && x->cursor == x->size
		? "All declared bytes received. Call file_transfer_commit {handle} to verify and place the file."
		: "Stored. Send the next chunk at nextOffset; after the last one call file_transfer_commit.");
	return facade_result(o, 0);
}

/* A download handle after a restart: open the same file again and check it is unchanged. */
static int download_reopen(struct transfers *tr, struct xfer *x, cJSON **e)
{
	char abs[PATH_MAX + 64], sha[65];
	struct stat st;
	int fd = -1;
	if (download_fd(tr, x->path, &fd, &st, abs, sizeof abs, e) < 0)
		return -1;
	if ((uint64_t)st.st_dev != x->dev || (uint64_t)st.st_ino != x->ino || st.st_size != x->size ||
	    blob_sha256_fd(fd, (uint64_t)st.st_size, sha) < 0 || strcmp(sha, x->sha) != 0) {
		close(fd);
		*e = NULL;
		return -ESTALE;
	}
	x->fd = fd;
	x->mtime = st.st_mtim;
	x->ready = 1;
	return 0;
}

static cJSON *changed(struct transfers *tr, struct xfer *x)
{
	fail_xfer(tr, x, "The file changed after the download was opened.");
	return facade_failure(env("checksum_mismatch", 1, "Call file_transfer_open again to download the file as it is "
	                "now, and start from offset 0.", "'%s' changed after the download was opened; its bytes "
	                "no longer match sha256 %s.", x->path, x->sha));
}

static cJSON *do_read(struct transfers *tr, struct xfer *x, const cJSON *joff, const cJSON *jlen)
{
	if (x->dir != X_DOWNLOAD)
		return facade_failure(invalid_param("handle", "Use file_transfer_write with an upload handle.",
		                          "This handle is an upload; file_transfer_read needs a download handle."));
	if (x->state != XS_ACTIVE)
		return facade_failure(not_active(x));
	if (!x->ready) {
		cJSON *e = NULL;
		int rc = download_reopen(tr, x, &e);
		if (rc == -ESTALE)
			return changed(tr, x);
		if (rc < 0) {
			fail_xfer(tr, x, "The file is no longer there.");
			return facade_failure(e);
		}
	}
	int64_t off = joff ? (int64_t)joff->valuedouble : x->cursor;
	int64_t len = jlen ? (int64_t)jlen->valuedouble : CHUNK_SIZE;
	if (len > CHUNK_MAX)
		return facade_failure(env("chunk_too_large", 1, "Ask for at most 1048576 bytes per read (length).",
		                "length %lld is more than 1 MiB.", (long long)len));
	if (off > x->size) {
		char msg[200];
		snprintf(msg, sizeof msg, "offset %lld is past the end of the file (size %lld).", (long long)off,
		         (long long)x->size);
		return facade_failure(invalid_param("offset", "Read at an offset between 0 and size.", msg));
	}
	struct stat st;
	if (fstat(x->fd, &st) < 0 || st.st_size != x->size || st.st_mtim.tv_sec != x->mtime.tv_sec ||
	    st.st_mtim.tv_nsec != x->mtime.tv_nsec)
		return changed(tr, x);
	size_t n = (size_t)(x->size - off < len ? x->size - off : len);
	ssize_t r = wire_pread_upto(x->fd, tr->buf, n, off);
	if (r < 0)
		return facade_failure(env("internal_error", 1, "Read the same range again.", "Read failed: %s.", strerror((int)-r)));
	if ((size_t)r != n)
		return changed(tr, x);
	b64_encode(tr->buf, n, tr->enc);
	x->cursor = off + (int64_t)n;
	x->touched_ms = now_ms();
	int eof = x->cursor == x->size;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "data", tr->enc);
	cJSON_AddNumberToObject(o, "bytes", (double)n);
	cJSON_AddNumberToObject(o, "offset", (double)off);
	cJSON_AddNumberToObject(o, "nextOffset", (double)x->cursor);
	cJSON_AddBoolToObject(o, "eof", eof);
	cJSON_AddNumberToObject(o, "size", (double)x->size);
	if (eof)
		cJSON_AddStringToObject(o, "sha256", x->sha);
	cJSON_AddStringToObject(o, "note", eof
		? "End of file. The sha256 of all the bytes read must equal sha256; if not, read again from offset 0."
		: "Call file_transfer_read {handle} again for the next chunk (it continues at nextOffset).");
	return facade_result(o, 0);
}

/* Move the staged file to its name: without replacing anything unless overwrite was asked. */
static int publish(struct xfer *x, const char *stage, const char *name)
{
	if (x->overwrite)
		return renameat(x->dirfd, stage, x->dirfd, name) < 0 ? -errno : 0;
	if (renameat2(x->dirfd, stage, x->dirfd, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* File systems without RENAME_NOREPLACE: link() refuses an existing name just as well. */
	if (linkat(x->dirfd, stage, x->dirfd, name, 0) < 0)
		return -errno;
	unlinkat(x->dirfd, stage, 0);
	return 0;
}

static cJSON *do_commit(struct transfers *tr, struct xfer *x)
{
	char sha[65], stage[80];
	int rc;
	if (x->dir != X_UPLOAD)
		return facade_failure(invalid_param("handle", "Downloads need no commit; just stop reading.",
		                          "This handle is a download; only uploads are committed."));
	upload_ready(tr, x);
	if (x->state == XS_COMMITTED)
		return committed_view(x, 1);
	if (x->state != XS_ACTIVE)
		return facade_failure(not_active(x));
	if (x->size >= 0 && x->cursor < x->size) {
		char hint[300];
		snprintf(hint, sizeof hint, "Send the remaining %lld bytes with file_transfer_write starting at "
		         "offset %lld (partial.cursor), then commit again.", (long long)(x->size - x->cursor),
		         (long long)x->cursor);
		return facade_failure(with_cursor(env("size_mismatch", 1, hint, "Only %lld of the declared %lld bytes have "
			"been received; the upload stays open.", (long long)x->cursor, (long long)x->size), x->cursor));
	}
	if (md_peek(x->md, sha) < 0)
		return facade_failure(env("internal_error", 1, "Call file_transfer_commit again.", "Out of memory."));
	if (x->want[0] && strcmp(sha, x->want) != 0) {
		char why[300];
		snprintf(why, sizeof why, "The received bytes have sha256 %s, not the declared %s.", sha, x->want);
		fail_xfer(tr, x, why);
		return facade_failure(env("checksum_mismatch", 1, "The bytes are wrong, so this upload was discarded. Check "
			"the declared sha256 against the file, then call file_transfer_open again with the same path, "
			"size and sha256 and send the whole file from offset 0.", "%s", why));
	}
	stage_name(x, stage, sizeof stage);
	rc = fsync(x->fd) < 0 ? -errno : 0;
	if (rc == 0)
		rc = publish(x, stage, last_name(x->path));
	if (rc == -EEXIST)
		return facade_failure(env("file_exists", 0, "Remove or rename the existing file and call file_transfer_commit "
			"again, or call file_transfer_open again with overwrite: true (that starts the upload over).",
			"'%s' appeared while the upload was running; the upload stays open and nothing was replaced.",
			x->path));
	if (rc < 0)
		return facade_failure(env("internal_error", 1, "Call file_transfer_commit again; if it keeps failing, tell "
			"the operator.", "The file could not be moved into place: %s.", strerror(-rc)));
	fsync(x->dirfd);
	memcpy(x->sha, sha, sizeof sha);
	x->size = x->cursor;
	x->state = XS_COMMITTED;
	x->finished_ms = x->touched_ms = now_ms();
	xfer_close(x);
	j_end(tr, x);
	return committed_view(x, 0);
}

static cJSON *do_status(struct transfers *tr, struct xfer *x)
{
	(void)tr;
	cJSON *o = cJSON_CreateObject();
	add_common(o, x);
	cJSON_AddStringToObject(o, "status", state_name(x->state));
	cJSON_AddNumberToObject(o, "nextOffset", (double)x->cursor);
	if (x->dir == X_UPLOAD && x->want[0])
		cJSON_AddStringToObject(o, "declaredSha256", x->want);
	if (x->sha[0])
		cJSON_AddStringToObject(o, "sha256", x->sha);
	add_expiry(o, x);
	const char *note;
	if (x->state == XS_FAILED) {
		cJSON_AddItemToObject(o, "error", not_active(x));
		note = "This transfer failed; error.recoveryHint says how to start over.";
	} else if (x->state == XS_COMMITTED) {
		note = "Committed: the file is in place at path.";
	} else if (x->dir == X_UPLOAD) {
		note = "Continue with file_transfer_write at nextOffset; after the last chunk call file_transfer_commit.";
	} else {
		note = "Continue with file_transfer_read at nextOffset (or any offset) until eof.";
	}
	cJSON_AddStringToObject(o, "note", note);
	return facade_result(o, 0);
}

cJSON *transfer_call(struct transfers *tr, const char *name, const cJSON *schema, cJSON *args)
{
	char err[256], field[128];
	if (schema_validate(schema, args, err, sizeof err, field, sizeof field) < 0)
		return facade_failure(invalid_param(field, NULL, err));
	if (strcmp(name, "file_transfer_open") == 0) {
		const char *dir = cJSON_GetObjectItem(args, "direction")->valuestring;
		const char *path = cJSON_GetObjectItem(args, "path")->valuestring;
		const cJSON *sz = cJSON_GetObjectItem(args, "size");
		const cJSON *sha = cJSON_GetObjectItem(args, "sha256");
		const cJSON *ow = cJSON_GetObjectItem(args, "overwrite");
		char want[65] = "";
		if (strcmp(dir, "download") == 0) {
			if (sz || sha || cJSON_IsTrue(ow))
				return facade_failure(invalid_param(sz ? "size" : sha ? "sha256" : "overwrite", "Leave out size, sha256 "
					"and overwrite for downloads: the answer reports the file's size and sha256.",
					"size, sha256 and overwrite apply to uploads only."));
			cJSON *r = open_download(tr, path);
			limit_ready(tr, tr->list);
			return r;
		}
		if (sha) {
			size_t n = strlen(sha->valuestring);
			for (size_t i = 0; i < n && i < 64; i++)
				want[i] = (char)(sha->valuestring[i] >= 'A' && sha->valuestring[i] <= 'F'
					? sha->valuestring[i] - 'A' + 'a' : sha->valuestring[i]);
			want[n < 64 ? n : 64] = 0;
			if (n != 64 || !is_hex(want, 64))
				return facade_failure(invalid_param("sha256", "Give the sha256 as 64 hexadecimal digits, or leave it out.",
				                          "sha256 must be 64 hexadecimal digits."));
		}
		cJSON *r = open_upload(tr, path, sz ? (int64_t)sz->valuedouble : -1, want, cJSON_IsTrue(ow));
		limit_ready(tr, tr->list);
		return r;
	}
	const char *h = cJSON_GetObjectItem(args, "handle")->valuestring;
	struct xfer *x = find(tr, h);
	cJSON *r;
	if (!x)
		return facade_failure(unknown_handle(tr, h));
	if (strcmp(name, "file_transfer_write") == 0)
		r = do_write(tr, x, (int64_t)cJSON_GetObjectItem(args, "offset")->valuedouble,
		             cJSON_GetObjectItem(args, "data")->valuestring);
	else if (strcmp(name, "file_transfer_read") == 0)
		r = do_read(tr, x, cJSON_GetObjectItem(args, "offset"), cJSON_GetObjectItem(args, "length"));
	else if (strcmp(name, "file_transfer_commit") == 0)
		r = do_commit(tr, x);
	else if (strcmp(name, "file_transfer_status") == 0)
		r = do_status(tr, x);
	else
		r = facade_failure(env("internal_error", 0, "Call one of the file_transfer_* tools.",
		                       "Unknown transfer tool %s.", name));
	limit_ready(tr, x);
	return r;
}

/* ---- files into jobs ---------------------------------------------------------------------------- */

/* Copy src (size bytes) to dirfd/name as a read-only file, atomically. */
static int copy_in(struct transfers *tr, int src, int64_t size, int dirfd, const char *name)
{
	char tmp[NAME_MAX + 16];
	int out = -1, rc = 0;
	snprintf(tmp, sizeof tmp, ".%.200s.tmp", name);
	unlinkat(dirfd, tmp, 0);
	out = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	loff_t in_off = 0;
	while (in_off < size) {
		ssize_t n = copy_file_range(src, &in_off, out, NULL, (size_t)(size - in_off), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && errno != EXDEV && errno != ENOSYS && errno != EOPNOTSUPP && errno != EINVAL) {
				rc = -errno;
				goto fail;
			}
			/* No copy offload here (or a short source): plain reads and writes. */
			while (in_off < size) {
				ssize_t r = wire_pread_upto(src, tr->buf2, IO_BUF, in_off);
				if (r <= 0) {
					rc = r < 0 ? (int)r : -EIO;
					goto fail;
				}
				if ((rc = wire_pwrite_full(out, tr->buf2, (size_t)r, in_off)) < 0)
					goto fail;
				in_off += r;
			}
			break;
		}
	}
	if (fchmod(out, 0444) < 0 || renameat(dirfd, tmp, dirfd, name) < 0) {
		rc = -errno;
		goto fail;
	}
	close(out);
	return 0;
fail:
	close(out);
	unlinkat(dirfd, tmp, 0);
	return rc;
}

static int mkdir_at(int dirfd, const char *name)
{
	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* The one file an earlier attempt placed in an argument's input folder.  0 and its name. */
static int placed_before(int pd, char *name, size_t len)
{
	int d = fcntl(pd, F_DUPFD_CLOEXEC, 0), found = 0;
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	struct dirent *de;
	if (!dir) {
		if (d >= 0)
			close(d);
		return -ENOENT;
	}
	while ((de = readdir(dir))) {
		struct stat st;
		if (de->d_name[0] == '.' || fstatat(pd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		snprintf(name, len, "%s", de->d_name);
		found++;
	}
	closedir(dir);
	return found == 1 ? 0 : -ENOENT;
}

/* The source of an argument marked forkpoint-upload: a committed upload's handle, an artifact
 * URI or a path inside a root.  0 with fd/size/base name, or -1 with an envelope. */
static int input_source(struct transfers *tr, const char *v, int *fd, int64_t *size, char *base, size_t baselen,
                        cJSON **e)
{
	char abs[PATH_MAX + 64];
	struct stat st;
	const char *path = v;
	if (strlen(v) == 32 && is_hex(v, 32)) {
		struct xfer *x = find(tr, v);
		if (!x) {
			*e = unknown_handle(tr, v);
			return -1;
		}
		if (x->dir != X_UPLOAD || x->state != XS_COMMITTED) {
			*e = x->dir != X_UPLOAD
				? invalid_param("handle", "Pass the handle of a committed upload, or a path.",
				                "This handle is a download, not an uploaded file.")
				: env("not_active", 1, "Call file_transfer_commit with the handle first, then call the tool "
				      "again.", "Upload %s is not committed yet.", x->h);
			return -1;
		}
		path = x->path;
	}
	if (download_fd(tr, path, fd, &st, abs, sizeof abs, e) < 0)
		return -1;
	*size = st.st_size;
	struct res_uri u;
	const char *b = res_uri_parse(abs, &u) == 0 ? u.name : last_name(abs);
	size_t bl = strlen(b);
	if (bl >= baselen) {
		close(*fd);
		*fd = -1;
		*e = invalid_param("path", NULL, "The file name is too long.");
		return -1;
	}
	memcpy(base, b, bl + 1);
	return 0;
}

int transfer_prepare_args(struct transfers *tr, const cJSON *schema, cJSON *args, const char *work_dir,
                          cJSON **err)
{
	char inputs[PATH_MAX], base[NAME_MAX + 1], dest[PATH_MAX + NAME_MAX + 300];
	const cJSON *props = cJSON_GetObjectItem(schema, "properties");
	const cJSON *p;
	int wd = -1, in = -1, pd = -1, src = -1, rc = 0;
	*err = NULL;
	wd = open(work_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wd < 0 || mkdir_at(wd, "inputs") < 0 || mkdir_at(wd, "outputs") < 0 ||
	    (in = openat(wd, "inputs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		*err = env("internal_error", 1, "Call the tool again; if it keeps failing, tell the operator.",
		           "The job's work folder %s could not be prepared: %s.", work_dir, strerror(errno));
		rc = -1;
		goto out;
	}
	snprintf(inputs, sizeof inputs, "%s/inputs", work_dir);
	cJSON_ArrayForEach(p, props) {
		const cJSON *fmt = cJSON_GetObjectItem(p, "format");
		if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "forkpoint-upload") != 0)
			continue;
		cJSON *v = cJSON_GetObjectItem(args, p->string);
		if (!cJSON_IsString(v))
			continue;
		/* A name per argument: two arguments may name files with the same base name. */
		if (!res_name_ok(p->string) || mkdir_at(in, p->string) < 0 ||
		    (pd = openat(in, p->string, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
			*err = env("internal_error", 1, "Call the tool again.", "Cannot prepare the input folder for "
			           "argument %s.", p->string);
			rc = -1;
			goto out;
		}
		size_t il = strlen(inputs);
		if (strncmp(v->valuestring, inputs, il) == 0 && v->valuestring[il] == '/') {
			/* Already placed by an earlier attempt of the same task. */
			close(pd);
			pd = -1;
			continue;
		}
		int64_t size = 0;
		cJSON *e = NULL;
		if (input_source(tr, v->valuestring, &src, &size, base, sizeof base, &e) < 0) {
			/* A retry or resume after the upload's record expired: an earlier attempt of this
			 * task already holds the file. */
			if (strlen(v->valuestring) == 32 && is_hex(v->valuestring, 32) && !find(tr, v->valuestring) &&
			    placed_before(pd, base, sizeof base) == 0) {
				cJSON_Delete(e);
				snprintf(dest, sizeof dest, "%s/%s/%s", inputs, p->string, base);
				cJSON_ReplaceItemInObject(args, p->string, cJSON_CreateString(dest));
				close(pd);
				pd = -1;
				continue;
			}
			cJSON_AddStringToObject(e, "param", p->string);
			*err = e;
			rc = -1;
			goto out;
		}
		int c = copy_in(tr, src, size, pd, base);
		if (c < 0) {
			*err = env("internal_error", 1, "Call the tool again; if it keeps failing, tell the operator.",
			           "The file for argument %s could not be copied into the job's folder: %s.", p->string,
			           strerror(-c));
			rc = -1;
			goto out;
		}
		snprintf(dest, sizeof dest, "%s/%s/%s", inputs, p->string, base);
		cJSON_ReplaceItemInObject(args, p->string, cJSON_CreateString(dest));
		close(src);
		src = -1;
		close(pd);
		pd = -1;
	}
out:
	if (src >= 0)
		close(src);
	if (pd >= 0)
		close(pd);
	if (in >= 0)
		close(in);
	if (wd >= 0)
		close(wd);
	return rc;
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
