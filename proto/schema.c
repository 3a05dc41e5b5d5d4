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
 * Messages go into the caller's buffer, truncated if they do not fit; nothing here prints.
 *
 * The work is split three ways, sharing proto/schema_int.h: schema_compile.c checks a schema
 * and builds its nodes (keywords, $ref resolution, the in-place cycle search, PCRE2
 * compilation, the defaults' own check); schema_validate.c fills in defaults and validates a
 * value (budgets, pattern matching, the applicators); this file holds what both use (paths,
 * messages, type names, freeing) and the small wrappers schema_check() and schema_validate(). */
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

int schema_is_integral(double d)
{
	/* without libm: every double beyond 2^53 is whole; below it a cast round-trip tells */
	if (!isfinite(d))
		return 0;
	if (d >= 9007199254740992.0 || d <= -9007199254740992.0)
		return 1;
	return d == (double)(long long)d;
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
#define N_TYPES (sizeof type_names / sizeof type_names[0])

int schema_type_index(const char *name)
{
	for (size_t i = 0; i < N_TYPES; i++)
		if (strcmp(type_names[i], name) == 0)
			return (int)i;
	return -1;
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
