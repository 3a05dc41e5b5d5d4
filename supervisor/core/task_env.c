/* supervisor/core/task_env.c — see task_env.h. */
#include "supervisor/core/task_env.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/io.h"

int task_env_mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Text of an argument for a {name} placeholder: strings as they are, the rest as JSON. */
static int arg_text(const cJSON *v, struct wbuf *out)
{
	if (!v || cJSON_IsNull(v))
		return 0;
	if (cJSON_IsString(v))
		return wbuf_append(out, v->valuestring, strlen(v->valuestring));
	if (cJSON_IsBool(v))
		return wbuf_printf(out, "%s", cJSON_IsTrue(v) ? "true" : "false");
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d == floor(d) && fabs(d) < 9e15)
			return wbuf_printf(out, "%lld", (long long)d);
		return wbuf_printf(out, "%.17g", d);
	}
	char *s = cJSON_PrintUnformatted(v);
	if (!s)
		return -ENOMEM;
	int rc = wbuf_append(out, s, strlen(s));
	free(s);
	return rc;
}

/* Replace each {name} placeholder (as config_placeholder() defines it, the same rule the config
 * was checked with) by its argument; an absent optional argument becomes the empty string. */
char *task_env_expand(const char *tmpl, const cJSON *args)
{
	struct wbuf b = { 0 };
	const char *p = tmpl, *name;
	size_t len;
	for (;;) {
		const char *open = config_placeholder(p, &name, &len);
		if (!open) {
			wbuf_append(&b, p, strlen(p));
			break;
		}
		wbuf_append(&b, p, (size_t)(open - p));
		char key[256];
		snprintf(key, sizeof key, "%.*s", (int)(len < 255 ? len : 255), name);
		arg_text(cJSON_GetObjectItemCaseSensitive(args, key), &b);
		p = open + len + 2;
	}
	if (wbuf_append(&b, "", 1) < 0) {
		wbuf_free(&b);
		return NULL;
	}
	return (char *)b.data;
}

int task_env_argv(const struct tool_cfg *tool, const cJSON *args, char ***out)
{
	char **argv = calloc(tool->argc + 1, sizeof *argv);
	*out = argv;
	if (!argv)
		return -ENOMEM;
	for (size_t i = 0; i < tool->argc; i++) {
		argv[i] = i == 0 ? strdup(tool->argv[0]) : task_env_expand(tool->argv[i], args);
		if (!argv[i])
			return -ENOMEM;
	}
	return 0;
}

void task_env_free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* The arguments for a job's environment.  Small ones travel as FORKPOINT_ARGS; the kernel caps
 * one environment string at 128 KiB (MAX_ARG_STRLEN) and execve would fail with E2BIG, so
 * larger ones are written to a file in the work directory, named by FORKPOINT_ARGS_FILE.
 * Jobs on the frame protocol get them in their start frame either way.  0 and *out, or
 * -errno with err. */
static int args_env(const char *work, const char *args_json, char **out, char *err, size_t errlen)
{
	size_t n = strlen(args_json);
	if (n <= TASK_ENV_ARGS_MAX) {
		if (asprintf(out, "FORKPOINT_ARGS=%s", args_json) < 0)
			goto oom;
		return 0;
	}
	char path[4300];
	snprintf(path, sizeof path, "%s/" TASK_ENV_ARGS_FILE, work);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	int rc = fd < 0 ? -errno : io_write_full(fd, args_json, n);
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
		return rc;
	}
	if (asprintf(out, "FORKPOINT_ARGS_FILE=%s", path) < 0)
		goto oom;
	return 0;
oom:
	*out = NULL;
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

/* A job sees a clean environment: nothing of the supervisor's leaks into it, only what
 * docs/job-protocol.md lists.  0 and *out (NULL-terminated, for free_strv), or -errno with
 * err. */
int task_env_build(struct supervisor *sv, const struct task *t, int attempt, const char *work,
                   char ***out, char *err, size_t errlen)
{
	char *args_json = cJSON_PrintUnformatted(t->args);
	char **envp = calloc(12, sizeof *envp);
	int rc = -ENOMEM, e = 0;
	if (!args_json || !envp)
		goto oom;
	if (asprintf(&envp[e++], "PATH=%s:/usr/local/bin:/usr/bin:/bin", sv->bin_dir) < 0 ||
	    asprintf(&envp[e++], "HOME=%s", work) < 0 ||
	    asprintf(&envp[e++], "TMPDIR=%s", work) < 0 ||
	    asprintf(&envp[e++], "LANG=C.UTF-8") < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_FD=3") < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_TASK_ID=%s", t->id) < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_TOOL=%s", t->tool->name) < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_ATTEMPT=%d", attempt) < 0 ||
	    asprintf(&envp[e++], "FORKPOINT_WORKDIR=%s", work) < 0) {
		envp[e - 1] = NULL;   /* asprintf leaves it undefined on failure */
		goto oom;
	}
	if ((rc = args_env(work, args_json, &envp[e++], err, errlen)) < 0)
		goto fail;
	free(args_json);
	*out = envp;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	free(args_json);
	task_env_free_strv(envp);
	return rc;
}

