/* supervisor/schema.h — the JSON Schema subset forkpoint validates tool arguments against:
 * type (incl. arrays of types, "integer"), required, properties, additionalProperties
 * (bool or schema), enum, const, minimum/maximum, exclusiveMinimum/exclusiveMaximum,
 * minLength/maxLength (in Unicode code points), minItems/maxItems, items, default,
 * plus the annotations title/description/format/examples/$schema which are accepted and ignored.
 * Everything else is refused by schema_check() at config load, so a tool never silently
 * promises a constraint forkpoint does not enforce. */
#ifndef FP_SCHEMA_H
#define FP_SCHEMA_H

#include <stddef.h>
#include <cJSON.h>

/* Check that `schema` uses only the subset and is well formed.  0, or -1 with a message in err
 * naming the schema path at fault (e.g. "properties.sections.minimum: must be a number"). */
int schema_check(const cJSON *schema, char *err, size_t errlen);

/* Validate `value` against `schema` (already checked).  Defaults from "default" are inserted
 * into `value` in place for absent object properties (deep-copied).  Returns 0, or -1 with a
 * message in err that names the field, e.g. "sections: must be <= 10 (got 12)", and the
 * field's path (e.g. "sections", "items[2].name", "" for the root) in field.  A message about
 * the root itself has no "field: " prefix ("must be an object").  On failure `value` may already
 * hold some defaults; callers discard it. */
int schema_validate(const cJSON *schema, cJSON *value, char *err, size_t errlen,
                    char *field, size_t fieldlen);

/* Make a message that may have been cut short one line of whole UTF-8 characters: a cut-off
 * final sequence is dropped, any other byte that is not part of a well-formed character
 * becomes '?', control bytes become spaces (config.c's messages too). */
void schema_tidy(char *s);
/* 1 if d is a whole number (what "integer" means for a JSON number), else 0 (also for inf/nan). */
int schema_is_integral(double d);

#endif
