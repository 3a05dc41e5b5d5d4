/* proto/schema_int.h — what the schema files (schema.c, schema_compile.c, schema_validate.c)
 * share: the limits, the compiled form, and the path and message builders.  Not an API:
 * nothing outside proto/schema*.c includes it; proto/schema.h is the interface.
 *
 * The compiled form is built once by schema_compile() and read-only afterwards, so one
 * struct schema may be applied by any number of validations without locking. */
#ifndef FP_SCHEMA_INT_H
#define FP_SCHEMA_INT_H

#include <stddef.h>
#include <cJSON.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#define SCHEMA_MAX_DEPTH 64          /* schema nesting at load, value nesting at validation */
#define SCHEMA_MAX_NODES 10000       /* subschemas in one schema */
#define SCHEMA_MAX_INPLACE 32        /* longest chain of $ref/allOf/anyOf/... on one value */
#define SCHEMA_MAX_FRAMES 2048       /* recursion frames of one validation */
#define SCHEMA_MAX_STEPS 250000UL    /* work units of one validation, */
#define SCHEMA_STEPS_PER_NODE 16UL   /* plus these per node of the value */
#define MATCH_STEPS 4UL              /* a pattern match, plus one per 64 bytes matched */
#define PATTERN_MAX_BYTES 4096
#define PATTERN_STEPS 100000UL       /* PCRE2 pattern steps (callouts) of one validation, */
#define PATTERN_STEPS_PER_BYTE 8UL   /* plus these per byte of the value's strings and keys */
#define PATTERN_HEAP_KIB 32768       /* PCRE2 backtracking memory per match */
#define PATH_CHARS 512
/* 2^53: the largest count a double holds exactly, more than any string or array can have. */
#define COUNT_MAX 9007199254740992.0

/* A dotted path ("a.b[2].c") built in place while descending; clipped, never overflowing. */
struct path {
	char s[PATH_CHARS];
	size_t len;
};

/* Append to p (clipped at a whole UTF-8 character when full); the length before, for
 * schema_path_restore(). */
size_t schema_path_append(struct path *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t schema_path_key(struct path *p, const char *key);      /* ".key" (no dot at the root) */
size_t schema_path_index(struct path *p, size_t i);           /* "[i]" */
void schema_path_restore(struct path *p, size_t len);

/* A bounded string builder over the caller's err buffer. */
struct msg {
	char *s;
	size_t cap;
	size_t len;
};

void schema_msg_add(struct msg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A message over err that starts "path: " (nothing at the root). */
struct msg schema_msg_start(char *err, size_t errlen, const struct path *p);

/* obj's member key, case-sensitively (JSON keys are); NULL if absent. */
const cJSON *schema_get(const cJSON *obj, const char *key);
/* The index of a JSON Schema type name ("object" ... "null"), or -1. */
int schema_type_index(const char *name);

/* ---- the compiled form ---------------------------------------------------------------- */

struct node;

struct nodes {
	struct node **v;
	size_t n;
};

struct prop {
	const char *name;    /* borrowed from the schema's copy */
	struct node *node;
};

struct pprop {
	const char *src;     /* the pattern's text, for messages */
	pcre2_code *re;
	struct node *node;
};

/* One subschema.  Keywords with a scalar value are read from s when validating; those with
 * subschemas or compiled state have their own fields. */
struct node {
	const cJSON *s;      /* the schema object in the schema's copy; NULL: a boolean schema */
	int verdict;         /* a boolean schema's value */
	char *where;         /* path in the schema, for messages at load */
	int format;          /* schemafmt index, or -1 */
	const char *pattern_src;
	pcre2_code *pattern;
	const cJSON *ref_text;   /* "$ref" until resolved into ref */
	struct node *ref, *items, *addl, *not_, *if_, *then_, *else_, *names, *contains;
	struct nodes all, any, one, prefix;
	struct prop *props;   size_t n_props;
	struct pprop *pprops; size_t n_pprops;
	struct prop *deps;    size_t n_deps;     /* dependentSchemas */
	int mark;            /* in-place cycle search: 0 unseen, 1 on the path, 2 done */
};

struct anchor {
	const char *name;
	struct node *node;
};

struct schema {
	cJSON *doc;                  /* the schema's own copy; nodes point into it */
	struct node *root;
	struct node **nodes;         /* every node, for freeing */
	size_t n_nodes, cap_nodes;
	struct anchor *anchors;
	size_t n_anchors, cap_anchors;
	pcre2_match_context *mctx;
};

void schema_node_free(struct node *n);

/* Fill in defaults, then validate `value` against node n of sc (schema_apply() for any node):
 * 0, or -1 with the reason in err.  schema_compile() checks each "default" with it. */
int schema_apply_at(const struct schema *sc, const struct node *n, cJSON *value,
                    char *err, size_t errlen);

#endif
