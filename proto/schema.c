/* proto/schema.c — see schema.h.
 *
 * schema_compile() walks a schema once: it proves that every keyword is one this file
 * enforces (or a pure annotation) and well formed, and builds a tree of nodes beside the
 * cJSON text: subschemas linked by keyword, regular expressions compiled by PCRE2, $ref
 * resolved to the node it names.  $ref may make the tree a graph with cycles (a recursive
 * tree schema); a cycle that applies a schema to the same value again without descending into
 * it can never finish and is refused at load.  Every "default" is then validated against its
 * own schema.  schema_apply() makes two passes over a value: one fills in defaults along the
 * applicators that always apply (properties, items, allOf, $ref), one validates without
 * changing anything, so a schema's verdict never depends on the order keywords are tried in.
 *
 * Schemas come from an operator's config and values from a model; neither may exhaust the
 * stack or the loop's time.  Load bounds: schema nesting (SCHEMA_MAX_DEPTH), subschema count,
 * pattern size and nesting, in-place chains.  Validation bounds: value nesting, recursion
 * frames, a step budget shared by every subschema application, equality comparison and
 * pattern match (anyOf over $ref fan-out is exponential without it), a budget of PCRE2 steps
 * shared by every match (counted by callout), and PCRE2's heap limit per match.  Running out of any of them stops validation with a message that
 * says so; it never counts as a mere mismatch (under "not" that would turn into a pass).
 * Messages go into the caller's buffer, truncated if they do not fit; nothing here prints. */
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

size_t schema_path_append(struct path *p, const char *fmt, ...)
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

size_t schema_path_key(struct path *p, const char *key)
{
	return schema_path_append(p, "%s%s", p->len ? "." : "", key);
}

size_t schema_path_index(struct path *p, size_t i)
{
	return schema_path_append(p, "[%zu]", i);
}

void schema_path_restore(struct path *p, size_t len)
{
	p->len = len;
	p->s[len] = '\0';
}

void schema_msg_add(struct msg *m, const char *fmt, ...)
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
struct msg schema_msg_start(char *err, size_t errlen, const struct path *p)
{
	struct msg m = { err, errlen, 0 };
	if (errlen)
		err[0] = '\0';
	if (p->len)
		schema_msg_add(&m, "%s: ", p->s);
	return m;
}

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

const cJSON *schema_get(const cJSON *obj, const char *key)
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

int schema_type_index(const char *name)
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

void schema_node_free(struct node *n)
{
	if (!n)
		return;
	free(n->where);
	pcre2_code_free(n->pattern);
	free(n->all.v);
	free(n->any.v);
	free(n->one.v);
	free(n->prefix.v);
	free(n->props);
	for (size_t i = 0; i < n->n_pprops; i++)
		pcre2_code_free(n->pprops[i].re);
	free(n->pprops);
	free(n->deps);
	free(n);
}

void schema_free(struct schema *sc)
{
	if (!sc)
		return;
	for (size_t i = 0; i < sc->n_nodes; i++)
		schema_node_free(sc->nodes[i]);
	free(sc->nodes);
	free(sc->anchors);
	pcre2_match_context_free(sc->mctx);
	cJSON_Delete(sc->doc);
	free(sc);
}

/* Grow *v (of *cap elements of size sz) to hold at least n; 0 or -1. */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
	if (n <= *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	while (c < n)
		c *= 2;
	void *p = realloc(*v, c * sz);
	if (!p)
		return -1;
	*v = p;
	*cap = c;
	return 0;
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

static int fill_member(struct vctx *cx, const struct node *sub, cJSON *f, int vdepth)
{
	return fill(cx, sub, f, vdepth + 1);
}

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

/* ---- schema_compile ------------------------------------------------------------------ */

/* Which node a schema object compiled to: an open-addressing table keyed by address. */
struct memo {
	const cJSON **keys;
	struct node **vals;
	size_t cap;          /* a power of two, at least twice the entries */
};

struct cctx {
	struct schema *sc;
	char *err;
	size_t errlen;
	struct path path;    /* keyword path inside the schema */
	struct memo memo;
	struct node **refs;  /* nodes whose $ref awaits resolution */
	size_t n_refs, cap_refs;
};

static size_t memo_slot(const struct memo *m, const cJSON *k)
{
	size_t i = (size_t)(((uintptr_t)k >> 4) * 0x9E3779B97F4A7C15ULL) & (m->cap - 1);
	while (m->keys[i] && m->keys[i] != k)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static struct node *memo_get(const struct memo *m, const cJSON *k)
{
	return m->cap ? m->vals[memo_slot(m, k)] : NULL;
}

static int memo_put(struct memo *m, size_t count, const cJSON *k, struct node *v)
{
	if (count * 2 >= m->cap) {
		struct memo bigger = { NULL, NULL, m->cap ? m->cap * 2 : 64 };
		bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
		bigger.vals = calloc(bigger.cap, sizeof *bigger.vals);
		if (!bigger.keys || !bigger.vals) {
			free(bigger.keys);
			free(bigger.vals);
			return -1;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->keys[i])
				continue;
			size_t j = memo_slot(&bigger, m->keys[i]);
			bigger.keys[j] = m->keys[i];
			bigger.vals[j] = m->vals[i];
		}
		free(m->keys);
		free(m->vals);
		*m = bigger;
	}
	size_t i = memo_slot(m, k);
	m->keys[i] = k;
	m->vals[i] = v;
	return 0;
}

static int cfail(struct cctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cfail(struct cctx *cx, const char *fmt, ...)
{
	struct msg m = schema_msg_start(cx->err, cx->errlen, &cx->path);
	if (m.cap && m.len < m.cap - 1) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(m.s + m.len, m.cap - m.len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* A new node for s, registered for freeing and by address; NULL (message set) on failure. */
static struct node *node_new(struct cctx *cx, const cJSON *s)
{
	struct schema *sc = cx->sc;
	if (sc->n_nodes >= SCHEMA_MAX_NODES) {
		cfail(cx, "schema has more than %d subschemas", SCHEMA_MAX_NODES);
		return NULL;
	}
	struct node *n = calloc(1, sizeof *n);
	if (!n || !(n->where = strdup(cx->path.s)) ||
	    grow((void **)&sc->nodes, &sc->cap_nodes, sc->n_nodes + 1, sizeof *sc->nodes) ||
	    memo_put(&cx->memo, sc->n_nodes, s, n)) {
		schema_node_free(n);
		cfail(cx, "out of memory");
		return NULL;
	}
	n->format = -1;
	sc->nodes[sc->n_nodes++] = n;
	return n;
}

static struct node *compile(struct cctx *cx, const cJSON *s, int depth);

/* Compile the subschema kw (a keyword's value), with the path already at it. */
static int sub(struct cctx *cx, const cJSON *kw, int depth, struct node **out)
{
	return (*out = compile(cx, kw, depth + 1)) ? 0 : -1;
}

static int kw_type(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (cJSON_IsString(v)) {
		if (schema_type_index(v->valuestring) < 0)
			return cfail(cx, "unknown type \"%s\"", v->valuestring);
		return 0;
	}
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
		return cfail(cx, "must be a type name or a non-empty array of type names");
	size_t i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, v) {
		size_t mark = schema_path_index(&cx->path, i++);
		if (!cJSON_IsString(t))
			return cfail(cx, "must be a string");
		if (schema_type_index(t->valuestring) < 0)
			return cfail(cx, "unknown type \"%s\"", t->valuestring);
		for (const cJSON *u = v->child; u != t; u = u->next)
			if (strcmp(u->valuestring, t->valuestring) == 0)
				return cfail(cx, "duplicate type \"%s\"", t->valuestring);
		schema_path_restore(&cx->path, mark);
	}
	return 0;
}

/* An array of distinct strings (required, and each entry of dependentRequired). */
static int name_list(struct cctx *cx, const cJSON *v)
{
	if (!cJSON_IsArray(v))
		return cfail(cx, "must be an array of property names");
	size_t i = 0;
	const cJSON *r;
	cJSON_ArrayForEach(r, v) {
		size_t mark = schema_path_index(&cx->path, i++);
		if (!cJSON_IsString(r))
			return cfail(cx, "must be a string");
		for (const cJSON *u = v->child; u != r; u = u->next)
			if (strcmp(u->valuestring, r->valuestring) == 0)
				return cfail(cx, "duplicate name \"%s\"", r->valuestring);
		schema_path_restore(&cx->path, mark);
	}
	return 0;
}

static int kw_required(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	return name_list(cx, v);
}

static int has_member(const cJSON *obj, const cJSON *upto, const char *key)
{
	for (const cJSON *c = obj->child; c && c != upto; c = c->next)
		if (strcmp(c->string, key) == 0)
			return 1;
	return 0;
}

/* An object mapping names to schemas (properties, dependentSchemas, $defs): each compiled,
 * and listed in *out (when out is not NULL). */
static int schema_map(struct cctx *cx, const cJSON *v, int depth, struct prop **out, size_t *nout,
                      const char *what)
{
	if (!cJSON_IsObject(v))
		return cfail(cx, "must be an object mapping names to schemas");
	size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
	if (out && n && !(*out = calloc(n, sizeof **out)))
		return cfail(cx, "out of memory");
	const cJSON *p;
	cJSON_ArrayForEach(p, v) {
		size_t mark = schema_path_key(&cx->path, p->string);
		if (has_member(v, p, p->string))
			return cfail(cx, "duplicate %s", what);
		struct node *c = compile(cx, p, depth + 1);
		if (!c)
			return -1;
		if (out)
			(*out)[i++] = (struct prop){ p->string, c };
		if (nout)
			*nout = i;
		schema_path_restore(&cx->path, mark);
	}
	return 0;
}

static int kw_properties(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	return schema_map(cx, v, depth, &n->props, &n->n_props, "property");
}

static int kw_dep_schemas(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	return schema_map(cx, v, depth, &n->deps, &n->n_deps, "name");
}

static int kw_defs(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	return schema_map(cx, v, depth, NULL, NULL, "name");
}

static int kw_dep_required(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsObject(v))
		return cfail(cx, "must be an object mapping names to arrays of names");
	const cJSON *p;
	cJSON_ArrayForEach(p, v) {
		size_t mark = schema_path_key(&cx->path, p->string);
		if (has_member(v, p, p->string))
			return cfail(cx, "duplicate name");
		if (name_list(cx, p))
			return -1;
		schema_path_restore(&cx->path, mark);
	}
	return 0;
}

/* A regular expression, compiled once: PCRE2 in UTF mode, as close to ECMA-262 (the dialect
 * JSON Schema names, and the one zod's patterns are written in) as it goes: "$" matches only
 * at the very end, \uhhhh and \u{h...} are code points, \xhh a byte-sized one.  \C (a single
 * byte inside a character) is refused.  An invalid pattern is refused with PCRE2's reason and
 * where it is. */
static int compile_re(struct cctx *cx, const cJSON *v, pcre2_code **out)
{
	if (!cJSON_IsString(v))
		return cfail(cx, "must be a string (a regular expression)");
	size_t len = strlen(v->valuestring);
	if (len > PATTERN_MAX_BYTES)
		return cfail(cx, "pattern longer than %d bytes", PATTERN_MAX_BYTES);
	pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
	if (!cc)
		return cfail(cx, "out of memory");
	pcre2_set_parens_nest_limit(cc, 64);
	pcre2_set_compile_extra_options(cc, PCRE2_EXTRA_ALT_BSUX);
	int code;
	PCRE2_SIZE off;
	*out = pcre2_compile((PCRE2_SPTR)v->valuestring, len,
	                     PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C | PCRE2_ALT_BSUX |
	                     PCRE2_AUTO_CALLOUT,
	                     &code, &off, cc);
	pcre2_compile_context_free(cc);
	if (!*out) {
		PCRE2_UCHAR why[160];
		if (pcre2_get_error_message(code, why, sizeof why) < 0)
			snprintf((char *)why, sizeof why, "error %d", code);
		return cfail(cx, "invalid regular expression at offset %zu: %s", (size_t)off, (char *)why);
	}
	return 0;
}

static int kw_pattern(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (compile_re(cx, v, &n->pattern))
		return -1;
	n->pattern_src = v->valuestring;
	return 0;
}

static int kw_pattern_props(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsObject(v))
		return cfail(cx, "must be an object mapping patterns to schemas");
	size_t count = (size_t)cJSON_GetArraySize(v);
	if (count && !(n->pprops = calloc(count, sizeof *n->pprops)))
		return cfail(cx, "out of memory");
	const cJSON *p;
	cJSON_ArrayForEach(p, v) {
		size_t mark = schema_path_key(&cx->path, p->string);
		if (has_member(v, p, p->string))
			return cfail(cx, "duplicate pattern");
		struct pprop *pp = &n->pprops[n->n_pprops];
		cJSON key = { .type = cJSON_String, .valuestring = p->string };
		if (compile_re(cx, &key, &pp->re))
			return -1;
		pp->src = p->string;
		n->n_pprops++;
		if (!(pp->node = compile(cx, p, depth + 1)))
			return -1;
		schema_path_restore(&cx->path, mark);
	}
	return 0;
}

/* A non-empty array of schemas (allOf, anyOf, oneOf, prefixItems). */
static int schema_list(struct cctx *cx, const cJSON *v, int depth, struct nodes *out)
{
	size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
	if (!cJSON_IsArray(v) || n == 0)
		return cfail(cx, "must be a non-empty array of schemas");
	if (!(out->v = calloc(n, sizeof *out->v)))
		return cfail(cx, "out of memory");
	const cJSON *s;
	cJSON_ArrayForEach(s, v) {
		size_t mark = schema_path_index(&cx->path, i);
		if (!(out->v[i++] = compile(cx, s, depth + 1)))
			return -1;
		out->n = i;
		schema_path_restore(&cx->path, mark);
	}
	return 0;
}

static int kw_all(struct cctx *cx, struct node *n, const cJSON *v, int d) { return schema_list(cx, v, d, &n->all); }
static int kw_any_of(struct cctx *cx, struct node *n, const cJSON *v, int d) { return schema_list(cx, v, d, &n->any); }
static int kw_one(struct cctx *cx, struct node *n, const cJSON *v, int d) { return schema_list(cx, v, d, &n->one); }
static int kw_prefix(struct cctx *cx, struct node *n, const cJSON *v, int d) { return schema_list(cx, v, d, &n->prefix); }
static int kw_addl(struct cctx *cx, struct node *n, const cJSON *v, int d) { return sub(cx, v, d, &n->addl); }
static int kw_not(struct cctx *cx, struct node *n, const cJSON *v, int d) { return sub(cx, v, d, &n->not_); }
static int kw_if(struct cctx *cx, struct node *n, const cJSON *v, int d) { return sub(cx, v, d, &n->if_); }
static int kw_then(struct cctx *cx, struct node *n, const cJSON *v, int d) { return sub(cx, v, d, &n->then_); }
static int kw_else(struct cctx *cx, struct node *n, const cJSON *v, int d) { return sub(cx, v, d, &n->else_); }
static int kw_names(struct cctx *cx, struct node *n, const cJSON *v, int d) { return sub(cx, v, d, &n->names); }
static int kw_contains(struct cctx *cx, struct node *n, const cJSON *v, int d) { return sub(cx, v, d, &n->contains); }

static int kw_items(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (cJSON_IsArray(v))
		return cfail(cx, "must be a schema (the array form is draft-07's; use prefixItems)");
	return sub(cx, v, depth, &n->items);
}

static int kw_count(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsNumber(v) || !schema_is_integral(v->valuedouble) || v->valuedouble < 0 ||
	    v->valuedouble > COUNT_MAX)
		return cfail(cx, "must be a non-negative integer");
	return 0;
}

static int kw_number(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return cfail(cx, "must be a number");
	return 0;
}

static int kw_multiple(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0)
		return cfail(cx, "must be a number greater than 0");
	return 0;
}

static int kw_string(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	return cJSON_IsString(v) ? 0 : cfail(cx, "must be a string");
}

static int kw_bool(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	return cJSON_IsBool(v) ? 0 : cfail(cx, "must be true or false");
}

static int kw_any(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	return 0;
}

static int kw_enum(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
		return cfail(cx, "must be a non-empty array");
	return 0;
}

static int kw_examples(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	return cJSON_IsArray(v) ? 0 : cfail(cx, "must be an array");
}

static int kw_format(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsString(v))
		return cfail(cx, "must be a string");
	if ((n->format = schemafmt_find(v->valuestring)) < 0)
		return cfail(cx, "unsupported format \"%s\" (supported: %s)", v->valuestring,
		             schemafmt_list());
	return 0;
}

static int kw_ref(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsString(v))
		return cfail(cx, "must be a string");
	if (v->valuestring[0] != '#')
		return cfail(cx, "only references inside the schema (\"#...\") are supported, not \"%s\"",
		             v->valuestring);
	if (grow((void **)&cx->refs, &cx->cap_refs, cx->n_refs + 1, sizeof *cx->refs))
		return cfail(cx, "out of memory");
	n->ref_text = v;
	cx->refs[cx->n_refs++] = n;
	return 0;
}

static int kw_anchor(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	struct schema *sc = cx->sc;
	const char *a = cJSON_IsString(v) ? v->valuestring : "";
	int ok = (a[0] >= 'A' && a[0] <= 'Z') || (a[0] >= 'a' && a[0] <= 'z') || a[0] == '_';
	for (const char *p = a + 1; ok && *p; p++)
		ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		     *p == '_' || *p == '-' || *p == '.';
	if (!ok)
		return cfail(cx, "must be a name (a letter or _, then letters, digits, _ - .)");
	for (size_t i = 0; i < sc->n_anchors; i++)
		if (strcmp(sc->anchors[i].name, a) == 0)
			return cfail(cx, "duplicate anchor \"%s\"", a);
	if (grow((void **)&sc->anchors, &sc->cap_anchors, sc->n_anchors + 1, sizeof *sc->anchors))
		return cfail(cx, "out of memory");
	sc->anchors[sc->n_anchors++] = (struct anchor){ a, n };
	return 0;
}

/* $id changes the base that "#..." references resolve against; only the root may have one. */
static int kw_id(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsString(v))
		return cfail(cx, "must be a string");
	if (depth != 0 || strcmp(n->where, "") != 0)
		return cfail(cx, "only the root schema may have an $id (embedded schema resources "
		             "are not supported)");
	return 0;
}

static const struct {
	const char *name;
	int (*check)(struct cctx *, struct node *, const cJSON *, int depth);
} keywords[] = {
	{ "type", kw_type }, { "enum", kw_enum }, { "const", kw_any },
	{ "minimum", kw_number }, { "maximum", kw_number },
	{ "exclusiveMinimum", kw_number }, { "exclusiveMaximum", kw_number },
	{ "multipleOf", kw_multiple },
	{ "minLength", kw_count }, { "maxLength", kw_count }, { "pattern", kw_pattern },
	{ "format", kw_format },
	{ "items", kw_items }, { "prefixItems", kw_prefix }, { "contains", kw_contains },
	{ "minItems", kw_count }, { "maxItems", kw_count },
	{ "minContains", kw_count }, { "maxContains", kw_count }, { "uniqueItems", kw_bool },
	{ "properties", kw_properties }, { "patternProperties", kw_pattern_props },
	{ "additionalProperties", kw_addl }, { "propertyNames", kw_names },
	{ "required", kw_required }, { "dependentRequired", kw_dep_required },
	{ "dependentSchemas", kw_dep_schemas },
	{ "minProperties", kw_count }, { "maxProperties", kw_count },
	{ "allOf", kw_all }, { "anyOf", kw_any_of }, { "oneOf", kw_one }, { "not", kw_not },
	{ "if", kw_if }, { "then", kw_then }, { "else", kw_else },
	{ "$ref", kw_ref }, { "$defs", kw_defs }, { "definitions", kw_defs },
	{ "$anchor", kw_anchor }, { "$id", kw_id },
	/* annotations: checked for form, no effect on validation */
	{ "default", kw_any }, { "title", kw_string }, { "description", kw_string },
	{ "$schema", kw_string }, { "$comment", kw_string }, { "examples", kw_examples },
	{ "deprecated", kw_bool }, { "readOnly", kw_bool }, { "writeOnly", kw_bool },
	{ "contentEncoding", kw_string }, { "contentMediaType", kw_string },
};

/* Keywords that mean nothing without another one: refused rather than silently inert. */
static int check_pairs(struct cctx *cx, const cJSON *s)
{
	static const char *const pairs[][2] = {
		{ "then", "if" }, { "else", "if" },
		{ "minContains", "contains" }, { "maxContains", "contains" },
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		if (!schema_get(s, pairs[i][0]) || schema_get(s, pairs[i][1]))
			continue;
		size_t mark = schema_path_key(&cx->path, pairs[i][0]);
		cfail(cx, "has no effect without \"%s\"", pairs[i][1]);
		schema_path_restore(&cx->path, mark);
		return -1;
	}
	return 0;
}

/* A lower bound above its upper bound makes every value fail: say so at load, not per call. */
static int check_order(struct cctx *cx, const cJSON *s, const char *lo, const char *hi)
{
	const cJSON *a = schema_get(s, lo), *b = schema_get(s, hi);
	if (!a || !b || a->valuedouble <= b->valuedouble)
		return 0;
	size_t mark = schema_path_key(&cx->path, lo);
	cfail(cx, "greater than %s", hi);
	schema_path_restore(&cx->path, mark);
	return -1;
}

static int check_keywords(struct cctx *cx, struct node *n, const cJSON *s, int depth)
{
	const cJSON *kw;
	cJSON_ArrayForEach(kw, s) {
		size_t mark = schema_path_key(&cx->path, kw->string);
		/* A repeated keyword would be checked twice but enforced once. */
		if (has_member(s, kw, kw->string))
			return cfail(cx, "duplicate keyword");
		size_t i = 0;
		while (i < sizeof keywords / sizeof keywords[0] && strcmp(keywords[i].name, kw->string))
			i++;
		if (i == sizeof keywords / sizeof keywords[0])
			return cfail(cx, "unsupported keyword \"%s\"", kw->string);
		if (keywords[i].check(cx, n, kw, depth))
			return -1;
		schema_path_restore(&cx->path, mark);
	}
	return 0;
}

/* Compile schema s (an object or a boolean), at cx->path; NULL with a message on failure.
 * A schema object already compiled (reached again through $ref) is its existing node. */
static struct node *compile(struct cctx *cx, const cJSON *s, int depth)
{
	struct node *n = memo_get(&cx->memo, s);
	if (n)
		return n;
	if (depth > SCHEMA_MAX_DEPTH) {
		cfail(cx, "schema nested more than %d levels deep", SCHEMA_MAX_DEPTH);
		return NULL;
	}
	if (!cJSON_IsObject(s) && !cJSON_IsBool(s)) {
		cfail(cx, "must be a schema (an object, true or false)");
		return NULL;
	}
	if (!(n = node_new(cx, s)))
		return NULL;
	if (cJSON_IsBool(s)) {
		n->verdict = cJSON_IsTrue(s);
		return n;
	}
	n->s = s;
	if (check_keywords(cx, n, s, depth) || check_pairs(cx, s) ||
	    check_order(cx, s, "minimum", "maximum") ||
	    check_order(cx, s, "minLength", "maxLength") ||
	    check_order(cx, s, "minItems", "maxItems") ||
	    check_order(cx, s, "minContains", "maxContains") ||
	    check_order(cx, s, "minProperties", "maxProperties"))
		return NULL;
	return n;
}

/* ---- references, cycles, defaults --------------------------------------------------- */

/* The fragment after '#' with its %XX escapes decoded into out; -1 if malformed, too long or
 * holding a NUL. */
static int pct_decode(const char *in, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef0123456789ABCDEF";
	size_t n = 0;
	for (const char *p = in; *p; p++) {
		char c = *p;
		if (c == '%') {
			const char *hi = p[1] ? strchr(hex, p[1]) : NULL;
			const char *lo = hi && p[2] ? strchr(hex, p[2]) : NULL;
			if (!lo)
				return -1;
			c = (char)(((hi - hex) % 16) * 16 + (lo - hex) % 16);
			if (c == '\0')
				return -1;
			p += 2;
		}
		if (n + 1 >= cap)
			return -1;
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

/* The value a JSON pointer (RFC 6901: "/a/b~1c/0", ~0 for '~', ~1 for '/') names in doc. */
static const cJSON *pointer_get(const cJSON *doc, const char *p)
{
	const cJSON *cur = doc;
	char tok[PATH_CHARS];
	while (cur && *p == '/') {
		size_t n = 0;
		for (p++; *p && *p != '/'; p++) {
			char c = *p;
			if (c == '~') {
				if (p[1] != '0' && p[1] != '1')
					return NULL;
				c = *++p == '0' ? '~' : '/';
			}
			if (n + 1 >= sizeof tok)
				return NULL;
			tok[n++] = c;
		}
		tok[n] = '\0';
		if (cJSON_IsObject(cur)) {
			cur = schema_get(cur, tok);
		} else if (cJSON_IsArray(cur)) {
			char *end;
			unsigned long i = strtoul(tok, &end, 10);
			if (!n || *end || (tok[0] == '0' && n > 1) || tok[0] < '0' || tok[0] > '9' ||
			    i >= (unsigned long)cJSON_GetArraySize(cur))
				return NULL;
			cur = cJSON_GetArrayItem(cur, (int)i);
		} else {
			return NULL;
		}
	}
	return *p ? NULL : cur;
}

static void path_set(struct path *p, const char *where, const char *key)
{
	schema_path_restore(p, 0);
	schema_path_append(p, "%s", where);
	if (key)
		schema_path_key(p, key);
}

/* Point n->ref at the node its "$ref" names: the root ("#"), a JSON pointer ("#/$defs/a"),
 * or an $anchor ("#name").  A pointer to a place not compiled yet compiles it there. */
static int resolve_ref(struct cctx *cx, struct node *n)
{
	struct schema *sc = cx->sc;
	const char *r = n->ref_text->valuestring;
	char frag[PATH_CHARS];
	path_set(&cx->path, n->where, "$ref");
	if (pct_decode(r + 1, frag, sizeof frag))
		return cfail(cx, "malformed reference \"%s\"", r);
	if (frag[0] == '\0') {
		n->ref = sc->root;
		return 0;
	}
	if (frag[0] != '/') {
		for (size_t i = 0; i < sc->n_anchors; i++)
			if (strcmp(sc->anchors[i].name, frag) == 0)
				n->ref = sc->anchors[i].node;
		return n->ref ? 0 : cfail(cx, "no $anchor \"%s\" in the schema", frag);
	}
	const cJSON *target = pointer_get(sc->doc, frag);
	if (!target)
		return cfail(cx, "\"%s\" names nothing in the schema", r);
	if ((n->ref = memo_get(&cx->memo, target)) != NULL)
		return 0;
	schema_path_restore(&cx->path, 0);
	for (const char *p = frag + 1; *p; p++)
		schema_path_append(&cx->path, "%c", *p == '/' ? '.' : *p);
	return (n->ref = compile(cx, target, 0)) ? 0 : -1;
}

static int inplace_walk(struct cctx *cx, struct node *n, int depth);

static int walk_child(struct cctx *cx, struct node *n, struct node *c, int depth)
{
	if (!c)
		return 0;
	int rc = inplace_walk(cx, c, depth + 1);
	if (rc != 1)
		return rc;
	path_set(&cx->path, n->where, c == n->ref ? "$ref" : NULL);
	return cfail(cx, "makes a cycle: a schema applies to the same value again without "
	             "descending into it");
}

/* Refuse what could never finish: a cycle of $ref (through allOf, anyOf, oneOf, not, if,
 * then, else, dependentSchemas) that comes back to a schema on the same value.  Also bounds
 * how long such in-place chains are.  1 tells the caller its child closed a cycle. */
static int inplace_walk(struct cctx *cx, struct node *n, int depth)
{
	if (!n->s || n->mark == 2)
		return 0;
	if (n->mark == 1)
		return 1;
	if (depth > SCHEMA_MAX_INPLACE) {
		path_set(&cx->path, n->where, NULL);
		return cfail(cx, "schemas apply to the same value more than %d levels deep (through "
		             "$ref, allOf, anyOf, oneOf, not, if)", SCHEMA_MAX_INPLACE);
	}
	n->mark = 1;
	struct node *single[] = { n->ref, n->not_, n->if_, n->then_, n->else_ };
	const struct nodes *lists[] = { &n->all, &n->any, &n->one };
	for (size_t i = 0; i < sizeof single / sizeof single[0]; i++)
		if (walk_child(cx, n, single[i], depth))
			return -1;
	for (size_t l = 0; l < 3; l++)
		for (size_t i = 0; i < lists[l]->n; i++)
			if (walk_child(cx, n, lists[l]->v[i], depth))
				return -1;
	for (size_t i = 0; i < n->n_deps; i++)
		if (walk_child(cx, n, n->deps[i].node, depth))
			return -1;
	n->mark = 2;
	return 0;
}

/* Every "default" must satisfy its own schema (validated on a copy, so defaults inside it
 * do not leak into the schema's text). */
static int check_defaults(struct cctx *cx)
{
	for (size_t i = 0; i < cx->sc->n_nodes; i++) {
		struct node *n = cx->sc->nodes[i];
		const cJSON *def = n->s ? schema_get(n->s, "default") : NULL;
		if (!def)
			continue;
		path_set(&cx->path, n->where, "default");
		cJSON *copy = cJSON_Duplicate(def, 1);
		if (!copy)
			return cfail(cx, "out of memory");
		char why[256];
		int rc = schema_apply_at(cx->sc, n, copy, why, sizeof why);
		cJSON_Delete(copy);
		if (rc)
			return cfail(cx, "does not satisfy the schema (%s)", why);
	}
	return 0;
}

static pcre2_match_context *match_context(void)
{
	pcre2_match_context *m = pcre2_match_context_create(NULL);
	if (m) {
		pcre2_set_heap_limit(m, PATTERN_HEAP_KIB);
	}
	return m;
}

struct schema *schema_compile(const cJSON *schema, char *err, size_t errlen)
{
	struct cctx cx = { .err = err, .errlen = errlen };
	struct schema *sc = calloc(1, sizeof *sc);
	if (errlen)
		err[0] = '\0';
	if (!sc || !(sc->doc = cJSON_Duplicate(schema, 1)) || !(sc->mctx = match_context())) {
		cfail(&cx, "out of memory");
		goto fail;
	}
	cx.sc = sc;
	if (!(sc->root = compile(&cx, sc->doc, 0)))
		goto fail;
	for (size_t i = 0; i < cx.n_refs; i++)   /* (resolving may compile more, and add refs) */
		if (resolve_ref(&cx, cx.refs[i]))
			goto fail;
	for (size_t i = 0; i < sc->n_nodes; i++)
		if (inplace_walk(&cx, sc->nodes[i], 0))
			goto fail;
	if (check_defaults(&cx))
		goto fail;
	free(cx.memo.keys);
	free(cx.memo.vals);
	free(cx.refs);
	return sc;
fail:
	if (errlen)
		schema_tidy(err);
	free(cx.memo.keys);
	free(cx.memo.vals);
	free(cx.refs);
	schema_free(sc);
	return NULL;
}

int schema_check(const cJSON *schema, char *err, size_t errlen)
{
	struct schema *sc = schema_compile(schema, err, errlen);
	schema_free(sc);
	return sc ? 0 : -1;
}

int schema_validate(const cJSON *schema, cJSON *value, char *err, size_t errlen,
                    char *field, size_t fieldlen)
{
	char why[768];
	struct schema *sc = schema_compile(schema, why, sizeof why);
	if (!sc) {
		if (errlen) {
			snprintf(err, errlen, "invalid schema: %s", why);
			schema_tidy(err);
		}
		if (field && fieldlen)
			field[0] = '\0';
		return -1;
	}
	int rc = schema_apply(sc, value, err, errlen, field, fieldlen);
	schema_free(sc);
	return rc;
}
