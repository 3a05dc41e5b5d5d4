/* tests/unit/test_frame.c — the frame codec: round trips of every message type, hostile
 * payloads, a seeded fuzz run, the incremental reader, JSON conversion.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "proto/utf8.h"
#include "proto/frame.h"
#include "proto/io.h"
#include "check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- building payloads ------------------------------------------------------------------ */

/* A finished frame in sbuf; the test owns it. */
struct built {
	msgpack_sbuffer sbuf;
	int rc;
};

static const unsigned char *payload_of(const struct built *b, size_t *len)
{
	*len = b->sbuf.size - FRAME_HEADER_BYTES;
	return (const unsigned char *)b->sbuf.data + FRAME_HEADER_BYTES;
}

static int decode_built(const struct built *b, struct frame *f)
{
	size_t len;
	const unsigned char *p = payload_of(b, &len);
	return frame_decode(p, len, f);
}

static int str_is(const msgpack_object *map, const char *key, const char *want)
{
	const char *s;
	size_t len;
	return frame_get_str(map, key, &s, &len) == 0 && len == strlen(want) &&
	       memcmp(s, want, len) == 0;
}

static int int_is(const msgpack_object *map, const char *key, int64_t want)
{
	int64_t v;
	return frame_get_int(map, key, &v) == 0 && v == want;
}

static cJSON *value_json(const struct frame *f, const char *key)
{
	const msgpack_object *o = frame_get(&f->root, key);
	return o ? frame_to_json(o) : NULL;
}

static int json_is(const struct frame *f, const char *key, const char *want_text)
{
	cJSON *got = value_json(f, key);
	cJSON *want = cJSON_Parse(want_text);
	int ok = got && want && cJSON_Compare(got, want, 1);
	cJSON_Delete(got);
	cJSON_Delete(want);
	return ok;
}

static struct built build_json(const char *type, const char *key, const char *json)
{
	struct built b;
	msgpack_packer pk;
	cJSON *v = cJSON_Parse(json);
	frame_begin(&b.sbuf, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", type);
	frame_pack_str(&pk, key);
	b.rc = v ? frame_pack_json(&pk, v) : -EINVAL;
	if (b.rc == 0)
		b.rc = frame_finish(&b.sbuf);
	cJSON_Delete(v);
	return b;
}

static void test_round_trips(struct tally *t)
{
	struct frame f;
	struct built b;
	msgpack_packer pk;
	char type[32];
	const void *bin;
	size_t binlen;

	/* start, with every optional field */
	frame_begin(&b.sbuf, &pk);
	msgpack_pack_map(&pk, 8);
	frame_pack_kv_str(&pk, "type", "start");
	frame_pack_kv_int(&pk, "version", FRAME_VERSION);
	frame_pack_kv_str(&pk, "taskId", "0123456789abcdef0123456789abcdef");
	frame_pack_kv_str(&pk, "tool", "generate-report");
	frame_pack_kv_int(&pk, "attempt", 2);
	frame_pack_str(&pk, "arguments");
	{
		cJSON *a = cJSON_Parse("{\"topic\":\"otters\",\"sections\":5,\"ask\":true,\"x\":[1,2.5,null]}");
		CHECK(t, a && frame_pack_json(&pk, a) == 0, "start: arguments packed");
		cJSON_Delete(a);
	}
	frame_pack_kv_bin(&pk, "checkpoint", "\x00\x01\xff", 3);
	frame_pack_kv_int(&pk, "checkpointSeq", 41);
	CHECK(t, frame_finish(&b.sbuf) == 0, "start: frame finished");
	CHECK(t, io_get_be32((unsigned char *)b.sbuf.data) == b.sbuf.size - 4,
	      "start: header holds the payload length, big-endian");
	CHECK(t, decode_built(&b, &f) == 0, "start: decodes");
	CHECK(t, strcmp(frame_type(&f, type, sizeof type), "start") == 0, "start: type");
	CHECK(t, int_is(&f.root, "version", 1) && int_is(&f.root, "attempt", 2) &&
		 int_is(&f.root, "checkpointSeq", 41), "start: ints");
	CHECK(t, str_is(&f.root, "taskId", "0123456789abcdef0123456789abcdef") &&
		 str_is(&f.root, "tool", "generate-report"), "start: strings");
	CHECK(t, frame_get_bin(&f.root, "checkpoint", &bin, &binlen) == 0 && binlen == 3 &&
		 memcmp(bin, "\x00\x01\xff", 3) == 0, "start: checkpoint bytes");
	CHECK(t, json_is(&f, "arguments", "{\"topic\":\"otters\",\"sections\":5,\"ask\":true,\"x\":[1,2.5,null]}"),
	      "start: arguments back as JSON");
	frame_release(&f);
	msgpack_sbuffer_destroy(&b.sbuf);

	/* answer with a string and with a structured response */
	b = build_json("answer", "response", "\"yes\"");
	CHECK(t, b.rc == 0 && decode_built(&b, &f) == 0 && str_is(&f.root, "response", "yes"),
	      "answer: string response");
	frame_release(&f);
	msgpack_sbuffer_destroy(&b.sbuf);
	b = build_json("answer", "response", "{\"picked\":[\"a\",\"b\"]}");
	CHECK(t, b.rc == 0 && decode_built(&b, &f) == 0 &&
		 json_is(&f, "response", "{\"picked\":[\"a\",\"b\"]}"), "answer: structured response");
	frame_release(&f);
	msgpack_sbuffer_destroy(&b.sbuf);

	/* small fixed-shape frames */
	struct { const char *type; const char *k1; const char *v1; const char *k2; int64_t v2; } small[] = {
		{ "checkpointed", NULL, NULL, "seq", 7 },
		{ "cancel", "reason", "user asked", NULL, 0 },
		{ "hello", NULL, NULL, NULL, 0 },
		{ "log", "level", "warning", NULL, 0 },
		{ "checkpoint", NULL, NULL, "seq", 1 },
	};
	for (size_t i = 0; i < sizeof small / sizeof *small; i++) {
		frame_begin(&b.sbuf, &pk);
		msgpack_pack_map(&pk, 1 + (small[i].k1 != NULL) + (small[i].k2 != NULL));
		frame_pack_kv_str(&pk, "type", small[i].type);
		if (small[i].k1)
			frame_pack_kv_str(&pk, small[i].k1, small[i].v1);
		if (small[i].k2)
			frame_pack_kv_int(&pk, small[i].k2, small[i].v2);
		int ok = frame_finish(&b.sbuf) == 0 && decode_built(&b, &f) == 0 &&
			 strcmp(frame_type(&f, type, sizeof type), small[i].type) == 0 &&
			 (!small[i].k1 || str_is(&f.root, small[i].k1, small[i].v1)) &&
			 (!small[i].k2 || int_is(&f.root, small[i].k2, small[i].v2));
		char what[64];
		snprintf(what, sizeof what, "%s: round trip", small[i].type);
		CHECK(t, ok, what);
		frame_release(&f);
		msgpack_sbuffer_destroy(&b.sbuf);
	}

	/* progress with a fraction */
	frame_begin(&b.sbuf, &pk);
	msgpack_pack_map(&pk, 3);
	frame_pack_kv_str(&pk, "type", "progress");
	frame_pack_kv_str(&pk, "message", "Section 2/5: writing (40%)");
	frame_pack_kv_double(&pk, "fraction", 0.28);
	double d = 0;
	CHECK(t, frame_finish(&b.sbuf) == 0 && decode_built(&b, &f) == 0 &&
		 frame_get_double(&f.root, "fraction", &d) == 0 && d == 0.28 &&
		 str_is(&f.root, "message", "Section 2/5: writing (40%)"), "progress: round trip");
	frame_release(&f);
	msgpack_sbuffer_destroy(&b.sbuf);

	/* ask with choices */
	frame_begin(&b.sbuf, &pk);
	msgpack_pack_map(&pk, 4);
	frame_pack_kv_str(&pk, "type", "ask");
	frame_pack_kv_str(&pk, "id", "include-appendix");
	frame_pack_kv_str(&pk, "prompt", "Include an appendix?");
	frame_pack_str(&pk, "choices");
	msgpack_pack_array(&pk, 2);
	frame_pack_str(&pk, "yes");
	frame_pack_str(&pk, "no");
	CHECK(t, frame_finish(&b.sbuf) == 0 && decode_built(&b, &f) == 0 &&
		 str_is(&f.root, "id", "include-appendix") && json_is(&f, "choices", "[\"yes\",\"no\"]"),
	      "ask: round trip");
	frame_release(&f);
	msgpack_sbuffer_destroy(&b.sbuf);

	/* result, plain and MCP */
	b = build_json("result", "value", "{\"topic\":\"otters\",\"words\":120,\"ok\":true,\"r\":-3.25}");
	CHECK(t, b.rc == 0 && decode_built(&b, &f) == 0 &&
		 json_is(&f, "value", "{\"topic\":\"otters\",\"words\":120,\"ok\":true,\"r\":-3.25}"),
	      "result: plain value");
	frame_release(&f);
	msgpack_sbuffer_destroy(&b.sbuf);
	b = build_json("result", "mcp", "{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"isError\":false}");
	CHECK(t, b.rc == 0 && decode_built(&b, &f) == 0 &&
		 json_is(&f, "mcp", "{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],\"isError\":false}"),
	      "result: mcp");
	frame_release(&f);
	msgpack_sbuffer_destroy(&b.sbuf);

	/* fail */
	frame_begin(&b.sbuf, &pk);
	msgpack_pack_map(&pk, 5);
	frame_pack_kv_str(&pk, "type", "fail");
	frame_pack_kv_str(&pk, "code", "job_failed");
	frame_pack_kv_str(&pk, "message", "disk full");
	frame_pack_kv_bool(&pk, "retryable", 1);
	frame_pack_kv_str(&pk, "hint", "free some space");
	int rb = -1;
	CHECK(t, frame_finish(&b.sbuf) == 0 && decode_built(&b, &f) == 0 &&
		 str_is(&f.root, "code", "job_failed") && frame_get_bool(&f.root, "retryable", &rb) == 0 &&
		 rb == 1 && str_is(&f.root, "hint", "free some space"), "fail: round trip");
	frame_release(&f);
	msgpack_sbuffer_destroy(&b.sbuf);
}

/* ---- hostile payloads ------------------------------------------------------------------- */

static void test_hostile(struct tally *t)
{
	struct frame f;
	static const unsigned char arr27[] = { 0x81, 0xa1, 'a', 0xdd, 0x08, 0x00, 0x00, 0x00 };
	static const unsigned char root_arr27[] = { 0xdd, 0x08, 0x00, 0x00, 0x00 };
	static const unsigned char map32[] = { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'a', 0xc0 };
	static const unsigned char inner_map32[] = { 0x81, 0xa1, 'a', 0xdf, 0x10, 0x00, 0x00, 0x00,
						     0xa1, 'b', 0xc0 };
	static const unsigned char str32[] = { 0x81, 0xa1, 'a', 0xdb, 0xff, 0xff, 0xff, 0xff, 'x' };
	static const unsigned char bin32[] = { 0x81, 0xa1, 'a', 0xc6, 0x7f, 0xff, 0xff, 0xff, 'x' };
	static const unsigned char trailing[] = { 0x81, 0xa1, 'a', 0x01, 0xc0 };
	static const unsigned char root_int[] = { 0x01 };
	static const unsigned char root_str[] = { 0xa1, 'a' };
	static const unsigned char root_arr[] = { 0x91, 0x01 };
	static const unsigned char int_key[] = { 0x81, 0x01, 0x02 };
	static const unsigned char nested_int_key[] = { 0x81, 0xa1, 'a', 0x81, 0x01, 0x02 };
	static const unsigned char bin_key[] = { 0x81, 0xc4, 0x01, 'a', 0x02 };
	static const unsigned char fixext[] = { 0x81, 0xa1, 'a', 0xd4, 0x01, 0x02 };
	static const unsigned char ext8[] = { 0x81, 0xa1, 'a', 0xc7, 0x01, 0x05, 0x02 };
	static const unsigned char ext32[] = { 0x81, 0xa1, 'a', 0xc9, 0, 0, 0, 1, 0x05, 0x02 };
	static const unsigned char c1[] = { 0x81, 0xa1, 'a', 0xc1 };
	static const unsigned char trunc_str[] = { 0x81, 0xa1, 'a', 0xa5, 'x', 'y' };
	static const unsigned char trunc_u32[] = { 0x81, 0xa1, 'a', 0xce, 0x00, 0x01 };
	static const unsigned char trunc_hdr[] = { 0x81, 0xa1, 'a', 0xdc, 0x00 };
	static const unsigned char missing_val[] = { 0x82, 0xa1, 'a', 0x01, 0xa1, 'b' };
	static const unsigned char empty_map[] = { 0x80 };
	static const unsigned char sum_lie[] = { 0x81, 0xa1, 'a', 0x92, 0x94, 0xc0, 0xc0, 0xc0, 0xc0 };

	struct { const unsigned char *p; size_t len; int want; const char *what; } cases[] = {
		{ arr27, sizeof arr27, -EBADMSG, "array32 claiming 2^27 elements in 8 bytes" },
		{ root_arr27, sizeof root_arr27, -EBADMSG, "array32 root claiming 2^27 elements" },
		{ map32, sizeof map32, -EBADMSG, "map32 root claiming 2^32-1 entries" },
		{ inner_map32, sizeof inner_map32, -EBADMSG, "nested map32 with a huge count" },
		{ str32, sizeof str32, -EBADMSG, "str32 claiming 4 GiB" },
		{ bin32, sizeof bin32, -EBADMSG, "bin32 claiming 2 GiB" },
		{ trailing, sizeof trailing, -EBADMSG, "trailing bytes after the map" },
		{ root_int, sizeof root_int, -EBADMSG, "int root" },
		{ root_str, sizeof root_str, -EBADMSG, "string root" },
		{ root_arr, sizeof root_arr, -EBADMSG, "array root" },
		{ int_key, sizeof int_key, -EBADMSG, "integer map key" },
		{ nested_int_key, sizeof nested_int_key, -EBADMSG, "integer key in a nested map" },
		{ bin_key, sizeof bin_key, -EBADMSG, "bin map key" },
		{ fixext, sizeof fixext, -EBADMSG, "fixext value" },
		{ ext8, sizeof ext8, -EBADMSG, "ext8 value" },
		{ ext32, sizeof ext32, -EBADMSG, "ext32 value" },
		{ c1, sizeof c1, -EBADMSG, "reserved byte 0xc1" },
		{ trunc_str, sizeof trunc_str, -EBADMSG, "truncated string" },
		{ trunc_u32, sizeof trunc_u32, -EBADMSG, "truncated uint32" },
		{ trunc_hdr, sizeof trunc_hdr, -EBADMSG, "truncated array16 header" },
		{ missing_val, sizeof missing_val, -EBADMSG, "map missing its last value" },
		{ sum_lie, sizeof sum_lie, -EBADMSG, "nested counts that only fit one at a time" },
		{ empty_map, sizeof empty_map, 0, "empty map is well-formed" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char what[128];
		int rc = frame_check(cases[i].p, cases[i].len);
		snprintf(what, sizeof what, "frame_check: %s (%d)", cases[i].what, rc);
		CHECK(t, rc == cases[i].want, what);
		rc = frame_decode(cases[i].p, cases[i].len, &f);
		snprintf(what, sizeof what, "frame_decode: %s", cases[i].what);
		CHECK(t, rc == cases[i].want, what);
		if (rc == 0)
			frame_release(&f);
	}
	CHECK(t, frame_check("", 0) == -EBADMSG && frame_check(NULL, 0) == -EBADMSG, "empty payload");

	/* Nesting: {"a":[[[...]]]} with the root map counted as level 1. */
	for (int levels = 31; levels <= 1000; levels = levels < 34 ? levels + 1 : 1000) {
		size_t n = 3 + (size_t)levels + 1;
		unsigned char *p = malloc(n);
		p[0] = 0x81; p[1] = 0xa1; p[2] = 'a';
		for (int i = 0; i < levels; i++)
			p[3 + i] = 0x91;
		p[3 + levels] = 0xc0;
		int depth = levels + 1;
		int want = depth > FRAME_MAX_DEPTH ? -ELOOP : 0;
		int rc = frame_decode(p, n, &f);
		char what[96];
		snprintf(what, sizeof what, "nesting depth %d %s", depth, want ? "is refused" : "decodes");
		CHECK(t, rc == want, what);
		if (rc == 0) {
			cJSON *j = frame_to_json(&f.root);
			CHECK(t, j != NULL, "the deepest allowed frame converts to JSON");
			cJSON_Delete(j);
			frame_release(&f);
		}
		/* Same depth made of empty containers at the bottom. */
		p[3 + levels - 1] = 0x90;
		rc = frame_check(p, n - 1);
		snprintf(what, sizeof what, "nesting depth %d ending in an empty array", depth);
		CHECK(t, rc == want, what);
		free(p);
		if (levels == 1000)
			break;
	}

	/* The array32 bomb must be refused before msgpack-c reserves 3 GiB for it: with the
	 * address space capped, reaching msgpack would end in -ENOMEM, not -EBADMSG. */
	if (UNDER_ASAN) {
		check_skip(t, "address-space cap under ASan");
	} else {
		pid_t pid = fork();
		if (pid == 0) {
			struct rlimit rl = { 512u << 20, 512u << 20 };
			setrlimit(RLIMIT_AS, &rl);
			msgpack_zone z;
			msgpack_object o;
			size_t off = 0;
			msgpack_zone_init(&z, 8192);
			/* Show the hazard is real: msgpack-c alone tries to allocate. */
			int raw = msgpack_unpack((const char *)arr27, sizeof arr27, &off, &z, &o);
			msgpack_zone_destroy(&z);
			int rc = frame_decode(arr27, sizeof arr27, &f);
			_exit(raw == MSGPACK_UNPACK_NOMEM_ERROR && rc == -EBADMSG ? 0 : 1);
		}
		int st = 0;
		waitpid(pid, &st, 0);
		CHECK(t, WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "array32 bomb refused before allocation (msgpack alone runs out of memory)");
	}
}

/* ---- incremental reader --------------------------------------------------------------- */

static msgpack_sbuffer three_frames(void)
{
	msgpack_sbuffer all;
	msgpack_sbuffer_init(&all);
	for (int i = 0; i < 3; i++) {
		msgpack_sbuffer s;
		msgpack_packer pk;
		frame_begin(&s, &pk);
		msgpack_pack_map(&pk, 2);
		frame_pack_kv_str(&pk, "type", "checkpointed");
		frame_pack_kv_int(&pk, "seq", i + 1);
		frame_finish(&s);
		msgpack_sbuffer_write(&all, s.data, s.size);
		msgpack_sbuffer_destroy(&s);
	}
	return all;
}

static void test_reader(struct tally *t)
{
	struct frame f;
	msgpack_sbuffer all = three_frames();
	struct frame_reader *r = frame_reader_new(1024);
	int got = 0, bad = 0;

	/* one byte at a time */
	for (size_t i = 0; i < all.size; i++) {
		if (frame_reader_feed(r, all.data + i, 1) < 0)
			bad++;
		int rc;
		while ((rc = frame_reader_next(r, &f)) == 1) {
			got++;
			if (!int_is(&f.root, "seq", got))
				bad++;
			frame_release(&f);
		}
		if (rc < 0)
			bad++;
	}
	CHECK(t, got == 3 && bad == 0 && frame_reader_pending(r) == 0, "reader fed one byte at a time");
	frame_reader_free(r);

	/* all at once */
	r = frame_reader_new(1024);
	got = 0;
	CHECK(t, frame_reader_feed(r, all.data, all.size) == 0, "reader takes several frames in one feed");
	while (frame_reader_next(r, &f) == 1) {
		got++;
		bad += !int_is(&f.root, "seq", got);
		frame_release(&f);
	}
	CHECK(t, got == 3 && bad == 0, "several frames in one feed all come out, in order");
	CHECK(t, frame_reader_next(r, &f) == 0, "then the reader wants more bytes");

	/* partial header and partial payload stay pending */
	CHECK(t, frame_reader_feed(r, all.data, 3) == 0 && frame_reader_next(r, &f) == 0 &&
		 frame_reader_pending(r) == 3, "truncated header: waits");
	CHECK(t, frame_reader_feed(r, all.data + 3, 4) == 0 && frame_reader_next(r, &f) == 0 &&
		 frame_reader_pending(r) == 7, "truncated payload: waits");
	CHECK(t, frame_reader_feed(r, all.data + 7, all.size - 7) == 0 && frame_reader_next(r, &f) == 1,
	      "rest of the bytes complete the frame");
	frame_release(&f);
	frame_reader_free(r);

	/* declared lengths over the limit are refused from the header alone */
	static const unsigned char huge[] = { 0xff, 0xff, 0xff, 0xff };
	static const unsigned char over[] = { 0x00, 0x00, 0x04, 0x01 };   /* 1025 > 1024 */
	r = frame_reader_new(1024);
	CHECK(t, frame_reader_feed(r, huge, 4) == -EMSGSIZE, "declared length 2^32-1 refused at the header");
	CHECK(t, frame_reader_feed(r, all.data, all.size) == -EMSGSIZE && frame_reader_next(r, &f) == -EMSGSIZE,
	      "poisoned reader stays poisoned (feed and next)");
	frame_reader_free(r);
	r = frame_reader_new(1024);
	CHECK(t, frame_reader_feed(r, over, 2) == 0 && frame_reader_feed(r, over + 2, 2) == -EMSGSIZE,
	      "length max+1 refused once its 4th header byte arrives");
	frame_reader_free(r);
	r = frame_reader_new(1024);
	/* a good frame followed by an oversized header in the same feed */
	unsigned char mixed[64];
	size_t first = 4 + io_get_be32((unsigned char *)all.data);
	memcpy(mixed, all.data, first);
	memcpy(mixed + first, over, 4);
	CHECK(t, frame_reader_feed(r, mixed, first + 4) == -EMSGSIZE,
	      "an oversized header behind a good frame is caught in the same feed");
	frame_reader_free(r);

	/* a bad payload poisons */
	static const unsigned char bad_payload[] = { 0, 0, 0, 2, 0x91, 0xc0 };
	static const unsigned char zero_len[] = { 0, 0, 0, 0 };
	r = frame_reader_new(1024);
	CHECK(t, frame_reader_feed(r, bad_payload, sizeof bad_payload) == 0 &&
		 frame_reader_next(r, &f) == -EBADMSG, "non-map payload refused by the reader");
	CHECK(t, frame_reader_feed(r, all.data, all.size) == -EBADMSG && frame_reader_next(r, &f) == -EBADMSG,
	      "and the reader stays poisoned");
	frame_reader_free(r);
	r = frame_reader_new(1024);
	CHECK(t, frame_reader_feed(r, zero_len, 4) == 0 && frame_reader_next(r, &f) == -EBADMSG,
	      "zero-length frame refused");
	frame_reader_free(r);

	/* a large frame in many small feeds, then the buffer is released */
	r = frame_reader_new(FRAME_MAX_DEFAULT);
	struct built b;
	msgpack_packer pk;
	size_t big = 3u << 20;
	char *blob = calloc(1, big);
	frame_begin(&b.sbuf, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", "checkpoint");
	frame_pack_kv_bin(&pk, "data", blob, big);
	CHECK(t, frame_finish(&b.sbuf) == 0, "3 MiB frame packs");
	got = 0;
	bad = 0;
	for (size_t off = 0; off < b.sbuf.size; off += 65536) {
		size_t n = b.sbuf.size - off < 65536 ? b.sbuf.size - off : 65536;
		bad += frame_reader_feed(r, b.sbuf.data + off, n) != 0;
		while (frame_reader_next(r, &f) == 1) {
			const void *p;
			size_t len;
			got += frame_get_bin(&f.root, "data", &p, &len) == 0 && len == big;
			frame_release(&f);
		}
	}
	CHECK(t, got == 1 && bad == 0, "3 MiB frame through 64 KiB feeds");
	frame_reader_free(r);
	msgpack_sbuffer_destroy(&b.sbuf);

	/* frame_finish refuses more than the maximum */
	frame_begin(&b.sbuf, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", "checkpoint");
	char *huge_blob = calloc(1, FRAME_MAX_DEFAULT);
	frame_pack_kv_bin(&pk, "data", huge_blob, FRAME_MAX_DEFAULT);
	CHECK(t, frame_finish(&b.sbuf) == -EMSGSIZE, "frame_finish refuses a payload over 8 MiB");
	msgpack_sbuffer_destroy(&b.sbuf);
	free(huge_blob);
	free(blob);

	/* frame_finish refuses a malformed pack */
	frame_begin(&b.sbuf, &pk);
	msgpack_pack_map(&pk, 2);
	frame_pack_kv_str(&pk, "type", "progress");
	CHECK(t, frame_finish(&b.sbuf) == -EBADMSG, "frame_finish refuses a map missing an entry");
	msgpack_sbuffer_destroy(&b.sbuf);

	/* frame_read over a socket: exactly one frame per call, nothing more consumed */
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
		io_write_full(sv[0], all.data, all.size);
		int rc1 = frame_read(sv[1], 1024, &f);
		int ok = rc1 == 0 && int_is(&f.root, "seq", 1);
		frame_release(&f);
		struct frame_reader *rest = frame_reader_new(1024);
		char buf[256];
		ssize_t n = recv(sv[1], buf, sizeof buf, MSG_DONTWAIT);
		frame_reader_feed(rest, buf, n > 0 ? (size_t)n : 0);
		got = 0;
		while (frame_reader_next(rest, &f) == 1) {
			got++;
			frame_release(&f);
		}
		CHECK(t, ok && got == 2 && frame_reader_pending(rest) == 0,
		      "frame_read consumes exactly one frame");
		frame_reader_free(rest);
		io_write_full(sv[0], huge, 4);
		CHECK(t, frame_read(sv[1], 1024, &f) == -EMSGSIZE, "frame_read refuses an oversized header");
		close(sv[0]);
		CHECK(t, frame_read(sv[1], 1024, &f) == -EPIPE, "frame_read reports EOF as -EPIPE");
		close(sv[1]);
	} else {
		CHECK(t, 0, "socketpair");
	}
	msgpack_sbuffer_destroy(&all);
}

/* ---- JSON conversion ---------------------------------------------------------------------- */

static int to_json_text_is(const unsigned char *payload, size_t len, const char *want)
{
	struct frame f;
	if (frame_decode(payload, len, &f) < 0)
		return 0;
	cJSON *j = frame_to_json(&f.root);
	char *s = j ? cJSON_PrintUnformatted(j) : NULL;
	int ok = s && strcmp(s, want) == 0;
	if (!ok)
		printf("# got %s, want %s\n", s ? s : "(null)", want);
	free(s);
	cJSON_Delete(j);
	frame_release(&f);
	return ok;
}

static int to_json_fails(const unsigned char *payload, size_t len)
{
	struct frame f;
	if (frame_decode(payload, len, &f) < 0)
		return 0;
	cJSON *j = frame_to_json(&f.root);
	int ok = j == NULL;
	cJSON_Delete(j);
	frame_release(&f);
	return ok;
}

static void test_json(struct tally *t)
{
	static const unsigned char b64[] = { 0x83, 0xa1, 'a', 0xc4, 5, 'h', 'e', 'l', 'l', 'o',
					     0xa1, 'b', 0xc4, 1, 0xff, 0xa1, 'c', 0xc4, 0 };
	CHECK(t, to_json_text_is(b64, sizeof b64, "{\"a\":\"aGVsbG8=\",\"b\":\"/w==\",\"c\":\"\"}"),
	      "bin becomes base64");
	static const unsigned char nums[] = {
		0x86, 0xa1, 'a', 0xff,                                     /* -1 */
		0xa1, 'b', 0xd2, 0x80, 0, 0, 0,                            /* INT32_MIN */
		0xa1, 'c', 0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0,             /* NaN */
		0xa1, 'd', 0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0,             /* +inf */
		0xa1, 'e', 0xca, 0x3f, 0xc0, 0, 0,                         /* 1.5f */
		0xa1, 'f', 0xc2,
	};
	CHECK(t, to_json_text_is(nums, sizeof nums,
				 "{\"a\":-1,\"b\":-2147483648,\"c\":null,\"d\":null,\"e\":1.5,\"f\":false}"),
	      "ints, float32, NaN and inf as null, bool");
	static const unsigned char nul_str[] = { 0x81, 0xa1, 'a', 0xa3, 'x', 0, 'y' };
	static const unsigned char nul_key[] = { 0x81, 0xa3, 'x', 0, 'y', 0x01 };
	static const unsigned char bad_utf8[] = { 0x81, 0xa1, 'a', 0xa2, 0xc0, 0x80 };
	static const unsigned char surrogate[] = { 0x81, 0xa1, 'a', 0xa3, 0xed, 0xa0, 0x80 };
	static const unsigned char utf8_ok[] = { 0x81, 0xa1, 'a', 0xa3, 0xe2, 0x82, 0xac };
	CHECK(t, to_json_fails(nul_str, sizeof nul_str), "string with a NUL refused");
	CHECK(t, to_json_fails(nul_key, sizeof nul_key), "key with a NUL refused");
	CHECK(t, to_json_fails(bad_utf8, sizeof bad_utf8), "overlong UTF-8 refused");
	CHECK(t, to_json_fails(surrogate, sizeof surrogate), "UTF-8 surrogate refused");
	CHECK(t, to_json_text_is(utf8_ok, sizeof utf8_ok, "{\"a\":\"\xe2\x82\xac\"}"), "valid UTF-8 kept");
	CHECK(t, utf8_valid("\xf0\x9f\xa6\xa6", 4) && !utf8_valid("\xf4\x90\x80\x80", 4) &&
		 !utf8_valid("\xe2\x82", 2) && !utf8_valid("\x80", 1),
	      "utf8: 4-byte ok, above U+10FFFF, truncated, stray continuation refused");

	/* frame_pack_json: integral numbers become ints */
	struct built b = build_json("t", "v", "[1, -2, 1.5, 1e300, 9007199254740993, -0.0, 1e19]");
	struct frame f;
	int ok = b.rc == 0 && decode_built(&b, &f) == 0;
	const msgpack_object *a = ok ? frame_get(&f.root, "v") : NULL;
	ok = ok && a && a->type == MSGPACK_OBJECT_ARRAY && a->via.array.size == 7 &&
	     a->via.array.ptr[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	     a->via.array.ptr[1].type == MSGPACK_OBJECT_NEGATIVE_INTEGER &&
	     a->via.array.ptr[2].type == MSGPACK_OBJECT_FLOAT64 &&
	     a->via.array.ptr[3].type == MSGPACK_OBJECT_FLOAT64 &&
	     a->via.array.ptr[4].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	     a->via.array.ptr[5].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
	     a->via.array.ptr[6].type == MSGPACK_OBJECT_FLOAT64;
	CHECK(t, ok, "frame_pack_json: integral doubles in int64 range become ints, others floats");
	if (b.rc == 0 && a)
		frame_release(&f);
	msgpack_sbuffer_destroy(&b.sbuf);

	/* depth limits of frame_pack_json */
	char deep[3][80];
	for (size_t k = 0; k < 3; k++) {
		size_t levels = 31 + k;    /* deep[k]: 31, 32, 33 nested arrays */
		for (size_t i = 0; i < 2 * levels; i++)
			deep[k][i] = i < levels ? '[' : ']';
		deep[k][2 * levels] = '\0';
	}
	cJSON *dj = cJSON_Parse(deep[2]);
	msgpack_sbuffer s;
	msgpack_packer pk;
	frame_begin(&s, &pk);
	CHECK(t, dj && frame_pack_json(&pk, dj) == -ELOOP, "frame_pack_json refuses 33 levels");
	msgpack_sbuffer_destroy(&s);
	cJSON_Delete(dj);
	b = build_json("t", "v", deep[0]);   /* 31 levels inside the root map: 32 in all */
	CHECK(t, b.rc == 0, "31 JSON levels inside a frame fit (32 with the root)");
	msgpack_sbuffer_destroy(&b.sbuf);
	b = build_json("t", "v", deep[1]);   /* 32 levels inside: 33 in all */
	CHECK(t, b.rc == -ELOOP, "32 JSON levels inside a frame are one too many");
	msgpack_sbuffer_destroy(&b.sbuf);

	/* typed getters */
	static const unsigned char typed[] = { 0x85, 0xa1, 'i', 0xa1, 'x',
					       0xa1, 'f', 0xcb, 0x40, 0x08, 0, 0, 0, 0, 0, 0,   /* 3.0 */
					       0xa1, 'g', 0xcb, 0x40, 0x0c, 0, 0, 0, 0, 0, 0,   /* 3.5 */
					       0xa1, 'u', 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					       0xa4, 't', 'y', 'p', 'e', 0xa3, 'a', 0, 'b' };
	int64_t v;
	const char *str;
	size_t len;
	char tb[16];
	ok = frame_decode(typed, sizeof typed, &f) == 0;
	CHECK(t, ok && frame_get_int(&f.root, "i", &v) == -EINVAL && frame_get_int(&f.root, "zz", &v) == -ENOENT,
	      "frame_get_int: wrong type and missing key");
	CHECK(t, ok && frame_get_int(&f.root, "f", &v) == 0 && v == 3 &&
		 frame_get_int(&f.root, "g", &v) == -EINVAL, "frame_get_int: integral float accepted, 3.5 not");
	CHECK(t, ok && frame_get_int(&f.root, "u", &v) == -EINVAL, "frame_get_int: uint64 above INT64_MAX refused");
	CHECK(t, ok && frame_get_str(&f.root, "f", &str, &len) == -EINVAL, "frame_get_str: wrong type");
	CHECK(t, ok && frame_type(&f, tb, sizeof tb)[0] == '\0', "frame_type: a type with a NUL is no type");
	if (ok)
		frame_release(&f);
}

/* ---- fuzz ---------------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: deterministic for a fixed seed, good enough to shake a parser */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static cJSON *random_json(uint64_t *s, int depth)
{
	unsigned k = (unsigned)(rng_next(s) % (depth > 4 ? 5 : 7));
	switch (k) {
	case 0: return cJSON_CreateNull();
	case 1: return cJSON_CreateBool(rng_next(s) & 1);
	case 2: return cJSON_CreateNumber((double)(int64_t)(rng_next(s) % 2000000) - 1000000);
	case 3: return cJSON_CreateNumber((double)(rng_next(s) % 100000) / 7.0);
	case 4: {
		static const char *const strs[] = { "", "x", "héllo", "a\"b\\c", "€ and 🦦", "line\nbreak" };
		return cJSON_CreateString(strs[rng_next(s) % 6]);
	}
	case 5: {
		cJSON *a = cJSON_CreateArray();
		int n = (int)(rng_next(s) % 5);
		for (int i = 0; i < n; i++)
			cJSON_AddItemToArray(a, random_json(s, depth + 1));
		return a;
	}
	default: {
		cJSON *o = cJSON_CreateObject();
		int n = (int)(rng_next(s) % 5);
		for (int i = 0; i < n; i++) {
			char key[16];
			snprintf(key, sizeof key, "k%d", i);
			cJSON_AddItemToObject(o, key, random_json(s, depth + 1));
		}
		return o;
	}
	}
}

static void test_fuzz(struct tally *t)
{
	uint64_t seed = 0x5eed1234abcdULL;
	int round_trip_bad = 0, consistency_bad = 0, decoded = 0;
	enum { SEEDS = 64, RUNS = 200000 };
	msgpack_sbuffer seeds[SEEDS];

	/* Valid frames from random JSON: pack → decode → JSON must give back the same value. */
	for (int i = 0; i < SEEDS; i++) {
		cJSON *v = random_json(&seed, 0);
		msgpack_packer pk;
		frame_begin(&seeds[i], &pk);
		msgpack_pack_map(&pk, 2);
		frame_pack_kv_str(&pk, "type", "result");
		frame_pack_str(&pk, "value");
		frame_pack_json(&pk, v);
		struct frame f;
		int ok = frame_finish(&seeds[i]) == 0 &&
			 frame_decode(seeds[i].data + 4, seeds[i].size - 4, &f) == 0;
		if (ok) {
			cJSON *back = frame_to_json(frame_get(&f.root, "value"));
			ok = back && cJSON_Compare(v, back, 1);
			cJSON_Delete(back);
			frame_release(&f);
		}
		round_trip_bad += !ok;
		cJSON_Delete(v);
	}
	CHECK(t, round_trip_bad == 0, "64 random JSON values survive pack → decode → JSON");

	static const unsigned char interesting[] = { 0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf,
						     0xc0, 0xc1, 0xc4, 0xc6, 0xc7, 0xc9, 0xcf, 0xd4,
						     0xd9, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xff };
	unsigned char buf[512];
	for (int run = 0; run < RUNS; run++) {
		size_t len;
		uint64_t r = rng_next(&seed);
		if (r % 4 == 0) {
			/* pure noise, biased towards a map root */
			len = 1 + rng_next(&seed) % 64;
			for (size_t i = 0; i < len; i++)
				buf[i] = (unsigned char)rng_next(&seed);
			if (r & 16)
				buf[0] = (unsigned char)(0x80 | (rng_next(&seed) & 0x0f));
		} else {
			const msgpack_sbuffer *sd = &seeds[rng_next(&seed) % SEEDS];
			len = sd->size - 4 < sizeof buf - 8 ? sd->size - 4 : sizeof buf - 8;
			memcpy(buf, sd->data + 4, len);
			int muts = 1 + (int)(rng_next(&seed) % 4);
			for (int m = 0; m < muts; m++) {
				size_t at = rng_next(&seed) % len;
				switch (rng_next(&seed) % 5) {
				case 0: buf[at] = (unsigned char)rng_next(&seed); break;
				case 1: buf[at] = interesting[rng_next(&seed) % sizeof interesting]; break;
				case 2: buf[at] ^= (unsigned char)(1u << (rng_next(&seed) % 8)); break;
				case 3: len = at + 1; break;    /* truncate */
				default:                         /* insert a byte */
					if (len < sizeof buf - 1) {
						memmove(buf + at + 1, buf + at, len - at);
						buf[at] = interesting[rng_next(&seed) % sizeof interesting];
						len++;
					}
				}
			}
		}
		struct frame f;
		int chk = frame_check(buf, len);
		int rc = frame_decode(buf, len, &f);
		/* Whatever frame_check accepts, msgpack-c must decode the same way. */
		if ((chk == 0) != (rc == 0))
			consistency_bad++;
		if (rc == 0) {
			decoded++;
			cJSON *j = frame_to_json(&f.root);
			char *s = j ? cJSON_PrintUnformatted(j) : NULL;
			free(s);
			cJSON_Delete(j);
			frame_release(&f);
		}
		/* The same bytes through the reader must agree with frame_decode. */
		if (run % 16 == 0) {
			unsigned char hdr[4];
			io_put_be32(hdr, (uint32_t)len);
			struct frame_reader *rd = frame_reader_new(4096);
			frame_reader_feed(rd, hdr, 4);
			frame_reader_feed(rd, buf, len);
			int nr = frame_reader_next(rd, &f);
			if ((nr == 1) != (rc == 0))
				consistency_bad++;
			if (nr == 1)
				frame_release(&f);
			frame_reader_free(rd);
		}
	}
	char what[128];
	snprintf(what, sizeof what, "%d fuzzed payloads: no crash, check and decode agree (%d decoded)",
		 RUNS, decoded);
	CHECK(t, consistency_bad == 0, what);
	CHECK(t, decoded > 100 && decoded < RUNS, "fuzz mix has both accepted and refused payloads");
	for (int i = 0; i < SEEDS; i++)
		msgpack_sbuffer_destroy(&seeds[i]);
}

/* ---- value budget and JSON text ------------------------------------------------------------- */

/* {"v": [nil × n]} as a payload (array32).  The caller frees it. */
static unsigned char *nils_payload(size_t n, size_t *len)
{
	*len = 3 + 5 + n;
	unsigned char *p = malloc(*len);
	if (!p)
		exit(2);
	memcpy(p, "\x81\xa1v\xdd", 4);
	io_put_be32(p + 4, (uint32_t)n);
	memset(p + 8, 0xc0, n);
	return p;
}

/* A payload holds at most FRAME_MAX_NODES values whatever its size: one-byte nils would
 * otherwise unpack to 24 bytes of objects each. */
static void test_node_budget(struct tally *t)
{
	struct frame f;
	size_t len;
	/* The map, its key and the array are 3 values: the cap leaves room for cap - 3 nils. */
	unsigned char *p = nils_payload(FRAME_MAX_NODES - 3, &len);
	CHECK(t, frame_check(p, len) == 0, "exactly FRAME_MAX_NODES values pass");
	CHECK(t, frame_decode(p, len, &f) == 0, "and decode");
	frame_release(&f);
	free(p);
	p = nils_payload(FRAME_MAX_NODES - 2, &len);
	CHECK(t, frame_check(p, len) == -E2BIG, "one value more is -E2BIG");
	CHECK(t, frame_decode(p, len, &f) == -E2BIG, "and never unpacked");
	free(p);
	p = nils_payload((8u << 20) - 16, &len);
	CHECK(t, frame_check(p, len) == -E2BIG, "an 8 MiB frame of nils is -E2BIG");
	free(p);

	/* The incremental reader reports it too, and stays poisoned. */
	p = nils_payload(FRAME_MAX_NODES, &len);
	struct frame_reader *r = frame_reader_new(16u << 20);
	unsigned char hdr[4];
	io_put_be32(hdr, (uint32_t)len);
	CHECK(t, r && frame_reader_feed(r, hdr, 4) == 0 && frame_reader_feed(r, p, len) == 0, "reader takes the bytes");
	CHECK(t, frame_reader_next(r, &f) == -E2BIG, "reader: -E2BIG");
	CHECK(t, frame_reader_next(r, &f) == -E2BIG, "reader: still poisoned");
	frame_reader_free(r);
	free(p);
}

/* The text of the value under "v" in a payload decoded from JSON, with a limit. */
static int text_of(const char *json, size_t max, char **out, size_t *len)
{
	struct built b = build_json("t", "v", json);
	struct frame f;
	int rc = b.rc == 0 ? decode_built(&b, &f) : b.rc;
	msgpack_sbuffer_destroy(&b.sbuf);
	if (rc < 0)
		return rc;
	rc = frame_to_json_text(frame_get(&f.root, "v"), max, out, len);
	frame_release(&f);
	return rc;
}

static int text_is(const char *json, const char *want)
{
	char *out;
	size_t len;
	int ok = text_of(json, 1 << 20, &out, &len) == 0 && len == strlen(want) && strcmp(out, want) == 0;
	if (!ok)
		fprintf(stderr, "text of %s: want %s\n", json, want);
	if (ok)
		free(out);
	return ok;
}

static void test_json_text(struct tally *t)
{
	char *out = NULL;
	size_t len;
	CHECK(t, text_is("{\"a\":[1,-2,true,false,null],\"b\":\"x\"}", "{\"a\":[1,-2,true,false,null],\"b\":\"x\"}"),
	      "compact JSON text of a nested value");
	CHECK(t, text_is("\"q\\\"b\\\\n\\n\\t\\u0001\\u001f\\u007f é\"", "\"q\\\"b\\\\n\\n\\t\\u0001\\u001f\x7f é\""),
	      "strings: quotes, backslashes, control characters escaped; UTF-8 as it is");
	CHECK(t, text_is("[0.5,1e300,-0.1,0.30000000000000004]", "[0.5,1e+300,-0.1,0.30000000000000004]"),
	      "doubles: the shortest text that reads back exactly");
	{
		msgpack_sbuffer ib;
		msgpack_packer ip;
		msgpack_unpacked iu;
		char *it = NULL;
		size_t il;
		msgpack_sbuffer_init(&ib);
		msgpack_packer_init(&ip, &ib, msgpack_sbuffer_write);
		msgpack_pack_array(&ip, 2);
		msgpack_pack_uint64(&ip, UINT64_MAX);
		msgpack_pack_int64(&ip, INT64_MIN);
		msgpack_unpacked_init(&iu);
		msgpack_unpack_next(&iu, ib.data, ib.size, NULL);
		CHECK(t, frame_to_json_text(&iu.data, 100, &it, &il) == 0 &&
		         strcmp(it, "[18446744073709551615,-9223372036854775808]") == 0, "64-bit integers keep every digit");
		free(it);
		msgpack_unpacked_destroy(&iu);
		msgpack_sbuffer_destroy(&ib);
	}
	CHECK(t, text_is("{}", "{}") && text_is("[]", "[]") && text_is("\"\"", "\"\""), "empty containers and string");

	/* The limit counts the text: exactly at it passes, one byte under fails. */
	CHECK(t, text_of("[null,null]", 11, &out, &len) == 0 && len == 11, "text of exactly max bytes passes");
	free(out);
	out = NULL;
	CHECK(t, text_of("[null,null]", 10, &out, &len) == -EMSGSIZE && out == NULL, "one byte over max: -EMSGSIZE");

	/* A short payload that expands: 64 KiB of control characters is 384 KiB of JSON. */
	msgpack_sbuffer sb;
	msgpack_packer pk;
	char *ctl = malloc(65536);
	memset(ctl, 1, 65536);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_str_with_body(&pk, ctl, 65536);
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	CHECK(t, msgpack_unpack_next(&u, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS, "packed");
	CHECK(t, frame_to_json_text(&u.data, 300000, &out, &len) == -EMSGSIZE, "6x expansion refused at the limit");
	CHECK(t, frame_to_json_text(&u.data, 400000, &out, &len) == 0 && len == 6 * 65536 + 2, "and fits a larger one");
	free(out);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);

	/* Bad strings, keys and binaries. */
	static const unsigned char bad_utf8[] = { 0xa2, 0xc3, 0x28 };
	static const unsigned char bad_key[] = { 0x81, 0xa2, 0xff, 0xfe, 0x01 };
	static const unsigned char bin[] = { 0xc4, 0x03, 'a', 'b', 'c' };
	size_t off = 0;
	msgpack_zone z;
	msgpack_object o;
	msgpack_zone_init(&z, 1024);
	msgpack_unpack((const char *)bad_utf8, sizeof bad_utf8, &off, &z, &o);
	CHECK(t, frame_to_json_text(&o, 100, &out, &len) == -EILSEQ, "invalid UTF-8: -EILSEQ");
	off = 0;
	msgpack_unpack((const char *)bad_key, sizeof bad_key, &off, &z, &o);
	CHECK(t, frame_to_json_text(&o, 100, &out, &len) == -EILSEQ, "invalid UTF-8 key: -EILSEQ");
	off = 0;
	msgpack_unpack((const char *)bin, sizeof bin, &off, &z, &o);
	CHECK(t, frame_to_json_text(&o, 100, &out, &len) == 0 && strcmp(out, "\"YWJj\"") == 0, "bin is base64");
	free(out);
	CHECK(t, frame_to_json_text(&o, 5, &out, &len) == -EMSGSIZE, "bin over the limit is refused before encoding");
	msgpack_zone_destroy(&z);

	/* Nesting past FRAME_MAX_DEPTH (a value built by hand: msgpack-c cannot unpack one). */
	{
		msgpack_object chain[FRAME_MAX_DEPTH + 2];
		for (int i = 0; i <= FRAME_MAX_DEPTH; i++) {
			chain[i].type = MSGPACK_OBJECT_ARRAY;
			chain[i].via.array.size = 1;
			chain[i].via.array.ptr = &chain[i + 1];
		}
		chain[FRAME_MAX_DEPTH + 1].type = MSGPACK_OBJECT_NIL;
		CHECK(t, frame_to_json_text(&chain[0], 1000, &out, &len) == -ELOOP, "deeper than FRAME_MAX_DEPTH: -ELOOP");
		CHECK(t, frame_to_json_text(&chain[1], 1000, &out, &len) == 0 && len == 2 * FRAME_MAX_DEPTH + 4,
		      "at the limit: fine");
		free(out);
	}

	/* frame_json_quote: stored JSON text as a string literal. */
	CHECK(t, frame_json_quote("{\"a\":\"\\n\"}", 10, &out, &len) == 0 &&
	         strcmp(out, "\"{\\\"a\\\":\\\"\\\\n\\\"}\"") == 0 && len == strlen(out), "quote escapes quotes and backslashes");
	cJSON *back = cJSON_Parse(out);
	CHECK(t, back && cJSON_IsString(back) && strcmp(back->valuestring, "{\"a\":\"\\n\"}") == 0, "and parses back");
	cJSON_Delete(back);
	free(out);
	free(ctl);
}

/* The checkpoint limits derive from one another (frame.h): the largest checkpoint, with the
 * start frame's other fields and the 3.5 KiB of arguments it leaves room for, fills one frame;
 * maxCheckpointMB's maximum is that checkpoint in whole MiB, so the quota never refuses a
 * checkpoint the frame would carry and never promises one it cannot. */
static void test_checkpoint_limits(struct tally *t)
{
	CHECK(t, FRAME_CHECKPOINT_MAX + FRAME_START_FIELDS_MAX + 3584u == FRAME_MAX_DEFAULT,
	      "checkpoint limit: largest checkpoint + start fields + 3.5 KiB of arguments = one frame");
	CHECK(t, FRAME_CHECKPOINT_MB == 8 && ((size_t)FRAME_CHECKPOINT_MB << 20) >= FRAME_CHECKPOINT_MAX &&
	      ((size_t)(FRAME_CHECKPOINT_MB - 1) << 20) < FRAME_CHECKPOINT_MAX,
	      "checkpoint limit: maxCheckpointMB's maximum is the largest checkpoint in whole MiB");
}

int main(void)
{
	struct tally t = { 0, 0 };
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_checkpoint_limits(&t);
	test_round_trips(&t);
	test_hostile(&t);
	test_reader(&t);
	test_json(&t);
	test_node_budget(&t);
	test_json_text(&t);
	test_fuzz(&t);
	return check_done(&t);
}
