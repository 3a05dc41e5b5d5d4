/* proto/jsonrpc.h — JSON-RPC 2.0 messages as used by MCP's stdio transport: one message per
 * line, no batches.  Parsing never fails hard: anything that is not a valid message becomes
 * RPC_INVALID with the JSON-RPC error code to answer and, where it could be recovered, the id;
 * a line that is not UTF-8 is a parse error.
 * Builders return a malloc'd single-line string of valid UTF-8 without the trailing newline
 * (NULL on ENOMEM); a byte of a broken character in a string (a clipped message) becomes '?'. */
#ifndef FP_JSONRPC_H
#define FP_JSONRPC_H

#include <stddef.h>
#include <cJSON.h>

#define RPC_PARSE_ERROR      (-32700)
#define RPC_INVALID_REQUEST  (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS   (-32602)
#define RPC_INTERNAL_ERROR   (-32603)
#define RPC_RESOURCE_NOT_FOUND (-32002)

enum rpc_kind { RPC_REQUEST, RPC_NOTIFICATION, RPC_RESPONSE, RPC_INVALID };

struct rpc_msg {
	enum rpc_kind kind;
	cJSON *root;           /* owned; NULL if the line was not JSON */
	const cJSON *id;       /* borrowed from root: request/response id; NULL for notifications
	                          and for invalid messages whose id could not be recovered */
	const char *method;    /* borrowed; requests and notifications */
	cJSON *params;         /* borrowed; may be NULL */
	const cJSON *result;   /* borrowed; responses */
	const cJSON *error;    /* borrowed; error responses */
	int err_code;          /* RPC_INVALID: the code to answer with */
	const char *err_msg;   /* RPC_INVALID: static text */
};

/* Parse one line (without its newline).  Always fills *m; call rpc_msg_free afterwards. */
void rpc_parse(const char *line, size_t len, struct rpc_msg *m);
void rpc_msg_free(struct rpc_msg *m);

/* 1 if two request ids are the same id (both strings or both numbers, equal). */
int rpc_same_id(const cJSON *a, const cJSON *b);

/* Builders.  `result`, `data` and `params` are consumed (may be NULL). */
char *rpc_result(const cJSON *id, cJSON *result);
char *rpc_error(const cJSON *id, int code, const char *message, cJSON *data);
char *rpc_notification(const char *method, cJSON *params);
char *rpc_request(const cJSON *id, const char *method, cJSON *params);

#endif
