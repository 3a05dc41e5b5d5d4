/* tests/bench/jgen.c — see jgen.h. */
#include "jgen.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <msgpack.h>

#include "proto/frame.h"
#include "state/journal.h"
#include "supervisor/core/persist.h"

#define COMMIT_EVERY 4096   /* records per group commit while generating */

struct gen {
	struct journal *j;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	unsigned pending;
};

void jgen_task_id(uint64_t n, char out[33])
{
	/* splitmix64 twice: ids spread over the hash table as random ones do. */
	uint64_t h[2];
	for (int i = 0; i < 2; i++) {
		uint64_t z = (n * 2 + (uint64_t)i + 1) * 0x9e3779b97f4a7c15ull;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		h[i] = z ^ (z >> 31);
	}
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)h[0], (unsigned long long)h[1]);
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int no_replay(void *arg, uint8_t type, const void *payload, size_t len, char *err, size_t errlen)
{
	(void)arg, (void)type, (void)payload, (void)len, (void)err, (void)errlen;
	return 0;
}

static void no_log(void *arg, const char *msg)
{
	(void)arg, (void)msg;
}

static int gen_open(struct gen *g, const char *state_dir, char *err, size_t errlen)
{
	struct journal_opts o = { 0 };
	memset(g, 0, sizeof *g);
	msgpack_sbuffer_init(&g->sb);
	msgpack_packer_init(&g->pk, &g->sb, msgpack_sbuffer_write);
	int rc = journal_open(state_dir, &o, no_replay, no_log, NULL, &g->j, err, errlen);
	if (rc < 0)
		msgpack_sbuffer_destroy(&g->sb);
	return rc;
}

static int gen_close(struct gen *g, int rc, char *err, size_t errlen)
{
	if (rc == 0 && (rc = journal_commit(g->j)) < 0)
		snprintf(err, errlen, "journal commit: %s", strerror(-rc));
	journal_close(g->j);
	msgpack_sbuffer_destroy(&g->sb);
	return rc;
}

static void rec_begin(struct gen *g, size_t nkeys)
{
	msgpack_sbuffer_clear(&g->sb);
	msgpack_pack_map(&g->pk, nkeys);
}

static int rec_end(struct gen *g, uint8_t type, char *err, size_t errlen)
{
	int rc = journal_append(g->j, type, g->sb.data, g->sb.size);
	if (rc == 0 && ++g->pending >= COMMIT_EVERY) {
		g->pending = 0;
		rc = journal_commit(g->j);
	}
	if (rc < 0)
		snprintf(err, errlen, "journal append: %s", strerror(-rc));
	return rc;
}

static int put_create(struct gen *g, const char *id, const char *tool, const char *args, int64_t at,
                      char *err, size_t errlen)
{
	rec_begin(g, 4);
	frame_pack_kv_str(&g->pk, "id", id);
	frame_pack_kv_str(&g->pk, "tool", tool);
	frame_pack_kv_str(&g->pk, "args", args);
	frame_pack_kv_int(&g->pk, "at", at);
	return rec_end(g, REC_CREATE, err, errlen);
}

static int put_start(struct gen *g, const char *id, int64_t at, char *err, size_t errlen)
{
	rec_begin(g, 3);
	frame_pack_kv_str(&g->pk, "id", id);
	frame_pack_kv_int(&g->pk, "attempt", 1);
	frame_pack_kv_int(&g->pk, "at", at);
	return rec_end(g, REC_START, err, errlen);
}

static int put_progress(struct gen *g, const char *id, const char *msg, double fraction, int64_t at,
                        char *err, size_t errlen)
{
	rec_begin(g, 4);
	frame_pack_kv_str(&g->pk, "id", id);
	frame_pack_kv_str(&g->pk, "msg", msg);
	frame_pack_kv_double(&g->pk, "fraction", fraction);
	frame_pack_kv_int(&g->pk, "at", at);
	return rec_end(g, REC_PROGRESS, err, errlen);
}

static int put_finish(struct gen *g, const char *id, const char *result, int64_t at, int64_t expires,
                      char *err, size_t errlen)
{
	rec_begin(g, 7);
	frame_pack_kv_str(&g->pk, "id", id);
	frame_pack_kv_str(&g->pk, "status", "completed");
	frame_pack_kv_str(&g->pk, "result", result);
	frame_pack_kv_int(&g->pk, "mcp", 0);
	frame_pack_kv_str(&g->pk, "error", "null");
	frame_pack_kv_int(&g->pk, "at", at);
	frame_pack_kv_int(&g->pk, "expires", expires);
	return rec_end(g, REC_FINISH, err, errlen);
}

int jgen_progress_history(const char *state_dir, const char *tool, unsigned tasks, unsigned total,
                          char *err, size_t errlen)
{
	struct gen g;
	char id[33], msg[64];
	int rc = gen_open(&g, state_dir, err, errlen);
	if (rc < 0)
		return rc;
	int64_t at = wall_ms() - 3600000;
	unsigned left = total;
	for (unsigned t = 0; t < tasks && rc == 0; t++) {
		/* Spread the progress records evenly, the remainder on the first tasks. */
		unsigned share = (total - tasks) / tasks + (t < (total - tasks) % tasks);
		jgen_task_id(t, id);
		rc = put_create(&g, id, tool, "{\"topic\":\"benchmark history\",\"sections\":8}", at++, err, errlen);
		left--;
		for (unsigned k = 0; k < share && rc == 0; k++, left--) {
			snprintf(msg, sizeof msg, "section %u of %u written", k + 1, share);
			rc = put_progress(&g, id, msg, (double)(k + 1) / (double)(share + 1), at, err, errlen);
		}
	}
	if (rc == 0 && left != 0) {
		snprintf(err, errlen, "internal: %u records left over", left);
		rc = -EINVAL;
	}
	return gen_close(&g, rc, err, errlen);
}

int jgen_restart_state(const char *state_dir, const char *done_tool, unsigned finished,
                       const char *queued_tool, const char *queued_args, unsigned queued,
                       char *err, size_t errlen)
{
	struct gen g;
	char id[33];
	int rc = gen_open(&g, state_dir, err, errlen);
	if (rc < 0)
		return rc;
	int64_t at = wall_ms() - 600000;
	unsigned n = finished + queued;
	/* Evenly interleaved, so finished and waiting tasks are mixed in the list as in real use. */
	for (unsigned i = 0; i < n && rc == 0; i++) {
		jgen_task_id(1000000 + i, id);
		int done = (uint64_t)(i + 1) * finished / n > (uint64_t)i * finished / n;
		if (done) {
			if ((rc = put_create(&g, id, done_tool, "{\"n\":0}", at, err, errlen)) == 0 &&
			    (rc = put_start(&g, id, at + 1, err, errlen)) == 0)
				rc = put_finish(&g, id, "{\"lines\":0}", at + 2, at + 86400000, err, errlen);
		} else {
			rc = put_create(&g, id, queued_tool, queued_args, at, err, errlen);
		}
		at += 3;
	}
	return gen_close(&g, rc, err, errlen);
}
