/* tests/unit/check.h — the harness every unit test binary shares: a pass/fail tally, the
 * check macros, the closing "N passed, M failed" line that tests/run.sh reads, and scratch
 * folders.  Header-only (static inline), so each test binary stays one .c file.
 *
 * Two ways to report a check; a test may use both:
 *   CHECK(t, cond, what)       a TAP-style line for every check on stdout:
 *                              "ok N - what", or "not ok N - what (line L)".
 *   CHECKF(t, cond, fmt, ...)  silent when cond holds; otherwise "FAIL file:line: <message>"
 *                              on stderr.  The message arguments are evaluated only on failure.
 * main() ends with `return check_done(&t);`: it prints the closing line and gives the exit
 * status (1 if any check failed).
 *
 * Setup helpers (check_tmpdir, check_mkdir, check_put, …) exit(2) when the machine refuses:
 * a test that cannot set itself up must not pass for one that ran. */
#ifndef FP_TEST_CHECK_H
#define FP_TEST_CHECK_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* 1 in an AddressSanitizer build (gcc defines the macro, clang has the feature test): tests
 * that cap the address space or time themselves must know. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

struct tally {
	int pass;
	int fail;
};

/* Flushed at once: a test that forks must not hand its children unwritten lines, and a test
 * that dies mid-way still shows how far it got. */
static inline void check_at(struct tally *t, int ok, const char *what, int line)
{
	if (ok) {
		t->pass++;
		printf("ok %d - %s\n", t->pass + t->fail, what);
	} else {
		t->fail++;
		printf("not ok %d - %s (line %d)\n", t->pass + t->fail, what, line);
	}
	fflush(stdout);
}
#define CHECK(t, cond, what) check_at((t), (cond) ? 1 : 0, (what), __LINE__)

#define CHECKF(t, cond, ...) do {                                                     \
		if (cond) {                                                                   \
			(t)->pass++;                                                          \
		} else {                                                                      \
			(t)->fail++;                                                          \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                  \
			fprintf(stderr, __VA_ARGS__);                                         \
			fputc('\n', stderr);                                                  \
		}                                                                             \
	} while (0)

/* A check that cannot run here counts as passed, and says why (TAP's SKIP directive). */
static inline void check_skip(struct tally *t, const char *why)
{
	t->pass++;
	printf("ok %d - # SKIP %s\n", t->pass + t->fail, why);
	fflush(stdout);
}

/* The closing line, and main()'s exit status. */
static inline int check_done(const struct tally *t)
{
	printf("%d passed, %d failed\n", t->pass, t->fail);
	return t->fail ? 1 : 0;
}

/* xorshift64: deterministic test data without touching libc's global rand() state. */
static inline uint64_t check_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* Monotonic seconds, for the tests that time themselves. */
static inline double check_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* How many processes have mark in their command line (tests tag the processes they start
 * this way).  Zombies have an empty command line: they count as gone. */
static inline int check_count_procs(const char *mark)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char p[300], buf[4096];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (len <= 0)
			continue;
		for (ssize_t i = 0; i < len; i++)
			if (buf[i] == 0)
				buf[i] = ' ';
		buf[len] = 0;
		if (strstr(buf, mark))
			n++;
	}
	closedir(d);
	return n;
}

/* ---- scratch folders ------------------------------------------------------------------- */

/* perror(what), then exit 2. */
static inline void check_die(const char *what)
{
	perror(what);
	exit(2);
}

/* A new folder $TMPDIR/fp-<name>-XXXXXX (or under /tmp), its path in buf. */
static inline void check_tmpdir(char *buf, size_t len, const char *name)
{
	const char *base = getenv("TMPDIR");
	snprintf(buf, len, "%s/fp-%s-XXXXXX", base && *base ? base : "/tmp", name);
	if (!mkdtemp(buf))
		check_die("mkdtemp");
}

static inline int check_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Remove a scratch tree.  Links are removed, never followed. */
static inline void check_rm_rf(const char *path)
{
	nftw(path, check_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdir 0700; a folder that is already there is fine. */
static inline void check_mkdir(const char *path)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		check_die(path);
}

/* A file (mode 0600) holding exactly data[0..n). */
static inline void check_put(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		check_die(path);
	close(fd);
}

static inline void check_symlink(const char *target, const char *path)
{
	if (symlink(target, path) < 0)
		check_die(path);
}

static inline void check_link(const char *target, const char *path)
{
	if (link(target, path) < 0)
		check_die(path);
}

#endif
