/* tests/unit/test_config.c — config_load()/config_parse(): a complete valid file with every field
 * and default checked, each class of error with its exact one-line message, and path
 * resolution against the config file's folder.  Works in a mkdtemp() folder and sets PATH itself,
 * so results do not depend on the machine.  Prints "N passed, M failed" last. */
#include "supervisor/core/config.h"
#include "proto/frame.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}
#define STREQ streq

/* snprintf for paths: a clipped path would only make a test fail, which is the right outcome. */
static void fmt(char *buf, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t n, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, n, f, ap);
	va_end(ap);
}

/* The scratch folder every test writes into. */
struct fixture {
	char dir[PATH_MAX];     /* realpath of the mkdtemp() folder */
	char conf[PATH_MAX];    /* dir/config.json */
};

static const char *at(const struct fixture *fx, const char *rel, char *buf)
{
	fmt(buf, PATH_MAX, "%s/%s", fx->dir, rel);
	return buf;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		check_die(path);
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len)
		check_die(path);
	close(fd);
	if (chmod(path, mode) != 0)
		check_die(path);
}

static void setup(struct fixture *fx)
{
	char tmpl[PATH_MAX], p[PATH_MAX], path_env[2 * PATH_MAX];
	check_tmpdir(tmpl, sizeof tmpl, "test-config");
	if (!realpath(tmpl, fx->dir))
		check_die("realpath");
	fmt(fx->conf, sizeof fx->conf, "%s/config.json", fx->dir);
	const char *dirs[] = { "bin", "pathbin", "work", "sub", "real" };
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
		if (mkdir(at(fx, dirs[i], p), 0755) != 0)
			check_die(p);
	write_file(at(fx, "bin/job", p), "#!/bin/sh\nexit 0\n", 0755);
	write_file(at(fx, "bin/noexec", p), "#!/bin/sh\nexit 0\n", 0644);
	write_file(at(fx, "pathbin/pjob", p), "#!/bin/sh\nexit 0\n", 0755);
	write_file(at(fx, "pathbin/pnoexec", p), "#!/bin/sh\nexit 0\n", 0644);
	if (symlink("real", at(fx, "link", p)) != 0)
		check_die(p);
	/* a relative entry and a missing one: both must be skipped without harm */
	fmt(path_env, sizeof path_env, "relative/bin:/nonexistent-fp:%s/pathbin:/usr/bin:/bin", fx->dir);
	setenv("PATH", path_env, 1);
}

/* Load `text` from fx->conf and expect success. */
static struct config *load_ok(struct tally *t, const struct fixture *fx, int line, const char *text)
{
	char err[1024] = "";
	struct config *c = NULL;
	write_file(fx->conf, text, 0644);
	int rc = config_load(fx->conf, &c, err, sizeof err);
	CHECKF(t, rc == 0 && c, "line %d: config_load = %d: %s", line, rc, err);
	return rc == 0 ? c : NULL;
}

/* Load `text` and expect exactly "<config path>: <want>" (or a prefix of it when `prefix`). */
static void load_err(struct tally *t, const struct fixture *fx, int line, const char *text,
                     int prefix, const char *want_fmt, ...) __attribute__((format(printf, 6, 7)));
static void load_err(struct tally *t, const struct fixture *fx, int line, const char *text,
                     int prefix, const char *want_fmt, ...)
{
	char err[1024] = "", want[1024], full[1200];
	struct config *c = NULL;
	va_list ap;
	va_start(ap, want_fmt);
	vsnprintf(want, sizeof want, want_fmt, ap);
	va_end(ap);
	fmt(full, sizeof full, "%s: %s", fx->conf, want);
	write_file(fx->conf, text, 0644);
	int rc = config_load(fx->conf, &c, err, sizeof err);
	int match = prefix ? strncmp(err, full, strlen(full)) == 0 : strcmp(err, full) == 0;
	CHECKF(t, rc == -1 && c == NULL && match && !strchr(err, '\n'),
	      "line %d: config_load = %d\n   got:  %s\n   want: %s%s", line, rc, err, full,
	      prefix ? "..." : "");
	config_free(c);
}

#define ONE_TOOL(extra) "{\"tools\":[{\"name\":\"t\",\"command\":[\"bin/job\"]" extra "}]}"

static void test_full(struct tally *t, const struct fixture *fx)
{
	char p[PATH_MAX];
	struct config *c = load_ok(t, fx, __LINE__,
		"{\n"
		"  \"server\": {\"name\": \"demo\", \"maxConcurrent\": 8, \"maxQueue\": 0,\n"
		"    \"fileRoots\": [\"./data\", \"/srv//x/../y/\"], \"cancelGraceSeconds\": 2.5,\n"
		"    \"maxFrameBytes\": 1048576, \"logMaxBytes\": 65536, \"resultInlineBytes\": 1024,\n"
		"    \"resultMaxBytes\": 2048, \"stateDirMaxMB\": 100,\n"
		"    \"journalSegmentBytes\": 65536, \"compactMinBytes\": 4096},\n"
		"  \"tools\": [\n"
		"    {\"name\": \"generate-report\", \"title\": \"Generate a report\",\n"
		"     \"description\": \"Writes a report.\",\n"
		"     \"inputSchema\": {\"type\": \"object\", \"properties\": {\"topic\": {\"type\": \"string\"},\n"
		"        \"sections\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10, \"default\": 3}},\n"
		"        \"required\": [\"topic\"]},\n"
		"     \"outputSchema\": {\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}}},\n"
		"     \"annotations\": {\"title\": \"Report\", \"readOnlyHint\": false, \"destructiveHint\": false,\n"
		"        \"idempotentHint\": true, \"openWorldHint\": false},\n"
		"     \"command\": [\"./bin/job\", \"--sections\", \"{sections}\", \"--topic={topic}\", \"{}\",\n"
		"        \"{not a placeholder}\", \"\"],\n"
		"     \"cwd\": \"work\", \"mode\": \"auto\", \"waitSeconds\": 2, \"resume\": \"restart\",\n"
		"     \"timeoutSeconds\": 0, \"ttlSeconds\": 60, \"retries\": 2, \"taskSupport\": \"required\",\n"
		"     \"sandbox\": {\"profile\": \"strict\", \"network\": true, \"memoryMB\": 512,\n"
		"        \"cpuSeconds\": 600, \"maxProcesses\": 32, \"maxFileMB\": 64, \"maxCheckpointMB\": 2,\n"
		"        \"readPaths\": [\"ro\", \"/etc\"], \"writePaths\": [\"out/./x/..\"],\n"
		"        \"require\": [\"seccomp\", \"rlimits\"]}},\n"
		"    {\"name\": \"plain\", \"command\": [\"pjob\"]},\n"
		"    {\"name\": \"quick.v2\", \"mode\": \"sync\", \"command\": [\"/bin/sh\", \"-c\", \"true\"]}\n"
		"  ]\n"
		"}\n");
	if (!c)
		return;
	CHECKF(t, STREQ(c->path, fx->conf), "path %s", c->path);
	CHECKF(t, STREQ(c->dir, fx->dir), "dir %s", c->dir);

	const struct server_cfg *s = &c->server;
	CHECKF(t, STREQ(s->name, "demo"), "server.name %s", s->name);
	CHECKF(t, s->max_concurrent == 8 && s->max_queue == 0, "limits %d %d", s->max_concurrent, s->max_queue);
	CHECKF(t, s->n_file_roots == 2 && STREQ(s->file_roots[0], at(fx, "data", p)) &&
	      STREQ(s->file_roots[1], "/srv/y"), "fileRoots");
	CHECKF(t, s->cancel_grace_seconds == 2.5, "grace %g", s->cancel_grace_seconds);
	CHECKF(t, s->max_frame_bytes == 1048576 && s->log_max_bytes == 65536 &&
	      s->result_inline_bytes == 1024 && s->result_max_bytes == 2048 && s->state_max_mb == 100,
	      "byte limits");
	CHECKF(t, s->journal_segment_bytes == 65536 && s->compact_min_bytes == 4096, "journal sizes %ld %ld",
	       s->journal_segment_bytes, s->compact_min_bytes);

	CHECKF(t, c->n_tools == 3, "n_tools %zu", c->n_tools);
	const struct tool_cfg *r = config_tool(c, "generate-report");
	CHECKF(t, r == &c->tools[0], "config_tool");
	CHECKF(t, config_tool(c, "Generate-Report") == NULL && config_tool(c, "nope") == NULL, "config_tool miss");
	CHECKF(t, STREQ(r->title, "Generate a report") && STREQ(r->description, "Writes a report."), "texts");
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(r->input_schema, "properties");
	CHECKF(t, cJSON_GetObjectItemCaseSensitive(props, "sections") != NULL, "inputSchema kept");
	CHECKF(t, r->output_schema && cJSON_GetObjectItemCaseSensitive(r->output_schema, "properties"), "outputSchema");
	CHECKF(t, r->annotations && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r->annotations, "idempotentHint")),
	      "annotations");
	CHECKF(t, r->argc == 7 && r->argv[7] == NULL, "argc %zu", r->argc);
	CHECKF(t, STREQ(r->argv[0], at(fx, "bin/job", p)), "argv[0] %s", r->argv[0]);
	CHECKF(t, STREQ(r->argv[2], "{sections}") && STREQ(r->argv[3], "--topic={topic}") &&
	      STREQ(r->argv[4], "{}") && STREQ(r->argv[5], "{not a placeholder}") && STREQ(r->argv[6], ""),
	      "argv template kept verbatim");
	CHECKF(t, STREQ(r->cwd, at(fx, "work", p)), "cwd %s", r->cwd);
	CHECKF(t, r->mode == TOOL_MODE_AUTO && r->wait_seconds == 2 && r->resume == RESUME_RESTART, "mode");
	CHECKF(t, r->timeout_seconds == 0 && r->ttl_seconds == 60 && r->retries == 2, "times");
	CHECKF(t, r->task_support == TASK_SUPPORT_REQUIRED, "taskSupport");
	const struct sandbox_policy *sb = &r->sandbox;
	CHECKF(t, STREQ(sb->profile, "strict") && sb->network == 1, "profile %s", sb->profile);
	CHECKF(t, sb->memory_mb == 512 && sb->cpu_seconds == 600 && sb->max_processes == 32 &&
	      sb->max_file_mb == 64 && r->max_checkpoint_mb == 2, "sandbox limits");
	CHECKF(t, sb->n_read_paths == 2 && STREQ(sb->read_paths[0], at(fx, "ro", p)) &&
	      STREQ(sb->read_paths[1], "/etc"), "readPaths");
	CHECKF(t, sb->n_write_paths == 1 && STREQ(sb->write_paths[0], at(fx, "out", p)), "writePaths %s",
	      sb->n_write_paths ? sb->write_paths[0] : "-");
	CHECKF(t, sb->n_require == 2 && STREQ(sb->require[0], "seccomp") && STREQ(sb->require[1], "rlimits"),
	      "require");

	/* every default */
	const struct tool_cfg *d = config_tool(c, "plain");
	CHECKF(t, d && STREQ(d->argv[0], at(fx, "pathbin/pjob", p)) && d->argc == 1 && d->argv[1] == NULL,
	      "PATH lookup %s", d ? d->argv[0] : "-");
	if (d) {
		char *schema = cJSON_PrintUnformatted(d->input_schema);
		CHECKF(t, STREQ(schema, "{\"type\":\"object\"}"), "default inputSchema %s", schema);
		free(schema);
		CHECKF(t, !d->title && !d->description && !d->output_schema && !d->annotations && !d->cwd,
		      "optional fields NULL");
		CHECKF(t, d->mode == TOOL_MODE_TASK && d->wait_seconds == 10 && d->resume == RESUME_CHECKPOINT,
		      "mode defaults");
		CHECKF(t, d->timeout_seconds == 3600 && d->ttl_seconds == 86400 && d->retries == 0,
		      "time defaults");
		CHECKF(t, d->task_support == TASK_SUPPORT_OPTIONAL, "taskSupport default");
		CHECKF(t, STREQ(d->sandbox.profile, "default") && d->sandbox.network == 0 &&
		      d->sandbox.memory_mb == 0 && d->sandbox.cpu_seconds == 0 &&
		      d->sandbox.max_processes == 0 && d->sandbox.max_file_mb == 0 &&
		      d->sandbox.n_read_paths == 0 && d->sandbox.n_write_paths == 0 &&
		      d->sandbox.n_require == 0, "sandbox defaults");
		/* The checkpoint quota's default is the frame's limit in MiB: 8, as documented. */
		CHECKF(t, d->max_checkpoint_mb == FRAME_CHECKPOINT_MB && FRAME_CHECKPOINT_MB == 8,
		      "maxCheckpointMB default %ld", d->max_checkpoint_mb);
	}
	const struct tool_cfg *q = config_tool(c, "quick.v2");
	CHECKF(t, q && q->mode == TOOL_MODE_SYNC && q->task_support == TASK_SUPPORT_FORBIDDEN,
	      "sync tools default to taskSupport forbidden");
	config_free(c);

	c = load_ok(t, fx, __LINE__, ONE_TOOL(""));
	if (c) {
		s = &c->server;
		CHECKF(t, STREQ(s->name, "forkpoint") && s->max_concurrent == 4 && s->max_queue == 1000 &&
		      s->n_file_roots == 0 && s->cancel_grace_seconds == 5 &&
		      s->max_frame_bytes == FRAME_MAX_DEFAULT && s->log_max_bytes == 8L << 20 &&
		      s->result_inline_bytes == 64L << 10 && s->journal_segment_bytes == 64L << 20 &&
		      s->compact_min_bytes == 8L << 20, "server defaults");
	}
	config_free(c);
}

static void test_errors(struct tally *t, const struct fixture *fx)
{
	char p[PATH_MAX];

	/* unknown and repeated keys, with their full path */
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"bin/job\"]},"
	         "{\"name\":\"b\",\"command\":[\"bin/job\"],\"sandbox\":{\"memroyMB\":5}}]}", 0,
	         "tools[1].sandbox.memroyMB: unknown key (did you mean \"memoryMB\"?)");
	load_err(t, fx, __LINE__, "{\"serverr\":{}," "\"tools\":[]}", 0, "serverr: unknown key (did you mean \"server\"?)");
	load_err(t, fx, __LINE__, "{\"server\":{\"name\":\"a\",\"name\":\"b\"},\"tools\":[]}", 0,
	         "server.name: duplicate key");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"Mode\":\"sync\""), 0, "tools[0].Mode: unknown key (did you mean \"mode\"?)");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"annotations\":{\"readOnly\":true}"), 0,
	         "tools[0].annotations.readOnly: unknown key");
	/* a suggestion only when the key is near one (case aside), never for a different word */
	load_err(t, fx, __LINE__, "{\"server\":{\"maxconcurrent\":2},\"tools\":[]}", 0,
	         "server.maxconcurrent: unknown key (did you mean \"maxConcurrent\"?)");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"colour\":\"blue\""), 0, "tools[0].colour: unknown key");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"ab\":1"), 0, "tools[0].ab: unknown key");
	/* an MCP host's file given as forkpoint's config */
	load_err(t, fx, __LINE__, "{\"mcpServers\":{\"forkpoint\":{\"command\":\"forkpoint\"}}}", 1,
	         "mcpServers: this is an MCP host's config file");

	/* wrong types and ranges */
	load_err(t, fx, __LINE__, "{\"server\":{\"maxConcurrent\":\"4\"},\"tools\":[]}", 0,
	         "server.maxConcurrent: must be an integer >= 1 (got \"4\")");
	load_err(t, fx, __LINE__, "{\"server\":{\"maxConcurrent\":2000},\"tools\":[]}", 0,
	         "server.maxConcurrent: must be an integer <= 1024 (got 2000)");
	load_err(t, fx, __LINE__, "{\"server\":{\"maxQueue\":1.5},\"tools\":[]}", 0,
	         "server.maxQueue: must be an integer >= 0 (got 1.5)");
	load_err(t, fx, __LINE__, "{\"server\":{\"maxFrameBytes\":67108865},\"tools\":[]}", 0,
	         "server.maxFrameBytes: must be an integer <= 67108864 (got 67108865)");
	load_err(t, fx, __LINE__, "{\"server\":{\"journalSegmentBytes\":4095},\"tools\":[]}", 0,
	         "server.journalSegmentBytes: must be an integer >= 4096 (got 4095)");
	load_err(t, fx, __LINE__, "{\"server\":{\"compactMinBytes\":1e13},\"tools\":[]}", 0,
	         "server.compactMinBytes: must be an integer <= 1099511627776 (got 10000000000000)");
	load_err(t, fx, __LINE__, "{\"server\":{\"resultMaxBytes\":1000},\"tools\":[]}", 0,
	         "server.resultMaxBytes: must be an integer >= 1024 (got 1000)");
	load_err(t, fx, __LINE__, "{\"server\":{\"stateDirMaxMB\":-1},\"tools\":[]}", 0,
	         "server.stateDirMaxMB: must be an integer >= 0 (got -1)");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"sandbox\":{\"maxCheckpointMB\":9}"), 0,
	         "tools[0].sandbox.maxCheckpointMB: must be an integer <= 8 (got 9)");
	load_err(t, fx, __LINE__, "{\"server\":{\"cancelGraceSeconds\":-1},\"tools\":[]}", 0,
	         "server.cancelGraceSeconds: must be a number >= 0 (got -1)");
	load_err(t, fx, __LINE__, "{\"server\":{\"cancelGraceSeconds\":1e400},\"tools\":[]}", 0,
	         "server.cancelGraceSeconds: must be a number >= 0 (got a number out of range)");
	/* messages stay on one line whatever the input holds */
	load_err(t, fx, __LINE__, "{\"ser\\nver\":{},\"tools\":[]}", 0, "ser ver: unknown key (did you mean \"server\"?)");
	load_err(t, fx, __LINE__, "{\"server\":{\"name\":7},\"tools\":[]}", 0,
	         "server.name: must be a non-empty string (got 7)");
	load_err(t, fx, __LINE__, "{\"server\":{\"fileRoots\":[\"a\",3]},\"tools\":[]}", 0,
	         "server.fileRoots[1]: must be a non-empty string (got 3)");
	load_err(t, fx, __LINE__, "{\"server\":[],\"tools\":[]}", 0, "server: must be an object");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"ttlSeconds\":0"), 0,
	         "tools[0].ttlSeconds: must be a number >= 1 (got 0)");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"timeoutSeconds\":31536001"), 0,
	         "tools[0].timeoutSeconds: must be a number <= 31536000 (got 31536001)");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"sandbox\":{\"network\":\"no\"}"), 0,
	         "tools[0].sandbox.network: must be true or false (got \"no\")");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"sandbox\":{\"memoryMB\":0}"), 0,
	         "tools[0].sandbox.memoryMB: must be an integer >= 1 (got 0)");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"annotations\":{\"readOnlyHint\":\"yes\"}"), 0,
	         "tools[0].annotations.readOnlyHint: must be true or false (got \"yes\")");
	load_err(t, fx, __LINE__, "[]", 0, "the top level must be a JSON object with \"server\" and \"tools\"");

	/* enums */
	load_err(t, fx, __LINE__, ONE_TOOL(",\"mode\":\"fast\""), 0,
	         "tools[0].mode: must be one of \"task\", \"sync\", \"auto\" (got \"fast\")");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"resume\":1"), 0,
	         "tools[0].resume: must be one of \"checkpoint\", \"restart\", \"fail\" (got 1)");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"sandbox\":{\"profile\":\"loose\"}"), 0,
	         "tools[0].sandbox.profile: must be one of \"default\", \"strict\", \"none\" (got \"loose\")");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"sandbox\":{\"require\":[\"seccomp\",\"selinux\"]}"), 0,
	         "tools[0].sandbox.require[1]: must be one of \"namespaces\", \"seccomp\", \"landlock\", "
	         "\"cgroup\", \"rlimits\" (got \"selinux\")");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"mode\":\"sync\",\"taskSupport\":\"required\""), 0,
	         "tools[0].taskSupport: \"required\" cannot be combined with \"mode\": \"sync\"");

	/* tools list and names */
	load_err(t, fx, __LINE__, "{\"tools\":[]}", 0, "tools: must be a non-empty array (got [])");
	load_err(t, fx, __LINE__, "{\"server\":{}}", 0, "tools: required (a non-empty array of tools)");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"command\":[\"bin/job\"]}]}", 0, "tools[0].name: required");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a b\",\"command\":[\"bin/job\"]}]}", 0,
	         "tools[0].name: \"a b\" is not a valid tool name (1-64 characters from A-Z a-z 0-9 _ . -)");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"bin/job\"]},"
	         "{\"name\":\"b\",\"command\":[\"bin/job\"]},{\"name\":\"a\",\"command\":[\"bin/job\"]}]}", 0,
	         "tools[2].name: duplicate tool name \"a\" (also tools[0])");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"durable_task_get\",\"command\":[\"bin/job\"]}]}", 0,
	         "tools[0].name: \"durable_task_get\" is the name of a built-in tool");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"file_transfer_status\",\"command\":[\"bin/job\"]}]}", 0,
	         "tools[0].name: \"file_transfer_status\" is the name of a built-in tool");

	/* command */
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\"}]}", 0,
	         "tools[0].command: required (an array: the program and its arguments)");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[]}]}", 0,
	         "tools[0].command: must be a non-empty array of strings (got [])");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":\"bin/job\"}]}", 0,
	         "tools[0].command: must be a non-empty array of strings (got \"bin/job\")");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"bin/job\",5]}]}", 0,
	         "tools[0].command[1]: must be a string (got 5)");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"bin/noexec\"]}]}", 0,
	         "tools[0].command[0]: %s: not executable", at(fx, "bin/noexec", p));
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"./bin/missing\"]}]}", 0,
	         "tools[0].command[0]: %s: No such file or directory", at(fx, "bin/missing", p));
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"bin/\"]}]}", 0,
	         "tools[0].command[0]: %s: Is a directory", at(fx, "bin", p));
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"fp-no-such-program\"]}]}", 1,
	         "tools[0].command[0]: \"fp-no-such-program\" not found in PATH (relative/bin:");
	/* found in PATH but not executable is as good as not found */
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"pnoexec\"]}]}", 1,
	         "tools[0].command[0]: \"pnoexec\" not found in PATH");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"\"]}]}", 0,
	         "tools[0].command[0]: must be a non-empty string");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"bin/{x}\"],"
	         "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"x\":{}}}}]}", 0,
	         "tools[0].command[0]: the program path cannot contain placeholders");

	/* placeholders name declared properties */
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"bin/job\",\"-n\",\"{sectons}\"],"
	         "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"sections\":{}}}}]}", 0,
	         "tools[0].command[2]: placeholder {sectons} is not a property in inputSchema.properties");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"bin/job\",\"--x={a}{b}\"],"
	         "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"a\":{}}}}]}", 0,
	         "tools[0].command[1]: placeholder {b} is not a property in inputSchema.properties");
	load_err(t, fx, __LINE__, "{\"tools\":[{\"name\":\"a\",\"command\":[\"bin/job\",\"{topic}\"]}]}", 0,
	         "tools[0].command[1]: placeholder {topic} is not a property in inputSchema.properties");

	/* schemas */
	load_err(t, fx, __LINE__, ONE_TOOL(",\"inputSchema\":{\"type\":\"object\",\"properties\":"
	         "{\"x\":{\"type\":\"string\",\"unevaluatedItems\":{}}}}"), 0,
	         "tools[0].inputSchema.properties.x.unevaluatedItems: unsupported keyword \"unevaluatedItems\"");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"inputSchema\":{\"type\":\"object\",\"properties\":"
	         "{\"x\":{\"type\":\"string\",\"pattern\":\"^(a\"}}}"), 0,
	         "tools[0].inputSchema.properties.x.pattern: invalid regular expression at offset 3: "
	         "missing closing parenthesis");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"inputSchema\":{\"type\":\"object\",\"properties\":"
	         "{\"x\":{\"$ref\":\"#/$defs/y\"}}}"), 0,
	         "tools[0].inputSchema.properties.x.$ref: \"#/$defs/y\" names nothing in the schema");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"outputSchema\":{\"type\":\"object\",\"patternProperties\":"
	         "{\"[\":{}}}"), 0,
	         "tools[0].outputSchema.patternProperties.[: invalid regular expression at offset 1: "
	         "missing terminating ] for character class");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"inputSchema\":{\"type\":\"array\"}"), 0,
	         "tools[0].inputSchema.type: must be \"object\" (a tool's schema describes an object)");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"inputSchema\":{\"properties\":{}}"), 0,
	         "tools[0].inputSchema.type: must be \"object\" (a tool's schema describes an object)");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"inputSchema\":[]"), 0, "tools[0].inputSchema: must be an object");
	load_err(t, fx, __LINE__, ONE_TOOL(",\"outputSchema\":{\"type\":\"object\",\"properties\":"
	         "{\"n\":{\"minimum\":\"0\"}}}"), 0,
	         "tools[0].outputSchema.properties.n.minimum: must be a number");

	/* cwd */
	load_err(t, fx, __LINE__, ONE_TOOL(",\"cwd\":\"bin/job\""), 0,
	         "tools[0].cwd: %s: not a directory", at(fx, "bin/job", p));
	load_err(t, fx, __LINE__, ONE_TOOL(",\"cwd\":\"nowhere\""), 0,
	         "tools[0].cwd: %s: No such file or directory", at(fx, "nowhere", p));

	/* JSON syntax, with line and column */
	load_err(t, fx, __LINE__, "{\n  \"tools\": [\n    {\"name\": \"a\" \"command\": []}\n  ]\n}\n", 0,
	         "JSON syntax error at line 3, column 18");
	load_err(t, fx, __LINE__, "{\"tools\":[]}\n}", 0, "JSON syntax error at line 2, column 1");
	load_err(t, fx, __LINE__, "", 0, "JSON syntax error at line 1, column 1");
	load_err(t, fx, __LINE__, "{\"server\": {\"name\": \"\xc3\xa9t\xc3\xa9\" x}}", 0,
	         "JSON syntax error at line 1, column 27");   /* characters, not bytes */

	/* A long name is clipped to 80 bytes inside the message: a character cut there must not
	 * leave a broken UTF-8 sequence in the middle of the line. */
	char name[160] = "a", text[300], shown[100] = "a";
	for (int i = 0; i < 50; i++)
		strcat(name, "\xc3\xa9");
	for (int i = 0; i < 39; i++)
		strcat(shown, "\xc3\xa9");
	fmt(text, sizeof text, "{\"tools\":[{\"name\":\"%s\",\"command\":[\"bin/job\"]}]}", name);
	load_err(t, fx, __LINE__, text, 0, "tools[0].name: \"%s?\" is not a valid tool name (1-64 "
	         "characters from A-Z a-z 0-9 _ . -)", shown);
	/* and a key that is not UTF-8 at all is shown with '?' */
	load_err(t, fx, __LINE__, "{\"serv\xe9r\":{},\"tools\":[]}", 0, "serv?r: unknown key (did you mean \"server\"?)");
}

/* server.jobUser, and the paths a job could swap for a symbolic link. */
static void test_sandbox_keys(struct tally *t, const struct fixture *fx)
{
	char p[PATH_MAX], q[PATH_MAX];
	load_err(t, fx, __LINE__, "{\"server\":{\"jobUser\":\"root\"},\"tools\":[]}", 1,
	         "server.jobUser: must not be root");
	load_err(t, fx, __LINE__, "{\"server\":{\"jobUser\":\"0:5\"},\"tools\":[]}", 1,
	         "server.jobUser: must not be root");
	load_err(t, fx, __LINE__, "{\"server\":{\"jobUser\":\"no-such-user-fp\"},\"tools\":[]}", 0,
	         "server.jobUser: no user named \"no-such-user-fp\" on this host");
	load_err(t, fx, __LINE__, "{\"server\":{\"jobUser\":\"5:no-such-group-fp\"},\"tools\":[]}", 0,
	         "server.jobUser: no group named \"no-such-group-fp\" on this host");
	load_err(t, fx, __LINE__, "{\"server\":{\"jobUser\":7},\"tools\":[]}", 0,
	         "server.jobUser: must be a non-empty string (got 7)");
	if (geteuid() == 0) {
		struct config *c = load_ok(t, fx, __LINE__, ONE_TOOL("") "");
		CHECKF(t, c && c->server.job_uid == 0, "jobUser unset: the default");
		config_free(c);
		write_file(fx->conf, "{\"server\":{\"jobUser\":\"4242:4343\"}," "\"tools\":[{\"name\":\"t\","
		           "\"command\":[\"bin/job\"]}]}", 0644);
		char err[512] = "";
		c = NULL;
		CHECKF(t, config_load(fx->conf, &c, err, sizeof err) == 0 && c->server.job_uid == 4242 &&
		       c->server.job_gid == 4343, "jobUser uid:gid: %s", err);
		config_free(c);
	} else {
		load_err(t, fx, __LINE__, "{\"server\":{\"jobUser\":\"4242\"},\"tools\":[]}", 1,
		         "server.jobUser: only a server running as root can run jobs as another user");
	}
	/* A readPath, writePath, cwd or program inside a writePath, of the same tool or another. */
	char text[4 * PATH_MAX];
	fmt(text, sizeof text, "{\"tools\":[{\"name\":\"w\",\"command\":[\"bin/job\"],\"sandbox\":"
	    "{\"writePaths\":[\"%s\"]}},{\"name\":\"r\",\"command\":[\"bin/job\"],\"sandbox\":"
	    "{\"readPaths\":[\"/usr\",\"%s/ro\"]}}]}", at(fx, "work", p), at(fx, "work", q));
	load_err(t, fx, __LINE__, text, 1, "tools[1].sandbox.readPaths[1]: %s/ro lies inside "
	         "tools[0].sandbox.writePaths[0] (%s), where a job could replace it", q, p);
	fmt(text, sizeof text, "{\"tools\":[{\"name\":\"w\",\"command\":[\"bin/job\"],\"sandbox\":"
	    "{\"writePaths\":[\"%s\",\"%s/sub\"]}}]}", at(fx, "work", p), at(fx, "work", q));
	load_err(t, fx, __LINE__, text, 1, "tools[0].sandbox.writePaths[1]: %s/sub lies inside "
	         "tools[0].sandbox.writePaths[0]", q);
	fmt(text, sizeof text, "{\"tools\":[{\"name\":\"w\",\"command\":[\"bin/job\"],\"sandbox\":"
	    "{\"writePaths\":[\"%s\"]}}]}", at(fx, "bin", p));
	load_err(t, fx, __LINE__, text, 1, "tools[0].command[0]: %s/job lies inside", p);
	/* Through a link that exists at load: "link" names "real". */
	fmt(text, sizeof text, "{\"tools\":[{\"name\":\"w\",\"command\":[\"bin/job\"],\"sandbox\":"
	    "{\"writePaths\":[\"%s\"],\"readPaths\":[\"%s/x\"]}}]}", at(fx, "real", p), at(fx, "link", q));
	load_err(t, fx, __LINE__, text, 1, "tools[0].sandbox.readPaths[0]: %s/x lies inside", q);
	/* The same path in both, or side by side: fine. */
	fmt(text, sizeof text, "{\"tools\":[{\"name\":\"w\",\"command\":[\"bin/job\"],\"sandbox\":"
	    "{\"writePaths\":[\"%s\"],\"readPaths\":[\"%s\",\"%s\"]}}]}", at(fx, "work", p),
	    p, at(fx, "sub", q));
	config_free(load_ok(t, fx, __LINE__, text));
}

static void test_other_entry_points(struct tally *t, const struct fixture *fx)
{
	char err[512], p[PATH_MAX];
	struct config *c = NULL;

	/* the file itself */
	int rc = config_load("/nonexistent-fp/config.json", &c, err, sizeof err);
	CHECKF(t, rc == -1 && !c && STREQ(err, "/nonexistent-fp/config.json: No such file or directory"),
	      "missing file: %s", err);
	rc = config_load(fx->dir, &c, err, sizeof err);
	fmt(p, sizeof p, "%s: not a regular file", fx->dir);
	CHECKF(t, rc == -1 && !c && STREQ(err, p), "directory: %s", err);

	/* config_parse: no file prefix, base_dir for relative paths, NUL bytes refused */
	static const char text[] = "{\"server\":{\"fileRoots\":[\"d\"]},"
	                           "\"tools\":[{\"name\":\"a\",\"command\":[\"./job\"]}]}";
	at(fx, "bin", p);
	rc = config_parse(text, sizeof text - 1, p, &c, err, sizeof err);
	CHECKF(t, rc == 0 && c && STREQ(c->path, "") && STREQ(c->dir, p), "config_parse: %s", err);
	if (c) {
		CHECKF(t, STREQ(c->tools[0].argv[0], at(fx, "bin/job", p)), "config_parse argv[0] %s",
		      c->tools[0].argv[0]);
		CHECKF(t, STREQ(c->server.file_roots[0], at(fx, "bin/d", p)), "config_parse root");
	}
	config_free(c);
	c = NULL;
	rc = config_parse("{\"tools\":[]}", 12, fx->dir, &c, err, sizeof err);
	CHECKF(t, rc == -1 && STREQ(err, "tools: must be a non-empty array (got [])"), "parse err: %s", err);
	rc = config_parse("{\"tools\":[]}\0{}", 15, fx->dir, &c, err, sizeof err);
	CHECKF(t, rc == -1 && STREQ(err, "line 1, column 13: NUL byte in the file"), "NUL: %s", err);
	/* only `len` bytes count, even when more follow */
	rc = config_parse("{\"tools\":[]} trailing", 12, fx->dir, &c, err, sizeof err);
	CHECKF(t, rc == -1 && STREQ(err, "tools: must be a non-empty array (got [])"), "len: %s", err);

	/* a tiny error buffer is truncated, never overrun */
	char small[6];
	rc = config_parse("{}", 2, fx->dir, &c, small, sizeof small);
	CHECKF(t, rc == -1 && strlen(small) == 5, "small buffer: %s", small);
}

/* Relative paths resolve against the folder holding the config (through symlinks), not the
 * process's cwd, whichever way the file was named. */
static void test_relative(struct tally *t, const struct fixture *fx)
{
	char p[PATH_MAX], q[PATH_MAX], err[512] = "", cwd[PATH_MAX];
	static const char text[] =
		"{\"server\":{\"fileRoots\":[\"../x/./y\", \"data\"]},"
		" \"tools\":[{\"name\":\"a\",\"command\":[\"../bin/job\"],\"cwd\":\"..\","
		"  \"sandbox\":{\"readPaths\":[\"in\", \"../../../..\"]}}]}";
	write_file(at(fx, "sub/config.json", p), text, 0644);
	write_file(at(fx, "real/config.json", p), text, 0644);
	if (!getcwd(cwd, sizeof cwd))
		check_die("getcwd");
	if (chdir(fx->dir) != 0)
		check_die("chdir");

	struct config *c = NULL;
	int rc = config_load("sub/config.json", &c, err, sizeof err);
	CHECKF(t, rc == 0 && c, "relative load: %s", err);
	if (c) {
		CHECKF(t, STREQ(c->path, at(fx, "sub/config.json", p)), "path %s", c->path);
		CHECKF(t, STREQ(c->dir, at(fx, "sub", p)), "dir %s", c->dir);
		CHECKF(t, STREQ(c->server.file_roots[0], at(fx, "x/y", p)), "root0 %s", c->server.file_roots[0]);
		CHECKF(t, STREQ(c->server.file_roots[1], at(fx, "sub/data", p)), "root1 %s", c->server.file_roots[1]);
		CHECKF(t, STREQ(c->tools[0].argv[0], at(fx, "bin/job", p)), "argv0 %s", c->tools[0].argv[0]);
		CHECKF(t, STREQ(c->tools[0].cwd, fx->dir), "cwd %s", c->tools[0].cwd);
		CHECKF(t, STREQ(c->tools[0].sandbox.read_paths[0], at(fx, "sub/in", p)), "readPaths");
		CHECKF(t, STREQ(c->tools[0].sandbox.read_paths[1], "/"), "'..' stops at / (%s)",
		      c->tools[0].sandbox.read_paths[1]);
	}
	config_free(c);
	c = NULL;

	/* through a symlinked folder: the real folder is the base */
	rc = config_load("link/config.json", &c, err, sizeof err);
	CHECKF(t, rc == 0 && c, "symlinked load: %s", err);
	if (c) {
		CHECKF(t, STREQ(c->dir, at(fx, "real", p)), "dir through symlink %s", c->dir);
		CHECKF(t, STREQ(c->server.file_roots[1], at(fx, "real/data", q)), "root via symlink %s",
		      c->server.file_roots[1]);
	}
	config_free(c);
	c = NULL;

	/* a symlinked file: its own folder is the base, not its target's */
	if (symlink("../real/config.json", at(fx, "sub/linked.json", p)) != 0)
		check_die(p);
	rc = config_load("sub/linked.json", &c, err, sizeof err);
	CHECKF(t, rc == 0 && c, "symlinked file: %s", err);
	if (c) {
		CHECKF(t, STREQ(c->path, at(fx, "sub/linked.json", p)), "symlinked file path %s", c->path);
		CHECKF(t, STREQ(c->server.file_roots[1], at(fx, "sub/data", q)), "symlinked file root %s",
		      c->server.file_roots[1]);
	}
	config_free(c);
	c = NULL;

	/* errors name the absolute path even when loaded by a relative one */
	write_file(at(fx, "sub/config.json", p), "{\"tools\":[]}", 0644);
	rc = config_load("sub/config.json", &c, err, sizeof err);
	fmt(q, sizeof q, "%s: tools: must be a non-empty array (got [])", p);
	CHECKF(t, rc == -1 && STREQ(err, q), "relative error prefix: %s", err);
	if (chdir(cwd) != 0)
		check_die("chdir back");
}

static void test_placeholder_scan(struct tally *t)
{
	const char *name = NULL;
	size_t len = 0;
	const char *s = "a{}b{x y}{ok_1.-}c{z}";
	const char *p = config_placeholder(s, &name, &len);
	CHECKF(t, p == s + 9 && len == 6 && strncmp(name, "ok_1.-", len) == 0, "first placeholder");
	p = config_placeholder(name + len, &name, &len);
	CHECKF(t, p == s + 18 && len == 1 && name[0] == 'z', "second placeholder");
	CHECKF(t, config_placeholder(name + len, &name, &len) == NULL, "no more placeholders");
	CHECKF(t, config_placeholder("{{a}", &name, &len) != NULL && name[0] == 'a', "nested brace");
	CHECKF(t, config_placeholder("{a", &name, &len) == NULL, "unterminated");
}

int main(void)
{
	struct tally t = { 0, 0 };
	struct fixture fx;
	setup(&fx);
	test_full(&t, &fx);
	test_errors(&t, &fx);
	test_sandbox_keys(&t, &fx);
	test_other_entry_points(&t, &fx);
	test_relative(&t, &fx);
	test_placeholder_scan(&t);
	check_rm_rf(fx.dir);
	return check_done(&t);
}
