/* supervisor/core/log.c — see log.h. */
#include "supervisor/core/log.h"
#include "proto/termsafe.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Indexed by enum fplog_level: the RFC 5424 names, which are also MCP's logging levels, so a
 * client's logging/setLevel value maps straight onto a level. */
static const char *const names[] = {
	"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
};

/* An out-of-range level prints as "info" rather than reading past the table. */
const char *fplog_level_name(enum fplog_level lv)
{
	return (unsigned)lv < sizeof names / sizeof names[0] ? names[lv] : "info";
}

int fplog_level_parse(const char *name)
{
	for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
		if (strcmp(name, names[i]) == 0)
			return (int)i;
	return -1;
}

void fplog_init(struct fplog *lg, int fd, enum fplog_level min)
{
	memset(lg, 0, sizeof *lg);
	lg->fd = fd;
	lg->min = min;
}

/* The sink sees every event, before the stderr threshold, because a client's chosen level is
 * independent of the operator's.  The message is formatted once into a bounded buffer (a
 * longer one is cut, never allocated for), then escaped into a logfmt line: UTC time to the
 * millisecond, level, task, quoted msg.  Eight bytes of slack at the end of line leave room
 * for the longest escape and the closing quote and newline. */
void fplog(const struct fplog *lg, enum fplog_level lv, const char *task, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);

	if (lg->sink)
		lg->sink(lg->sink_arg, lv, task, msg);
	if (lv < lg->min || lg->fd < 0)
		return;

	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	char line[4608];
	size_t n = (size_t)snprintf(line, sizeof line,
		"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s%s%s msg=\"",
		tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		ts.tv_nsec / 1000000, fplog_level_name(lv), task ? " task=" : "", task ? task : "");
	/* Escape so one event is always one line, whatever a job put in its message, and so that
	 * nothing in it can drive a terminal (C1 and bidi controls, invalid UTF-8 included). */
	const char *end = msg + strlen(msg);
	for (const char *p = msg; *p && n < sizeof line - 8; p++) {
		unsigned char c = (unsigned char)*p;
		if (c >= 0x80) {
			size_t used;
			n += termsafe_char(p, (size_t)(end - p), 0, line + n, &used);
			p += used - 1;
		} else if (c == '"' || c == '\\') {
			line[n++] = '\\';
			line[n++] = (char)c;
		} else if (c == '\n') {
			line[n++] = '\\';
			line[n++] = 'n';
		} else if (c < 0x20 || c == 0x7f) {
			n += (size_t)snprintf(line + n, sizeof line - n, "\\x%02x", c);
		} else {
			line[n++] = (char)c;
		}
	}
	line[n++] = '"';
	line[n++] = '\n';
	/* One write per line; a full stderr pipe drops the line rather than stalling the loop. */
	ssize_t w;
	do {
		w = write(lg->fd, line, n);
	} while (w < 0 && errno == EINTR);
}
