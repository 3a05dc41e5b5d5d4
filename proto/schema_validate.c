/* proto/schema_validate.c — schema_apply(): defaults, then validation, against a compiled
 * schema (see schema.h for the contract, schema.c for the design). */
#include "proto/schema.h"
#include "proto/schema_int.h"
#include "proto/schemafmt.h"
#include "proto/utf8.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Append a JSON value in compact form, shortened so one huge enum cannot drown the message. */
static void msg_json(struct msg *m, const cJSON *v)
{
	if (m->cap == 0)
		return;   /* a quiet trial's: nobody reads it, and printing costs */
	char *txt = cJSON_PrintUnformatted(v);
	if (!txt) {
		schema_msg_add(m, "?");
		return;
	}
	if (strlen(txt) > 60)
		schema_msg_add(m, "%.*s...", (int)utf8_clip(txt, strlen(txt), 57), txt);
	else
		schema_msg_add(m, "%s", txt);
	free(txt);
}

/* Numbers print as JSON would show them: integers without a fraction, others round-tripping. */
static void msg_num(struct msg *m, double d)
{
	if (m->cap == 0)
		return;
	if (schema_is_integral(d) && d < 1e15 && d > -1e15) {
		schema_msg_add(m, "%.0f", d);
		return;
	}
	char buf[32];
	snprintf(buf, sizeof buf, "%.15g", d);
	if (strtod(buf, NULL) != d)
		snprintf(buf, sizeof buf, "%.17g", d);
	schema_msg_add(m, "%s", buf);
}

/* Indexed by schema_type_index(): the same order as schema.c's type_names. */
static const char *const type_phrases[] = {
	"an object", "an array", "a string", "a number", "an integer", "a boolean", "null",
};

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

enum { V_FAIL = -1, V_ABORT = -2 };

struct vctx {
	const struct schema *sc;
	char *err;               /* where a mismatch is explained: a trial's own buffer inside one */
	size_t errlen;
	char *top_err;           /* the caller's buffer, where an abort is explained */
	size_t top_errlen;
	struct path path;        /* the field being validated, as the model spelled it */
	unsigned long steps, budget;
	int frames;
	int trials;              /* trials entered and not left: inside one, nested ones are quiet */
	pcre2_match_data *md;    /* made on the first match, */
	pcre2_match_context *mctx;   /* with the schema's limits and the step counter */
	unsigned long pattern_steps, pattern_budget;
};

static int validate(struct vctx *cx, const struct node *n, const cJSON *v, int vdepth);

/* A mismatch: explained in cx->err, which inside a trial is the trial's own buffer (or no
 * buffer at all when nested), so a branch that fails costs nothing to report. */
static int vfail(struct vctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int vfail(struct vctx *cx, const char *fmt, ...)
{
	struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
	if (m.cap && m.len < m.cap - 1) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m.s + m.len, m.cap - m.len, fmt, ap);
		va_end(ap);
	}
	return V_FAIL;
}

/* Stopping is no mismatch a trial could absorb: its message goes to the caller's buffer. */
static int vabort(struct vctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int vabort(struct vctx *cx, const char *fmt, ...)
{
	struct msg m = schema_msg_start(cx->top_err, cx->top_errlen, &cx->path);
	if (m.cap && m.len < m.cap - 1) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m.s + m.len, m.cap - m.len, fmt, ap);
		va_end(ap);
	}
	return V_ABORT;
}

/* Charge work to the budget; V_ABORT with a message once it is spent. */
static int spend(struct vctx *cx, unsigned long units)
{
	cx->steps += units;
	if (cx->steps <= cx->budget)
		return 0;
	return vabort(cx, "validation stopped: it takes too many steps (the schema fans out too much "
	              "for this value)");
}

static int vfail_type(struct vctx *cx, const cJSON *type)
{
	struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
	schema_msg_add(&m, "must be ");
	if (cJSON_IsString(type)) {
		schema_msg_add(&m, "%s", type_phrases[schema_type_index(type->valuestring)]);
		return V_FAIL;
	}
	int n = cJSON_GetArraySize(type), i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, type) {
		if (i > 0)
			schema_msg_add(&m, i == n - 1 ? " or " : ", ");
		schema_msg_add(&m, "%s", type_phrases[schema_type_index(t->valuestring)]);
		i++;
	}
	return V_FAIL;
}

static int check_type(struct vctx *cx, const cJSON *type, const cJSON *v)
{
	if (!type)
		return 0;
	if (cJSON_IsString(type))
		return type_matches(schema_type_index(type->valuestring), v) ? 0 : vfail_type(cx, type);
	const cJSON *t;
	cJSON_ArrayForEach(t, type)
		if (type_matches(schema_type_index(t->valuestring), v))
			return 0;
	return vfail_type(cx, type);
}

/* JSON equality for enum, const and uniqueItems; numbers compare by value (1 equals 1.0).
 * cJSON_Compare checks each object member twice (once from each side), which doubles the
 * work at every level of nesting: exponential in depth, a hang on a deep value.  Here each
 * pair of members is compared once.  Objects have unique keys (duplicates are refused when
 * parsing), so equal sizes plus a match for every member of a is equality. */
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

/* enum is charged one step per member: json_equal on a long enum is real work, and an enum
 * applied through a $ref fan-out must not escape the budget. */
static int check_enum_const(struct vctx *cx, const cJSON *schema, const cJSON *v)
{
	const cJSON *en = schema_get(schema, "enum"), *e;
	if (en) {
		if (spend(cx, (unsigned long)cJSON_GetArraySize(en)))
			return V_ABORT;
		cJSON_ArrayForEach(e, en)
			if (json_equal(v, e))
				goto enum_ok;
		struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
		schema_msg_add(&m, "must be one of ");
		int first = 1;
		cJSON_ArrayForEach(e, en) {
			schema_msg_add(&m, first ? "" : ", ");
			msg_json(&m, e);
			first = 0;
		}
		return V_FAIL;
	}
enum_ok:;
	const cJSON *c = schema_get(schema, "const");
	if (c && !json_equal(v, c)) {
		struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
		schema_msg_add(&m, "must be exactly ");
		msg_json(&m, c);
		return V_FAIL;
	}
	return 0;
}

/* multipleOf: exact for whole numbers (fmod is exact); for fractions a quotient within a
 * relative 1e-9 of a whole number counts, so 0.3 is a multiple of 0.1 as a person means it. */
static int is_multiple(double d, double m)
{
	if (schema_is_integral(d) && schema_is_integral(m))
		return fmod(d, m) == 0;
	double q = d / m;
	if (!isfinite(q))
		return 0;
	return fabs(q - nearbyint(q)) <= 1e-9 * fmax(1.0, fabs(q));
}

/* One table for the four bounds, so each message names the operator the schema used
 * (">=" for minimum, ">" for exclusiveMinimum) and the value as JSON would print it. */
static int check_number(struct vctx *cx, const cJSON *schema, double d)
{
	static const struct { const char *kw; const char *op; int sign; int strict; } bounds[] = {
		{ "minimum", ">=", -1, 0 }, { "exclusiveMinimum", ">", -1, 1 },
		{ "maximum", "<=", 1, 0 },  { "exclusiveMaximum", "<", 1, 1 },
	};
	for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
		const cJSON *b = schema_get(schema, bounds[i].kw);
		if (!b)
			continue;
		double lim = b->valuedouble;
		/* sign -1: a lower bound, broken by values below it; +1: an upper bound. */
		int broken = bounds[i].sign < 0 ? (bounds[i].strict ? d <= lim : d < lim)
		                                : (bounds[i].strict ? d >= lim : d > lim);
		if (broken) {
			struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
			schema_msg_add(&m, "must be %s ", bounds[i].op);
			msg_num(&m, lim);
			schema_msg_add(&m, " (got ");
			msg_num(&m, d);
			schema_msg_add(&m, ")");
			return V_FAIL;
		}
	}
	const cJSON *mo = schema_get(schema, "multipleOf");
	if (mo && !is_multiple(d, mo->valuedouble)) {
		struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
		schema_msg_add(&m, "must be a multiple of ");
		msg_num(&m, mo->valuedouble);
		schema_msg_add(&m, " (got ");
		msg_num(&m, d);
		schema_msg_add(&m, ")");
		return V_FAIL;
	}
	return 0;
}

/* minLength/maxLength, minItems/maxItems, minProperties/maxProperties share this: the limits
 * compile as whole numbers up to COUNT_MAX, so comparing them as doubles is exact. */
static int check_count(struct vctx *cx, const cJSON *schema, const char *minkw, const char *maxkw,
                       size_t have, const char *one, const char *many)
{
	const cJSON *mn = schema_get(schema, minkw), *mx = schema_get(schema, maxkw);
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
	struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
	schema_msg_add(&m, "must have %s ", word);
	msg_num(&m, lim);
	schema_msg_add(&m, " %s (got %zu)", lim == 1 ? one : many, have);
	return V_FAIL;
}

static void msg_pattern(struct msg *m, const char *src)
{
	size_t n = strlen(src);
	if (n > 60)
		schema_msg_add(m, "%.*s...", (int)utf8_clip(src, n, 57), src);
	else
		schema_msg_add(m, "%s", src);
}

/* PCRE2 calls this at every pattern item it tries (patterns are compiled with automatic
 * callouts), backtracking included: a count of the work of every match of one validation,
 * which PCRE2's own per-match limit is not (an array of strings each just under it would
 * take as long as it likes).  Over the budget, the match stops with PCRE2_ERROR_CALLOUT. */
static int pattern_step(pcre2_callout_block *b, void *data)
{
	struct vctx *cx = data;
	(void)b;
	return ++cx->pattern_steps > cx->pattern_budget ? PCRE2_ERROR_CALLOUT : 0;
}

/* Does s match re?  1 yes, 0 no; V_FAIL for a string that is not UTF-8 (PCRE2 runs in UTF
 * mode), V_ABORT when a limit stopped the match: a pattern that backtracks without end on
 * this value is the schema's fault, and must not read as "no match" (think of "not"). */
static int match(struct vctx *cx, const pcre2_code *re, const char *src, const char *s)
{
	size_t len = strlen(s);
	if (spend(cx, MATCH_STEPS + len / 64))
		return V_ABORT;
	if (!cx->md) {
		if (!(cx->md = pcre2_match_data_create(1, NULL)) ||
		    !(cx->mctx = pcre2_match_context_copy(cx->sc->mctx)) ||
		    pcre2_set_callout(cx->mctx, pattern_step, cx) != 0)
			return vabort(cx, "out of memory");
	}
	int rc = pcre2_match(re, (PCRE2_SPTR)s, len, 0, 0, cx->md, cx->mctx);
	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21)
		return vfail(cx, "must be valid UTF-8");
	struct msg m = schema_msg_start(cx->top_err, cx->top_errlen, &cx->path);
	schema_msg_add(&m, "validation stopped: the pattern ");
	msg_pattern(&m, src);
	schema_msg_add(&m, " needs too much backtracking on this value (%s)",
	        rc == PCRE2_ERROR_CALLOUT || rc == PCRE2_ERROR_MATCHLIMIT ? "match limit"
	        : rc == PCRE2_ERROR_DEPTHLIMIT ? "depth limit"
	        : rc == PCRE2_ERROR_HEAPLIMIT ? "heap limit" : "matching failed");
	return V_ABORT;
}

/* Lengths count code points, as JSON Schema defines them, not bytes: "é" is one character.
 * The pattern runs after the cheap checks, since it is the expensive one. */
static int validate_string(struct vctx *cx, const struct node *n, const cJSON *v)
{
	const char *s = v->valuestring;
	int rc = check_count(cx, n->s, "minLength", "maxLength", utf8_count(s, strlen(s)), "character",
	                     "characters");
	if (rc)
		return rc;
	if (n->pattern) {
		rc = match(cx, n->pattern, n->pattern_src, s);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
			schema_msg_add(&m, "must match the pattern ");
			msg_pattern(&m, n->pattern_src);
			return V_FAIL;
		}
	}
	if (n->format >= 0 && !schemafmt_check(n->format, s))
		return vfail(cx, "must be %s", schemafmt_phrase(n->format));
	return 0;
}

/* Run n on v as a trial (a branch of anyOf, oneOf, not, if, contains, propertyNames): the
 * reason for a mismatch goes to buf, not to the caller's message, and the path is restored.
 * Only the outermost trials keep a reason; those nested in them run quiet (formatting the
 * reasons of branches of branches, which no message shows, would cost more than validating).
 * An abort is no trial's verdict: it propagates, with the path where it happened. */
static int trial(struct vctx *cx, const struct node *n, const cJSON *v, int vdepth,
                 char *buf, size_t len)
{
	char *err = cx->err;
	size_t errlen = cx->errlen, mark = cx->path.len;
	cx->err = buf;
	cx->errlen = cx->trials ? 0 : len;
	buf[0] = '\0';
	cx->trials++;
	int rc = validate(cx, n, v, vdepth);
	cx->trials--;
	cx->err = err;
	cx->errlen = errlen;
	if (rc == V_ABORT)
		return V_ABORT;
	schema_path_restore(&cx->path, mark);
	return rc;
}

/* A trial's reason without the "field: " prefix when it is about the field itself. */
static const char *reason(const struct vctx *cx, const char *buf)
{
	size_t n = cx->path.len;
	if (n && strncmp(buf, cx->path.s, n) == 0 && buf[n] == ':' && buf[n + 1] == ' ')
		return buf + n + 2;
	return buf;
}

#define REASON_CHARS 160

/* Each element is a quiet trial: a non-matching element is not an error, only a count. */
static int check_contains(struct vctx *cx, const struct node *n, const cJSON *arr, int vdepth)
{
	char buf[REASON_CHARS];
	size_t hits = 0, i = 0;
	const cJSON *el;
	cJSON_ArrayForEach(el, arr) {
		size_t mark = schema_path_index(&cx->path, i++);
		int rc = trial(cx, n->contains, el, vdepth + 1, buf, sizeof buf);
		schema_path_restore(&cx->path, mark);
		if (rc == V_ABORT)
			return rc;
		hits += rc == 0;
	}
	const cJSON *mn = schema_get(n->s, "minContains"), *mx = schema_get(n->s, "maxContains");
	double lo = mn ? mn->valuedouble : 1;
	if ((double)hits < lo || (mx && (double)hits > mx->valuedouble)) {
		struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
		schema_msg_add(&m, "must contain %s ", (double)hits < lo ? "at least" : "at most");
		msg_num(&m, (double)hits < lo ? lo : mx->valuedouble);
		schema_msg_add(&m, " item%s matching \"contains\" (got %zu)",
		        ((double)hits < lo ? lo : mx->valuedouble) == 1 ? "" : "s", hits);
		return V_FAIL;
	}
	return 0;
}

/* A hash that equal JSON values share (numbers by value, objects whatever their key order). */
static uint64_t json_hash(const cJSON *v)
{
	uint64_t h = (uint64_t)(v->type & 0xFF) * 0x9E3779B97F4A7C15ULL;
	switch (v->type & 0xFF) {
	case cJSON_Number: {
		double d = v->valuedouble == 0 ? 0 : v->valuedouble;   /* -0 equals 0 */
		uint64_t bits;
		memcpy(&bits, &d, sizeof bits);
		return h ^ (bits * 0xC2B2AE3D27D4EB4FULL);
	}
	case cJSON_String:
		for (const unsigned char *p = (const unsigned char *)v->valuestring; *p; p++)
			h = (h ^ *p) * 0x100000001B3ULL;
		return h;
	case cJSON_Array:
		for (const cJSON *c = v->child; c; c = c->next)
			h = (h ^ json_hash(c)) * 0x100000001B3ULL;
		return h;
	case cJSON_Object:
		for (const cJSON *c = v->child; c; c = c->next) {
			uint64_t k = 0xCBF29CE484222325ULL;
			for (const unsigned char *p = (const unsigned char *)c->string; *p; p++)
				k = (k ^ *p) * 0x100000001B3ULL;
			h += (k ^ json_hash(c)) * 0x9E3779B97F4A7C15ULL;   /* order-independent */
		}
		return h;
	default:
		return h;
	}
}

struct hashed {
	uint64_t h;
	size_t i;
	const cJSON *v;
};

static int cmp_hashed(const void *a, const void *b)
{
	const struct hashed *x = a, *y = b;
	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* uniqueItems in O(n log n): sort by hash, compare only equal hashes (each comparison is
 * charged, so colliding hashes cannot make it quadratic for free). */
static int check_unique(struct vctx *cx, const cJSON *arr)
{
	size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
	if (n < 2)
		return 0;
	struct hashed *hs = malloc(n * sizeof *hs);
	if (!hs)
		return vabort(cx, "out of memory");
	int rc = spend(cx, n);
	const cJSON *el;
	cJSON_ArrayForEach(el, arr) {
		hs[i] = (struct hashed){ json_hash(el), i, el };
		i++;
	}
	qsort(hs, n, sizeof *hs, cmp_hashed);
	for (size_t a = 0; rc == 0 && a < n; a++) {
		for (size_t b = a + 1; rc == 0 && b < n && hs[b].h == hs[a].h; b++) {
			if ((rc = spend(cx, 1)) != 0)
				break;
			if (json_equal(hs[a].v, hs[b].v))
				rc = vfail(cx, "must not contain duplicate items ([%zu] and [%zu] are equal)",
				           hs[a].i, hs[b].i);
		}
	}
	free(hs);
	return rc;
}

static int validate_array(struct vctx *cx, const struct node *n, const cJSON *arr, int vdepth)
{
	size_t count = (size_t)cJSON_GetArraySize(arr), i = 0;
	int rc = check_count(cx, n->s, "minItems", "maxItems", count, "item", "items");
	if (rc)
		return rc;
	/* items: false after prefixItems says how long the array may be */
	if (n->items && !n->items->s && !n->items->verdict && count > n->prefix.n) {
		struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
		schema_msg_add(&m, "must have at most %zu item%s (got %zu)", n->prefix.n,
		        n->prefix.n == 1 ? "" : "s", count);
		return V_FAIL;
	}
	const cJSON *el;
	cJSON_ArrayForEach(el, arr) {
		const struct node *sub = i < n->prefix.n ? n->prefix.v[i] : n->items;
		size_t mark = schema_path_index(&cx->path, i++);
		if (sub && (rc = validate(cx, sub, el, vdepth + 1)) != 0)
			return rc;
		schema_path_restore(&cx->path, mark);
	}
	if (n->contains && (rc = check_contains(cx, n, arr, vdepth)) != 0)
		return rc;
	if (cJSON_IsTrue(schema_get(n->s, "uniqueItems")))
		return check_unique(cx, arr);
	return 0;
}

static const struct node *find_prop(const struct node *n, const char *key)
{
	for (size_t i = 0; i < n->n_props; i++)
		if (strcmp(n->props[i].name, key) == 0)
			return n->props[i].node;
	return NULL;
}

static int is_false(const struct node *n)
{
	return n && !n->s && !n->verdict;
}

typedef int (*member_fn)(struct vctx *cx, const struct node *sub, cJSON *member, int vdepth);

/* Call fn with each subschema that applies to member f of an object under n: its entry in
 * properties, every patternProperties entry whose pattern matches its name, and
 * additionalProperties when neither does.  Returns 1 without calling fn when the only one
 * is a false additionalProperties (the field is unknown), else 0 or fn's / match's error. */
static int each_member_schema(struct vctx *cx, const struct node *n, cJSON *f, int vdepth,
                              member_fn fn)
{
	int any = 0, rc;
	const struct node *p = find_prop(n, f->string);
	if (p) {
		any = 1;
		if ((rc = fn(cx, p, f, vdepth)) != 0)
			return rc;
	}
	for (size_t i = 0; i < n->n_pprops; i++) {
		rc = match(cx, n->pprops[i].re, n->pprops[i].src, f->string);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			any = 1;
			if ((rc = fn(cx, n->pprops[i].node, f, vdepth)) != 0)
				return rc;
		}
	}
	if (any || !n->addl)
		return 0;
	return is_false(n->addl) ? 1 : fn(cx, n->addl, f, vdepth);
}

static int fail_unknown(struct vctx *cx, const struct node *n)
{
	struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
	schema_msg_add(&m, "unknown field (allowed: ");
	for (size_t i = 0; i < n->n_props; i++)
		schema_msg_add(&m, "%s%s", i ? ", " : "", n->props[i].name);
	for (size_t i = 0; i < n->n_pprops; i++) {
		schema_msg_add(&m, "%snames matching ", i || n->n_props ? ", " : "");
		msg_pattern(&m, n->pprops[i].src);
	}
	schema_msg_add(&m, "%s)", n->n_props || n->n_pprops ? "" : "none");
	return V_FAIL;
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
	int rc = V_FAIL;
	if (!keys) {
		rc = vabort(cx, "out of memory");
		goto fail;
	}
	const cJSON *f;
	cJSON_ArrayForEach(f, obj)
		keys[i++] = f->string;
	qsort(keys, n, sizeof *keys, cmp_str);
	for (i = 1; i < n; i++) {
		if (strcmp(keys[i - 1], keys[i]) == 0) {
			schema_path_key(&cx->path, keys[i]);
			vfail(cx, "duplicate field");
			goto fail;
		}
	}
	rc = spend(cx, n);
fail:
	free(keys);
	return rc;
}

static int check_required(struct vctx *cx, const struct node *n, const cJSON *obj)
{
	const cJSON *r;
	cJSON_ArrayForEach(r, schema_get(n->s, "required")) {
		if (schema_get(obj, r->valuestring))
			continue;
		schema_path_key(&cx->path, r->valuestring);
		return vfail(cx, "required");
	}
	const cJSON *dep, *d;
	cJSON_ArrayForEach(dep, schema_get(n->s, "dependentRequired")) {
		if (!schema_get(obj, dep->string))
			continue;
		cJSON_ArrayForEach(d, dep) {
			if (schema_get(obj, d->valuestring))
				continue;
			schema_path_key(&cx->path, d->valuestring);
			return vfail(cx, "required when %s is present", dep->string);
		}
	}
	return 0;
}

/* propertyNames: the name is validated as a string, and a failure names the field. */
static int check_name(struct vctx *cx, const struct node *n, const cJSON *f, int vdepth)
{
	char buf[REASON_CHARS];
	cJSON name = { .type = cJSON_String, .valuestring = f->string };
	int rc = trial(cx, n->names, &name, vdepth + 1, buf, sizeof buf);
	if (rc != V_FAIL)
		return rc;
	return vfail(cx, "invalid name (%s)", reason(cx, buf));
}

static int validate_member(struct vctx *cx, const struct node *sub, cJSON *f, int vdepth)
{
	return validate(cx, sub, f, vdepth + 1);
}

static int validate_object(struct vctx *cx, const struct node *n, const cJSON *obj, int vdepth)
{
	int rc;
	if ((rc = check_duplicates(cx, obj)) != 0 ||
	    (rc = check_count(cx, n->s, "minProperties", "maxProperties",
	                      (size_t)cJSON_GetArraySize(obj), "property", "properties")) != 0 ||
	    (rc = check_required(cx, n, obj)) != 0)
		return rc;
	cJSON *f;
	cJSON_ArrayForEach(f, obj) {
		size_t mark = schema_path_key(&cx->path, f->string);
		if (n->names && (rc = check_name(cx, n, f, vdepth)) != 0)
			return rc;
		rc = each_member_schema(cx, n, f, vdepth, validate_member);
		if (rc == 1)
			return fail_unknown(cx, n);
		if (rc)
			return rc;
		schema_path_restore(&cx->path, mark);
	}
	return 0;
}

/* Append "[i] reason" to an account of why branches failed (not inside a trial: no reasons). */
static void note_branch(const struct vctx *cx, struct msg *acc, size_t i, const char *buf)
{
	if (cx->trials)
		return;
	schema_msg_add(acc, "%s[%zu] %s", acc->len ? "; " : "", i, reason(cx, buf));
}

/* Stops at the first branch that matches (or aborts); the reasons of the failed branches are
 * collected only for the outermost anyOf, where the message will show them. */
static int check_any(struct vctx *cx, const struct node *n, const cJSON *v, int vdepth)
{
	char buf[REASON_CHARS], text[320];
	struct msg acc = { text, sizeof text, 0 };
	text[0] = '\0';
	for (size_t i = 0; i < n->any.n; i++) {
		int rc = trial(cx, n->any.v[i], v, vdepth, buf, sizeof buf);
		if (rc != V_FAIL)
			return rc;
		note_branch(cx, &acc, i, buf);
	}
	return vfail(cx, "must match at least one schema in anyOf%s%s", cx->trials ? "" : ": ", text);
}

/* Unlike anyOf every branch must be tried, since a second match is the error; the message
 * then names both matching branches so the user sees the overlap. */
static int check_one(struct vctx *cx, const struct node *n, const cJSON *v, int vdepth)
{
	char buf[REASON_CHARS], text[320];
	struct msg acc = { text, sizeof text, 0 };
	size_t hit = 0, nhit = 0;
	text[0] = '\0';
	for (size_t i = 0; i < n->one.n; i++) {
		int rc = trial(cx, n->one.v[i], v, vdepth, buf, sizeof buf);
		if (rc == V_ABORT)
			return rc;
		if (rc == V_FAIL) {
			note_branch(cx, &acc, i, buf);
			continue;
		}
		if (nhit++)
			return vfail(cx, "must match exactly one schema in oneOf (matches [%zu] and [%zu])",
			             hit, i);
		hit = i;
	}
	if (nhit == 0)
		return vfail(cx, "must match exactly one schema in oneOf (matches none)%s%s",
		             cx->trials ? "" : ": ", text);
	return 0;
}

/* The keywords that apply other schemas to the same value. */
static int validate_inplace(struct vctx *cx, const struct node *n, const cJSON *v, int vdepth)
{
	char buf[REASON_CHARS];
	int rc;
	if (n->ref && (rc = validate(cx, n->ref, v, vdepth)) != 0)
		return rc;
	for (size_t i = 0; i < n->all.n; i++)
		if ((rc = validate(cx, n->all.v[i], v, vdepth)) != 0)
			return rc;
	if (n->any.n && (rc = check_any(cx, n, v, vdepth)) != 0)
		return rc;
	if (n->one.n && (rc = check_one(cx, n, v, vdepth)) != 0)
		return rc;
	if (n->not_) {
		rc = trial(cx, n->not_, v, vdepth, buf, sizeof buf);
		if (rc == V_ABORT)
			return rc;
		if (rc == 0)
			return vfail(cx, "must not match the schema in \"not\"");
	}
	if (n->if_) {
		rc = trial(cx, n->if_, v, vdepth, buf, sizeof buf);
		if (rc == V_ABORT)
			return rc;
		const struct node *branch = rc == 0 ? n->then_ : n->else_;
		if (branch && (rc = validate(cx, branch, v, vdepth)) != 0)
			return rc;
	}
	for (size_t i = 0; cJSON_IsObject(v) && i < n->n_deps; i++)
		if (schema_get(v, n->deps[i].name) && (rc = validate(cx, n->deps[i].node, v, vdepth)) != 0)
			return rc;
	return 0;
}

/* The keywords about v itself, before those that apply other schemas to it.  Non-finite
 * numbers are refused first: cJSON reads 1e400 as infinity, which JSON cannot express and
 * every bound would judge wrongly. */
static int validate_here(struct vctx *cx, const struct node *n, const cJSON *v, int vdepth)
{
	if (cJSON_IsNumber(v) && !isfinite(v->valuedouble))
		return vfail(cx, "must be a finite number");
	int rc;
	if ((rc = check_type(cx, schema_get(n->s, "type"), v)) != 0 ||
	    (rc = check_enum_const(cx, n->s, v)) != 0)
		return rc;
	if (cJSON_IsNumber(v))
		return check_number(cx, n->s, v->valuedouble);
	if (cJSON_IsString(v))
		return validate_string(cx, n, v);
	if (cJSON_IsArray(v))
		return validate_array(cx, n, v, vdepth);
	if (cJSON_IsObject(v))
		return validate_object(cx, n, v, vdepth);
	return 0;
}

/* Enter a subschema application: the frame and step budgets.  0, or V_ABORT. */
static int enter(struct vctx *cx)
{
	if (cx->frames >= SCHEMA_MAX_FRAMES)
		return vabort(cx, "validation stopped: schemas applied more than %d levels deep",
		              SCHEMA_MAX_FRAMES);
	int rc = spend(cx, 1);
	if (rc == 0)
		cx->frames++;
	return rc;
}

/* Every subschema application goes through here, so the depth limit, the frame limit and the
 * step budget hold whatever path through $ref, allOf or anyOf a schema takes. */
static int validate(struct vctx *cx, const struct node *n, const cJSON *v, int vdepth)
{
	if (!n->s)
		return n->verdict ? 0 : vfail(cx, "not allowed");
	if (vdepth > SCHEMA_MAX_DEPTH)
		return vfail(cx, "nested more than %d levels deep", SCHEMA_MAX_DEPTH);
	int rc = enter(cx);
	if (rc)
		return rc;
	rc = validate_here(cx, n, v, vdepth);
	if (rc == 0)
		rc = validate_inplace(cx, n, v, vdepth);
	cx->frames--;
	return rc;
}

/* ---- defaults ---------------------------------------------------------------------- */

static int fill(struct vctx *cx, const struct node *n, cJSON *v, int vdepth);

/* The member_fn that each_member_schema calls during the defaults pass. */
static int fill_member(struct vctx *cx, const struct node *sub, cJSON *f, int vdepth)
{
	return fill(cx, sub, f, vdepth + 1);
}

/* A deep copy per insertion: the schema's default stays intact for the next value, and the
 * value owns what it holds.  Present properties are never touched, null included. */
static int insert_defaults(struct vctx *cx, const struct node *n, cJSON *obj)
{
	for (size_t i = 0; i < n->n_props; i++) {
		const struct node *p = n->props[i].node;
		const cJSON *def = p->s ? schema_get(p->s, "default") : NULL;
		if (!def || schema_get(obj, n->props[i].name))
			continue;
		cJSON *copy = cJSON_Duplicate(def, 1);
		if (!copy || !cJSON_AddItemToObject(obj, n->props[i].name, copy)) {
			cJSON_Delete(copy);
			return vabort(cx, "out of memory while applying defaults");
		}
	}
	return 0;
}

/* Fill in the defaults of absent properties along the applicators that always apply:
 * properties (and patternProperties / additionalProperties), items, allOf, $ref.  Those under
 * anyOf, oneOf, not and if/then/else are left alone: which of them applies is only known by
 * validating, and that must see one fixed value.  Inserted values are filled in turn. */
static int fill(struct vctx *cx, const struct node *n, cJSON *v, int vdepth)
{
	if (!n->s || vdepth > SCHEMA_MAX_DEPTH)
		return 0;
	int rc = enter(cx);
	if (rc)
		return rc;
	if (n->ref)
		rc = fill(cx, n->ref, v, vdepth);
	for (size_t i = 0; rc == 0 && i < n->all.n; i++)
		rc = fill(cx, n->all.v[i], v, vdepth);
	if (rc == 0 && cJSON_IsObject(v) && (rc = insert_defaults(cx, n, v)) == 0) {
		cJSON *f;
		cJSON_ArrayForEach(f, v) {
			size_t mark = schema_path_key(&cx->path, f->string);
			rc = each_member_schema(cx, n, f, vdepth, fill_member);
			if (rc == V_ABORT)
				break;
			rc = 0;   /* unknown fields and names that are not UTF-8 are validate()'s to report */
			schema_path_restore(&cx->path, mark);
		}
	} else if (rc == 0 && cJSON_IsArray(v)) {
		size_t i = 0;
		cJSON *el;
		cJSON_ArrayForEach(el, v) {
			const struct node *sub = i < n->prefix.n ? n->prefix.v[i] : n->items;
			size_t mark = schema_path_index(&cx->path, i++);
			if (sub && (rc = fill(cx, sub, el, vdepth + 1)) != 0)
				break;
			schema_path_restore(&cx->path, mark);
		}
	}
	cx->frames--;
	return rc;
}

/* Add v's JSON nodes to *nodes and the bytes of its strings and keys to *bytes (cJSON's
 * parser bounds the depth). */
static void measure(const cJSON *v, unsigned long *nodes, unsigned long *bytes)
{
	*nodes += 1;
	if (v->string)
		*bytes += strlen(v->string);
	if (cJSON_IsString(v))
		*bytes += strlen(v->valuestring);
	for (const cJSON *c = v->child; c; c = c->next)
		measure(c, nodes, bytes);
}

/* Fill in defaults, then validate; 0 or -1 (cx's message and path say why).  Both budgets are
 * a fixed allowance plus a share per node (steps) or per byte of text (pattern steps), so
 * large values validate under simple schemas while the time any schema can take stays linear
 * in the value's size. */
static int apply_node(struct vctx *cx, const struct node *n, cJSON *value)
{
	unsigned long nodes = 0, bytes = 0;
	measure(value, &nodes, &bytes);
	cx->budget = SCHEMA_MAX_STEPS + SCHEMA_STEPS_PER_NODE * nodes;
	cx->pattern_budget = PATTERN_STEPS + PATTERN_STEPS_PER_BYTE * bytes;
	int rc = fill(cx, n, value, 0);
	if (rc == 0) {
		schema_path_restore(&cx->path, 0);
		rc = validate(cx, n, value, 0);
	}
	pcre2_match_data_free(cx->md);
	pcre2_match_context_free(cx->mctx);
	cx->md = NULL;
	cx->mctx = NULL;
	return rc ? -1 : 0;
}

/* The entry for a node other than the root: schema_compile() checks each "default" against
 * the subschema it belongs to. */
int schema_apply_at(const struct schema *sc, const struct node *n, cJSON *value,
                    char *err, size_t errlen)
{
	struct vctx cx = { .sc = sc, .err = err, .errlen = errlen, .top_err = err, .top_errlen = errlen };
	if (errlen)
		err[0] = '\0';
	return apply_node(&cx, n, value);
}

int schema_apply(const struct schema *sc, cJSON *value, char *err, size_t errlen,
                 char *field, size_t fieldlen)
{
	struct vctx cx = { .sc = sc, .err = err, .errlen = errlen, .top_err = err, .top_errlen = errlen };
	if (errlen)
		err[0] = '\0';
	int rc = apply_node(&cx, sc->root, value);
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
