/* tests/unit/test_mcpresult.c — supervisor/core/mcpresult.c: job-supplied MCP results keep only
 * valid content blocks (every MCP content type, required fields and their types), lose every
 * _meta and unknown key, and are refused for unknown block types, file:/script/data links and
 * other tasks' forkpoint:// resources, bad base64 and mistyped top-level fields.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "supervisor/core/mcpresult.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define TASK "0123456789abcdef0123456789abcdef"

/* Clean json; want NULL: it must be refused (with a reason naming want_why), else the cleaned
 * result must equal want. */
static void expect(struct tally *t, int line, const char *json, const char *want, const char *want_why)
{
	char why[240];
	cJSON *r = cJSON_Parse(json);
	if (!r)
		check_die("bad test JSON");
	int rc = mcpresult_clean(r, TASK, why, sizeof why);
	if (!want) {
		CHECKF(t, rc == -EINVAL && strstr(why, want_why), "line %d: rc %d, why [%s], want [%s]", line, rc, why,
		       want_why);
	} else {
		cJSON *w = cJSON_Parse(want);
		char *got = cJSON_PrintUnformatted(r);
		CHECKF(t, rc == 0 && w && cJSON_Compare(r, w, 1), "line %d: rc %d (%s), got %s", line, rc, why, got);
		free(got);
		cJSON_Delete(w);
	}
	cJSON_Delete(r);
}

static void test_kept(struct tally *t)
{
	expect(t, __LINE__, "{\"content\":[]}", "{\"content\":[]}", NULL);
	expect(t, __LINE__,
	       "{\"_meta\":{\"io.modelcontextprotocol/related-task\":{\"taskId\":\"x\"},\"forkpoint/taskHandle\":\"y\"},"
	       "\"content\":[{\"type\":\"text\",\"text\":\"hi\",\"_meta\":{\"a\":1},\"bogus\":2}],"
	       "\"structuredContent\":{\"k\":1},\"isError\":true,\"other\":3}",
	       "{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"structuredContent\":{\"k\":1},\"isError\":true}", NULL);
	expect(t, __LINE__,
	       "{\"content\":[{\"type\":\"image\",\"data\":\"aGk=\",\"mimeType\":\"image/png\","
	       "\"annotations\":{\"audience\":[\"user\",\"assistant\"],\"priority\":1,\"x\":1}},"
	       "{\"type\":\"audio\",\"data\":\"\",\"mimeType\":\"audio/wav\"}]}",
	       "{\"content\":[{\"type\":\"image\",\"data\":\"aGk=\",\"mimeType\":\"image/png\","
	       "\"annotations\":{\"audience\":[\"user\",\"assistant\"],\"priority\":1}},"
	       "{\"type\":\"audio\",\"data\":\"\",\"mimeType\":\"audio/wav\"}]}", NULL);
	expect(t, __LINE__,
	       "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"https://example.org/a\",\"name\":\"a\",\"size\":3,"
	       "\"title\":\"A\",\"_meta\":{}},"
	       "{\"type\":\"resource_link\",\"uri\":\"forkpoint://tasks/" TASK "/artifacts/out.txt\",\"name\":\"o\"},"
	       "{\"type\":\"resource\",\"resource\":{\"uri\":\"test://embedded\",\"text\":\"t\",\"_meta\":{}}}]}",
	       "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"https://example.org/a\",\"name\":\"a\",\"title\":\"A\",\"size\":3},"
	       "{\"type\":\"resource_link\",\"uri\":\"forkpoint://tasks/" TASK "/artifacts/out.txt\",\"name\":\"o\"},"
	       "{\"type\":\"resource\",\"resource\":{\"uri\":\"test://embedded\",\"text\":\"t\"}}]}", NULL);
}

static void test_refused(struct tally *t)
{
	expect(t, __LINE__, "[]", NULL, "content array");
	expect(t, __LINE__, "{\"content\":{}}", NULL, "content array");
	expect(t, __LINE__, "{\"content\":[],\"structuredContent\":[1]}", NULL, "structuredContent");
	expect(t, __LINE__, "{\"content\":[],\"isError\":\"yes\"}", NULL, "isError");
	expect(t, __LINE__, "{\"content\":[1]}", NULL, "content[0] must be an object");
	expect(t, __LINE__, "{\"content\":[{\"text\":\"x\"}]}", NULL, "content[0] must be an object");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"script\",\"text\":\"x\"}]}", NULL, "unknown content type");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\"}]}", NULL,
	       "content[1] needs \"text\"");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"text\",\"text\":5}]}", NULL, "wrong type");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"image\",\"data\":\"aGk=\"}]}", NULL, "mimeType");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"image\",\"data\":\"a b!\",\"mimeType\":\"image/png\"}]}", NULL,
	       "base64");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"audio\",\"data\":\"aGk\",\"mimeType\":\"audio/wav\"}]}", NULL,
	       "base64");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"file:///etc/passwd\",\"name\":\"p\"}]}",
	       NULL, "file:, script or data");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"FILE:///x\",\"name\":\"p\"}]}", NULL,
	       "file:, script or data");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"https://x\"}]}", NULL, "name");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"no scheme\",\"name\":\"n\"}]}", NULL,
	       "file:, script or data");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"data:text/html,x\",\"name\":\"d\"}]}",
	       NULL, "file:, script or data");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"https://a/\\u001b]0;x\",\"name\":\"e\"}]}",
	       NULL, "file:, script or data");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"forkpoint://tasks/"
	       "ffffffffffffffffffffffffffffffff/result\",\"name\":\"r\"}]}", NULL, "file:, script or data");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource_link\",\"uri\":\"javascript:alert(1)\",\"name\":\"j\"}]}",
	       NULL, "file:, script or data");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///etc/shadow\",\"text\":\"x\"}}]}",
	       NULL, "file:, script or data");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource\",\"resource\":{\"uri\":\"https://x/y\"}}]}", NULL,
	       "exactly one");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource\",\"resource\":{\"uri\":\"https://x/y\",\"text\":\"a\","
	       "\"blob\":\"aGk=\"}}]}", NULL, "exactly one");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"resource\"}]}", NULL, "needs \"resource\"");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"text\",\"text\":\"a\",\"annotations\":{\"audience\":[\"root\"]}}]}",
	       NULL, "annotations");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"text\",\"text\":\"a\",\"annotations\":{\"priority\":7}}]}", NULL,
	       "annotations");
	expect(t, __LINE__, "{\"content\":[{\"type\":\"text\",\"text\":\"a\",\"annotations\":[]}]}", NULL, "annotations");
}

static void test_many(struct tally *t)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *c = cJSON_AddArrayToObject(r, "content");
	char why[240];
	for (int i = 0; i <= MCPRESULT_MAX_BLOCKS; i++) {
		cJSON *b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "type", "text");
		cJSON_AddStringToObject(b, "text", "x");
		cJSON_AddItemToArray(c, b);
	}
	CHECKF(t, mcpresult_clean(r, TASK, why, sizeof why) == -EINVAL && strstr(why, "at most"), "too many blocks: %s", why);
	cJSON_Delete(r);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_kept(&t);
	test_refused(&t);
	test_many(&t);
	return check_done(&t);
}
