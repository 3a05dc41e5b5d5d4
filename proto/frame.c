/* proto/frame.c — see frame.h.  The decoder never trusts a count or a length it has not
 * proved against the bytes actually present; msgpack-c only ever sees checked payloads. */
#include "proto/frame.h"
#include "proto/b64.h"
#include "proto/io.h"
#include "proto/utf8.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- structural check -------------------------------------------------------- */

/* One open container on the walk's stack: how many items (map keys and values counted
 * separately) are still to come, and whether the next one sits in key position. */
struct walk_level {
	uint64_t left;
	bool is_map;
};

/* msgpack lengths and counts are big-endian, 1 to 8 bytes; the caller has proved the n bytes
 * are present. */
static uint64_t be_n(const unsigned char *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Classify the item starting at p[0] (avail bytes remain, avail >= 1).  Sets *size to the
 * bytes the item occupies itself (header plus body for scalars, header only for
 * containers) and *items to the items a container announces (0 for scalars).
 * Returns 1 for a container, 0 for a scalar, -EBADMSG for anything not allowed. */
static int walk_item(const unsigned char *p, size_t avail, uint64_t *size, uint64_t *items,
		     bool *is_map, bool *is_str)
{
	unsigned char b = p[0];
	size_t hdr = 1;        /* header bytes, type byte included */
	uint64_t body = 0;     /* body bytes for str/bin/fixed scalars */
	*items = 0;
	*is_map = false;
	*is_str = false;

	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
		*size = 1;
		return 0;
	}
	if (b >= 0x80 && b <= 0x8f) {
		*size = 1;
		*items = 2u * (uint64_t)(b & 0x0f);
		*is_map = true;
		return 1;
	}
	if (b >= 0x90 && b <= 0x9f) {
		*size = 1;
		*items = b & 0x0f;
		return 1;
	}
	if (b >= 0xa0 && b <= 0xbf) {
		*is_str = true;
		body = b & 0x1f;
		goto sized;
	}
	switch (b) {
	case 0xc4: case 0xd9: hdr = 2; break;             /* bin8, str8 */
	case 0xc5: case 0xda: hdr = 3; break;             /* bin16, str16 */
	case 0xc6: case 0xdb: hdr = 5; break;             /* bin32, str32 */
	case 0xca: body = 4; goto sized;                   /* float32 */
	case 0xcb: body = 8; goto sized;                   /* float64 */
	case 0xcc: case 0xd0: body = 1; goto sized;
	case 0xcd: case 0xd1: body = 2; goto sized;
	case 0xce: case 0xd2: body = 4; goto sized;
	case 0xcf: case 0xd3: body = 8; goto sized;
	case 0xdc: case 0xde: hdr = 3; goto container;     /* array16, map16 */
	case 0xdd: case 0xdf: hdr = 5; goto container;     /* array32, map32 */
	default:
		/* 0xc1 (never used) and every ext type (0xc7-0xc9, 0xd4-0xd8): not protocol. */
		return -EBADMSG;
	}
	/* str8/16/32, bin8/16/32: length follows the type byte. */
	if (avail < hdr)
		return -EBADMSG;
	body = be_n(p + 1, hdr - 1);
	*is_str = b >= 0xd9;
sized:
	if (body > avail - hdr)    /* avail >= hdr holds here for every path */
		return -EBADMSG;
	*size = hdr + body;
	return 0;
container:
	if (avail < hdr)
		return -EBADMSG;
	*items = be_n(p + 1, hdr - 1);
	*is_map = b == 0xde || b == 0xdf;
	if (*is_map)
		*items *= 2;
	*size = hdr;
	return 1;
}

int frame_check(const void *payload, size_t len)
{
	const unsigned char *p = payload;
	struct walk_level stack[FRAME_MAX_DEPTH];
	size_t depth = 0;
	size_t pos = 0;
	/* Items announced by open containers but not yet seen.  Every item needs at least one
	 * byte of its own, so this can never exceed the bytes left: a lie is caught at once. */
	uint64_t pending = 0;
	uint64_t nodes = 0;

	if (!p || len == 0)
		return -EBADMSG;
	if (!((p[0] >= 0x80 && p[0] <= 0x8f) || p[0] == 0xde || p[0] == 0xdf))
		return -EBADMSG;

	for (;;) {
		uint64_t size, items;
		bool is_map, is_str;
		if (pos >= len)
			return -EBADMSG;    /* truncated: an announced item is missing */
		int kind = walk_item(p + pos, len - pos, &size, &items, &is_map, &is_str);
		if (kind < 0)
			return kind;
		if (++nodes > FRAME_MAX_NODES)
			return -E2BIG;
		if (depth > 0 && stack[depth - 1].is_map && stack[depth - 1].left % 2 == 0 && !is_str)
			return -EBADMSG;    /* map key that is not a string */
		pos += (size_t)size;
		if (depth > 0) {
			stack[depth - 1].left--;
			pending--;
		}
		if (kind == 1 && items > 0) {
			if (depth == FRAME_MAX_DEPTH)
				return -ELOOP;
			if (items > len - pos || pending + items > len - pos)
				return -EBADMSG;
			stack[depth].left = items;
			stack[depth].is_map = is_map;
			depth++;
			pending += items;
			continue;
		}
		if (kind == 1 && depth == FRAME_MAX_DEPTH)
			return -ELOOP;      /* an empty container still counts as a level */
		/* A value is complete: close every container it completes. */
		while (depth > 0 && stack[depth - 1].left == 0)
			depth--;
		if (depth == 0)
			break;
	}
	return pos == len ? 0 : -EBADMSG;
}

/* ---- decoding -------------------------------------------------------------- */

/* Unpack a payload that already lives in f->zone.  Every str/bin object points into it, so
 * the frame owns all its bytes and needs no outside buffer.  checked: frame_check() already
 * passed on these bytes. */
static int decode_in_zone(struct frame *f, const char *data, size_t len, int checked)
{
	int rc = checked ? 0 : frame_check(data, len);
	if (rc < 0)
		return rc;
	size_t off = 0;
	msgpack_unpack_return ur = msgpack_unpack(data, len, &off, &f->zone, &f->root);
	if (ur == MSGPACK_UNPACK_NOMEM_ERROR)
		return -ENOMEM;
	if (ur != MSGPACK_UNPACK_SUCCESS || off != len || f->root.type != MSGPACK_OBJECT_MAP)
		return -EBADMSG;    /* unreachable after frame_check, kept as a second fence */
	return 0;
}

/* Start f's zone with room for a len-byte payload at *buf.  0, or -ENOMEM with f zeroed. */
static int zone_start(struct frame *f, size_t len, char **buf)
{
	if (!msgpack_zone_init(&f->zone, MSGPACK_ZONE_CHUNK_SIZE)) {
		memset(f, 0, sizeof *f);
		return -ENOMEM;
	}
	*buf = msgpack_zone_malloc(&f->zone, len);
	if (!*buf) {
		frame_release(f);
		return -ENOMEM;
	}
	return 0;
}

/* The payload is checked structurally before msgpack-c sees it, then copied into the frame's
 * own zone: the decoded objects point into that copy, so the frame stays valid after the
 * caller's buffer is reused. */
int frame_decode(const void *payload, size_t len, struct frame *f)
{
	char *copy;
	int rc;
	memset(f, 0, sizeof *f);
	if (!payload || len == 0 || len > UINT32_MAX)
		return -EBADMSG;
	/* Checked where the bytes are, so a refused payload is never copied. */
	if ((rc = frame_check(payload, len)) < 0)
		return rc;
	rc = zone_start(f, len, &copy);
	if (rc < 0)
		return rc;
	memcpy(copy, payload, len);
	rc = decode_in_zone(f, copy, len, 1);
	if (rc < 0)
		frame_release(f);
	return rc;
}

/* The length is checked against max_frame before anything is allocated for it, so a peer
 * cannot make this process reserve 4 GiB with four bytes.  Zero-length frames are refused:
 * every frame is a map with at least a type. */
int frame_read(int fd, size_t max_frame, struct frame *f)
{
	unsigned char hdr[FRAME_HEADER_BYTES];
	char *buf;
	int rc;
	memset(f, 0, sizeof *f);
	rc = io_read_full(fd, hdr, sizeof hdr);
	if (rc < 0)
		return rc;
	uint32_t len = io_get_be32(hdr);
	if (len > max_frame)
		return -EMSGSIZE;
	if (len == 0)
		return -EBADMSG;
	rc = zone_start(f, len, &buf);
	if (rc < 0)
		return rc;
	rc = io_read_full(fd, buf, len);
	if (rc == 0)
		rc = decode_in_zone(f, buf, len, 0);
	if (rc < 0)
		frame_release(f);
	return rc;
}

void frame_release(struct frame *f)
{
	if (!f)
		return;
	/* A zeroed frame (failed decode) has no chunk list to free. */
	if (f->zone.chunk_list.head)
		msgpack_zone_destroy(&f->zone);
	memset(f, 0, sizeof *f);
}

/* A linear scan: frames are small maps.  Keys compare by length and bytes, so a key holding a
 * NUL never matches a shorter C string. */
const msgpack_object *frame_get(const msgpack_object *map, const char *key)
{
	if (!map || !key || map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	size_t klen = strlen(key);
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen &&
		    (klen == 0 || memcmp(k->via.str.ptr, key, klen) == 0))
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

/* Never NULL and never a string with a NUL in it: the result goes straight into strcmp
 * dispatch and log messages. */
const char *frame_type(const struct frame *f, char *buf, size_t buflen)
{
	if (!buf || buflen == 0)
		return "";
	buf[0] = '\0';
	if (f)
		frame_get_strcpy(&f->root, "type", buf, buflen);
	return buf;
}

int frame_get_str(const msgpack_object *map, const char *key, const char **s, size_t *len)
{
	const msgpack_object *o = frame_get(map, key);
	if (!o)
		return -ENOENT;
	if (o->type != MSGPACK_OBJECT_STR)
		return -EINVAL;
	/* msgpack-c leaves ptr NULL for an empty string; callers get a real pointer. */
	*s = o->via.str.size ? o->via.str.ptr : "";
	if (len)
		*len = o->via.str.size;
	return 0;
}

int frame_get_strcpy(const msgpack_object *map, const char *key, char *buf, size_t buflen)
{
	const char *s;
	size_t len;
	int rc = frame_get_str(map, key, &s, &len);
	if (rc < 0)
		return rc;
	/* A string with a NUL in it must not pass for its prefix ("result\0junk"). */
	if (memchr(s, '\0', len))
		return -EINVAL;
	if (len >= buflen)
		return -ERANGE;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

char *frame_get_strdup(const msgpack_object *map, const char *key)
{
	const char *s;
	size_t len;
	if (frame_get_str(map, key, &s, &len) < 0 || memchr(s, '\0', len))
		return NULL;
	char *d = malloc(len + 1);
	if (d) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

int frame_get_int(const msgpack_object *map, const char *key, int64_t *v)
{
	const msgpack_object *o = frame_get(map, key);
	if (!o)
		return -ENOENT;
	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (o->via.u64 > INT64_MAX)
			return -EINVAL;
		*v = (int64_t)o->via.u64;
		return 0;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		*v = o->via.i64;
		return 0;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		/* Some encoders (JavaScript's) may send whole numbers as floats; accept those
		 * that are exact integers in the range a double represents exactly. */
		if (!isfinite(o->via.f64) || o->via.f64 != floor(o->via.f64) ||
		    fabs(o->via.f64) > 9007199254740992.0)
			return -EINVAL;
		*v = (int64_t)o->via.f64;
		return 0;
	default:
		return -EINVAL;
	}
}

int frame_get_double(const msgpack_object *map, const char *key, double *v)
{
	const msgpack_object *o = frame_get(map, key);
	if (!o)
		return -ENOENT;
	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER: *v = (double)o->via.u64; return 0;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: *v = (double)o->via.i64; return 0;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:          *v = o->via.f64; return 0;
	default:                              return -EINVAL;
	}
}

/* A str is accepted where bin is expected: encoders of the old MessagePack format have no bin
 * type and send bytes as str. */
int frame_get_bin(const msgpack_object *map, const char *key, const void **p, size_t *len)
{
	const msgpack_object *o = frame_get(map, key);
	if (!o)
		return -ENOENT;
	if (o->type == MSGPACK_OBJECT_BIN) {
		*p = o->via.bin.size ? o->via.bin.ptr : "";
		*len = o->via.bin.size;
		return 0;
	}
	if (o->type == MSGPACK_OBJECT_STR) {
		*p = o->via.str.size ? o->via.str.ptr : "";
		*len = o->via.str.size;
		return 0;
	}
	return -EINVAL;
}

int frame_get_bool(const msgpack_object *map, const char *key, int *v)
{
	const msgpack_object *o = frame_get(map, key);
	if (!o)
		return -ENOENT;
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return -EINVAL;
	*v = o->via.boolean ? 1 : 0;
	return 0;
}

/* ---- msgpack → JSON -------------------------------------------------------- */

/* bin values become base64 text when a frame is turned into JSON (JSON has no bytes): a
 * malloc'd copy through proto/b64's encoder, NULL when it cannot be allocated. */
static char *base64_encode(const unsigned char *p, size_t len)
{
	if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
		return NULL;
	char *out = malloc(B64_ENCODED_SIZE(len));
	if (out)
		b64_encode(p, len, out);
	return out;
}

/* A NUL-terminated copy of a msgpack string, refused unless it is valid UTF-8 without NULs:
 * cJSON works on C strings, and JSON text must be UTF-8. */
static char *json_str_copy(const msgpack_object_str *s)
{
	if (!utf8_valid(s->ptr, s->size)) {
		errno = EILSEQ;
		return NULL;
	}
	char *c = malloc((size_t)s->size + 1);
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	if (s->size)
		memcpy(c, s->ptr, s->size);
	c[s->size] = '\0';
	return c;
}

static cJSON *to_json(const msgpack_object *o, int depth);

/* The members of an array one level down; NULL with errno (ENOMEM, or the member's reason). */
static cJSON *array_to_json(const msgpack_object_array *a, int depth)
{
	cJSON *j = cJSON_CreateArray();
	int err = ENOMEM;
	if (!j)
		goto fail;
	for (uint32_t i = 0; i < a->size; i++) {
		cJSON *c = to_json(&a->ptr[i], depth + 1);
		if (!c) {
			err = errno;
			goto fail;
		}
		if (!cJSON_AddItemToArray(j, c)) {
			cJSON_Delete(c);
			goto fail;
		}
	}
	return j;
fail:
	cJSON_Delete(j);
	errno = err;
	return NULL;
}

/* A map becomes an object only if every key is a string (EBADMSG otherwise): JSON has no
 * other kind of key, and none is made up for it.  cJSON copies
 * each key, so the NUL-terminated copy made for it is freed after each member. */
static cJSON *map_to_json(const msgpack_object_map *m, int depth)
{
	cJSON *j = cJSON_CreateObject();
	char *key = NULL;
	int err = ENOMEM;
	if (!j)
		goto fail;
	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object_kv *kv = &m->ptr[i];
		if (kv->key.type != MSGPACK_OBJECT_STR) {
			err = EBADMSG;
			goto fail;
		}
		free(key);
		if (!(key = json_str_copy(&kv->key.via.str))) {
			err = errno;
			goto fail;
		}
		cJSON *c = to_json(&kv->val, depth + 1);
		if (!c) {
			err = errno;
			goto fail;
		}
		if (!cJSON_AddItemToObject(j, key, c)) {
			cJSON_Delete(c);
			goto fail;
		}
	}
	free(key);
	return j;
fail:
	cJSON_Delete(j);
	free(key);
	errno = err;
	return NULL;
}

/* One msgpack value as cJSON, for a job's frames that the supervisor forwards as JSON: bin
 * becomes base64 text, a non-finite float null (JSON has no NaN), ext is refused as not part
 * of the protocol.  NULL with errno: ELOOP past FRAME_MAX_DEPTH, EILSEQ for a string that is
 * not UTF-8 or holds a NUL, EBADMSG, ENOMEM.  Recursion is bounded by the depth check. */
static cJSON *to_json(const msgpack_object *o, int depth)
{
	cJSON *j = NULL;
	char *tmp = NULL;
	int err = ENOMEM;

	/* Containers count as levels, as in frame_check(); scalars inside the deepest are fine. */
	if (depth > FRAME_MAX_DEPTH &&
	    (o->type == MSGPACK_OBJECT_ARRAY || o->type == MSGPACK_OBJECT_MAP)) {
		errno = ELOOP;
		return NULL;
	}
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		j = cJSON_CreateNull();
		break;
	case MSGPACK_OBJECT_BOOLEAN:
		j = cJSON_CreateBool(o->via.boolean);
		break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		j = cJSON_CreateNumber((double)o->via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		j = cJSON_CreateNumber((double)o->via.i64);
		break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		j = isfinite(o->via.f64) ? cJSON_CreateNumber(o->via.f64) : cJSON_CreateNull();
		break;
	case MSGPACK_OBJECT_STR:
		if (!(tmp = json_str_copy(&o->via.str))) {
			err = errno;
			goto fail;
		}
		j = cJSON_CreateString(tmp);
		break;
	case MSGPACK_OBJECT_BIN:
		if (!(tmp = base64_encode((const unsigned char *)o->via.bin.ptr, o->via.bin.size)))
			goto fail;
		j = cJSON_CreateString(tmp);
		break;
	case MSGPACK_OBJECT_ARRAY:
		if (!(j = array_to_json(&o->via.array, depth))) {
			err = errno;
			goto fail;
		}
		break;
	case MSGPACK_OBJECT_MAP:
		if (!(j = map_to_json(&o->via.map, depth))) {
			err = errno;
			goto fail;
		}
		break;
	default:
		err = EBADMSG;   /* ext: not part of the protocol */
		goto fail;
	}
	if (!j)
		goto fail;
	free(tmp);
	return j;
fail:
	cJSON_Delete(j);
	free(tmp);
	errno = err;
	return NULL;
}

cJSON *frame_to_json(const msgpack_object *o)
{
	if (!o) {
		errno = EINVAL;
		return NULL;
	}
	return to_json(o, 1);
}

/* ---- msgpack → JSON text ----------------------------------------------------- */

/* Output of frame_to_json_text: grows geometrically but never past max, so a hostile value
 * is refused once its text reaches the limit instead of after it was built. */
struct jbuf {
	char *p;
	size_t len, cap, max;
};

/* The limit is checked before growing, so an oversized result fails without the memory
 * being taken first; the +1 keeps room for the final NUL. */
static int jb_reserve(struct jbuf *b, size_t n)
{
	if (n > b->max - b->len)
		return -EMSGSIZE;
	if (b->len + n + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1)
		cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	char *np = realloc(b->p, cap);
	if (!np)
		return -ENOMEM;
	b->p = np;
	b->cap = cap;
	return 0;
}

static int jb_put(struct jbuf *b, const char *s, size_t n)
{
	int rc = jb_reserve(b, n);
	if (rc < 0)
		return rc;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	return 0;
}

/* A JSON string literal of UTF-8 text: runs of plain bytes are copied whole, so text without
 * escapes costs a scan and a memcpy. */
static int jb_string(struct jbuf *b, const char *s, size_t n)
{
	static const char hexd[] = "0123456789abcdef";
	int rc = jb_put(b, "\"", 1);
	size_t run = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		if ((rc = jb_put(b, s + run, i - run)) < 0)
			break;
		char esc[6] = { '\\', (char)c, 0, 0, 0, 0 };
		size_t el = 2;
		switch (c) {
		case '"': case '\\': break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		default:
			memcpy(esc, "\\u00", 4);
			esc[4] = hexd[c >> 4];
			esc[5] = hexd[c & 15];
			el = 6;
		}
		rc = jb_put(b, esc, el);
		run = i + 1;
	}
	if (rc == 0)
		rc = jb_put(b, s + run, n - run);
	return rc == 0 ? jb_put(b, "\"", 1) : rc;
}

/* The shortest of %.15g / %.17g that reads back as the same double (what cJSON prints). */
static int jb_double(struct jbuf *b, double d)
{
	char num[40];
	if (!isfinite(d))
		return jb_put(b, "null", 4);
	int n = snprintf(num, sizeof num, "%1.15g", d);
	if (strtod(num, NULL) != d)
		n = snprintf(num, sizeof num, "%1.17g", d);
	return n > 0 ? jb_put(b, num, (size_t)n) : -EINVAL;
}

/* The same mapping as to_json(), written directly as text: a job's result goes to the client
 * as JSON text without building a cJSON tree of it first. */
static int jb_value(struct jbuf *b, const msgpack_object *o, int depth)
{
	char num[32];
	int n, rc = 0;
	if (depth > FRAME_MAX_DEPTH && (o->type == MSGPACK_OBJECT_ARRAY || o->type == MSGPACK_OBJECT_MAP))
		return -ELOOP;
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return jb_put(b, "null", 4);
	case MSGPACK_OBJECT_BOOLEAN:
		return o->via.boolean ? jb_put(b, "true", 4) : jb_put(b, "false", 5);
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		n = snprintf(num, sizeof num, "%llu", (unsigned long long)o->via.u64);
		return jb_put(b, num, (size_t)n);
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		n = snprintf(num, sizeof num, "%lld", (long long)o->via.i64);
		return jb_put(b, num, (size_t)n);
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return jb_double(b, o->via.f64);
	case MSGPACK_OBJECT_STR:
		if (!utf8_valid(o->via.str.ptr, o->via.str.size))
			return -EILSEQ;
		return jb_string(b, o->via.str.ptr, o->via.str.size);
	case MSGPACK_OBJECT_BIN: {
		/* Base64 of the bytes, as frame_to_json gives; the size is known before encoding. */
		size_t need = ((size_t)o->via.bin.size + 2) / 3 * 4 + 2;
		if (need > b->max - b->len)
			return -EMSGSIZE;
		char *enc = base64_encode((const unsigned char *)o->via.bin.ptr, o->via.bin.size);
		if (!enc)
			return -ENOMEM;
		rc = jb_put(b, "\"", 1);
		if (rc == 0 && (rc = jb_put(b, enc, strlen(enc))) == 0)
			rc = jb_put(b, "\"", 1);
		free(enc);
		return rc;
	}
	case MSGPACK_OBJECT_ARRAY:
		rc = jb_put(b, "[", 1);
		for (uint32_t i = 0; rc == 0 && i < o->via.array.size; i++) {
			if (i && (rc = jb_put(b, ",", 1)) < 0)
				break;
			rc = jb_value(b, &o->via.array.ptr[i], depth + 1);
		}
		return rc == 0 ? jb_put(b, "]", 1) : rc;
	case MSGPACK_OBJECT_MAP:
		rc = jb_put(b, "{", 1);
		for (uint32_t i = 0; rc == 0 && i < o->via.map.size; i++) {
			const msgpack_object_kv *kv = &o->via.map.ptr[i];
			if (kv->key.type != MSGPACK_OBJECT_STR)
				return -EBADMSG;
			if (i && (rc = jb_put(b, ",", 1)) < 0)
				break;
			if ((rc = jb_value(b, &kv->key, depth + 1)) < 0 || (rc = jb_put(b, ":", 1)) < 0)
				break;
			rc = jb_value(b, &kv->val, depth + 1);
		}
		return rc == 0 ? jb_put(b, "}", 1) : rc;
	default:
		return -EBADMSG;   /* ext: not part of the protocol */
	}
}

int frame_to_json_text(const msgpack_object *o, size_t max, char **out, size_t *len)
{
	struct jbuf b = { .max = max };
	*out = NULL;
	*len = 0;
	if (!o)
		return -EINVAL;
	int rc = jb_value(&b, o, 1);
	if (rc == 0 && !b.p)
		rc = jb_reserve(&b, 0);
	if (rc < 0) {
		free(b.p);
		return rc;
	}
	b.p[b.len] = '\0';
	*out = b.p;
	*len = b.len;
	return 0;
}

/* For bytes the supervisor embeds in JSON it writes by hand (a stored result read as a
 * resource): the same escaping as jb_string, so the two never disagree. */
int frame_json_quote(const char *s, size_t n, char **out, size_t *outlen)
{
	struct jbuf b = { .max = SIZE_MAX - 1 };
	*out = NULL;
	/* Room for the common case (few escapes) at once, so the copy runs without regrowing. */
	int rc = jb_reserve(&b, n + n / 16 + 2);
	if (rc == 0)
		rc = jb_string(&b, s, n);
	if (rc < 0) {
		free(b.p);
		return rc;
	}
	b.p[b.len] = '\0';
	*out = b.p;
	*outlen = b.len;
	return 0;
}

/* ---- incremental reader ---------------------------------------------------- */

struct frame_reader {
	size_t max;          /* largest payload accepted */
	unsigned char *buf;
	size_t off;          /* first byte not yet returned as a frame */
	size_t len;          /* bytes held */
	size_t cap;
	size_t checked;      /* offset of the next frame header not yet checked against max */
	int err;             /* sticky: once poisoned, always poisoned */
};

/* A reader that has just returned a big frame keeps no big buffer around while idle. */
#define READER_KEEP_BYTES (64u << 10)

/* The cap is clamped to UINT32_MAX because a header cannot announce more. */
struct frame_reader *frame_reader_new(size_t max_frame)
{
	struct frame_reader *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	if (max_frame == 0)
		max_frame = FRAME_MAX_DEFAULT;
	r->max = max_frame < UINT32_MAX ? max_frame : UINT32_MAX;
	return r;
}

void frame_reader_free(struct frame_reader *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r);
}

/* Validate every header now visible, so an oversized one is refused as soon as its four
 * bytes arrive and before any room is made for its payload. */
static int reader_scan(struct frame_reader *r)
{
	while (r->len - r->checked >= FRAME_HEADER_BYTES) {
		uint32_t n = io_get_be32(r->buf + r->checked);
		if (n > r->max)
			return -EMSGSIZE;
		if (r->len - r->checked - FRAME_HEADER_BYTES < n) {
			break;
		}
		r->checked += FRAME_HEADER_BYTES + n;
	}
	return 0;
}

int frame_reader_feed(struct frame_reader *r, const void *buf, size_t len)
{
	if (r->err)
		return r->err;
	if (len == 0)
		return 0;
	/* Drop returned frames first so the buffer holds only what is still pending. */
	if (r->off > 0) {
		memmove(r->buf, r->buf + r->off, r->len - r->off);
		r->len -= r->off;
		r->checked -= r->off;
		r->off = 0;
	}
	size_t pending = r->len;
	/* Check the header of the frame in progress using the new bytes before growing. */
	if (pending - r->checked < FRAME_HEADER_BYTES &&
	    pending - r->checked + len >= FRAME_HEADER_BYTES) {
		unsigned char hdr[FRAME_HEADER_BYTES];
		size_t have = pending - r->checked;
		if (have)
			memcpy(hdr, r->buf + r->checked, have);
		memcpy(hdr + have, buf, FRAME_HEADER_BYTES - have);
		if (io_get_be32(hdr) > r->max) {
			r->err = -EMSGSIZE;
			return r->err;
		}
	}
	if (len > SIZE_MAX - pending) {
		r->err = -ENOMEM;
		return r->err;
	}
	size_t need = pending + len;
	if (need > r->cap) {
		/* Grow geometrically but never past one whole frame, so the buffer stays within
		 * max frame + header + the caller's chunk while frames are being popped. */
		size_t cap = r->cap ? r->cap * 2 : 4096;
		size_t ceiling = r->max + FRAME_HEADER_BYTES;
		if (cap > ceiling)
			cap = ceiling;
		if (cap < need)
			cap = need;
		unsigned char *nb = realloc(r->buf, cap);
		if (!nb) {
			r->err = -ENOMEM;
			return r->err;
		}
		r->buf = nb;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, buf, len);
	r->len += len;
	int rc = reader_scan(r);
	if (rc < 0)
		r->err = rc;
	return rc;
}

/* Frames are popped one at a time so the caller can stop (pause a job's input) between any
 * two; a decode error poisons the reader, since the stream cannot be resynchronised after a
 * bad frame. */
int frame_reader_next(struct frame_reader *r, struct frame *f)
{
	memset(f, 0, sizeof *f);
	if (r->err)
		return r->err;
	size_t avail = r->len - r->off;
	if (avail < FRAME_HEADER_BYTES)
		return 0;
	uint32_t n = io_get_be32(r->buf + r->off);
	if (n > r->max) {
		r->err = -EMSGSIZE;
		return r->err;
	}
	if (avail - FRAME_HEADER_BYTES < n)
		return 0;
	int rc = frame_decode(r->buf + r->off + FRAME_HEADER_BYTES, n, f);
	if (rc < 0) {
		r->err = rc;
		return rc;
	}
	r->off += FRAME_HEADER_BYTES + n;
	if (r->off == r->len) {
		r->off = r->len = r->checked = 0;
		if (r->cap > READER_KEEP_BYTES) {
			free(r->buf);
			r->buf = NULL;
			r->cap = 0;
		}
	}
	return 1;
}

size_t frame_reader_pending(const struct frame_reader *r)
{
	return r->len - r->off;
}

/* ---- encoding -------------------------------------------------------------- */

void frame_map_begin(struct frame_map *m, size_t nkeys)
{
	msgpack_sbuffer_init(&m->sb);
	msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
	msgpack_pack_map(&m->pk, nkeys);
}

/* Room for the length header is left at the front and filled in by frame_finish(), once the
 * payload's size is known: one buffer, one write. */
void frame_begin(msgpack_sbuffer *sbuf, msgpack_packer *pk)
{
	static const char zero[FRAME_HEADER_BYTES];
	msgpack_sbuffer_init(sbuf);
	msgpack_sbuffer_write(sbuf, zero, sizeof zero);
	msgpack_packer_init(pk, sbuf, msgpack_sbuffer_write);
}

int frame_finish(msgpack_sbuffer *sbuf)
{
	/* A failed allocation inside the packer silently drops bytes, so the result is walked
	 * like a received frame: nothing malformed ever leaves this process. */
	if (!sbuf->data || sbuf->size <= FRAME_HEADER_BYTES)
		return -ENOMEM;
	size_t n = sbuf->size - FRAME_HEADER_BYTES;
	if (n > FRAME_MAX_DEFAULT)
		return -EMSGSIZE;
	int rc = frame_check(sbuf->data + FRAME_HEADER_BYTES, n);
	if (rc < 0)
		return rc;
	io_put_be32((unsigned char *)sbuf->data, (uint32_t)n);
	return 0;
}

/* NULL packs as nil, so an optional field may be passed straight through. */
void frame_pack_str(msgpack_packer *pk, const char *s)
{
	if (!s) {
		msgpack_pack_nil(pk);
		return;
	}
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

void frame_pack_kv_str(msgpack_packer *pk, const char *key, const char *val)
{
	frame_pack_str(pk, key);
	frame_pack_str(pk, val);
}

void frame_pack_kv_int(msgpack_packer *pk, const char *key, int64_t v)
{
	frame_pack_str(pk, key);
	msgpack_pack_int64(pk, v);
}

void frame_pack_kv_double(msgpack_packer *pk, const char *key, double v)
{
	frame_pack_str(pk, key);
	msgpack_pack_double(pk, v);
}

void frame_pack_kv_bool(msgpack_packer *pk, const char *key, int v)
{
	frame_pack_str(pk, key);
	if (v)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
}

void frame_pack_kv_bin(msgpack_packer *pk, const char *key, const void *p, size_t len)
{
	frame_pack_str(pk, key);
	msgpack_pack_bin_with_body(pk, p, len);
}

/* Whole numbers become msgpack integers so a job reading them gets an int, not a float;
 * non-finite numbers become nil as cJSON would print them.  Raw values are refused: their
 * text was never parsed, so nothing here can say what they hold. */
static int pack_json(msgpack_packer *pk, const cJSON *v, int depth)
{
	if (cJSON_IsNull(v))
		return msgpack_pack_nil(pk) ? -ENOMEM : 0;
	if (cJSON_IsFalse(v))
		return msgpack_pack_false(pk) ? -ENOMEM : 0;
	if (cJSON_IsTrue(v))
		return msgpack_pack_true(pk) ? -ENOMEM : 0;
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (!isfinite(d))
			return msgpack_pack_nil(pk) ? -ENOMEM : 0;
		/* [-2^63, 2^63): every integral double in it converts to int64 exactly. */
		if (d == floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
			return msgpack_pack_int64(pk, (int64_t)d) ? -ENOMEM : 0;
		return msgpack_pack_double(pk, d) ? -ENOMEM : 0;
	}
	if (cJSON_IsString(v)) {
		const char *s = v->valuestring ? v->valuestring : "";
		return msgpack_pack_str_with_body(pk, s, strlen(s)) ? -ENOMEM : 0;
	}
	if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
		if (depth > FRAME_MAX_DEPTH)
			return -ELOOP;
		size_t n = 0;
		for (const cJSON *c = v->child; c; c = c->next)
			n++;
		if (n > UINT32_MAX)
			return -EMSGSIZE;
		int pr = cJSON_IsArray(v) ? msgpack_pack_array(pk, n) : msgpack_pack_map(pk, n);
		if (pr)
			return -ENOMEM;
		for (const cJSON *c = v->child; c; c = c->next) {
			if (cJSON_IsObject(v)) {
				const char *k = c->string ? c->string : "";
				if (msgpack_pack_str_with_body(pk, k, strlen(k)))
					return -ENOMEM;
			}
			int rc = pack_json(pk, c, depth + 1);
			if (rc < 0)
				return rc;
		}
		return 0;
	}
	return -EINVAL;     /* cJSON_Raw: text we cannot vouch for */
}

int frame_pack_json(msgpack_packer *pk, const cJSON *v)
{
	if (!v)
		return -EINVAL;
	return pack_json(pk, v, 1);
}
