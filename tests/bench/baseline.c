/* tests/bench/baseline.c — see baseline.h. */
#include "baseline.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/b64.h"
#include "state/blob.h"
#include "state/crc32c.h"

extern char **environ;

#define SEG_HEADER 48u   /* journal.h: magic, numbers, flags, header checksum */
#define REC_HEADER 17u   /* u32 length, u32 masked crc, u64 sequence number, u8 type */

double base_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double base_quantile(double *v, size_t n, double p)
{
	qsort(v, n, sizeof *v, cmp_double);
	double rank = ceil(p * (double)n - 1e-9);
	size_t k = rank < 1 ? 1 : rank > (double)n ? n : (size_t)rank;
	return v[k - 1];
}

int base_append_rate(const char *dir, size_t rec_bytes, unsigned per_sync, double seconds,
                     double *rate)
{
	char path[4096];
	char *rec = NULL;
	int fd = -1, rc = 0;
	unsigned long long n = 0;
	snprintf(path, sizeof path, "%s/bench-append.dat", dir);
	rec = malloc(rec_bytes);
	if (!rec)
		return -ENOMEM;
	memset(rec, 'r', rec_bytes);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	/* The file starts empty, as a fresh journal segment does: every sync also commits the
	 * new size, which is what the journal pays too. */
	double t0 = base_now(), t1;
	do {
		for (unsigned i = 0; i < per_sync; i++) {
			if (write(fd, rec, rec_bytes) != (ssize_t)rec_bytes) {
				rc = errno ? -errno : -EIO;
				goto fail;
			}
		}
		if (fdatasync(fd) < 0) {
			rc = -errno;
			goto fail;
		}
		n += per_sync;
		t1 = base_now();
	} while (t1 - t0 < seconds);
	*rate = (double)n / (t1 - t0);
fail:
	if (fd >= 0)
		close(fd);
	unlink(path);
	free(rec);
	return rc;
}

static int read_file(const char *path, unsigned char **data, size_t *len)
{
	struct stat st;
	unsigned char *buf = NULL;
	size_t got = 0;
	int rc = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = -ENOMEM;
		goto fail;
	}
	while (got < (size_t)st.st_size) {
		size_t want = (size_t)st.st_size - got;
		ssize_t r = read(fd, buf + got, want < (1u << 20) ? want : (1u << 20));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? -errno : -EIO;
			goto fail;
		}
		got += (size_t)r;
	}
	*data = buf;
	*len = got;
	buf = NULL;
fail:
	free(buf);
	close(fd);
	return rc;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int base_scan_journal(const char *state_dir, uint64_t *records, uint64_t *bytes, double *secs)
{
	char dpath[4096], fpath[8192];
	char **names = NULL;
	size_t n = 0, cap = 0;
	uint64_t recs = 0, total = 0;
	int rc = 0;
	snprintf(dpath, sizeof dpath, "%s/journal", state_dir);
	DIR *d = opendir(dpath);
	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name);
		if (l < 5 || strcmp(e->d_name + l - 4, ".seg") != 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **nn = realloc(names, cap * sizeof *nn);
			if (!nn) {
				rc = -ENOMEM;
				goto fail;
			}
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name))) {
			rc = -ENOMEM;
			goto fail;
		}
		n++;
	}
	qsort(names, n, sizeof *names, cmp_names);
	double t0 = base_now();
	for (size_t i = 0; i < n; i++) {
		unsigned char *data = NULL;
		size_t len = 0;
		snprintf(fpath, sizeof fpath, "%s/%s", dpath, names[i]);
		if ((rc = read_file(fpath, &data, &len)) < 0)
			goto fail;
		size_t off = SEG_HEADER;
		while (off + REC_HEADER <= len) {
			uint32_t plen = le32(data + off);
			if (plen > len - off - REC_HEADER)
				break;
			/* The CRC covers sequence number, type and payload, which sit next to each other. */
			if (crc32c_mask(crc32c(0, data + off + 8, 9 + (size_t)plen)) != le32(data + off + 4)) {
				free(data);
				rc = -EBADMSG;
				goto fail;
			}
			off += REC_HEADER + plen;
			recs++;
		}
		total += len;
		free(data);
	}
	*secs = base_now() - t0;
	*records = recs;
	*bytes = total;
fail:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return rc;
}

static int spawn_one(char *const argv[], const posix_spawn_file_actions_t *fa, pid_t *pid, int *pidfd)
{
	int rc = posix_spawn(pid, argv[0], fa, NULL, argv, environ);
	if (rc)
		return -rc;
	*pidfd = (int)syscall(SYS_pidfd_open, *pid, 0);
	if (*pidfd < 0) {
		rc = -errno;
		waitpid(*pid, NULL, 0);
		return rc;
	}
	return 0;
}

int base_spawn_rate(char *const argv[], unsigned total, unsigned inflight, double *rate)
{
	posix_spawn_file_actions_t fa;
	struct pollfd *pf = calloc(inflight, sizeof *pf);
	pid_t *pids = calloc(inflight, sizeof *pids);
	unsigned started = 0, done = 0;
	int rc = 0;
	if (!pf || !pids) {
		free(pf);
		free(pids);
		return -ENOMEM;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	for (unsigned i = 0; i < inflight; i++)
		pf[i].fd = -1;
	double t0 = base_now();
	while (done < total) {
		for (unsigned i = 0; i < inflight && started < total; i++) {
			if (pf[i].fd >= 0)
				continue;
			if ((rc = spawn_one(argv, &fa, &pids[i], &pf[i].fd)) < 0)
				goto fail;
			pf[i].events = POLLIN;
			started++;
		}
		if (poll(pf, inflight, 10000) <= 0) {
			rc = errno == EINTR ? 0 : -ETIMEDOUT;
			if (rc)
				goto fail;
			continue;
		}
		for (unsigned i = 0; i < inflight; i++) {
			if (pf[i].fd < 0 || !(pf[i].revents & POLLIN))
				continue;
			int st;
			waitpid(pids[i], &st, 0);
			close(pf[i].fd);
			pf[i].fd = -1;
			pf[i].revents = 0;
			done++;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				rc = -ECHILD;   /* the program itself failed: the figure would mean nothing */
				goto fail;
			}
		}
	}
	*rate = (double)total / (base_now() - t0);
fail:
	for (unsigned i = 0; i < inflight; i++)
		if (pf[i].fd >= 0) {
			waitpid(pids[i], NULL, 0);
			close(pf[i].fd);
		}
	posix_spawn_file_actions_destroy(&fa);
	free(pf);
	free(pids);
	return rc;
}

int base_children(pid_t pid, pid_t *out, size_t max, size_t *n)
{
	size_t count = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d));) {
		char path[300], buf[512];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;   /* it has exited since readdir */
		ssize_t got = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (got <= 0)
			continue;
		buf[got] = 0;
		/* The command name may hold spaces and parentheses: the fields follow the last ')'. */
		char *p = strrchr(buf, ')');
		long ppid;
		char state;
		if (!p || sscanf(p + 1, " %c %ld", &state, &ppid) != 2 || ppid != (long)pid)
			continue;
		if (count < max)
			out[count] = (pid_t)atol(e->d_name);
		count++;
	}
	closedir(d);
	*n = count;
	return 0;
}

int base_private_kb(pid_t pid, long *kb)
{
	char path[64], line[256];
	long sum = 0, v;
	int seen = 0;
	snprintf(path, sizeof path, "/proc/%ld/smaps_rollup", (long)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "Private_Clean: %ld kB", &v) == 1 || sscanf(line, "Private_Dirty: %ld kB", &v) == 1) {
			sum += v;
			seen++;
		}
	}
	fclose(f);
	if (seen != 2)
		return -ENODATA;
	*kb = sum;
	return 0;
}

int base_spawned_private_kb(char *const argv[], int settle_ms, long *kb)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	int rc = -posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc < 0)
		return rc;
	struct timespec ts = { settle_ms / 1000, (settle_ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	rc = base_private_kb(pid, kb);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return rc;
}

int base_b64_decode_sha256(char *const *texts, const size_t *lens, size_t n, size_t size, double *rate,
                           char hex[65])
{
	size_t max = 0, off = 0;
	int rc = 0;
	for (size_t i = 0; i < n; i++)
		max += B64_DECODED_MAX(lens[i]);
	unsigned char *buf = malloc(max ? max : 1);
	if (!buf)
		return -ENOMEM;
	/* Touch the buffer first: the upload's destination pages are not what is measured. */
	memset(buf, 0, max);
	double t0 = base_now();
	for (size_t i = 0; i < n; i++) {
		size_t bad;
		ssize_t got = b64_decode(texts[i], lens[i], buf + off, &bad);
		if (got < 0) {
			rc = -EBADMSG;
			goto fail;
		}
		off += (size_t)got;
	}
	if (off != size) {
		rc = -EBADMSG;
		goto fail;
	}
	blob_sha256_hex(buf, off, hex);
	*rate = (double)size / (base_now() - t0);
fail:
	free(buf);
	return rc;
}

int base_b64_encode_sha256(const void *data, size_t len, size_t chunk, double *rate)
{
	char hex[65];
	char *enc = malloc(B64_ENCODED_SIZE(chunk));
	if (!enc)
		return -ENOMEM;
	double t0 = base_now();
	blob_sha256_hex(data, len, hex);
	for (size_t off = 0; off < len; off += chunk)
		b64_encode((const unsigned char *)data + off, len - off < chunk ? len - off : chunk, enc);
	*rate = (double)len / (base_now() - t0);
	free(enc);
	return 0;
}

int base_spawn_stamp(char *const argv[], double *secs)
{
	posix_spawn_file_actions_t fa;
	int p[2], st = 0;
	pid_t pid;
	char buf[64];
	size_t got = 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	double t0 = base_now();
	int rc = -posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc < 0) {
		close(p[0]);
		return rc;
	}
	for (;;) {
		ssize_t r = read(p[0], buf + got, sizeof buf - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (got += (size_t)r) == sizeof buf - 1)
			break;
	}
	close(p[0]);
	buf[got] = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -ECHILD;
	char *end;
	long long ns = strtoll(buf, &end, 10);
	if (end == buf || ns <= 0)
		return -EBADMSG;
	*secs = (double)ns / 1e9 - t0;
	return 0;
}

int base_run(char *const argv[], const char *errpath, double *secs, long *maxrss_kb, int *status)
{
	posix_spawn_file_actions_t fa;
	struct rusage ru;
	pid_t pid;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, errpath ? errpath : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC,
	                                 0600);
	double t0 = base_now();
	int rc = -posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc < 0)
		return rc;
	while (wait4(pid, status, 0, &ru) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	*secs = base_now() - t0;
	if (maxrss_kb)
		*maxrss_kb = ru.ru_maxrss;
	return 0;
}

int base_peak_main(char *const argv[])
{
	struct rusage ru;
	int status = 0;
	if (!argv[0] || !argv[1])
		return 2;
	double t0 = base_now();
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		execv(argv[1], argv + 1);
		_exit(127);
	}
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno != EINTR)
			return 1;
	}
	double secs = base_now() - t0;
	FILE *f = fopen(argv[0], "we");
	if (!f)
		return 1;
	fprintf(f, "%.9f %ld %d\n", secs, ru.ru_maxrss, status);
	return fclose(f) == 0 ? 0 : 1;
}

int base_run_peak(const char *self, char *const argv[], const char *tmpfile, double *secs, long *maxrss_kb,
                  int *status)
{
	char *full[72];
	size_t n = 0;
	full[n++] = (char *)self;
	full[n++] = (char *)"--peak-rss";
	full[n++] = (char *)tmpfile;
	for (size_t i = 0; argv[i]; i++) {
		if (n == sizeof full / sizeof full[0] - 1)
			return -E2BIG;
		full[n++] = argv[i];
	}
	full[n] = NULL;
	double outer;
	int st = 0;
	unlink(tmpfile);
	int rc = base_run(full, NULL, &outer, NULL, &st);
	if (rc < 0)
		return rc;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -ECHILD;
	FILE *f = fopen(tmpfile, "re");
	if (!f)
		return -errno;
	rc = fscanf(f, "%lf %ld %d", secs, maxrss_kb, status) == 3 ? 0 : -EBADMSG;
	fclose(f);
	return rc;
}

/* Why symlinks: on a merged-/usr system /lib, /lib64, /bin and /sbin are links into /usr, and
 * the root forkpoint builds shows them the same way; a real directory is bound instead. */
int base_bwrap_cmd(const char *bwrap, char *const prog[], struct base_bwrap *out)
{
	static const char *const top[] = { "/lib", "/lib64", "/bin", "/sbin" };
	static char *const head[] = { "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
	                              "--unshare-uts", "--die-with-parent", "--new-session", "--ro-bind", "/usr",
	                              "/usr", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir",
	                              "/tmp" };
	size_t n = 0, nprog = 0;
	while (prog[nprog])
		nprog++;
	memset(out, 0, sizeof *out);
	if (nprog + 40 > sizeof out->argv / sizeof out->argv[0] || strlen(prog[0]) >= sizeof out->dir)
		return -E2BIG;
	out->argv[n++] = (char *)bwrap;
	for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
		out->argv[n++] = head[i];
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
		struct stat st;
		if (lstat(top[i], &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t l = readlink(top[i], out->links[i], sizeof out->links[i] - 1);
			if (l <= 0)
				return l < 0 ? -errno : -EINVAL;
			out->links[i][l] = 0;
			out->argv[n++] = "--symlink";
			out->argv[n++] = out->links[i];
		} else {
			out->argv[n++] = "--ro-bind";
			out->argv[n++] = (char *)top[i];
		}
		out->argv[n++] = (char *)top[i];
	}
	strcpy(out->dir, prog[0]);
	char *slash = strrchr(out->dir, '/');
	if (!slash || slash == out->dir)
		return -EINVAL;
	*slash = 0;
	out->argv[n++] = "--ro-bind";
	out->argv[n++] = out->dir;
	out->argv[n++] = out->dir;
	out->argv[n++] = "--";
	for (size_t i = 0; i < nprog; i++)
		out->argv[n++] = prog[i];
	out->argv[n] = NULL;
	return 0;
}
