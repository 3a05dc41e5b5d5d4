/* proto/utf8.c — see utf8.h. */
#include "proto/utf8.h"

#include <string.h>

/* 0xC0 and 0xC1 can only start overlong 2-byte forms and 0xF5..0xFF only code points above
 * U+10FFFF, so they are refused by the lead byte alone, before any continuation is read. */
size_t utf8_seq_len(unsigned char lead)
{
	if (lead < 0x80)
		return 1;
	return lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 :
	       lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
}

/* The lead byte fixes the high bits of the code point; only the second byte can still make
 * the sequence overlong (E0, F0), a surrogate (ED) or too large (F4), so only it has a range
 * narrower than 0x80..0xBF. */
int utf8_cont_ok(const unsigned char *p, size_t k)
{
	unsigned c = p[k];
	if ((c & 0xc0) != 0x80)
		return 0;
	if (k > 1)
		return 1;
	switch (p[0]) {
	case 0xe0: return c >= 0xa0;
	case 0xed: return c <= 0x9f;
	case 0xf0: return c >= 0x90;
	case 0xf4: return c <= 0x8f;
	default:   return 1;
	}
}

/* The length is checked against avail before any continuation byte is read: a sequence cut
 * off by the end of a buffer must never make us read past it. */
size_t utf8_char_len(const char *s, size_t avail)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = utf8_seq_len(p[0]);
	if (n == 0 || n > avail)
		return 0;
	for (size_t k = 1; k < n; k++)
		if (!utf8_cont_ok(p, k))
			return 0;
	return n;
}

int utf8_valid(const char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		/* ASCII first, byte by byte: most text is all of it. */
		if (s[i] != 0 && (unsigned char)s[i] < 0x80) {
			i++;
			continue;
		}
		size_t n = s[i] ? utf8_char_len(s + i, len - i) : 0;
		if (n == 0)
			return 0;
		i += n;
	}
	return 1;
}

/* s[max] is the first byte that would be cut off; if it is a continuation byte, the cut
 * falls inside a character, so move back to that character's lead.  Cutting at the lead
 * (not after the whole character) is what keeps the result within max. */
size_t utf8_clip(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

/* At most 3 bytes skipped: a run of more continuation bytes is malformed text, not the tail
 * of one character, and is left to the repairs (utf8_scrub, utf8_sanitize) to mark. */
size_t utf8_resync(const char *s, size_t len)
{
	size_t k = 0;
	while (k < len && k < 3 && ((unsigned char)s[k] & 0xc0) == 0x80)
		k++;
	return k;
}

/* A sequence is at most 4 bytes: look back over at most 3 continuation bytes for its lead and
 * compare the length that lead announces with what is left of it. */
size_t utf8_trim_tail(char *s, size_t len)
{
	size_t i = len;
	while (i > 0 && len - i < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i > 0) {
		unsigned char lead = (unsigned char)s[i - 1];
		size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
		if (len - (i - 1) < want)
			len = i - 1;
	}
	s[len] = '\0';
	return len;
}

/* Counting non-continuation bytes needs no decoding, so it cannot fail on malformed input
 * and never reads past len. */
size_t utf8_count(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			n++;
	return n;
}

/* In place and byte for byte: each bad byte becomes one '?', so the string never grows and
 * the caller's buffer is always big enough.  Only the offending byte is replaced, so the
 * well-formed characters after it survive. */
void utf8_scrub(char *s)
{
	size_t left = strlen(s);
	unsigned char *p = (unsigned char *)s;
	while (left > 0) {
		size_t n = utf8_char_len((const char *)p, left);
		if (n == 0) {
			*p = '?';
			n = 1;
		}
		p += n;
		left -= n;
	}
}

/* Each bad byte (and each NUL, which must not reach a C string) becomes U+FFFD, three bytes,
 * so out must hold 3 * len + 1 (utf8.h).  One replacement per byte rather than per broken
 * sequence keeps the output length a simple function of the input. */
size_t utf8_sanitize(const char *s, size_t len, char *out)
{
	size_t o = 0, i = 0;
	while (i < len) {
		size_t n = s[i] ? utf8_char_len(s + i, len - i) : 0;
		if (n) {
			memcpy(out + o, s + i, n);
			o += n;
			i += n;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	return o;
}
