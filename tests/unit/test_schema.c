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

/* Validate `value` against `schema`; on success compare the (defaulted) value to `want`. */
static void valid(struct tally *t, int line, const char *schema, const char *value, const char *want)
{
	char err[512] = "x", field[128] = "x";
	cJSON *s = parse(schema), *v = parse(value), *w = parse(want ? want : value);
	int rc = schema_check(s, err, sizeof err);
	CHECKF(t, rc == 0, "line %d: schema_check: %s", line, err);
	rc = schema_validate(s, v, err, sizeof err, field, sizeof field);
	char *got = cJSON_PrintUnformatted(v);
	CHECKF(t, rc == 0 && cJSON_Compare(v, w, 1) && field[0] == '\0',
	      "line %d: validate(%s) = %d \"%s\" [%s], value %s", line, value, rc, err, field, got);
	free(got);
	cJSON_Delete(s);
	cJSON_Delete(v);
	cJSON_Delete(w);
}

static void invalid(struct tally *t, int line, const char *schema, const char *value,
                    const char *want_err, const char *want_field)
{
	char err[512] = "", field[128] = "x";
	cJSON *s = parse(schema), *v = parse(value);
	int rc = schema_check(s, err, sizeof err);
	CHECKF(t, rc == 0, "line %d: schema_check: %s", line, err);
	rc = schema_validate(s, v, err, sizeof err, field, sizeof field);
	CHECKF(t, rc == -1 && strcmp(err, want_err) == 0 && strcmp(field, want_field) == 0,
	      "line %d: validate(%s) = %d \"%s\" [%s], want \"%s\" [%s]",
	      line, value, rc, err, field, want_err, want_field);
	cJSON_Delete(s);
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
	return check_done(&t);
}
