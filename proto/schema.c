/* supervisor/schema.c — see schema.h.
 *
 * Two walks over the same subset.  schema_check() proves that a schema uses only keywords this
 * file enforces and that each is well formed (including that every "default" satisfies its own
 * schema); schema_validate() then trusts that and checks a value.  Both bound their recursion at
 * SCHEMA_MAX_DEPTH: schemas come from an operator's config and values from a model, and neither
 * may exhaust the stack.  Messages go into the caller's buffer, truncated if they do not fit;
 * nothing here prints or allocates beyond the cJSON copies of defaults. */
#include "proto/schema.h"
#include "proto/utf8.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA_MAX_DEPTH 64
#define PATH_CHARS 512
/* 2^53: the largest count a double holds exactly, more than any string or array can have. */
#define COUNT_MAX 9007199254740992.0

/* Messages travel inside JSON to a model and into logs: after any truncation they must still
 * be one line of whole UTF-8 characters.  Clipping with "%.80s" can cut a character inside a
 * message, not only at its end, and echoed keys may not be UTF-8 at all: every byte that does
 * not belong to a well-formed character becomes '?'. */
void schema_tidy(char *s)
{
	size_t len = utf8_trim_tail(s, strlen(s));
	unsigned char *p = (unsigned char *)s;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_char_len((const char *)p + i, len - i);
		if (n == 0) {
			p[i++] = '?';
			continue;
		}
		if (p[i] < 0x20 || p[i] == 0x7F)
			p[i] = ' ';
		i += n;
	}
}

/* A dotted path ("a.b[2].c") built in place while descending; clipped, never overflowing. */
struct path {
	char s[PATH_CHARS];
	size_t len;
};

static size_t path_append(struct path *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t path_append(struct path *p, const char *fmt, ...)
{
	size_t old = p->len;
	size_t room = sizeof p->s - p->len;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(p->s + p->len, room, fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < room)
		p->len += (size_t)n;
	else if (n > 0)
		p->len = utf8_trim_tail(p->s, sizeof p->s - 1);
	return old;
}

static size_t path_key(struct path *p, const char *key)
{
	return path_append(p, "%s%s", p->len ? "." : "", key);
}

static size_t path_index(struct path *p, size_t i)
{
	return path_append(p, "[%zu]", i);
}

static void path_restore(struct path *p, size_t len)
{
	p->len = len;
	p->s[len] = '\0';
}

/* A bounded string builder over the caller's err buffer. */
struct msg {
	char *s;
	size_t cap;
	size_t len;
};

static void msg_add(struct msg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msg_add(struct msg *m, const char *fmt, ...)
{
	if (m->cap == 0 || m->len >= m->cap - 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(m->s + m->len, m->cap - m->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		m->len += (size_t)n < m->cap - m->len ? (size_t)n : m->cap - m->len - 1;
}

/* Start a message "path: " (or nothing for the root, where there is no name to give). */
static struct msg msg_start(char *err, size_t errlen, const struct path *p)
{
	struct msg m = { err, errlen, 0 };
	if (errlen)
		err[0] = '\0';
	if (p->len)
		msg_add(&m, "%s: ", p->s);
	return m;
}

/* Append a JSON value in compact form, shortened so one huge enum cannot drown the message. */
static void msg_json(struct msg *m, const cJSON *v)
{
	char *txt = cJSON_PrintUnformatted(v);
	if (!txt) {
		msg_add(m, "?");
		return;
	}
	if (strlen(txt) > 60)
		msg_add(m, "%.*s...", (int)utf8_clip(txt, strlen(txt), 57), txt);
	else
		msg_add(m, "%s", txt);
	free(txt);
}

int schema_is_integral(double d)
{
	/* without libm: every double beyond 2^53 is whole; below it a cast round-trip tells */
	if (!isfinite(d))
		return 0;
	if (d >= 9007199254740992.0 || d <= -9007199254740992.0)
		return 1;
	return d == (double)(long long)d;
}

/* Numbers print as JSON would show them: integers without a fraction, others round-tripping. */
static void msg_num(struct msg *m, double d)
{
	if (schema_is_integral(d) && d < 1e15 && d > -1e15) {
		msg_add(m, "%.0f", d);
		return;
	}
	char buf[32];
	snprintf(buf, sizeof buf, "%.15g", d);
	if (strtod(buf, NULL) != d)
		snprintf(buf, sizeof buf, "%.17g", d);
	msg_add(m, "%s", buf);
}

static const cJSON *get(const cJSON *obj, const char *key)
{
	/* JSON keys are case-sensitive; cJSON_GetObjectItem is not. */
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* ---- types -------------------------------------------------------------------- */

static const char *const type_names[] = {
	"object", "array", "string", "number", "integer", "boolean", "null",
};
static const char *const type_phrases[] = {
	"an object", "an array", "a string", "a number", "an integer", "a boolean", "null",
};
#define N_TYPES (sizeof type_names / sizeof type_names[0])

static int type_index(const char *name)
{
	for (size_t i = 0; i < N_TYPES; i++)
		if (strcmp(type_names[i], name) == 0)
			return (int)i;
	return -1;
}

static int type_matches(int t, const cJSON *v)
{
	switch (t) {
	case 0: return cJSON_IsObject(v);
	case 1: return cJSON_IsArray(v);
	case 2: return cJSON_IsString(v);
	case 3: return cJSON_IsNumber(v);
	case 4: return cJSON_IsNumber(v) && schema_is_integral(v->valuedouble);
	case 5: return cJSON_IsBool(v);
	case 6: return cJSON_IsNull(v);
	default: return 0;
	}
}

/* ---- validation ------------------------------------------------------------------ */

struct vctx {
	char *err;
	size_t errlen;
	struct path path;   /* the field being validated, as the model spelled it */
};

static int validate(struct vctx *cx, const cJSON *schema, cJSON *value, int depth);

static int vfail_type(struct vctx *cx, const cJSON *type)
{
	struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
	msg_add(&m, "must be ");
	if (cJSON_IsString(type)) {
		msg_add(&m, "%s", type_phrases[type_index(type->valuestring)]);
		return -1;
	}
	int n = cJSON_GetArraySize(type), i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, type) {
		if (i > 0)
			msg_add(&m, i == n - 1 ? " or " : ", ");
		msg_add(&m, "%s", type_phrases[type_index(t->valuestring)]);
		i++;
	}
	return -1;
}

static int check_type(struct vctx *cx, const cJSON *type, const cJSON *v)
{
	if (!type)
		return 0;
	if (cJSON_IsString(type))
		return type_matches(type_index(type->valuestring), v) ? 0 : vfail_type(cx, type);
	const cJSON *t;
	cJSON_ArrayForEach(t, type)
		if (type_matches(type_index(t->valuestring), v))
			return 0;
	return vfail_type(cx, type);
}

/* JSON equality for enum and const.  cJSON_Compare checks each object member twice (once
 * from each side), which doubles the work at every level of nesting: exponential in depth,
 * a hang on a deep value.  Here each pair of members is compared once.  Objects have unique
 * keys (duplicates are refused when parsing), so equal sizes plus a match for every member of
 * a is equality. */
static int json_equal(const cJSON *a, const cJSON *b)
{
	if ((a->type & 0xFF) != (b->type & 0xFF))
		return 0;
	switch (a->type & 0xFF) {
	case cJSON_False:
	case cJSON_True:
	case cJSON_NULL:
		return 1;
	case cJSON_Number:
		return a->valuedouble == b->valuedouble;
	case cJSON_String:
		return strcmp(a->valuestring, b->valuestring) == 0;
	case cJSON_Array: {
		const cJSON *x = a->child, *y = b->child;
		for (; x && y; x = x->next, y = y->next)
			if (!json_equal(x, y))
				return 0;
		return !x && !y;
	}
	case cJSON_Object: {
		if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
			return 0;
		const cJSON *x;
		cJSON_ArrayForEach(x, a) {
			const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
			if (!y || !json_equal(x, y))
				return 0;
		}
		return 1;
	}
	default:
		return 0;
	}
}

static int check_enum_const(struct vctx *cx, const cJSON *schema, const cJSON *v)
{
	const cJSON *en = get(schema, "enum"), *e;
	if (en) {
		cJSON_ArrayForEach(e, en)
			if (json_equal(v, e))
				goto enum_ok;
		struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
		msg_add(&m, "must be one of ");
		int first = 1;
		cJSON_ArrayForEach(e, en) {
			msg_add(&m, first ? "" : ", ");
			msg_json(&m, e);
			first = 0;
		}
		return -1;
	}
enum_ok:;
	const cJSON *c = get(schema, "const");
	if (c && !json_equal(v, c)) {
		struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
		msg_add(&m, "must be exactly ");
		msg_json(&m, c);
		return -1;
	}
	return 0;
}

static int check_number(struct vctx *cx, const cJSON *schema, double d)
{
	static const struct { const char *kw; const char *op; int sign; int strict; } bounds[] = {
		{ "minimum", ">=", -1, 0 }, { "exclusiveMinimum", ">", -1, 1 },
		{ "maximum", "<=", 1, 0 },  { "exclusiveMaximum", "<", 1, 1 },
	};
	for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
		const cJSON *b = get(schema, bounds[i].kw);
		if (!b)
			continue;
		double lim = b->valuedouble;
		/* sign -1: a lower bound, broken by values below it; +1: an upper bound. */
		int broken = bounds[i].sign < 0 ? (bounds[i].strict ? d <= lim : d < lim)
		                                : (bounds[i].strict ? d >= lim : d > lim);
		if (broken) {
			struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
			msg_add(&m, "must be %s ", bounds[i].op);
			msg_num(&m, lim);
			msg_add(&m, " (got ");
			msg_num(&m, d);
			msg_add(&m, ")");
			return -1;
		}
	}
	return 0;
}

static int check_count(struct vctx *cx, const cJSON *schema, const char *minkw, const char *maxkw,
                       size_t have, const char *unit)
{
	const cJSON *mn = get(schema, minkw), *mx = get(schema, maxkw);
	const char *word = NULL;
	double lim = 0;
	if (mn && (double)have < mn->valuedouble) {
		word = "at least";
		lim = mn->valuedouble;
	} else if (mx && (double)have > mx->valuedouble) {
		word = "at most";
		lim = mx->valuedouble;
	}
	if (!word)
		return 0;
	struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
	msg_add(&m, "must have %s ", word);
	msg_num(&m, lim);
	msg_add(&m, " %s%s (got %zu)", unit, lim == 1 ? "" : "s", have);
	return -1;
}

static int validate_array(struct vctx *cx, const cJSON *schema, cJSON *arr, int depth)
{
	if (check_count(cx, schema, "minItems", "maxItems", (size_t)cJSON_GetArraySize(arr), "item"))
		return -1;
	const cJSON *items = get(schema, "items");
	if (!items)
		return 0;
	size_t i = 0;
	cJSON *el;
	cJSON_ArrayForEach(el, arr) {
		size_t mark = path_index(&cx->path, i++);
		if (validate(cx, items, el, depth + 1))
			return -1;
		path_restore(&cx->path, mark);
	}
	return 0;
}

static int has_member(const cJSON *obj, const cJSON *upto, const char *key)
{
	for (const cJSON *c = obj->child; c && c != upto; c = c->next)
		if (strcmp(c->string, key) == 0)
			return 1;
	return 0;
}

static int fail_unknown(struct vctx *cx, const cJSON *props)
{
	struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
	msg_add(&m, "unknown field (allowed: ");
	const cJSON *p;
	int first = 1;
	cJSON_ArrayForEach(p, props) {
		msg_add(&m, "%s%s", first ? "" : ", ", p->string);
		first = 0;
	}
	msg_add(&m, "%s)", first ? "none" : "");
	return -1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Duplicate keys would let the job and the validator read different values.  Sorting keeps
 * this O(n log n): a model can send an object with a great many distinct keys. */
static int check_duplicates(struct vctx *cx, const cJSON *obj)
{
	size_t n = (size_t)cJSON_GetArraySize(obj), i = 0;
	if (n < 2)
		return 0;
	const char **keys = malloc(n * sizeof *keys);
	int rc = -1;
	if (!keys) {
		struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
		msg_add(&m, "out of memory");
		goto fail;
	}
	const cJSON *f;
	cJSON_ArrayForEach(f, obj)
		keys[i++] = f->string;
	qsort(keys, n, sizeof *keys, cmp_str);
	for (i = 1; i < n; i++) {
		if (strcmp(keys[i - 1], keys[i]) == 0) {
			path_key(&cx->path, keys[i]);
			struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
			msg_add(&m, "duplicate field");
			goto fail;
		}
	}
	rc = 0;
fail:
	free(keys);
	return rc;
}

static int validate_object(struct vctx *cx, const cJSON *schema, cJSON *obj, int depth)
{
	const cJSON *props = get(schema, "properties");
	const cJSON *addl = get(schema, "additionalProperties");
	const cJSON *p;

	if (check_duplicates(cx, obj))
		return -1;

	/* Defaults first, so "required" is satisfied by them and they are validated like the rest. */
	cJSON_ArrayForEach(p, props) {
		const cJSON *def = get(p, "default");
		if (!def || get(obj, p->string))
			continue;
		cJSON *copy = cJSON_Duplicate(def, 1);
		if (!copy || !cJSON_AddItemToObject(obj, p->string, copy)) {
			cJSON_Delete(copy);
			struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
			msg_add(&m, "out of memory while applying defaults");
			return -1;
		}
	}

	const cJSON *req = get(schema, "required"), *r;
	cJSON_ArrayForEach(r, req) {
		if (get(obj, r->valuestring))
			continue;
		path_key(&cx->path, r->valuestring);
		struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
		msg_add(&m, "required");
		return -1;
	}

	cJSON *f;
	cJSON_ArrayForEach(f, obj) {
		size_t mark = path_key(&cx->path, f->string);
		const cJSON *sub = props ? get(props, f->string) : NULL;
		if (!sub && cJSON_IsFalse(addl))
			return fail_unknown(cx, props);
		if (!sub && cJSON_IsObject(addl))
			sub = addl;
		if (sub && validate(cx, sub, f, depth + 1))
			return -1;
		path_restore(&cx->path, mark);
	}
	return 0;
}

static int validate(struct vctx *cx, const cJSON *schema, cJSON *value, int depth)
{
	if (depth > SCHEMA_MAX_DEPTH) {
		struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
		msg_add(&m, "nested more than %d levels deep", SCHEMA_MAX_DEPTH);
		return -1;
	}
	if (cJSON_IsNumber(value) && !isfinite(value->valuedouble)) {
		struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
		msg_add(&m, "must be a finite number");
		return -1;
	}
	if (check_type(cx, get(schema, "type"), value) || check_enum_const(cx, schema, value))
		return -1;
	if (cJSON_IsNumber(value))
		return check_number(cx, schema, value->valuedouble);
	if (cJSON_IsString(value))
		return check_count(cx, schema, "minLength", "maxLength",
		                   utf8_count(value->valuestring, strlen(value->valuestring)), "character");
	if (cJSON_IsArray(value))
		return validate_array(cx, schema, value, depth);
	if (cJSON_IsObject(value))
		return validate_object(cx, schema, value, depth);
	return 0;
}

int schema_validate(const cJSON *schema, cJSON *value, char *err, size_t errlen,
                    char *field, size_t fieldlen)
{
	struct vctx cx = { .err = err, .errlen = errlen };
	if (errlen)
		err[0] = '\0';
	int rc = validate(&cx, schema, value, 0);
	if (errlen)
		schema_tidy(err);
	if (field && fieldlen) {
		const char *f = rc ? cx.path.s : "";
		size_t n = strlen(f);
		if (n >= fieldlen)
			n = fieldlen - 1;
		memcpy(field, f, n);
		utf8_trim_tail(field, n);
	}
	return rc;
}

/* ---- schema_check ------------------------------------------------------------------ */

struct cctx {
	char *err;
	size_t errlen;
	struct path path;   /* keyword path inside the schema */
};

static int cfail(struct cctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cfail(struct cctx *cx, const char *fmt, ...)
{
	struct msg m = msg_start(cx->err, cx->errlen, &cx->path);
	if (m.cap && m.len < m.cap - 1) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m.s + m.len, m.cap - m.len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int check_schema(struct cctx *cx, const cJSON *s, int depth);

static int kw_type(struct cctx *cx, const cJSON *v)
{
	if (cJSON_IsString(v)) {
		if (type_index(v->valuestring) < 0)
			return cfail(cx, "unknown type \"%s\"", v->valuestring);
		return 0;
	}
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
		return cfail(cx, "must be a type name or a non-empty array of type names");
	size_t i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, v) {
		size_t mark = path_index(&cx->path, i++);
		if (!cJSON_IsString(t))
			return cfail(cx, "must be a string");
		if (type_index(t->valuestring) < 0)
			return cfail(cx, "unknown type \"%s\"", t->valuestring);
		for (const cJSON *u = v->child; u != t; u = u->next)
			if (strcmp(u->valuestring, t->valuestring) == 0)
				return cfail(cx, "duplicate type \"%s\"", t->valuestring);
		path_restore(&cx->path, mark);
	}
	return 0;
}

static int kw_required(struct cctx *cx, const cJSON *v)
{
	if (!cJSON_IsArray(v))
		return cfail(cx, "must be an array of property names");
	size_t i = 0;
	const cJSON *r;
	cJSON_ArrayForEach(r, v) {
		size_t mark = path_index(&cx->path, i++);
		if (!cJSON_IsString(r))
			return cfail(cx, "must be a string");
		for (const cJSON *u = v->child; u != r; u = u->next)
			if (strcmp(u->valuestring, r->valuestring) == 0)
				return cfail(cx, "duplicate name \"%s\"", r->valuestring);
		path_restore(&cx->path, mark);
	}
	return 0;
}

static int kw_properties(struct cctx *cx, const cJSON *v, int depth)
{
	if (!cJSON_IsObject(v))
		return cfail(cx, "must be an object mapping names to schemas");
	const cJSON *p;
	cJSON_ArrayForEach(p, v) {
		size_t mark = path_key(&cx->path, p->string);
		if (has_member(v, p, p->string))
			return cfail(cx, "duplicate property");
		if (check_schema(cx, p, depth + 1))
			return -1;
		path_restore(&cx->path, mark);
	}
	return 0;
}

static int kw_count(struct cctx *cx, const cJSON *v)
{
	if (!cJSON_IsNumber(v) || !schema_is_integral(v->valuedouble) || v->valuedouble < 0 ||
	    v->valuedouble > COUNT_MAX)
		return cfail(cx, "must be a non-negative integer");
	return 0;
}

static int kw_number(struct cctx *cx, const cJSON *v)
{
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return cfail(cx, "must be a number");
	return 0;
}

static int kw_string(struct cctx *cx, const cJSON *v)
{
	return cJSON_IsString(v) ? 0 : cfail(cx, "must be a string");
}

static int kw_any(struct cctx *cx, const cJSON *v)
{
	(void)cx;
	(void)v;
	return 0;
}

static int kw_enum(struct cctx *cx, const cJSON *v)
{
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
		return cfail(cx, "must be a non-empty array");
	return 0;
}

static int kw_examples(struct cctx *cx, const cJSON *v)
{
	return cJSON_IsArray(v) ? 0 : cfail(cx, "must be an array");
}

/* The subset.  Keywords with subschemas are handled by name in check_schema. */
static const struct {
	const char *name;
	int (*check)(struct cctx *, const cJSON *);
} keywords[] = {
	{ "type", kw_type },
	{ "required", kw_required },
	{ "properties", NULL },
	{ "additionalProperties", NULL },
	{ "items", NULL },
	{ "enum", kw_enum },
	{ "const", kw_any },
	{ "default", kw_any },
	{ "minimum", kw_number },
	{ "maximum", kw_number },
	{ "exclusiveMinimum", kw_number },
	{ "exclusiveMaximum", kw_number },
	{ "minLength", kw_count },
	{ "maxLength", kw_count },
	{ "minItems", kw_count },
	{ "maxItems", kw_count },
	{ "title", kw_string },
	{ "description", kw_string },
	{ "format", kw_string },
	{ "$schema", kw_string },
	{ "examples", kw_examples },
};

static int check_keyword(struct cctx *cx, const cJSON *kw, int depth)
{
	const char *name = kw->string;
	if (strcmp(name, "properties") == 0)
		return kw_properties(cx, kw, depth);
	if (strcmp(name, "items") == 0) {
		if (cJSON_IsArray(kw))
			return cfail(cx, "must be a schema object (the array form is not supported)");
		return check_schema(cx, kw, depth + 1);
	}
	if (strcmp(name, "additionalProperties") == 0)
		return cJSON_IsBool(kw) ? 0 : check_schema(cx, kw, depth + 1);
	for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
		if (strcmp(keywords[i].name, name) == 0)
			return keywords[i].check(cx, kw);
	return cfail(cx, "unsupported keyword \"%s\"", name);
}

/* A lower bound above its upper bound makes every value fail: say so at load, not per call. */
static int check_order(struct cctx *cx, const cJSON *s, const char *lo, const char *hi)
{
	const cJSON *a = get(s, lo), *b = get(s, hi);
	if (!a || !b || a->valuedouble <= b->valuedouble)
		return 0;
	size_t mark = path_key(&cx->path, lo);
	cfail(cx, "greater than %s", hi);
	path_restore(&cx->path, mark);
	return -1;
}

static int check_default(struct cctx *cx, const cJSON *s)
{
	const cJSON *def = get(s, "default");
	if (!def)
		return 0;
	/* Validate a copy: defaults inside the default's own subschemas must not leak into it. */
	cJSON *copy = cJSON_Duplicate(def, 1);
	if (!copy)
		return cfail(cx, "out of memory");
	char why[256];
	struct vctx vx = { .err = why, .errlen = sizeof why };
	int rc = validate(&vx, s, copy, 0);
	cJSON_Delete(copy);
	if (rc == 0)
		return 0;
	size_t mark = path_key(&cx->path, "default");
	cfail(cx, "does not satisfy the schema (%s)", why);
	path_restore(&cx->path, mark);
	return -1;
}

static int check_schema(struct cctx *cx, const cJSON *s, int depth)
{
	if (depth > SCHEMA_MAX_DEPTH)
		return cfail(cx, "schema nested more than %d levels deep", SCHEMA_MAX_DEPTH);
	if (!cJSON_IsObject(s))
		return cfail(cx, "must be a schema object");
	const cJSON *kw;
	cJSON_ArrayForEach(kw, s) {
		size_t mark = path_key(&cx->path, kw->string);
		/* A repeated keyword would be checked twice but enforced once. */
		if (has_member(s, kw, kw->string))
			return cfail(cx, "duplicate keyword");
		if (check_keyword(cx, kw, depth))
			return -1;
		path_restore(&cx->path, mark);
	}
	if (check_order(cx, s, "minimum", "maximum") ||
	    check_order(cx, s, "minLength", "maxLength") ||
	    check_order(cx, s, "minItems", "maxItems"))
		return -1;
	return check_default(cx, s);
}

int schema_check(const cJSON *schema, char *err, size_t errlen)
{
	struct cctx cx = { .err = err, .errlen = errlen };
	if (errlen)
		err[0] = '\0';
	int rc = check_schema(&cx, schema, 0);
	if (errlen)
		schema_tidy(err);
	return rc;
}
