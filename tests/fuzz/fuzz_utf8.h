/* tests/fuzz/fuzz_utf8.h — checks the fuzz targets share: is a byte string well-formed UTF-8,
 * and is a message one line of it.  Header-only (static inline), like tests/unit/check.h.
 *
 * A message may carry invalid UTF-8 only if the input did (a key or value echoed back); what
 * forkpoint adds to it, such as clipping, must never break a character. */
#ifndef FP_FUZZ_UTF8_H
#define FP_FUZZ_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* 1 if s[0..n) is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF). */
static inline int fuzz_utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		size_t len;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			len = 2;
			cp = c & 0x1F;
		} else if (c >= 0xE0 && c <= 0xEF) {
			len = 3;
			cp = c & 0x0F;
		} else if (c >= 0xF0 && c <= 0xF4) {
			len = 4;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (n - i < len)
			return 0;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3F);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return 0;
		i += len;
	}
	return 1;
}

/* 1 if s (NUL-terminated) holds no control bytes: it prints as exactly one line. */
static inline int fuzz_one_line(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7F)
			return 0;
	return 1;
}

#endif
