/* tests/bench/echo.c — see echo.h. */
#include "echo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MARKER "\"id\":4242424242"
#define MARKER_ID 4242424242.0

int echo_write_template(const cJSON *resp, const char *path)
{
	cJSON *copy = cJSON_Duplicate(resp, 1);
	if (!copy)
		return -ENOMEM;
	int rc = 0;
	char *text = NULL;
	cJSON *id = cJSON_CreateNumber(MARKER_ID);
	if (!id || !cJSON_ReplaceItemInObjectCaseSensitive(copy, "id", id)) {
		cJSON_Delete(id);   /* not in the message: still ours */
		rc = id ? -EINVAL : -ENOMEM;
		goto fail;
	}
	if (!(text = cJSON_PrintUnformatted(copy)) || !strstr(text, MARKER)) {
		rc = text ? -EINVAL : -ENOMEM;
		goto fail;
	}
	FILE *f = fopen(path, "we");
	if (!f) {
		rc = -errno;
		goto fail;
	}
	fputs(text, f);
	if (fclose(f) != 0)
		rc = -errno;
fail:
	free(text);
	cJSON_Delete(copy);
	return rc;
}

static int write_full(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The id of one request line: the digits after its first "id": (mcpc writes it so). */
static size_t line_id(const char *line, size_t len, const char **digits)
{
	const char *p = memmem(line, len, "\"id\":", 5);
	size_t n = 0;
	if (!p)
		return 0;
	p += 5;
	while (p + n < line + len && p[n] >= '0' && p[n] <= '9')
		n++;
	*digits = p;
	return n;
}

/* Answers to every whole line in in[0..*len), appended to out; the rest moves to the front. */
static int answer_lines(char *in, size_t *len, const char *pre, size_t npre, const char *post, size_t npost,
                        char **out, size_t *nout, size_t *cap)
{
	size_t off = 0;
	for (char *nl; (nl = memchr(in + off, '\n', *len - off)); off = (size_t)(nl - in) + 1) {
		/* A line without a numeric id (none of mcpc's) is answered with a null id. */
		const char *digits = "null";
		size_t nd = line_id(in + off, (size_t)(nl - in) - off, &digits);
		if (nd == 0) {
			digits = "null";
			nd = 4;
		}
		size_t need = npre + 5 + nd + npost + 1;
		if (*nout + need > *cap) {
			size_t c = (*nout + need) * 2;
			char *o = realloc(*out, c);
			if (!o)
				return -ENOMEM;
			*out = o;
			*cap = c;
		}
		char *w = *out + *nout;
		memcpy(w, pre, npre), w += npre;
		memcpy(w, "\"id\":", 5), w += 5;
		memcpy(w, digits, nd), w += nd;
		memcpy(w, post, npost), w += npost;
		*w++ = '\n';
		*nout = (size_t)(w - *out);
	}
	memmove(in, in + off, *len - off);
	*len -= off;
	return 0;
}

/* Why a loop: requests arrive pipelined, so every read may hold several lines, and all their
 * answers leave in one write, as a server that batches its output would send them. */
int echo_main(const char *template_path)
{
	char *tpl = NULL, *in = NULL, *out = NULL;
	size_t tlen = 0, len = 0, cap = 1 << 20, ocap = 0;
	int status = 1;
	FILE *f = fopen(template_path, "re");
	if (!f || getdelim(&tpl, &tlen, 0, f) < 0) {
		fprintf(stderr, "echo: %s: %s\n", template_path, strerror(errno));
		goto fail;
	}
	char *m = strstr(tpl, MARKER);
	if (!m || !(in = malloc(cap))) {
		fprintf(stderr, "echo: %s: no id marker, or out of memory\n", template_path);
		goto fail;
	}
	const char *post = m + strlen(MARKER);
	for (;;) {
		if (len == cap) {
			fprintf(stderr, "echo: a request line over %zu bytes\n", cap);
			goto fail;
		}
		ssize_t got = read(0, in + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			status = got < 0;
			break;
		}
		len += (size_t)got;
		size_t nout = 0;
		if (answer_lines(in, &len, tpl, (size_t)(m - tpl), post, strlen(post), &out, &nout, &ocap) < 0 ||
		    write_full(1, out, nout) < 0)
			goto fail;
	}
fail:
	if (f)
		fclose(f);
	free(tpl);
	free(in);
	free(out);
	return status;
}
