/* proto/termsafe.c — see termsafe.h. */
#include "proto/termsafe.h"
#include "proto/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char hex[] = "0123456789abcdef";

/* \xHH, or \u00HH in JSON mode. */
static size_t esc_byte(unsigned flags, unsigned c, char *out)
{
	if (flags & TERMSAFE_JSON) {
		memcpy(out, "\\u00", 4);
		out[4] = hex[(c >> 4) & 15];
		out[5] = hex[c & 15];
		return 6;
	}
	out[0] = '\\';
	out[1] = 'x';
	out[2] = hex[(c >> 4) & 15];
	out[3] = hex[c & 15];
	return 4;
}

/* A byte that is not part of valid UTF-8: \xHH, or U+FFFD as \ufffd in JSON mode. */
static size_t esc_bad(unsigned flags, unsigned c, char *out)
{
	if (flags & TERMSAFE_JSON) {
		memcpy(out, "\\ufffd", 6);
		return 6;
	}
	return esc_byte(flags, c, out);
}

/* \uHHHH for a code point below U+10000 (every one dangerous() picks): the same spelling in
 * text and JSON modes, and one a reader can look up. */
static size_t esc_cp(uint32_t cp, char *out)
{
	out[0] = '\\';
	out[1] = 'u';
	for (int i = 0; i < 4; i++)
		out[2 + i] = hex[(cp >> (12 - 4 * i)) & 15];
	return 6;
}

/* Valid characters that still drive a terminal or mislead a reader: the C1 controls (0x9b is
 * CSI on many terminals, as ESC [ is) and the bidirectional embeddings, overrides and
 * isolates, which can make text display in another order than it runs (CVE-2021-42574). */
static int dangerous(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

/* Render the character (or the one bad byte) at p, with avail bytes available, into out and
 * set *used.  Returns the bytes written, or -1 when p starts a sequence that the end of the
 * input cut off and more input may complete it (final == 0). */
static long unit(unsigned flags, const unsigned char *p, size_t avail, int final, char *out,
		 size_t *used)
{
	unsigned c = p[0];
	*used = 1;
	if (c < 0x80) {
		int keep = (c >= 0x20 && c != 0x7f) || (c == '\n' && (flags & TERMSAFE_NL)) ||
			   (c == '\t' && (flags & TERMSAFE_TAB));
		if (!keep)
			return (long)esc_byte(flags, c, out);
		out[0] = (char)c;
		return 1;
	}
	size_t n = utf8_seq_len((unsigned char)c);
	if (n == 0)
		return (long)esc_bad(flags, c, out);
	size_t have = n < avail ? n : avail;
	for (size_t k = 1; k < have; k++)
		if (!utf8_cont_ok(p, k))
			return (long)esc_bad(flags, c, out);
	if (have < n)
		return final ? (long)esc_bad(flags, c, out) : -1;
	uint32_t cp = n == 2 ? (c & 0x1fu) : n == 3 ? (c & 0x0fu) : (c & 0x07u);
	for (size_t k = 1; k < n; k++)
		cp = (cp << 6) | (p[k] & 0x3fu);
	*used = n;
	if (dangerous(cp))
		return (long)esc_cp(cp, out);
	memcpy(out, p, n);
	return (long)n;
}

/* A stream's state: flags, and up to 3 bytes of a sequence cut off by the end of a chunk. */
void termsafe_init(struct termsafe *ts, unsigned flags)
{
	memset(ts, 0, sizeof *ts);
	ts->flags = flags;
}

/* Finish a sequence held from the previous chunk with the first bytes of this one.  Returns
 * the bytes written; *consumed says how many of in were used.  If in is too short to finish
 * it, everything is held again. */
static size_t feed_pending(struct termsafe *ts, const unsigned char *in, size_t len, char *out,
			   size_t *consumed)
{
	unsigned char tmp[8];
	size_t take = len < 4 ? len : 4, total = ts->npend + take, pos = 0, o = 0;
	memcpy(tmp, ts->pend, ts->npend);
	memcpy(tmp + ts->npend, in, take);
	while (pos < ts->npend) {
		size_t used;
		long w = unit(ts->flags, tmp + pos, total - pos, 0, out + o, &used);
		if (w < 0) {
			/* Only when all of in was taken: a sequence is at most 4 bytes. */
			memmove(ts->pend, tmp + pos, total - pos);
			ts->npend = total - pos;
			*consumed = len;
			return o;
		}
		o += (size_t)w;
		pos += used;
	}
	*consumed = pos - ts->npend;
	ts->npend = 0;
	return o;
}

/* Output streams arrive in arbitrary chunks; a character split across two of them is held
 * (not escaped as two bad bytes) and finished by the next feed, so chunking never changes
 * the result. */
size_t termsafe_feed(struct termsafe *ts, const void *in, size_t len, char *out)
{
	const unsigned char *p = in;
	size_t i = 0, o = 0;
	if (ts->npend && len)
		o = feed_pending(ts, p, len, out, &i);
	while (i < len) {
		size_t used;
		long w = unit(ts->flags, p + i, len - i, 0, out + o, &used);
		if (w < 0) {
			memcpy(ts->pend, p + i, len - i);
			ts->npend = len - i;
			break;
		}
		o += (size_t)w;
		i += used;
	}
	return o;
}

/* At the real end, a held partial sequence is bytes that never became a character: they are
 * escaped as bad bytes. */
size_t termsafe_flush(struct termsafe *ts, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < ts->npend; i++)
		o += esc_bad(ts->flags, ts->pend[i], out + o);
	ts->npend = 0;
	return o;
}

/* One unit with final = 1: a cut-off sequence at the end of the caller's text is bad bytes,
 * never held. */
size_t termsafe_char(const char *p, size_t avail, unsigned flags, char *out, size_t *used)
{
	return (size_t)unit(flags, (const unsigned char *)p, avail, 1, out, used);
}

/* The overflow guard keeps TERMSAFE_OUT_MAX(len) from wrapping, since every byte may grow to
 * six. */
char *termsafe_str(const char *s, unsigned flags)
{
	size_t len = s ? strlen(s) : 0;
	if (len > (SIZE_MAX - 64) / 6)
		return NULL;
	char *out = malloc(TERMSAFE_OUT_MAX(len) + 1);
	if (!out)
		return NULL;
	struct termsafe ts;
	termsafe_init(&ts, flags);
	size_t o = termsafe_feed(&ts, s ? s : "", len, out);
	o += termsafe_flush(&ts, out + o);
	out[o] = '\0';
	return out;
}

/* For shortening text already made safe (a progress line): the result must stay valid UTF-8,
 * or the terminal would show a broken character at the end. */
char *termsafe_cut(char *s, size_t max)
{
	/* The cut goes before the lead byte of a split sequence. */
	s[utf8_clip(s, strlen(s), max)] = '\0';
	return s;
}
