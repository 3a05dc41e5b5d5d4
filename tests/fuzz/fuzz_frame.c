/* tests/fuzz/fuzz_frame.c — libFuzzer target for the job protocol's decoder: arbitrary bytes
 * go through the incremental frame_reader (fed in chunks whose size the input chooses) and,
 * as one payload, through frame_decode; every frame that decodes is converted to JSON, and
 * JSON that converts is packed back and must form a well-formed frame again.
 * Must never crash, leak, hang or trip a sanitizer.  Built by `make fuzz`. */
#include "proto/frame.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Exercise the read side of one decoded frame. */
static void use_frame(const struct frame *f)
{
	char type[64];
	const char *s;
	const void *p;
	size_t len;
	int64_t i;
	double d;
	int b;

	frame_type(f, type, sizeof type);
	frame_get_str(&f->root, "type", &s, &len);
	frame_get_int(&f->root, "id", &i);
	frame_get_double(&f->root, "progress", &d);
	frame_get_bin(&f->root, "data", &p, &len);
	frame_get_bool(&f->root, "final", &b);

	cJSON *json = frame_to_json(&f->root);
	if (json == NULL)
		return;
	char *text = cJSON_PrintUnformatted(json);
	free(text);

	/* What came out of a checked frame must pack into a checked frame. */
	msgpack_sbuffer sbuf;
	msgpack_packer pk;
	frame_begin(&sbuf, &pk);
	int rc = frame_pack_json(&pk, json);
	if (rc == 0)
		rc = frame_finish(&sbuf);
	if (rc == -EBADMSG)
		__builtin_trap();
	msgpack_sbuffer_destroy(&sbuf);
	cJSON_Delete(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame f;

	if (size == 0)
		return 0;
	/* First byte: feed size (1..16 bytes, or everything at once when 0). */
	size_t chunk = data[0] & 0x0f;
	data++;
	size--;

	struct frame_reader *r = frame_reader_new(1u << 16);
	if (r == NULL)
		return 0;
	size_t off = 0;
	int dead = 0;
	while (off < size && !dead) {
		size_t n = chunk == 0 ? size - off : (chunk < size - off ? chunk : size - off);
		if (frame_reader_feed(r, data + off, n) < 0)
			break;
		off += n;
		for (;;) {
			int rc = frame_reader_next(r, &f);
			if (rc < 0)
				dead = 1;
			if (rc <= 0)
				break;
			use_frame(&f);
			frame_release(&f);
		}
	}
	frame_reader_free(r);

	if (frame_decode(data, size, &f) == 0) {
		use_frame(&f);
		frame_release(&f);
	}
	return 0;
}
