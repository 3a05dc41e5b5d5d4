/* tests/unit/test_utf8.c — proto/utf8: the checker against an independent decoder over every
 * 1- and 2-byte string, every 3-byte one with a 3-byte lead and a sample of 4-byte ones, the
 * boundary characters and each class of ill-formed input (overlong, surrogate, above U+10FFFF, stray and missing continuation
 * bytes, NUL), cutting and trimming at every position of a mixed string, counting, and the two
 * repairs ('?' in place, U+FFFD into a buffer), whose output is always well-formed.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "proto/utf8.h"
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The oracle: decode by arithmetic, the way RFC 3629 states it, not by byte ranges as the code
 * under test does.  1 if b[0..n) is exactly one well-formed character (NUL allowed). */
static int ref_one(const unsigned char *b, size_t n)
{
	uint32_t cp;
	size_t want;
	if (b[0] < 0x80) {
		want = 1;
		cp = b[0];
	} else if ((b[0] & 0xe0) == 0xc0) {
		want = 2;
		cp = b[0] & 0x1f;
	} else if ((b[0] & 0xf0) == 0xe0) {
		want = 3;
		cp = b[0] & 0x0f;
	} else if ((b[0] & 0xf8) == 0xf0) {
		want = 4;
		cp = b[0] & 0x07;
	} else {
		return 0;
	}
	if (n != want)
		return 0;
	for (size_t k = 1; k < n; k++) {
		if ((b[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (b[k] & 0x3f);
	}
	static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	return cp >= min[n] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
}

/* 1 if b[0..n) is a run of whole characters by the oracle, with no NUL. */
static int ref_valid(const unsigned char *b, size_t n)
{
	size_t i = 0;
	while (i < n) {
		size_t k = 1;
		while (k <= 4 && (i + k > n || !ref_one(b + i, k)))
			k++;
		if (k > 4 || b[i] == 0)
			return 0;
		i += k;
	}
	return 1;
}

/* Every 1- and 2-byte string, every 3-byte string with a lead byte E0..EF, and 4-byte strings
 * with a lead EF..F8 (all second and third bytes): utf8_char_len says n exactly when the
 * oracle says the string is one character, utf8_valid when it is whole characters. */
static void test_exhaustive(struct tally *t)
{
	unsigned char b[4];
	long bad = 0, n4 = 0;
	for (unsigned x = 0; x < 256; x++) {
		b[0] = (unsigned char)x;
		if ((utf8_char_len((char *)b, 1) == 1) != ref_one(b, 1))
			bad++;
	}
	for (unsigned x = 0; x < 65536; x++) {
		b[0] = (unsigned char)(x >> 8);
		b[1] = (unsigned char)x;
		size_t got = utf8_char_len((char *)b, 2);
		int one = ref_one(b, 1), two = ref_one(b, 2);
		if (got != (one ? 1u : two ? 2u : 0u) || utf8_valid((char *)b, 2) != ref_valid(b, 2))
			bad++;
	}
	for (unsigned x = 0xe0u << 16; x < 0xf0u << 16; x++) {
		b[0] = (unsigned char)(x >> 16);
		b[1] = (unsigned char)(x >> 8);
		b[2] = (unsigned char)x;
		if ((utf8_char_len((char *)b, 3) == 3) != ref_one(b, 3))
			bad++;
		if (utf8_valid((char *)b, 3) != ref_valid(b, 3))
			bad++;
	}
	for (unsigned lead = 0xef; lead <= 0xf8; lead++)
		for (unsigned x = 0; x < 65536; x++) {
			b[0] = (unsigned char)lead;
			b[1] = (unsigned char)(x >> 8);
			b[2] = (unsigned char)x;
			b[3] = (unsigned char)(0x80 + (x % 0x41));   /* 0x80..0xC0 */
			n4++;
			if ((utf8_char_len((char *)b, 4) == 4) != ref_one(b, 4) ||
			    utf8_valid((char *)b, 4) != ref_valid(b, 4))
				bad++;
		}
	CHECKF(t, bad == 0, "%ld of the 1..4-byte strings disagree with the oracle", bad);
	CHECK(t, bad == 0 && n4 > 0, "utf8_char_len and utf8_valid agree with an arithmetic decoder");
}

static void test_boundaries(struct tally *t)
{
	CHECK(t, utf8_valid("", 0) && utf8_valid("plain ascii", 11), "ASCII and the empty string");
	CHECK(t, utf8_valid("\xc2\x80", 2) && utf8_valid("\xdf\xbf", 2) && utf8_valid("\xe0\xa0\x80", 3) &&
	      utf8_valid("\xef\xbf\xbf", 3) && utf8_valid("\xf0\x90\x80\x80", 4) &&
	      utf8_valid("\xf4\x8f\xbf\xbf", 4) && utf8_valid("\xed\x9f\xbf", 3) &&
	      utf8_valid("\xee\x80\x80", 3), "U+0080, U+07FF, U+0800, U+FFFF, U+10000, U+10FFFF, around the surrogates");
	CHECK(t, !utf8_valid("\xc0\x80", 2) && !utf8_valid("\xc1\xbf", 2) && !utf8_valid("\xe0\x9f\xbf", 3) &&
	      !utf8_valid("\xf0\x8f\xbf\xbf", 4), "overlong forms are refused");
	CHECK(t, !utf8_valid("\xed\xa0\x80", 3) && !utf8_valid("\xed\xbf\xbf", 3), "surrogates are refused");
	CHECK(t, !utf8_valid("\xf4\x90\x80\x80", 4) && !utf8_valid("\xf5\x80\x80\x80", 4) &&
	      !utf8_valid("\xff", 1), "above U+10FFFF, and bytes no character uses, are refused");
	CHECK(t, !utf8_valid("\x80", 1) && !utf8_valid("a\xbf", 2) && !utf8_valid("\xe2\x82", 2) &&
	      !utf8_valid("\xe2\x82x", 3) && !utf8_valid("\xf0\x9f\xa6", 3),
	      "stray and missing continuation bytes are refused");
	CHECK(t, !utf8_valid("a\0b", 3) && utf8_valid("a\0b", 1), "a NUL inside the length is refused");
	CHECK(t, utf8_char_len("\0", 1) == 1 && utf8_char_len("\xe2\x82\xac", 2) == 0 &&
	      utf8_char_len("\xe2\x82\xac", 3) == 3, "utf8_char_len: NUL is one byte; avail cuts a character off");
	CHECK(t, utf8_seq_len(0) == 1 && utf8_seq_len(0x7f) == 1 && utf8_seq_len(0x80) == 0 &&
	      utf8_seq_len(0xc1) == 0 && utf8_seq_len(0xc2) == 2 && utf8_seq_len(0xe0) == 3 &&
	      utf8_seq_len(0xf4) == 4 && utf8_seq_len(0xf5) == 0, "utf8_seq_len by lead byte");
}

/* "aé€🦦" cut at every max: the cut never splits a character and keeps as much as fits. */
static void test_clip_trim(struct tally *t)
{
	static const char s[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\xa6\xa6z";
	static const size_t starts[] = { 0, 1, 3, 6, 10, 11 };   /* character boundaries */
	size_t len = sizeof s - 1, bad = 0;
	for (size_t max = 0; max <= len + 2; max++) {
		size_t c = utf8_clip(s, len, max), want = 0;
		for (size_t i = 0; i < sizeof starts / sizeof *starts; i++)
			if (starts[i] <= max)
				want = starts[i];
		if (max >= len)
			want = len;
		if (c != want || !utf8_valid(s, c))
			bad++;
	}
	CHECKF(t, bad == 0, "utf8_clip: %zu cut points wrong", bad);
	CHECK(t, bad == 0, "utf8_clip cuts before the character it would split, and keeps what fits");

	bad = 0;
	for (size_t cut = 0; cut <= len; cut++) {
		char buf[32];
		memcpy(buf, s, cut);
		size_t n = utf8_trim_tail(buf, cut), want = 0;
		for (size_t i = 0; i < sizeof starts / sizeof *starts; i++)
			if (starts[i] <= cut)
				want = starts[i];
		if (cut == len)
			want = len;
		if (n != want || buf[n] != '\0' || !utf8_valid(buf, n))
			bad++;
	}
	CHECKF(t, bad == 0, "utf8_trim_tail: %zu truncations wrong", bad);
	CHECK(t, bad == 0, "utf8_trim_tail drops a sequence cut off at the end, and only that");
	char junk[] = "ab\x80\x80\x80\x80";
	CHECK(t, utf8_trim_tail(junk, 6) == 6, "utf8_trim_tail leaves stray continuation bytes to the repairs");
}

static void test_resync(struct tally *t)
{
	CHECK(t, utf8_resync("\x82\xac rest", 7) == 2 && utf8_resync("abc", 3) == 0 &&
	      utf8_resync("\x80\x80\x80\x80x", 5) == 3 && utf8_resync("\x80\x80", 1) == 1 &&
	      utf8_resync("", 0) == 0,
	      "utf8_resync skips the rest of a cut character, at most 3 bytes, within len");
}

static void test_count(struct tally *t)
{
	static const char s[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\xa6\xa6z";
	CHECK(t, utf8_count(s, sizeof s - 1) == 5 && utf8_count(s, 0) == 0 && utf8_count(s, 3) == 2,
	      "utf8_count counts characters, not bytes");
}

static void test_repairs(struct tally *t)
{
	char a[] = "ok \xc3\xa9 \xff \xc3 \xed\xa0\x80 \xf0\x9f\xa6\xa6 {\"k\":1}\xe2\x82";
	utf8_scrub(a);
	CHECK(t, strcmp(a, "ok \xc3\xa9 ? ? ??? \xf0\x9f\xa6\xa6 {\"k\":1}??") == 0,
	      "utf8_scrub: each bad byte becomes '?', characters and ASCII stay");
	char e[] = "";
	utf8_scrub(e);
	CHECK(t, e[0] == 0, "utf8_scrub: empty string");

	static const char in[] = "x\0\xc3\xa9\xff\xe2\x82";
	char out[3 * sizeof in + 1];
	size_t n = utf8_sanitize(in, sizeof in - 1, out);
	CHECK(t, n == strlen(out) && strcmp(out, "x\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") == 0,
	      "utf8_sanitize: NUL and bad bytes become U+FFFD, one per byte");
	CHECK(t, utf8_sanitize("", 0, out) == 0 && out[0] == 0, "utf8_sanitize: empty input");

	/* Random bytes: both repairs always give well-formed text, within the stated bound. */
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	int bad = 0;
	for (int r = 0; r < 20000; r++) {
		char buf[24], big[3 * 24 + 1];
		size_t len = (size_t)(check_rand(&seed) % sizeof buf);
		for (size_t i = 0; i < len; i++) {
			uint64_t x = check_rand(&seed);
			/* Mostly bytes near the interesting ranges. */
			buf[i] = (char)(x & 1 ? 0x80 + (x >> 8) % 0x78 : (x >> 8) & 0xff);
		}
		size_t m = utf8_sanitize(buf, len, big);
		if (m > 3 * len || !utf8_valid(big, m) || (utf8_valid(buf, len) && (m != len || memcmp(big, buf, len))))
			bad++;
		char z[sizeof buf + 1];
		memcpy(z, buf, len);
		z[len] = 0;
		utf8_scrub(z);
		if (!utf8_valid(z, strlen(z)))
			bad++;
	}
	CHECKF(t, bad == 0, "%d random inputs repaired into ill-formed text", bad);
	CHECK(t, bad == 0, "repairs of random bytes are always well-formed; valid text is left as it is");
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_exhaustive(&t);
	test_boundaries(&t);
	test_clip_trim(&t);
	test_resync(&t);
	test_count(&t);
	test_repairs(&t);
	return check_done(&t);
}
