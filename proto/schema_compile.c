/* proto/schema_compile.c — schema_compile(): check a schema and build its compiled form
 * (see schema.h for the contract, schema.c for the design). */
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

/* Keyed by the schema object's address: a $ref to an object already compiled must reach the
 * same node (that is how cycles close), and addresses are unique within the schema's copy.
 * Fibonacci hashing of the address spreads the allocator's aligned pointers over the table;
 * linear probing keeps it a flat array. */
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

/* The table is kept at most half full, so probes stay short; it doubles by rehashing every
 * entry.  On ENOMEM the old table is left intact. */
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

/* Every load error carries the keyword path where it was found, so an operator can find the
 * mistake in a long schema file. */
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

/* A repeated type in the array form is refused: it changes nothing, so it is most likely a
 * typo for another type. */
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

/* Only the form is checked: required names need not be in properties, as the standard
 * allows. */
static int kw_required(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	return name_list(cx, v);
}

/* cJSON keeps duplicate keys; every caller uses this to refuse them, since only one of the
 * two would ever be read. */
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

/* $defs are compiled for their checks even when nothing refers to them: a broken definition
 * is an error in the file whether or not it is used yet. */
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

/* The draft-07 array form is refused with the 2020-12 name for it, not just "must be a
 * schema": that is the usual reason a schema has it. */
static int kw_items(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (cJSON_IsArray(v))
		return cfail(cx, "must be a schema (the array form is draft-07's; use prefixItems)");
	return sub(cx, v, depth, &n->items);
}

/* Counts above 2^53 cannot be held exactly by the double they arrive in, and no string or
 * array can be that long anyway. */
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

/* Zero or a negative divisor has no meaning in JSON Schema and would divide by zero. */
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

/* const and default take any JSON value; default is validated later, once the whole schema
 * is compiled (check_defaults). */
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

/* Only the formats schemafmt checks: an unknown format would be an annotation that looks
 * like a constraint, which is exactly what this file refuses. */
static int kw_format(struct cctx *cx, struct node *n, const cJSON *v, int depth)
{
	if (!cJSON_IsString(v))
		return cfail(cx, "must be a string");
	if ((n->format = schemafmt_find(v->valuestring)) < 0)
		return cfail(cx, "unsupported format \"%s\" (supported: %s)", v->valuestring,
		             schemafmt_list());
	return 0;
}

/* Only references inside this schema: fetching a remote one at load would make a tool's
 * behaviour depend on the network.  Resolution waits until the whole tree is compiled, since
 * the target may come later in the text. */
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

/* The plain-name syntax of 2020-12's $anchor; two anchors of one name would make "#name"
 * ambiguous. */
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

/* The keyword table is the list of what is enforced: a keyword not in it is refused with its
 * name, so a schema never carries a constraint that silently does nothing. */
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

/* Messages after the tree pass (refs, cycles, defaults) name the node's own path. */
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

/* A child that is on the current path (inplace_walk returned 1) closes a cycle: reported at
 * the node that made it, naming $ref when that is the edge. */
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

/* The heap limit bounds PCRE2's backtracking memory per match; made once per schema and
 * copied per validation. */
static pcre2_match_context *match_context(void)
{
	pcre2_match_context *m = pcre2_match_context_create(NULL);
	if (m) {
		pcre2_set_heap_limit(m, PATTERN_HEAP_KIB);
	}
	return m;
}

/* Order matters: the tree first (so every pointer target may be compiled on demand), then the
 * references (which may compile more, and add more references, hence the growing loop), then
 * the cycle search over the complete graph, then the defaults, which need everything. */
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
