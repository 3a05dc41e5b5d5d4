/* tests/escape/attempts/attempt.h — what the escape attempts share.  Each attempt is a job run
 * through the real supervisor by tests/escape/battery.c; argv[1] is its argument (pids, paths,
 * ports the battery fills in) and the last argument a marker word the battery uses to find
 * the attempt's processes in /proc.
 *
 * An attempt that notices it failed prints "contained: …" and exits 0; one that succeeded
 * prints "ESCAPED: …" and exits 99.  Being killed (by the seccomp filter, a limit, the
 * deadline) is for the supervisor to report and the battery to check. */
#ifndef ESCAPE_ATTEMPT_H
#define ESCAPE_ATTEMPT_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ESCAPED_STATUS 99

__attribute__((format(printf, 1, 2), noreturn, unused))
static void contained(const char *fmt, ...)
{
	va_list ap;
	fputs("contained: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	exit(0);
}

__attribute__((format(printf, 1, 2), noreturn, unused))
static void escaped(const char *fmt, ...)
{
	va_list ap;
	fputs("ESCAPED: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	exit(ESCAPED_STATUS);
}

/* The argument, or "" when the battery passed none. */
__attribute__((unused))
static const char *attempt_arg(int argc, char **argv)
{
	return argc > 1 ? argv[1] : "";
}

#endif
