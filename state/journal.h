/* state/journal.h — the append-only journal: segment files of checksummed records in
 * <state>/journal/.  Generic: it stores typed opaque payloads (forkpoint uses msgpack maps) and
 * knows nothing of tasks.
 *
 * On disk (all integers little-endian):
 *   segment file  journal/SSSSSSSSSSSSSSSS.seg   (16 hex digits, increasing, not necessarily
 *                 consecutive: numbers of segments set aside are never reused)
 *   file header   (48 bytes) magic "FPJRNL02", u64 segment number, u64 number of the previous
 *                 segment (0: none), u64 length of the previous segment when it was sealed,
 *                 u64 sequence number of this segment's first record, u32 flags (bit 0: the
 *                 segment starts with a snapshot), u32 masked CRC32C of the 44 bytes before it
 *   record        u32 payload length, u32 masked CRC32C over (sequence ‖ type ‖ payload),
 *                 u64 sequence number, u8 type, payload                        (17 + length)
 *   journal/HEAD  (40 bytes) magic "FPJHEAD1", u64 segment number, u64 length, u64 sequence
 *                 number after the last record, u32 flags (bit 0: clean shutdown), u32 masked
 *                 CRC32C: a point the journal is known to have reached durably
 * Records never span segments.  Payload length <= JOURNAL_MAX_RECORD.  Sequence numbers start
 * at 1 and continue across segments and snapshots without gaps.
 *
 * Durability: journal_append() only buffers; journal_commit() writes the whole batch with one
 * write and makes it durable with one fdatasync (group commit).  Nothing appended is durable, and
 * so nothing that depends on it may be acknowledged, until journal_commit() has returned 0.  A
 * failed or short write is truncated back to the last good offset and the batch stays buffered,
 * so the next commit retries it.  New segments are created atomically: written under a temp
 * name, fsynced, renamed, directory fsynced.  A new segment's header seals its predecessor
 * (number, final length, next sequence number).  HEAD is rewritten (temp, fsync, rename) when
 * the journal is opened for writing, at every roll and compaction, after a commit when
 * head_interval_ms have passed since the last time, and at a clean close.
 *
 * Recovery (journal_open): the live segments (the newest one starting with a snapshot, or the
 * first one ever, and everything after it) must form one chain: each header names the segment
 * before it, its sealed length and the next sequence number, and every record carries the
 * number after its predecessor's.  HEAD's segment must exist and hold at least HEAD's length and
 * sequence number.  A damaged or incomplete record at the end of the NEWEST segment, past HEAD's
 * length, with nothing valid after it, is a torn tail: it is cut off (the cut bytes are kept in
 * journal/torn-<segment>-<offset>.bin, never silently dropped) and reported through the log
 * callback.  Anything else -- damage in an older segment or a snapshot, a missing, duplicated or
 * renumbered segment, a truncated segment, a journal written in an older format -- is an error
 * naming the file and offset, and the journal refuses to open.
 *
 * Snapshots (compaction): journal_rewrite_begin() starts a new segment (flag bit 0) whose first
 * records are written by the caller (the live state) between JOURNAL_SNAPSHOT_BEGIN and
 * JOURNAL_SNAPSHOT_END; END carries the count, byte length and CRC32C of everything from BEGIN
 * to it.  The segment is renamed into place only once complete and durable, so a published
 * snapshot that does not verify is damage, never an interrupted compaction (an interrupted one
 * leaves only a .tmp file).  Older segments are deleted after HEAD names the snapshot.
 *
 * Not detectable (see docs/operations.md): after a crash, records committed since HEAD was
 * last written (at most head_interval_ms before the crash) can be cut from the end of the
 * newest segment at a record boundary without a trace, and a cut inside the last of them looks
 * like a torn write; the newest segment can be lost if HEAD was not yet updated after a roll.
 * Nothing on disk remembers them.
 *
 * All functions return 0 or -errno; messages go to err (one line naming file and offset). */
#ifndef FP_JOURNAL_H
#define FP_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define JOURNAL_MAX_RECORD      (64u << 20)
#define JOURNAL_SNAPSHOT_BEGIN  0xF0
#define JOURNAL_SNAPSHOT_END    0xF1
#define JOURNAL_RESERVED_FIRST  0xF0   /* types 0xF0..0xFF are the journal's own */

struct journal;

/* Called for every valid record during replay, in order.  Return 0 to go on, or -1 to stop the
 * replay (journal_open then fails with -ECANCELED and err holds "<file>: offset N: " followed by
 * the callback's message, if any). */
typedef int (*journal_record_cb)(void *arg, uint8_t type, const void *payload, size_t len,
                                 char *err, size_t errlen);
/* Informational messages during open (torn tail cut, obsolete segments removed).  The same arg
 * as the record callback's is passed. */
typedef void (*journal_log_cb)(void *arg, const char *msg);

struct journal_opts {
	int read_only;                 /* 1: no lock, no writes, torn tail ignored not cut (ls/show) */
	uint64_t segment_bytes;        /* roll to a new segment past this size; default 64 MiB */
	unsigned head_interval_ms;     /* rewrite HEAD after a commit at most this often; default
	                                  10000 (the window in which lost records go unnoticed) */
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
/* Bytes of the snapshot the live journal starts from (header to end record), 0 if it starts
 * from the first segment ever.  What a compaction threshold should be relative to. */
uint64_t journal_snapshot_bytes(const struct journal *j);

/* Compaction.  journal_rewrite_begin() commits what is pending, then opens a new segment (temp
 * name) and appends JOURNAL_SNAPSHOT_BEGIN; the caller appends the live state with
 * journal_append(); journal_rewrite_end() appends JOURNAL_SNAPSHOT_END, commits, renames the
 * segment into place, fsyncs the directory and deletes the older segments.  On failure the old
 * segments stay authoritative and the temp file is removed. */
int journal_rewrite_begin(struct journal *j);
int journal_rewrite_end(struct journal *j);
/* Abandon a rewrite: the temp segment and everything appended since rewrite_begin are dropped.
 * Between rewrite_begin and rewrite_end (or abort), journal_commit() fails with -EBUSY: the
 * snapshot is not authoritative until renamed.  Types from JOURNAL_RESERVED_FIRST up are
 * reserved: journal_append() refuses them (-EINVAL) and replay never passes them to the
 * callback. */
void journal_rewrite_abort(struct journal *j);

/* fsck: run every check journal_open runs, without replaying into anything.  Returns 0 if
 * clean, -EBADMSG (or -EPROTO for the old format) with the first problem in err, worded as
 * journal_open words it.  With repair=1, a torn tail of the newest segment is cut (kept in a
 * side file as journal_open does); damage elsewhere is never repaired.  With
 * repair=JOURNAL_FSCK_NEW_HEAD, HEAD is not checked but rewritten to the point the chain
 * reaches (for an operator who cut the journal back by hand and accepts the loss); every other
 * check still applies.  *records gets the number of valid records seen.  On success with a
 * repair, err describes what was done (empty if nothing). */
#define JOURNAL_FSCK_NEW_HEAD 2
int journal_fsck(const char *state_dir, int repair, uint64_t *records, char *err, size_t errlen);

#endif
