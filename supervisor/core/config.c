/* supervisor/config.c — see config.h; docs/config.md is the user-facing reference.
 *
 * Loading is one walk over the cJSON tree with the key path carried along, so every message can
 * name exactly where the problem is.  Each object's keys are checked against its allowed list
 * before any value is read: a misspelt key is an error, never a silently ignored setting.
 * The result is built into a zeroed struct config; on failure config_free() takes the half-built
 * struct apart, so every field is either NULL/0 or owned. */
#include "supervisor/core/config.h"

#include "proto/frame.h"
#include "proto/schema.h"
#include "proto/io.h"
#include "proto/utf8.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX_BYTES (16L << 20)  /* a config is hand-written; anything this big is a mistake */
#define KEYPATH 320

struct ctx {
	char *err;
	size_t errlen;
	const char *file;   /* prefix of every message; "" when parsing text from memory */
	const char *dir;    /* relative paths resolve against this */
};

/* One line: "<file>: <path>: <message>", leaving out whichever of file and path is empty. */
static int fail(struct ctx *cx, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct ctx *cx, const char *path, const char *fmt, ...)
{
	if (!cx->errlen)
		return -1;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(cx->err, cx->errlen, "%s%s%s%s%s", cx->file, *cx->file ? ": " : "",
	         path, *path ? ": " : "", msg);
	schema_tidy(cx->err);
	return -1;
}

/* Out of memory is reported like any other config error, as a line of text: this is library
 * code, and only main() decides to exit. */
static int oom(struct ctx *cx)
{
	return fail(cx, "", "out of memory");
}

/* Key paths are for messages only, so a clipped one (a hostile key name) is acceptable. */
static void key_path(char *out, const char *opath, const char *key)
{
	if (snprintf(out, KEYPATH, "%s%s%s", opath, *opath ? "." : "", key) >= KEYPATH)
		memcpy(out + KEYPATH - 4, "...", 4);
}

/* "tools[3]": array elements are named the way a user would point at them in the file. */
static void index_path(char *out, const char *apath, size_t i)
{
	if (snprintf(out, KEYPATH, "%s[%zu]", apath, i) >= KEYPATH)
		memcpy(out + KEYPATH - 4, "...", 4);
}

/* Case-sensitive, as JSON keys are: cJSON_GetObjectItem would take "Tools" for "tools" and
 * the misspelling would never be reported. */
static const cJSON *get(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* Limits and values print as the user would write them: 3600, not 3600.000000. */
static void fmt_num(char *buf, size_t n, double d)
{
	if (schema_is_integral(d) && d < 1e15 && d > -1e15)
		snprintf(buf, n, "%.0f", d);
	else
		snprintf(buf, n, "%.15g", d);
}

/* The offending value as the user wrote it (compact JSON), short enough for one line. */
static const char *got(const cJSON *v, char *buf, size_t n)
{
	if (cJSON_IsNumber(v)) {
		/* cJSON reads an overflowing literal such as 1e400 as infinity */
		if (isfinite(v->valuedouble))
			fmt_num(buf, n, v->valuedouble);
		else
			snprintf(buf, n, "a number out of range");
		return buf;
	}
	char *txt = cJSON_PrintUnformatted(v);
	if (!txt) {
		snprintf(buf, n, "?");
	} else if (strlen(txt) > 40) {
		int cut = (int)utf8_clip(txt, strlen(txt), 37);   /* never split a UTF-8 sequence */
		snprintf(buf, n, "%.*s...", cut, txt);
	} else
		snprintf(buf, n, "%s", txt);
	free(txt);
	return buf;
}

/* ---- key checks and typed getters --------------------------------------------------
 * Getters return 0 and leave *out untouched when the key is absent (so defaults set
 * beforehand stand), 0 with *out set when valid, -1 with a message otherwise. */

/* Every section is checked for type before its keys are read, so a string where an object
 * belongs gets "must be an object", not a confusing message about a missing member. */
static int need_object(struct ctx *cx, const cJSON *v, const char *path)
{
	return cJSON_IsObject(v) ? 0 : fail(cx, path, "must be an object");
}

/* Edit distance between a and b, ignoring case (a key typed as "MaxConcurrent" or "maxConcurent"
 * is still recognised), capped at 3: only "close enough to suggest" matters.  Two rows of the
 * classic table suffice; keys longer than 63 bytes are never suggested for. */
static int key_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int prev[64], cur[64];
	if (la > 63 || lb > 63)
		return 3;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int best = cur[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
			int del = prev[j] + 1, ins = cur[j - 1] + 1;
			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
			if (cur[j] < best)
				best = cur[j];
		}
		if (best >= 3)
			return 3;   /* every later row is at least as far */
		memcpy(prev, cur, (lb + 1) * sizeof *cur);
	}
	return prev[lb] < 3 ? prev[lb] : 3;
}

/* "unknown key", with the nearest allowed key when one is within two edits (and the key is
 * long enough that two edits are not a different word). */
static int unknown_key(struct ctx *cx, const char *kp, const char *key, const char *const *allowed)
{
	const char *best = NULL;
	int best_d = 3;
	for (size_t i = 0; allowed[i]; i++) {
		int d = key_distance(key, allowed[i]);
		if (d < best_d && (d == 0 || strlen(allowed[i]) > (size_t)(2 * d))) {
			best = allowed[i];
			best_d = d;
		}
	}
	if (best)
		return fail(cx, kp, "unknown key (did you mean \"%s\"?)", best);
	return fail(cx, kp, "unknown key");
}

/* Unknown and repeated keys; `allowed` ends with NULL.  The first repeat of an allowed key is
 * met within the first |allowed|+1 members, so the quadratic scan stays small. */
static int check_keys(struct ctx *cx, const cJSON *obj, const char *opath,
                      const char *const *allowed)
{
	const cJSON *k;
	char kp[KEYPATH];
	cJSON_ArrayForEach(k, obj) {
		key_path(kp, opath, k->string);
		size_t i;
		for (i = 0; allowed[i]; i++)
			if (strcmp(allowed[i], k->string) == 0)
				break;
		if (!allowed[i])
			return unknown_key(cx, kp, k->string, allowed);
		for (const cJSON *e = obj->child; e != k; e = e->next)
			if (strcmp(e->string, k->string) == 0)
				return fail(cx, kp, "duplicate key");
	}
	return 0;
}

/* The "<= max" message comes first for a whole number that is too large, so 1e12 gets the
 * limit it broke; anything else (a fraction, a string, too small) is told the lower bound. */
static int opt_long(struct ctx *cx, const cJSON *obj, const char *opath, const char *key,
                    long min, long max, long *out)
{
	const cJSON *v = get(obj, key);
	if (!v)
		return 0;
	char kp[KEYPATH], g[64];
	key_path(kp, opath, key);
	if (cJSON_IsNumber(v) && schema_is_integral(v->valuedouble) && v->valuedouble > (double)max)
		return fail(cx, kp, "must be an integer <= %ld (got %s)", max, got(v, g, sizeof g));
	if (!cJSON_IsNumber(v) || !schema_is_integral(v->valuedouble) || v->valuedouble < (double)min)
		return fail(cx, kp, "must be an integer >= %ld (got %s)", min, got(v, g, sizeof g));
	*out = (long)v->valuedouble;
	return 0;
}

/* Through opt_long, so int options get the same checks and messages; the bounds passed are
 * ints, so the narrowing cannot overflow. */
static int opt_int(struct ctx *cx, const cJSON *obj, const char *opath, const char *key,
                   int min, int max, int *out)
{
	long l = *out;
	if (opt_long(cx, obj, opath, key, min, max, &l))
		return -1;
	*out = (int)l;
	return 0;
}

/* Non-finite numbers are refused: cJSON reads 1e400 as infinity, which would pass a "<= max"
 * test written the other way round. */
static int opt_num(struct ctx *cx, const cJSON *obj, const char *opath, const char *key,
                   double min, double max, double *out)
{
	const cJSON *v = get(obj, key);
	if (!v)
		return 0;
	char kp[KEYPATH], g[64], lim[32];
	key_path(kp, opath, key);
	if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble > max) {
		fmt_num(lim, sizeof lim, max);
		return fail(cx, kp, "must be a number <= %s (got %s)", lim, got(v, g, sizeof g));
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < min) {
		fmt_num(lim, sizeof lim, min);
		return fail(cx, kp, "must be a number >= %s (got %s)", lim, got(v, g, sizeof g));
	}
	*out = v->valuedouble;
	return 0;
}

/* true or false only: 0, 1 and "yes" are refused rather than guessed at. */
static int opt_bool(struct ctx *cx, const cJSON *obj, const char *opath, const char *key, int *out)
{
	const cJSON *v = get(obj, key);
	if (!v)
		return 0;
	char kp[KEYPATH], g[64];
	key_path(kp, opath, key);
	if (!cJSON_IsBool(v))
		return fail(cx, kp, "must be true or false (got %s)", got(v, g, sizeof g));
	*out = cJSON_IsTrue(v);
	return 0;
}

/* A string copied into *out (which must be NULL or a default the caller frees first). */
static int opt_str(struct ctx *cx, const cJSON *obj, const char *opath, const char *key,
                   int nonempty, char **out)
{
	const cJSON *v = get(obj, key);
	if (!v)
		return 0;
	char kp[KEYPATH], g[64];
	key_path(kp, opath, key);
	if (!cJSON_IsString(v) || (nonempty && !*v->valuestring))
		return fail(cx, kp, "must be a %sstring (got %s)", nonempty ? "non-empty " : "",
		            got(v, g, sizeof g));
	char *s = strdup(v->valuestring);
	if (!s)
		return oom(cx);
	free(*out);
	*out = s;
	return 0;
}

/* One of `names` (NULL-terminated); *out becomes its index. */
static int opt_enum(struct ctx *cx, const cJSON *obj, const char *opath, const char *key,
                    const char *const *names, int *out)
{
	const cJSON *v = get(obj, key);
	if (!v)
		return 0;
	for (int i = 0; cJSON_IsString(v) && names[i]; i++) {
		if (strcmp(names[i], v->valuestring) == 0) {
			*out = i;
			return 0;
		}
	}
	char kp[KEYPATH], g[64], list[160] = "";
	size_t len = 0;
	for (int i = 0; names[i]; i++) {
		int n = snprintf(list + len, sizeof list - len, "%s\"%s\"", i ? ", " : "", names[i]);
		if (n < 0 || (size_t)n >= sizeof list - len)
			break;
		len += (size_t)n;
	}
	key_path(kp, opath, key);
	return fail(cx, kp, "must be one of %s (got %s)", list, got(v, g, sizeof g));
}

/* n entries, not NULL-terminated, so arrays freed halfway through parsing are safe too. */
static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* ---- paths -------------------------------------------------------------------------------- */

/* dir/p (or p if absolute) with "//", "." and ".." folded lexically.  Nothing is looked up on
 * disk: paths named in a config may legitimately not exist yet. */
static char *path_resolve(const char *dir, const char *p)
{
	size_t n = strlen(dir) + strlen(p) + 2;
	char *joined = malloc(n), *out = malloc(n + 1);
	if (!joined || !out)
		goto fail;
	snprintf(joined, n, "%s%s%s", p[0] == '/' ? "" : dir, p[0] == '/' ? "" : "/", p);
	size_t olen = 0;
	for (const char *s = joined; *s;) {
		while (*s == '/')
			s++;
		const char *e = s;
		while (*e && *e != '/')
			e++;
		size_t len = (size_t)(e - s);
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			/* back to the previous '/', never above the root */
			while (olen > 0 && out[--olen] != '/')
				;
		} else if (len > 0 && !(len == 1 && s[0] == '.')) {
			out[olen++] = '/';
			memcpy(out + olen, s, len);
			olen += len;
		}
		s = e;
	}
	if (olen == 0)
		out[olen++] = '/';
	out[olen] = '\0';
	free(joined);
	return out;
fail:
	free(joined);
	free(out);
	return NULL;
}

/* An array of non-empty strings, each made absolute against the config dir. */
static int opt_paths(struct ctx *cx, const cJSON *obj, const char *opath, const char *key,
                     char ***out, size_t *nout)
{
	const cJSON *v = get(obj, key);
	if (!v)
		return 0;
	char kp[KEYPATH], ip[KEYPATH], g[64];
	key_path(kp, opath, key);
	if (!cJSON_IsArray(v))
		return fail(cx, kp, "must be an array of paths (got %s)", got(v, g, sizeof g));
	size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
	char **paths = calloc(n ? n : 1, sizeof *paths);
	if (!paths)
		return oom(cx);
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		index_path(ip, kp, i);
		if (!cJSON_IsString(e) || !*e->valuestring) {
			fail(cx, ip, "must be a non-empty string (got %s)", got(e, g, sizeof g));
			goto fail;
		}
		if (!(paths[i] = path_resolve(cx->dir, e->valuestring))) {
			oom(cx);
			goto fail;
		}
		i++;
	}
	*out = paths;
	*nout = n;
	return 0;
fail:
	free_strv(paths, i);
	return -1;
}

/* A regular file this process may execute; else the reason, as an errno. */
static int check_executable(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return errno;
	if (!S_ISREG(st.st_mode))
		return S_ISDIR(st.st_mode) ? EISDIR : EACCES;
	if (access(path, X_OK) != 0)
		return errno;
	return 0;
}

/* command[0]: with a '/', relative to the config dir; without, the first executable match in
 * the absolute entries of PATH (relative entries would depend on the supervisor's cwd). */
static int resolve_command(struct ctx *cx, const char *kp, const char *cmd, char **out)
{
	if (strchr(cmd, '/')) {
		char *abs = path_resolve(cx->dir, cmd);
		if (!abs)
			return oom(cx);
		int e = check_executable(abs);
		if (e) {
			fail(cx, kp, "%s: %s", abs, e == EACCES ? "not executable" : strerror(e));
			free(abs);
			return -1;
		}
		*out = abs;
		return 0;
	}
	const char *env = getenv("PATH");
	const char *search = env && *env ? env : "/usr/local/bin:/usr/bin:/bin";
	for (const char *s = search; *s;) {
		const char *e = strchr(s, ':');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len > 0 && s[0] == '/') {
			char *dir = strndup(s, len);
			char *cand = dir ? path_resolve(dir, cmd) : NULL;
			free(dir);
			if (!cand)
				return oom(cx);
			if (check_executable(cand) == 0) {
				*out = cand;
				return 0;
			}
			free(cand);
		}
		s += len;
		if (*s == ':')
			s++;
	}
	return fail(cx, kp, "\"%s\" not found in PATH (%s)", cmd, search);
}

/* ---- server ------------------------------------------------------------------------------- */

/* server.jobUser: a user name (its passwd gid unless ":group" follows) or "uid[:gid]", never
 * root.  Only a root supervisor can run jobs as someone else. */
static int parse_job_user(struct ctx *cx, const cJSON *obj, struct server_cfg *s)
{
	char *text = NULL, *colon;
	long uid = -1, gid = -1;
	int rc = -1;
	if (opt_str(cx, obj, "server", "jobUser", 1, &text))
		return -1;
	if (!text)
		return 0;
	if ((colon = strchr(text, ':')))
		*colon++ = 0;
	char *end;
	errno = 0;
	uid = strtol(text, &end, 10);
	if (end == text || *end || errno || uid < 0) {
		struct passwd *pw = getpwnam(text);
		if (!pw) {
			fail(cx, "server.jobUser", "no user named \"%s\" on this host", text);
			goto out;
		}
		uid = (long)pw->pw_uid;
		gid = (long)pw->pw_gid;
	} else if (!colon) {
		struct passwd *pw = getpwuid((uid_t)uid);
		gid = pw ? (long)pw->pw_gid : uid;
	}
	if (colon) {
		errno = 0;
		gid = strtol(colon, &end, 10);
		if (end == colon || *end || errno || gid < 0) {
			struct group *gr = getgrnam(colon);
			if (!gr) {
				fail(cx, "server.jobUser", "no group named \"%s\" on this host", colon);
				goto out;
			}
			gid = (long)gr->gr_gid;
		}
	}
	if (uid == 0 || gid == 0) {
		fail(cx, "server.jobUser", "must not be root (uid or gid 0): jobs of a root server "
		     "run as an unprivileged user");
		goto out;
	}
	if (uid > 0x7fffffffL || gid > 0x7fffffffL) {
		fail(cx, "server.jobUser", "uid and gid must be below 2^31");
		goto out;
	}
	if (geteuid() != 0 && ((uid_t)uid != geteuid() || (gid_t)gid != getegid())) {
		fail(cx, "server.jobUser", "only a server running as root can run jobs as another "
		     "user (this one runs as uid %u)", (unsigned)geteuid());
		goto out;
	}
	s->job_uid = uid;
	s->job_gid = gid;
	rc = 0;
out:
	free(text);
	return rc;
}

/* Each limit has a range that keeps the server safe whatever the file says: a frame of 1 KiB
 * to 64 MiB, at most 1024 concurrent jobs, and so on; a value outside is refused, never
 * clamped, so what runs is what the file says. */
static int parse_server(struct ctx *cx, const cJSON *v, struct server_cfg *s)
{
	static const char *const keys[] = {
		"name", "maxConcurrent", "maxQueue", "fileRoots", "cancelGraceSeconds",
		"maxFrameBytes", "logMaxBytes", "resultInlineBytes", "resultMaxBytes", "stateDirMaxMB",
		"artifactHashMaxBytes", "maxArgumentsBytes", "jobUser", "journalSegmentBytes",
		"compactMinBytes", NULL,
	};
	if (!v)
		return 0;
	if (need_object(cx, v, "server") || check_keys(cx, v, "server", keys))
		return -1;
	if (opt_str(cx, v, "server", "name", 1, &s->name) ||
	    opt_int(cx, v, "server", "maxConcurrent", 1, 1024, &s->max_concurrent) ||
	    opt_int(cx, v, "server", "maxQueue", 0, 1000000, &s->max_queue) ||
	    opt_paths(cx, v, "server", "fileRoots", &s->file_roots, &s->n_file_roots) ||
	    opt_num(cx, v, "server", "cancelGraceSeconds", 0, 3600, &s->cancel_grace_seconds) ||
	    opt_long(cx, v, "server", "maxFrameBytes", 1024, 64L << 20, &s->max_frame_bytes) ||
	    opt_long(cx, v, "server", "logMaxBytes", 4096, 1L << 30, &s->log_max_bytes) ||
	    opt_long(cx, v, "server", "resultInlineBytes", 256, 16L << 20, &s->result_inline_bytes) ||
	    opt_long(cx, v, "server", "resultMaxBytes", 1024, 64L << 20, &s->result_max_bytes) ||
	    opt_long(cx, v, "server", "stateDirMaxMB", 0, 1L << 30, &s->state_max_mb) ||
	    opt_long(cx, v, "server", "artifactHashMaxBytes", 0, 64L << 30, &s->artifact_hash_max_bytes) ||
	    opt_long(cx, v, "server", "maxArgumentsBytes", 2, 4L << 20, &s->max_arguments_bytes) ||
	    opt_long(cx, v, "server", "journalSegmentBytes", 4096, 1L << 30, &s->journal_segment_bytes) ||
	    opt_long(cx, v, "server", "compactMinBytes", 4096, 1L << 40, &s->compact_min_bytes) ||
	    parse_job_user(cx, v, s))
		return -1;
	return 0;
}

/* ---- tools -------------------------------------------------------------------------------- */

static const char *const reserved_names[] = {
	"durable_task_get", "durable_task_respond", "durable_task_cancel", "durable_task_list",
	"file_transfer_open", "file_transfer_write", "file_transfer_read", "file_transfer_commit",
	"file_transfer_status", NULL,
};

/* Tool names and placeholder names share one alphabet: [A-Za-z0-9_.-]. */
static int is_name_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

/* A model types these names and they appear in task records and logs: a small alphabet
 * (shared with placeholders) keeps them free of anything that would need escaping. */
static int valid_tool_name(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 64)
		return 0;
	for (; *s; s++)
		if (!is_name_char(*s))
			return 0;
	return 1;
}

/* "{name}" with a name from the same alphabet as tool names; a lone "{" or "{}" is literal
 * text, so a command can still pass JSON-looking arguments. */
const char *config_placeholder(const char *s, const char **name, size_t *len)
{
	for (const char *p = strchr(s, '{'); p; p = strchr(p + 1, '{')) {
		const char *e = p + 1;
		while (is_name_char(*e))
			e++;
		if (*e == '}' && e > p + 1) {
			*name = p + 1;
			*len = (size_t)(e - p - 1);
			return p;
		}
	}
	return NULL;
}

/* inputSchema / outputSchema: an object schema within the subset.  *out gets a copy, and
 * *compiled (when not NULL) its compiled form. */
static int parse_schema(struct ctx *cx, const cJSON *v, const char *kp, cJSON **out,
                        struct schema **compiled)
{
	char why[400];
	if (need_object(cx, v, kp))
		return -1;
	struct schema *sc = schema_compile(v, why, sizeof why);
	if (!sc)
		return fail(cx, "", "%s.%s", kp, why);
	if (compiled)
		*compiled = sc;
	else
		schema_free(sc);
	const cJSON *type = get(v, "type");
	if (!cJSON_IsString(type) || strcmp(type->valuestring, "object") != 0) {
		char tp[KEYPATH];
		key_path(tp, kp, "type");
		return fail(cx, tp, "must be \"object\" (a tool's schema describes an object)");
	}
	if (!(*out = cJSON_Duplicate(v, 1)))
		return oom(cx);
	return 0;
}

/* Annotations are hints a client shows or weighs; they are type-checked and passed through
 * as written, and nothing in forkpoint acts on them. */
static int parse_annotations(struct ctx *cx, const cJSON *v, const char *kp, cJSON **out)
{
	static const char *const keys[] = {
		"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint", NULL,
	};
	if (need_object(cx, v, kp) || check_keys(cx, v, kp, keys))
		return -1;
	char *title = NULL;
	int b = 0;
	int rc = opt_str(cx, v, kp, "title", 0, &title);
	free(title);
	for (size_t i = 1; rc == 0 && keys[i]; i++)
		rc = opt_bool(cx, v, kp, keys[i], &b);
	if (rc)
		return -1;
	if (!(*out = cJSON_Duplicate(v, 1)))
		return oom(cx);
	return 0;
}

/* maxCheckpointMB is capped at what the frame protocol can carry, so a tool cannot be
 * configured with checkpoints the job could never send.  require names mechanisms; the
 * check that the host has them is made per job (sandbox_job_new), where the answer is
 * known. */
static int parse_sandbox(struct ctx *cx, const cJSON *v, const char *kp, struct sandbox_policy *sb,
                         long *max_checkpoint_mb)
{
	static const char *const keys[] = {
		"profile", "network", "memoryMB", "cpuSeconds", "maxProcesses", "maxFileMB",
		"maxCheckpointMB", "readPaths", "writePaths", "require", NULL,
	};
	static const char *const profiles[] = { "default", "strict", "none", NULL };
	static const char *const mechanisms[] = {
		"namespaces", "seccomp", "landlock", "cgroup", "rlimits", NULL,
	};
	int profile = 0;
	if (need_object(cx, v, kp) || check_keys(cx, v, kp, keys))
		return -1;
	if (opt_enum(cx, v, kp, "profile", profiles, &profile) ||
	    opt_bool(cx, v, kp, "network", &sb->network) ||
	    opt_long(cx, v, kp, "memoryMB", 1, 1048576, &sb->memory_mb) ||
	    opt_long(cx, v, kp, "cpuSeconds", 1, 31536000, &sb->cpu_seconds) ||
	    opt_long(cx, v, kp, "maxProcesses", 1, 65536, &sb->max_processes) ||
	    opt_long(cx, v, kp, "maxFileMB", 1, 1048576, &sb->max_file_mb) ||
	    opt_long(cx, v, kp, "maxCheckpointMB", 1, FRAME_CHECKPOINT_MB, max_checkpoint_mb) ||
	    opt_paths(cx, v, kp, "readPaths", &sb->read_paths, &sb->n_read_paths) ||
	    opt_paths(cx, v, kp, "writePaths", &sb->write_paths, &sb->n_write_paths))
		return -1;
	snprintf(sb->profile, sizeof sb->profile, "%s", profiles[profile]);

	const cJSON *req = get(v, "require");
	if (!req)
		return 0;
	char rp[KEYPATH], ip[KEYPATH], g[64];
	key_path(rp, kp, "require");
	if (!cJSON_IsArray(req))
		return fail(cx, rp, "must be an array of strings (got %s)", got(req, g, sizeof g));
	size_t n = (size_t)cJSON_GetArraySize(req);
	if (!(sb->require = calloc(n ? n : 1, sizeof *sb->require)))
		return oom(cx);
	const cJSON *e;
	cJSON_ArrayForEach(e, req) {
		index_path(ip, rp, sb->n_require);
		int m = -1;
		for (int i = 0; cJSON_IsString(e) && mechanisms[i]; i++)
			if (strcmp(mechanisms[i], e->valuestring) == 0)
				m = i;
		if (m < 0)
			return fail(cx, ip, "must be one of \"namespaces\", \"seccomp\", \"landlock\", "
			            "\"cgroup\", \"rlimits\" (got %s)", got(e, g, sizeof g));
		if (!(sb->require[sb->n_require] = strdup(mechanisms[m])))
			return oom(cx);
		sb->n_require++;
	}
	return 0;
}

/* command: the argv template.  Placeholders must name declared arguments, so a typo is caught
 * here rather than passed to the job as a literal "{sectons}". */
static int parse_command(struct ctx *cx, const cJSON *v, const char *tp, struct tool_cfg *t)
{
	char kp[KEYPATH], ip[KEYPATH], g[64];
	key_path(kp, tp, "command");
	if (!v)
		return fail(cx, kp, "required (an array: the program and its arguments)");
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
		return fail(cx, kp, "must be a non-empty array of strings (got %s)", got(v, g, sizeof g));
	size_t n = (size_t)cJSON_GetArraySize(v);
	if (!(t->argv = calloc(n + 1, sizeof *t->argv)))   /* NULL-terminated for exec */
		return oom(cx);
	const cJSON *props = get(t->input_schema, "properties");
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		index_path(ip, kp, t->argc);
		if (!cJSON_IsString(e))
			return fail(cx, ip, "must be a string (got %s)", got(e, g, sizeof g));
		const char *s = e->valuestring, *name;
		size_t len;
		if (t->argc == 0) {
			if (!*s)
				return fail(cx, ip, "must be a non-empty string");
			if (config_placeholder(s, &name, &len))
				return fail(cx, ip, "the program path cannot contain placeholders");
			if (resolve_command(cx, ip, s, &t->argv[0]))
				return -1;
		} else {
			for (const char *p = s; (p = config_placeholder(p, &name, &len)); p = name + len) {
				char pname[128];
				snprintf(pname, sizeof pname, "%.*s", (int)(len < 120 ? len : 120), name);
				if (len >= 120 || !props || !get(props, pname))
					return fail(cx, ip, "placeholder {%s} is not a property in "
					            "inputSchema.properties", pname);
			}
			if (!(t->argv[t->argc] = strdup(s)))
				return oom(cx);
		}
		t->argc++;
	}
	return 0;
}

/* A relative cwd resolves against the config file's folder, not the server's cwd, and must
 * exist now: a job whose cwd is missing would fail on every call. */
static int parse_cwd(struct ctx *cx, const cJSON *tool, const char *tp, struct tool_cfg *t)
{
	char kp[KEYPATH];
	if (opt_str(cx, tool, tp, "cwd", 1, &t->cwd))
		return -1;
	if (!t->cwd)
		return 0;
	key_path(kp, tp, "cwd");
	char *abs = path_resolve(cx->dir, t->cwd);
	if (!abs)
		return oom(cx);
	free(t->cwd);
	t->cwd = abs;
	struct stat st;
	if (stat(abs, &st) != 0)
		return fail(cx, kp, "%s: %s", abs, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return fail(cx, kp, "%s: not a directory", abs);
	return 0;
}

/* A tool's name is what a model calls it by: it must be a valid MCP tool name and must not
 * shadow a built-in tool, or configuring one would silently replace forkpoint's own. */
static int parse_tool_name(struct ctx *cx, const cJSON *v, const char *tp, struct tool_cfg *t)
{
	char kp[KEYPATH];
	key_path(kp, tp, "name");
	if (!get(v, "name"))
		return fail(cx, kp, "required");
	if (opt_str(cx, v, tp, "name", 1, &t->name))
		return -1;
	if (!valid_tool_name(t->name))
		return fail(cx, kp, "\"%.80s\" is not a valid tool name (1-64 characters from "
		            "A-Z a-z 0-9 _ . -)", t->name);
	for (size_t i = 0; reserved_names[i]; i++)
		if (strcmp(reserved_names[i], t->name) == 0)
			return fail(cx, kp, "\"%s\" is the name of a built-in tool", t->name);
	return 0;
}

/* The schemas are compiled here, at load, so a bad one stops the config with its path instead
 * of failing the first call; a tool without inputSchema gets {"type": "object"}, which MCP
 * requires tools/list to show and which still refuses non-object arguments. */
static int parse_tool_schemas(struct ctx *cx, const cJSON *v, const char *tp, struct tool_cfg *t)
{
	char kp[KEYPATH];
	const cJSON *in = get(v, "inputSchema"), *outs = get(v, "outputSchema"),
	            *ann = get(v, "annotations");
	key_path(kp, tp, "inputSchema");
	if (in) {
		if (parse_schema(cx, in, kp, &t->input_schema, &t->input_check))
			return -1;
	} else {
		cJSON *def = cJSON_CreateObject();
		if (!def || !cJSON_AddStringToObject(def, "type", "object")) {
			cJSON_Delete(def);
			return oom(cx);
		}
		t->input_schema = def;
		if (!(t->input_check = schema_compile(def, NULL, 0)))
			return oom(cx);
	}
	key_path(kp, tp, "outputSchema");
	if (outs && parse_schema(cx, outs, kp, &t->output_schema, NULL))
		return -1;
	key_path(kp, tp, "annotations");
	if (ann && parse_annotations(cx, ann, kp, &t->annotations))
		return -1;
	return 0;
}

/* How a tool runs: mode, timings, retries and taskSupport.  taskSupport defaults from the
 * mode (a sync tool cannot be a task); "required" with mode sync is refused, since no call
 * could then succeed. */
static int parse_tool_run(struct ctx *cx, const cJSON *v, const char *tp, struct tool_cfg *t)
{
	static const char *const modes[] = { "task", "sync", "auto", NULL };
	static const char *const resumes[] = { "checkpoint", "restart", "fail", NULL };
	static const char *const supports[] = { "forbidden", "optional", "required", NULL };
	char kp[KEYPATH];
	int mode = TOOL_MODE_TASK, resume = RESUME_CHECKPOINT, support = -1;
	if (opt_enum(cx, v, tp, "mode", modes, &mode) ||
	    opt_num(cx, v, tp, "waitSeconds", 0, 3600, &t->wait_seconds) ||
	    opt_enum(cx, v, tp, "resume", resumes, &resume) ||
	    opt_num(cx, v, tp, "timeoutSeconds", 0, 31536000, &t->timeout_seconds) ||
	    opt_num(cx, v, tp, "ttlSeconds", 1, 31536000, &t->ttl_seconds) ||
	    opt_int(cx, v, tp, "retries", 0, 100, &t->retries) ||
	    opt_enum(cx, v, tp, "taskSupport", supports, &support))
		return -1;
	t->mode = (enum tool_mode)mode;
	t->resume = (enum tool_resume)resume;
	if (support < 0)
		support = mode == TOOL_MODE_SYNC ? TASK_SUPPORT_FORBIDDEN : TASK_SUPPORT_OPTIONAL;
	if (support == TASK_SUPPORT_REQUIRED && mode == TOOL_MODE_SYNC) {
		key_path(kp, tp, "taskSupport");
		return fail(cx, kp, "\"required\" cannot be combined with \"mode\": \"sync\"");
	}
	t->task_support = (enum task_support)support;
	return 0;
}

/* Unknown keys are refused (check_keys), so a misspelt option is an error at load rather than
 * a default silently in force.  The defaults are set first so every parse below only
 * overrides. */
static int parse_tool(struct ctx *cx, const cJSON *v, const char *tp, struct tool_cfg *t)
{
	static const char *const keys[] = {
		"name", "title", "description", "inputSchema", "outputSchema", "annotations",
		"command", "cwd", "mode", "waitSeconds", "resume", "timeoutSeconds", "ttlSeconds",
		"retries", "taskSupport", "sandbox", NULL,
	};
	char kp[KEYPATH];

	t->wait_seconds = 10;
	t->timeout_seconds = 3600;
	t->ttl_seconds = 86400;
	snprintf(t->sandbox.profile, sizeof t->sandbox.profile, "default");
	t->max_checkpoint_mb = FRAME_CHECKPOINT_MB;
	if (need_object(cx, v, tp) || check_keys(cx, v, tp, keys))
		return -1;
	if (parse_tool_name(cx, v, tp, t))
		return -1;
	if (opt_str(cx, v, tp, "title", 0, &t->title) ||
	    opt_str(cx, v, tp, "description", 0, &t->description))
		return -1;
	if (parse_tool_schemas(cx, v, tp, t))
		return -1;
	if (parse_command(cx, get(v, "command"), tp, t) || parse_cwd(cx, v, tp, t))
		return -1;
	if (parse_tool_run(cx, v, tp, t))
		return -1;
	const cJSON *sb = get(v, "sandbox");
	key_path(kp, tp, "sandbox");
	if (sb && parse_sandbox(cx, sb, kp, &t->sandbox, &t->max_checkpoint_mb))
		return -1;
	return 0;
}

/* path resolved through the links that exist now: the longest existing ancestor by
 * realpath, the rest as written.  For comparing paths only. */
static char *real_or_same(const char *path)
{
	size_t n = strlen(path);
	char *head = strdup(path), *out = NULL;
	if (!head)
		return NULL;
	for (size_t cut = n; cut > 0; ) {
		head[cut] = 0;
		char *r = realpath(cut ? head : "/", NULL);
		if (r) {
			size_t rl = strlen(r);
			if ((out = malloc(rl + (n - cut) + 2)))
				snprintf(out, rl + (n - cut) + 2, "%s%s", strcmp(r, "/") == 0 && cut < n ? "" : r,
				         path + cut);
			free(r);
			break;
		}
		while (cut > 0 && path[cut - 1] != '/')
			cut--;
		while (cut > 1 && path[cut - 1] == '/')
			cut--;
		if (cut <= 1) {
			out = strdup(path);
			break;
		}
	}
	free(head);
	return out ? out : strdup(path);
}

/* inner lies strictly below outer, component-wise. */
static int strictly_under(const char *outer, const char *inner)
{
	size_t n = strlen(outer);
	if (n == 1)
		return inner[1] != 0;
	return strncmp(outer, inner, n) == 0 && inner[n] == '/';
}

/* A path some job could replace: inside a writePath (of any tool: one tool's job can swap what
 * the next job of another tool gets shown).  Every path the sandbox shows a job (readPaths,
 * writePaths, cwd, command[0]) must lie outside every writePath, or be that writePath. */
static int check_nesting(struct ctx *cx, const struct config *c)
{
	char kp[KEYPATH], wp[KEYPATH];
	for (size_t i = 0; i < c->n_tools; i++) {
		const struct tool_cfg *t = &c->tools[i];
		for (size_t k = 0; k < t->sandbox.n_write_paths; k++) {
			char *w = real_or_same(t->sandbox.write_paths[k]);
			if (!w)
				return oom(cx);
			snprintf(wp, sizeof wp, "tools[%zu].sandbox.writePaths[%zu]", i, k);
			for (size_t j = 0; j < c->n_tools; j++) {
				const struct tool_cfg *u = &c->tools[j];
				size_t nr = u->sandbox.n_read_paths, nw = u->sandbox.n_write_paths;
				for (size_t m = 0; m < nr + nw + 2; m++) {
					const char *p = m < nr ? u->sandbox.read_paths[m]
					              : m < nr + nw ? u->sandbox.write_paths[m - nr]
					              : m == nr + nw ? u->cwd : u->argv[0];
					if (!p)
						continue;
					char *r = real_or_same(p);
					int bad = r && (strictly_under(w, r) || strictly_under(t->sandbox.write_paths[k], p));
					free(r);
					if (!bad)
						continue;
					if (m < nr)
						snprintf(kp, sizeof kp, "tools[%zu].sandbox.readPaths[%zu]", j, m);
					else if (m < nr + nw)
						snprintf(kp, sizeof kp, "tools[%zu].sandbox.writePaths[%zu]", j, m - nr);
					else
						snprintf(kp, sizeof kp, "tools[%zu].%s", j, m == nr + nw ? "cwd" : "command[0]");
					fail(cx, kp, "%s lies inside %s (%s), where a job could replace it with a "
					     "symbolic link; use a path outside every writePath", p, wp,
					     t->sandbox.write_paths[k]);
					free(w);
					return -1;
				}
			}
			free(w);
		}
	}
	return 0;
}

/* Duplicate names are refused: tools/call dispatches by name, so a second tool of the same
 * name would be unreachable. */
static int parse_tools(struct ctx *cx, const cJSON *v, struct config *c)
{
	char g[64], tp[KEYPATH], kp[KEYPATH];
	if (!v)
		return fail(cx, "tools", "required (a non-empty array of tools)");
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
		return fail(cx, "tools", "must be a non-empty array (got %s)", got(v, g, sizeof g));
	size_t n = (size_t)cJSON_GetArraySize(v);
	if (!(c->tools = calloc(n, sizeof *c->tools)))
		return oom(cx);
	c->n_tools = n;
	size_t i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		index_path(tp, "tools", i);
		if (parse_tool(cx, e, tp, &c->tools[i]))
			return -1;
		for (size_t j = 0; j < i; j++) {
			if (strcmp(c->tools[j].name, c->tools[i].name) == 0) {
				key_path(kp, tp, "name");
				return fail(cx, kp, "duplicate tool name \"%s\" (also tools[%zu])",
				            c->tools[i].name, j);
			}
		}
		i++;
	}
	return check_nesting(cx, c);
}

/* ---- entry points ------------------------------------------------------------------------ */

/* Errors in JSON syntax point at a line and a column, the way an editor counts them. */
static void line_col(const char *text, size_t off, int *line, int *col)
{
	size_t bol = 0;
	*line = 1;
	for (size_t i = 0; i < off; i++)
		if (text[i] == '\n') {
			(*line)++;
			bol = i + 1;
		}
	/* Columns count characters, not UTF-8 bytes. */
	*col = 1 + (int)utf8_count(text + bol, off - bol);
}

/* The server defaults are set before parsing so every getter only overrides.  Trailing text
 * after the top-level value is refused (cJSON's require_null_terminated): a second object
 * pasted after the first must not be silently ignored. */
static int build(struct ctx *cx, const char *text, size_t len, struct config **out)
{
	static const char *const keys[] = { "server", "tools", NULL };
	struct config *c = NULL;
	cJSON *root = NULL;
	char *buf = NULL;
	int line, col;

	/* cJSON stops at a NUL; one inside the text would hide whatever follows it. */
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		line_col(text, (size_t)(nul - text), &line, &col);
		fail(cx, "", "line %d, column %d: NUL byte in the file", line, col);
		goto fail;
	}
	if (!(buf = malloc(len + 1)) || !(c = calloc(1, sizeof *c))) {
		oom(cx);
		goto fail;
	}
	memcpy(buf, text, len);
	buf[len] = '\0';
	const char *end = NULL;
	root = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1);
	if (!root) {
		size_t off = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
		line_col(buf, off, &line, &col);
		fail(cx, "", "JSON syntax error at line %d, column %d", line, col);
		goto fail;
	}

	c->server.max_concurrent = 4;
	c->server.max_queue = 1000;
	c->server.cancel_grace_seconds = 5;
	c->server.max_frame_bytes = FRAME_MAX_DEFAULT;
	c->server.log_max_bytes = 8L << 20;
	c->server.result_inline_bytes = 64L << 10;
	c->server.result_max_bytes = 16L << 20;
	c->server.artifact_hash_max_bytes = 1L << 30;
	c->server.max_arguments_bytes = 1L << 20;
	c->server.journal_segment_bytes = 64L << 20;
	c->server.compact_min_bytes = 8L << 20;
	if (!(c->path = strdup(cx->file)) || !(c->dir = strdup(cx->dir)) ||
	    !(c->server.name = strdup("forkpoint"))) {
		oom(cx);
		goto fail;
	}
	if (!cJSON_IsObject(root)) {
		fail(cx, "", "the top level must be a JSON object with \"server\" and \"tools\"");
		goto fail;
	}
	if (get(root, "mcpServers") && !get(root, "tools")) {
		/* The commonest first mistake: pointing --config at the MCP host's own file. */
		fail(cx, "mcpServers", "this is an MCP host's config file (the one that starts forkpoint), "
		     "not forkpoint's: --config wants a file with \"server\" and \"tools\" (docs/config.md)");
		goto fail;
	}
	if (check_keys(cx, root, "", keys) || parse_server(cx, get(root, "server"), &c->server) ||
	    parse_tools(cx, get(root, "tools"), c))
		goto fail;
	cJSON_Delete(root);
	free(buf);
	*out = c;
	return 0;
fail:
	cJSON_Delete(root);
	free(buf);
	config_free(c);
	return -1;
}

/* The base directory is made absolute once, here, so relative paths in the file mean the
 * same thing whatever the server's cwd becomes later. */
int config_parse(const char *text, size_t len, const char *base_dir,
                 struct config **out, char *err, size_t errlen)
{
	struct ctx cx = { .err = err, .errlen = errlen, .file = "" };
	char *dir = realpath(base_dir ? base_dir : ".", NULL);
	if (!dir)
		return fail(&cx, "", "base directory %s: %s", base_dir ? base_dir : ".", strerror(errno));
	cx.dir = dir;
	int rc = build(&cx, text, len, out);
	free(dir);
	return rc;
}

/* The whole file, refusing anything that is not a regular file of sane size. */
static int read_file(const char *path, char **text, size_t *len)
{
	/* O_NONBLOCK: a FIFO must not hang the open; it is refused below like any non-file. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), rc = 0;
	char *buf = NULL;
	size_t have = 0;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		rc = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		goto fail;
	}
	if (st.st_size > CONFIG_MAX_BYTES) {
		rc = -EFBIG;
		goto fail;
	}
	size_t cap = (size_t)st.st_size + 1;   /* +1 also notices a file that grew meanwhile */
	if (!(buf = malloc(cap))) {
		rc = -ENOMEM;
		goto fail;
	}
	ssize_t n = io_read_upto(fd, buf, cap);
	if (n < 0) {
		rc = (int)n;
		goto fail;
	}
	have = (size_t)n;
	if (have == cap) {
		rc = -EFBIG;   /* changed under us; refuse rather than parse a torn copy */
		goto fail;
	}
	close(fd);
	*text = buf;
	*len = have;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

/* The folder is resolved through symlinks, the file name is kept: a config symlinked into
 * /etc/forkpoint/ resolves its relative paths against /etc/forkpoint/'s real location. */
int config_load(const char *path, struct config **out, char *err, size_t errlen)
{
	struct ctx cx = { .err = err, .errlen = errlen, .file = path, .dir = "" };
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	char *folder = NULL, *dir = NULL, *abs = NULL, *text = NULL;
	size_t len = 0;
	int rc = -1;

	if (!(folder = slash ? strndup(path, (size_t)(slash - path)) : strdup("."))) {
		oom(&cx);
		goto fail;
	}
	if (!(dir = realpath(*folder ? folder : "/", NULL))) {
		fail(&cx, "", "%s", strerror(errno));
		goto fail;
	}
	if (asprintf(&abs, "%s/%s", strcmp(dir, "/") ? dir : "", base) < 0) {
		abs = NULL;
		oom(&cx);
		goto fail;
	}
	cx.file = abs;
	cx.dir = dir;
	int e = read_file(abs, &text, &len);
	if (e) {
		fail(&cx, "", "%s", e == -EINVAL ? "not a regular file" :
		     e == -EFBIG ? "too large (or changed while being read)" : strerror(-e));
		goto fail;
	}
	rc = build(&cx, text, len, out);
fail:
	free(text);
	free(abs);
	free(dir);
	free(folder);
	return rc;
}

static void tool_free(struct tool_cfg *t)
{
	free(t->name);
	free(t->title);
	free(t->description);
	cJSON_Delete(t->input_schema);
	schema_free(t->input_check);
	cJSON_Delete(t->output_schema);
	cJSON_Delete(t->annotations);
	free_strv(t->argv, t->argc);
	free(t->cwd);
	free_strv(t->sandbox.read_paths, t->sandbox.n_read_paths);
	free_strv(t->sandbox.write_paths, t->sandbox.n_write_paths);
	free_strv(t->sandbox.require, t->sandbox.n_require);
}

void config_free(struct config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_tools; i++)
		tool_free(&c->tools[i]);
	free(c->tools);
	free(c->server.name);
	free_strv(c->server.file_roots, c->server.n_file_roots);
	free(c->path);
	free(c->dir);
	free(c);
}

/* A linear scan: configs hold a handful of tools. */
const struct tool_cfg *config_tool(const struct config *c, const char *name)
{
	for (size_t i = 0; i < c->n_tools; i++)
		if (strcmp(c->tools[i].name, name) == 0)
			return &c->tools[i];
	return NULL;
}
