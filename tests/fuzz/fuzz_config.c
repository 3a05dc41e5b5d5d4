/* tests/fuzz/fuzz_config.c — libFuzzer target for the config parser: arbitrary bytes go to
 * config_parse() with a scratch base dir that holds an executable, a folder and a plain file
 * (so relative commands, cwd and paths resolve against something real).
 * Must never crash, leak or hang.  An error must be a non-empty single line of whole UTF-8
 * characters, whatever the input, also when the caller's buffer clips it.  A config that
 * loads must keep config.h's promises: absolute executable argv[0], object input schemas that
 * schema_check() accepts, placeholders that name declared properties.
 * Built by `make fuzz`. */
#include "supervisor/core/config.h"
#include "proto/schema.h"
#include "tests/fuzz/fuzz_utf8.h"
#include "tests/unit/check.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libFuzzer gives the target no context argument: the base dir lives for the process. */
static char scratch[PATH_MAX];

static void cleanup(void)
{
	if (scratch[0] != '\0')
		check_rm_rf(scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char p[PATH_MAX + 32];
	(void)argc;
	(void)argv;
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(scratch, sizeof scratch, "%s/fp-fuzz-config-XXXXXX", base);
	if (mkdtemp(scratch) == NULL)
		abort();
	atexit(cleanup);
	snprintf(p, sizeof p, "%s/bin", scratch);
	check_mkdir(p);
	snprintf(p, sizeof p, "%s/bin/run", scratch);
	check_put(p, "#!/bin/sh\n", 10);
	if (chmod(p, 0755) < 0)
		abort();
	snprintf(p, sizeof p, "%s/dir", scratch);
	check_mkdir(p);
	snprintf(p, sizeof p, "%s/file", scratch);
	check_put(p, "x", 1);
	return 0;
}

/* A failed parse's message: present, one line, whole UTF-8 characters whatever the input. */
static void check_error(const char *err)
{
	if (!fuzz_one_line(err) || !fuzz_utf8_valid((const uint8_t *)err, strlen(err))) {
		fprintf(stderr, "bad error message: \"%s\"\n", err);
		__builtin_trap();
	}
}

static void check_schema_ok(const cJSON *s)
{
	char err[256];
	if (!cJSON_IsObject(s) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(s, "type")) ||
	    strcmp(cJSON_GetObjectItemCaseSensitive(s, "type")->valuestring, "object") != 0 ||
	    schema_check(s, err, sizeof err) != 0)
		__builtin_trap();
}

/* What config.h promises about a config that loaded. */
static void check_config(const struct config *c)
{
	if (c->n_tools == 0 || !c->server.name || c->server.max_concurrent < 1 || !c->dir)
		__builtin_trap();
	for (size_t i = 0; i < c->n_tools; i++) {
		const struct tool_cfg *t = &c->tools[i];
		if (!t->name || config_tool(c, t->name) != t || t->argc < 1 || !t->argv ||
		    t->argv[t->argc] != NULL || t->argv[0][0] != '/' || access(t->argv[0], X_OK) != 0)
			__builtin_trap();
		check_schema_ok(t->input_schema);
		if (t->output_schema)
			check_schema_ok(t->output_schema);
		const cJSON *props = cJSON_GetObjectItemCaseSensitive(t->input_schema, "properties");
		const char *name;
		size_t len;
		if (config_placeholder(t->argv[0], &name, &len))
			__builtin_trap();
		for (size_t a = 1; a < t->argc; a++) {
			for (const char *p = t->argv[a]; (p = config_placeholder(p, &name, &len)); p = name + len) {
				char key[128];
				if (len >= sizeof key)
					__builtin_trap();
				memcpy(key, name, len);
				key[len] = '\0';
				if (!cJSON_GetObjectItemCaseSensitive(props, key))
					__builtin_trap();
			}
		}
		for (size_t k = 0; k < t->sandbox.n_read_paths; k++)
			if (t->sandbox.read_paths[k][0] != '/')
				__builtin_trap();
		for (size_t k = 0; k < t->sandbox.n_write_paths; k++)
			if (t->sandbox.write_paths[k][0] != '/')
				__builtin_trap();
	}
	for (size_t k = 0; k < c->server.n_file_roots; k++)
		if (c->server.file_roots[k][0] != '/')
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *c = NULL;
	char err[512], tiny[23];

	memset(err, 'x', sizeof err);
	int rc = config_parse((const char *)data, size, scratch, &c, err, sizeof err);
	if (rc == 0) {
		if (!c)
			__builtin_trap();
		check_config(c);
		config_free(c);
		c = NULL;
	} else {
		if (rc != -1 || c || err[0] == '\0' || !memchr(err, '\0', sizeof err))
			__builtin_trap();
		check_error(err);
	}

	/* The same text again into a buffer that clips nearly every message: the same verdict,
	 * and what is left is still whole characters. */
	int rc2 = config_parse((const char *)data, size, scratch, &c, tiny, sizeof tiny);
	if (rc2 != rc)
		__builtin_trap();
	if (rc2 == 0)
		config_free(c);
	else
		check_error(tiny);
	return 0;
}
