/* state/layout.c — see layout.h. */
#include "state/layout.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A name that stays inside its folder: not empty, not "." or "..", no '/'.  Task ids and
 * blob names come from the journal and from clients' URIs, so they are checked here once. */
static int name_ok(const char *s)
{
	return s && s[0] && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 && !strchr(s, '/');
}

/* snprintf that says when the path did not fit instead of handing out a truncated one (a
 * truncated path names some other file). */
static int build(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int build(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len) {
		if (len)
			buf[0] = 0;
		return -ENAMETOOLONG;
	}
	return 0;
}

/* A top-level folder of the state dir. */
int layout_dir(char *buf, size_t len, const char *state_dir, const char *top)
{
	if (!name_ok(top)) {
		if (len)
			buf[0] = 0;
		return -EINVAL;
	}
	return build(buf, len, "%s/%s", state_dir, top);
}

/* The one table of a task folder's parts; layout_task builds on it. */
const char *layout_task_rel(enum layout_task_part part)
{
	switch (part) {
	case LAYOUT_TASK_LOG: return "output.log";
	case LAYOUT_TASK_WORK: return "work";
	case LAYOUT_TASK_INPUTS: return "work/" LAYOUT_INPUTS;
	case LAYOUT_TASK_OUTPUTS: return "work/" LAYOUT_OUTPUTS;
	case LAYOUT_TASK_ARGS: return "work/" LAYOUT_ARGS_FILE;
	default: return "";
	}
}

/* The id is checked, not trusted: it comes from the journal and from clients' URIs. */
int layout_task(char *buf, size_t len, const char *state_dir, const char *id, enum layout_task_part part)
{
	const char *rel = layout_task_rel(part);
	if (!name_ok(id)) {
		if (len)
			buf[0] = 0;
		return -EINVAL;
	}
	if (!rel[0])
		return build(buf, len, "%s/" LAYOUT_TASKS "/%s", state_dir, id);
	return build(buf, len, "%s/" LAYOUT_TASKS "/%s/%s", state_dir, id, rel);
}

/* Blobs fan out over 256 folders by their first two hex digits, so no folder grows huge. */
int layout_blob(char *buf, size_t len, const char *state_dir, const char *hex)
{
	if (!name_ok(hex) || strlen(hex) < 2) {
		if (len)
			buf[0] = 0;
		return -EINVAL;
	}
	return build(buf, len, "%s/" LAYOUT_BLOBS "/%.2s/%s", state_dir, hex, hex);
}
