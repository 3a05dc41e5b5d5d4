/* proto/jsontext.h — JSON text for people and models to read.
 *
 * cJSON's formatted printer indents with tabs and puts a tab after every colon; terminals and
 * model contexts show tabs as up to eight columns each.  jsontext_pretty() prints the same
 * document indented by two spaces with one space after each colon.  The output is always valid
 * JSON equal to the input: cJSON escapes a tab inside a string as \t, so every raw tab in its
 * output is layout and can be rewritten. */
#ifndef FP_JSONTEXT_H
#define FP_JSONTEXT_H

#include <cJSON.h>

/* A malloc'd, 2-space-indented rendering of v, or NULL when out of memory. */
char *jsontext_pretty(const cJSON *v);

#endif
