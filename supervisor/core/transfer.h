/* supervisor/core/transfer.h — resumable, sha256-verified file transfers (open / write / read /
 * commit / status), confined to server.fileRoots, as a plain C API; the file_transfer_* tools
 * over it are supervisor/mcp/files.h.  docs/files.md is the model-facing reference.
 *
 * Durability: an upload chunk is acknowledged only after its bytes are synced to the staging
 * file (<state>/uploads/) and a journal record with the new cursor is appended (the record
 * becomes durable with the turn's group commit, before the response is released).  A commit
 * makes its chunk records and an intent record durable before it publishes the file.  After a restart the cursor comes from
 * the journal and the running sha256 is rebuilt exactly once from the staged bytes. */
#ifndef FP_TRANSFER_H
#define FP_TRANSFER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <cJSON.h>
#include <msgpack.h>
#include "supervisor/core/supervisor.h"
#include "state/store.h"

struct transfers;
struct task;

/* Created before the journal is replayed (replay feeds it records). */
struct transfers *transfers_new(struct supervisor *sv);
void transfers_free(struct transfers *tr);

/* Journal integration (see persist.h): records of types REC_EXT_FIRST..REC_EXT_LAST. */
int transfer_replay(struct transfers *tr, int type, const struct store_xfer *rec, char *err, size_t errlen);
int transfer_snapshot(struct transfers *tr);          /* append the live transfers (compaction) */
/* Without a transfers table (ops commands): the part of those records that changes tasks (an
 * artifact's digest computed after its task finished) is applied to sv->tasks; the rest is
 * skipped.  Always 0. */
int transfer_replay_tasks(struct supervisor *sv, int type, const struct store_xfer *rec);
/* After replay: rebuild hashes of staged uploads, drop expired transfers and their files. */
void transfers_recover(struct transfers *tr);
/* Periodic collection of expired transfers (with the task collector). */
size_t transfers_collect(struct transfers *tr, int64_t now_wall);

/* ---- the calls ------------------------------------------------------------------------------
 * Every call fills a struct transfer_reply: what happened (kind, with the transfer's fields), or
 * a failure in err (err.code set).  The MCP side (supervisor/mcp/files.c) turns it into a tool
 * result; nothing here knows that shape. */

enum transfer_state { TRANSFER_ACTIVE, TRANSFER_COMMITTED, TRANSFER_FAILED };

/* A failure: a stable code (invalid_param, not_found, file_exists, file_too_large,
 * chunk_too_large, offset_mismatch, size_mismatch, checksum_mismatch, not_active,
 * unknown_transfer, transfer_expired, internal_error), one sentence for people, and what to do
 * about it. */
struct transfer_error {
	char code[32];              /* "" when there is no failure */
	char message[1200];
	char hint[600];
	int retryable;
	char param[64];             /* the parameter at fault, or "" */
	int64_t cursor;             /* where the upload goes on (partial.cursor), or -1 */
	int roots;                  /* 1: the allowed file roots belong with it (a refused path) */
};

enum transfer_kind {
	TRANSFER_OPENED,            /* open: an upload (resumed when it already existed) or a download */
	TRANSFER_WRITTEN,           /* write: received bytes stored */
	TRANSFER_DUPLICATE,         /* write: a repeat of the last chunk, nothing written */
	TRANSFER_READ,              /* read: bytes, base64 in data */
	TRANSFER_DONE,              /* commit: the file is in place (again: it already was) */
	TRANSFER_STATUS,            /* status */
};

struct transfer_reply {
	enum transfer_kind kind;
	struct transfer_error err;  /* err.code[0]: the call failed, nothing below applies */
	/* the transfer */
	char handle[33];
	int upload;                 /* 1 upload, 0 download */
	const char *path;           /* absolute path or artifact URI; valid until the next call */
	int64_t size;               /* -1: not declared */
	char want[65];              /* upload: declared sha256, or "" */
	char sha[65];               /* the file's sha256, or "" while an upload is open */
	enum transfer_state state;
	int64_t next_offset;
	int64_t expires_ms;         /* wall clock */
	int64_t chunk_size, max_chunk_size;
	/* per kind */
	int again;                  /* OPENED: resumed; DONE: committed before */
	int64_t received;           /* WRITTEN */
	int64_t offset;             /* READ: where the bytes start */
	int64_t bytes;              /* READ */
	int eof;                    /* READ */
	const char *data;           /* READ: base64, NUL-terminated; valid until the next call */
	struct transfer_error failure; /* STATUS of a failed transfer: why (as its calls answer) */
};

/* How an answer that is not ready yet reaches the caller: answer(ctx, reply) is called once,
 * on the loop thread (the reply is valid during the call only) — or, if the worker pool stops
 * first, drop(ctx) instead. */
struct transfer_later {
	void (*answer)(void *ctx, const struct transfer_reply *reply);
	void (*drop)(void *ctx);
	void *ctx;
};

/* Each returns 0 with *reply filled, or TRANSFER_LATER: the answer comes through later
 * (copied; later may be NULL, and then every call answers at once).  Blocking work goes to
 * sv->workers when the answer can wait: hashing for a download open (or for a read that must
 * verify a download again after a restart) of a file over 1 MiB, the sync of an upload chunk's
 * staged bytes, and a cross-file-system commit's copy of a file over 1 MiB.  Other calls are
 * answered at once meanwhile.  transfers_deferred() grows by one for every answer taken to be
 * given later. */
#define TRANSFER_LATER 1

/* Open an upload of path (relative to the first file root, or absolute inside one).  size: the
 * declared size or -1; sha256: 64 hex digits (either case) or NULL; overwrite: replace an
 * existing file at commit.  An unfinished upload of the same path with the same declarations
 * is resumed under its old handle. */
int transfer_open_upload(struct transfers *tr, const char *path, int64_t size, const char *sha256, int overwrite,
                         struct transfer_reply *reply);
/* Open a download of a file in the roots or of a forkpoint:// artifact (or large result) URI;
 * its sha256 is computed now, from the descriptor the reads then use. */
int transfer_open_download(struct transfers *tr, const char *path, const struct transfer_later *later,
                           struct transfer_reply *reply);
/* Write the chunk data (base64, as it arrives; at most 1 MiB decoded) at offset, which must be
 * the cursor (or repeat the last chunk).  The answer comes once the bytes are synced and the
 * chunk's journal record is appended. */
int transfer_write(struct transfers *tr, const char *handle, int64_t offset, const char *data,
                   const struct transfer_later *later, struct transfer_reply *reply);
/* Read length bytes (-1: 256 KiB) of a download from offset (-1: where the last read ended). */
int transfer_read(struct transfers *tr, const char *handle, int64_t offset, int64_t length,
                  const struct transfer_later *later, struct transfer_reply *reply);
/* Check an upload against its declared size and sha256 and put it in place; again after
 * success answers the same. */
int transfer_commit(struct transfers *tr, const char *handle, const struct transfer_later *later,
                    struct transfer_reply *reply);
/* Where a transfer stands; always answers at once. */
int transfer_status(struct transfers *tr, const char *handle, struct transfer_reply *reply);

/* Fill e: code, hint and a printf-style message; no parameter, cursor or roots. */
void transfer_error_set(struct transfer_error *e, const char *code, int retryable, const char *hint,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Fill e as invalid_param naming param (hint NULL: the generic one: fix it and call again). */
void transfer_error_param(struct transfer_error *e, const char *param, const char *hint, const char *msg);
/* The task-error envelope {code, message, retryable, recoveryHint, param?, partial?,
 * allowedRoots?} for e (task_envelope; caller frees), as task records and tool errors carry
 * it.  roots: the file roots to list when e->roots is set (may be NULL). */
struct roots;
cJSON *transfer_error_envelope(const struct transfer_error *e, const struct roots *roots);
/* The file roots of a transfers table (server.fileRoots), for such envelopes. */
const struct roots *transfers_roots(const struct transfers *tr);

/* The file behind an input argument's value v — the handle of a committed upload, a
 * forkpoint:// artifact URI or a path inside a file root — opened for reading: 0 with *fd,
 * its *size and its base name (the artifact's name for a URI), or -1 with e filled
 * (unknown_transfer or transfer_expired for a handle that names no transfer). */
int transfer_open_input(struct transfers *tr, const char *v, int *fd, int64_t *size, char *base, size_t baselen,
                        struct transfer_error *e);
unsigned long transfers_deferred(const struct transfers *tr);

/* Hash an artifact being collected (artifacts.c): over server.artifactHashMaxBytes it is not
 * hashed (ARTIFACT_SKIPPED); over 1 MiB with a worker pool it is hashed there
 * (ARTIFACT_PENDING: fd is duplicated, and the digest goes into t's artifact list and the
 * journal when done); otherwise now: 0 and sha.  -errno when it cannot be read whole. */
#define ARTIFACT_PENDING 1
#define ARTIFACT_SKIPPED 2
#define ARTIFACT_HASH_MAX_DEFAULT (1L << 30)
int transfer_hash_artifact(struct transfers *tr, const struct task *t, const char *name, int fd,
                           const struct stat *st, char sha[65]);

/* The supervisor a transfers table belongs to. */
struct supervisor *transfers_supervisor(struct transfers *tr);
/* A buffer of *len bytes owned by the table, for messages that must outlive a call (the
 * resources' error messages). */
char *transfers_msgbuf(struct transfers *tr, size_t *len);

#endif
