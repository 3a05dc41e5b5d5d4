/* proto/frame.h — the job protocol's frames: a 4-byte big-endian payload length followed by
 * exactly one msgpack map.  Used by the supervisor (hostile peer: every byte is checked) and
 * by libforkpoint (the job side).  docs/job-protocol.md is the normative description.
 *
 * Safety contract for decoding: a payload is first walked by frame_check(), which proves that
 * every container count fits in the remaining bytes, that nesting stays within FRAME_MAX_DEPTH
 * and that the payload holds at most FRAME_MAX_NODES values (each becomes a 24-byte object,
 * so a frame of one-byte nils would otherwise unpack to 24 times its size).  Only then is it
 * handed to msgpack_unpack(), so msgpack-c never allocates more than a small multiple of the
 * payload size (a bare array32 header claiming 2^27 elements would otherwise reserve
 * gigabytes), and never more than 24 MiB of objects.
 *
 * Return conventions: 0 / positive on success, negative errno on failure:
 *   -EMSGSIZE  declared length above the reader's limit (checked before any allocation)
 *   -EBADMSG   payload is not exactly one well-formed msgpack map
 *   -ELOOP     nesting deeper than FRAME_MAX_DEPTH
 *   -E2BIG     more than FRAME_MAX_NODES values
 *   -ENOMEM    out of memory */
#ifndef FP_FRAME_H
#define FP_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>
#include <cJSON.h>

#define FRAME_VERSION      1
#define FRAME_HEADER_BYTES 4
#define FRAME_MAX_DEFAULT  (8u << 20)   /* 8 MiB: room for a checkpoint, not for abuse */
#define FRAME_MAX_DEPTH    32
/* Values (containers, keys and scalars) one payload may hold: 1 Mi, whatever its byte size,
 * so a decoded frame costs at most its bytes plus 24 MiB of objects. */
#define FRAME_MAX_NODES    (1u << 20)
/* The checkpoint limits, all here so that they cannot disagree.  A checkpoint travels back to
 * the job in a start frame (at most FRAME_MAX_DEFAULT) with the task's arguments and the start
 * frame's other fields (its keys, the task id, the tool name of at most 64 bytes, the counters),
 * which take at most FRAME_START_FIELDS_MAX bytes.  So:
 *   FRAME_CHECKPOINT_MAX  the largest checkpoint any job may send (libforkpoint's
 *                         FP_CHECKPOINT_MAX is the same number): the frame less 4 KiB, which
 *                         leaves 3.5 KiB for arguments;
 *   a task's own limit    with its arguments packed in alen bytes, at most
 *                         FRAME_MAX_DEFAULT - FRAME_START_FIELDS_MAX - alen, and at most the
 *                         tool's maxCheckpointMB MiB;
 *   FRAME_CHECKPOINT_MB   maxCheckpointMB's default and maximum: FRAME_CHECKPOINT_MAX in
 *                         whole MiB, rounded up (the quota is clipped to FRAME_CHECKPOINT_MAX). */
#define FRAME_START_FIELDS_MAX 512u
#define FRAME_CHECKPOINT_MAX (FRAME_MAX_DEFAULT - 4096u)
#define FRAME_CHECKPOINT_MB  ((FRAME_CHECKPOINT_MAX + (1u << 20) - 1) >> 20)

/* ---- decoding -------------------------------------------------------------- */

/* Walk a payload without allocating.  0 if it is exactly one msgpack map within the limits. */
int frame_check(const void *payload, size_t len);

/* A decoded frame.  `root` is a MSGPACK_OBJECT_MAP that lives in `zone`. */
struct frame {
	msgpack_zone zone;
	msgpack_object root;
};

/* frame_check() then unpack.  On success the caller owns *f and must frame_release() it. */
int frame_decode(const void *payload, size_t len, struct frame *f);
void frame_release(struct frame *f);

/* Look up a key in a map object; NULL if absent or `map` is not a map. */
const msgpack_object *frame_get(const msgpack_object *map, const char *key);
/* The "type" string of a frame as a NUL-terminated copy in buf ("" if missing/not a string). */
const char *frame_type(const struct frame *f, char *buf, size_t buflen);
/* Typed getters on a key of a map.  Return 0 on success, -ENOENT if absent, -EINVAL on wrong type.
 * Strings and bins are not NUL-terminated; an empty one still gets a non-NULL pointer. */
int frame_get_str(const msgpack_object *map, const char *key, const char **s, size_t *len);
int frame_get_int(const msgpack_object *map, const char *key, int64_t *v);  /* also an integral float within ±2^53 */
int frame_get_double(const msgpack_object *map, const char *key, double *v);  /* int or float */
int frame_get_bin(const msgpack_object *map, const char *key, const void **p, size_t *len); /* bin or str */
int frame_get_bool(const msgpack_object *map, const char *key, int *v);   /* 0 / 1 */
/* A string as a NUL-terminated copy in buf; buf is left alone on failure.  0, -ENOENT,
 * -EINVAL (not a string, or it holds a NUL byte), or -ERANGE (it needs more than buflen). */
int frame_get_strcpy(const msgpack_object *map, const char *key, char *buf, size_t buflen);
/* The same in a malloc'd copy (the caller frees it); NULL if absent, not a string, holding a
 * NUL byte, or out of memory. */
char *frame_get_strdup(const msgpack_object *map, const char *key);

/* Convert a msgpack value to cJSON.  Maps need string keys; bin becomes a base64 string;
 * non-finite floats become null.  Returns NULL (errno set) on failure: EILSEQ for a string or
 * key that is not UTF-8 or holds a NUL, ELOOP, EBADMSG (ext, non-string key), ENOMEM. */
cJSON *frame_to_json(const msgpack_object *o);

/* The same value as compact JSON text, written directly (no cJSON tree: a value of a million
 * nodes costs its text, not a million allocations), in a malloc'd NUL-terminated buffer of at
 * most max bytes.  Integers keep all 64 bits.  0 and *out / *len set (the caller frees *out);
 * -EMSGSIZE if the text would exceed max, -EILSEQ, -ELOOP, -EBADMSG or -ENOMEM as above. */
int frame_to_json_text(const msgpack_object *o, size_t max, char **out, size_t *len);
/* s[0..n) (UTF-8, checked by the caller) as a JSON string literal with its quotes, in a
 * malloc'd NUL-terminated buffer: for embedding stored JSON text as a string without building
 * a tree.  0 and *out / *outlen set, or -ENOMEM. */
int frame_json_quote(const char *s, size_t n, char **out, size_t *outlen);

/* Blocking read of exactly one frame from fd: the 4-byte header, then exactly the payload,
 * never a byte more (a stream shared by successive processes stays aligned on frames).
 * 0 and *f filled (caller frame_release()s it); -EPIPE on EOF, -EMSGSIZE if the header
 * declares more than max_frame (nothing else is read: the stream is then unusable),
 * -EBADMSG / -ELOOP for a bad payload, or -errno. */
int frame_read(int fd, size_t max_frame, struct frame *f);

/* Incremental reader for a non-blocking stream: feed bytes as they arrive, pop frames.
 * max_frame 0 means FRAME_MAX_DEFAULT.  Popping every ready frame after each feed keeps the
 * buffer within max_frame + header + one fed chunk. */
struct frame_reader;
struct frame_reader *frame_reader_new(size_t max_frame);
void frame_reader_free(struct frame_reader *r);
/* Append bytes.  Returns 0, or -EMSGSIZE as soon as a header declares more than max_frame
 * (the reader is then poisoned), or -ENOMEM. */
int frame_reader_feed(struct frame_reader *r, const void *buf, size_t len);
/* 1 and *f filled if a whole frame was buffered; 0 if more bytes are needed; <0 on error
 * (the reader is then poisoned: the peer must be treated as hostile). */
int frame_reader_next(struct frame_reader *r, struct frame *f);
/* Bytes buffered but not yet returned as frames. */
size_t frame_reader_pending(const struct frame_reader *r);

/* ---- encoding -------------------------------------------------------------- */

/* Start a frame in sbuf: reserves the 4-byte length and initialises pk to write into sbuf.
 * The caller then packs exactly one map, and calls frame_finish() to patch the length.
 * frame_begin() initialises sbuf itself (msgpack_sbuffer_init), so pass a fresh or a
 * destroyed sbuffer; the caller msgpack_sbuffer_destroy()s it once the bytes are sent.
 * The whole frame is sbuf->data[0 .. sbuf->size). */
void frame_begin(msgpack_sbuffer *sbuf, msgpack_packer *pk);
/* 0, or -EMSGSIZE if over FRAME_MAX_DEFAULT.  The packed bytes are walked by frame_check()
 * first, so a frame truncated by a failed allocation (-EBADMSG / -ENOMEM) or packed too
 * deep (-ELOOP) is refused instead of sent. */
int frame_finish(msgpack_sbuffer *sbuf);

/* A bare msgpack map, without the frame header (the journal's records): frame_map_begin
 * initialises m->sb and opens a map of nkeys; the caller packs the pairs with the helpers
 * below into m->pk, then owns m->sb.data[0 .. m->sb.size) until msgpack_sbuffer_destroy(). */
struct frame_map {
	msgpack_sbuffer sb;
	msgpack_packer pk;
};
void frame_map_begin(struct frame_map *m, size_t nkeys);

/* Pack helpers.  A NULL string is packed as nil. */
void frame_pack_str(msgpack_packer *pk, const char *s);
void frame_pack_kv_str(msgpack_packer *pk, const char *key, const char *val);
void frame_pack_kv_int(msgpack_packer *pk, const char *key, int64_t v);
void frame_pack_kv_double(msgpack_packer *pk, const char *key, double v);
void frame_pack_kv_bool(msgpack_packer *pk, const char *key, int v);
void frame_pack_kv_bin(msgpack_packer *pk, const char *key, const void *p, size_t len);
/* Pack a cJSON value as msgpack (objects → maps, arrays → arrays, integral numbers that fit
 * int64 → ints, other numbers → float64).  Returns 0 or -ELOOP if deeper than FRAME_MAX_DEPTH. */
int frame_pack_json(msgpack_packer *pk, const cJSON *v);

#endif
