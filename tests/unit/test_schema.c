/* tests/unit/test_schema.c — the argument schema subset: schema_check() accepting the subset and
 * refusing everything else by name, and schema_validate() with exact messages, field paths and
 * defaults.  Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "proto/schema.h"
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *parse(const char *text)
{
	cJSON *j = cJSON_Parse(text);
	if (!j) {
		fprintf(stderr, "test bug: bad JSON: %s\n", text);
		exit(2);
	}
	return j;
}

/* ---- schema_check ---------------------------------------------------------------- */

static void check_ok(struct tally *t, int line, const char *schema)
{
	char err[512] = "";
	cJSON *s = parse(schema);
	int rc = schema_check(s, err, sizeof err);
	CHECKF(t, rc == 0, "line %d: schema_check(%s) = %d (%s), want 0", line, schema, rc, err);
	cJSON_Delete(s);
}

static void check_err(struct tally *t, int line, const char *schema, const char *want)
{
	char err[512] = "";
	cJSON *s = parse(schema);
	int rc = schema_check(s, err, sizeof err);
	CHECKF(t, rc == -1 && strcmp(err, want) == 0,
	      "line %d: schema_check(%s) = %d \"%s\", want -1 \"%s\"", line, schema, rc, err, want);
	cJSON_Delete(s);
}

static void test_check(struct tally *t)
{
	check_ok(t, __LINE__, "{}");
	check_ok(t, __LINE__, "{\"type\":\"object\"}");
	check_ok(t, __LINE__,
	         "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","
	         "\"title\":\"T\",\"description\":\"D\",\"examples\":[{}],"
	         "\"properties\":{"
	         " \"topic\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":200,\"format\":\"email\"},"
	         " \"sections\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10,\"default\":3},"
	         " \"ratio\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1},"
	         " \"mode\":{\"enum\":[\"fast\",\"slow\"],\"default\":\"fast\"},"
	         " \"v\":{\"const\":1},"
	         " \"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":0,\"maxItems\":5},"
	         " \"opt\":{\"type\":[\"string\",\"null\"]},"
	         " \"meta\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}"
	         "},\"required\":[\"topic\"],\"additionalProperties\":false}");

	/* unsupported keywords are refused by name, wherever they are */
	check_err(t, __LINE__, "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\",\"unevaluatedItems\":false}}}",
	          "properties.x.unevaluatedItems: unsupported keyword \"unevaluatedItems\"");
	check_err(t, __LINE__, "{\"oneOf\":[{\"$dynamicRef\":\"#a\"}]}", "oneOf[0].$dynamicRef: unsupported keyword \"$dynamicRef\"");
	check_err(t, __LINE__, "{\"items\":{\"additionalItems\":false}}", "items.additionalItems: unsupported keyword \"additionalItems\"");
	check_err(t, __LINE__, "{\"additionalProperties\":{\"unevaluatedProperties\":false}}",
	          "additionalProperties.unevaluatedProperties: unsupported keyword \"unevaluatedProperties\"");

	/* badly typed keywords */
	check_err(t, __LINE__, "{\"properties\":{\"sections\":{\"minimum\":\"1\"}}}",
	          "properties.sections.minimum: must be a number");
	check_err(t, __LINE__, "{\"exclusiveMinimum\":true}", "exclusiveMinimum: must be a number");
	check_err(t, __LINE__, "{\"type\":\"str\"}", "type: unknown type \"str\"");
	check_err(t, __LINE__, "{\"type\":[]}", "type: must be a type name or a non-empty array of type names");
	check_err(t, __LINE__, "{\"type\":[\"string\",5]}", "type[1]: must be a string");
	check_err(t, __LINE__, "{\"type\":[\"string\",\"string\"]}", "type[1]: duplicate type \"string\"");
	check_err(t, __LINE__, "{\"minLength\":-1}", "minLength: must be a non-negative integer");
	check_err(t, __LINE__, "{\"maxItems\":1.5}", "maxItems: must be a non-negative integer");
	check_err(t, __LINE__, "{\"required\":\"a\"}", "required: must be an array of property names");
	check_err(t, __LINE__, "{\"required\":[\"a\",1]}", "required[1]: must be a string");
	check_err(t, __LINE__, "{\"required\":[\"a\",\"a\"]}", "required[1]: duplicate name \"a\"");
	check_err(t, __LINE__, "{\"properties\":[]}", "properties: must be an object mapping names to schemas");
	check_err(t, __LINE__, "{\"properties\":{\"x\":1}}", "properties.x: must be a schema (an object, true or false)");
	check_err(t, __LINE__, "{\"items\":[{}]}", "items: must be a schema (the array form is draft-07's; use prefixItems)");
	check_err(t, __LINE__, "{\"additionalProperties\":\"no\"}", "additionalProperties: must be a schema (an object, true or false)");
	check_err(t, __LINE__, "{\"enum\":[]}", "enum: must be a non-empty array");
	check_err(t, __LINE__, "{\"examples\":{}}", "examples: must be an array");
	check_err(t, __LINE__, "{\"title\":1}", "title: must be a string");
	check_err(t, __LINE__, "{\"maximum\":1,\"maximum\":5}", "maximum: duplicate keyword");
	check_err(t, __LINE__, "{\"properties\":{\"a\":{},\"a\":{}}}", "properties.a: duplicate property");
	check_err(t, __LINE__, "{\"minimum\":5,\"maximum\":1}", "minimum: greater than maximum");
	check_err(t, __LINE__, "{\"properties\":{\"s\":{\"minLength\":3,\"maxLength\":2}}}",
	          "properties.s.minLength: greater than maxLength");

	/* defaults must satisfy their own schema */
	check_err(t, __LINE__, "{\"properties\":{\"n\":{\"type\":\"integer\",\"maximum\":10,\"default\":12}}}",
	          "properties.n.default: does not satisfy the schema (must be <= 10 (got 12))");
	check_err(t, __LINE__, "{\"properties\":{\"o\":{\"type\":\"object\",\"required\":[\"a\"],\"default\":{}}}}",
	          "properties.o.default: does not satisfy the schema (a: required)");
	check_ok(t, __LINE__, "{\"properties\":{\"o\":{\"type\":\"object\",\"properties\":{\"a\":{\"default\":1}},"
	                      "\"required\":[\"a\"],\"default\":{}}}}");

	/* a schema cannot be nested beyond the limit */
	char deep[2048] = "", *p = deep;
	for (int i = 0; i < 60; i++)
		p += sprintf(p, "{\"items\":");
	p += sprintf(p, "{}");
	for (int i = 0; i < 60; i++)
		*p++ = '}';
	*p = '\0';
	check_ok(t, __LINE__, deep);

	p = deep;
	for (int i = 0; i < 70; i++)
		p += sprintf(p, "{\"items\":");
	p += sprintf(p, "{}");
	for (int i = 0; i < 70; i++)
		*p++ = '}';
	*p = '\0';
	cJSON *s = parse(deep);
	char err[2048] = "";
	int rc = schema_check(s, err, sizeof err);
	CHECKF(t, rc == -1 && strstr(err, "schema nested more than 64 levels deep") &&
	      strncmp(err, "items.items.", 12) == 0, "deep schema: %d %s", rc, err);
	cJSON_Delete(s);

	/* a tiny error buffer truncates, never overflows */
	s = parse("{\"properties\":{\"x\":{\"pattern\":\"(a\"}}}");
	char small[8];
	rc = schema_check(s, small, sizeof small);
	CHECKF(t, rc == -1 && strcmp(small, "propert") == 0, "truncated error: %d \"%s\"", rc, small);
	cJSON_Delete(s);
}

/* ---- schema_validate ---------------------------------------------------------------- */

/* Compile `schema` (which must be accepted) or exit: a test's own schema is not under test. */
static struct schema *compiled(int line, const char *schema)
{
	char err[512] = "";
	cJSON *s = parse(schema);
	struct schema *sc = schema_compile(s, err, sizeof err);
	cJSON_Delete(s);
	if (!sc) {
		fprintf(stderr, "line %d: schema_compile: %s\n", line, err);
		exit(2);
	}
	return sc;
}

/* Validate `value` against `schema`; on success compare the (defaulted) value to `want`. */
static void valid(struct tally *t, int line, const char *schema, const char *value, const char *want)
{
	char err[512] = "x", field[128] = "x";
	struct schema *sc = compiled(line, schema);
	cJSON *v = parse(value), *w = parse(want ? want : value);
	int rc = schema_apply(sc, v, err, sizeof err, field, sizeof field);
	char *got = cJSON_PrintUnformatted(v);
	CHECKF(t, rc == 0 && cJSON_Compare(v, w, 1) && field[0] == '\0',
	      "line %d: validate(%s) = %d \"%s\" [%s], value %s", line, value, rc, err, field, got);
	free(got);
	schema_free(sc);
	cJSON_Delete(v);
	cJSON_Delete(w);
}

static void invalid(struct tally *t, int line, const char *schema, const char *value,
                    const char *want_err, const char *want_field)
{
	char err[512] = "", field[128] = "x";
	struct schema *sc = compiled(line, schema);
	cJSON *v = parse(value);
	int rc = schema_apply(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strcmp(err, want_err) == 0 && strcmp(field, want_field) == 0,
	      "line %d: validate(%s) = %d \"%s\" [%s], want \"%s\" [%s]",
	      line, value, rc, err, field, want_err, want_field);
	schema_free(sc);
	cJSON_Delete(v);
}

#define P(props) "{\"type\":\"object\",\"properties\":{" props "}}"

static void test_types(struct tally *t)
{
	valid(t, __LINE__, P("\"a\":{\"type\":\"string\"}"), "{\"a\":\"x\"}", NULL);
	invalid(t, __LINE__, P("\"a\":{\"type\":\"string\"}"), "{\"a\":1}", "a: must be a string", "a");
	valid(t, __LINE__, P("\"a\":{\"type\":\"number\"}"), "{\"a\":1.5}", NULL);
	invalid(t, __LINE__, P("\"a\":{\"type\":\"number\"}"), "{\"a\":\"1\"}", "a: must be a number", "a");
	valid(t, __LINE__, P("\"a\":{\"type\":\"integer\"}"), "{\"a\":3}", NULL);
	valid(t, __LINE__, P("\"a\":{\"type\":\"integer\"}"), "{\"a\":3.0}", NULL);
	invalid(t, __LINE__, P("\"a\":{\"type\":\"integer\"}"), "{\"a\":3.5}", "a: must be an integer", "a");
	valid(t, __LINE__, P("\"a\":{\"type\":\"boolean\"}"), "{\"a\":false}", NULL);
	invalid(t, __LINE__, P("\"a\":{\"type\":\"boolean\"}"), "{\"a\":0}", "a: must be a boolean", "a");
	valid(t, __LINE__, P("\"a\":{\"type\":\"null\"}"), "{\"a\":null}", NULL);
	invalid(t, __LINE__, P("\"a\":{\"type\":\"null\"}"), "{\"a\":\"\"}", "a: must be null", "a");
	valid(t, __LINE__, P("\"a\":{\"type\":\"array\"}"), "{\"a\":[]}", NULL);
	invalid(t, __LINE__, P("\"a\":{\"type\":\"array\"}"), "{\"a\":{}}", "a: must be an array", "a");
	valid(t, __LINE__, P("\"a\":{\"type\":\"object\"}"), "{\"a\":{}}", NULL);
	invalid(t, __LINE__, P("\"a\":{\"type\":\"object\"}"), "{\"a\":[]}", "a: must be an object", "a");
	valid(t, __LINE__, P("\"a\":{\"type\":[\"string\",\"null\"]}"), "{\"a\":null}", NULL);
	invalid(t, __LINE__, P("\"a\":{\"type\":[\"string\",\"null\"]}"), "{\"a\":1}",
	        "a: must be a string or null", "a");
	invalid(t, __LINE__, P("\"a\":{\"type\":[\"string\",\"number\",\"null\"]}"), "{\"a\":true}",
	        "a: must be a string, a number or null", "a");
	/* the root has no field name */
	invalid(t, __LINE__, "{\"type\":\"object\"}", "[1]", "must be an object", "");
	/* no "type": anything goes */
	valid(t, __LINE__, P("\"a\":{}"), "{\"a\":[1,{\"b\":null}]}", NULL);
}

static void test_numbers(struct tally *t)
{
	const char *s = P("\"sections\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10}");
	valid(t, __LINE__, s, "{\"sections\":1}", NULL);
	valid(t, __LINE__, s, "{\"sections\":10}", NULL);
	invalid(t, __LINE__, s, "{\"sections\":12}", "sections: must be <= 10 (got 12)", "sections");
	invalid(t, __LINE__, s, "{\"sections\":0}", "sections: must be >= 1 (got 0)", "sections");
	s = P("\"r\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1.5}");
	valid(t, __LINE__, s, "{\"r\":0.25}", NULL);
	invalid(t, __LINE__, s, "{\"r\":0}", "r: must be > 0 (got 0)", "r");
	invalid(t, __LINE__, s, "{\"r\":1.5}", "r: must be < 1.5 (got 1.5)", "r");
	invalid(t, __LINE__, s, "{\"r\":-0.1}", "r: must be > 0 (got -0.1)", "r");

	/* JSON cannot say Infinity, but an overflowing literal parses to it */
	invalid(t, __LINE__, P("\"n\":{\"type\":\"number\"}"), "{\"n\":1e400}", "n: must be a finite number", "n");
	cJSON *sc = parse(P("\"x\":{}")), *v = cJSON_CreateObject();
	cJSON_AddItemToObject(v, "x", cJSON_CreateNumber(NAN));
	char err[128], field[64];
	int rc = schema_validate(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strcmp(err, "x: must be a finite number") == 0, "NaN: %d %s", rc, err);
	cJSON_Delete(sc);
	cJSON_Delete(v);
}

static void test_strings(struct tally *t)
{
	const char *s = P("\"w\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
	valid(t, __LINE__, s, "{\"w\":\"ab\"}", NULL);
	/* code points, not bytes: "h\u00e9!" is 4 bytes but 3 characters */
	valid(t, __LINE__, s, "{\"w\":\"h\\u00e9!\"}", NULL);
	valid(t, __LINE__, s, "{\"w\":\"日本語\"}", NULL);                 /* 9 bytes, 3 characters */
	valid(t, __LINE__, s, "{\"w\":\"\\ud83d\\ude00\\ud83d\\ude00\"}", NULL); /* 8 bytes, 2 */
	invalid(t, __LINE__, s, "{\"w\":\"日本語です\"}", "w: must have at most 3 characters (got 5)", "w");
	invalid(t, __LINE__, s, "{\"w\":\"\\u00e9\"}", "w: must have at least 2 characters (got 1)", "w");
	s = P("\"w\":{\"type\":\"string\",\"maxLength\":1}");
	invalid(t, __LINE__, s, "{\"w\":\"ab\"}", "w: must have at most 1 character (got 2)", "w");
}

static void test_enum_const(struct tally *t)
{
	const char *s = P("\"mode\":{\"enum\":[\"fast\",\"slow\"]}");
	valid(t, __LINE__, s, "{\"mode\":\"slow\"}", NULL);
	invalid(t, __LINE__, s, "{\"mode\":\"medium\"}", "mode: must be one of \"fast\", \"slow\"", "mode");
	invalid(t, __LINE__, s, "{\"mode\":\"Fast\"}", "mode: must be one of \"fast\", \"slow\"", "mode");
	s = P("\"e\":{\"enum\":[1,null,[1,2],{\"a\":1}]}");
	valid(t, __LINE__, s, "{\"e\":{\"a\":1}}", NULL);
	valid(t, __LINE__, s, "{\"e\":[1,2]}", NULL);
	invalid(t, __LINE__, s, "{\"e\":[2,1]}", "e: must be one of 1, null, [1,2], {\"a\":1}", "e");
	s = P("\"c\":{\"const\":\"v1\"}");
	valid(t, __LINE__, s, "{\"c\":\"v1\"}", NULL);
	invalid(t, __LINE__, s, "{\"c\":\"v2\"}", "c: must be exactly \"v1\"", "c");
}

static void test_arrays(struct tally *t)
{
	const char *s = P("\"items\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"maxItems\":3}");
	valid(t, __LINE__, s, "{\"items\":[\"a\",\"b\",\"c\"]}", NULL);
	invalid(t, __LINE__, s, "{\"items\":[\"a\",\"b\",7]}", "items[2]: must be a string", "items[2]");
	invalid(t, __LINE__, s, "{\"items\":[]}", "items: must have at least 1 item (got 0)", "items");
	invalid(t, __LINE__, s, "{\"items\":[\"a\",\"b\",\"c\",\"d\"]}",
	        "items: must have at most 3 items (got 4)", "items");
	s = P("\"rows\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":"
	      "{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"]}}");
	invalid(t, __LINE__, s, "{\"rows\":[{\"name\":\"a\"},{\"name\":2}]}", "rows[1].name: must be a string",
	        "rows[1].name");
	invalid(t, __LINE__, s, "{\"rows\":[{\"name\":\"a\"},{}]}", "rows[1].name: required", "rows[1].name");
}

static void test_objects(struct tally *t)
{
	const char *s = "{\"type\":\"object\",\"properties\":{\"topic\":{\"type\":\"string\"},"
	                "\"sections\":{\"type\":\"integer\"}},\"required\":[\"topic\"],"
	                "\"additionalProperties\":false}";
	valid(t, __LINE__, s, "{\"topic\":\"x\"}", NULL);
	invalid(t, __LINE__, s, "{}", "topic: required", "topic");
	invalid(t, __LINE__, s, "{\"topic\":\"x\",\"extra\":1}",
	        "extra: unknown field (allowed: topic, sections)", "extra");
	invalid(t, __LINE__, "{\"type\":\"object\",\"additionalProperties\":false}", "{\"a\":1}",
	        "a: unknown field (allowed: none)", "a");
	/* keys are case-sensitive */
	invalid(t, __LINE__, s, "{\"Topic\":\"x\"}", "topic: required", "topic");
	/* additional properties default to allowed, or follow a schema */
	valid(t, __LINE__, P("\"a\":{}"), "{\"b\":1}", NULL);
	s = "{\"type\":\"object\",\"properties\":{\"a\":{}},\"additionalProperties\":{\"type\":\"integer\"}}";
	valid(t, __LINE__, s, "{\"a\":\"s\",\"b\":1}", NULL);
	invalid(t, __LINE__, s, "{\"a\":\"s\",\"b\":\"no\"}", "b: must be an integer", "b");
	/* a repeated field is ambiguous and refused */
	invalid(t, __LINE__, P("\"a\":{}"), "{\"a\":1,\"b\":2,\"a\":3}", "a: duplicate field", "a");
	/* nested paths */
	s = P("\"a\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"array\",\"items\":"
	      "{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"boolean\"}}}}}}");
	invalid(t, __LINE__, s, "{\"a\":{\"b\":[{},{\"c\":1}]}}", "a.b[1].c: must be a boolean", "a.b[1].c");
}

static void test_defaults(struct tally *t)
{
	const char *s = "{\"type\":\"object\",\"properties\":{"
	                "\"topic\":{\"type\":\"string\"},"
	                "\"sections\":{\"type\":\"integer\",\"maximum\":10,\"default\":3},"
	                "\"opts\":{\"type\":\"object\",\"properties\":{"
	                "  \"depth\":{\"type\":\"integer\",\"default\":2},"
	                "  \"tags\":{\"type\":\"array\",\"default\":[\"a\"]}}},"
	                "\"style\":{\"type\":\"object\",\"default\":{\"font\":\"serif\"},\"properties\":{"
	                "  \"size\":{\"type\":\"integer\",\"default\":12}}}"
	                "},\"required\":[\"sections\"]}";
	/* absent properties get their default; absent objects without one are not invented */
	valid(t, __LINE__, s, "{\"topic\":\"x\"}",
	      "{\"topic\":\"x\",\"sections\":3,\"style\":{\"font\":\"serif\",\"size\":12}}");
	/* present values win; defaults go into nested objects that are present */
	valid(t, __LINE__, s, "{\"sections\":5,\"opts\":{\"tags\":[]},\"style\":{}}",
	      "{\"sections\":5,\"opts\":{\"tags\":[],\"depth\":2},\"style\":{\"size\":12}}");
	/* a present value is still validated */
	invalid(t, __LINE__, s, "{\"sections\":11}", "sections: must be <= 10 (got 11)", "sections");
	invalid(t, __LINE__, s, "{\"opts\":{\"depth\":\"deep\"}}", "opts.depth: must be an integer", "opts.depth");

	/* inserted defaults are copies: mutating the result leaves the schema alone */
	cJSON *sc = parse(s), *v = parse("{}");
	char err[256], field[64];
	int rc = schema_validate(sc, v, err, sizeof err, field, sizeof field);
	cJSON *tags = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v, "style"), "font");
	CHECKF(t, rc == 0 && tags, "defaults into {}: %d %s", rc, err);
	if (tags)
		cJSON_SetValuestring(tags, "mono");
	cJSON *v2 = parse("{}");
	rc = schema_validate(sc, v2, err, sizeof err, field, sizeof field);
	char *txt = cJSON_PrintUnformatted(v2);
	CHECKF(t, rc == 0 && strstr(txt, "\"serif\""), "schema default changed: %s", txt);
	free(txt);
	cJSON_Delete(v);
	cJSON_Delete(v2);
	cJSON_Delete(sc);
}

/* A hostile value deeper than any schema costs nothing: validation follows the schema. */
static void test_depth(struct tally *t)
{
	char *deep = malloc(2 * 900 + 16);
	char *p = deep;
	p += sprintf(p, "{\"a\":");
	for (int i = 0; i < 900; i++)
		*p++ = '[';
	for (int i = 0; i < 900; i++)
		*p++ = ']';
	strcpy(p, "}");
	valid(t, __LINE__, P("\"a\":{\"type\":\"array\",\"items\":{\"type\":\"array\"}}"), deep, NULL);
	invalid(t, __LINE__, P("\"a\":{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":"
	                       "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}"),
	        deep, "a[0][0][0]: must be a string", "a[0][0][0]");
	free(deep);

	/* a schema that bypassed schema_check still cannot recurse without bound */
	cJSON *sc = cJSON_CreateObject(), *cur = sc;
	for (int i = 0; i < 200; i++) {
		cJSON *next = cJSON_CreateObject();
		cJSON_AddItemToObject(cur, "items", next);
		cur = next;
	}
	cJSON *v = cJSON_CreateArray(), *vc = v;
	for (int i = 0; i < 200; i++) {
		cJSON *next = cJSON_CreateArray();
		cJSON_AddItemToArray(vc, next);
		vc = next;
	}
	char err[2048], field[1024];
	int rc = schema_validate(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strstr(err, "nested more than 64 levels deep"), "deep validate: %d %s", rc, err);
	cJSON_Delete(sc);
	cJSON_Delete(v);
}

/* enum/const against deep values: each level must be compared once, not twice (a doubling at
 * every level is a hang at depth 40). */
static void test_enum_deep(struct tally *t)
{
	char schema[4096] = "{\"enum\":[", val[4096] = "";
	size_t n = strlen(schema), m = 0;
	for (int i = 0; i < 40; i++) {
		n += (size_t)snprintf(schema + n, sizeof schema - n, "{\"a\":1,\"b\":");
		m += (size_t)snprintf(val + m, sizeof val - m, "{\"b\":");
	}
	n += (size_t)snprintf(schema + n, sizeof schema - n, "0");
	m += (size_t)snprintf(val + m, sizeof val - m, "0");
	for (int i = 0; i < 40; i++) {
		n += (size_t)snprintf(schema + n, sizeof schema - n, "}");
		m += (size_t)snprintf(val + m, sizeof val - m, ",\"a\":1}");
	}
	snprintf(schema + n, sizeof schema - n, "]}");
	cJSON *sc = cJSON_Parse(schema), *v = cJSON_Parse(val);
	char err[512], field[256];
	CHECKF(t, sc && v && schema_check(sc, err, sizeof err) == 0, "deep enum schema: %s", err);
	double t0 = check_now();
	int rc = schema_validate(sc, v, err, sizeof err, field, sizeof field);
	double took = check_now() - t0;
	CHECKF(t, rc == 0, "deep equal value refused: %s", err);
	CHECKF(t, took < 1.0, "deep enum compare took %.2f s", took);
	cJSON *w = cJSON_GetObjectItem(v, "a");
	cJSON_SetNumberValue(w, 2);
	rc = schema_validate(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1, "a different deep value passed the enum");
	cJSON_Delete(sc);
	cJSON_Delete(v);
}

static int valid_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		int n = *p < 0x80 ? 0 : *p >= 0xF0 ? 3 : *p >= 0xE0 ? 2 : *p >= 0xC0 ? 1 : -1;
		if (n < 0)
			return 0;
		for (p++; n > 0; n--, p++)
			if ((*p & 0xC0) != 0x80)
				return 0;
	}
	return 1;
}

/* Truncated messages and fields stay whole UTF-8 characters on one line. */
static void test_message_hygiene(struct tally *t)
{
	char long_e[200] = "", schema[400], err[512], field[64];
	for (int i = 0; i < 70; i++)
		strcat(long_e, "\xc3\xa9");
	snprintf(schema, sizeof schema, P("\"m\":{\"enum\":[\"%s\"]}"), long_e);
	cJSON *sc = parse(schema), *v = parse("{\"m\":1}");
	int rc = schema_validate(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strstr(err, "...") && valid_utf8(err), "clipped enum: %s", err);
	cJSON_Delete(v);
	cJSON_Delete(sc);
	sc = parse("{\"type\":\"object\",\"additionalProperties\":false}");
	v = parse("{\"\xc3\xa9\xc3\xa9\":1}");
	char small[6];
	rc = schema_validate(sc, v, small, sizeof small, field, 4);
	CHECKF(t, rc == -1 && strcmp(field, "\xc3\xa9") == 0 && valid_utf8(small), "small field: [%s]", field);
	cJSON_Delete(v);
	cJSON_Delete(sc);

	invalid(t, __LINE__, "{\"type\":\"object\",\"additionalProperties\":false}", "{\"a\\nb\":1}",
	        "a b: unknown field (allowed: none)", "a\nb");

	/* A character cut inside a message (config.c's "%.80s"), stray and overlong bytes and an
	 * encoded surrogate become '?' one byte each; a cut at the very end is dropped. */
	char msg[] = "\"\xc3\xa9\xc3\" x \xff\xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80\tok\xe2\x82";
	schema_tidy(msg);
	CHECKF(t, strcmp(msg, "\"\xc3\xa9?\" x ???? ?? ???? ok") == 0, "tidy inside: [%s]", msg);
	char fine[] = "\xf0\x9f\xa6\xa6 \xe2\x82\xac \xc3\xa9";
	schema_tidy(fine);
	CHECKF(t, strcmp(fine, "\xf0\x9f\xa6\xa6 \xe2\x82\xac \xc3\xa9") == 0, "tidy keeps UTF-8: [%s]", fine);
	/* a key that is not UTF-8, echoed in a message */
	sc = parse("{\"type\":\"object\",\"additionalProperties\":false}");
	v = parse("{\"k\xff\":1}");
	rc = schema_validate(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strcmp(err, "k?: unknown field (allowed: none)") == 0, "non-UTF-8 key: %s", err);
	cJSON_Delete(v);
	cJSON_Delete(sc);
}

/* ---- JSON Schema 2020-12 keywords ------------------------------------------------------- */

static void test_multiple_of(struct tally *t)
{
	const char *s = P("\"n\":{\"type\":\"integer\",\"multipleOf\":3}");
	valid(t, __LINE__, s, "{\"n\":-9}", NULL);
	valid(t, __LINE__, s, "{\"n\":0}", NULL);
	invalid(t, __LINE__, s, "{\"n\":7}", "n: must be a multiple of 3 (got 7)", "n");
	/* exact for large whole numbers: 2^53 - 2 is 3 * 3002399751580330 */
	valid(t, __LINE__, s, "{\"n\":9007199254740990}", NULL);
	invalid(t, __LINE__, s, "{\"n\":9007199254740989}",
	        "n: must be a multiple of 3 (got 9007199254740989)", "n");
	/* fractions as a person means them */
	s = P("\"x\":{\"multipleOf\":0.1}");
	valid(t, __LINE__, s, "{\"x\":0.3}", NULL);
	valid(t, __LINE__, s, "{\"x\":12.7}", NULL);
	invalid(t, __LINE__, s, "{\"x\":0.35}", "x: must be a multiple of 0.1 (got 0.35)", "x");
	valid(t, __LINE__, P("\"x\":{\"multipleOf\":0.01}"), "{\"x\":19.99}", NULL);
	/* an overflowing quotient is no multiple */
	invalid(t, __LINE__, P("\"x\":{\"multipleOf\":1e-300}"), "{\"x\":1e300}",
	        "x: must be a multiple of 1e-300 (got 1e+300)", "x");
	check_err(t, __LINE__, "{\"multipleOf\":0}", "multipleOf: must be a number greater than 0");
	check_err(t, __LINE__, "{\"multipleOf\":-2}", "multipleOf: must be a number greater than 0");
}

static void test_formats(struct tally *t)
{
	static const struct { const char *fmt, *ok, *bad, *phrase; } cases[] = {
		{ "date-time", "2026-12-01T10:45:38.25+01:00", "2026-02-29T10:00:00Z",
		  "a date-time (RFC 3339, e.g. 2026-12-01T10:45:38Z)" },
		{ "date-time", "2024-02-29t23:59:60z", "2026-12-01 10:45:38Z", NULL },
		{ "date-time", "1998-12-31T18:59:60-05:00", "2026-12-01T10:45:60Z", NULL },
		{ "date-time", "2026-12-01T10:45:38Z", "2026-12-01T10:45:38", NULL },
		{ "date", "2026-12-01", "2026-13-01", "a date (RFC 3339, e.g. 2026-12-01)" },
		{ "time", "10:45:38Z", "25:00:00Z", "a time (RFC 3339, e.g. 10:45:38Z)" },
		{ "email", "ada.lovelace+x@example.org", "ada..lovelace@example.org", "an email address" },
		{ "email", "a@[192.0.2.1]", "@example.org", NULL },
		{ "email", "a@[IPv6:2001:db8::1]", "a@-example.org", NULL },
		{ "uri", "https://example.org/a%20b?q=1#frag", "/relative/path", "an absolute URI (RFC 3986)" },
		{ "uri", "urn:isbn:0451450523", "https://example.org/a b", NULL },
		{ "uri", "mailto:a@example.org", "https://example.org/%zz", NULL },
		{ "uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-42661417400",
		  "a UUID (8-4-4-4-12 hex digits)" },
		{ "uuid", "123E4567-E89B-12D3-A456-426614174000", "123e4567e89b12d3a456426614174000", NULL },
		{ "ipv4", "192.0.2.1", "192.0.2.01", "an IPv4 address" },
		{ "ipv6", "2001:db8::1", "2001:db8:::1", "an IPv6 address" },
		{ "hostname", "api.example-1.org", "-bad.example.org", "a host name" },
		{ "duration", "P1DT2H30M", "P1H", "a duration (ISO 8601, e.g. P1DT2H30M)" },
		{ "duration", "PT0.5S", "P", NULL },
		{ "duration", "P3W", "P1DT", NULL },
		{ "duration", "P1Y2M3W4DT5H6M7S", "P1D2Y", NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char schema[128], ok[160], bad[160], want[200];
		snprintf(schema, sizeof schema, P("\"f\":{\"type\":\"string\",\"format\":\"%s\"}"), cases[i].fmt);
		snprintf(ok, sizeof ok, "{\"f\":\"%s\"}", cases[i].ok);
		snprintf(bad, sizeof bad, "{\"f\":\"%s\"}", cases[i].bad);
		valid(t, __LINE__, schema, ok, NULL);
		if (cases[i].phrase) {
			snprintf(want, sizeof want, "f: must be %s", cases[i].phrase);
			invalid(t, __LINE__, schema, bad, want, "f");
		} else {
			char err[256], field[64];
			struct schema *sc = compiled(__LINE__, schema);
			cJSON *v = parse(bad);
			int rc = schema_apply(sc, v, err, sizeof err, field, sizeof field);
			CHECKF(t, rc == -1 && strcmp(field, "f") == 0, "%s accepted %s", cases[i].fmt, bad);
			cJSON_Delete(v);
			schema_free(sc);
		}
	}
	/* a format applies to strings only */
	valid(t, __LINE__, P("\"f\":{\"format\":\"email\"}"), "{\"f\":12}", NULL);
	check_err(t, __LINE__, "{\"format\":\"color\"}", "format: unsupported format \"color\" (supported: "
	          "date-time, date, time, duration, email, uri, uuid, ipv4, ipv6, hostname, forkpoint-upload, "
	          "password, binary)");
	/* formats that only annotate */
	valid(t, __LINE__, P("\"f\":{\"format\":\"forkpoint-upload\"},\"p\":{\"format\":\"password\"},"
	                     "\"b\":{\"format\":\"binary\"}"), "{\"f\":\"up-1\",\"p\":\"x\",\"b\":\"\"}", NULL);
	check_err(t, __LINE__, "{\"format\":1}", "format: must be a string");
}

static void test_patterns(struct tally *t)
{
	const char *s = P("\"id\":{\"type\":\"string\",\"pattern\":\"^[a-z][a-z0-9-]{2,}$\"}");
	valid(t, __LINE__, s, "{\"id\":\"job-42\"}", NULL);
	invalid(t, __LINE__, s, "{\"id\":\"Job\"}", "id: must match the pattern ^[a-z][a-z0-9-]{2,}$", "id");
	/* "$" is the very end, as in ECMA-262: no newline before it */
	invalid(t, __LINE__, s, "{\"id\":\"job\\n\"}", "id: must match the pattern ^[a-z][a-z0-9-]{2,}$", "id");
	/* a pattern is a search, not anchored unless it says so */
	valid(t, __LINE__, P("\"w\":{\"pattern\":\"b+\"}"), "{\"w\":\"abbbc\"}", NULL);
	/* UTF mode: "." is one character; \\p classes work */
	valid(t, __LINE__, P("\"c\":{\"pattern\":\"^.$\"}"), "{\"c\":\"\\u00e9\"}", NULL);
	valid(t, __LINE__, P("\"c\":{\"pattern\":\"^\\\\p{Lu}+$\"}"), "{\"c\":\"\\u00c9T\\u00c9\"}", NULL);
	/* a pattern applies to strings only */
	valid(t, __LINE__, P("\"w\":{\"pattern\":\"b+\"}"), "{\"w\":5}", NULL);
	/* ECMA-262 escapes: \\uhhhh, \\u{h...}, \\xhh */
	s = P("\"e\":{\"pattern\":\"^\\\\u0041\\\\u{e9}\\\\x42$\"}");
	valid(t, __LINE__, s, "{\"e\":\"A\u00e9B\"}", NULL);
	invalid(t, __LINE__, s, "{\"e\":\"u0041\"}", "e: must match the pattern ^\\u0041\\u{e9}\\x42$", "e");

	/* invalid patterns are refused at load, naming where they are */
	check_err(t, __LINE__, P("\"x\":{\"pattern\":\"(a\"}"),
	          "properties.x.pattern: invalid regular expression at offset 2: missing closing parenthesis");
	check_err(t, __LINE__, "{\"patternProperties\":{\"a{2,1}\":{}}}",
	          "patternProperties.a{2,1}: invalid regular expression at offset 5: numbers out of order "
	          "in {} quantifier");
	check_err(t, __LINE__, "{\"pattern\":5}", "pattern: must be a string (a regular expression)");
	check_err(t, __LINE__, "{\"pattern\":\"\\\\C\"}",
	          "pattern: invalid regular expression at offset 2: using \\C is disabled by the application");
	char big[4200] = "{\"pattern\":\"";
	memset(big + strlen(big), 'a', 4097);
	strcpy(big + 12 + 4097, "\"}");
	check_err(t, __LINE__, big, "pattern: pattern longer than 4096 bytes");
	char nest[600] = "{\"pattern\":\"", *p = nest + strlen(nest);
	for (int i = 0; i < 100; i++)
		*p++ = '(';
	for (int i = 0; i < 100; i++)
		*p++ = ')';
	strcpy(p, "\"}");
	cJSON *sc = parse(nest);
	char err[256];
	CHECKF(t, schema_check(sc, err, sizeof err) == -1 && strstr(err, "parentheses are too deeply nested"),
	       "deep parentheses: %s", err);
	cJSON_Delete(sc);
}

/* Catastrophic backtracking is stopped by PCRE2's match limit, quickly, and it is a failure
 * that says so, even under "not" (where a mere mismatch would pass). */
static void test_backtracking(struct tally *t)
{
	char val[128] = "{\"s\":\"";
	size_t n = strlen(val);
	for (int i = 0; i < 40; i++)
		val[n++] = 'a';
	strcpy(val + n, "!\"}");
	const char *want = "s: validation stopped: the pattern ^(a+)+$ needs too much backtracking on "
	                   "this value (match limit)";
	double t0 = check_now();
	invalid(t, __LINE__, P("\"s\":{\"pattern\":\"^(a+)+$\"}"), val, want, "s");
	invalid(t, __LINE__, P("\"s\":{\"not\":{\"pattern\":\"^(a+)+$\"}}"), val, want, "s");
	invalid(t, __LINE__, P("\"s\":{\"anyOf\":[{\"pattern\":\"^(a+)+$\"},{\"type\":\"string\"}]}"), val, want, "s");
	double took = check_now() - t0;
	CHECKF(t, took < (UNDER_ASAN ? 5.0 : 1.0), "backtracking took %.2f s", took);
	valid(t, __LINE__, P("\"s\":{\"pattern\":\"^(a+)+$\"}"), "{\"s\":\"aaaa\"}", NULL);

	/* Many strings that each backtrack a lot without reaching any one match's limit share one
	 * budget: under "not" (each mismatch a pass) validation still stops, naming the item. */
	size_t cap = 5000 * 20 + 16, len = 0;
	char *many = malloc(cap);
	len += (size_t)snprintf(many, cap, "[");
	for (int i = 0; i < 5000; i++)
		len += (size_t)snprintf(many + len, cap - len, "%s\"aaaaaaaaaaaaaa!\"", i ? "," : "");
	snprintf(many + len, cap - len, "]");
	struct schema *sc = compiled(__LINE__, "{\"items\":{\"not\":{\"pattern\":\"^(a+)+$\"}}}");
	cJSON *v = parse(many);
	char err[512], field[64];
	t0 = check_now();
	int rc = schema_apply(sc, v, err, sizeof err, field, sizeof field);
	took = check_now() - t0;
	CHECKF(t, rc == -1 && strstr(err, "]: validation stopped: the pattern ^(a+)+$ needs too much backtracking "
	       "on this value (match limit)") && field[0] == '[', "many near-limit matches: %d %s", rc, err);
	CHECKF(t, took < (UNDER_ASAN ? 10.0 : 2.0), "many near-limit matches took %.2f s", took);
	cJSON_Delete(v);
	schema_free(sc);
	free(many);
	/* a long string under a linear pattern is fine: the budget grows with the text */
	char *lng = malloc(60016);
	strcpy(lng, "{\"s\":\"");
	memset(lng + 6, 'a', 60000);
	strcpy(lng + 60006, "\"}");
	valid(t, __LINE__, P("\"s\":{\"pattern\":\"^(?!.*b)(a|c)+$\"}"), lng, NULL);
	free(lng);
}

static void test_composition(struct tally *t)
{
	/* what pydantic writes for Optional[str] */
	const char *s = P("\"a\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}");
	valid(t, __LINE__, s, "{\"a\":null}", NULL);
	valid(t, __LINE__, s, "{\"a\":\"x\"}", NULL);
	invalid(t, __LINE__, s, "{\"a\":1}",
	        "a: must match at least one schema in anyOf: [0] must be a string; [1] must be null", "a");
	/* a branch's reason about a deeper field keeps that field's name */
	s = P("\"o\":{\"anyOf\":[{\"required\":[\"x\"]},{\"properties\":{\"y\":{\"type\":\"integer\"}}}]}");
	invalid(t, __LINE__, s, "{\"o\":{\"y\":\"no\"}}",
	        "o: must match at least one schema in anyOf: [0] o.x: required; [1] o.y: must be an integer", "o");
	s = P("\"n\":{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}");
	valid(t, __LINE__, s, "{\"n\":1}", NULL);
	valid(t, __LINE__, s, "{\"n\":2.5}", NULL);
	invalid(t, __LINE__, s, "{\"n\":3}", "n: must match exactly one schema in oneOf (matches [0] and [1])", "n");
	invalid(t, __LINE__, s, "{\"n\":1.5}",
	        "n: must match exactly one schema in oneOf (matches none): [0] must be an integer; [1] must be >= 2 (got 1.5)", "n");
	s = P("\"n\":{\"allOf\":[{\"type\":\"integer\"},{\"maximum\":5}]}");
	valid(t, __LINE__, s, "{\"n\":5}", NULL);
	invalid(t, __LINE__, s, "{\"n\":6}", "n: must be <= 5 (got 6)", "n");
	s = P("\"w\":{\"type\":\"string\",\"not\":{\"enum\":[\"root\",\"admin\"]}}");
	valid(t, __LINE__, s, "{\"w\":\"ada\"}", NULL);
	invalid(t, __LINE__, s, "{\"w\":\"root\"}", "w: must not match the schema in \"not\"", "w");
	/* boolean schemas */
	valid(t, __LINE__, P("\"a\":true"), "{\"a\":[1]}", NULL);
	invalid(t, __LINE__, P("\"a\":false"), "{\"a\":1}", "a: not allowed", "a");
	invalid(t, __LINE__, "{\"not\":true}", "{}", "must not match the schema in \"not\"", "");
	check_err(t, __LINE__, "{\"anyOf\":[]}", "anyOf: must be a non-empty array of schemas");
	check_err(t, __LINE__, "{\"oneOf\":{}}", "oneOf: must be a non-empty array of schemas");
	check_err(t, __LINE__, "{\"allOf\":[{},{\"type\":\"nope\"}]}", "allOf[1].type: unknown type \"nope\"");
	check_err(t, __LINE__, "{\"not\":[]}", "not: must be a schema (an object, true or false)");
}

static void test_conditionals(struct tally *t)
{
	const char *s = "{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"file\",\"url\"]}},"
	                "\"if\":{\"properties\":{\"kind\":{\"const\":\"url\"}},\"required\":[\"kind\"]},"
	                "\"then\":{\"required\":[\"url\"]},\"else\":{\"required\":[\"path\"]}}";
	valid(t, __LINE__, s, "{\"kind\":\"url\",\"url\":\"u\"}", NULL);
	valid(t, __LINE__, s, "{\"kind\":\"file\",\"path\":\"p\"}", NULL);
	invalid(t, __LINE__, s, "{\"kind\":\"url\",\"path\":\"p\"}", "url: required", "url");
	invalid(t, __LINE__, s, "{}", "path: required", "path");
	/* if without then/else is harmless; then without if would do nothing and is refused */
	valid(t, __LINE__, "{\"if\":{\"type\":\"string\"}}", "{}", NULL);
	check_err(t, __LINE__, "{\"then\":{}}", "then: has no effect without \"if\"");
	check_err(t, __LINE__, "{\"if\":{},\"else\":{},\"maxContains\":1}", "maxContains: has no effect without \"contains\"");
	/* dependentRequired, dependentSchemas */
	s = "{\"type\":\"object\",\"dependentRequired\":{\"card\":[\"cvc\",\"expiry\"]},"
	    "\"dependentSchemas\":{\"coupon\":{\"properties\":{\"total\":{\"minimum\":10}}}}}";
	valid(t, __LINE__, s, "{\"card\":1,\"cvc\":1,\"expiry\":1}", NULL);
	valid(t, __LINE__, s, "{\"cvc\":1}", NULL);
	invalid(t, __LINE__, s, "{\"card\":1,\"cvc\":1}", "expiry: required when card is present", "expiry");
	valid(t, __LINE__, s, "{\"total\":5}", NULL);
	invalid(t, __LINE__, s, "{\"coupon\":\"x\",\"total\":5}", "total: must be >= 10 (got 5)", "total");
	check_err(t, __LINE__, "{\"dependentRequired\":{\"a\":[\"b\",\"b\"]}}",
	          "dependentRequired.a[1]: duplicate name \"b\"");
	check_err(t, __LINE__, "{\"dependentRequired\":{\"a\":\"b\"}}",
	          "dependentRequired.a: must be an array of property names");
	check_err(t, __LINE__, "{\"dependentSchemas\":{\"a\":3}}",
	          "dependentSchemas.a: must be a schema (an object, true or false)");
}

static void test_array_keywords(struct tally *t)
{
	const char *s = P("\"p\":{\"type\":\"array\",\"prefixItems\":[{\"type\":\"number\"},{\"type\":\"string\"}],"
	                  "\"items\":{\"type\":\"boolean\"}}");
	valid(t, __LINE__, s, "{\"p\":[1,\"a\",true,false]}", NULL);
	valid(t, __LINE__, s, "{\"p\":[1]}", NULL);
	invalid(t, __LINE__, s, "{\"p\":[1,2]}", "p[1]: must be a string", "p[1]");
	invalid(t, __LINE__, s, "{\"p\":[1,\"a\",3]}", "p[2]: must be a boolean", "p[2]");
	s = P("\"p\":{\"prefixItems\":[{},{}],\"items\":false}");
	valid(t, __LINE__, s, "{\"p\":[1,2]}", NULL);
	invalid(t, __LINE__, s, "{\"p\":[1,2,3]}", "p: must have at most 2 items (got 3)", "p");
	s = P("\"c\":{\"contains\":{\"type\":\"string\"},\"minContains\":2,\"maxContains\":3}");
	valid(t, __LINE__, s, "{\"c\":[\"a\",1,\"b\"]}", NULL);
	invalid(t, __LINE__, s, "{\"c\":[\"a\",1]}", "c: must contain at least 2 items matching \"contains\" (got 1)", "c");
	invalid(t, __LINE__, s, "{\"c\":[\"a\",\"b\",\"c\",\"d\"]}",
	        "c: must contain at most 3 items matching \"contains\" (got 4)", "c");
	invalid(t, __LINE__, P("\"c\":{\"contains\":{\"const\":1}}"), "{\"c\":[]}",
	        "c: must contain at least 1 item matching \"contains\" (got 0)", "c");
	/* uniqueItems: JSON equality, numbers by value, objects whatever their key order */
	s = P("\"u\":{\"uniqueItems\":true}");
	valid(t, __LINE__, s, "{\"u\":[1,\"1\",true,[1],{\"a\":1},null,0,false]}", NULL);
	invalid(t, __LINE__, s, "{\"u\":[1,2,1.0]}", "u: must not contain duplicate items ([0] and [2] are equal)", "u");
	invalid(t, __LINE__, s, "{\"u\":[{\"a\":1,\"b\":[2]},3,{\"b\":[2.0],\"a\":1}]}",
	        "u: must not contain duplicate items ([0] and [2] are equal)", "u");
	invalid(t, __LINE__, s, "{\"u\":[0,-0]}", "u: must not contain duplicate items ([0] and [1] are equal)", "u");
	valid(t, __LINE__, P("\"u\":{\"uniqueItems\":false}"), "{\"u\":[1,1]}", NULL);
	check_err(t, __LINE__, "{\"uniqueItems\":1}", "uniqueItems: must be true or false");
	check_err(t, __LINE__, "{\"prefixItems\":{}}", "prefixItems: must be a non-empty array of schemas");
	check_err(t, __LINE__, "{\"contains\":{},\"minContains\":3,\"maxContains\":2}", "minContains: greater than maxContains");

	/* uniqueItems over many items stays fast (sorted by hash, not compared pairwise) */
	size_t cap = 20000 * 8 + 32, len = 0;
	char *big = malloc(cap);
	len += (size_t)snprintf(big, cap, "{\"u\":[");
	for (int i = 0; i < 20000; i++)
		len += (size_t)snprintf(big + len, cap - len, "%s%d", i ? "," : "", i);
	snprintf(big + len, cap - len, "]}");
	double t0 = check_now();
	valid(t, __LINE__, s, big, NULL);
	CHECKF(t, check_now() - t0 < 1.0, "uniqueItems over 20000 items took %.2f s", check_now() - t0);
	free(big);
}

static void test_object_keywords(struct tally *t)
{
	const char *s = "{\"type\":\"object\",\"minProperties\":1,\"maxProperties\":2}";
	valid(t, __LINE__, s, "{\"a\":1}", NULL);
	invalid(t, __LINE__, s, "{}", "must have at least 1 property (got 0)", "");
	invalid(t, __LINE__, s, "{\"a\":1,\"b\":2,\"c\":3}", "must have at most 2 properties (got 3)", "");
	/* patternProperties, with additionalProperties for the rest */
	s = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},"
	    "\"patternProperties\":{\"^x-\":{\"type\":\"integer\"},\"count$\":{\"minimum\":0}},"
	    "\"additionalProperties\":false}";
	valid(t, __LINE__, s, "{\"name\":\"n\",\"x-a\":1,\"x-count\":2,\"count\":0}", NULL);
	invalid(t, __LINE__, s, "{\"x-a\":\"s\"}", "x-a: must be an integer", "x-a");
	/* every matching pattern applies */
	invalid(t, __LINE__, s, "{\"x-count\":-1}", "x-count: must be >= 0 (got -1)", "x-count");
	invalid(t, __LINE__, s, "{\"other\":1}",
	        "other: unknown field (allowed: name, names matching ^x-, names matching count$)", "other");
	s = "{\"type\":\"object\",\"patternProperties\":{\"^[a-z]+$\":{}},\"additionalProperties\":{\"type\":\"string\"}}";
	valid(t, __LINE__, s, "{\"abc\":1,\"X1\":\"s\"}", NULL);
	invalid(t, __LINE__, s, "{\"X1\":1}", "X1: must be a string", "X1");
	/* propertyNames */
	s = "{\"type\":\"object\",\"propertyNames\":{\"pattern\":\"^[a-z_]+$\",\"maxLength\":10}}";
	valid(t, __LINE__, s, "{\"snake_case\":1}", NULL);
	invalid(t, __LINE__, s, "{\"ok\":1,\"Bad\":2}", "Bad: invalid name (must match the pattern ^[a-z_]+$)", "Bad");
	invalid(t, __LINE__, s, "{\"much_too_long\":1}",
	        "much_too_long: invalid name (must have at most 10 characters (got 13))", "much_too_long");
	invalid(t, __LINE__, "{\"propertyNames\":false}", "{\"a\":1}", "a: invalid name (not allowed)", "a");
	valid(t, __LINE__, "{\"propertyNames\":false}", "{}", NULL);
	check_err(t, __LINE__, "{\"patternProperties\":[]}", "patternProperties: must be an object mapping patterns to schemas");
	check_err(t, __LINE__, "{\"minProperties\":3,\"maxProperties\":1}", "minProperties: greater than maxProperties");
	check_err(t, __LINE__, "{\"maxProperties\":-1}", "maxProperties: must be a non-negative integer");
}

/* The conformance suite's json-schema-2020-12 tool schema, as zod and pydantic write them. */
#define CONFORMANCE_SCHEMA \
	"{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\"," \
	"\"$defs\":{\"address\":{\"$anchor\":\"addressDef\",\"type\":\"object\",\"properties\":" \
	"{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}}}}," \
	"\"properties\":{\"name\":{\"type\":\"string\"},\"address\":{\"$ref\":\"#/$defs/address\"}," \
	"\"contactMethod\":{\"type\":\"string\",\"enum\":[\"phone\",\"email\"]},\"phone\":{\"type\":\"string\"}," \
	"\"email\":{\"type\":\"string\"}},\"allOf\":[{\"anyOf\":[{\"required\":[\"phone\"]},{\"required\":[\"email\"]}]}]," \
	"\"if\":{\"properties\":{\"contactMethod\":{\"const\":\"phone\"}},\"required\":[\"contactMethod\"]}," \
	"\"then\":{\"required\":[\"phone\"]},\"else\":{\"required\":[\"email\"]},\"additionalProperties\":false}"

static void test_refs(struct tally *t)
{
	const char *s = CONFORMANCE_SCHEMA;
	valid(t, __LINE__, s, "{\"name\":\"a\",\"email\":\"e\",\"address\":{\"city\":\"c\"}}", NULL);
	valid(t, __LINE__, s, "{\"contactMethod\":\"phone\",\"phone\":\"p\"}", NULL);
	invalid(t, __LINE__, s, "{\"address\":{\"city\":5},\"email\":\"e\"}", "address.city: must be a string",
	        "address.city");
	invalid(t, __LINE__, s, "{\"contactMethod\":\"phone\",\"email\":\"e\"}", "phone: required", "phone");
	invalid(t, __LINE__, s, "{\"name\":\"a\"}",
	        "must match at least one schema in anyOf: [0] phone: required; [1] email: required", "");
	/* pointers into any part of the schema, with ~0 ~1 and %XX escapes, and anchors */
	s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
	    "\"b\":{\"$ref\":\"#/properties/a/items\"},\"c\":{\"$ref\":\"#/$defs/a~1b~0c\"},"
	    "\"d\":{\"$ref\":\"#/$defs/per%25cent\"},\"e\":{\"$ref\":\"#pos\"},\"f\":{\"$ref\":\"#/definitions/s\"},"
	    "\"g\":{\"$ref\":\"#/$defs/list/prefixItems/1\"}},"
	    "\"$defs\":{\"a/b~c\":{\"type\":\"boolean\"},\"per%cent\":{\"maximum\":100},"
	    "\"p\":{\"$anchor\":\"pos\",\"exclusiveMinimum\":0},\"list\":{\"prefixItems\":[{},{\"type\":\"null\"}]}},"
	    "\"definitions\":{\"s\":{\"type\":\"string\"}}}";
	valid(t, __LINE__, s, "{\"a\":[1],\"b\":2,\"c\":true,\"d\":100,\"e\":1,\"f\":\"s\",\"g\":null}", NULL);
	invalid(t, __LINE__, s, "{\"b\":2.5}", "b: must be an integer", "b");
	invalid(t, __LINE__, s, "{\"c\":1}", "c: must be a boolean", "c");
	invalid(t, __LINE__, s, "{\"d\":101}", "d: must be <= 100 (got 101)", "d");
	invalid(t, __LINE__, s, "{\"e\":0}", "e: must be > 0 (got 0)", "e");
	invalid(t, __LINE__, s, "{\"f\":1}", "f: must be a string", "f");
	invalid(t, __LINE__, s, "{\"g\":1}", "g: must be null", "g");
	/* $ref with siblings: both apply */
	s = "{\"$defs\":{\"n\":{\"type\":\"integer\"}},\"properties\":{\"x\":{\"$ref\":\"#/$defs/n\",\"minimum\":3}}}";
	invalid(t, __LINE__, s, "{\"x\":2}", "x: must be >= 3 (got 2)", "x");
	invalid(t, __LINE__, s, "{\"x\":3.5}", "x: must be an integer", "x");
	/* what cannot be resolved is refused at load, naming the reference */
	check_err(t, __LINE__, P("\"a\":{\"$ref\":\"#/$defs/nope\"}"),
	          "properties.a.$ref: \"#/$defs/nope\" names nothing in the schema");
	check_err(t, __LINE__, P("\"a\":{\"$ref\":\"#nope\"}"), "properties.a.$ref: no $anchor \"nope\" in the schema");
	check_err(t, __LINE__, P("\"a\":{\"$ref\":\"other.json#/a\"}"),
	          "properties.a.$ref: only references inside the schema (\"#...\") are supported, not \"other.json#/a\"");
	check_err(t, __LINE__, P("\"a\":{\"$ref\":\"#/x%zz\"}"), "properties.a.$ref: malformed reference \"#/x%zz\"");
	check_err(t, __LINE__, P("\"a\":{\"$ref\":\"#/type\"}"),
	          "type: must be a schema (an object, true or false)");
	check_err(t, __LINE__, "{\"$defs\":{\"x\":{\"minimum\":\"1\"}}}", "$defs.x.minimum: must be a number");
	check_err(t, __LINE__, "{\"$defs\":{\"a\":{\"$anchor\":\"q\"},\"b\":{\"$anchor\":\"q\"}}}",
	          "$defs.b.$anchor: duplicate anchor \"q\"");
	check_err(t, __LINE__, "{\"$anchor\":\"1x\"}", "$anchor: must be a name (a letter or _, then letters, digits, _ - .)");
	check_err(t, __LINE__, "{\"$ref\":5}", "$ref: must be a string");
	check_ok(t, __LINE__, "{\"$id\":\"https://example.org/s.json\",\"$comment\":\"c\",\"deprecated\":false}");
	check_err(t, __LINE__, "{\"properties\":{\"a\":{\"$id\":\"a.json\"}}}",
	          "properties.a.$id: only the root schema may have an $id (embedded schema resources are not supported)");
}

/* What pydantic v2 and zod-to-json-schema export, unchanged. */
static void test_exported(struct tally *t)
{
	const char *pyd = "{\"$defs\":{\"Color\":{\"enum\":[\"red\",\"green\"],\"title\":\"Color\",\"type\":\"string\"},"
	    "\"Item\":{\"properties\":{\"name\":{\"title\":\"Name\",\"type\":\"string\"},\"price\":{\"anyOf\":"
	    "[{\"type\":\"number\"},{\"type\":\"null\"}],\"default\":null,\"title\":\"Price\"}},\"required\":[\"name\"],"
	    "\"title\":\"Item\",\"type\":\"object\"}},\"properties\":{\"color\":{\"$ref\":\"#/$defs/Color\"},"
	    "\"items\":{\"items\":{\"$ref\":\"#/$defs/Item\"},\"title\":\"Items\",\"type\":\"array\"},"
	    "\"note\":{\"anyOf\":[{\"maxLength\":10,\"type\":\"string\"},{\"type\":\"null\"}],\"default\":null,"
	    "\"title\":\"Note\"},\"secret\":{\"format\":\"password\",\"type\":\"string\",\"writeOnly\":true},"
	    "\"when\":{\"format\":\"date-time\",\"type\":\"string\"},\"wait\":{\"format\":\"duration\",\"type\":\"string\"}},"
	    "\"required\":[\"color\",\"items\"],\"title\":\"Order\",\"type\":\"object\"}";
	valid(t, __LINE__, pyd, "{\"color\":\"red\",\"items\":[{\"name\":\"a\"}],\"wait\":\"PT1H\"}",
	      "{\"color\":\"red\",\"items\":[{\"name\":\"a\",\"price\":null}],\"wait\":\"PT1H\",\"note\":null}");
	invalid(t, __LINE__, pyd, "{\"color\":\"blue\",\"items\":[]}", "color: must be one of \"red\", \"green\"", "color");
	invalid(t, __LINE__, pyd, "{\"color\":\"red\",\"items\":[{\"name\":\"a\",\"price\":\"1\"}]}",
	        "items[0].price: must match at least one schema in anyOf: [0] must be a number; [1] must be null",
	        "items[0].price");
	const char *zod = "{\"type\":\"object\",\"properties\":{\"email\":{\"type\":\"string\",\"format\":\"email\","
	    "\"pattern\":\"^(?!\\\\.)(?!.*\\\\.\\\\.)([A-Za-z0-9_'+\\\\-\\\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\\\-]*\\\\.)+[A-Za-z]{2,}$\"},"
	    "\"age\":{\"type\":\"integer\",\"exclusiveMinimum\":0},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
	    "\"minItems\":1},\"alias\":{\"$ref\":\"#/properties/email\"},\"kind\":{\"type\":[\"string\",\"null\"]}},"
	    "\"required\":[\"email\"],\"additionalProperties\":false,\"$schema\":\"http://json-schema.org/draft-07/schema#\"}";
	valid(t, __LINE__, zod, "{\"email\":\"ada@example.org\",\"alias\":\"a.b@example.org\",\"tags\":[\"x\"],\"kind\":null}", NULL);
	/* the pattern is checked before the format; a long pattern is shortened in the message */
	invalid(t, __LINE__, zod, "{\"email\":\"ada@example.org\",\"alias\":\".a@example.org\"}",
	        "alias: must match the pattern ^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-...",
	        "alias");
	invalid(t, __LINE__, zod, "{\"email\":\"ada@localhost\"}", "email: must match the pattern "
	        "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-...", "email");
	invalid(t, __LINE__, zod, "{\"email\":\"ada@example.org\",\"age\":0}", "age: must be > 0 (got 0)", "age");
}

/* A recursive tree schema works; a cycle that never descends into the value is refused. */
static void test_cycles(struct tally *t)
{
	const char *tree = "{\"$ref\":\"#/$defs/node\",\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":"
	                   "{\"name\":{\"type\":\"string\"},\"children\":{\"type\":\"array\",\"items\":"
	                   "{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"name\"],\"additionalProperties\":false}}}";
	valid(t, __LINE__, tree, "{\"name\":\"r\",\"children\":[{\"name\":\"a\",\"children\":[{\"name\":\"b\"}]},"
	      "{\"name\":\"c\",\"children\":[]}]}", NULL);
	invalid(t, __LINE__, tree, "{\"name\":\"r\",\"children\":[{\"name\":\"a\",\"children\":[{\"nom\":\"b\"}]}]}",
	        "children[0].children[0].name: required", "children[0].children[0].name");
	/* the root itself, recursively */
	const char *list = "{\"type\":[\"object\",\"null\"],\"properties\":{\"next\":{\"$ref\":\"#\"},"
	                   "\"v\":{\"type\":\"integer\"}}}";
	valid(t, __LINE__, list, "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}", NULL);
	invalid(t, __LINE__, list, "{\"next\":{\"next\":{\"v\":\"x\"}}}", "next.next.v: must be an integer", "next.next.v");
	/* a value deeper than the limit under a recursive schema is refused, not recursed into */
	char *deep = malloc(70 * 12 + 16), *p = deep;
	for (int i = 0; i < 70; i++)
		p += sprintf(p, "{\"next\":");
	p += sprintf(p, "null");
	for (int i = 0; i < 70; i++)
		*p++ = '}';
	*p = '\0';
	struct schema *sc = compiled(__LINE__, list);
	cJSON *v = parse(deep);
	char err[1024], field[1024];
	int rc = schema_apply(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strstr(err, ": nested more than 64 levels deep") && strncmp(field, "next.next.", 10) == 0,
	       "deep recursive value: %d %s", rc, err);
	cJSON_Delete(v);
	schema_free(sc);
	free(deep);

	check_err(t, __LINE__, "{\"$ref\":\"#\"}",
	          "$ref: makes a cycle: a schema applies to the same value again without descending into it");
	check_err(t, __LINE__, "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"anyOf\":[{\"type\":\"string\"},"
	          "{\"$ref\":\"#/$defs/a\"}]}},\"properties\":{\"x\":{\"$ref\":\"#/$defs/a\"}}}",
	          "$defs.b.anyOf[1].$ref: makes a cycle: a schema applies to the same value again without descending into it");
	check_err(t, __LINE__, "{\"not\":{\"allOf\":[{\"$ref\":\"#\"}]}}",
	          "not.allOf[0].$ref: makes a cycle: a schema applies to the same value again without descending into it");
	/* an in-place chain longer than the limit */
	char chain[8192] = "{\"$defs\":{", *c = chain + strlen(chain);
	for (int i = 0; i < 40; i++)
		c += sprintf(c, "%s\"d%d\":{\"$ref\":\"#/$defs/d%d\"}", i ? "," : "", i, i + 1);
	c += sprintf(c, ",\"d40\":{}},\"$ref\":\"#/$defs/d0\"}");
	cJSON *s = parse(chain);
	rc = schema_check(s, err, sizeof err);
	CHECKF(t, rc == -1 && strstr(err, "schemas apply to the same value more than 32 levels deep"),
	       "long in-place chain: %s", err);
	cJSON_Delete(s);
}

/* Fan-out (anyOf over $ref, each level doubling) is stopped by the step budget, quickly. */
static void test_fanout(struct tally *t)
{
	char schema[8192] = "{\"$defs\":{", *p = schema + strlen(schema);
	for (int i = 0; i < 14; i++)
		p += sprintf(p, "%s\"d%d\":{\"anyOf\":[{\"$ref\":\"#/$defs/d%d\"},{\"$ref\":\"#/$defs/d%d\"},"
		             "{\"$ref\":\"#/$defs/d%d\"},{\"$ref\":\"#/$defs/d%d\"}]}",
		             i ? "," : "", i, i + 1, i + 1, i + 1, i + 1);
	p += sprintf(p, ",\"d14\":{\"type\":\"string\"}},\"properties\":{\"x\":{\"$ref\":\"#/$defs/d0\"}}}");
	struct schema *sc = compiled(__LINE__, schema);
	cJSON *v = parse("{\"x\":1}");
	char err[512], field[64];
	double t0 = check_now();
	int rc = schema_apply(sc, v, err, sizeof err, field, sizeof field);
	double took = check_now() - t0;
	CHECKF(t, rc == -1 && strcmp(err, "x: validation stopped: it takes too many steps (the schema fans out "
	       "too much for this value)") == 0 && strcmp(field, "x") == 0, "fan-out: %d %s [%s]", rc, err, field);
	CHECKF(t, took < (UNDER_ASAN ? 5.0 : 0.5), "fan-out took %.2f s", took);
	/* the same under "not": running out is never a pass */
	cJSON_Delete(v);
	schema_free(sc);
	p = strstr(schema, ",\"properties\"");
	strcpy(p, ",\"properties\":{\"x\":{\"not\":{\"$ref\":\"#/$defs/d0\"}}}}");
	sc = compiled(__LINE__, schema);
	v = parse("{\"x\":1}");
	rc = schema_apply(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strstr(err, "validation stopped"), "fan-out under not: %d %s", rc, err);
	cJSON_Delete(v);
	schema_free(sc);
	/* a string matching passes without running out */
	sc = compiled(__LINE__, "{\"$defs\":{\"a\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"number\"}]}},"
	              "\"items\":{\"$ref\":\"#/$defs/a\"}}");
	v = parse("[\"a\",1,\"b\",2]");
	CHECKF(t, schema_apply(sc, v, err, sizeof err, field, sizeof field) == 0, "small anyOf: %s", err);
	cJSON_Delete(v);
	schema_free(sc);
	/* a large value under a simple schema fits: the step budget grows with the value */
	size_t bcap = 300000 * 8 + 16, blen = 0;
	char *big = malloc(bcap);
	blen += (size_t)snprintf(big, bcap, "[");
	for (int i = 0; i < 300000; i++)
		blen += (size_t)snprintf(big + blen, bcap - blen, "%s%d", i ? "," : "", i);
	snprintf(big + blen, bcap - blen, "]");
	sc = compiled(__LINE__, "{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"integer\",\"minimum\":0}}");
	v = parse(big);
	CHECKF(t, schema_apply(sc, v, err, sizeof err, field, sizeof field) == 0, "300000 items: %s", err);
	cJSON_Delete(v);
	schema_free(sc);
	free(big);
	/* too many subschemas */
	size_t cap = 10001 * 12 + 64, len = 0;
	char *wide = malloc(cap);
	len += (size_t)snprintf(wide, cap, "{\"anyOf\":[");
	for (int i = 0; i < 10001; i++)
		len += (size_t)snprintf(wide + len, cap - len, "%s{}", i ? "," : "");
	snprintf(wide + len, cap - len, "]}");
	cJSON *w = parse(wide);
	rc = schema_check(w, err, sizeof err);
	CHECKF(t, rc == -1 && strstr(err, "schema has more than 10000 subschemas"), "wide schema: %s", err);
	cJSON_Delete(w);
	free(wide);
}

/* Defaults come from the applicators that always apply, never from a branch that may not. */
static void test_defaults_composed(struct tally *t)
{
	const char *s = "{\"type\":\"object\",\"$defs\":{\"base\":{\"properties\":{\"level\":{\"default\":\"info\"}}}},"
	                "\"allOf\":[{\"$ref\":\"#/$defs/base\"},{\"properties\":{\"n\":{\"default\":1}}}],"
	                "\"anyOf\":[{\"properties\":{\"never\":{\"default\":0}}}],"
	                "\"patternProperties\":{\"^o_\":{\"properties\":{\"x\":{\"default\":true}}}},"
	                "\"properties\":{\"t\":{\"prefixItems\":[{\"properties\":{\"y\":{\"default\":2}}}]}}}";
	valid(t, __LINE__, s, "{\"o_a\":{},\"t\":[{}]}",
	      "{\"o_a\":{\"x\":true},\"t\":[{\"y\":2}],\"level\":\"info\",\"n\":1}");
	/* a default is checked against its schema, refs included */
	check_err(t, __LINE__, "{\"$defs\":{\"n\":{\"type\":\"integer\"}},\"properties\":{\"a\":{\"$ref\":\"#/$defs/n\","
	          "\"default\":\"x\"}}}", "properties.a.default: does not satisfy the schema (must be an integer)");
	check_err(t, __LINE__, "{\"properties\":{\"a\":{\"format\":\"date\",\"default\":\"today\"}}}",
	          "properties.a.default: does not satisfy the schema (must be a date (RFC 3339, e.g. 2026-12-01))");
}

/* A schema built in code, validated by schema_validate(), compiles on the way. */
static void test_validate_json(struct tally *t)
{
	cJSON *sc = parse("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"default\":4}}}");
	cJSON *v = parse("{}");
	char err[256] = "x", field[64] = "x";
	int rc = schema_validate(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == 0 && cJSON_GetObjectItem(v, "n") && field[0] == '\0', "validate: %d %s", rc, err);
	cJSON_Delete(sc);
	cJSON_Delete(v);
	sc = parse("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"nope\"}}}");
	v = parse("{}");
	rc = schema_validate(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strcmp(err, "invalid schema: properties.n.type: unknown type \"nope\"") == 0 &&
	       field[0] == '\0', "invalid schema: %d %s [%s]", rc, err, field);
	cJSON_Delete(sc);
	cJSON_Delete(v);
}

/* Strings that are not UTF-8 (cJSON lets them through) under a pattern are refused, not matched. */
static void test_pattern_bytes(struct tally *t)
{
	struct schema *sc = compiled(__LINE__, P("\"s\":{\"pattern\":\"a\"}"));
	cJSON *v = parse("{\"s\":\"a\xff\"}");
	char err[256], field[64];
	int rc = schema_apply(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strcmp(err, "s: must be valid UTF-8") == 0, "bytes: %d %s", rc, err);
	cJSON_Delete(v);
	schema_free(sc);
	sc = compiled(__LINE__, "{\"patternProperties\":{\"a\":{}},\"additionalProperties\":false}");
	v = parse("{\"a\xff\":1}");
	rc = schema_apply(sc, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strcmp(err, "a?: must be valid UTF-8") == 0, "byte key: %d %s", rc, err);
	cJSON_Delete(v);
	schema_free(sc);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_check(&t);
	test_types(&t);
	test_numbers(&t);
	test_strings(&t);
	test_enum_const(&t);
	test_enum_deep(&t);
	test_arrays(&t);
	test_objects(&t);
	test_defaults(&t);
	test_depth(&t);
	test_message_hygiene(&t);
	test_multiple_of(&t);
	test_formats(&t);
	test_patterns(&t);
	test_backtracking(&t);
	test_pattern_bytes(&t);
	test_composition(&t);
	test_conditionals(&t);
	test_array_keywords(&t);
	test_object_keywords(&t);
	test_refs(&t);
	test_exported(&t);
	test_cycles(&t);
	test_fanout(&t);
	test_defaults_composed(&t);
	test_validate_json(&t);
	return check_done(&t);
}
