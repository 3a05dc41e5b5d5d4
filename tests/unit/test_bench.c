/* tests/unit/test_bench.c — the floors `make bench` divides by must measure what they claim:
 * the echo floor answers every pipelined request with forkpoint's answer bytes and the
 * request's own id (also across split reads, and without an id), and refuses a template it
 * cannot use; the quantiles are nearest rank; the bubblewrap command line carries the
 * `default` profile's namespaces and the program; the launch-latency floor rejects a program
 * that fails or prints no time; a program's peak RSS is its own, not the caller's.  The bench's sources are compiled in here: they are one
 * program, not a library. */
#include "tests/bench/baseline.c"
#include "tests/bench/echo.c"

#include <poll.h>
#include <sys/wait.h>

#include "tests/unit/check.h"

/* echo_main(template) in a child with pipes on its stdin/stdout. */
static pid_t start_echo(const char *tpl, int *to, int *from)
{
	int in[2], out[2];
	if (pipe(in) < 0 || pipe(out) < 0)
		check_die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		check_die("fork");
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		_exit(echo_main(tpl));
	}
	close(in[0]);
	close(out[1]);
	*to = in[1];
	*from = out[0];
	return pid;
}

/* Read until n lines have arrived (or 5 s passed); returns the bytes read. */
static size_t read_lines(int fd, char *buf, size_t cap, int n)
{
	size_t len = 0;
	int lines = 0;
	double deadline = check_now() + 5;
	while (lines < n && len < cap - 1 && check_now() < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t r = read(fd, buf + len, cap - 1 - len);
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			lines += buf[len + (size_t)i] == '\n';
		len += (size_t)r;
	}
	buf[len] = 0;
	return len;
}

static void put(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		check_die("write");
}

static void test_echo(struct tally *t, const char *dir)
{
	char tpl[512], buf[8192];
	const char *resp_text = "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"structuredContent\":"
	                        "{\"taskId\":\"abc\",\"status\":\"completed\",\"n\":1.5}}}";
	cJSON *resp = cJSON_Parse(resp_text);
	snprintf(tpl, sizeof tpl, "%s/tpl.json", dir);
	CHECK(t, echo_write_template(resp, tpl) == 0, "a response makes a template");
	CHECK(t, cJSON_GetObjectItemCaseSensitive(resp, "id")->valuedouble == 7, "the response is left unchanged");

	int to, from, st;
	pid_t pid = start_echo(tpl, &to, &from);
	/* Three pipelined requests, the second split across two writes, and one without an id. */
	put(to, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":12");
	usleep(20000);
	put(to, "345,\"method\":\"x\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n");
	size_t len = read_lines(from, buf, sizeof buf, 3);
	long want[3] = { 1, 12345, -1 };
	char *line = buf;
	for (int i = 0; i < 3; i++) {
		char *nl = line ? strchr(line, '\n') : NULL;
		cJSON *m = nl ? cJSON_ParseWithLength(line, (size_t)(nl - line)) : NULL;
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
		CHECKF(t, m && (want[i] < 0 ? cJSON_IsNull(id) : cJSON_IsNumber(id) && id->valuedouble == want[i]),
		       "answer %d carries id %ld: %.200s", i, want[i], line ? line : "(none)");
		if (m) {
			cJSON_ReplaceItemInObjectCaseSensitive(m, "id", cJSON_CreateNumber(7));
			CHECKF(t, cJSON_Compare(m, resp, 1), "answer %d is the template's bytes", i);
		}
		cJSON_Delete(m);
		line = nl ? nl + 1 : NULL;
	}
	CHECK(t, len > 0 && line && *line == 0, "three answers, nothing more");
	close(to);
	waitpid(pid, &st, 0);
	CHECK(t, WIFEXITED(st) && WEXITSTATUS(st) == 0, "the echo ends with 0 at EOF");
	close(from);

	/* A template without the id marker, or none at all, is refused with status 1. */
	check_put(tpl, "{\"id\":3}", 8);
	pid = start_echo(tpl, &to, &from);
	close(to);
	waitpid(pid, &st, 0);
	CHECK(t, WIFEXITED(st) && WEXITSTATUS(st) == 1, "a template without the marker is refused");
	close(from);
	snprintf(tpl, sizeof tpl, "%s/missing.json", dir);
	pid = start_echo(tpl, &to, &from);
	close(to);
	waitpid(pid, &st, 0);
	CHECK(t, WIFEXITED(st) && WEXITSTATUS(st) == 1, "a missing template is refused");
	close(from);
	cJSON *noid = cJSON_Parse("{\"jsonrpc\":\"2.0\"}");
	CHECK(t, echo_write_template(noid, tpl) == -EINVAL, "a message without an id makes no template");
	cJSON_Delete(noid);
	cJSON_Delete(resp);
}

static void test_quantile(struct tally *t)
{
	double v[100];
	for (int i = 0; i < 100; i++)
		v[i] = 100 - i;   /* reversed: the function sorts */
	CHECK(t, base_quantile(v, 100, 0.50) == 50, "p50 of 1..100 is 50");
	CHECK(t, base_quantile(v, 100, 0.99) == 99, "p99 of 1..100 is 99");
	CHECK(t, base_quantile(v, 100, 1.0) == 100, "p100 is the maximum");
	double one = 3;
	CHECK(t, base_quantile(&one, 1, 0.99) == 3 && base_quantile(&one, 1, 0.5) == 3, "one value is every quantile");
	double ten[10] = { 5, 1, 9, 3, 7, 2, 8, 4, 10, 6 };
	CHECK(t, base_quantile(ten, 10, 0.99) == 10 && base_quantile(ten, 10, 0.5) == 5, "p99 of ten is the maximum");
}

static void test_bwrap_cmd(struct tally *t)
{
	struct base_bwrap bw;
	char *prog[] = { "/opt/x/bin/job", "a", "b", NULL };
	CHECK(t, base_bwrap_cmd("/usr/bin/bwrap", prog, &bw) == 0, "a command line is built");
	const char *ns[] = { "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts" };
	int n = 0, seen = 0, dir = 0;
	while (bw.argv[n])
		n++;
	for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
		for (int i = 0; i < n; i++)
			seen += strcmp(bw.argv[i], ns[k]) == 0;
	for (int i = 0; i + 2 < n; i++)
		dir |= strcmp(bw.argv[i], "--ro-bind") == 0 && strcmp(bw.argv[i + 1], "/opt/x/bin") == 0 &&
		       strcmp(bw.argv[i + 2], "/opt/x/bin") == 0;
	CHECK(t, strcmp(bw.argv[0], "/usr/bin/bwrap") == 0, "bwrap first");
	CHECK(t, seen == 5, "the default profile's namespaces (a mount namespace is bwrap's own)");
	CHECK(t, dir, "the program's folder is bound read-only");
	CHECK(t, n >= 4 && strcmp(bw.argv[n - 4], "--") == 0 && bw.argv[n - 3] == prog[0] &&
	         strcmp(bw.argv[n - 1], "b") == 0, "the program and its arguments last");
	char *rel[] = { "job", NULL };
	CHECK(t, base_bwrap_cmd("/usr/bin/bwrap", rel, &bw) == -EINVAL, "a program without a folder is refused");
}

static void test_spawn_stamp(struct tally *t)
{
	double secs = 0;
	char *fails[] = { "/bin/sh", "-c", "echo 123; exit 3", NULL };
	char *words[] = { "/bin/sh", "-c", "echo hello", NULL };
	char *early[] = { "/bin/sh", "-c", "echo 1", NULL };
	char *missing[] = { "/nonexistent/stamp", NULL };
	CHECK(t, base_spawn_stamp(fails, &secs) == -ECHILD, "a program that fails gives -ECHILD");
	CHECK(t, base_spawn_stamp(words, &secs) == -EBADMSG, "a program that prints no time gives -EBADMSG");
	CHECK(t, base_spawn_stamp(early, &secs) == 0 && secs < 0, "the time printed minus the spawn");
	CHECK(t, base_spawn_stamp(missing, &secs) < 0, "a missing program is an error");
}

/* A program's peak RSS must be its own: with the caller holding 64 MiB, a plain posix_spawn
 * child reports at least that, the peak-RSS intermediate (this binary in its --peak-rss
 * mode) reports what the program itself used. */
static void test_peak_rss(struct tally *t, const char *dir)
{
	char self[4096], tmp[512];
	size_t big = 64u << 20;
	char *mem = malloc(big);
	if (!mem || !realpath("/proc/self/exe", self))
		check_die("setup");
	memset(mem, 1, big);
	snprintf(tmp, sizeof tmp, "%s/peak", dir);
	char *prog[] = { "/bin/sh", "-c", "exit 0", NULL };
	double secs = 0;
	long kb = 0;
	int st = -1;
	CHECK(t, base_run(prog, NULL, &secs, &kb, &st) == 0 && kb >= 60000, "a posix_spawn child's peak includes ours");
	kb = 0;
	CHECK(t, base_run_peak(self, prog, tmp, &secs, &kb, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the intermediate runs the program");
	CHECKF(t, kb > 0 && kb < 20000, "the program's own peak: %ld KiB", kb);
	char *fails[] = { "/bin/sh", "-c", "exit 3", NULL };
	CHECK(t, base_run_peak(self, fails, tmp, &secs, &kb, &st) == 0 && WEXITSTATUS(st) == 3,
	      "the program's exit status comes back");
	char *missing[] = { "/nonexistent/prog", NULL };
	CHECK(t, base_run_peak(self, missing, tmp, &secs, &kb, &st) == 0 && WEXITSTATUS(st) == 127,
	      "a program that cannot be run exits 127");
	free(mem);
}

int main(int argc, char **argv)
{
	struct tally t = { 0, 0 };
	char dir[256];
	if (argc >= 4 && strcmp(argv[1], "--peak-rss") == 0)
		return base_peak_main(argv + 2);
	check_tmpdir(dir, sizeof dir, "bench");
	test_echo(&t, dir);
	test_quantile(&t);
	test_bwrap_cmd(&t);
	test_spawn_stamp(&t);
	test_peak_rss(&t, dir);
	check_rm_rf(dir);
	return check_done(&t);
}
