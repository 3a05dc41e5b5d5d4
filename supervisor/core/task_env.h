/* supervisor/core/task_env.h — what a task's job is started with: its folders, its argv (the
 * tool's command with {name} placeholders replaced by arguments) and its environment (only
 * what docs/job-protocol.md lists; large arguments go to a file in the work folder).
 * Functions return 0 or -errno unless said otherwise. */
#ifndef FP_TASK_ENV_H
#define FP_TASK_ENV_H

#include <stddef.h>
#include <sys/types.h>
#include <cJSON.h>
#include "state/layout.h"
#include "supervisor/core/supervisor.h"
#include "supervisor/core/tasks.h"

#define TASK_ENV_ARGS_MAX  (64u << 10)   /* larger arguments go to TASK_ENV_ARGS_FILE, not the environment */
#define TASK_ENV_ARGS_FILE LAYOUT_ARGS_FILE

/* mkdir -p with mode for every folder made. */
int task_env_mkdir_p(const char *path, mode_t mode);
/* tmpl with each {name} replaced by the argument's text (strings as they are, the rest as
 * JSON; an absent one is empty).  A malloc'd string, NULL when out of memory. */
char *task_env_expand(const char *tmpl, const cJSON *args);
/* The argv of tool's job for args: *out NULL-terminated (free with task_env_free_strv, also
 * after -ENOMEM, when it holds what was built). */
int task_env_argv(const struct tool_cfg *tool, const cJSON *args, char ***out);
/* Free a NULL-terminated string vector (NULL is fine). */
void task_env_free_strv(char **v);
/* The environment of attempt `attempt` of t's job in work: *out NULL-terminated (free with
 * task_env_free_strv), or -errno with a message in err. */
int task_env_build(struct supervisor *sv, const struct task *t, int attempt, const char *work,
                   char ***out, char *err, size_t errlen);

#endif
