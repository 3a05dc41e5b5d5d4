/* tests/unit/test_journal.c — the journal: round trips, group commit, segment roll, torn tails
 * cut at every byte offset of the last records, damage refused with file and offset, fsck,
 * snapshots (including a crash between rename and delete), the single-writer lock, a failing
 * write truncated back, every damage fixture against open and fsck (same verdict, file and
 * offset), what is accepted and what cannot be detected, SIGKILL of a writer that rolls and
 * compacts constantly, and replay speed.
 * Files are built and damaged with this file's own encoder, so the on-disk format is checked
 * against journal.h independently of journal.c.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "state/journal.h"
#include "state/crc32c.h"
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- files ------------------------------------------------------------------------------- */

static void seg_path(char *buf, size_t len, const char *state, uint64_t seq)
{
	snprintf(buf, len, "%s/journal/%016" PRIx64 ".seg", state, seq);
}

static int read_file(const char *path, unsigned char **data, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;

	*data = NULL;
	*len = 0;
	if (f == NULL)
		return -1;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	*data = malloc((size_t)n + 1);
	if (*data == NULL || fread(*data, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(*data);
		*data = NULL;
		return -1;
	}
	fclose(f);
	*len = (size_t)n;
	return 0;
}

static int write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (f == NULL)
		return -1;
	ok = fwrite(data, 1, len, f) == len;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Names in <state>/journal that start with prefix and end with suffix. */
static int count_names(const char *state, const char *prefix, const char *suffix)
{
	char dir[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(dir, sizeof dir, "%s/journal", state);
	d = opendir(dir);
	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name), ls = strlen(suffix);
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && l >= ls &&
		    strcmp(e->d_name + l - ls, suffix) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static int count_segments(const char *state)
{
	return count_names(state, "", ".seg");
}

/* Lowest and highest segment numbers present. */
static void seg_range(const char *state, uint64_t *lo, uint64_t *hi)
{
	char dir[PATH_MAX];
	struct dirent *e;
	DIR *d;

	*lo = UINT64_MAX;
	*hi = 0;
	snprintf(dir, sizeof dir, "%s/journal", state);
	d = opendir(dir);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strlen(e->d_name) != 20 || strcmp(e->d_name + 16, ".seg") != 0)
			continue;
		uint64_t v = strtoull(e->d_name, NULL, 16);
		if (v < *lo)
			*lo = v;
		if (v > *hi)
			*hi = v;
	}
	closedir(d);
}

static long total_seg_bytes(const char *state)
{
	uint64_t lo, hi;
	long sum = 0;
	char p[PATH_MAX];

	seg_range(state, &lo, &hi);
	for (uint64_t s = lo; lo != UINT64_MAX && s <= hi; s++) {
		seg_path(p, sizeof p, state, s);
		long n = file_size(p);
		if (n > 0)
			sum += n;
	}
	return sum;
}

/* ---- records: a deterministic generator and an independent encoder ------------------------ */

#define PAYLOAD_MAX 1024

/* Record `id`: type 1..7, 0..60 bytes, every 13th one 500 bytes longer. */
static size_t make_record(uint64_t id, uint8_t *type, unsigned char *buf)
{
	uint64_t s = id * 0x9E3779B97F4A7C15ull + 1;
	size_t len = (size_t)(id % 61) + (id % 13 == 0 ? 500 : 0);

	*type = (uint8_t)(1 + id % 7);
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)check_rand(&s);
	return len;
}

static uint32_t fingerprint(uint8_t type, const void *p, size_t len)
{
	return crc32c(crc32c(0, &type, 1), p, len) ^ (uint32_t)len * 2654435761u;
}

static int append_ids(struct journal *j, uint64_t first, uint64_t n)
{
	unsigned char buf[PAYLOAD_MAX];
	uint8_t type;

	for (uint64_t id = first; id < first + n; id++) {
		size_t len = make_record(id, &type, buf);
		int rc = journal_append(j, type, buf, len);
		if (rc < 0)
			return rc;
	}
	return 0;
}

#define HDR 48       /* segment header */
#define RH  17       /* record header */

static void le_put(unsigned char *out, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		out[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t le_get(const unsigned char *p, int bytes)
{
	uint64_t v = 0;
	for (int i = bytes; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* Give the record at rec (already laid out) its checksum, as journal.h describes it. */
static void seal_record(unsigned char *rec)
{
	uint32_t len = (uint32_t)le_get(rec, 4);
	le_put(rec + 4, crc32c_mask(crc32c(0, rec + 8, 9 + (size_t)len)), 4);
}


/* Record boundaries of a segment image, by walking the length fields (no checksum). */
static size_t boundaries(const unsigned char *buf, size_t len, size_t *out, size_t max)
{
	size_t n = 0, off = HDR;

	while (off + RH <= len && n < max) {
		uint32_t l = (uint32_t)le_get(buf + off, 4);
		if (off + RH + l > len)
			break;
		out[n++] = off;
		off += RH + l;
	}
	if (n < max)
		out[n] = off;   /* end of the last complete record */
	return n;
}

/* ---- what replay delivered ------------------------------------------------------------------ */

struct got {
	uint32_t *fp;
	size_t n, cap;
	int stop_at;            /* -1: never */
	const char *stop_msg;
	size_t max_len;
	size_t unknown;         /* records with types outside 1..9 */
};

static int collect(void *arg, uint8_t type, const void *payload, size_t len, char *err,
		   size_t errlen)
{
	struct got *g = arg;

	if (g->stop_at >= 0 && (size_t)g->stop_at == g->n) {
		if (g->stop_msg != NULL)
			snprintf(err, errlen, "%s", g->stop_msg);
		return -1;
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 1024;
		uint32_t *v = realloc(g->fp, cap * sizeof *v);
		if (v == NULL)
			return -1;
		g->fp = v;
		g->cap = cap;
	}
	if (type == 0 || type > 9)
		g->unknown++;
	if (len > g->max_len)
		g->max_len = len;
	g->fp[g->n++] = fingerprint(type, payload, len);
	return 0;
}

static void got_reset(struct got *g)
{
	free(g->fp);
	memset(g, 0, sizeof *g);
	g->stop_at = -1;
}

/* Does g hold, from position `at`, exactly the records first..first+n-1? */
static int got_ids(const struct got *g, size_t at, uint64_t first, uint64_t n)
{
	unsigned char buf[PAYLOAD_MAX];
	uint8_t type;

	if (g->n < at + n)
		return 0;
	for (uint64_t i = 0; i < n; i++) {
		size_t len = make_record(first + i, &type, buf);
		if (g->fp[at + i] != fingerprint(type, buf, len))
			return 0;
	}
	return 1;
}

struct logs {
	int count;
	char last[512];
};

static void log_msg(void *arg, const char *msg)
{
	struct logs *l = arg;
	l->count++;
	snprintf(l->last, sizeof l->last, "%s", msg);
}

/* One callback argument for both the records and the log lines. */
struct sink {
	struct got got;
	struct logs logs;
};

static int sink_rec(void *arg, uint8_t type, const void *payload, size_t len, char *err,
		    size_t errlen)
{
	return collect(&((struct sink *)arg)->got, type, payload, len, err, errlen);
}

static void sink_log(void *arg, const char *msg)
{
	log_msg(&((struct sink *)arg)->logs, msg);
}

static void sink_reset(struct sink *s)
{
	got_reset(&s->got);
	memset(&s->logs, 0, sizeof s->logs);
}

static int open_j(const char *state, int ro, uint64_t seg_bytes, struct sink *s,
		  struct journal **j, char *err, size_t errlen)
{
	struct journal_opts o = { .read_only = ro, .segment_bytes = seg_bytes };
	sink_reset(s);
	return journal_open(state, &o, sink_rec, sink_log, s, j, err, errlen);
}

/* A journal of n records (ids 0..n-1) committed `per` at a time.  clean = 1 closes it;
 * clean = 0 leaves it as a crash right after the last commit does (a child process writes
 * it and exits without closing), so HEAD records only what the open, rolls and compactions
 * did. */
static int build_as(const char *state, uint64_t n, uint64_t per, uint64_t seg_bytes, int clean)
{
	int status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct sink s = {0};
		struct journal *j;
		char err[512];
		int rc = open_j(state, 0, seg_bytes, &s, &j, err, sizeof err);
		for (uint64_t i = 0; i < n && rc == 0; i += per) {
			rc = append_ids(j, i, n - i < per ? n - i : per);
			if (rc == 0)
				rc = journal_commit(j);
		}
		if (rc == 0 && clean)
			journal_close(j);
		_exit(rc == 0 ? 0 : 1);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int build(const char *state, uint64_t n, uint64_t per, uint64_t seg_bytes)
{
	return build_as(state, n, per, seg_bytes, 0);
}

/* HEAD as it is now, to be put back later: the state a crash after the writes in between
 * leaves (HEAD is only rewritten at open, roll, compaction and clean close). */
struct saved_head {
	unsigned char *b;
	size_t n;
};

static void head_save(const char *state, struct saved_head *h)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/journal/HEAD", state);
	free(h->b);
	read_file(path, &h->b, &h->n);
}

static void head_restore(const char *state, const struct saved_head *h)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/journal/HEAD", state);
	write_file(path, h->b, h->n);
}

/* ---- tests ------------------------------------------------------------------------------------ */

static void test_round_trip(struct tally *t)
{
	char state[256], err[512], path[PATH_MAX];
	struct sink s = {0};
	struct journal *j = NULL;
	struct stat st;
	int rc;

	check_tmpdir(state, sizeof state, "journal");
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && j != NULL, "open a fresh state dir for writing");
	if (rc < 0)
		goto out;
	CHECK(t, journal_records_replayed(j) == 0 && s.got.n == 0, "a fresh journal replays nothing");
	snprintf(path, sizeof path, "%s/journal", state);
	CHECK(t, stat(path, &st) == 0 && (st.st_mode & 0777) == 0700, "journal/ is created 0700");
	CHECK(t, count_segments(state) == 1, "the first segment exists from the start");

	CHECK(t, append_ids(j, 0, 100) == 0, "append 100 records");
	CHECK(t, journal_pending_bytes(j) > 0, "appended records are pending");
	CHECK(t, journal_commit(j) == 0 && journal_pending_bytes(j) == 0, "commit empties the batch");
	CHECK(t, journal_commit(j) == 0, "commit with nothing pending is a no-op");

	/* A 1 MiB record and records of unknown types. */
	unsigned char *big = malloc(1u << 20);
	memset(big, 0xab, 1u << 20);
	rc = journal_append(j, 8, big, 1u << 20);
	free(big);
	CHECK(t, rc == 0, "append a 1 MiB record");
	CHECK(t, journal_append(j, 0, "zero", 4) == 0 && journal_append(j, 0xEE, "", 0) == 0,
	      "append records of types 0 and 0xEE");
	CHECK(t, journal_commit(j) == 0, "commit them");
	CHECK(t, journal_total_bytes(j) == (uint64_t)total_seg_bytes(state),
	      "journal_total_bytes equals the bytes on disk");
	CHECK(t, append_ids(j, 100, 10) == 0, "append 10 more without committing");
	journal_close(j);
	j = NULL;

	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0, "reopen");
	CHECK(t, s.got.n == 103 && journal_records_replayed(j) == 103,
	      "reopen replays exactly the committed records (uncommitted ones are gone)");
	CHECK(t, got_ids(&s.got, 0, 0, 100), "records come back in order, byte for byte");
	CHECK(t, s.got.max_len == (1u << 20), "the 1 MiB record comes back whole");
	CHECK(t, s.got.unknown == 2, "unknown record types are passed to the callback");
	CHECK(t, s.logs.count == 0, "a clean open logs nothing");
	journal_close(j);
	j = NULL;

	rc = open_j(state, 1, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 103, "a read-only open replays the same records");
	CHECK(t, journal_append(j, 1, "x", 1) == -EROFS && journal_commit(j) == -EROFS,
	      "a read-only journal refuses appends and commits");
	journal_close(j);
	j = NULL;
out:
	got_reset(&s.got);
	check_rm_rf(state);
}

static void test_misc_api(struct tally *t)
{
	char state[256], missing[300], err[512];
	struct sink s = {0};
	struct journal *j = NULL;
	int rc;

	check_tmpdir(state, sizeof state, "journal");
	snprintf(missing, sizeof missing, "%s/nope", state);
	rc = open_j(missing, 1, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && j != NULL && s.got.n == 0, "read-only open of a missing state dir is empty");
	journal_close(j);
	j = NULL;
	CHECK(t, access(missing, F_OK) != 0, "... and creates nothing");

	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0, "open for writing");
	if (rc < 0)
		goto out;
	CHECK(t, journal_append(j, 1, "x", (size_t)JOURNAL_MAX_RECORD + 1) == -EMSGSIZE,
	      "a record above JOURNAL_MAX_RECORD is refused");
	CHECK(t, journal_append(j, JOURNAL_SNAPSHOT_BEGIN, "", 0) == -EINVAL &&
	      journal_append(j, JOURNAL_SNAPSHOT_END, "", 0) == -EINVAL,
	      "the snapshot marker types are reserved");
	CHECK(t, journal_pending_bytes(j) == 0, "refused appends leave nothing pending");
	CHECK(t, append_ids(j, 0, 20) == 0 && journal_commit(j) == 0, "commit 20 records");
	journal_close(j);
	j = NULL;

	/* Callback stops the replay. */
	struct journal_opts o = {0};
	sink_reset(&s);
	s.got.stop_at = 5;
	s.got.stop_msg = "record 5 is not acceptable";
	rc = journal_open(state, &o, sink_rec, sink_log, &s, &j, err, sizeof err);
	CHECK(t, rc == -ECANCELED && j == NULL, "a callback returning -1 stops the open (-ECANCELED)");
	CHECK(t, strstr(err, ": record 5 is not acceptable") != NULL &&
	      strstr(err, "0000000000000001.seg: offset ") != NULL,
	      "... with the callback's message after the file and offset");
	sink_reset(&s);
	s.got.stop_at = 3;
	rc = journal_open(state, &o, sink_rec, sink_log, &s, &j, err, sizeof err);
	CHECK(t, rc == -ECANCELED && strstr(err, "offset") != NULL,
	      "without a message from the callback, err names file and offset");
	rc = journal_open(state, &o, NULL, NULL, NULL, &j, err, sizeof err);
	CHECK(t, rc == 0 && journal_records_replayed(j) == 20, "a NULL callback still verifies and counts");
	journal_close(j);
	j = NULL;

	/* Leftover temp files of an interrupted segment creation. */
	char tmp[PATH_MAX + 64];
	snprintf(tmp, sizeof tmp, "%s/journal/00000000000000aa.seg.tmp", state);
	write_file(tmp, "junk", 4);
	rc = open_j(state, 1, 0, &s, &j, err, sizeof err);
	journal_close(j);
	j = NULL;
	CHECK(t, rc == 0 && access(tmp, F_OK) == 0, "a read-only open leaves temp files alone");
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	journal_close(j);
	j = NULL;
	CHECK(t, rc == 0 && access(tmp, F_OK) != 0, "a writable open removes leftover temp files");
	CHECK(t, s.got.n == 20, "... and replays the journal normally");
out:
	got_reset(&s.got);
	check_rm_rf(state);
}

static void test_group_commit_and_roll(struct tally *t)
{
	char state[256], err[512], path[PATH_MAX];
	struct sink s = {0};
	struct journal *j = NULL;
	uint64_t lo, hi;
	int rc, oversize = 0;

	check_tmpdir(state, sizeof state, "journal");
	rc = build(state, 20000, 100, 0);
	CHECK(t, rc == 0, "20000 records in 200 group commits");
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 20000 && got_ids(&s.got, 0, 0, 20000),
	      "all 20000 come back in order");
	journal_close(j);
	j = NULL;
	check_rm_rf(state);

	check_tmpdir(state, sizeof state, "journal");
	rc = build(state, 3000, 10, 4096);
	CHECK(t, rc == 0, "3000 records, 4 KiB segments");
	CHECK(t, count_segments(state) > 5, "the journal rolled over to new segments");
	seg_range(state, &lo, &hi);
	CHECK(t, lo == 1 && hi == (uint64_t)count_segments(state), "segments are numbered 1..n");
	for (uint64_t q = lo; q <= hi; q++) {
		seg_path(path, sizeof path, state, q);
		/* A single batch (10 records) is at most ~6 KiB; only then may a segment pass. */
		if (file_size(path) > 4096 + 10 * (RH + 560))
			oversize++;
	}
	CHECK(t, oversize == 0, "no segment grows past its size by more than one batch");
	rc = open_j(state, 1, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 3000 && got_ids(&s.got, 0, 0, 3000),
	      "read-only replay across segments is complete and in order");
	journal_close(j);
	j = NULL;
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 3000, "writable replay across segments");
	CHECK(t, journal_total_bytes(j) == (uint64_t)total_seg_bytes(state),
	      "journal_total_bytes counts every live segment");
	CHECK(t, append_ids(j, 3000, 5) == 0 && journal_commit(j) == 0, "append after reopen");
	journal_close(j);
	j = NULL;
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 3005 && got_ids(&s.got, 0, 0, 3005),
	      "records appended after a reopen follow the old ones");
	journal_close(j);
	check_rm_rf(state);
	got_reset(&s.got);
}

/* Truncate the newest segment at every byte offset within its last three records. */
static void test_torn_every_offset(struct tally *t)
{
	char state[256], err[512], path[PATH_MAX], side[PATH_MAX + 64];
	struct sink s = {0};
	struct journal *j = NULL;
	unsigned char *orig = NULL, *now = NULL;
	size_t olen = 0, nlen, bounds[4096];
	uint64_t lo, hi;
	int bad_open = 0, bad_count = 0, bad_size = 0, bad_side = 0, bad_reopen = 0, bad_ro = 0;
	int cases = 0, cuts = 0;

	check_tmpdir(state, sizeof state, "journal");
	if (build(state, 400, 7, 4096) < 0) {
		CHECK(t, 0, "build the torn-tail journal");
		goto out;
	}
	seg_range(state, &lo, &hi);
	CHECK(t, hi > lo, "the torn-tail journal has older segments");
	seg_path(path, sizeof path, state, hi);
	read_file(path, &orig, &olen);
	size_t nrec = boundaries(orig, olen, bounds, 4095);
	CHECK(t, nrec >= 4 && bounds[nrec] == olen, "the newest segment has at least 4 records");
	if (nrec < 4)
		goto out;
	uint64_t before = 400 - nrec;   /* records in older segments */
	struct saved_head hs = {0};
	head_save(state, &hs);

	for (size_t cut = bounds[nrec - 3]; cut <= olen; cut++) {
		size_t complete = 0;
		while (complete < nrec && bounds[complete + 1] <= cut)
			complete++;
		size_t keep = bounds[complete];
		cases++;

		write_file(path, orig, cut);
		head_restore(state, &hs);
		/* Read-only first: sees the same records, changes nothing. */
		if (open_j(state, 1, 4096, &s, &j, err, sizeof err) != 0 ||
		    s.got.n != before + complete || file_size(path) != (long)cut)
			bad_ro++;
		journal_close(j);
		j = NULL;

		if (open_j(state, 0, 4096, &s, &j, err, sizeof err) != 0) {
			bad_open++;
			printf("# cut at %zu: %s\n", cut, err);
			continue;
		}
		journal_close(j);
		j = NULL;
		if (s.got.n != before + complete || !got_ids(&s.got, 0, 0, before + complete))
			bad_count++;
		if (file_size(path) != (long)keep)
			bad_size++;
		snprintf(side, sizeof side, "%s/journal/torn-%016" PRIx64 "-%zu.bin", state, hi, keep);
		if (cut != keep) {
			cuts++;
			if (read_file(side, &now, &nlen) != 0 || nlen != cut - keep ||
			    memcmp(now, orig + keep, nlen) != 0 || s.logs.count != 1 ||
			    strstr(s.logs.last, "torn tail") == NULL)
				bad_side++;
			free(now);
			now = NULL;
		} else if (access(side, F_OK) == 0 || s.logs.count != 0) {
			bad_side++;
		}
		unlink(side);
		/* The cut is final: a second open finds a clean journal. */
		if (open_j(state, 0, 4096, &s, &j, err, sizeof err) != 0 || s.logs.count != 0 ||
		    s.got.n != before + complete)
			bad_reopen++;
		journal_close(j);
		j = NULL;
	}
	printf("# %d truncation points, %d of them inside a record\n", cases, cuts);
	CHECK(t, cases > 30 && cuts > 27, "truncation points cover the last three records");
	CHECK(t, bad_ro == 0, "read-only open: tolerates every torn tail, cuts nothing");
	CHECK(t, bad_open == 0, "writable open succeeds at every truncation point");
	CHECK(t, bad_count == 0, "exactly the complete records are kept, in order");
	CHECK(t, bad_size == 0, "the segment is cut back to the end of the last complete record");
	CHECK(t, bad_side == 0, "the cut bytes are kept in torn-<segment>-<offset>.bin and logged");
	CHECK(t, bad_reopen == 0, "after the cut the journal reopens clean");

	/* The writer continues after a cut, and what it writes replays. */
	write_file(path, orig, olen - 3);
	head_restore(state, &hs);
	if (open_j(state, 0, 4096, &s, &j, err, sizeof err) == 0) {
		CHECK(t, append_ids(j, 5000, 3) == 0 && journal_commit(j) == 0, "append after a cut");
		journal_close(j);
		j = NULL;
		int rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
		CHECK(t, rc == 0 && s.got.n == 402 && got_ids(&s.got, 0, 0, 399) &&
		      got_ids(&s.got, 399, 5000, 3), "records written after a cut replay after the survivors");
		journal_close(j);
		j = NULL;
	} else {
		CHECK(t, 0, "open after a 3-byte truncation");
	}
	free(hs.b);
out:
	free(orig);
	got_reset(&s.got);
	check_rm_rf(state);
}

static void test_damage(struct tally *t)
{
	char state[256], err[512], path[PATH_MAX], want[128];
	struct sink s = {0};
	struct journal *j = NULL;
	unsigned char *orig = NULL, *copy = NULL;
	size_t olen = 0, bounds[4096];
	uint64_t lo, hi, nrec_fsck = 0;
	int rc;

	check_tmpdir(state, sizeof state, "journal");
	if (build(state, 400, 7, 4096) < 0) {
		CHECK(t, 0, "build the damage journal");
		goto out;
	}
	seg_range(state, &lo, &hi);

	/* A flipped bit in the middle of the oldest segment. */
	seg_path(path, sizeof path, state, lo);
	read_file(path, &orig, &olen);
	size_t n = boundaries(orig, olen, bounds, 4095);
	size_t victim = bounds[n / 2];
	copy = malloc(olen);
	memcpy(copy, orig, olen);
	copy[victim + RH + (bounds[n / 2 + 1] - victim - RH) / 2] ^= 0x10;
	if (bounds[n / 2 + 1] - victim == RH)   /* empty payload: flip the type byte instead */
		copy[victim + 16] ^= 0x10;
	write_file(path, copy, olen);
	snprintf(want, sizeof want, "%016" PRIx64 ".seg: offset %zu:", lo, victim);

	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == -EBADMSG && j == NULL, "a flipped bit in an older segment: open refused");
	CHECK(t, strstr(err, want) != NULL, "the message names the file and the offset");
	printf("# %s\n", err);
	CHECK(t, file_size(path) == (long)olen && count_names(state, "torn-", ".bin") == 0,
	      "nothing is cut or set aside");
	rc = open_j(state, 1, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == -EBADMSG && strstr(err, want) != NULL, "read-only open refuses it too");
	rc = journal_fsck(state, 0, &nrec_fsck, err, sizeof err);
	CHECK(t, rc == -EBADMSG && strstr(err, want) != NULL, "fsck reports it with file and offset");
	rc = journal_fsck(state, 1, &nrec_fsck, err, sizeof err);
	CHECK(t, rc == -EBADMSG && file_size(path) == (long)olen,
	      "fsck --repair does not touch damage outside the torn tail");
	CHECK(t, strstr(err, "not the newest") != NULL, "... and says the segment is not the newest");

	/* Damage in the last record of an older segment is no torn tail either. */
	memcpy(copy, orig, olen);
	copy[bounds[n - 1] + 8] ^= 0x01;
	write_file(path, copy, olen);
	snprintf(want, sizeof want, "%016" PRIx64 ".seg: offset %zu:", lo, bounds[n - 1]);
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == -EBADMSG && strstr(err, want) != NULL && file_size(path) == (long)olen,
	      "a bad last record of an older segment is refused, not cut");
	memcpy(copy, orig, olen);
	write_file(path, copy, olen - 1);
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == -EBADMSG && file_size(path) == (long)olen - 1,
	      "a short older segment is refused, not cut");
	write_file(path, orig, olen);
	free(orig);
	free(copy);
	orig = copy = NULL;

	/* Bad header on an older segment. */
	read_file(path, &orig, &olen);
	orig[3] ^= 1;
	write_file(path, orig, olen);
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == -EBADMSG && strstr(err, "header") != NULL, "a damaged segment header is refused");
	orig[3] ^= 1;
	write_file(path, orig, olen);
	free(orig);
	orig = NULL;

	/* A flipped bit in a record of the newest segment that is not its last. */
	seg_path(path, sizeof path, state, hi);
	read_file(path, &orig, &olen);
	n = boundaries(orig, olen, bounds, 4095);
	copy = malloc(olen);
	memcpy(copy, orig, olen);
	victim = bounds[n - 3];
	copy[victim + 8] ^= 0x04;   /* type byte: covered by the checksum */
	write_file(path, copy, olen);
	snprintf(want, sizeof want, "%016" PRIx64 ".seg: offset %zu:", hi, victim);
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == -EBADMSG && strstr(err, want) != NULL && strstr(err, "valid records follow"),
	      "a flipped bit before valid records of the newest segment: refused, named");
	CHECK(t, file_size(path) == (long)olen, "... and the segment is left as it was");
	rc = open_j(state, 1, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == -EBADMSG, "read-only open refuses it too");

	/* In the very last record it cannot be told from a torn write: it is cut. */
	memcpy(copy, orig, olen);
	copy[bounds[n - 1] + 8] ^= 0x04;
	write_file(path, copy, olen);
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 399 && file_size(path) == (long)bounds[n - 1],
	      "a flipped bit in the last record is a torn tail: cut, the rest replays");
	journal_close(j);
	j = NULL;
	CHECK(t, count_names(state, "torn-", ".bin") == 1, "... kept in a side file");
out:
	free(orig);
	free(copy);
	got_reset(&s.got);
	check_rm_rf(state);
}

/* Deciding "torn or damaged" must stay fast on big tails and still find big valid records. */
static void test_big_tails(struct tally *t)
{
	char state[256], err[512], path[PATH_MAX];
	struct sink s = {0};
	struct journal *j = NULL;
	const size_t sizes[] = { 4095, 4096, 4097, 70001, (1u << 20) + 3 };
	const size_t big = 16u << 20;
	unsigned char *rnd = malloc(big);
	uint64_t seed = 7, lo, hi;
	struct saved_head hs = {0};
	int refused = 0, rc;

	for (size_t i = 0; i < big; i++)
		rnd[i] = (unsigned char)check_rand(&seed);

	/* A damaged small record followed by a valid big one is damage, whatever the size. */
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		check_tmpdir(state, sizeof state, "journal");
		build(state, 20, 5, 0);
		rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
		if (rc == 0) {
			head_save(state, &hs);
			journal_append(j, 1, "small record", 12);
			journal_append(j, 2, rnd + k, sizes[k]);
			journal_commit(j);
			journal_close(j);
			j = NULL;
			head_restore(state, &hs);
		}
		seg_range(state, &lo, &hi);
		seg_path(path, sizeof path, state, hi);
		unsigned char *img;
		size_t len;
		read_file(path, &img, &len);
		size_t small_at = len - sizes[k] - RH - 12 - RH;
		img[small_at + RH + 3] ^= 0x20;
		write_file(path, img, len);
		free(img);
		rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
		if (rc == -EBADMSG && strstr(err, "valid records follow") != NULL)
			refused++;
		else
			printf("# valid %zu-byte record after a bad one: rc %d %s\n", sizes[k], rc, err);
		journal_close(j);
		j = NULL;
		check_rm_rf(state);
	}
	CHECK(t, refused == (int)(sizeof sizes / sizeof *sizes),
	      "a valid record of 4095 B .. 1 MiB after a bad one is found: refused as damage");

	/* A 16 MiB record torn in the middle: its payload is scanned for records quickly (a
	 * direct checksum per candidate offset would take many seconds here). */
	check_tmpdir(state, sizeof state, "journal");
	build(state, 20, 5, 0);
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	if (rc == 0) {
		head_save(state, &hs);
		journal_append(j, 2, rnd, big);
		journal_commit(j);
		journal_close(j);
		j = NULL;
		head_restore(state, &hs);
	}
	seg_range(state, &lo, &hi);
	seg_path(path, sizeof path, state, hi);
	long full = file_size(path);
	CHECK(t, truncate(path, full - (long)big / 2) == 0, "tear a 16 MiB record in the middle");
	double t0 = check_now();
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	double took = check_now() - t0;
	journal_close(j);
	j = NULL;
	printf("# torn 16 MiB record: recovery took %.3f s\n", took);
	CHECK(t, rc == 0 && s.got.n == 20 && file_size(path) == full - (long)big - RH,
	      "the torn 16 MiB record is cut, the 20 records before it stay");
	CHECK(t, took < 2.0, "... in well under the time a direct scan would take");

	/* 16 MiB of random bytes after the last record. */
	full = file_size(path);
	FILE *f = fopen(path, "ab");
	if (f != NULL) {
		fwrite(rnd, 1, big, f);
		fclose(f);
	}
	t0 = check_now();
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	took = check_now() - t0;
	journal_close(j);
	j = NULL;
	printf("# 16 MiB random tail: recovery took %.3f s\n", took);
	CHECK(t, rc == 0 && s.got.n == 20 && file_size(path) == full && took < 2.0,
	      "a 16 MiB random tail is cut quickly");
	check_rm_rf(state);
	free(rnd);
	free(hs.b);
	got_reset(&s.got);
}

static void test_fsck(struct tally *t)
{
	char state[256], err[512], path[PATH_MAX], missing[300];
	struct sink s = {0};
	struct journal *j = NULL;
	uint64_t lo, hi, nrec = 0;
	long size;
	int rc;

	check_tmpdir(state, sizeof state, "journal");
	snprintf(missing, sizeof missing, "%s/none", state);
	CHECK(t, journal_fsck(missing, 0, &nrec, err, sizeof err) == 0 && nrec == 0,
	      "fsck of a state dir without a journal is clean");
	build(state, 300, 10, 4096);
	rc = journal_fsck(state, 0, &nrec, err, sizeof err);
	CHECK(t, rc == 0 && nrec == 300, "fsck of a clean journal: 0 and every record counted");
	struct saved_head hs = {0};
	head_save(state, &hs);

	seg_range(state, &lo, &hi);
	seg_path(path, sizeof path, state, hi);
	size = file_size(path);
	CHECK(t, truncate(path, size - 5) == 0, "tear the tail");
	rc = journal_fsck(state, 0, &nrec, err, sizeof err);
	CHECK(t, rc == -EBADMSG && strstr(err, "torn tail") != NULL && nrec == 299,
	      "fsck reports a torn tail and counts the valid records");
	printf("# %s\n", err);
	CHECK(t, file_size(path) == size - 5 && count_names(state, "torn-", ".bin") == 0,
	      "fsck without --repair changes nothing");

	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0, "open for writing");
	rc = journal_fsck(state, 1, &nrec, err, sizeof err);
	CHECK(t, rc == -EBUSY && strstr(err, "in use") != NULL, "fsck --repair refuses a journal in use");
	journal_close(j);
	j = NULL;
	/* That open already cut the tail; tear it again for the repair (as after a crash). */
	size = file_size(path);
	CHECK(t, truncate(path, size - 2) == 0, "tear the tail again");
	head_restore(state, &hs);
	free(hs.b);

	rc = journal_fsck(state, 1, &nrec, err, sizeof err);
	CHECK(t, rc == 0 && strstr(err, "torn tail cut") != NULL, "fsck --repair cuts the torn tail");
	printf("# %s\n", err);
	CHECK(t, count_names(state, "torn-", ".bin") == 2, "... keeping the bytes in a side file");
	rc = journal_fsck(state, 0, &nrec, err, sizeof err);
	CHECK(t, rc == 0 && nrec == 298, "fsck is clean afterwards");
	got_reset(&s.got);
	check_rm_rf(state);
}

static void test_snapshot(struct tally *t)
{
	char state[256], err[512], path[PATH_MAX];
	struct sink s = {0};
	struct journal *j = NULL;
	uint64_t lo, hi, lo2, hi2;
	unsigned char *saved[64] = {0};
	size_t saved_len[64] = {0};
	int rc;

	check_tmpdir(state, sizeof state, "journal");
	build(state, 300, 10, 4096);
	seg_range(state, &lo, &hi);
	CHECK(t, hi - lo >= 3 && hi - lo < 60, "several segments before the snapshot");
	for (uint64_t q = lo; q <= hi; q++) {
		seg_path(path, sizeof path, state, q);
		read_file(path, &saved[q - lo], &saved_len[q - lo]);
	}

	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 300, "open before compaction");
	if (rc < 0)
		goto out;
	CHECK(t, journal_rewrite_begin(j) == 0, "rewrite_begin");
	CHECK(t, append_ids(j, 100000, 10) == 0, "append the live state (10 records)");
	CHECK(t, journal_commit(j) == -EBUSY, "commit is refused while a snapshot is being written");
	CHECK(t, journal_rewrite_begin(j) == -EBUSY, "a second rewrite_begin is refused");
	CHECK(t, journal_rewrite_end(j) == 0, "rewrite_end");
	seg_range(state, &lo2, &hi2);
	CHECK(t, lo2 == hi2 && hi2 == hi + 1, "only the snapshot segment is left, numbered after the old ones");
	CHECK(t, count_names(state, "", ".tmp") == 0, "no temp file is left");
	CHECK(t, journal_total_bytes(j) == (uint64_t)total_seg_bytes(state),
	      "journal_total_bytes shrinks to the snapshot");
	CHECK(t, append_ids(j, 300, 10) == 0 && journal_commit(j) == 0, "append after the snapshot");
	journal_close(j);
	j = NULL;

	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 20 && got_ids(&s.got, 0, 100000, 10) &&
	      got_ids(&s.got, 10, 300, 10), "reopen replays the snapshot then the later records");
	journal_close(j);
	j = NULL;

	/* Crash between the rename and the deletion: the old segments are back. */
	for (uint64_t q = lo; q <= hi; q++) {
		seg_path(path, sizeof path, state, q);
		write_file(path, saved[q - lo], saved_len[q - lo]);
	}
	rc = open_j(state, 1, 4096, &s, &j, err, sizeof err);
	journal_close(j);
	j = NULL;
	CHECK(t, rc == 0 && s.got.n == 20 && got_ids(&s.got, 0, 100000, 10),
	      "old segments still present: read-only replay starts at the snapshot");
	CHECK(t, count_segments(state) == (int)(hi - lo) + 2, "... and deletes nothing");
	rc = journal_fsck(state, 0, NULL, err, sizeof err);
	CHECK(t, rc == 0, "fsck ignores obsolete segments");
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 20 && got_ids(&s.got, 0, 100000, 10) &&
	      got_ids(&s.got, 10, 300, 10), "writable replay starts at the snapshot");
	CHECK(t, count_segments(state) == 1 && s.logs.count == 1 && strstr(s.logs.last, "removed"),
	      "... and removes the obsolete segments (logged)");

	/* Abandoned compaction. */
	CHECK(t, journal_rewrite_begin(j) == 0 && append_ids(j, 200000, 5) == 0,
	      "start another snapshot");
	journal_rewrite_abort(j);
	CHECK(t, count_names(state, "", ".tmp") == 0 && count_segments(state) == 1,
	      "rewrite_abort removes the temp segment");
	CHECK(t, append_ids(j, 310, 2) == 0 && journal_commit(j) == 0, "commit works after an abort");
	journal_close(j);
	j = NULL;
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 22 && got_ids(&s.got, 20, 310, 2),
	      "the abandoned snapshot left no trace in the replay");
	journal_close(j);
	j = NULL;
out:
	for (int i = 0; i < 64; i++)
		free(saved[i]);
	got_reset(&s.got);
	check_rm_rf(state);
}

/* A snapshot larger than the spill threshold goes through the temp file in pieces. */
static void test_big_snapshot(struct tally *t)
{
	char state[256], err[512];
	struct sink s = {0};
	struct journal *j = NULL;
	unsigned char *rec = calloc(1, 1000);
	size_t max_pending = 0;
	int rc, bad = 0;

	check_tmpdir(state, sizeof state, "journal");
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	if (rc < 0 || rec == NULL) {
		CHECK(t, 0, "open for the big snapshot");
		goto out;
	}
	CHECK(t, journal_rewrite_begin(j) == 0, "rewrite_begin");
	for (int i = 0; i < 8000; i++) {
		memcpy(rec, &i, sizeof i);
		if (journal_append(j, 3, rec, 1000) < 0)
			bad++;
		if (journal_pending_bytes(j) > max_pending)
			max_pending = journal_pending_bytes(j);
	}
	CHECK(t, bad == 0 && max_pending < (5u << 20), "an 8 MB snapshot never holds more than ~4 MiB in memory");
	CHECK(t, journal_rewrite_end(j) == 0, "rewrite_end");
	journal_close(j);
	j = NULL;
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 8000, "all 8000 snapshot records replay");
	journal_close(j);
out:
	free(rec);
	got_reset(&s.got);
	check_rm_rf(state);
}

/* ---- damage fixtures: every case against open and fsck ------------------------------------- */

/* Base journals, written by the real writer in a child that exits without closing (a crash):
 *   'M' 300 records in 4 KiB segments, a compaction (a 60-record snapshot), 300 more records,
 *       so the live chain is snapshot S, then S+1 .. N;
 *   'O' a compaction of 200 records and 3 records after it: the only segment is a snapshot;
 *   'C' as 'M', closed cleanly (HEAD then covers every record). */
static int base_build(const char *state, char kind)
{
	int status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		struct sink s = {0};
		struct journal *j;
		char err[512];
		int rc = open_j(state, 0, kind == 'O' ? 0 : 4096, &s, &j, err, sizeof err);
		uint64_t before = kind == 'O' ? 0 : 300;
		for (uint64_t i = 0; i < before && rc == 0; i += 10)
			if ((rc = append_ids(j, i, 10)) == 0)
				rc = journal_commit(j);
		if (rc == 0)
			rc = journal_rewrite_begin(j);
		if (rc == 0)
			rc = append_ids(j, 100000, kind == 'O' ? 200 : 60);
		if (rc == 0)
			rc = journal_rewrite_end(j);
		uint64_t after = kind == 'O' ? 3 : 300;
		for (uint64_t i = 0; i < after && rc == 0; i += (kind == 'O' ? 1 : 10))
			if ((rc = append_ids(j, 1000 + i, kind == 'O' ? 1 : 10)) == 0)
				rc = journal_commit(j);
		if (rc == 0 && kind == 'C')
			journal_close(j);
		_exit(rc == 0 ? 0 : 1);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* A checksum of every file in journal/ (names, sizes, contents): "nothing was changed". */
static uint32_t dir_print(const char *state)
{
	char dir[PATH_MAX], path[PATH_MAX + 300];
	uint32_t sum = 0;
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof dir, "%s/journal", state);
	d = opendir(dir);
	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		unsigned char *b;
		size_t n;
		if (e->d_name[0] == '.' || strcmp(e->d_name, "LOCK") == 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (read_file(path, &b, &n) < 0)
			continue;
		sum ^= crc32c(crc32c(0, e->d_name, strlen(e->d_name)), b, n) + (uint32_t)n;
		free(b);
	}
	closedir(d);
	return sum;
}

/* Where a message points: "<segment>.seg@<offset>" or "HEAD", for comparing verdicts. */
static void where(const char *msg, char *out, size_t len)
{
	const char *seg = strstr(msg, ".seg");
	const char *off = strstr(msg, "offset ");

	if (seg != NULL && seg - msg >= 16 && off != NULL)
		snprintf(out, len, "%.16s@%lld", seg - 16, strtoll(off + 7, NULL, 10));
	else if (strstr(msg, "/HEAD") != NULL)
		snprintf(out, len, "HEAD");
	else
		snprintf(out, len, "?");
}

static int damage_file(const char *state, uint64_t seq, long at, const void *bytes, size_t n,
		       int xor_bit)
{
	char path[PATH_MAX];
	unsigned char *img;
	size_t len;

	seg_path(path, sizeof path, state, seq);
	if (read_file(path, &img, &len) < 0)
		return -1;
	if (at < 0)
		at += (long)len;
	if ((size_t)at + n > len) {
		free(img);
		return -1;
	}
	if (xor_bit)
		img[at] ^= 0x08;
	else
		memcpy(img + at, bytes, n);
	int rc = write_file(path, img, len);
	free(img);
	return rc;
}

/* Offset of record k (negative: from the end) in segment seq, or -1. */
static long record_at(const char *state, uint64_t seq, long k, long *end)
{
	char path[PATH_MAX];
	unsigned char *img;
	size_t len, b[4096];

	seg_path(path, sizeof path, state, seq);
	if (read_file(path, &img, &len) < 0)
		return -1;
	size_t n = boundaries(img, len, b, 4095);
	free(img);
	if (k < 0)
		k += (long)n;
	if (k < 0 || (size_t)k >= n)
		return -1;
	if (end != NULL)
		*end = (long)b[k + 1];
	return (long)b[k];
}

enum verdict { REFUSE, REPAIR, ACCEPT };

struct fixture {
	const char *name;
	char base;
	enum verdict expect;
};

static const struct fixture fixtures[] = {
	{ "bit flip in an older segment", 'M', REFUSE },
	{ "zero page in an older segment", 'M', REFUSE },
	{ "zeroed bytes inside the newest segment", 'M', REFUSE },
	{ "truncation inside a record of an older segment", 'M', REFUSE },
	{ "truncation at a record boundary of an older segment", 'M', REFUSE },
	{ "truncation at a record boundary of the newest segment after a clean close", 'C', REFUSE },
	{ "truncation inside the last record of the newest segment (torn tail)", 'M', REPAIR },
	{ "missing segment in the middle", 'M', REFUSE },
	{ "missing newest segment", 'M', REFUSE },
	{ "missing snapshot segment", 'M', REFUSE },
	{ "duplicated segment after the newest", 'M', REFUSE },
	{ "a segment overwritten by a copy of its predecessor", 'M', REFUSE },
	{ "renumbered segment", 'M', REFUSE },
	{ "a record renumbered (checksum recomputed)", 'M', REFUSE },
	{ "bit flip in the snapshot of an older segment", 'M', REFUSE },
	{ "snapshot end record forged (checksum recomputed)", 'M', REFUSE },
	{ "bit flip in the snapshot of the only segment", 'O', REFUSE },
	{ "zero page in the snapshot of the only segment", 'O', REFUSE },
	{ "truncation inside the snapshot of the only segment", 'O', REFUSE },
	{ "torn tail after the snapshot of the only segment", 'O', REPAIR },
	{ "bit flip in the snapshot of the newest segment (older ones still present)", 'N', REFUSE },
	{ "HEAD missing", 'M', REFUSE },
	{ "HEAD damaged", 'M', REFUSE },
	{ "segment of the previous format", 'M', REFUSE },
};

/* Apply fixture i to a fresh base journal.  lo = the snapshot segment, hi = the newest. */
static int fixture_apply(const char *state, size_t i, uint64_t lo, uint64_t hi)
{
	static const unsigned char zeros[4096];
	char a[PATH_MAX], b[PATH_MAX];
	unsigned char *img;
	size_t len;
	long off, end;

	switch (i) {
	case 0:
		off = record_at(state, lo + 1, 3, &end);
		return damage_file(state, lo + 1, (off + end) / 2, NULL, 1, 1);
	case 1:
		return damage_file(state, lo + 1, 1024, zeros, 1024, 0);
	case 2:
		off = record_at(state, hi, 1, NULL);
		return damage_file(state, hi, off, zeros, 40, 0);
	case 3:
		seg_path(a, sizeof a, state, lo + 1);
		return truncate(a, file_size(a) - 5);
	case 4:
	case 5: {
		uint64_t q = i == 4 ? lo + 1 : hi;
		seg_path(a, sizeof a, state, q);
		return truncate(a, record_at(state, q, -1, NULL));
	}
	case 6:
		seg_path(a, sizeof a, state, hi);
		return truncate(a, file_size(a) - 3);
	case 7:
		seg_path(a, sizeof a, state, lo + 2);
		return unlink(a);
	case 8:
		seg_path(a, sizeof a, state, hi);
		return unlink(a);
	case 9:
		seg_path(a, sizeof a, state, lo);
		return unlink(a);
	case 10:
	case 11:
		seg_path(a, sizeof a, state, lo + 1);
		seg_path(b, sizeof b, state, i == 10 ? hi + 1 : lo + 2);
		if (read_file(a, &img, &len) < 0)
			return -1;
		write_file(b, img, len);
		free(img);
		return 0;
	case 12:
		seg_path(a, sizeof a, state, lo + 2);
		seg_path(b, sizeof b, state, hi + 1);
		return rename(a, b);
	case 13:
		seg_path(a, sizeof a, state, lo + 1);
		off = record_at(state, lo + 1, 2, NULL);
		if (read_file(a, &img, &len) < 0)
			return -1;
		img[off + 8] ^= 1;
		seal_record(img + off);
		write_file(a, img, len);
		free(img);
		return 0;
	case 14:
	case 16:
		off = record_at(state, lo, 10, &end);
		return damage_file(state, lo, (off + end) / 2, NULL, 1, 1);
	case 15:
		seg_path(a, sizeof a, state, lo);
		off = record_at(state, lo, 61, NULL);   /* BEGIN, 60 records, END */
		if (off < 0 || read_file(a, &img, &len) < 0)
			return -1;
		img[off + RH] ^= 1;                     /* the record count */
		seal_record(img + off);
		write_file(a, img, len);
		free(img);
		return 0;
	case 17:
		return damage_file(state, lo, 2048, zeros, 4096, 0);
	case 18:
		seg_path(a, sizeof a, state, lo);
		return truncate(a, file_size(a) / 2);
	case 19:
		seg_path(a, sizeof a, state, lo);
		return truncate(a, file_size(a) - 2);
	case 20:
		off = record_at(state, hi, 30, &end);
		return damage_file(state, hi, (off + end) / 2, NULL, 1, 1);
	case 21:
	case 22:
		snprintf(a, sizeof a, "%s/journal/HEAD", state);
		if (i == 21)
			return unlink(a);
		if (read_file(a, &img, &len) < 0)
			return -1;
		img[20] ^= 0x40;
		write_file(a, img, len);
		free(img);
		return 0;
	case 23:
		return damage_file(state, hi, 0, "FPJRNL01", 8, 0);
	}
	return -1;
}

/* 'N': the 'O' journal with copies of older segments put back, as if a crash came between
 * the snapshot's rename and the deletion of what it replaced. */
static int base_n(const char *state, uint64_t *lo, uint64_t *hi)
{
	char other[256], a[PATH_MAX], b[PATH_MAX];
	uint64_t olo, ohi;
	int rc;

	check_tmpdir(other, sizeof other, "journal");
	rc = build(other, 200, 10, 4096);
	seg_range(other, &olo, &ohi);
	if (rc == 0)
		rc = base_build(state, 'O');
	seg_range(state, lo, hi);
	/* Renumber the older journal's segments below the snapshot: headers name themselves, so
	 * rewrite them (they are obsolete, never read, but must not be mistaken for live). */
	for (uint64_t q = olo; rc == 0 && q <= ohi && q < *lo; q++) {
		seg_path(a, sizeof a, other, q);
		seg_path(b, sizeof b, state, q);
		rc = rename(a, b);
	}
	check_rm_rf(other);
	return rc;
}

static void test_fixtures(struct tally *t)
{
	int bad = 0;

	for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
		const struct fixture *f = &fixtures[i];
		char state[256], ef[512] = "", eo[512] = "", er[512] = "", wf[64], wo[64];
		struct sink s = {0};
		struct journal *j = NULL;
		uint64_t lo = 0, hi = 0, nf = 0;
		int rc;

		check_tmpdir(state, sizeof state, "journal");
		rc = f->base == 'N' ? base_n(state, &lo, &hi)
				    : base_build(state, f->base == 'O' ? 'O' : f->base);
		if (f->base != 'N')
			seg_range(state, &lo, &hi);
		if (f->base == 'M' || f->base == 'C')
			for (uint64_t q = lo; q <= hi; q++) {   /* the snapshot is the lowest live one */
				char p[PATH_MAX];
				seg_path(p, sizeof p, state, q);
				(void)p;
			}
		if (rc == 0)
			rc = fixture_apply(state, i, lo, hi);
		if (rc != 0) {
			CHECK(t, 0, f->name);
			check_rm_rf(state);
			continue;
		}
		uint32_t before = dir_print(state);
		int rf = journal_fsck(state, 0, &nf, ef, sizeof ef);
		int rro = open_j(state, 1, 4096, &s, &j, eo, sizeof eo);
		journal_close(j);
		j = NULL;
		int ro = open_j(state, 0, 4096, &s, &j, eo, sizeof eo);
		uint64_t got = s.got.n;
		journal_close(j);
		j = NULL;
		where(ef, wf, sizeof wf);
		where(ro == 0 ? s.logs.last : eo, wo, sizeof wo);
		int ok;
		if (f->expect == REFUSE) {
			uint32_t after_open = dir_print(state);
			int rr = journal_fsck(state, 1, NULL, er, sizeof er);
			ok = rf < 0 && rro < 0 && ro < 0 && rr < 0 && strcmp(wf, wo) == 0 &&
			     wf[0] != '?' && after_open == before && dir_print(state) == before;
		} else {
			ok = rf == -EBADMSG && strstr(ef, "torn tail") != NULL && rro == 0 &&
			     ro == 0 && strstr(s.logs.last, "torn tail cut") != NULL &&
			     strcmp(wf, wo) == 0 && got == nf;
		}
		printf("# %-75s fsck: %s\n#   start-up: %s\n", f->name, ef, ro == 0 ? s.logs.last : eo);
		if (!ok) {
			bad++;
			printf("#   MISMATCH: fsck %d at %s, read-only %d, open %d at %s\n", rf, wf, rro,
			       ro, wo);
		}
		CHECK(t, ok, f->name);
		got_reset(&s.got);
		check_rm_rf(state);
	}
	CHECK(t, bad == 0, "every damage fixture: start-up and fsck agree on verdict, file and offset");
}

/* What is accepted: an interrupted creation (one header-only segment, no HEAD), leftovers of
 * an interrupted compaction (.tmp files), and, documented as undetectable, records committed
 * after the last HEAD update cut at a record boundary after a crash. */
static void test_accepted(struct tally *t)
{
	char state[256], err[512], path[PATH_MAX];
	struct sink s = {0};
	struct journal *j = NULL;
	uint64_t lo, hi;
	int rc;

	check_tmpdir(state, sizeof state, "journal");
	CHECK(t, build(state, 0, 1, 0) == 0, "create an empty journal");
	snprintf(path, sizeof path, "%s/journal/HEAD", state);
	CHECK(t, unlink(path) == 0, "remove HEAD (a crash right after the first segment)");
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 0 && access(path, F_OK) == 0,
	      "a header-only first segment without HEAD opens, HEAD is written");
	journal_close(j);
	j = NULL;
	check_rm_rf(state);

	check_tmpdir(state, sizeof state, "journal");
	base_build(state, 'M');
	seg_range(state, &lo, &hi);
	seg_path(path, sizeof path, state, hi + 1);
	strcat(path, ".tmp");
	write_file(path, "FPJRNL02 unfinished snapshot", 28);
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 360 && access(path, F_OK) != 0,
	      "an interrupted compaction (never renamed) is removed; the journal replays whole");
	journal_close(j);
	j = NULL;
	check_rm_rf(state);

	check_tmpdir(state, sizeof state, "journal");
	base_build(state, 'M');
	seg_range(state, &lo, &hi);
	seg_path(path, sizeof path, state, hi);
	long cut = record_at(state, hi, -1, NULL);
	CHECK(t, cut > 48 && truncate(path, cut) == 0, "cut the newest segment at a record boundary");
	rc = journal_fsck(state, 0, NULL, err, sizeof err);
	int rc2 = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && rc2 == 0 && s.got.n == 359,
	      "after a crash, a cut at a boundary past HEAD is not detectable (documented)");
	journal_close(j);
	j = NULL;
	got_reset(&s.got);
	check_rm_rf(state);

	/* With HEAD moved forward after every commit (head_interval_ms = 1), the same cut after
	 * a crash is detected: the window of undetectable loss is that interval. */
	check_tmpdir(state, sizeof state, "journal");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct journal_opts o = { .segment_bytes = 4096, .head_interval_ms = 1 };
		struct timespec ms = { 0, 2000000 };
		rc = journal_open(state, &o, NULL, NULL, NULL, &j, err, sizeof err);
		for (uint64_t i = 0; i < 100 && rc == 0; i += 10) {
			nanosleep(&ms, NULL);   /* let the interval pass: the point of the test */
			if ((rc = append_ids(j, i, 10)) == 0)
				rc = journal_commit(j);
		}
		_exit(rc == 0 ? 0 : 1);   /* a crash: no clean close */
	}
	int status = 0;
	waitpid(pid, &status, 0);
	seg_range(state, &lo, &hi);
	seg_path(path, sizeof path, state, hi);
	cut = record_at(state, hi, -1, NULL);
	CHECK(t, WIFEXITED(status) && WEXITSTATUS(status) == 0 && cut > 48 &&
	      truncate(path, cut) == 0, "a journal whose HEAD follows every commit, cut at a boundary");
	rc = journal_fsck(state, 0, NULL, err, sizeof err);
	rc2 = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == -EBADMSG && rc2 == -EBADMSG && strstr(err, "HEAD records"),
	      "... is refused by fsck and start-up: HEAD bounds the undetectable window");
	check_rm_rf(state);

	/* An operator cuts a journal back by hand: refused until fsck --new-head records it. */
	check_tmpdir(state, sizeof state, "journal");
	base_build(state, 'C');
	seg_range(state, &lo, &hi);
	seg_path(path, sizeof path, state, hi);
	cut = record_at(state, hi, 2, NULL);
	CHECK(t, cut > 48 && truncate(path, cut) == 0, "cut a cleanly closed journal back by hand");
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == -EBADMSG && strstr(err, "HEAD records"), "start-up refuses it");
	rc = journal_fsck(state, 1, NULL, err, sizeof err);
	CHECK(t, rc == -EBADMSG, "fsck --repair does not accept the loss");
	rc = journal_fsck(state, JOURNAL_FSCK_NEW_HEAD, NULL, err, sizeof err);
	CHECK(t, rc == 0 && strstr(err, "HEAD rewritten"), "fsck --new-head records the journal as it is");
	printf("# %s\n", err);
	rc = open_j(state, 0, 4096, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n > 60 && s.got.n < 360, "... and start-up opens what is left");
	journal_close(j);
	j = NULL;
	check_rm_rf(state);

	/* --new-head rebuilds HEAD only: other damage stays refused. */
	check_tmpdir(state, sizeof state, "journal");
	base_build(state, 'M');
	seg_range(state, &lo, &hi);
	long a = record_at(state, lo + 1, 2, NULL);
	damage_file(state, lo + 1, a + RH + 1, NULL, 1, 1);
	rc = journal_fsck(state, JOURNAL_FSCK_NEW_HEAD, NULL, err, sizeof err);
	CHECK(t, rc == -EBADMSG && strstr(err, "offset"), "fsck --new-head still refuses a bit flip");
	got_reset(&s.got);
	check_rm_rf(state);

	/* A whole journal of the previous format is refused with a clear message. */
	check_tmpdir(state, sizeof state, "journal");
	snprintf(path, sizeof path, "%s/journal", state);
	mkdir(path, 0700);
	seg_path(path, sizeof path, state, 1);
	write_file(path, "FPJRNL01\x01\0\0\0\0\0\0\0", 16);
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, rc < 0 && strstr(err, "older forkpoint") != NULL && file_size(path) == 16,
	      "a journal of the previous format is refused, untouched");
	printf("# %s\n", err);
	check_rm_rf(state);
}

/* journal_snapshot_bytes: what a compaction threshold is relative to, across reopens. */
static void test_snapshot_bytes(struct tally *t)
{
	char state[256], err[512];
	struct sink s = {0};
	struct journal *j = NULL;

	check_tmpdir(state, sizeof state, "journal");
	base_build(state, 'M');
	open_j(state, 0, 4096, &s, &j, err, sizeof err);
	uint64_t sb = journal_snapshot_bytes(j), total = journal_total_bytes(j);
	printf("# snapshot %" PRIu64 " bytes, journal %" PRIu64 " bytes\n", sb, total);
	CHECK(t, sb > 48 && sb < 8192 && total > 5 * sb,
	      "after a reopen, journal_snapshot_bytes is the snapshot's size, not the journal's");
	journal_close(j);
	j = NULL;
	got_reset(&s.got);
	check_rm_rf(state);
	check_tmpdir(state, sizeof state, "journal");
	build(state, 100, 10, 0);
	open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, journal_snapshot_bytes(j) == 0, "a journal never compacted has no snapshot bytes");
	journal_close(j);
	got_reset(&s.got);
	check_rm_rf(state);
}

static void test_lock(struct tally *t)
{
	char state[256], err[512], want[64];
	struct sink s = {0}, s2 = {0};
	struct journal *j = NULL, *j2 = NULL;
	int rc;

	check_tmpdir(state, sizeof state, "journal");
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0, "first writer opens");
	if (rc < 0)
		goto out;
	append_ids(j, 0, 10);
	journal_commit(j);
	append_ids(j, 10, 5);   /* pending, not durable */

	rc = open_j(state, 0, 0, &s2, &j2, err, sizeof err);
	snprintf(want, sizeof want, "is in use by another forkpoint (pid %ld)", (long)getpid());
	CHECK(t, rc == -EBUSY && j2 == NULL, "a second writer gets -EBUSY");
	CHECK(t, strstr(err, want) != NULL && strstr(err, state) != NULL,
	      "... with a message naming the state dir and the holder's pid");
	printf("# %s\n", err);
	rc = open_j(state, 1, 0, &s2, &j2, err, sizeof err);
	CHECK(t, rc == 0 && s2.got.n == 10 && got_ids(&s2.got, 0, 0, 10),
	      "a read-only open works while locked and sees only committed records");
	journal_close(j2);
	j2 = NULL;
	journal_close(j);
	j = NULL;
	rc = open_j(state, 0, 0, &s2, &j2, err, sizeof err);
	CHECK(t, rc == 0 && s2.got.n == 10, "once the writer closes, another may open");
	journal_close(j2);
out:
	got_reset(&s.got);
	got_reset(&s2.got);
	check_rm_rf(state);
}

/* A write that fails part-way (file size limit) is cut back and retried by the next commit. */
static void test_write_failure(struct tally *t)
{
	char state[256], err[512], path[PATH_MAX];
	struct sink s = {0};
	struct journal *j = NULL;
	struct rlimit old, lim;
	struct sigaction ign = { .sa_handler = SIG_IGN }, prev;
	uint64_t lo, hi;
	int rc;

	check_tmpdir(state, sizeof state, "journal");
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	if (rc < 0) {
		CHECK(t, 0, "open for the write failure test");
		goto out;
	}
	append_ids(j, 0, 20);
	journal_commit(j);
	seg_range(state, &lo, &hi);
	seg_path(path, sizeof path, state, hi);
	long good = file_size(path);

	getrlimit(RLIMIT_FSIZE, &old);
	sigaction(SIGXFSZ, &ign, &prev);
	lim = old;
	lim.rlim_cur = (rlim_t)good + 100;
	setrlimit(RLIMIT_FSIZE, &lim);
	append_ids(j, 20, 40);           /* well over 100 bytes */
	size_t pending = journal_pending_bytes(j);
	rc = journal_commit(j);
	long after = file_size(path);
	setrlimit(RLIMIT_FSIZE, &old);
	sigaction(SIGXFSZ, &prev, NULL);

	CHECK(t, rc == -EFBIG, "a commit that hits the file size limit fails (-EFBIG)");
	CHECK(t, after == good, "the partial write is truncated back to the last good offset");
	CHECK(t, journal_pending_bytes(j) == pending, "the batch stays pending");
	CHECK(t, journal_commit(j) == 0 && journal_pending_bytes(j) == 0, "a later commit succeeds");
	journal_close(j);
	j = NULL;
	rc = open_j(state, 0, 0, &s, &j, err, sizeof err);
	CHECK(t, rc == 0 && s.got.n == 60 && got_ids(&s.got, 0, 0, 60) && s.logs.count == 0,
	      "every record is there exactly once, nothing torn");
	journal_close(j);
out:
	got_reset(&s.got);
	check_rm_rf(state);
}

/* ---- a reader beside a live writer --------------------------------------------------------- */

/* Records of the live-writer test: type 1 carries a counter value, type 2 (only ever first,
 * inside a snapshot) says every value up to it is done. */
struct live_check {
	uint64_t next;
	uint64_t seen;
	int broken;
};

static int live_rec(void *arg, uint8_t type, const void *payload, size_t len, char *err,
		    size_t errlen)
{
	struct live_check *c = arg;
	uint64_t v;

	(void)err;
	(void)errlen;
	if (len != sizeof v) {
		c->broken = 1;
		return 0;
	}
	memcpy(&v, payload, sizeof v);
	if (type == 2 && c->seen == 0)
		c->next = v + 1;
	else if (type == 1 && v == c->next)
		c->next++;
	else
		c->broken = 1;
	c->seen++;
	return 0;
}

/* The writer: commits counter values five at a time into 4 KiB segments and compacts every
 * 40 commits, until `seconds` have passed.  Runs in a child process (it holds the lock). */
static int live_writer(const char *state, double seconds)
{
	struct journal_opts o = { .segment_bytes = 4096 };
	struct journal *j;
	char err[512];
	double end = check_now() + seconds;
	uint64_t v = 0;
	int commits = 0;

	if (journal_open(state, &o, NULL, NULL, NULL, &j, err, sizeof err) < 0)
		return 1;
	while (check_now() < end) {
		for (int i = 0; i < 5; i++, v++)
			if (journal_append(j, 1, &v, sizeof v) < 0)
				return 1;
		if (journal_commit(j) < 0)
			return 1;
		if (++commits % 40 == 0) {
			uint64_t done = v - 1;
			if (journal_rewrite_begin(j) < 0 ||
			    journal_append(j, 2, &done, sizeof done) < 0 ||
			    journal_rewrite_end(j) < 0)
				return 1;
		}
	}
	journal_close(j);
	return 0;
}

static void test_live_reader(struct tally *t)
{
	char state[256], err[512];
	struct journal_opts o = { .read_only = 1 };
	int opens = 0, failed = 0, broken = 0, status = 0;
	uint64_t most = 0;
	pid_t pid;

	check_tmpdir(state, sizeof state, "journal");
	/* Let the writer create the journal before the first read. */
	if (build(state, 0, 1, 4096) < 0) {
		CHECK(t, 0, "create the live journal");
		goto out;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(live_writer(state, 1.5));
	double end = check_now() + 1.4;
	while (check_now() < end) {
		struct live_check c = {0};
		struct journal *j = NULL;
		int rc = journal_open(state, &o, live_rec, NULL, &c, &j, err, sizeof err);
		opens++;
		if (rc < 0) {
			failed++;
			printf("# read-only open beside the writer: %s\n", err);
		} else if (c.broken) {
			broken++;
		}
		if (c.next > most)
			most = c.next;
		journal_close(j);
	}
	waitpid(pid, &status, 0);
	printf("# %d read-only opens beside a writer that compacts; up to value %" PRIu64 "\n",
	       opens, most);
	CHECK(t, WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer ran without error");
	CHECK(t, opens > 10 && most > 0, "the reader saw the journal grow");
	CHECK(t, failed == 0, "read-only opens beside a live writer never fail");
	CHECK(t, broken == 0, "each one sees a consistent prefix (snapshot + contiguous values)");
out:
	check_rm_rf(state);
}

/* The crash test's writer: resumes the counter from what it replays, commits five values at a
 * time into 4 KiB segments with HEAD following every commit, acknowledges each commit on
 * ackfd, and compacts every 20 commits, until it is killed. */
static int crash_writer(const char *state, int ackfd)
{
	struct journal_opts o = { .segment_bytes = 4096, .head_interval_ms = 1 };
	struct live_check c = {0};
	struct journal *j;
	char err[512];

	if (journal_open(state, &o, live_rec, NULL, &c, &j, err, sizeof err) < 0 || c.broken) {
		fprintf(stderr, "writer: %s\n", err);
		return 1;
	}
	uint64_t v = c.next;
	for (int commits = 1;; commits++) {
		for (int i = 0; i < 5; i++, v++)
			if (journal_append(j, 1, &v, sizeof v) < 0)
				return 1;
		if (journal_commit(j) < 0)
			return 1;
		uint64_t acked = v - 1;
		if (write(ackfd, &acked, sizeof acked) != (ssize_t)sizeof acked)
			return 1;
		if (commits % 20 == 0 && (journal_rewrite_begin(j) < 0 ||
		    journal_append(j, 2, &acked, sizeof acked) < 0 || journal_rewrite_end(j) < 0))
			return 1;
	}
}

/* SIGKILL the writer after a random number of acknowledged commits, 80 times on one state dir:
 * every restart must open without a damage report (no false refusal after a crash inside a
 * roll, a compaction or a HEAD update) and replay every acknowledged value. */
static void test_crash_points(struct tally *t)
{
	char state[256], err[512];
	uint64_t seed = 42, last = 0, acks = 0;
	int refused = 0, lost = 0, broken = 0, fsck_bad = 0, rounds = 80;

	check_tmpdir(state, sizeof state, "journal");
	for (int r = 0; r < rounds; r++) {
		int fds[2];
		if (pipe(fds) < 0)
			break;
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			close(fds[0]);
			_exit(crash_writer(state, fds[1]));
		}
		close(fds[1]);
		uint64_t want = 1 + check_rand(&seed) % 150, v;
		for (uint64_t k = 0; k < want && read(fds[0], &v, sizeof v) == (ssize_t)sizeof v; k++) {
			last = v;
			acks++;
		}
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(fds[0]);

		struct journal_opts o = { .segment_bytes = 4096 };
		struct live_check c = {0};
		struct journal *j = NULL;
		if (journal_fsck(state, 0, NULL, err, sizeof err) < 0 && strstr(err, "torn tail") == NULL) {
			fsck_bad++;
			printf("# round %d: fsck: %s\n", r, err);
		}
		if (journal_open(state, &o, live_rec, NULL, &c, &j, err, sizeof err) < 0) {
			refused++;
			printf("# round %d: %s\n", r, err);
			break;
		}
		broken += c.broken;
		if (c.next <= last)
			lost++;
		journal_close(j);
	}
	printf("# %d kills, %" PRIu64 " acknowledged commits, last value %" PRIu64 "\n", rounds,
	       acks, last);
	CHECK(t, refused == 0 && fsck_bad == 0, "every restart after a kill opens, fsck agrees");
	CHECK(t, lost == 0 && broken == 0, "every acknowledged value is replayed, in order");
	check_rm_rf(state);
}

static int count_only(void *arg, uint8_t type, const void *payload, size_t len, char *err,
		      size_t errlen)
{
	(void)type;
	(void)payload;
	(void)err;
	(void)errlen;
	*(uint64_t *)arg += len;
	return 0;
}

/* Replay speed for the record; asserted only loosely (shared, noisy machine; sanitizers). */
static void test_speed(struct tally *t)
{
	char state[256], err[512];
	struct journal_opts o = {0};
	struct journal *j = NULL;
	const uint64_t n = UNDER_ASAN ? 200000 : 1000000;
	unsigned char rec[32];
	uint64_t bytes = 0;
	int rc, bad = 0;

	check_tmpdir(state, sizeof state, "journal");
	rc = journal_open(state, &o, NULL, NULL, NULL, &j, err, sizeof err);
	if (rc < 0) {
		CHECK(t, 0, "open for the speed test");
		goto out;
	}
	memset(rec, 0x5a, sizeof rec);
	double t0 = check_now();
	for (uint64_t i = 0; i < n; i++) {
		memcpy(rec, &i, sizeof i);
		if (journal_append(j, 1, rec, sizeof rec) < 0)
			bad++;
		if ((i + 1) % 10000 == 0 && journal_commit(j) < 0)
			bad++;
	}
	double t1 = check_now();
	journal_close(j);
	j = NULL;
	rc = journal_open(state, &o, count_only, NULL, &bytes, &j, err, sizeof err);
	double t2 = check_now();
	CHECK(t, bad == 0 && rc == 0 && journal_records_replayed(j) == n && bytes == n * 32,
	      "write and replay a journal of small records");
	printf("# %" PRIu64 " records of 32 B: written %.0f/s (10000 per commit), replayed %.0f/s\n",
	       n, (double)n / (t1 - t0), (double)n / (t2 - t1));
	if (!UNDER_ASAN)
		CHECK(t, (double)n / (t2 - t1) > 1e6, "replay runs at more than 1 M records/s");
	journal_close(j);
out:
	check_rm_rf(state);
}

int main(void)
{
	struct tally t = {0, 0};

	test_round_trip(&t);
	test_misc_api(&t);
	test_group_commit_and_roll(&t);
	test_torn_every_offset(&t);
	test_damage(&t);
	test_big_tails(&t);
	test_fixtures(&t);
	test_accepted(&t);
	test_snapshot_bytes(&t);
	test_fsck(&t);
	test_snapshot(&t);
	test_big_snapshot(&t);
	test_lock(&t);
	test_write_failure(&t);
	test_live_reader(&t);
	test_crash_points(&t);
	test_speed(&t);
	return check_done(&t);
}
