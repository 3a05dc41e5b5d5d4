/* tests/bench/mcpc.h — a minimal MCP client for the benchmarks: it starts `forkpoint mcp` with
 * pipes on stdin/stdout and speaks newline-delimited JSON-RPC to it.  Written in C so the
 * client's own cost stays small next to what is measured.
 *
 * Requests may be pipelined: mcpc_send() returns the id, mcpc_next_response() hands back
 * whichever response arrives next.  Notifications from the server are read and dropped.
 * Every wait has a deadline; on timeout the functions return -ETIMEDOUT.
 *
 * Ownership: cJSON values passed in are consumed; values handed out belong to the caller.
 * All functions return 0 or -errno (-EPROTO: the server answered with an error). */
#ifndef FP_BENCH_MCPC_H
#define FP_BENCH_MCPC_H

#include <stddef.h>
#include <sys/types.h>
#include <cJSON.h>

struct mcpc;

/* Start `bin mcp --config config --state state --log-level warning`, its stderr appended to
 * errlog.  The process starts at once; nothing is sent yet. */
int mcpc_spawn(const char *bin, const char *config, const char *state, const char *errlog,
               struct mcpc **out);
/* The same for any program speaking newline-delimited JSON-RPC on stdin/stdout (the bench's
 * echo floor): argv[0] is its path. */
int mcpc_spawn_argv(char *const argv[], const char *errlog, struct mcpc **out);
/* Close the server's stdin (it then stops its jobs and exits), wait up to timeout_ms, kill it
 * after that.  Frees c.  Returns the exit status (0..255), or -errno. */
int mcpc_close(struct mcpc *c, int timeout_ms);
pid_t mcpc_pid(const struct mcpc *c);

/* Send one request (params may be NULL); *id gets its id. */
int mcpc_send(struct mcpc *c, const char *method, cJSON *params, long *id);
/* The same with params given as JSON text (cheap to send in tight loops). */
int mcpc_send_json(struct mcpc *c, const char *method, const char *params_json, long *id);
/* Send a notification. */
int mcpc_notify(struct mcpc *c, const char *method, cJSON *params);
/* The next response from the server, whichever request it answers.  *resp is the whole
 * message (the caller frees it); *id its id. */
int mcpc_next_response(struct mcpc *c, int timeout_ms, long *id, cJSON **resp);

/* Send a request and wait for its answer; *result (may be NULL) gets the detached result.
 * Responses to other requests arriving first are dropped. */
int mcpc_call(struct mcpc *c, const char *method, cJSON *params, int timeout_ms, cJSON **result);
/* initialize + notifications/initialized. */
int mcpc_initialize(struct mcpc *c, int timeout_ms);

/* Params of a tools/call. */
cJSON *mcpc_tool_params(const char *tool, cJSON *args);
/* tools/call; *sc (may be NULL) gets structuredContent.  -EPROTO also for isError results. */
int mcpc_tool(struct mcpc *c, const char *tool, cJSON *args, int timeout_ms, cJSON **sc);
/* structuredContent of a tools/call response message, or NULL (also when isError is set). */
const cJSON *mcpc_structured(const cJSON *resp);

/* VmRSS of the server process, KiB. */
int mcpc_rss_kb(const struct mcpc *c, long *kb);

#endif
