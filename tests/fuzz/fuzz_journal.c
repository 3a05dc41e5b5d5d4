/* tests/fuzz/fuzz_journal.c — libFuzzer target for journal recovery: the input becomes one or
 * two segment files in a scratch state dir, which is then opened read-only, checked with
 * fsck, opened for writing (which may cut and set aside), opened again, written to and
 * compacted.  Besides "no crash, leak or hang", it checks that recovery is consistent:
 * read-only and writable opens agree, a repaired journal reopens clean with the same records,
 * fsck finds nothing after a repair, and a snapshot written afterwards replays alone.
 * Built by `make fuzz`. */
#include "state/journal.h"
#include "state/crc32c.h"
#include "tests/unit/check.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libFuzzer gives the target no context argument: the scratch dir lives for the process. */
static char scratch[PATH_MAX];

static void cleanup(void)
{
	if (scratch[0] != '\0')
		check_rm_rf(scratch);
}

/* What one open saw: records delivered and informational lines logged. */
struct seen {
	uint64_t records;
	int logs;
};

static int count(void *arg, uint8_t type, const void *payload, size_t len, char *err,
		 size_t errlen)
{
	(void)type;
	(void)payload;
	(void)len;
	(void)err;
	(void)errlen;
	((struct seen *)arg)->records++;
	return 0;
}

static void count_log(void *arg, const char *msg)
{
	(void)msg;
	((struct seen *)arg)->logs++;
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Give every record that fits in buf a correct checksum and the next sequence number: a
 * fuzzer cannot forge CRC32C by itself, and without this it would hardly ever get past the
 * first record.  *lsn is the number the first record gets; on return, the one after. */
static void fix_records(uint8_t *buf, size_t len, uint64_t *lsn)
{
	size_t off = 0;

	while (len - off >= 17) {
		uint32_t l = (uint32_t)buf[off] | (uint32_t)buf[off + 1] << 8 |
			     (uint32_t)buf[off + 2] << 16 | (uint32_t)buf[off + 3] << 24;
		if (l > len - off - 17)
			break;
		put_le(buf + off + 8, (*lsn)++, 8);
		put_le(buf + off + 4, crc32c_mask(crc32c(0, buf + off + 8, 9 + (size_t)l)), 4);
		off += 17 + (size_t)l;
	}
}

/* A segment file: with header = 1 a valid header chaining it to segment seq - 1 (of
 * prev_len bytes); with fix = 1 valid records numbered from *lsn. */
static void write_segment(const char *state, uint64_t seq, int header, int fix,
			  const uint8_t *data, size_t len, uint64_t prev_len, uint64_t *lsn)
{
	char path[PATH_MAX + 64];
	unsigned char hdr[48];
	uint8_t *p = malloc(len + 1);
	uint64_t first = *lsn;
	int fd;

	if (p == NULL)
		abort();
	memcpy(p, data, len);
	if (fix)
		fix_records(p, len, lsn);

	snprintf(path, sizeof path, "%s/journal/%016" PRIx64 ".seg", state, seq);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	if (header) {
		memcpy(hdr, "FPJRNL02", 8);
		put_le(hdr + 8, seq, 8);
		put_le(hdr + 16, seq - 1, 8);
		put_le(hdr + 24, prev_len, 8);
		put_le(hdr + 32, first, 8);
		put_le(hdr + 40, 0, 4);
		put_le(hdr + 44, crc32c_mask(crc32c(0, hdr, 44)), 4);
		if (write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr)
			abort();
	}
	if (len > 0 && write(fd, p, len) != (ssize_t)len)
		abort();
	close(fd);
	free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char state[PATH_MAX + 16], jdir[PATH_MAX + 32], err[512];
	struct journal_opts ro = { .read_only = 1 }, rw = { 0 };
	struct journal *j = NULL;
	struct seen s_ro = {0}, s_rw = {0}, s_again = {0};
	uint64_t n_fsck = 0;
	int rc_ro, rc_rw, rc;

	if (size < 2)
		return 0;
	if (scratch[0] == '\0') {
		const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
		snprintf(scratch, sizeof scratch, "%s/fp-fuzz-journal-XXXXXX", base);
		if (mkdtemp(scratch) == NULL)
			abort();
		atexit(cleanup);
	}
	snprintf(state, sizeof state, "%s/s", scratch);
	snprintf(jdir, sizeof jdir, "%s/journal", state);
	check_rm_rf(state);
	if (mkdir(state, 0700) < 0 || mkdir(jdir, 0700) < 0)
		abort();

	/* Byte 0: bit 0 prepends valid headers, bit 1 splits into two segments at a point
	 * chosen by byte 1, bit 2 writes through tiny segments afterwards, bit 3 gives the
	 * records valid checksums and sequence numbers, bit 4 writes HEAD. */
	uint8_t mode = data[0];
	size_t split = 0;
	const uint8_t *body = data + 2;
	size_t blen = size - 2;
	uint64_t lsn = 1;
	if (mode & 2) {
		split = (size_t)data[1] * blen / 256;
		write_segment(state, 1, mode & 1, mode & 8, body, split, 0, &lsn);
		write_segment(state, 2, mode & 1, mode & 8, body + split, blen - split,
			      (mode & 1 ? 48 : 0) + split, &lsn);
	} else {
		write_segment(state, 1, mode & 1, mode & 8, body, blen, 0, &lsn);
	}
	/* Bit 4: a HEAD naming the first segment's header (what an open of it would have
	 * recorded); without it only an empty journal opens. */
	if (mode & 16) {
		unsigned char head[40];
		char hp[PATH_MAX + 64];
		memcpy(head, "FPJHEAD1", 8);
		put_le(head + 8, 1, 8);
		put_le(head + 16, 48, 8);
		put_le(head + 24, 1, 8);
		put_le(head + 32, 0, 4);
		put_le(head + 36, crc32c_mask(crc32c(0, head, 36)), 4);
		snprintf(hp, sizeof hp, "%s/HEAD", jdir);
		int hfd = open(hp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (hfd < 0 || write(hfd, head, sizeof head) != (ssize_t)sizeof head)
			abort();
		close(hfd);
	}
	rw.segment_bytes = (mode & 4) ? 64 : 0;

	rc_ro = journal_open(state, &ro, count, count_log, &s_ro, &j, err, sizeof err);
	journal_close(j);
	j = NULL;
	journal_fsck(state, 0, NULL, err, sizeof err);

	rc_rw = journal_open(state, &rw, count, count_log, &s_rw, &j, err, sizeof err);
	if ((rc_ro == 0) != (rc_rw == 0) || (rc_ro == 0 && s_ro.records != s_rw.records))
		__builtin_trap();   /* read-only and writable recovery disagree */
	if (rc_rw < 0)
		return 0;
	journal_close(j);
	j = NULL;

	/* Recovery is idempotent: the second open finds nothing to do. */
	rc = journal_open(state, &rw, count, count_log, &s_again, &j, err, sizeof err);
	if (rc != 0 || s_again.records != s_rw.records || s_again.logs != 0)
		__builtin_trap();
	rc = journal_fsck(state, 0, &n_fsck, err, sizeof err);
	if (rc != 0)
		__builtin_trap();

	/* The writer carries on from wherever recovery left it. */
	if (journal_append(j, 1, "abc", 3) != 0 || journal_append(j, 2, "", 0) != 0 ||
	    journal_commit(j) != 0)
		__builtin_trap();
	if (journal_rewrite_begin(j) != 0 || journal_append(j, 3, "live", 4) != 0 ||
	    journal_rewrite_end(j) != 0 || journal_append(j, 4, "after", 5) != 0 ||
	    journal_commit(j) != 0)
		__builtin_trap();
	journal_close(j);
	j = NULL;
	memset(&s_again, 0, sizeof s_again);
	rc = journal_open(state, &ro, count, count_log, &s_again, &j, err, sizeof err);
	if (rc != 0 || s_again.records != 2)
		__builtin_trap();   /* the snapshot and the record after it, nothing older */
	journal_close(j);
	return 0;
}
