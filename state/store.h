/* state/store.h — the task store: typed records about tasks (and opaque records of other
 * modules), behind an ops table so the backend can change without touching the supervisor.
 *
 * A record is a plain value (struct store_rec): what happened to one task, with JSON values
 * carried as JSON text.  The store knows nothing of struct task; the supervisor turns records
 * into task fields (task_apply) both on the live path and during replay.
 *
 * Contract of every backend:
 *   replay    hands every record stored so far to the callback, oldest first, exactly once per
 *             store, before anything is appended.  Records passed to the callback and their
 *             strings live until the callback returns.  0, or -errno with a message in err.
 *   append    takes a copy of the record (the caller's memory may go at once) into the pending
 *             batch.  0, or -errno (-EMSGSIZE over the record limit, -ENOMEM, -EROFS, a fault):
 *             then nothing of the record is stored and nothing about it may be promised.
 *   commit    makes the whole pending batch durable at once (the group commit).  0, or -errno:
 *             the batch stays pending and the next commit retries it.  Nothing appended may be
 *             acknowledged before a commit after it has returned 0.
 *   snapshot  snapshot_begin commits what is pending and starts a new base; the records
 *             appended until snapshot_end are the whole live state, which replaces everything
 *             before it once snapshot_end returns 0.  snapshot_abort drops the new base; the
 *             old records stay authoritative.  Commits between begin and end fail -EBUSY.
 *   close     frees the store; what was not committed is lost (as in a crash).
 * All functions return 0 or -errno unless said otherwise. */
#ifndef FP_STORE_H
#define FP_STORE_H

#include <stddef.h>
#include <stdint.h>

/* Record types; the numbers are the journal's type bytes (state/store_journal.c). */
enum store_rec_type {
	STORE_REC_CREATE = 1, STORE_REC_START = 2, STORE_REC_PROGRESS = 3, STORE_REC_CHECKPOINT = 4,
	STORE_REC_ASK = 5, STORE_REC_ANSWER = 6, STORE_REC_FINISH = 7, STORE_REC_RETRY = 8,
	STORE_REC_EXPIRE = 9,
	STORE_REC_SNAP_TASK = 32,   /* a whole task, in a snapshot */
	STORE_REC_SNAP_TOMB = 33,   /* an expired id, in a snapshot */
	/* 64..95: file transfers (struct store_xfer). */
	STORE_REC_X_OPEN = 64, STORE_REC_X_CHUNK = 65, STORE_REC_X_END = 66, STORE_REC_X_GONE = 67,
	STORE_REC_X_CURSOR = 68, STORE_REC_X_INTENT = 69, STORE_REC_X_ARTSHA = 70,
	STORE_REC_X_SNAP = 80, STORE_REC_X_TOMB = 81,
	STORE_REC_EXT_FIRST = 64, STORE_REC_EXT_LAST = 95,
};
#define STORE_REC_IS_EXT(t) ((t) >= STORE_REC_EXT_FIRST && (t) <= STORE_REC_EXT_LAST)

/* A file or folder as a transfer names it across reboots (transfer.c struct fid). */
struct store_fid {
	int64_t dev, ino, fsid;
	const char *fh;
};

/* A file transfer record (types 64..95).  Which fields a type carries:
 *   X_OPEN    h dir path size want ow at id sha          (at: created)
 *   X_SNAP    the X_OPEN fields, the X_INTENT ones when has_intent, touched finished cursor
 *             loff llen state msg
 *   X_INTENT  h pub psha (has_intent)
 *   X_CHUNK   h off len at          X_CURSOR  h cursor at
 *   X_END     h state sha size msg at
 *   X_GONE, X_TOMB  h until
 *   X_ARTSHA  task name size sha status  (an artifact's digest, computed after its task ended)
 * Replayed strings are NULL when absent (or not strings); has_size, has_at and has_touched say
 * whether those integers were there (their defaults depend on the transfer). */
struct store_xfer {
	const char *h;
	const char *dir, *path, *want, *sha;
	int64_t size, ow, at;
	int has_size, has_at;
	struct store_fid id;
	int has_intent;
	struct store_fid pub;
	const char *psha;
	int64_t touched, finished, cursor, loff, llen;
	int has_touched;
	const char *state, *msg;
	int64_t off, len, until;
	const char *task, *name, *status;
};

/* A task's checkpoint: inline bytes (has_data) or the name of the blob holding them.  Both may
 * be set on the live path (the task keeps the bytes, the record names the blob); a stored
 * record then carries the blob name only. */
struct store_checkpoint {
	const void *data;
	size_t len;
	int has_data;
	const char *blob;           /* sha256 hex, or NULL */
	void *owned;                /* live path only: a malloc'd copy of data the applier takes
	                               instead of copying; never stored (backends ignore it) */
};

/* A terminal task's result: JSON text (NULL: none), or the blob holding it. */
struct store_result {
	const char *text;
	const char *blob;           /* sha256 hex, or NULL (then text) */
	int64_t bytes;              /* with blob: the size of the JSON text */
	const char *summary;        /* with blob: a short description, or NULL */
	int mcp;                    /* the result is an MCP CallToolResult */
};

struct store_answer {
	const char *qid;
	const char *response;       /* JSON text */
};

/* A whole task, for snapshots.  Strings may be NULL (absent). */
struct store_task {
	const char *tool, *args, *status, *sandbox, *artifacts, *error, *msg;
	int64_t attempt, retries, running, not_before;
	int64_t created, updated, started, finished, expires, seq;
	double fraction;
	int has_fraction;
	int has_question;
	const char *qid, *prompt, *choices;
	const struct store_answer *answers;   /* newest first, as the task keeps them */
	size_t nanswers;
	struct store_checkpoint ckpt;
	struct store_result result;
};

struct store_rec {
	enum store_rec_type type;   /* or an EXT type number */
	char task_id[33];           /* 32 hex digits; "" for EXT records */
	int64_t at;                 /* wall ms of the change (unused by SNAP_*, EXPIRE, EXT) */
	union {
		struct { const char *tool, *args; } create;
		struct { int64_t attempt; const char *sandbox; } start;
		struct { const char *msg; double fraction; int has_fraction; } progress;
		struct { int64_t seq; struct store_checkpoint ckpt; } checkpoint;
		struct { const char *qid, *prompt, *choices; } ask;
		struct store_answer answer;
		struct {
			const char *status, *artifacts, *error;
			struct store_result result;
			int64_t expires;
		} finish;
		struct { int64_t retries, not_before; const char *msg; } retry;
		struct { int64_t until; } expire;        /* EXPIRE and SNAP_TOMB */
		struct store_task snap;
		struct store_xfer xfer;
	} u;
	/* Instead of the fields: a payload already in the journal's encoding (tools and tests that
	 * write odd records on purpose).  The journal backend appends it as it is and replays it
	 * as typed; the memory backend refuses it (-ENOTSUP). */
	const void *raw;
	size_t raw_len;
};

/* Name of a record type, for humans ("created", "started", ...; "unknown"). */
const char *store_rec_type_name(int type);

/* A deep copy of r in one allocation (free() it).  NULL when out of memory. */
struct store_rec *store_rec_dup(const struct store_rec *r);
/* Bytes store_rec_dup() allocates for r. */
size_t store_rec_size(const struct store_rec *r);

struct store;

/* Return 0 to go on, or -1 to stop the replay (it then fails with -ECANCELED, err holding the
 * callback's message, prefixed by where the record is when the backend knows). */
typedef int (*store_replay_cb)(void *arg, const struct store_rec *r, char *err, size_t errlen);
/* Informational messages during replay (a torn tail cut, ...). */
typedef void (*store_log_cb)(void *arg, const char *msg);

struct store_stats {
	uint64_t total_bytes;       /* bytes held (journal: all live segments) */
	uint64_t snapshot_bytes;    /* bytes of the snapshot the live state starts from */
	uint64_t records_replayed;
};

struct store_ops {
	const char *name;
	int (*replay)(struct store *s, store_replay_cb cb, store_log_cb log, void *arg,
	              char *err, size_t errlen);
	int (*append)(struct store *s, const struct store_rec *r);
	int (*commit)(struct store *s);
	int (*snapshot_begin)(struct store *s);
	int (*snapshot_end)(struct store *s);
	void (*snapshot_abort)(struct store *s);
	size_t (*pending)(const struct store *s);      /* bytes (or records) waiting for commit */
	void (*stats)(const struct store *s, struct store_stats *out);
	void (*close)(struct store *s);
};

/* Every backend's handle starts with this. */
struct store {
	const struct store_ops *ops;
};

int store_replay(struct store *s, store_replay_cb cb, store_log_cb log, void *arg, char *err, size_t errlen);
int store_append(struct store *s, const struct store_rec *r);
int store_commit(struct store *s);
int store_snapshot_begin(struct store *s);
int store_snapshot_end(struct store *s);
void store_snapshot_abort(struct store *s);
size_t store_pending(const struct store *s);
void store_stats(const struct store *s, struct store_stats *out);
void store_close(struct store *s);   /* NULL is fine */

/* ---- backends ------------------------------------------------------------------------------ */

/* The journal in <state_dir>/journal (state/journal.h), each record a msgpack map.  The journal
 * is opened by store_replay (opts as journal_open takes them; read_only: nothing is written and
 * append fails -EROFS). */
struct journal_opts;
int store_journal_new(const char *state_dir, const struct journal_opts *opts, struct store **out);

/* In memory: committed records live in a medium that outlives the store, so closing and opening
 * a new store on the same medium is a restart.  Faults can be injected for tests. */
struct store_mem_medium;
struct store_mem_medium *store_mem_medium_new(void);
void store_mem_medium_free(struct store_mem_medium *m);
/* The next `count` calls of op fail with -err (err > 0); count 0 clears. */
enum store_mem_op { STORE_MEM_APPEND, STORE_MEM_COMMIT };
void store_mem_fail(struct store_mem_medium *m, enum store_mem_op op, int err, unsigned count);
/* Committed records in the medium. */
size_t store_mem_records(const struct store_mem_medium *m);
int store_mem_new(struct store_mem_medium *m, struct store **out);

#endif
