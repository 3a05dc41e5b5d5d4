/* state/journal.h — the append-only journal: segment files of checksummed records in
 * <state>/journal/.  Generic: it stores typed opaque payloads (forkpoint uses msgpack maps) and
 * knows nothing of tasks.
 *
 * On disk (all integers little-endian):
 *   segment file  journal/SSSSSSSSSSSSSSSS.seg   (16 hex digits, increasing)
 *   file header   8 bytes magic "FPJRNL01", u64 segment number                    (16 bytes)
 *   record        u32 length of payload, u32 masked CRC32C over (type byte ‖ payload), u8 type,
 *                 payload                                                          (9 + length)
 * Records never span segments.  Payload length <= JOURNAL_MAX_RECORD.
 *
 * Durability: journal_append() only buffers; journal_commit() writes the whole batch with one
 * write and makes it durable with one fdatasync (group commit).  Nothing appended is durable, and
 * so nothing that depends on it may be acknowledged, until journal_commit() has returned 0.  A
 * failed or short write is truncated back to the last good offset and the batch stays buffered,
 * so the next commit retries it.  New segments are created atomically: written under a temp
 * name, fsynced, renamed, directory fsynced.
 *
 * Recovery (journal_open): segments are read in order.  A damaged or incomplete record at the
 * end of the NEWEST segment with nothing valid after it is a torn tail: it is cut off (the cut
 * bytes are kept in journal/torn-<segment>-<offset>.bin, never silently dropped) and reported
 * through the log callback.  Damage anywhere else is an error naming the file and offset, and
 * the journal refuses to open (`forkpoint fsck --repair` is the explicit way out).
 *
 * Snapshots (compaction): journal_rewrite() starts a new segment whose first records are
 * written by the caller (the live state); when that segment is durable, older segments are
 * deleted.  A snapshot segment begins with a record of type JOURNAL_SNAPSHOT_BEGIN and its
 * snapshot part ends with JOURNAL_SNAPSHOT_END; replay starts at the newest segment holding a
 * complete snapshot and ignores (and, when writable, deletes) segments before it.
 *
 * All functions return 0 or -errno; messages go to err (one line naming file and offset). */
#ifndef FP_JOURNAL_H
#define FP_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define JOURNAL_MAX_RECORD      (64u << 20)
#define JOURNAL_SNAPSHOT_BEGIN  0xF0
#define JOURNAL_SNAPSHOT_END    0xF1

struct journal;

/* Called for every valid record during replay, in order.  Return 0 to go on, or -1 to stop the
 * replay (journal_open then fails with -ECANCELED and the callback's message, if any, in err). */
typedef int (*journal_record_cb)(void *arg, uint8_t type, const void *payload, size_t len,
                                 char *err, size_t errlen);
/* Informational messages during open (torn tail cut, obsolete segments removed). */
typedef void (*journal_log_cb)(void *arg, const char *msg);

struct journal_opts {
	int read_only;                 /* 1: no lock, no writes, torn tail ignored not cut (ls/show) */
	uint64_t segment_bytes;        /* roll to a new segment past this size; default 64 MiB */
};

/* Open (creating journal/ if needed, mode 0700), replay every record through cb, repair a torn
 * tail, and position for appending. */
int journal_open(const char *state_dir, const struct journal_opts *opts,
                 journal_record_cb cb, journal_log_cb log, void *arg,
                 struct journal **out, char *err, size_t errlen);
void journal_close(struct journal *j);   /* does not commit */

int journal_append(struct journal *j, uint8_t type, const void *payload, size_t len);
/* Write and fdatasync everything appended since the last commit.  No-op if nothing pending. */
int journal_commit(struct journal *j);
size_t journal_pending_bytes(const struct journal *j);
/* Bytes in all live segments (for the compaction threshold). */
uint64_t journal_total_bytes(const struct journal *j);
uint64_t journal_records_replayed(const struct journal *j);

/* Compaction.  journal_rewrite_begin() commits what is pending, then opens a new segment (temp
 * name) and appends JOURNAL_SNAPSHOT_BEGIN; the caller appends the live state with
 * journal_append(); journal_rewrite_end() appends JOURNAL_SNAPSHOT_END, commits, renames the
 * segment into place, fsyncs the directory and deletes the older segments.  On failure the old
 * segments stay authoritative and the temp file is removed. */
int journal_rewrite_begin(struct journal *j);
int journal_rewrite_end(struct journal *j);
/* Abandon a rewrite: the temp segment and everything appended since rewrite_begin are dropped.
 * Between rewrite_begin and rewrite_end (or abort), journal_commit() fails with -EBUSY: the
 * snapshot is not authoritative until renamed.  The snapshot marker types are reserved:
 * journal_append() refuses them (-EINVAL) and replay never passes them to the callback. */
void journal_rewrite_abort(struct journal *j);

/* fsck: verify every record of every segment without replaying into anything.  Returns 0 if
 * clean, -EBADMSG with the first problem in err.  With repair=1, a torn tail of the newest
 * segment is cut (kept in a side file as journal_open does); damage elsewhere is never repaired
 * automatically.  *records gets the number of valid records seen. */
int journal_fsck(const char *state_dir, int repair, uint64_t *records, char *err, size_t errlen);

#endif
