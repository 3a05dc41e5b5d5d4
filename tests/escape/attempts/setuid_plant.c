/* setuid_plant — leave a setuid or setgid program in the work dir (or a writePath, argv[1]) for
 * someone on the host to run: fchmod, chmod and open(O_CREAT) with the bits.  Any file that ends
 * up with S_ISUID or S_ISGID is an escape, whoever owns it on the host. */
#include "attempt.h"
#include <fcntl.h>
#include <sys/stat.h>

static void check(const char *p)
{
	struct stat st;
	if (stat(p, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)))
		escaped("%s has mode %o (uid %u in the jail)", p, (unsigned)(st.st_mode & 07777),
		        (unsigned)st.st_uid);
}

static void plant(const char *dir)
{
	char a[4200], b[4200], c[4200];
	snprintf(a, sizeof a, "%s/suid-a", dir);
	snprintf(b, sizeof b, "%s/suid-b", dir);
	snprintf(c, sizeof c, "%s/sgid-dir", dir);
	int fd = open(a, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (fd < 0) {
		printf("%s: %s\n", a, strerror(errno));
		return;
	}
	if (fchmod(fd, 04755) < 0)
		printf("fchmod 04755: %s\n", strerror(errno));
	close(fd);
	check(a);
	if (chmod(a, 02755) < 0)
		printf("chmod 02755: %s\n", strerror(errno));
	check(a);
	umask(0);
	fd = open(b, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 06755);
	if (fd >= 0)
		close(fd);
	else
		printf("open 06755: %s\n", strerror(errno));
	check(b);
	if (mkdir(c, 02775) < 0)
		printf("mkdir 02775: %s\n", strerror(errno));
	check(c);
}

int main(int argc, char **argv)
{
	const char *wd = getenv("FORKPOINT_WORKDIR");
	if (wd)
		plant(wd);
	if (argc > 2 && argv[1][0] == '/')
		plant(argv[1]);
	contained("no file kept a setuid or setgid bit");
}
