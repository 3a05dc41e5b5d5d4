/* state/journal.c — the append-only journal (format and contracts in journal.h).
 *
 * Reading: a segment is read whole into memory with a few large reads, never mmapped, so a
 * writer truncating a file under a read-only reader cannot fault it, and replay costs no
 * system call per record.  Open first builds a plan (which segments are live: the newest one
 * holding a complete snapshot and everything after it), then walks it in order.  The same
 * engine serves journal_open (read-only or writable) and journal_fsck (check or repair); only
 * what it may change and what it reports differ.
 *
 * Writing: records are framed into an in-memory batch by journal_append; journal_commit puts
 * the batch at the end of the current segment with one pwrite and makes it durable with one
 * fdatasync.  If either fails, the file is cut back to the last durable length so a partial
 * batch can never be followed by a later one, and the batch stays for the next attempt.
 *
 * Ownership: struct journal owns its fds (all O_CLOEXEC), its batch and its paths; the lock
 * is released by closing the lock fd in journal_close.  Functions return 0 or -errno and write
 * at most one line into err; informational lines go to the caller's log callback. */
#include "state/journal.h"
#include "state/crc32c.h"
#include "state/layout.h"   /* the folder's name only: fuzz_journal links this file alone */
#include "proto/io.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <time.h>
#include <signal.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEG_MAGIC      "FPJRNL02"
#define SEG_MAGIC_V1   "FPJRNL01"          /* the previous format: refused, never misread */
#define SEG_HDR        48u
#define SEG_F_SNAPSHOT 1u
#define REC_HDR        17u
#define HEAD_NAME      "HEAD"
#define HEAD_MAGIC     "FPJHEAD1"
#define HEAD_LEN       40u
#define HEAD_F_CLEAN   1u
#define SEG_NAME_LEN   20u                 /* 16 hex digits + ".seg" */
#define DEFAULT_SEGMENT_BYTES (64ull << 20)
/* A snapshot can be as large as the live state; spill it to the temp file in pieces of this
 * size instead of holding all of it in the batch. */
#define REWRITE_SPILL  (4u << 20)
#define LOCK_NAME      "LOCK"
#define HEAD_EVERY_MS  10000u
#define MSG_MAX        512

struct journal {
	int read_only;
	uint64_t segment_bytes;
	char *dir;              /* <state>/journal, for messages */
	int dirfd;              /* -1: read-only open of a journal that does not exist */
	int lockfd;
	int fd;                 /* current segment, writable opens only */
	uint64_t seq;           /* its number */
	uint64_t off;           /* its durable length: everything before is committed */
	uint64_t next_seq;      /* never reuse a number, even of a segment set aside */
	uint64_t lsn_next;      /* sequence number the next appended record gets */
	uint64_t lsn_durable;   /* sequence number after the last committed record */
	uint64_t snap_bytes;    /* see journal_snapshot_bytes() */
	unsigned head_every_ms; /* journal_opts.head_interval_ms */
	int64_t head_at_ms;     /* CLOCK_MONOTONIC of the last HEAD written after a commit */
	int tail_dirty;         /* a failed write may have left bytes past off */
	uint64_t total;         /* bytes in live segments */
	uint64_t replayed;
	unsigned char *batch;   /* framed records not yet committed */
	size_t blen, bcap;
	/* compaction in progress (journal_rewrite_begin .. _end) */
	int rw_active;
	int rw_fd;
	uint64_t rw_seq;
	uint64_t rw_off;
	uint64_t rw_lsn;        /* sequence number of its BEGIN record */
	uint32_t rw_crc;        /* crc32c of the snapshot bytes spilled so far */
	int rw_err;             /* a spill failed: the rewrite can only be abandoned */
};

/* ---- small helpers ---------------------------------------------------------------- */

__attribute__((format(printf, 3, 4)))
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void put_le32(unsigned char *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static uint32_t get_le32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return le32toh(v);
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

static void put_le64(unsigned char *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

/* ---- segment header and HEAD ------------------------------------------------------------ */

struct seg_hdr {
	uint64_t seq;           /* this segment's number */
	uint64_t prev;          /* the segment it follows (0: none) */
	uint64_t prev_len;      /* that segment's sealed length */
	uint64_t first_lsn;     /* sequence number of this segment's first record */
	uint32_t flags;
};

static void hdr_encode(unsigned char out[SEG_HDR], const struct seg_hdr *h)
{
	memcpy(out, SEG_MAGIC, 8);
	put_le64(out + 8, h->seq);
	put_le64(out + 16, h->prev);
	put_le64(out + 24, h->prev_len);
	put_le64(out + 32, h->first_lsn);
	put_le32(out + 40, h->flags);
	put_le32(out + 44, crc32c_mask(crc32c(0, out, 44)));
}

enum { HDR_OK = 0, HDR_SHORT, HDR_OLD, HDR_BAD };

static int hdr_decode(const unsigned char *buf, size_t len, struct seg_hdr *h)
{
	if (len >= 8 && memcmp(buf, SEG_MAGIC_V1, 8) == 0)
		return HDR_OLD;
	if (len < SEG_HDR)
		return HDR_SHORT;
	if (memcmp(buf, SEG_MAGIC, 8) != 0 ||
	    get_le32(buf + 44) != crc32c_mask(crc32c(0, buf, 44)))
		return HDR_BAD;
	h->seq = get_le64(buf + 8);
	h->prev = get_le64(buf + 16);
	h->prev_len = get_le64(buf + 24);
	h->first_lsn = get_le64(buf + 32);
	h->flags = get_le32(buf + 40);
	return HDR_OK;
}

struct head {
	uint64_t seq, len, lsn;
	uint32_t flags;
};

/* HEAD: 0, -ENOENT if there is none, -EBADMSG if it is damaged, or another -errno. */
static int head_read(int dirfd, struct head *h)
{
	unsigned char buf[HEAD_LEN + 1];
	int fd = openat(dirfd, HEAD_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = io_pread_upto(fd, buf, sizeof buf, 0);
	close(fd);
	if (n < 0)
		return (int)n;
	if (n != HEAD_LEN || memcmp(buf, HEAD_MAGIC, 8) != 0 ||
	    get_le32(buf + 36) != crc32c_mask(crc32c(0, buf, 36)))
		return -EBADMSG;
	h->seq = get_le64(buf + 8);
	h->len = get_le64(buf + 16);
	h->lsn = get_le64(buf + 24);
	h->flags = get_le32(buf + 32);
	return 0;
}

/* Replace HEAD atomically: temp file, fdatasync, rename, directory fsync. */
static int head_write(int dirfd, const struct head *h)
{
	static const char tmp[] = HEAD_NAME ".tmp";
	unsigned char buf[HEAD_LEN];
	int fd, rc;

	memcpy(buf, HEAD_MAGIC, 8);
	put_le64(buf + 8, h->seq);
	put_le64(buf + 16, h->len);
	put_le64(buf + 24, h->lsn);
	put_le32(buf + 32, h->flags);
	put_le32(buf + 36, crc32c_mask(crc32c(0, buf, 36)));
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	rc = io_pwrite_full(fd, buf, sizeof buf, 0);
	if (rc == 0 && fdatasync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc == 0 && renameat(dirfd, tmp, dirfd, HEAD_NAME) < 0)
		rc = -errno;
	if (rc == 0 && fsync(dirfd) < 0)
		rc = -errno;
	if (rc < 0)
		unlinkat(dirfd, tmp, 0);
	return rc;
}

static void seg_name(char out[SEG_NAME_LEN + 1], uint64_t seq)
{
	snprintf(out, SEG_NAME_LEN + 1, "%016" PRIx64 ".seg", seq);
}

/* Exactly 16 lowercase hex digits and ".seg": anything else in the directory is not ours. */
static int seg_parse(const char *name, uint64_t *seq)
{
	uint64_t v = 0;

	if (strlen(name) != SEG_NAME_LEN || strcmp(name + 16, ".seg") != 0)
		return 0;
	for (int i = 0; i < 16; i++) {
		char c = name[i];
		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return 0;
	}
	*seq = v;
	return 1;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* rename that never replaces: side files are evidence and must not overwrite each other.
 * Falls back to link+unlink where the filesystem lacks RENAME_NOREPLACE. */
static int rename_noreplace(int dirfd, const char *from, const char *to)
{
	if (renameat2(dirfd, from, dirfd, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(dirfd, from, dirfd, to, 0) < 0)
		return -errno;
	unlinkat(dirfd, from, 0);
	return 0;
}

/* Move dirfd/from to torn-<seq>-<off>.bin (or .1.bin, .2.bin … if that exists), then make the
 * move durable.  The final name goes to out. */
static int place_side_file(int dirfd, const char *from, uint64_t seq, uint64_t off,
			   char *out, size_t outlen)
{
	int rc = -EEXIST;

	for (int n = 0; n < 1000 && rc == -EEXIST; n++) {
		if (n == 0)
			snprintf(out, outlen, "torn-%016" PRIx64 "-%" PRIu64 ".bin", seq, off);
		else
			snprintf(out, outlen, "torn-%016" PRIx64 "-%" PRIu64 ".%d.bin", seq, off, n);
		rc = rename_noreplace(dirfd, from, out);
	}
	if (rc < 0)
		return rc;
	return fsync(dirfd) < 0 ? -errno : 0;
}

/* ---- records -------------------------------------------------------------------------- */

enum rec_status {
	REC_OK = 0,
	REC_SHORT_HEADER,
	REC_PAST_EOF,
	REC_TOO_LONG,
	REC_BAD_CRC,
};

static const char *rec_reason(int st)
{
	switch (st) {
	case REC_SHORT_HEADER: return "incomplete record header";
	case REC_PAST_EOF: return "record length runs past the end of the file";
	case REC_TOO_LONG: return "record length above the limit";
	case REC_BAD_CRC: return "checksum mismatch";
	default: return "bad record";
	}
}

struct rec {
	uint8_t type;
	uint64_t lsn;
	const unsigned char *payload;
	uint32_t len;
};

/* The checksum covers the sequence number, the type and the payload, which sit together
 * after the length and checksum fields. */
static uint32_t rec_crc(const unsigned char *rec, size_t plen)
{
	return crc32c_mask(crc32c(0, rec + 8, 9 + plen));
}

/* Check the record at buf[off]; verify = 0 skips the checksum of a range already verified. */
static int rec_read(const unsigned char *buf, size_t len, size_t off, int verify, struct rec *r)
{
	if (len - off < REC_HDR)
		return REC_SHORT_HEADER;
	uint32_t plen = get_le32(buf + off);
	if (plen > JOURNAL_MAX_RECORD)
		return REC_TOO_LONG;
	if ((size_t)plen > len - off - REC_HDR)
		return REC_PAST_EOF;
	r->lsn = get_le64(buf + off + 8);
	r->type = buf[off + 16];
	r->payload = buf + off + REC_HDR;
	r->len = plen;
	if (verify && get_le32(buf + off + 4) != rec_crc(buf + off, plen))
		return REC_BAD_CRC;
	return REC_OK;
}

/* ---- checksums of arbitrary ranges (for the torn-tail scan) ---------------------------------
 *
 * Deciding "torn tail or damage" means trying a record at every offset after the bad one.  A
 * candidate's length field can claim megabytes, so checksumming each candidate directly costs
 * O(n^2) on a large garbage tail (a torn multi-MiB record would stall start-up for minutes).
 * Instead the CRC of any range is derived from CRCs of prefixes: crc(A || B) = crc(A) * x^(8|B|)
 * + crc(B) over GF(2) modulo the CRC polynomial, so crc(B) = crc(A || B) ^ shift(crc(A), |B|).
 * Prefix CRCs are kept every RANGE_STEP bytes; a prefix in between costs at most RANGE_STEP
 * bytes of CRC, and a shift O(log |B|) carry-less multiplications. */

#define CRC32C_POLY  0x82F63B78u   /* reflected: bit 31 is the coefficient of x^0 */
#define RANGE_STEP   1024u
/* Below this length, checksumming a candidate directly is cheaper.  Overridable so the fuzz
 * build, whose inputs are small, exercises the other path too. */
#ifndef JOURNAL_RANGE_DIRECT
#define JOURNAL_RANGE_DIRECT 4096u
#endif

/* a * b mod P, both in the reflected representation. */
static uint32_t gf_mulmod(uint32_t a, uint32_t b)
{
	uint32_t p = 0;

	for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
		if (a & m)
			p ^= b;
		b = (b & 1) ? (b >> 1) ^ CRC32C_POLY : b >> 1;
	}
	return p;
}

/* x^(8n) mod P: what appending n zero bytes multiplies a CRC by. */
static uint32_t gf_x8n(uint64_t n)
{
	uint32_t p = 1u << 31;          /* x^0 */
	uint32_t sq = 1u << (31 - 8);   /* x^8, squared as n's bits are consumed */

	while (n != 0) {
		if (n & 1)
			p = gf_mulmod(p, sq);
		sq = gf_mulmod(sq, sq);
		n >>= 1;
	}
	return p;
}

struct range_crc {
	const unsigned char *buf;
	size_t base;        /* prefixes start here */
	uint32_t *cp;       /* cp[i] = crc32c(buf[base .. base + i * RANGE_STEP)) */
	size_t ncp;
};

static int range_init(struct range_crc *rc, const unsigned char *buf, size_t base, size_t len)
{
	rc->buf = buf;
	rc->base = base;
	rc->ncp = (len - base) / RANGE_STEP + 1;
	rc->cp = malloc(rc->ncp * sizeof *rc->cp);
	if (rc->cp == NULL)
		return -ENOMEM;
	rc->cp[0] = 0;
	for (size_t i = 1; i < rc->ncp; i++)
		rc->cp[i] = crc32c(rc->cp[i - 1], buf + base + (i - 1) * RANGE_STEP, RANGE_STEP);
	return 0;
}

static uint32_t range_prefix(const struct range_crc *rc, size_t pos)
{
	size_t i = (pos - rc->base) / RANGE_STEP;
	size_t at = rc->base + i * RANGE_STEP;
	return crc32c(rc->cp[i], rc->buf + at, pos - at);
}

/* crc32c of buf[a .. b), base <= a <= b <= len. */
static uint32_t range_crc(const struct range_crc *rc, size_t a, size_t b)
{
	return range_prefix(rc, b) ^ gf_mulmod(gf_x8n(b - a), range_prefix(rc, a));
}

/* Is there a valid record starting anywhere after `from`?  Decides torn tail (no) versus
 * damage (yes).  Most offsets fail on the length field; the rest cost one checksum each,
 * bounded as described above.  -ENOMEM if the prefix table cannot be had. */
static int valid_after(const unsigned char *buf, size_t len, size_t from)
{
	struct range_crc rc = { 0 };
	int found = 0;

	for (size_t o = from + 1; o < len && len - o >= REC_HDR; o++) {
		uint32_t plen = get_le32(buf + o);
		if (plen > JOURNAL_MAX_RECORD || (size_t)plen > len - o - REC_HDR)
			continue;
		uint32_t c;
		if (plen < JOURNAL_RANGE_DIRECT) {
			c = crc32c(0, buf + o + 8, (size_t)plen + 9);
		} else {
			if (rc.cp == NULL && range_init(&rc, buf, from + 1, len) < 0)
				return -ENOMEM;
			c = range_crc(&rc, o + 8, o + REC_HDR + plen);
		}
		if (crc32c_mask(c) == get_le32(buf + o + 4)) {
			found = 1;
			break;
		}
	}
	free(rc.cp);
	return found;
}

/* ---- segments in memory -------------------------------------------------------------- */

struct seg {
	uint64_t seq;
	int fd;
	struct seg_hdr hdr;
	unsigned char *buf;     /* whole file once loaded */
	size_t len;
	size_t good;            /* end of the last valid record, after the walk */
	uint64_t min_len;       /* HEAD says this much of it was durable (0: no claim) */
};

static void seg_unload(struct seg *s)
{
	free(s->buf);
	s->buf = NULL;
}

/* Read the whole file through its fd.  A file that grows meanwhile is read up to the size seen
 * at the start; one that shrinks yields what is left (a concurrent writer's torn tail). */
static int seg_load(struct seg *s)
{
	struct stat st;
	ssize_t have;

	if (s->buf != NULL)
		return 0;
	if (fstat(s->fd, &st) < 0)
		return -errno;
	if (st.st_size < 0 || (uint64_t)st.st_size > SIZE_MAX - 1)
		return -EFBIG;
	s->buf = malloc((size_t)st.st_size + 1);
	if (s->buf == NULL)
		return -ENOMEM;
	have = io_pread_upto(s->fd, s->buf, (size_t)st.st_size, 0);
	if (have < 0) {
		seg_unload(s);
		return (int)have;
	}
	s->len = (size_t)have;
	return 0;
}

/* ---- the recovery engine ---------------------------------------------------------------- */

/* What one pass over the directory may do, and where its findings go. */
struct scan {
	const char *dir;        /* <state>/journal */
	int dirfd;
	int writable;           /* segments opened O_RDWR */
	int mutate;             /* cut a torn tail (open, fsck --repair) */
	int report_repairable;  /* fsck without repair: repairable damage is a finding */
	int deliver;            /* pass records to cb (open) or only count them (fsck) */
	int ignore_head;        /* fsck --new-head: HEAD is to be rebuilt, not checked */
	journal_record_cb cb;
	journal_log_cb log;
	void *arg;
	char *err;
	size_t errlen;

	/* HEAD, read before the directory is listed */
	int have_head;
	struct head head;

	/* results */
	uint64_t records;
	uint64_t total;
	uint64_t max_seq;       /* highest segment number seen, live or not */
	uint64_t lsn;           /* sequence number after the last valid record */
	uint64_t snap_bytes;    /* snapshot part of the first live segment */
	char finding[MSG_MAX];  /* first repairable problem left in place (fsck) */
};

struct plan {
	struct seg *segs;       /* live segments, oldest first */
	size_t n;
	uint64_t *obsolete;     /* segments before the snapshot the plan starts from */
	size_t nobs;
};

static void plan_free(struct plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		seg_unload(&p->segs[i]);
		if (p->segs[i].fd >= 0)
			close(p->segs[i].fd);
	}
	free(p->segs);
	free(p->obsolete);
	memset(p, 0, sizeof *p);
}

__attribute__((format(printf, 2, 3)))
static void scan_log(struct scan *sc, const char *fmt, ...)
{
	char msg[MSG_MAX];
	va_list ap;

	if (sc->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	sc->log(sc->arg, msg);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sorted segment numbers in the directory. */
static int list_segments(int dirfd, uint64_t **out, size_t *n)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t *v = NULL;
	size_t cnt = 0, cap = 0;
	struct dirent *e;
	DIR *d;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (d == NULL) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((errno = 0, e = readdir(d)) != NULL) {
		uint64_t seq;
		if (!seg_parse(e->d_name, &seq))
			continue;
		if (cnt == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			uint64_t *nv = realloc(v, ncap * sizeof *nv);
			if (nv == NULL) {
				rc = -ENOMEM;
				goto fail;
			}
			v = nv;
			cap = ncap;
		}
		v[cnt++] = seq;
	}
	if (errno != 0) {
		rc = -errno;
		goto fail;
	}
	closedir(d);
	if (cnt > 1)
		qsort(v, cnt, sizeof *v, cmp_u64);
	*out = v;
	*n = cnt;
	return 0;

fail:
	closedir(d);
	free(v);
	return rc;
}

static int open_segment(struct scan *sc, uint64_t seq, int *fd)
{
	char name[SEG_NAME_LEN + 1];

	seg_name(name, seq);
	*fd = openat(sc->dirfd, name, (sc->writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
	return *fd < 0 ? -errno : 0;
}

/* Read and check segment seq's header.  A header that is short, of the old format, damaged or
 * of another segment is damage: segments are only ever created complete, under their name. */
static int read_header(struct scan *sc, uint64_t seq, int fd, struct seg_hdr *h)
{
	char name[SEG_NAME_LEN + 1];
	unsigned char buf[SEG_HDR];
	ssize_t n = io_pread_upto(fd, buf, sizeof buf, 0);

	seg_name(name, seq);
	if (n < 0) {
		set_err(sc->err, sc->errlen, "%s/%s: cannot read: %s", sc->dir, name,
			strerror((int)-n));
		return (int)n;
	}
	switch (hdr_decode(buf, (size_t)n, h)) {
	case HDR_OK:
		break;
	case HDR_OLD:
		set_err(sc->err, sc->errlen, "%s/%s: offset 0: written in the journal format " SEG_MAGIC_V1
			" of an older forkpoint; this version reads only " SEG_MAGIC " and does not "
			"convert (move the state dir away to start afresh)", sc->dir, name);
		return -EPROTO;
	case HDR_SHORT:
		set_err(sc->err, sc->errlen, "%s/%s: offset 0: only %zd bytes, not a whole segment "
			"header (segments are created complete): the journal is damaged", sc->dir,
			name, n);
		return -EBADMSG;
	default:
		set_err(sc->err, sc->errlen, "%s/%s: offset 0: bad segment header (magic or "
			"checksum): the journal is damaged", sc->dir, name);
		return -EBADMSG;
	}
	if (h->seq != seq) {
		set_err(sc->err, sc->errlen, "%s/%s: offset 0: its header says it is segment %016"
			PRIx64 ": the segment was renamed or copied, the journal is damaged", sc->dir,
			name, h->seq);
		return -EBADMSG;
	}
	return 0;
}

static int head_load(struct scan *sc)
{
	int rc = sc->ignore_head ? -ENOENT : head_read(sc->dirfd, &sc->head);

	sc->have_head = rc == 0;
	if (rc == 0 || rc == -ENOENT)
		return 0;
	if (rc == -EBADMSG)
		set_err(sc->err, sc->errlen, "%s/" HEAD_NAME ": damaged (size, magic or checksum): "
			"lost segments could not be detected, the journal is refused", sc->dir);
	else
		set_err(sc->err, sc->errlen, "%s/" HEAD_NAME ": %s", sc->dir, strerror(-rc));
	return rc;
}

/* The live chain, newest first, back to a snapshot or the journal's first segment: each
 * header must name the segment listed before it.  On return p->segs holds it oldest first
 * and *start is the index in all[] it starts at. */
static int chain_collect(struct scan *sc, struct plan *p, const uint64_t *all, size_t na,
			 size_t *start)
{
	char name[SEG_NAME_LEN + 1];
	size_t filled = 0;
	uint64_t before = 0;    /* the segment listed before the one whose predecessor is wrong */
	int rc, found = 0;

	for (size_t i = na; i-- > 0 && !found;) {
		struct seg s = { .seq = all[i], .fd = -1 };

		rc = open_segment(sc, all[i], &s.fd);
		if (rc < 0)
			goto fail;
		rc = read_header(sc, all[i], s.fd, &s.hdr);
		if (rc < 0) {
			close(s.fd);
			goto fail;
		}
		if (filled > 0 && p->segs[filled - 1].hdr.prev != s.seq) {
			close(s.fd);
			before = s.seq;
			break;  /* reported below: the newer one's predecessor is missing */
		}
		p->segs[filled++] = s;
		*start = i;
		found = (s.hdr.flags & SEG_F_SNAPSHOT) != 0 || s.hdr.prev == 0;
	}
	if (filled > 0 && !found) {
		const struct seg *o = &p->segs[filled - 1];
		char what[96];
		seg_name(name, o->seq);
		if (before > o->hdr.prev)
			snprintf(what, sizeof what, "but segment %016" PRIx64 " comes before it", before);
		else
			snprintf(what, sizeof what, "which is missing");
		set_err(sc->err, sc->errlen, "%s/%s: offset 0: its header says it follows segment "
			"%016" PRIx64 ", %s: the journal is damaged (a segment was lost, duplicated or "
			"renumbered)", sc->dir, name, o->hdr.prev, what);
		rc = -EBADMSG;
		goto fail;
	}
	if (found && *start > 0 && !(p->segs[filled - 1].hdr.flags & SEG_F_SNAPSHOT)) {
		seg_name(name, p->segs[filled - 1].seq);
		set_err(sc->err, sc->errlen, "%s/%s: offset 0: its header says it is the journal's "
			"first segment, but older segments exist: the journal is damaged", sc->dir,
			name);
		rc = -EBADMSG;
		goto fail;
	}
	for (size_t a = 0, b = filled; a + 1 < b; a++, b--) {
		struct seg t = p->segs[a];
		p->segs[a] = p->segs[b - 1];
		p->segs[b - 1] = t;
	}
	p->n = filled;
	return 0;
fail:
	p->n = filled;
	return rc;
}

/* HEAD against the listing: its segment must exist, and if live it must be at least as long
 * as HEAD says.  Without HEAD only a journal whose creation was interrupted is accepted: one
 * first segment holding nothing but its header.  -EAGAIN (message set) when a concurrent
 * compaction may explain a missing segment: a scan without the lock lists again. */
static int head_check(struct scan *sc, struct plan *p, const uint64_t *all, size_t na)
{
	struct stat st;
	int present = 0;

	if (!sc->have_head) {
		if (na == 0 || sc->ignore_head)
			return 0;
		if (na == 1 && p->n == 1 && p->segs[0].hdr.prev == 0 &&
		    fstat(p->segs[0].fd, &st) == 0 && st.st_size == (off_t)SEG_HDR)
			return 0;
		set_err(sc->err, sc->errlen, "%s/" HEAD_NAME ": missing, but the journal has "
			"segments: lost segments could not be detected, the journal is refused",
			sc->dir);
		return -EBADMSG;
	}
	for (size_t i = 0; i < na; i++)
		present |= all[i] == sc->head.seq;
	if (!present) {
		set_err(sc->err, sc->errlen, "%s/" HEAD_NAME ": names segment %016" PRIx64
			".seg (%" PRIu64 " bytes, records up to number %" PRIu64 "), which is "
			"missing: the journal is damaged (its newest segment was lost)", sc->dir,
			sc->head.seq, sc->head.len, sc->head.lsn - 1);
		return sc->mutate ? -EBADMSG : -EAGAIN;
	}
	if (sc->head.seq > sc->max_seq)
		sc->max_seq = sc->head.seq;
	for (size_t i = 0; i < p->n; i++)
		if (p->segs[i].seq == sc->head.seq)
			p->segs[i].min_len = sc->head.len;
	return 0;
}

/* Decide which segments are live and check that they form one chain.  Every live segment is
 * opened here, before anything is replayed, so a concurrent compaction deleting files cannot
 * cut a replay short.  -ENOENT or -EAGAIN means the listing went stale under us (the caller
 * may list again). */
static int plan_build(struct scan *sc, struct plan *p)
{
	uint64_t *all = NULL;
	size_t na = 0, start = 0;
	int rc;

	memset(p, 0, sizeof *p);
	rc = head_load(sc);
	if (rc < 0)
		return rc;
	rc = list_segments(sc->dirfd, &all, &na);
	if (rc < 0)
		return rc;
	if (na > 0 && all[na - 1] > sc->max_seq)
		sc->max_seq = all[na - 1];
	p->segs = calloc(na ? na : 1, sizeof *p->segs);
	if (p->segs == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = chain_collect(sc, p, all, na, &start);
	if (rc == 0)
		rc = head_check(sc, p, all, na);
	if (rc < 0)
		goto fail;
	if (start > 0) {
		p->obsolete = malloc(start * sizeof *p->obsolete);
		if (p->obsolete == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
		memcpy(p->obsolete, all, start * sizeof *all);
		p->nobs = start;
	}
	free(all);
	return 0;

fail:
	plan_free(p);
	free(all);
	return rc;
}

/* Keep the cut bytes as a side file (durably) before the segment is shortened. */
static int cut_tail(struct scan *sc, struct seg *s, size_t off)
{
	char name[SEG_NAME_LEN + 1], tmp[SEG_NAME_LEN + 16], side[64];
	int fd = -1;
	int rc;

	seg_name(name, s->seq);
	snprintf(tmp, sizeof tmp, "%s.torn.tmp", name);
	fd = openat(sc->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	rc = io_pwrite_full(fd, s->buf + off, s->len - off, 0);
	if (rc == 0 && fdatasync(fd) < 0)
		rc = -errno;
	close(fd);
	fd = -1;
	if (rc == 0)
		rc = place_side_file(sc->dirfd, tmp, s->seq, off, side, sizeof side);
	if (rc < 0) {
		unlinkat(sc->dirfd, tmp, 0);
		return rc;
	}
	if (ftruncate(s->fd, (off_t)off) < 0 || fdatasync(s->fd) < 0)
		return -errno;
	scan_log(sc, "%s/%s: torn tail cut at offset %zu (%zu bytes kept in %s/%s)", sc->dir,
		 name, off, s->len - off, sc->dir, side);
	return 0;
}

/* One record of a snapshot segment's snapshot part.  It must open with BEGIN; END closes it
 * and must state the record count, byte length and CRC32C of everything from BEGIN to it. */
static int snap_step(struct scan *sc, const struct seg *s, size_t off, const struct rec *r,
		     int first, int *in_snap, int lead)
{
	char name[SEG_NAME_LEN + 1];
	const char *why = NULL;

	seg_name(name, s->seq);
	if (first && r->type != JOURNAL_SNAPSHOT_BEGIN) {
		why = "a snapshot segment must start with the snapshot's begin record";
	} else if (!first && r->type == JOURNAL_SNAPSHOT_BEGIN) {
		why = "a second snapshot begin record";
	} else if (r->type == JOURNAL_SNAPSHOT_END) {
		size_t span = off - SEG_HDR;
		if (r->len != 20 || get_le64(r->payload) != r->lsn - s->hdr.first_lsn - 1 ||
		    get_le64(r->payload + 8) != span ||
		    get_le32(r->payload + 16) != crc32c(0, s->buf + SEG_HDR, span))
			why = "the snapshot's end record does not match the snapshot (record count, "
			      "length or checksum)";
		*in_snap = 0;
		if (lead)
			sc->snap_bytes = off + REC_HDR + r->len;
	}
	if (why == NULL)
		return 0;
	set_err(sc->err, sc->errlen, "%s/%s: offset %zu: %s: the journal is damaged", sc->dir, name,
		off, why);
	return -EBADMSG;
}

/* Hand one valid record to the callback; its failure message gets file and offset. */
static int deliver(struct scan *sc, const char *name, size_t off, const struct rec *r)
{
	char msg[MSG_MAX];

	if (r->type >= JOURNAL_RESERVED_FIRST)
		return 0;   /* the journal's own: neither delivered nor counted */
	sc->records++;
	if (!sc->deliver || sc->cb == NULL)
		return 0;
	if (sc->cb(sc->arg, r->type, r->payload, r->len, sc->err, sc->errlen) == 0)
		return 0;
	msg[0] = '\0';
	if (sc->err != NULL && sc->errlen > 0)
		snprintf(msg, sizeof msg, "%s", sc->err);
	set_err(sc->err, sc->errlen, "%s/%s: offset %zu: %s", sc->dir, name, off,
		msg[0] ? msg : "replay stopped by the record handler");
	return -ECANCELED;
}

/* The walk stopped at off before the end of the newest segment: a torn tail (cut, or reported
 * by fsck) only past HEAD's mark and with no valid record after it; otherwise damage. */
static int tail_decide(struct scan *sc, struct seg *s, size_t off, int st, const char *name)
{
	if (off < s->min_len) {
		set_err(sc->err, sc->errlen, "%s/%s: offset %zu: %s before offset %" PRIu64 ", up to "
			"which HEAD records the segment as durable: the journal is damaged", sc->dir,
			name, off, rec_reason(st), s->min_len);
		return -EBADMSG;
	}
	int later = valid_after(s->buf, s->len, off);
	if (later < 0) {
		set_err(sc->err, sc->errlen, "%s/%s: offset %zu: %s", sc->dir, name, off,
			strerror(-later));
		return later;
	}
	if (later) {
		set_err(sc->err, sc->errlen,
			"%s/%s: offset %zu: %s, and valid records follow it: the journal is "
			"damaged (not a torn tail)", sc->dir, name, off, rec_reason(st));
		return -EBADMSG;
	}
	if (sc->mutate) {
		int rc = cut_tail(sc, s, off);
		if (rc < 0) {
			set_err(sc->err, sc->errlen, "%s/%s: offset %zu: cannot cut torn tail: %s",
				sc->dir, name, off, strerror(-rc));
			return rc;
		}
	} else if (sc->report_repairable && sc->finding[0] == '\0') {
		snprintf(sc->finding, sizeof sc->finding,
			 "%s/%s: offset %zu: torn tail of %zu bytes (%s; --repair or the next "
			 "start cuts it)", sc->dir, name, off, s->len - off, rec_reason(st));
	}
	/* Read-only: a torn tail may be a write in progress; the records before it stand. */
	return 0;
}

/* Walk one live segment: check each record's checksum and sequence number, deliver or count
 * it, verify a snapshot part, then classify whatever stops the walk.  sc->lsn is the number
 * the first record must carry; s->good ends at the last valid record. */
static int walk_segment(struct scan *sc, struct seg *s, int newest, int lead)
{
	char name[SEG_NAME_LEN + 1];
	int in_snap = (s->hdr.flags & SEG_F_SNAPSHOT) != 0;
	size_t off = SEG_HDR;
	struct rec r;
	int st = REC_OK, rc;

	seg_name(name, s->seq);
	if (s->len < SEG_HDR || s->hdr.first_lsn != sc->lsn) {
		set_err(sc->err, sc->errlen, "%s/%s: offset 0: the header says the first record is "
			"number %" PRIu64 ", but %" PRIu64 " comes next: the journal is damaged "
			"(records lost or duplicated)", sc->dir, name, s->hdr.first_lsn, sc->lsn);
		return -EBADMSG;
	}
	while (off < s->len) {
		st = rec_read(s->buf, s->len, off, 1, &r);
		if (st != REC_OK)
			break;
		if (r.lsn != sc->lsn) {
			set_err(sc->err, sc->errlen, "%s/%s: offset %zu: record number %" PRIu64
				" where %" PRIu64 " was expected: records were lost, duplicated or "
				"reordered, the journal is damaged", sc->dir, name, off, r.lsn,
				sc->lsn);
			return -EBADMSG;
		}
		if (in_snap && (rc = snap_step(sc, s, off, &r, off == SEG_HDR, &in_snap, lead)) < 0)
			return rc;
		if ((rc = deliver(sc, name, off, &r)) < 0)
			return rc;
		sc->lsn++;
		off += REC_HDR + r.len;
	}
	s->good = off;
	if (in_snap) {
		set_err(sc->err, sc->errlen, "%s/%s: offset %zu: %s inside a snapshot (a published "
			"snapshot is always complete): the journal is damaged", sc->dir, name, off,
			off == s->len ? "end of file" : rec_reason(st));
		return -EBADMSG;
	}
	if (off == s->len) {
		if (s->len >= s->min_len)
			return 0;
		set_err(sc->err, sc->errlen, "%s/%s: offset %zu: the segment ends here, but HEAD "
			"records %" PRIu64 " bytes of it as durable: records were lost (truncated), "
			"the journal is damaged", sc->dir, name, off, s->min_len);
		return -EBADMSG;
	}
	if (!newest) {
		set_err(sc->err, sc->errlen,
			"%s/%s: offset %zu: %s in a segment that is not the newest: the journal "
			"is damaged", sc->dir, name, off, rec_reason(st));
		return -EBADMSG;
	}
	return tail_decide(sc, s, off, st, name);
}

/* A sealed segment must have exactly the length its successor's header records. */
static int check_sealed(struct scan *sc, const struct seg *prev, const struct seg *s)
{
	char name[SEG_NAME_LEN + 1], next[SEG_NAME_LEN + 1];

	if (s->hdr.prev_len == prev->len)
		return 0;
	seg_name(name, prev->seq);
	seg_name(next, s->seq);
	set_err(sc->err, sc->errlen, "%s/%s: offset %zu: the segment ends here, but %s's header "
		"records it as sealed at %" PRIu64 " bytes: the journal is damaged (%s)", sc->dir,
		name, prev->len, next, s->hdr.prev_len,
		prev->len < s->hdr.prev_len ? "truncated" : "extended");
	return -EBADMSG;
}

static int plan_walk(struct scan *sc, struct plan *p)
{
	char name[SEG_NAME_LEN + 1];

	sc->lsn = p->n > 0 ? p->segs[0].hdr.first_lsn : 1;
	if (p->n > 0 && !(p->segs[0].hdr.flags & SEG_F_SNAPSHOT) && sc->lsn != 1) {
		seg_name(name, p->segs[0].seq);
		set_err(sc->err, sc->errlen, "%s/%s: offset 0: the journal's first segment starts at "
			"record %" PRIu64 ", not 1: the journal is damaged", sc->dir, name, sc->lsn);
		return -EBADMSG;
	}
	for (size_t i = 0; i < p->n; i++) {
		struct seg *s = &p->segs[i];
		int rc = seg_load(s);
		if (rc < 0) {
			seg_name(name, s->seq);
			set_err(sc->err, sc->errlen, "%s/%s: cannot read: %s", sc->dir, name,
				strerror(-rc));
			return rc;
		}
		if (i > 0 && (rc = check_sealed(sc, &p->segs[i - 1], s)) < 0)
			return rc;
		rc = walk_segment(sc, s, i + 1 == p->n, i == 0);
		seg_unload(s);
		if (rc < 0)
			return rc;
		sc->total += s->good;
	}
	if (sc->have_head && sc->lsn < sc->head.lsn) {
		set_err(sc->err, sc->errlen, "%s/" HEAD_NAME ": records up to number %" PRIu64 " were "
			"durable, but the journal ends after %" PRIu64 ": records were lost, the "
			"journal is damaged", sc->dir, sc->head.lsn - 1, sc->lsn - 1);
		return -EBADMSG;
	}
	return 0;
}

/* Segments before the snapshot the replay started from: their content is in the snapshot. */
static void delete_obsolete(struct scan *sc, const struct plan *p)
{
	char name[SEG_NAME_LEN + 1], first[SEG_NAME_LEN + 1];
	size_t removed = 0;

	if (p->nobs == 0 || p->n == 0)
		return;
	for (size_t i = 0; i < p->nobs; i++) {
		seg_name(name, p->obsolete[i]);
		if (unlinkat(sc->dirfd, name, 0) == 0)
			removed++;
	}
	if (removed > 0) {
		fsync(sc->dirfd);
		seg_name(first, p->segs[0].seq);
		scan_log(sc, "%s: removed %zu segment(s) older than the snapshot in %s", sc->dir,
			 removed, first);
	}
}

static void scan_setup(struct scan *sc, const char *dir, int dirfd, int writable, int mutate,
		       char *err, size_t errlen)
{
	memset(sc, 0, sizeof *sc);
	sc->dir = dir;
	sc->dirfd = dirfd;
	sc->writable = writable;
	sc->mutate = mutate;
	sc->err = err;
	sc->errlen = errlen;
}

/* Plan (listing again a few times if a concurrent compaction deleted files under us), then
 * walk. */
static int scan_run(struct scan *sc, struct plan *p)
{
	int rc;

	for (int attempt = 0;; attempt++) {
		if (sc->err != NULL && sc->errlen > 0)
			sc->err[0] = '\0';
		rc = plan_build(sc, p);
		if ((rc == -ENOENT || rc == -EAGAIN) && !sc->mutate && attempt < 4)
			continue;
		break;
	}
	if (rc == -EAGAIN)
		rc = -EBADMSG;
	if (rc < 0) {
		if (sc->err != NULL && sc->errlen > 0 && sc->err[0] == '\0')
			set_err(sc->err, sc->errlen, "%s: cannot read the journal: %s", sc->dir,
				strerror(-rc));
		return rc;
	}
	return plan_walk(sc, p);
}

/* ---- lock ------------------------------------------------------------------------------- */

/* One writer per state dir: two supervisors appending to one journal would interleave
 * records and each replay the other's as its own.  flock, not a pid file, holds the lock, so
 * a killed owner releases it with its last descriptor; the only wait is for a dead owner's
 * child that still holds the file (bounded at five seconds). */
static int lock_take(int dirfd, const char *state_dir, int *out, char *err, size_t errlen)
{
	char buf[32];
	int fd = openat(dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int rc;

	*out = -1;
	if (fd < 0) {
		rc = -errno;
		set_err(err, errlen, "%s/journal/" LOCK_NAME ": %s", state_dir, strerror(-rc));
		return rc;
	}
	int waited_ms = 0;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		rc = -errno;
		if (rc == -EWOULDBLOCK) {
			ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
			long pid = 0;
			buf[n > 0 ? n : 0] = '\0';
			pid = strtol(buf, NULL, 10);
			/* The owner is dead (killed) but a child it forked has not finished dying yet and
			 * still holds the lock's file: that lasts milliseconds, so wait for it. */
			if (pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH && waited_ms < 5000) {
				struct timespec ts = { 0, 20 * 1000000L };
				nanosleep(&ts, NULL);
				waited_ms += 20;
				continue;
			}
			if (pid > 0)
				set_err(err, errlen, "state dir %s is in use by another forkpoint "
					"(pid %ld)", state_dir, pid);
			else
				set_err(err, errlen, "state dir %s is in use by another forkpoint",
					state_dir);
			rc = -EBUSY;
		} else {
			set_err(err, errlen, "%s/journal/" LOCK_NAME ": cannot lock: %s",
				state_dir, strerror(-rc));
		}
		close(fd);
		return rc;
	}
	/* The pid is only for the message a second instance prints; the lock is the flock. */
	int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || io_pwrite_full(fd, buf, (size_t)n, 0) < 0) {
		rc = -errno;
		set_err(err, errlen, "%s/journal/" LOCK_NAME ": %s", state_dir, strerror(-rc));
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

/* Leftovers of an interrupted segment creation, compaction or tail cut. */
static void remove_temps(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *e;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (ends_with(e->d_name, ".tmp"))
			unlinkat(dirfd, e->d_name, 0);
	}
	closedir(d);
}

/* mkdir that survives a crash: the new entry is durable once its parent is fsynced. */
static int mkdir_durable(const char *path)
{
	char parent[PATH_MAX];
	char *slash;
	int fd, rc = 0;

	if (mkdir(path, 0700) < 0)
		return errno == EEXIST ? 0 : -errno;
	if ((size_t)snprintf(parent, sizeof parent, "%s", path) >= sizeof parent)
		return 0;
	slash = strrchr(parent, '/');
	if (slash == NULL)
		snprintf(parent, sizeof parent, ".");
	else if (slash == parent)
		parent[1] = '\0';
	else
		*slash = '\0';
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* Create the segment h describes atomically: header under a temp name, fdatasync, rename,
 * directory fsync.  With finish = 0 the temp file is left open and unnamed-in-place
 * (compaction fills it first); *fd gets the open descriptor either way. */
static int seg_create(struct journal *j, const struct seg_hdr *h, int finish, int *fd)
{
	char name[SEG_NAME_LEN + 1], tmp[SEG_NAME_LEN + 8];
	unsigned char hdr[SEG_HDR];
	int rc;

	seg_name(name, h->seq);
	snprintf(tmp, sizeof tmp, "%s.tmp", name);
	hdr_encode(hdr, h);
	*fd = openat(j->dirfd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*fd < 0)
		return -errno;
	rc = io_pwrite_full(*fd, hdr, sizeof hdr, 0);
	if (rc < 0 || !finish)
		goto out;
	if (fdatasync(*fd) < 0 || renameat(j->dirfd, tmp, j->dirfd, name) < 0) {
		rc = -errno;
		goto out;
	}
	if (fsync(j->dirfd) < 0) {
		/* The name may not survive a crash; nothing but the header is in it yet. */
		rc = -errno;
		unlinkat(j->dirfd, name, 0);
		close(*fd);
		*fd = -1;
		return rc;
	}
out:
	if (rc < 0) {
		close(*fd);
		*fd = -1;
		unlinkat(j->dirfd, tmp, 0);
	}
	return rc;
}

/* Doubling keeps appends amortised O(1) however many records one turn of the loop frames;
 * the overflow checks make an absurd size -ENOMEM instead of a short buffer. */
static int batch_reserve(struct journal *j, size_t more)
{
	if (j->bcap - j->blen >= more)
		return 0;
	size_t need = j->blen + more;
	if (need < j->blen)
		return -ENOMEM;
	size_t cap = j->bcap ? j->bcap : 4096;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	unsigned char *nb = realloc(j->batch, cap);
	if (nb == NULL)
		return -ENOMEM;
	j->batch = nb;
	j->bcap = cap;
	return 0;
}

/* Frame one record into the batch (snapshot markers included). */
static int batch_add(struct journal *j, uint8_t type, const void *payload, size_t len)
{
	int rc;

	if (j == NULL || (payload == NULL && len > 0))
		return -EINVAL;
	if (j->read_only)
		return -EROFS;
	if (len > JOURNAL_MAX_RECORD)
		return -EMSGSIZE;
	if (j->rw_err < 0)
		return j->rw_err;
	rc = batch_reserve(j, REC_HDR + len);
	if (rc < 0)
		return rc;
	unsigned char *p = j->batch + j->blen;
	put_le32(p, (uint32_t)len);
	put_le64(p + 8, j->lsn_next++);
	p[16] = type;
	if (len > 0)
		memcpy(p + REC_HDR, payload, len);
	put_le32(p + 4, rec_crc(p, len));
	j->blen += REC_HDR + len;

	/* A snapshot goes to a file no reader trusts until it is renamed: it can be written
	 * ahead without syncing, keeping memory bounded whatever the live state's size. */
	if (j->rw_active && j->blen >= REWRITE_SPILL) {
		j->rw_crc = crc32c(j->rw_crc, j->batch, j->blen);
		rc = io_pwrite_full(j->rw_fd, j->batch, j->blen, j->rw_off);
		if (rc < 0) {
			j->rw_err = rc;
			return rc;
		}
		j->rw_off += j->blen;
		j->blen = 0;
	}
	return 0;
}

int journal_append(struct journal *j, uint8_t type, const void *payload, size_t len)
{
	/* The reserved types are the journal's own: a stray marker would corrupt a snapshot. */
	if (type >= JOURNAL_RESERVED_FIRST)
		return -EINVAL;
	return batch_add(j, type, payload, len);
}

/* Record in HEAD how far the journal durably is.  A failure only weakens what the next open can
 * detect (HEAD still names an older, existing point), so callers may ignore it. */
static int mark_head(struct journal *j, uint32_t flags)
{
	struct head h = { .seq = j->seq, .len = j->off, .lsn = j->lsn_durable, .flags = flags };
	return head_write(j->dirfd, &h);
}

/* HEAD's interval is measured on the monotonic clock, so a wall-clock step neither floods
 * HEAD writes nor stops them. */
static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* After a commit: move HEAD forward if it is older than head_every_ms, bounding how many
 * committed records a crash followed by a cut at a record boundary could hide.  Costs one
 * small write, two syncs and a rename per interval, never per commit. */
static void head_maybe(struct journal *j)
{
	int64_t now = mono_ms();

	if (now - j->head_at_ms < (int64_t)j->head_every_ms)
		return;
	if (mark_head(j, 0) == 0)
		j->head_at_ms = now;
}

/* Seal the current segment by starting its successor, whose header records the current
 * segment's final length and the next sequence number. */
static int roll(struct journal *j)
{
	struct seg_hdr h = { .seq = j->next_seq, .prev = j->seq, .prev_len = j->off,
			     .first_lsn = j->lsn_durable };
	int nfd, rc = seg_create(j, &h, 1, &nfd);

	if (rc < 0)
		return rc;
	close(j->fd);
	j->fd = nfd;
	j->seq = j->next_seq++;
	j->off = SEG_HDR;
	j->total += SEG_HDR;
	mark_head(j, 0);   /* best effort: without it a lost new segment goes unnoticed */
	return 0;
}

/* 0 if j may commit or start a rewrite now, else why not.  Between rewrite_begin and
 * rewrite_end the batch belongs to the snapshot, which is not authoritative until renamed:
 * nothing can be made durable through it, and one rewrite runs at a time. */
static int may_write(const struct journal *j)
{
	if (j == NULL)
		return -EINVAL;
	if (j->read_only)
		return -EROFS;
	return j->rw_active ? -EBUSY : 0;
}

/* The group commit: every record framed since the last commit goes out in one write and one
 * fdatasync, and only then counts as durable (lsn_durable).  On failure the batch is kept,
 * so the next commit retries the same records, and the partial write is cut off so it never
 * sits in front of them; a truncate that fails too is retried first (tail_dirty).  A segment
 * is rolled before the write that would take it past segment_bytes, never split by one. */
int journal_commit(struct journal *j)
{
	int rc = may_write(j);

	if (rc < 0)
		return rc;
	if (j->tail_dirty) {
		if (ftruncate(j->fd, (off_t)j->off) < 0)
			return -errno;
		j->tail_dirty = 0;
	}
	if (j->blen == 0)
		return 0;
	if (j->off > SEG_HDR && j->off + j->blen > j->segment_bytes) {
		rc = roll(j);
		if (rc < 0)
			return rc;
	}
	rc = io_pwrite_full(j->fd, j->batch, j->blen, j->off);
	if (rc == 0 && fdatasync(j->fd) < 0)
		rc = -errno;
	if (rc < 0) {
		/* A partial batch must not stay in front of the next one. */
		if (ftruncate(j->fd, (off_t)j->off) < 0)
			j->tail_dirty = 1;
		return rc;
	}
	j->off += j->blen;
	j->total += j->blen;
	j->blen = 0;
	j->lsn_durable = j->lsn_next;
	head_maybe(j);
	return 0;
}

size_t journal_pending_bytes(const struct journal *j)
{
	return j != NULL ? j->blen : 0;
}

uint64_t journal_total_bytes(const struct journal *j)
{
	return j != NULL ? j->total : 0;
}

uint64_t journal_records_replayed(const struct journal *j)
{
	return j != NULL ? j->replayed : 0;
}

uint64_t journal_snapshot_bytes(const struct journal *j)
{
	return j != NULL ? j->snap_bytes : 0;
}

/* ---- compaction ------------------------------------------------------------------------- */

/* Undo a rewrite that cannot finish: the temp file goes and the numbers it took back, so the
 * live journal continues as if the rewrite never started. */
void journal_rewrite_abort(struct journal *j)
{
	char name[SEG_NAME_LEN + 1], tmp[SEG_NAME_LEN + 8];

	if (j == NULL || !j->rw_active)
		return;
	seg_name(name, j->rw_seq);
	snprintf(tmp, sizeof tmp, "%s.tmp", name);
	close(j->rw_fd);
	unlinkat(j->dirfd, tmp, 0);
	j->rw_fd = -1;
	j->rw_active = 0;
	j->rw_err = 0;
	j->blen = 0;
	j->lsn_next = j->rw_lsn;   /* the snapshot's numbers were never published */
}

/* Commits first, so the snapshot starts from a durable point and nothing pending is lost in
 * the switch; then the batch belongs to the snapshot until rewrite_end or abort. */
int journal_rewrite_begin(struct journal *j)
{
	int rc = may_write(j);

	if (rc < 0)
		return rc;
	rc = journal_commit(j);
	if (rc < 0)
		return rc;
	struct seg_hdr h = { .seq = j->next_seq, .prev = j->seq, .prev_len = j->off,
			     .first_lsn = j->lsn_durable, .flags = SEG_F_SNAPSHOT };
	rc = seg_create(j, &h, 0, &j->rw_fd);
	if (rc < 0)
		return rc;
	j->rw_seq = j->next_seq;
	j->rw_off = SEG_HDR;
	j->rw_lsn = j->lsn_next;
	j->rw_crc = 0;
	j->rw_err = 0;
	j->rw_active = 1;
	rc = batch_add(j, JOURNAL_SNAPSHOT_BEGIN, NULL, 0);
	if (rc < 0)
		journal_rewrite_abort(j);
	return rc;
}

/* Delete every segment older than the current one. */
static void delete_older(struct journal *j)
{
	uint64_t *all = NULL;
	size_t n = 0, removed = 0;
	char name[SEG_NAME_LEN + 1];

	if (list_segments(j->dirfd, &all, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (all[i] >= j->seq)
			break;
		seg_name(name, all[i]);
		if (unlinkat(j->dirfd, name, 0) == 0)
			removed++;
	}
	free(all);
	if (removed > 0)
		fsync(j->dirfd);
}

/* The order is the crash-safety argument: END marker, write, fdatasync, rename, fsync of the
 * directory, then HEAD, and only then the old segments go.  A crash at any step leaves either
 * the old segments or a complete, renamed snapshot that replay prefers. */
int journal_rewrite_end(struct journal *j)
{
	char name[SEG_NAME_LEN + 1], tmp[SEG_NAME_LEN + 8];
	int rc;

	if (j == NULL)
		return -EINVAL;
	if (!j->rw_active)
		return -EINVAL;
	rc = j->rw_err;
	if (rc == 0) {
		/* END states what it closes: record count, byte length and checksum of the
		 * snapshot from BEGIN on (what was spilled plus what is still batched). */
		unsigned char end[20];
		put_le64(end, j->lsn_next - j->rw_lsn - 1);
		put_le64(end + 8, j->rw_off - SEG_HDR + j->blen);
		put_le32(end + 16, crc32c(j->rw_crc, j->batch, j->blen));
		rc = batch_add(j, JOURNAL_SNAPSHOT_END, end, sizeof end);
	}
	if (rc == 0 && j->blen > 0)
		rc = io_pwrite_full(j->rw_fd, j->batch, j->blen, j->rw_off);
	if (rc == 0) {
		j->rw_off += j->blen;
		j->blen = 0;
		if (fdatasync(j->rw_fd) < 0)
			rc = -errno;
	}
	seg_name(name, j->rw_seq);
	snprintf(tmp, sizeof tmp, "%s.tmp", name);
	if (rc == 0 && renameat(j->dirfd, tmp, j->dirfd, name) < 0)
		rc = -errno;
	if (rc < 0) {
		journal_rewrite_abort(j);
		return rc;
	}

	/* Renamed: from here on the snapshot is the newest segment, so new records must go
	 * after it whatever happens next (older segments would be discarded at replay). */
	close(j->fd);
	j->fd = j->rw_fd;
	j->seq = j->rw_seq;
	j->off = j->rw_off;
	j->next_seq = j->rw_seq + 1;
	j->total = j->rw_off;
	j->snap_bytes = j->rw_off;
	j->lsn_durable = j->lsn_next;
	j->tail_dirty = 0;
	j->rw_fd = -1;
	j->rw_active = 0;
	if (fsync(j->dirfd) < 0)
		return -errno;   /* the rename may not be durable: keep the old segments */
	/* HEAD must name the snapshot before the segments it may name go: until then the next
	 * open deletes them itself. */
	if (mark_head(j, 0) == 0)
		delete_older(j);
	return 0;
}

/* ---- open / close -------------------------------------------------------------------------- */

/* Aborts a rewrite in progress rather than finishing it: the old segments are still whole. */
void journal_close(struct journal *j)
{
	if (j == NULL)
		return;
	journal_rewrite_abort(j);
	/* A clean close: HEAD then covers every committed record, so a later truncation of the
	 * newest segment at a record boundary is detected too. */
	if (!j->read_only && j->fd >= 0 && !j->tail_dirty)
		mark_head(j, HEAD_F_CLEAN);
	if (j->fd >= 0)
		close(j->fd);
	if (j->dirfd >= 0)
		close(j->dirfd);
	if (j->lockfd >= 0)
		close(j->lockfd);
	free(j->batch);
	free(j->dir);
	free(j);
}

/* After a writable replay: continue the newest segment (or create the first one), record the
 * point reached in HEAD, and only then delete segments older than the snapshot (HEAD may name
 * one of them until it is rewritten). */
static int open_position(struct journal *j, struct scan *sc, struct plan *p, char *err,
			 size_t errlen)
{
	int rc;

	if (p->n > 0) {
		struct seg *s = &p->segs[p->n - 1];
		j->fd = s->fd;
		s->fd = -1;
		j->seq = s->seq;
		j->off = s->good;
	} else {
		struct seg_hdr h = { .seq = j->next_seq, .first_lsn = 1 };
		rc = seg_create(j, &h, 1, &j->fd);
		if (rc < 0) {
			set_err(err, errlen, "%s: cannot create a segment: %s", j->dir,
				strerror(-rc));
			return rc;
		}
		j->seq = j->next_seq++;
		j->off = SEG_HDR;
		j->total = SEG_HDR;
	}
	if (j->seq >= j->next_seq)
		j->next_seq = j->seq + 1;
	rc = mark_head(j, 0);
	j->head_at_ms = mono_ms();
	if (rc == 0)
		delete_obsolete(sc, p);
	else
		scan_log(sc, "%s/" HEAD_NAME ": cannot update: %s (older segments are kept)", j->dir,
			 strerror(-rc));
	return 0;
}

int journal_open(const char *state_dir, const struct journal_opts *opts,
		 journal_record_cb cb, journal_log_cb log, void *arg,
		 struct journal **out, char *err, size_t errlen)
{
	struct journal *j = NULL;
	struct plan p = {0};
	struct scan sc;
	int rc;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (out == NULL || state_dir == NULL)
		return -EINVAL;
	*out = NULL;
	j = calloc(1, sizeof *j);
	if (j == NULL)
		return -ENOMEM;
	j->dirfd = j->lockfd = j->fd = j->rw_fd = -1;
	j->read_only = opts != NULL && opts->read_only;
	j->segment_bytes = opts != NULL && opts->segment_bytes > 0 ? opts->segment_bytes
								   : DEFAULT_SEGMENT_BYTES;
	j->head_every_ms = opts != NULL && opts->head_interval_ms > 0 ? opts->head_interval_ms
								      : HEAD_EVERY_MS;
	if (asprintf(&j->dir, "%s/" LAYOUT_JOURNAL, state_dir) < 0) {
		j->dir = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	if (!j->read_only) {
		rc = mkdir_durable(state_dir);
		if (rc == 0)
			rc = mkdir_durable(j->dir);
		if (rc < 0) {
			set_err(err, errlen, "%s: cannot create: %s", j->dir, strerror(-rc));
			goto fail;
		}
	}
	j->dirfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dirfd < 0) {
		rc = -errno;
		if (j->read_only && rc == -ENOENT) {
			*out = j;   /* nothing was ever written: an empty journal */
			return 0;
		}
		set_err(err, errlen, "%s: %s", j->dir, strerror(-rc));
		goto fail;
	}
	if (!j->read_only) {
		rc = lock_take(j->dirfd, state_dir, &j->lockfd, err, errlen);
		if (rc < 0)
			goto fail;
		remove_temps(j->dirfd);
	}

	scan_setup(&sc, j->dir, j->dirfd, !j->read_only, !j->read_only, err, errlen);
	sc.deliver = 1;
	sc.cb = cb;
	sc.log = log;
	sc.arg = arg;
	rc = scan_run(&sc, &p);
	if (rc < 0)
		goto fail;
	j->replayed = sc.records;
	j->total = sc.total;
	j->next_seq = sc.max_seq + 1;
	j->lsn_next = j->lsn_durable = sc.lsn;
	j->snap_bytes = sc.snap_bytes;

	if (!j->read_only) {
		rc = open_position(j, &sc, &p, err, errlen);
		if (rc < 0)
			goto fail;
	}
	plan_free(&p);
	*out = j;
	return 0;

fail:
	plan_free(&p);
	journal_close(j);
	return rc;
}

/* ---- fsck ------------------------------------------------------------------------------------ */

static void fsck_log(void *arg, const char *msg)
{
	struct { char *buf; size_t len; } *acc = arg;
	size_t used = strlen(acc->buf);

	if (acc->len == 0 || used + 3 >= acc->len)
		return;
	snprintf(acc->buf + used, acc->len - used, "%s%s", used ? "; " : "", msg);
}

/* fsck --new-head: record the chain as found in HEAD (after the operator cut a journal back
 * by hand); everything else about it was checked by the pass before. */
static int fsck_new_head(struct scan *sc, const struct plan *p, char *done, size_t len)
{
	size_t used = strlen(done);
	struct head h = { .lsn = sc->lsn };
	int rc;

	if (p->n == 0)
		return 0;
	h.seq = p->segs[p->n - 1].seq;
	h.len = p->segs[p->n - 1].good;
	rc = head_write(sc->dirfd, &h);
	if (rc < 0) {
		set_err(sc->err, sc->errlen, "%s/" HEAD_NAME ": cannot write: %s", sc->dir,
			strerror(-rc));
		return rc;
	}
	snprintf(done + used, len - used, "%s%s/" HEAD_NAME " rewritten: segment %016" PRIx64
		 ", %" PRIu64 " bytes, records up to number %" PRIu64, used ? "; " : "", sc->dir,
		 h.seq, h.len, h.lsn - 1);
	return 0;
}

int journal_fsck(const char *state_dir, int repair, uint64_t *records, char *err, size_t errlen)
{
	char dir[PATH_MAX], done[2 * MSG_MAX] = "";
	struct { char *buf; size_t len; } acc = { done, sizeof done };
	struct plan p = {0};
	struct scan sc;
	int dirfd = -1, lockfd = -1;
	int rc;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (records != NULL)
		*records = 0;
	if (state_dir == NULL)
		return -EINVAL;
	if ((size_t)snprintf(dir, sizeof dir, "%s/" LAYOUT_JOURNAL, state_dir) >= sizeof dir)
		return -ENAMETOOLONG;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		set_err(err, errlen, "%s: %s", dir, strerror(-rc));
		return rc;
	}
	/* Repairs must not race a running supervisor; a check alone takes no lock (a live
	 * supervisor's batch in flight may then show as a torn tail). */
	if (repair) {
		rc = lock_take(dirfd, state_dir, &lockfd, err, errlen);
		if (rc < 0)
			goto out;
	}

	/* First a dry run: repair nothing if anything else is wrong. */
	scan_setup(&sc, dir, dirfd, repair != 0, 0, err, errlen);
	sc.report_repairable = 1;
	sc.ignore_head = repair == JOURNAL_FSCK_NEW_HEAD;
	rc = scan_run(&sc, &p);
	plan_free(&p);
	if (records != NULL)
		*records = sc.records;
	if (rc < 0)
		goto out;
	if (sc.finding[0] == '\0' && repair != JOURNAL_FSCK_NEW_HEAD) {
		rc = 0;
		goto out;
	}
	if (!repair) {
		set_err(err, errlen, "%s", sc.finding);
		rc = -EBADMSG;
		goto out;
	}

	scan_setup(&sc, dir, dirfd, 1, 1, err, errlen);
	sc.ignore_head = repair == JOURNAL_FSCK_NEW_HEAD;
	sc.log = fsck_log;
	sc.arg = &acc;
	rc = scan_run(&sc, &p);
	if (rc == 0 && sc.ignore_head)
		rc = fsck_new_head(&sc, &p, done, sizeof done);
	plan_free(&p);
	if (rc < 0)
		goto out;
	if (records != NULL)
		*records = sc.records;
	set_err(err, errlen, "%s", done);

out:
	if (lockfd >= 0)
		close(lockfd);
	close(dirfd);
	return rc;
}
