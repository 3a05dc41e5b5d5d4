/* tests/unit/test_jsontext.c — jsontext_pretty: two-space indentation, one space after a colon,
 * strings (with tabs, quotes, backslashes, colons) untouched, and the text parses back to a
 * document equal to the input.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "proto/jsontext.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect(struct tally *t, const char *json, const char *want)
{
	cJSON *v = cJSON_Parse(json);
	char *got = v ? jsontext_pretty(v) : NULL;
	CHECKF(t, got && strcmp(got, want) == 0, "%s\n   got:  %s\n   want: %s", json, got ? got : "(null)", want);
	cJSON *back = got ? cJSON_Parse(got) : NULL;
	CHECKF(t, back && cJSON_Compare(v, back, 1), "%s parses back to the same document", json);
	cJSON_Delete(back);
	cJSON_Delete(v);
	free(got);
}

int main(void)
{
	struct tally t = { 0 };
	expect(&t, "1", "1");
	expect(&t, "{}", "{\n}");
	expect(&t, "{\"a\":1}", "{\n  \"a\": 1\n}");
	expect(&t, "{\"a\":{\"b\":[1,2]}}", "{\n  \"a\": {\n    \"b\": [1, 2]\n  }\n}");
	/* a tab, a colon, quotes and a backslash inside strings are content, not layout */
	expect(&t, "{\"k\\t:\":\"v\\t\\\"x\\\\\\t:\"}", "{\n  \"k\\t:\": \"v\\t\\\"x\\\\\\t:\"\n}");
	expect(&t, "[{\"a\":\"b:\"},{\"c\":null}]", "[{\n    \"a\": \"b:\"\n  }, {\n    \"c\": null\n  }]");
	char *none = jsontext_pretty(NULL);
	CHECK(&t, none == NULL || strcmp(none, "") != 0, "NULL in, no crash");
	free(none);
	return check_done(&t);
}
