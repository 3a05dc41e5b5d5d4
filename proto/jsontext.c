/* proto/jsontext.c — see jsontext.h. */
#include "proto/jsontext.h"

#include <stdlib.h>
#include <string.h>

/* Rewrite cJSON_Print's layout in place of a copy: a tab that follows a colon becomes one space,
 * any other tab (indentation) two.  Outside strings only: a raw tab never occurs inside a cJSON
 * string, but the string state is tracked anyway so the rewrite cannot touch content even if
 * that changed. */
char *jsontext_pretty(const cJSON *v)
{
	char *tabs = cJSON_Print(v);
	if (!tabs)
		return NULL;
	size_t n = 0, len = strlen(tabs);
	for (size_t i = 0; i < len; i++)
		n += tabs[i] == '\t' ? 2 : 1;
	char *out = malloc(n + 1);
	if (!out) {
		free(tabs);
		return NULL;
	}
	size_t o = 0;
	int in_str = 0, esc = 0;
	for (size_t i = 0; i < len; i++) {
		char ch = tabs[i];
		if (in_str) {
			if (esc)
				esc = 0;
			else if (ch == '\\')
				esc = 1;
			else if (ch == '"')
				in_str = 0;
			out[o++] = ch;
		} else if (ch == '\t') {
			out[o++] = ' ';
			if (i == 0 || tabs[i - 1] != ':')
				out[o++] = ' ';
		} else {
			if (ch == '"')
				in_str = 1;
			out[o++] = ch;
		}
	}
	out[o] = '\0';
	free(tabs);
	return out;
}
