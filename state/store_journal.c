/* state/store_journal.c — the journal backend of the task store (store.h): each record is one
 * msgpack map in a journal record (state/journal.h) whose type byte is the record type.
 *
 * The encoding is the journal format forkpoint has always written (FPJRNL02 payloads): the
 * keys, their order and their types are fixed, because journals written by earlier versions
 * must replay and journals written now must replay in them.  JSON values travel as JSON text
 * (a NULL text is written "null"), so their depth never meets the msgpack nesting limit. */
#include "state/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/frame.h"
#include "state/journal.h"

struct store_journal {
	struct store base;
	char *dir;
	struct journal_opts opts;
	struct journal *j;
};

/* ---- encoding ------------------------------------------------------------------------------ */

/* The key/value writers.  kv_str writes NULL as "" and kv_json writes NULL as "null": task
 * records have always carried a string in these fields, never nil, and the payloads must
 * stay byte-identical to what earlier versions wrote (FPJRNL02).  Keep both substitutions. */
static void kv_str(struct frame_map *r, const char *k, const char *v)
{
	frame_pack_kv_str(&r->pk, k, v ? v : "");
}

static void kv_int(struct frame_map *r, const char *k, int64_t v)
{
	frame_pack_kv_int(&r->pk, k, v);
}

static void kv_json(struct frame_map *r, const char *k, const char *text)
{
	frame_pack_kv_str(&r->pk, k, text ? text : "null");
}

/* Checkpoint bytes go in as msgpack bin, never as a string: they are the job's opaque state
 * and need not be UTF-8. */
static void kv_bin(struct frame_map *r, const char *k, const void *p, size_t n)
{
	frame_pack_str(&r->pk, k);
	msgpack_pack_bin(&r->pk, n);
	msgpack_pack_bin_body(&r->pk, p, n);
}

static void pack_nil_kv(struct frame_map *r, const char *k)
{
	frame_pack_str(&r->pk, k);
	msgpack_pack_nil(&r->pk);
}

/* The result fields of FINISH and snapshot records: 3 pairs.  The pair count is fixed whatever
 * the result holds (nil stands in for the absent ones), because the callers declare their
 * map sizes up front: a result that wrote fewer pairs would leave a map short of its count
 * and make the whole record undecodable. */
static void kv_result(struct frame_map *r, const struct store_result *res)
{
	if (res->blob) {
		kv_str(r, "resultBlob", res->blob);
		kv_int(r, "resultBytes", res->bytes);
		kv_str(r, "resultSummary", res->summary ? res->summary : "a JSON value");
	} else {
		kv_str(r, "result", res->text ? res->text : "null");
		pack_nil_kv(r, "resultBytes");
		pack_nil_kv(r, "resultSummary");
	}
}

/* A snapshot of one task: 26 pairs, in the order earlier versions wrote them.  The count in
 * frame_map_begin must match the pairs written below exactly (question, answers and
 * checkpoint are one pair each whatever their shape).  The checkpoint is a string when it
 * names a blob and bin when inline: the decoder (get_ckpt) tells the two apart by msgpack
 * type, so the same key serves both. */
static void enc_snap(struct frame_map *r, const struct store_rec *rec)
{
	const struct store_task *s = &rec->u.snap;
	frame_map_begin(r, 26);
	kv_json(r, "sandbox", s->sandbox);
	kv_json(r, "artifacts", s->artifacts);
	kv_str(r, "id", rec->task_id);
	kv_str(r, "tool", s->tool);
	kv_json(r, "args", s->args);
	kv_str(r, "status", s->status);
	kv_int(r, "attempt", s->attempt);
	kv_int(r, "retries", s->retries);
	kv_int(r, "running", s->running);
	kv_int(r, "notBefore", s->not_before);
	kv_int(r, "created", s->created);
	kv_int(r, "updated", s->updated);
	kv_int(r, "started", s->started);
	kv_int(r, "finished", s->finished);
	kv_int(r, "expires", s->expires);
	kv_str(r, "msg", s->msg);
	frame_pack_kv_double(&r->pk, "fraction", s->fraction);
	frame_pack_str(&r->pk, "question");
	if (s->has_question) {
		msgpack_pack_map(&r->pk, 3);
		kv_str(r, "qid", s->qid);
		kv_str(r, "prompt", s->prompt);
		kv_json(r, "choices", s->choices);
	} else {
		msgpack_pack_nil(&r->pk);
	}
	frame_pack_str(&r->pk, "answers");
	msgpack_pack_array(&r->pk, s->nanswers);
	for (size_t i = 0; i < s->nanswers; i++) {
		msgpack_pack_map(&r->pk, 2);
		kv_str(r, "qid", s->answers[i].qid);
		kv_json(r, "response", s->answers[i].response);
	}
	frame_pack_str(&r->pk, "checkpoint");
	if (s->ckpt.blob) {
		frame_pack_str(&r->pk, s->ckpt.blob);
	} else if (s->ckpt.has_data) {
		msgpack_pack_bin(&r->pk, s->ckpt.len);
		msgpack_pack_bin_body(&r->pk, s->ckpt.data, s->ckpt.len);
	} else {
		msgpack_pack_nil(&r->pk);
	}
	kv_int(r, "seq", s->seq);
	kv_result(r, &s->result);
	kv_int(r, "mcp", s->result.mcp);
	kv_json(r, "error", s->error);
}

/* Why one function per group rather than per type: each case is a handful of pairs in a fixed
 * order, and seeing them side by side is what keeps the format stable.  -EINVAL for a type
 * this backend has no encoding for. */
static int encode(const struct store_rec *rec, struct frame_map *r)
{
	const char *id = rec->task_id;
	switch (rec->type) {
	case STORE_REC_CREATE:
		frame_map_begin(r, 4);
		kv_str(r, "id", id);
		kv_str(r, "tool", rec->u.create.tool);
		kv_json(r, "args", rec->u.create.args);
		kv_int(r, "at", rec->at);
		return 0;
	case STORE_REC_START:
		frame_map_begin(r, 4);
		kv_str(r, "id", id);
		kv_int(r, "attempt", rec->u.start.attempt);
		kv_int(r, "at", rec->at);
		kv_json(r, "sandbox", rec->u.start.sandbox);
		return 0;
	case STORE_REC_PROGRESS:
		frame_map_begin(r, 4);
		kv_str(r, "id", id);
		kv_str(r, "msg", rec->u.progress.msg);
		frame_pack_kv_double(&r->pk, "fraction", rec->u.progress.fraction);
		kv_int(r, "at", rec->at);
		return 0;
	case STORE_REC_CHECKPOINT:
		frame_map_begin(r, 4);
		kv_str(r, "id", id);
		kv_int(r, "seq", rec->u.checkpoint.seq);
		if (rec->u.checkpoint.ckpt.blob)
			kv_str(r, "blob", rec->u.checkpoint.ckpt.blob);
		else
			kv_bin(r, "data", rec->u.checkpoint.ckpt.data, rec->u.checkpoint.ckpt.len);
		kv_int(r, "at", rec->at);
		return 0;
	case STORE_REC_ASK:
		frame_map_begin(r, 5);
		kv_str(r, "id", id);
		kv_str(r, "qid", rec->u.ask.qid);
		kv_str(r, "prompt", rec->u.ask.prompt);
		kv_json(r, "choices", rec->u.ask.choices);
		kv_int(r, "at", rec->at);
		return 0;
	case STORE_REC_ANSWER:
		frame_map_begin(r, 4);
		kv_str(r, "id", id);
		kv_str(r, "qid", rec->u.answer.qid);
		kv_json(r, "response", rec->u.answer.response);
		kv_int(r, "at", rec->at);
		return 0;
	case STORE_REC_FINISH:
		frame_map_begin(r, 10);
		kv_str(r, "id", id);
		kv_str(r, "status", rec->u.finish.status);
		kv_json(r, "artifacts", rec->u.finish.artifacts);
		kv_result(r, &rec->u.finish.result);
		kv_int(r, "mcp", rec->u.finish.result.mcp);
		kv_json(r, "error", rec->u.finish.error);
		kv_int(r, "at", rec->at);
		kv_int(r, "expires", rec->u.finish.expires);
		return 0;
	case STORE_REC_RETRY:
		frame_map_begin(r, 5);
		kv_str(r, "id", id);
		kv_int(r, "retries", rec->u.retry.retries);
		kv_int(r, "notBefore", rec->u.retry.not_before);
		kv_str(r, "msg", rec->u.retry.msg);
		kv_int(r, "at", rec->at);
		return 0;
	case STORE_REC_EXPIRE:
	case STORE_REC_SNAP_TOMB:
		frame_map_begin(r, 2);
		kv_str(r, "id", id);
		kv_int(r, "until", rec->u.expire.until);
		return 0;
	case STORE_REC_SNAP_TASK:
		enc_snap(r, rec);
		return 0;
	default:
		return -EINVAL;
	}
}

/* ---- file transfer records: the keys transfer.c has always written, in its order ---------- */

static void kv_s(struct frame_map *r, const char *k, const char *v)
{
	frame_pack_kv_str(&r->pk, k, v);   /* NULL: nil, as the records have always had it */
}

/* The 12 pairs X_OPEN and X_SNAP share; both callers count them in their map size, so a
 * field added here without changing those counts would corrupt every transfer record. */
static void enc_open_fields(struct frame_map *r, const struct store_xfer *x)
{
	kv_s(r, "h", x->h);
	kv_s(r, "dir", x->dir);
	kv_s(r, "path", x->path);
	kv_int(r, "size", x->size);
	kv_s(r, "want", x->want);
	kv_int(r, "ow", x->ow);
	kv_int(r, "at", x->at);
	kv_int(r, "dev", x->id.dev);
	kv_int(r, "ino", x->id.ino);
	kv_int(r, "fsid", x->id.fsid);
	kv_s(r, "fh", x->id.fh);
	kv_s(r, "sha", x->sha);
}

/* The 5 pairs of a publish intent (X_INTENT, and X_SNAP when has_intent). */
static void enc_intent(struct frame_map *r, const struct store_xfer *x)
{
	kv_int(r, "pdev", x->pub.dev);
	kv_int(r, "pino", x->pub.ino);
	kv_int(r, "pfsid", x->pub.fsid);
	kv_s(r, "pfh", x->pub.fh);
	kv_s(r, "psha", x->psha);
}

/* Why a switch of fixed key lists: as for task records, the format is the keys in this order. */
static int encode_xfer(const struct store_rec *rec, struct frame_map *r)
{
	const struct store_xfer *x = &rec->u.xfer;
	switch (rec->type) {
	case STORE_REC_X_OPEN:
		frame_map_begin(r, 12);
		enc_open_fields(r, x);
		return 0;
	case STORE_REC_X_INTENT:
		frame_map_begin(r, 6);
		kv_s(r, "h", x->h);
		enc_intent(r, x);
		return 0;
	case STORE_REC_X_CHUNK:
		frame_map_begin(r, 4);
		kv_s(r, "h", x->h);
		kv_int(r, "off", x->off);
		kv_int(r, "len", x->len);
		kv_int(r, "at", x->at);
		return 0;
	case STORE_REC_X_END:
		frame_map_begin(r, 6);
		kv_s(r, "h", x->h);
		kv_s(r, "state", x->state);
		kv_s(r, "sha", x->sha);
		kv_int(r, "size", x->size);
		kv_s(r, "msg", x->msg);
		kv_int(r, "at", x->at);
		return 0;
	case STORE_REC_X_CURSOR:
		frame_map_begin(r, 3);
		kv_s(r, "h", x->h);
		kv_int(r, "cursor", x->cursor);
		kv_int(r, "at", x->at);
		return 0;
	case STORE_REC_X_GONE:
	case STORE_REC_X_TOMB:
		frame_map_begin(r, 2);
		kv_s(r, "h", x->h);
		kv_int(r, "until", x->until);
		return 0;
	case STORE_REC_X_SNAP:
		/* The open fields, the 7 state fields below, and the intent's 5 only when there is
		 * one: the count must follow has_intent exactly. */
		frame_map_begin(r, 12 + 7 + (x->has_intent ? 5 : 0));
		enc_open_fields(r, x);
		if (x->has_intent)
			enc_intent(r, x);
		kv_int(r, "touched", x->touched);
		kv_int(r, "finished", x->finished);
		kv_int(r, "cursor", x->cursor);
		kv_int(r, "loff", x->loff);
		kv_int(r, "llen", x->llen);
		kv_s(r, "state", x->state);
		kv_s(r, "msg", x->msg);
		return 0;
	case STORE_REC_X_ARTSHA:
		frame_map_begin(r, 5);
		kv_s(r, "t", x->task);
		kv_s(r, "name", x->name);
		kv_int(r, "size", x->size);
		kv_s(r, "sha", x->sha);
		kv_s(r, "status", x->status);
		return 0;
	default:
		return -EINVAL;
	}
}

/* Encoding happens here, at append time, so that the caller's memory may go as soon as this
 * returns (store.h): the journal keeps the packed bytes, not the record.  A raw payload is
 * appended unchecked, on purpose: it is how tests write odd records.  Refused before a
 * replay (the journal is not open yet) and on a read-only store (-EROFS), so that nothing is
 * accepted that could never be made durable. */
static int sj_append(struct store *s, const struct store_rec *rec)
{
	struct store_journal *sj = (struct store_journal *)s;
	if (!sj->j)
		return -EINVAL;   /* not replayed (opened) yet */
	if (sj->opts.read_only)
		return -EROFS;
	if (rec->raw)
		return journal_append(sj->j, (uint8_t)rec->type, rec->raw, rec->raw_len);
	struct frame_map r;
	int rc = STORE_REC_IS_EXT(rec->type) ? encode_xfer(rec, &r) : encode(rec, &r);
	if (rc < 0)
		return rc;
	rc = journal_append(sj->j, (uint8_t)rec->type, r.sb.data, r.sb.size);
	msgpack_sbuffer_destroy(&r.sb);
	return rc;
}

/* ---- decoding ------------------------------------------------------------------------------ */

/* The strings of one decoded record: NUL-terminated copies, freed after the callback. */
struct strs {
	char **v;
	size_t n, cap;
	int oom;
};

/* Take ownership of s.  On allocation failure s is freed at once and the failure is only
 * recorded (oom): the getters stay one-liners, and decode() checks oom once at the end, so a
 * record with a missing string is never handed to the callback as if it were complete. */
static const char *keep(struct strs *st, char *s)
{
	if (!s)
		return NULL;
	if (st->n == st->cap) {
		size_t c = st->cap ? st->cap * 2 : 16;
		char **v = realloc(st->v, c * sizeof *v);
		if (!v) {
			free(s);
			st->oom = 1;
			return NULL;
		}
		st->v = v;
		st->cap = c;
	}
	return st->v[st->n++] = s;
}

/* Called only after the callback has returned: the decoded record points into these. */
static void strs_free(struct strs *st)
{
	for (size_t i = 0; i < st->n; i++)
		free(st->v[i]);
	free(st->v);
}

/* A string field as earlier versions read it (frame_get_strdup: NULL if absent, not a string
 * or holding a NUL). */
static const char *get_s(struct strs *st, const msgpack_object *m, const char *k)
{
	return keep(st, frame_get_strdup(m, k));
}

/* A JSON-text field: its text whatever it holds (task_apply parses it); NULL if absent. */
static const char *get_json(struct strs *st, const msgpack_object *m, const char *k)
{
	const char *s;
	size_t n;
	if (frame_get_str(m, k, &s, &n) < 0)
		return NULL;
	char *d = malloc(n + 1);
	if (!d) {
		st->oom = 1;
		return NULL;
	}
	memcpy(d, s, n);
	d[n] = 0;
	return keep(st, d);
}

/* An absent or non-integer field reads as 0 rather than failing: records written before a
 * field existed must still replay. */
static int64_t get_i(const msgpack_object *m, const char *k)
{
	int64_t v = 0;
	frame_get_int(m, k, &v);
	return v;
}

/* Inline bytes under binkey, or a blob name: under blobkey when given, else binkey as a string. */
static void get_ckpt(struct strs *st, const msgpack_object *m, const char *binkey, const char *blobkey,
                     struct store_checkpoint *k)
{
	const msgpack_object *o = frame_get(m, binkey);
	memset(k, 0, sizeof *k);
	if (o && o->type == MSGPACK_OBJECT_BIN && frame_get_bin(m, binkey, &k->data, &k->len) == 0) {
		k->has_data = 1;
		return;
	}
	if (blobkey)
		k->blob = get_s(st, m, blobkey);
	else if (o && o->type == MSGPACK_OBJECT_STR)
		k->blob = get_s(st, m, binkey);
}

/* A blob name wins over inline text: kv_result writes either resultBlob or result, so the
 * presence of resultBlob says which shape the writer chose. */
static void get_result(struct strs *st, const msgpack_object *m, struct store_result *res)
{
	memset(res, 0, sizeof *res);
	res->blob = get_s(st, m, "resultBlob");
	if (res->blob) {
		res->bytes = get_i(m, "resultBytes");
		res->summary = get_s(st, m, "resultSummary");
	} else {
		res->text = get_json(st, m, "result");
	}
	res->mcp = get_i(m, "mcp") != 0;
}

/* The question and answers of a snapshot record.  -ENOMEM. */
static int dec_snap_qa(struct strs *st, const msgpack_object *m, struct store_task *s,
                       struct store_answer **answers)
{
	const msgpack_object *q = frame_get(m, "question");
	if (q && q->type == MSGPACK_OBJECT_MAP) {
		s->has_question = 1;
		s->qid = get_s(st, q, "qid");
		s->prompt = get_s(st, q, "prompt");
		s->choices = get_json(st, q, "choices");
	}
	const msgpack_object *ans = frame_get(m, "answers");
	if (!ans || ans->type != MSGPACK_OBJECT_ARRAY || ans->via.array.size == 0)
		return 0;
	*answers = calloc(ans->via.array.size, sizeof **answers);
	if (!*answers)
		return -ENOMEM;
	for (uint32_t i = 0; i < ans->via.array.size; i++) {
		(*answers)[i].qid = get_s(st, &ans->via.array.ptr[i], "qid");
		(*answers)[i].response = get_json(st, &ans->via.array.ptr[i], "response");
	}
	s->answers = *answers;
	s->nanswers = ans->via.array.size;
	return 0;
}

/* The reverse of enc_snap, by key rather than by position: the keys are looked up, so their
 * order only matters to the writer.  The answers array is the caller's to free (after the
 * callback), as the strings are. */
static int dec_snap(struct strs *st, const msgpack_object *m, struct store_task *s,
                    struct store_answer **answers)
{
	s->tool = get_s(st, m, "tool");
	s->args = get_json(st, m, "args");
	s->status = get_s(st, m, "status");
	s->sandbox = get_json(st, m, "sandbox");
	s->artifacts = get_json(st, m, "artifacts");
	s->error = get_json(st, m, "error");
	s->msg = get_s(st, m, "msg");
	s->attempt = get_i(m, "attempt");
	s->retries = get_i(m, "retries");
	s->running = get_i(m, "running");
	s->not_before = get_i(m, "notBefore");
	s->created = get_i(m, "created");
	s->updated = get_i(m, "updated");
	s->started = get_i(m, "started");
	s->finished = get_i(m, "finished");
	s->expires = get_i(m, "expires");
	s->seq = get_i(m, "seq");
	s->has_fraction = frame_get_double(m, "fraction", &s->fraction) == 0;
	get_ckpt(st, m, "checkpoint", NULL, &s->ckpt);
	get_result(st, m, &s->result);
	return dec_snap_qa(st, m, s, answers);
}

/* The fields of one task record.  A type this version does not know decodes to its id alone
 * (the caller refuses it, naming the type). */
static int decode(struct strs *st, uint8_t type, const msgpack_object *m, struct store_rec *r,
                  struct store_answer **answers)
{
	r->at = get_i(m, "at");
	switch (type) {
	case STORE_REC_CREATE:
		r->u.create.tool = get_s(st, m, "tool");
		r->u.create.args = get_json(st, m, "args");
		break;
	case STORE_REC_START:
		r->u.start.attempt = get_i(m, "attempt");
		r->u.start.sandbox = get_json(st, m, "sandbox");
		break;
	case STORE_REC_PROGRESS:
		r->u.progress.msg = get_s(st, m, "msg");
		r->u.progress.has_fraction = frame_get_double(m, "fraction", &r->u.progress.fraction) == 0;
		break;
	case STORE_REC_CHECKPOINT:
		r->u.checkpoint.seq = get_i(m, "seq");
		/* encode writes either "blob" or "data"; the key present says which it chose. */
		get_ckpt(st, m, "data", frame_get(m, "blob") ? "blob" : NULL, &r->u.checkpoint.ckpt);
		break;
	case STORE_REC_ASK:
		r->u.ask.qid = get_s(st, m, "qid");
		r->u.ask.prompt = get_s(st, m, "prompt");
		r->u.ask.choices = get_json(st, m, "choices");
		break;
	case STORE_REC_ANSWER:
		r->u.answer.qid = get_s(st, m, "qid");
		r->u.answer.response = get_json(st, m, "response");
		break;
	case STORE_REC_FINISH:
		r->u.finish.status = get_s(st, m, "status");
		r->u.finish.artifacts = get_json(st, m, "artifacts");
		r->u.finish.error = get_json(st, m, "error");
		r->u.finish.expires = get_i(m, "expires");
		get_result(st, m, &r->u.finish.result);
		break;
	case STORE_REC_RETRY:
		r->u.retry.retries = get_i(m, "retries");
		r->u.retry.not_before = get_i(m, "notBefore");
		r->u.retry.msg = get_s(st, m, "msg");
		break;
	case STORE_REC_EXPIRE:
	case STORE_REC_SNAP_TOMB:
		r->u.expire.until = get_i(m, "until");
		break;
	case STORE_REC_SNAP_TASK:
		if (dec_snap(st, m, &r->u.snap, answers) < 0)
			return -ENOMEM;
		break;
	default:
		break;
	}
	return st->oom ? -ENOMEM : 0;
}

/* Like get_i, and says whether the field was there: some transfer fields default to something
 * other than 0 when absent (store.h), which only the transfer code knows. */
static int64_t get_has(const msgpack_object *m, const char *k, int *has)
{
	int64_t v = 0;
	*has = frame_get_int(m, k, &v) == 0;
	return v;
}

static void get_fid(struct strs *st, const msgpack_object *m, const char *dev, const char *ino,
                    const char *fsid, const char *fh, struct store_fid *f)
{
	f->dev = get_i(m, dev);
	f->ino = get_i(m, ino);
	f->fsid = get_i(m, fsid);
	f->fh = get_s(st, m, fh);
}

/* Every field a transfer record of any type may hold: each type reads its own (store.h). */
static int decode_xfer(struct strs *st, const msgpack_object *m, struct store_xfer *x)
{
	int has_pino;
	x->h = get_s(st, m, "h");
	x->dir = get_s(st, m, "dir");
	x->path = get_s(st, m, "path");
	x->want = get_s(st, m, "want");
	x->sha = get_s(st, m, "sha");
	x->size = get_has(m, "size", &x->has_size);
	x->ow = get_i(m, "ow");
	x->at = get_has(m, "at", &x->has_at);
	get_fid(st, m, "dev", "ino", "fsid", "fh", &x->id);
	get_fid(st, m, "pdev", "pino", "pfsid", "pfh", &x->pub);
	get_has(m, "pino", &has_pino);
	/* An intent needs a published inode: a pino of 0 names no file, so it does not count. */
	x->has_intent = has_pino && x->pub.ino != 0;
	x->psha = get_s(st, m, "psha");
	x->touched = get_has(m, "touched", &x->has_touched);
	x->finished = get_i(m, "finished");
	x->cursor = get_i(m, "cursor");
	x->loff = get_i(m, "loff");
	x->llen = get_i(m, "llen");
	x->state = get_s(st, m, "state");
	x->msg = get_s(st, m, "msg");
	x->off = get_i(m, "off");
	x->len = get_i(m, "len");
	x->until = get_i(m, "until");
	x->task = get_s(st, m, "t");
	x->name = get_s(st, m, "name");
	x->status = get_s(st, m, "status");
	return st->oom ? -ENOMEM : 0;
}

struct replay {
	store_replay_cb cb;
	store_log_cb log;
	void *arg;
};

/* Transfer records carry no task id (their handle is h), so they skip the id check that task
 * records get.  Owns f: it is released here on every path, after the callback. */
static int replay_xfer(struct replay *rp, struct frame *f, struct store_rec *r, char *err, size_t errlen)
{
	struct strs st = { 0 };
	int rc = decode_xfer(&st, &f->root, &r->u.xfer);
	if (rc < 0)
		snprintf(err, errlen, "out of memory decoding a record of type %u", (unsigned)r->type);
	else
		rc = rp->cb(rp->arg, r, err, errlen);
	strs_free(&st);
	frame_release(f);
	return rc < 0 ? -1 : 0;
}

/* Why decode here and not in the caller: the callback sees typed records only, the same as
 * from any other backend; msgpack stays this file's business.  The journal's own snapshot
 * markers are skipped: they are framing, not records.  Journal bytes are input from disk,
 * so a payload that is not a map or a task record without a 32-character id stops the
 * replay with a message instead of reaching the supervisor half-formed. */
static int replay_cb(void *arg, uint8_t type, const void *payload, size_t len, char *err, size_t errlen)
{
	struct replay *rp = arg;
	struct store_rec r;
	memset(&r, 0, sizeof r);
	r.type = (enum store_rec_type)type;
	if (type == JOURNAL_SNAPSHOT_BEGIN || type == JOURNAL_SNAPSHOT_END)
		return 0;
	struct frame f;
	if (frame_decode(payload, len, &f) < 0) {
		snprintf(err, errlen, "record of type %u is not a msgpack map", type);
		return -1;
	}
	if (STORE_REC_IS_EXT(type))
		return replay_xfer(rp, &f, &r, err, errlen);
	const char *s;
	size_t n;
	if (frame_get_str(&f.root, "id", &s, &n) < 0 || n != 32) {
		frame_release(&f);
		snprintf(err, errlen, "record of type %u has no valid task id", type);
		return -1;
	}
	/* Exactly 32 bytes were checked above, and r was zeroed, so task_id stays terminated. */
	memcpy(r.task_id, s, 32);
	struct strs st = { 0 };
	struct store_answer *answers = NULL;
	int rc = decode(&st, type, &f.root, &r, &answers);
	if (rc < 0)
		snprintf(err, errlen, "out of memory decoding a record of type %u", type);
	else
		rc = rp->cb(rp->arg, &r, err, errlen);
	free(answers);
	strs_free(&st);
	frame_release(&f);
	return rc < 0 ? -1 : 0;
}

/* The journal's messages (a torn tail cut, ...) are passed on; a caller without a log
 * callback simply does not hear them. */
static void log_cb(void *arg, const char *msg)
{
	struct replay *rp = arg;
	if (rp->log)
		rp->log(rp->arg, msg);
}

/* Replay is the open: journal_open reads every segment through replay_cb before it returns
 * the handle, which is what makes "replay before append, exactly once" (store.h) hold. */
static int sj_replay(struct store *s, store_replay_cb cb, store_log_cb log, void *arg, char *err, size_t errlen)
{
	struct store_journal *sj = (struct store_journal *)s;
	if (sj->j) {
		snprintf(err, errlen, "the journal was replayed already");
		return -EALREADY;
	}
	struct replay rp = { cb, log, arg };
	return journal_open(sj->dir, &sj->opts, replay_cb, log_cb, &rp, &sj->j, err, errlen);
}

/* ---- the rest of the ops ------------------------------------------------------------------- */

/* A read-only store (or one not opened) has nothing pending, since append refuses there, so
 * commit succeeds trivially rather than failing callers that commit unconditionally. */
static int sj_commit(struct store *s)
{
	struct store_journal *sj = (struct store_journal *)s;
	if (!sj->j || sj->opts.read_only)
		return 0;
	return journal_commit(sj->j);
}

/* A snapshot rewrites the journal, so it is refused where nothing may be written. */
static int sj_snapshot_begin(struct store *s)
{
	struct store_journal *sj = (struct store_journal *)s;
	if (!sj->j || sj->opts.read_only)
		return -EROFS;
	return journal_rewrite_begin(sj->j);
}

static int sj_snapshot_end(struct store *s)
{
	return journal_rewrite_end(((struct store_journal *)s)->j);
}

static void sj_snapshot_abort(struct store *s)
{
	journal_rewrite_abort(((struct store_journal *)s)->j);
}

/* Bytes waiting for the group commit (store.h allows bytes or records).  0 on a read-only
 * store, which can have nothing pending, so callers never try to commit there. */
static size_t sj_pending(const struct store *s)
{
	const struct store_journal *sj = (const struct store_journal *)s;
	return sj->j && !sj->opts.read_only ? journal_pending_bytes(sj->j) : 0;
}

static void sj_stats(const struct store *s, struct store_stats *out)
{
	const struct store_journal *sj = (const struct store_journal *)s;
	if (!sj->j)
		return;
	out->total_bytes = journal_total_bytes(sj->j);
	out->snapshot_bytes = journal_snapshot_bytes(sj->j);
	out->records_replayed = journal_records_replayed(sj->j);
}

/* No commit here: what was appended and not committed is lost, as store.h promises and as
 * a crash would do, so close never makes anything durable behind the caller's back. */
static void sj_close(struct store *s)
{
	struct store_journal *sj = (struct store_journal *)s;
	if (sj->j)
		journal_close(sj->j);
	free(sj->dir);
	free(sj);
}

static const struct store_ops journal_ops = {
	.name = "journal",
	.replay = sj_replay, .append = sj_append, .commit = sj_commit,
	.snapshot_begin = sj_snapshot_begin, .snapshot_end = sj_snapshot_end,
	.snapshot_abort = sj_snapshot_abort, .pending = sj_pending, .stats = sj_stats,
	.close = sj_close,
};

/* Nothing is opened here: the journal is opened by the first replay, so a store that fails
 * to replay never has a half-open journal to append to. */
int store_journal_new(const char *state_dir, const struct journal_opts *opts, struct store **out)
{
	struct store_journal *sj = calloc(1, sizeof *sj);
	if (!sj)
		return -ENOMEM;
	sj->dir = strdup(state_dir);
	if (!sj->dir) {
		free(sj);
		return -ENOMEM;
	}
	if (opts)
		sj->opts = *opts;
	sj->base.ops = &journal_ops;
	*out = &sj->base;
	return 0;
}
