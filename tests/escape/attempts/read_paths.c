/* read_paths — try to read what a job must not see.  argv[1] is a ';'-separated list:
 * "F=/path" must not be readable; "D=/path=a,b" may be listed only if it shows nothing but
 * the entries a, b (the skeleton of folders above the job's own work dir). */
#include "attempt.h"
#include <dirent.h>
#include <fcntl.h>

static int allowed(const char *name, const char *list)
{
	size_t n = strlen(name);
	const char *own = getenv("FORKPOINT_TASK_ID");
	/* The job's own task folder is on the way to its work dir. */
	if (own && strcmp(name, own) == 0)
		return 1;
	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		p = c ? c + 1 : NULL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char *list = strdup(attempt_arg(argc, argv));
	int tried = 0;
	for (char *save = NULL, *item = strtok_r(list, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
		char *path = item + 2;
		if (strncmp(item, "F=", 2) == 0) {
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			char buf[64];
			tried++;
			if (fd >= 0 && read(fd, buf, sizeof buf) >= 0)
				escaped("read %s", path);
			printf("%s: %s\n", path, strerror(errno));
		} else if (strncmp(item, "D=", 2) == 0) {
			char *ok = strchr(path, '=');
			if (ok)
				*ok++ = 0;
			DIR *d = opendir(path);
			struct dirent *e;
			tried++;
			if (!d) {
				printf("%s/: %s\n", path, strerror(errno));
				continue;
			}
			while ((e = readdir(d)))
				if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !allowed(e->d_name, ok))
					escaped("listed %s/%s", path, e->d_name);
			closedir(d);
			printf("%s/: only the way to the work dir is there\n", path);
		}
	}
	if (!tried)
		escaped("nothing to try: bad argument");
	contained("none of the %d paths was readable", tried);
}
