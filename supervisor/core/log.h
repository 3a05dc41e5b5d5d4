/* supervisor/log.h — structured log lines on stderr (never stdout: stdout is the MCP transport),
 * plus an optional sink that forwards them to MCP clients as notifications/message.
 * Line format:  2026-11-29T11:50:00.123Z level=info task=<id> msg="text"  (task= only if given). */
#ifndef FP_LOG_H
#define FP_LOG_H

enum fplog_level {
	FPLOG_DEBUG, FPLOG_INFO, FPLOG_NOTICE, FPLOG_WARNING,
	FPLOG_ERROR, FPLOG_CRITICAL, FPLOG_ALERT, FPLOG_EMERGENCY
};

typedef void (*fplog_sink)(void *arg, enum fplog_level lv, const char *task, const char *msg);

struct fplog {
	enum fplog_level min;   /* lines below this are not written to stderr */
	int fd;                 /* normally 2 */
	fplog_sink sink;        /* may be NULL; sees every line at or above FPLOG_DEBUG */
	void *sink_arg;
};

void fplog_init(struct fplog *lg, int fd, enum fplog_level min);
void fplog(const struct fplog *lg, enum fplog_level lv, const char *task, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* MCP level names (RFC 5424): "debug" … "emergency".  parse returns -1 for unknown names. */
const char *fplog_level_name(enum fplog_level lv);
int fplog_level_parse(const char *name);

#endif
