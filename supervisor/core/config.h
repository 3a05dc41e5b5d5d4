/* supervisor/config.h — the JSON configuration (docs/config.md is the reference).
 *
 * config_load() reads, parses and validates the whole file; every error names the key path
 * and the problem, e.g.  "tools[0].sandbox.memoryMB: must be an integer >= 1".
 * Unknown keys are errors.  Relative paths resolve against the config file's folder.
 * A loaded config is immutable and owned by the caller (config_free). */
#ifndef FP_CONFIG_H
#define FP_CONFIG_H

#include <stddef.h>
#include <cJSON.h>
#include "runner/sandbox/sandbox.h"

struct schema;   /* proto/schema.h */

enum tool_mode { TOOL_MODE_TASK, TOOL_MODE_SYNC, TOOL_MODE_AUTO };
enum tool_resume { RESUME_CHECKPOINT, RESUME_RESTART, RESUME_FAIL };
enum task_support { TASK_SUPPORT_FORBIDDEN, TASK_SUPPORT_OPTIONAL, TASK_SUPPORT_REQUIRED };

struct tool_cfg {
	char *name;
	char *title;             /* may be NULL */
	char *description;       /* may be NULL */
	cJSON *input_schema;     /* owned; always an object with "type":"object" */
	struct schema *input_check;  /* owned; input_schema compiled (proto/schema.h) */
	cJSON *output_schema;    /* owned; NULL if not configured */
	cJSON *annotations;      /* owned; NULL if not configured */
	char **argv;  size_t argc;   /* template: may contain {name} placeholders; argv[0] is an
	                                absolute path to an executable file (checked at load) */
	char *cwd;               /* NULL: the task's own work dir */
	enum tool_mode mode;     /* default TOOL_MODE_TASK */
	double wait_seconds;     /* for auto; default 10 */
	enum tool_resume resume; /* default RESUME_CHECKPOINT */
	double timeout_seconds;  /* 0 = none; default 3600 */
	double ttl_seconds;      /* default 86400 */
	int retries;             /* default 0 */
	enum task_support task_support; /* default OPTIONAL for task/auto tools, FORBIDDEN for sync */
	struct sandbox_policy sandbox;  /* "sandbox" less maxCheckpointMB; "default" profile */
	long max_checkpoint_mb;  /* sandbox.maxCheckpointMB: the largest checkpoint a task may keep
	                          * stored, MiB; default and maximum FRAME_CHECKPOINT_MB */
};

struct server_cfg {
	char *name;              /* default "forkpoint" */
	int max_concurrent;      /* default 4, >= 1 */
	int max_queue;           /* default 1000: beyond it a call answers queue_full */
	char **file_roots; size_t n_file_roots;    /* absolute, resolved against config dir */
	double cancel_grace_seconds;  /* default 5: cancel frame → SIGKILL of the job's tree */
	long max_frame_bytes;    /* default FRAME_MAX_DEFAULT */
	long log_max_bytes;      /* per-task captured output cap; default 8 MiB */
	long result_inline_bytes;/* larger results go to a resource link; default 64 KiB */
	long result_max_bytes;   /* largest result (as JSON text) a job may return; default 16 MiB */
	long state_max_mb;       /* disk budget of the blob store and journal, MiB; 0 = none */
	long artifact_hash_max_bytes; /* larger artifacts are listed without sha256; default 1 GiB */
	long max_arguments_bytes;/* a call's arguments as compact JSON, at most this; default 1 MiB,
	                          * at most 4 MiB so they always fit a start frame and a record */
	long job_uid, job_gid;   /* server.jobUser for a root server; 0: the default (nobody) */
	long journal_segment_bytes; /* roll to a new journal segment past this; default 64 MiB */
	long compact_min_bytes;  /* journal size before the first compaction; default 8 MiB */
};

struct config {
	char *path;              /* absolute path of the file loaded ("" for config_parse) */
	char *dir;               /* folder relative paths resolve against */
	struct server_cfg server;
	struct tool_cfg *tools;  size_t n_tools;
};

/* Load and validate a config file.  0 and *out set, or -1 with a one-line message in err. */
int config_load(const char *path, struct config **out, char *err, size_t errlen);
/* Same, from text already in memory; base_dir is where relative paths resolve. */
int config_parse(const char *text, size_t len, const char *base_dir,
                 struct config **out, char *err, size_t errlen);
void config_free(struct config *c);

const struct tool_cfg *config_tool(const struct config *c, const char *name);

/* The next argument placeholder in a command element: '{', one or more of [A-Za-z0-9_.-], '}'.
 * Any other brace text is literal.  Returns a pointer to the '{' and sets name/len (name is not
 * NUL-terminated), or NULL if there is none.  config_load() has checked that every placeholder
 * names a property of inputSchema.properties and that command[0] has none. */
const char *config_placeholder(const char *s, const char **name, size_t *len);

#endif
