/* tests/fuzz/fuzz_schema.c — libFuzzer target for JSON Schema: the input is a schema and a
 * value, split at the first NUL byte (without one, the text is validated against itself).  The
 * schema goes through schema_compile() (with $ref cycles, patterns, formats, composition and
 * every other keyword; fuzz_schema.dict names them); one that compiles validates the value
 * with schema_apply().  Must never crash, leak or hang (the step budget and PCRE2's limits
 * bound every validation).  Besides that it checks:
 *   - messages are one line of whole UTF-8 characters, whatever the input, also when the
 *     caller's buffers clip them, and clipping never changes the verdict; a field clipped to
 *     fit its buffer keeps whole characters;
 *   - a failure names a field that is a prefix of its message ("field: ..."), or the root;
 *   - validation is idempotent: a value that passed (defaults now filled in) passes again and
 *     is not changed by it.
 * Built by `make fuzz`. */
#include "proto/schema.h"
#include "tests/fuzz/fuzz_utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Messages are always one line of UTF-8 (schema_tidy); a field is the path as the model spelled
 * it, control characters included, and only its clipping must not break a character. */
static void check_message(const char *what, const char *msg, int utf8_in, int is_field)
{
	int utf8 = fuzz_utf8_valid((const uint8_t *)msg, strlen(msg));
	if (is_field ? (utf8_in && !utf8) : (!utf8 || !fuzz_one_line(msg))) {
		fprintf(stderr, "bad %s: \"%s\"\n", what, msg);
		__builtin_trap();
	}
}

/* Validate a copy of value; returns the verdict and, if it passed, the filled-in copy. */
static int validate_copy(const struct schema *schema, const cJSON *value, int utf8_in, cJSON **out)
{
	char err[400], field[200], terr[13], tfield[5];
	cJSON *a = cJSON_Duplicate(value, 1), *b = cJSON_Duplicate(value, 1);
	int rc = -1;
	*out = NULL;
	if (!a || !b)
		goto done;
	rc = schema_apply(schema, a, err, sizeof err, field, sizeof field);
	int rc2 = schema_apply(schema, b, terr, sizeof terr, tfield, sizeof tfield);
	if (rc != rc2)
		__builtin_trap();
	if (rc == 0) {
		if (err[0] != '\0' || field[0] != '\0')
			__builtin_trap();
		*out = a;
		a = NULL;
		goto done;
	}
	if (err[0] == '\0')
		__builtin_trap();
	check_message("validation message", err, utf8_in, 0);
	check_message("field", field, utf8_in, 1);
	check_message("clipped message", terr, utf8_in, 0);
	check_message("clipped field", tfield, utf8_in, 1);
	/* "field: problem" for a field; the root's messages carry no prefix.  A field name may
	 * itself be clipped (to sizeof field - 1 bytes, less a cut character), so only one that
	 * surely was not is compared. */
	char shown[sizeof field];
	memcpy(shown, field, sizeof field);
	schema_tidy(shown);   /* the message shows the field tidied */
	size_t fl = strlen(shown);
	/* (keys that are not UTF-8 lose bytes to the trimming of a cut character: only for UTF-8
	 * input, the only kind rpc_parse lets through, must the two agree) */
	if (utf8_in && fl > 0 && strlen(field) + 4 < sizeof field - 1 &&
	    (strncmp(err, shown, fl) != 0 || strncmp(err + fl, ": ", 2) != 0)) {
		fprintf(stderr, "field \"%s\" does not start message \"%s\"\n", shown, err);
		__builtin_trap();
	}
done:
	cJSON_Delete(a);
	cJSON_Delete(b);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t slen = nul ? (size_t)(nul - data) : size;
	const uint8_t *vtext = nul ? nul + 1 : data;
	size_t vlen = nul ? size - slen - 1 : size;
	cJSON *schema = cJSON_ParseWithLength((const char *)data, slen);
	cJSON *value = cJSON_ParseWithLength((const char *)vtext, vlen);
	cJSON *filled = NULL, *again = NULL;
	struct schema *sc = NULL, *tiny_sc = NULL;
	int utf8_in = fuzz_utf8_valid(data, size);
	char err[400], tiny[9];

	if (!schema)
		goto done;
	sc = schema_compile(schema, err, sizeof err);
	tiny_sc = schema_compile(schema, tiny, sizeof tiny);
	if (!sc != !tiny_sc)
		__builtin_trap();
	int rc = sc ? 0 : -1;
	if (rc != 0) {
		if (rc != -1 || err[0] == '\0')
			__builtin_trap();
		check_message("schema message", err, utf8_in, 0);
		check_message("clipped schema message", tiny, utf8_in, 0);
		goto done;
	}
	if (err[0] != '\0')
		__builtin_trap();
	if (!value)
		goto done;
	if (validate_copy(sc, value, utf8_in, &filled) != 0)
		goto done;
	/* Defaults are in now: validating again passes and adds nothing.  (Compared as text:
	 * cJSON_Compare() finds an infinity, which a part no schema covers may hold, unequal to
	 * itself.) */
	int rc2 = validate_copy(sc, filled, utf8_in, &again);
	char *a = cJSON_PrintUnformatted(filled), *b = again ? cJSON_PrintUnformatted(again) : NULL;
	if (rc2 != 0 || (a && b && strcmp(a, b) != 0)) {
		fprintf(stderr, "not idempotent:\n  %s\n  %s\n", a ? a : "?", b ? b : "(failed)");
		__builtin_trap();
	}
	free(a);
	free(b);
done:
	cJSON_Delete(again);
	cJSON_Delete(filled);
	cJSON_Delete(value);
	cJSON_Delete(schema);
	schema_free(sc);
	schema_free(tiny_sc);
	return 0;
}
