/* tests/unit/test_jsonrpc.c — proto/jsonrpc.c: classifying lines (requests, notifications,
 * responses, and each kind of invalid message with its error code), and the builders' output:
 * one line of valid UTF-8 JSON whatever strings went into it.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "proto/utf8.h"
#include "proto/jsonrpc.h"
#include "proto/frame.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void parse_is(struct tally *t, int line, const char *text, size_t len, enum rpc_kind kind,
                     int code, const char *msg)
{
	struct rpc_msg m;
	rpc_parse(text, len, &m);
	CHECKF(t, m.kind == kind && (kind != RPC_INVALID || (m.err_code == code &&
	       (!msg || (m.err_msg && strcmp(m.err_msg, msg) == 0)))),
	       "line %d: kind %d code %d msg %s", line, (int)m.kind, m.err_code,
	       m.err_msg ? m.err_msg : "(none)");
	rpc_msg_free(&m);
}
#define PARSE(text, kind, code, msg) parse_is(t, __LINE__, text, sizeof text - 1, kind, code, msg)

static void test_parse(struct tally *t)
{
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", RPC_REQUEST, 0, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", RPC_NOTIFICATION, 0, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}", RPC_RESPONSE, 0, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"} \t\r", RPC_REQUEST, 0, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"} x", RPC_INVALID, RPC_PARSE_ERROR, NULL);
	PARSE("[]", RPC_INVALID, RPC_INVALID_REQUEST, "Invalid Request: batches are not supported");
	PARSE("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"x\"}", RPC_INVALID, RPC_INVALID_REQUEST, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"x\"}", RPC_INVALID, RPC_INVALID_REQUEST,
	      "Invalid Request: id must be a string or an integer");
	/* Whole numbers past int64 (and the exponent forms of them) are refused, not converted:
	 * a cast of a double outside the range is undefined behaviour. */
	PARSE("{\"id\":6e66}", RPC_INVALID, RPC_INVALID_REQUEST, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":6e66,\"method\":\"x\"}", RPC_INVALID, RPC_INVALID_REQUEST,
	      "Invalid Request: id must be a string or an integer");
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":-1e300,\"result\":{}}", RPC_INVALID, RPC_INVALID_REQUEST,
	      "Invalid Request: id must be a string or an integer");
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":9223372036854775808,\"method\":\"x\"}", RPC_INVALID,
	      RPC_INVALID_REQUEST, "Invalid Request: id must be a string or an integer");   /* 2^63 */
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"x\"}", RPC_INVALID, RPC_INVALID_REQUEST,
	      "Invalid Request: id must be a string or an integer");   /* overflows to infinity */
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775808,\"method\":\"x\"}", RPC_REQUEST, 0, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1e18,\"method\":\"x\"}", RPC_REQUEST, 0, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":[]}", RPC_INVALID,
	      RPC_INVALID_PARAMS, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\\u0000\"}", RPC_INVALID, RPC_INVALID_REQUEST, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}\0", RPC_INVALID, RPC_PARSE_ERROR, NULL);

	/* A NUL would cut a string short (a path "ok.txt\u0000../x" would read as "ok.txt"). */
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"path\":\"ok.txt\\u0000../x\"}}",
	      RPC_INVALID, RPC_INVALID_PARAMS, "Invalid params: a string contains \\u0000 (NUL), which no string here may hold");
	PARSE("{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"k\\u0000\":1}}", RPC_INVALID, RPC_INVALID_PARAMS, NULL);
	/* an escaped backslash before "u0000" is not the NUL escape */
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"a\":\"\\\\u0000\"}}", RPC_REQUEST, 0, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"a\":\"\\u0001\"}}", RPC_REQUEST, 0, NULL);

	/* JSON text is UTF-8: raw bytes that are not would reach task arguments and answers. */
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"caf\xc3\xa9 \xf0\x9f\xa6\xa6\"}", RPC_REQUEST, 0, NULL);
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", RPC_INVALID, RPC_PARSE_ERROR,
	      "Parse error: not valid UTF-8");
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"a\":\"\xc3\"}}", RPC_INVALID,
	      RPC_PARSE_ERROR, "Parse error: not valid UTF-8");
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xed\xa0\x80\"}", RPC_INVALID, RPC_PARSE_ERROR,
	      "Parse error: not valid UTF-8");   /* an encoded surrogate */
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc0\xaf\"}", RPC_INVALID, RPC_PARSE_ERROR,
	      "Parse error: not valid UTF-8");   /* overlong */
	/* escapes are fine: cJSON turns them into UTF-8 itself */
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\\u00e9\\ud83e\\udda6\"}", RPC_REQUEST, 0, NULL);
}

/* The builders' text: one line, valid UTF-8, and the JSON it parses back to. */
static void built_is(struct tally *t, int line, char *s, const char *want)
{
	int ok = s && !strchr(s, '\n') && utf8_valid(s, strlen(s)) && strcmp(s, want) == 0;
	CHECKF(t, ok, "line %d:\n   got:  %s\n   want: %s", line, s ? s : "(null)", want);
	free(s);
}

static void test_build(struct tally *t)
{
	cJSON *id = cJSON_CreateNumber(7);
	built_is(t, __LINE__, rpc_error(id, RPC_INVALID_PARAMS, "Unknown tool: x", NULL),
	         "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32602,\"message\":\"Unknown tool: x\"}}");
	/* A message that clipped a name ("%.100s") inside a character: the stray byte becomes '?'. */
	built_is(t, __LINE__, rpc_error(id, RPC_INVALID_PARAMS, "Unknown tool: a\xc3", NULL),
	         "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32602,\"message\":\"Unknown tool: a?\"}}");
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "text", "\xc3\xa9 \xe2\x82 \xed\xa0\x80 \xf0\x9f\xa6\xa6 \xff\n");
	built_is(t, __LINE__, rpc_result(id, r),
	         "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"text\":\"\xc3\xa9 ?? ??? \xf0\x9f\xa6\xa6 ?\\n\"}}");
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "k\xe2", "v");
	built_is(t, __LINE__, rpc_notification("n", p),
	         "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"k?\":\"v\"}}");
	built_is(t, __LINE__, rpc_request(id, "elicitation/create", NULL),
	         "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"elicitation/create\"}");
	built_is(t, __LINE__, rpc_result(NULL, NULL), "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}");
	cJSON_Delete(id);
}

static void test_same_id(struct tally *t)
{
	cJSON *a = cJSON_CreateNumber(1), *b = cJSON_CreateString("1"), *c = cJSON_CreateNumber(1);
	CHECKF(t, rpc_same_id(a, c) && !rpc_same_id(a, b) && !rpc_same_id(a, NULL), "rpc_same_id");
	cJSON_Delete(a);
	cJSON_Delete(b);
	cJSON_Delete(c);
}

/* The text rpc_result() gives for the id of a parsed request line. */
static char *echo_id(const char *line)
{
	struct rpc_msg m;
	rpc_parse(line, strlen(line), &m);
	char *out = m.kind == RPC_REQUEST ? rpc_result(m.id, NULL) : NULL;
	rpc_msg_free(&m);
	return out;
}

/* Ids and progress tokens come back byte for byte, whatever a double would make of them. */
static void test_exact(struct tally *t)
{
	static const char *const ids[] = {
		"1000000000000000", "9007199254740993", "9223372036854775807", "-9223372036854775808",
		"12345678901234567", "1e3", "5.0", "0", "-7",
	};
	char line[256], want[256];
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", ids[i]);
		snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}", ids[i]);
		built_is(t, __LINE__, echo_id(line), want);
	}
	/* -2^63 - 1 is outside int64, as 2^63 is */
	PARSE("{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775809,\"method\":\"x\"}", RPC_INVALID,
	      RPC_INVALID_REQUEST, "Invalid Request: id must be a string or an integer");
	/* the first "id" of the top level, as cJSON finds it; nested ones and escaped keys */
	built_is(t, __LINE__, echo_id("{\"params\":{\"id\":5,\"x\":[{\"id\":6}]},\"jsonrpc\":\"2.0\","
	                             " \"i\\u0064\" : 9007199254740995 ,\"method\":\"ping\"}"),
	         "{\"jsonrpc\":\"2.0\",\"id\":9007199254740995,\"result\":{}}");
	built_is(t, __LINE__, echo_id("{\"jsonrpc\":\"2.0\",\"id\":\"9007199254740995\",\"method\":\"ping\"}"),
	         "{\"jsonrpc\":\"2.0\",\"id\":\"9007199254740995\",\"result\":{}}");

	/* a progress token copied into a notification */
	struct rpc_msg m;
	const char *call = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\","
	                   "\"_meta\":{\"progressToken\":18446744073709551617}}}";
	rpc_parse(call, strlen(call), &m);
	const cJSON *tok = cJSON_GetObjectItem(cJSON_GetObjectItem(m.params, "_meta"), "progressToken");
	cJSON *np = cJSON_CreateObject();
	cJSON_AddItemToObject(np, "progressToken", cJSON_Duplicate(tok, 0));
	cJSON_AddNumberToObject(np, "progress", 0.5);
	built_is(t, __LINE__, rpc_notification("notifications/progress", np),
	         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":"
	         "{\"progressToken\":18446744073709551617,\"progress\":0.5}}");
	rpc_msg_free(&m);

	/* two ids one double apart in their text only are different ids; small ones by value */
	struct rpc_msg a, b, c;
	const char *la = "{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"method\":\"ping\"}";
	const char *lb = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":9007199254740992}}";
	const char *lc = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":9007199254740993}}";
	rpc_parse(la, strlen(la), &a);
	rpc_parse(lb, strlen(lb), &b);
	rpc_parse(lc, strlen(lc), &c);
	const cJSON *rb = cJSON_GetObjectItem(b.params, "requestId"), *rc = cJSON_GetObjectItem(c.params, "requestId");
	CHECK(t, !rpc_same_id(a.id, rb) && rpc_same_id(a.id, rc), "big ids compare by their text");
	rpc_msg_free(&a);
	rpc_msg_free(&b);
	rpc_msg_free(&c);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_parse(&t);
	test_build(&t);
	test_same_id(&t);
	test_exact(&t);
	return check_done(&t);
}
