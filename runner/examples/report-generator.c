/* runner/examples/report-generator.c — the demo job: writes a report section by section,
 * reporting progress, checkpointing after every section, resuming from the last checkpoint,
 * optionally asking whether to add an appendix, and honouring cancellation.
 *
 * Arguments (JSON): topic (string, required), sections (int, default 3), delayMs (int,
 * default 2000: time per section), ask (bool: ask about an appendix after section 1),
 * failAt (int: fail on reaching that section; for tests).  `--sections N` and `--topic T`
 * on the command line override the arguments.  Checkpoint: {"done":N,"text":[...],"appendix":bool|null}. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* asprintf, nanosleep: built alone, outside the project's flags */
#endif
#include "forkpoint.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEPS_PER_SECTION 10
#define MAX_SECTIONS 1000

struct report {
	const char *topic;
	int sections;
	long delay_ms;
	int ask;
	int fail_at;
	int done;            /* sections written */
	int resumed_from;    /* sections restored from a checkpoint */
	int appendix;        /* -1 undecided, 0 no, 1 yes */
	cJSON *text;         /* array of section texts */
};

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static long json_int(const cJSON *obj, const char *key, long def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!cJSON_IsNumber(v))
		return def;
	/* Clamp before converting: an out-of-range double to long is undefined. */
	if (v->valuedouble > 1e9)
		return 1000000000L;
	if (v->valuedouble < -1e9)
		return -1000000000L;
	return (long)v->valuedouble;
}

/* Exit after telling the supervisor why; the status matters only to a plain runner. */
static int finish_fail(fp_job *job, const char *code, const char *msg, const char *hint)
{
	fprintf(stderr, "report-generator: %s\n", msg);
	int rc = fp_fail(job, code, msg, 0, hint);
	if (rc < 0)
		fprintf(stderr, "report-generator: could not report the failure: %s\n", strerror(-rc));
	return 1;
}

static int cancelled(fp_job *job, const struct report *r)
{
	char msg[128];
	snprintf(msg, sizeof msg, "cancelled during section %d of %d%s%s", r->done + 1,
		 r->sections, *fp_cancel_reason(job) ? ": " : "", fp_cancel_reason(job));
	return finish_fail(job, "cancelled", msg, NULL);
}

/* Continue from a checkpoint if there is a usable one; a bad one means starting over.  Only
 * -ENOENT means "none": any other error (the supervisor is gone) is returned, and the job
 * stops instead of redoing sections that another attempt resumes. */
static int restore(fp_job *job, struct report *r)
{
	const void *data;
	size_t len;
	int rc = fp_restore(job, &data, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	cJSON *ck = cJSON_ParseWithLength(data, len);
	const cJSON *text = cJSON_GetObjectItemCaseSensitive(ck, "text");
	long done = json_int(ck, "done", -1);
	if (!cJSON_IsArray(text) || done < 0 || done != cJSON_GetArraySize(text)) {
		fp_log(job, "warning", "checkpoint unreadable, starting over");
		cJSON_Delete(ck);
		return 0;
	}
	const cJSON *app = cJSON_GetObjectItemCaseSensitive(ck, "appendix");
	if (cJSON_IsBool(app))
		r->appendix = cJSON_IsTrue(app);
	/* The argument may have shrunk since the checkpoint: never claim more than asked. */
	while (cJSON_GetArraySize(text) > r->sections)
		cJSON_DeleteItemFromArray((cJSON *)text, cJSON_GetArraySize(text) - 1);
	cJSON_Delete(r->text);
	r->text = cJSON_DetachItemViaPointer(ck, (cJSON *)text);
	r->done = cJSON_GetArraySize(r->text);
	r->resumed_from = r->done;
	cJSON_Delete(ck);
	fprintf(stderr, "resumed at section %d of %d\n", r->done + 1, r->sections);
	fp_log(job, "info", "resumed at section %d of %d", r->done + 1, r->sections);
	return 0;
}

static int save(fp_job *job, const struct report *r)
{
	cJSON *ck = cJSON_CreateObject();
	int rc = -ENOMEM;
	char *s = NULL;
	if (!ck || !cJSON_AddNumberToObject(ck, "done", r->done) ||
	    !cJSON_AddItemReferenceToObject(ck, "text", r->text))
		goto out;
	if (!(r->appendix < 0 ? cJSON_AddNullToObject(ck, "appendix")
			      : cJSON_AddBoolToObject(ck, "appendix", r->appendix)))
		goto out;
	if (!(s = cJSON_PrintUnformatted(ck)))
		goto out;
	rc = fp_checkpoint(job, s, strlen(s));
out:
	free(s);
	cJSON_Delete(ck);
	return rc;
}

static char *section_text(const struct report *r, int n)
{
	static const char *const angles[] = {
		"background and context", "current state", "key findings", "risks and open questions",
		"recommendations", "outlook",
	};
	char *s = NULL;
	const char *angle = angles[(n - 1) % (int)(sizeof angles / sizeof *angles)];
	if (asprintf(&s, "%d. %s: %s. This section looks at the %s of %s, summarises what is "
		     "known so far and notes what remains to be checked.",
		     n, r->topic, angle, angle, r->topic) < 0)
		return NULL;
	return s;
}

static int count_words(const char *s)
{
	int n = 0, in = 0;
	for (; *s; s++) {
		int sp = *s == ' ' || *s == '\n' || *s == '\t';
		if (!sp && !in)
			n++;
		in = !sp;
	}
	return n;
}

static int send_result(fp_job *job, const struct report *r)
{
	size_t cap = 256;
	int rc = -ENOMEM;
	char *report = NULL, *json = NULL;
	cJSON *res = NULL;

	for (int i = 0; i < cJSON_GetArraySize(r->text); i++)
		cap += strlen(cJSON_GetArrayItem(r->text, i)->valuestring) + 2;
	cap += strlen(r->topic) * 2 + 128;
	if (!(report = malloc(cap)))
		goto out;
	size_t off = (size_t)snprintf(report, cap, "Report: %s", r->topic);
	for (int i = 0; i < cJSON_GetArraySize(r->text); i++)
		off += (size_t)snprintf(report + off, cap - off, "\n\n%s",
					cJSON_GetArrayItem(r->text, i)->valuestring);
	if (r->appendix == 1)
		snprintf(report + off, cap - off, "\n\nAppendix: sources and notes on %s.", r->topic);

	res = cJSON_CreateObject();
	if (!res || !cJSON_AddStringToObject(res, "topic", r->topic) ||
	    !cJSON_AddNumberToObject(res, "sections", r->sections) ||
	    !cJSON_AddNumberToObject(res, "words", count_words(report)) ||
	    !cJSON_AddNumberToObject(res, "resumedFrom", r->resumed_from) ||
	    !cJSON_AddBoolToObject(res, "appendix", r->appendix == 1) ||
	    !cJSON_AddStringToObject(res, "report", report))
		goto out;
	if (!(json = cJSON_PrintUnformatted(res)))
		goto out;
	rc = fp_result_json(job, json);
	/* Run by hand, the result would otherwise go nowhere. */
	if (rc == 0 && fp_detached(job))
		printf("%s\n", json);
out:
	free(report);
	free(json);
	cJSON_Delete(res);
	return rc;
}

static int run(fp_job *job, struct report *r)
{
	int rc = restore(job, r);
	if (rc < 0) {
		fprintf(stderr, "report-generator: no start data (%s): stopping\n", strerror(-rc));
		return 1;
	}
	while (r->done < r->sections) {
		int n = r->done + 1;
		if (r->fail_at > 0 && n == r->fail_at) {
			char msg[96];
			snprintf(msg, sizeof msg, "failed at section %d on request (failAt)", n);
			return finish_fail(job, "job_failed", msg, "Run it again without failAt.");
		}
		for (int step = 1; step <= STEPS_PER_SECTION; step++) {
			if (fp_cancelled(job))
				return cancelled(job, r);
			sleep_ms(r->delay_ms / STEPS_PER_SECTION);
			double fraction = ((double)(n - 1) + (double)step / STEPS_PER_SECTION) /
					  r->sections;
			fp_progress(job, fraction, "Section %d/%d: writing (%d%%)", n, r->sections,
				    step * 100 / STEPS_PER_SECTION);
		}
		char *text = section_text(r, n);
		if (!text || !cJSON_AddItemToArray(r->text, cJSON_CreateString(text))) {
			free(text);
			return finish_fail(job, "job_failed", "out of memory", NULL);
		}
		free(text);
		r->done = n;
		printf("section %d/%d written\n", n, r->sections);
		fflush(stdout);

		if (n == 1 && r->ask && r->appendix < 0) {
			static const char *const yes_no[] = { "yes", "no", NULL };
			char *answer = NULL;
			rc = fp_ask(job, "include-appendix", "Include an appendix?", yes_no, &answer);
			if (rc == -ECANCELED)
				return cancelled(job, r);
			if (rc < 0)
				return finish_fail(job, "job_failed", "could not ask about the appendix", NULL);
			r->appendix = strcmp(answer, "yes") == 0;
			free(answer);
		}
		rc = save(job, r);
		if (rc == -ECANCELED)
			return cancelled(job, r);
		if (rc < 0) {
			char msg[96];
			snprintf(msg, sizeof msg, "checkpoint failed: %s", strerror(-rc));
			return finish_fail(job, "job_failed", msg, NULL);
		}
	}
	rc = send_result(job, r);
	if (rc < 0) {
		fprintf(stderr, "report-generator: sending the result failed: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct report r = { .appendix = -1 };
	long sections_opt = -1;
	const char *topic_opt = NULL;
	int status = 1;
	cJSON *args = NULL;

	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		int is_topic = 0;
		if ((strcmp(argv[i], "--sections") == 0 || strcmp(argv[i], "--topic") == 0) &&
		    i + 1 < argc) {
			is_topic = argv[i][2] == 't';
			v = argv[++i];
		} else if (strncmp(argv[i], "--sections=", 11) == 0) {
			v = argv[i] + 11;
		} else if (strncmp(argv[i], "--topic=", 8) == 0) {
			is_topic = 1;
			v = argv[i] + 8;
		} else {
			fprintf(stderr, "usage: report-generator [--sections N] [--topic TOPIC]\n");
			return 2;
		}
		if (is_topic) {
			topic_opt = v;
			continue;
		}
		char *end;
		sections_opt = strtol(v, &end, 10);
		if (end == v || *end || sections_opt < 1 || sections_opt > MAX_SECTIONS) {
			fprintf(stderr, "report-generator: --sections must be 1..%d\n", MAX_SECTIONS);
			return 2;
		}
	}

	fp_job *job = fp_open();
	if (!job) {
		fprintf(stderr, "report-generator: cannot start: %s\n", strerror(errno));
		return 1;
	}
	args = cJSON_Parse(fp_args_json(job));
	const cJSON *topic = cJSON_GetObjectItemCaseSensitive(args, "topic");
	if (topic_opt && *topic_opt)
		r.topic = topic_opt;
	else if (cJSON_IsString(topic) && *topic->valuestring)
		r.topic = topic->valuestring;
	if (!r.topic) {
		status = finish_fail(job, "invalid_arguments", "the argument 'topic' (a string) is required",
				     "Pass {\"topic\": \"...\"}.");
		goto out;
	}
	long sections = sections_opt > 0 ? sections_opt : json_int(args, "sections", 3);
	r.delay_ms = json_int(args, "delayMs", 2000);
	r.fail_at = (int)json_int(args, "failAt", 0);
	r.ask = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "ask"));
	if (sections < 1 || sections > MAX_SECTIONS || r.delay_ms < 0 || r.delay_ms > 3600000) {
		status = finish_fail(job, "invalid_arguments",
				     "sections must be 1..1000 and delayMs 0..3600000", NULL);
		goto out;
	}
	r.sections = (int)sections;
	if (!(r.text = cJSON_CreateArray())) {
		status = finish_fail(job, "job_failed", "out of memory", NULL);
		goto out;
	}
	status = run(job, &r);
out:
	cJSON_Delete(r.text);
	cJSON_Delete(args);
	fp_close(job);
	return status;
}
