/* proto/b64.c — see b64.h. */
#include "proto/b64.h"

#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Whole 3-byte groups first, then one padded group for the 1 or 2 bytes left, so the loop
 * body has no branches.  Always padded: the strict decoder takes text with or without '=',
 * and padded text is what every other base64 reader expects. */
size_t b64_encode(const void *in, size_t n, char *out)
{
	const unsigned char *p = in;
	size_t o = 0, i = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = alphabet[(v >> 6) & 63];
		out[o++] = alphabet[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
		out[o++] = alphabet[v >> 18];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = 0;
	return o;
}

/* 0..63 for alphabet characters, 64 for anything else.
 * A 256-entry table rather than range tests: every byte, including the ones above 0x7f that a
 * signed char would make negative, indexes it safely, and 64 marks all of them as invalid with
 * one bit test per group. */
static const unsigned char dec[256] = {
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 62, 64, 64, 64, 63,
	52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 64, 64, 64, 64, 64, 64,
	64,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14,
	15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 64, 64, 64, 64, 64,
	64, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
	41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
	64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64,
};

static unsigned char val(unsigned char c)
{
	return dec[c];
}

/* Strict so that one byte string has exactly one text: upload chunks arrive in it, and a lax
 * decoder (whitespace, stray padding, non-zero trailing bits) would let two texts mean the same
 * chunk and a garbled chunk pass as a valid one.  The failing offset is reported so the
 * client's error message can point at the character. */
ssize_t b64_decode(const char *in, size_t len, void *out, size_t *bad_at)
{
	unsigned char *o = out;
	size_t n = len, w = 0;
	/* Padding: at most two '=', only at the end, and only where a group is short. */
	size_t pad = 0;
	while (n > 0 && in[n - 1] == '=' && pad < 2) {
		n--;
		pad++;
	}
	if (pad && (len % 4) != 0) {
		*bad_at = n;
		return -1;
	}
	if (n % 4 == 1) {
		*bad_at = n - 1;
		return -1;
	}
	size_t i = 0;
	for (; i + 4 <= n; i += 4) {
		unsigned char a = val((unsigned char)in[i]), b = val((unsigned char)in[i + 1]);
		unsigned char c = val((unsigned char)in[i + 2]), d = val((unsigned char)in[i + 3]);
		if ((a | b | c | d) & 64) {
			size_t k = i;
			while (val((unsigned char)in[k]) != 64)
				k++;
			*bad_at = k;
			return -1;
		}
		uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | d;
		o[w++] = (unsigned char)(v >> 16);
		o[w++] = (unsigned char)(v >> 8);
		o[w++] = (unsigned char)v;
	}
	size_t rest = n - i;
	if (rest) {
		unsigned char q[3] = { 0, 0, 0 };
		for (size_t k = 0; k < rest; k++) {
			q[k] = val((unsigned char)in[i + k]);
			if (q[k] & 64) {
				*bad_at = i + k;
				return -1;
			}
		}
		uint32_t v = (uint32_t)q[0] << 18 | (uint32_t)q[1] << 12 | (uint32_t)q[2] << 6;
		/* Bits below the last whole byte must be zero, or two texts decode alike. */
		if ((rest == 2 && (v & 0xffff)) || (rest == 3 && (v & 0xff))) {
			*bad_at = i + rest - 1;
			return -1;
		}
		o[w++] = (unsigned char)(v >> 16);
		if (rest == 3)
			o[w++] = (unsigned char)(v >> 8);
	}
	return (ssize_t)w;
}
