/* proc_info — read what the host tells a job through /proc: the init's command line (the
 * supervisor's argv names its config and state dir), the kernel's key list, timers, the
 * scheduler's debug view, kcore; and host paths in the mount table.  argv[1] is a
 * ';'-separated list of words that must appear in none of them (the battery passes the
 * config path and the state dir). */
#include "attempt.h"
#include <fcntl.h>

static ssize_t slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t got = 0;
	ssize_t n;
	while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = 0;
	for (size_t i = 0; i < got; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	return (ssize_t)got;
}

static void no_words(const char *what, const char *text, const char *words)
{
	char *list = strdup(words);
	for (char *save = NULL, *w = strtok_r(list, ";", &save); w; w = strtok_r(NULL, ";", &save))
		if (*w && strstr(text, w))
			escaped("%s shows %s", what, w);
	free(list);
}

int main(int argc, char **argv)
{
	static char buf[1 << 16];
	const char *words = attempt_arg(argc, argv);
	if (slurp("/proc/1/cmdline", buf, sizeof buf) >= 0) {
		printf("/proc/1/cmdline: %.80s\n", buf);
		no_words("/proc/1/cmdline", buf, words);
		if (strstr(buf, "--config") || strstr(buf, "--state"))
			escaped("/proc/1/cmdline is the supervisor's: %.200s", buf);
	}
	static const char *const secret[] = {
		"/proc/keys", "/proc/key-users", "/proc/timer_list", "/proc/sched_debug", "/proc/kcore", NULL,
	};
	for (size_t i = 0; secret[i]; i++) {
		ssize_t n = slurp(secret[i], buf, sizeof buf);
		if (n > 0)
			escaped("%s is readable: %.120s", secret[i], buf);
		printf("%s: %s\n", secret[i], n < 0 ? strerror(errno) : "empty");
	}
	if (slurp("/proc/self/mountinfo", buf, sizeof buf) > 0) {
		printf("mountinfo: %s\n", buf);
		no_words("/proc/self/mountinfo", buf, words);
		if (strstr(buf, "/oldroot"))
			escaped("/proc/self/mountinfo shows the staging root");
	}
	contained("no host secrets in /proc");
}
