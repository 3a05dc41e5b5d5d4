/* proto/schema.h — JSON Schema 2020-12 as tools use it, for tool arguments.
 *
 * Enforced: type (incl. arrays of types, "integer"), enum, const; minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum (numbers), multipleOf; minLength/maxLength (in Unicode
 * code points), pattern, format (date-time, date, time, email, uri, uuid, ipv4, ipv6,
 * hostname: see schemafmt.h); items, prefixItems, contains/minContains/maxContains,
 * minItems/maxItems, uniqueItems; properties, patternProperties, additionalProperties,
 * propertyNames, required, dependentRequired, dependentSchemas, minProperties/maxProperties;
 * allOf, anyOf, oneOf, not, if/then/else; boolean schemas; $ref to "#", "#/json/pointer"
 * (~0 ~1 and %XX escapes) or "#anchor" ($anchor), with $defs or definitions, cycles included.
 * Accepted as annotations: default (filled in, see schema_apply), title, description,
 * examples, $schema, $id (root only), $comment, deprecated, readOnly, writeOnly,
 * contentEncoding, contentMediaType.  Everything else is refused at load, naming its path,
 * so a tool never silently promises a constraint forkpoint does not enforce.
 *
 * pattern and patternProperties are PCRE2 regular expressions (UTF mode, "$" only at the
 * end as in ECMA-262), compiled once by schema_compile().  One validation has a budget of
 * steps and one of pattern steps (both a fixed allowance plus a share per node or byte of the
 * value): a schema, pattern or value that would take too long stops with a message saying so,
 * which is a failure, never a pass. */
#ifndef FP_SCHEMA_H
#define FP_SCHEMA_H

#include <stddef.h>
#include <cJSON.h>

/* A compiled schema: immutable once made, and independent of the cJSON it came from. */
struct schema;

/* Check `schema` and compile it: NULL, with a message in err naming the schema path at fault
 * (e.g. "properties.sections.minimum: must be a number", "properties.a.$ref: \"#/$defs/x\"
 * names nothing in the schema"), if it uses anything unsupported, is malformed, has an
 * invalid pattern, a $ref cycle that never descends into the value, exceeds a size limit, or
 * has a "default" that does not satisfy its own schema. */
struct schema *schema_compile(const cJSON *schema, char *err, size_t errlen);
void schema_free(struct schema *sc);

/* schema_compile() for its verdict only: 0, or -1 with the message in err. */
int schema_check(const cJSON *schema, char *err, size_t errlen);

/* Validate `value` against sc.  Defaults from "default" are first inserted into `value` in
 * place for absent object properties (deep-copied), along properties, patternProperties,
 * additionalProperties, items, prefixItems, allOf and $ref (not inside anyOf, oneOf, not or
 * if/then/else, where which branch applies depends on the value).  Returns 0, or -1 with a
 * message in err that names the field, e.g. "sections: must be <= 10 (got 12)", and the
 * field's path (e.g. "sections", "items[2].name", "" for the root) in field.  A message about
 * the root itself has no "field: " prefix ("must be an object").  On failure `value` may
 * already hold some defaults; callers discard it. */
int schema_apply(const struct schema *sc, cJSON *value, char *err, size_t errlen,
                 char *field, size_t fieldlen);

/* Compile `schema`, apply it, free it: for small schemas built in code (the built-in tools').
 * A configured schema is compiled once, at load, with schema_compile().  An invalid schema is
 * -1 with "invalid schema: ..." in err and "" in field. */
int schema_validate(const cJSON *schema, cJSON *value, char *err, size_t errlen,
                    char *field, size_t fieldlen);

/* Make a message that may have been cut short one line of whole UTF-8 characters: a cut-off
 * final sequence is dropped, any other byte that is not part of a well-formed character
 * becomes '?', control bytes become spaces (config.c's messages too). */
void schema_tidy(char *s);
/* 1 if d is a whole number (what "integer" means for a JSON number), else 0 (also for inf/nan). */
int schema_is_integral(double d);

#endif
