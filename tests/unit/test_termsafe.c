/* tests/unit/test_termsafe.c — the terminal escaper: the attacks it exists for (title change,
 * OSC 52, screen clear, a prompt drawn over a line), each class of character it renders, what
 * it must leave alone, JSON mode keeping JSON's meaning, chunked input equal to one pass at
 * every split point, random bytes that always come out safe and within the bound, and the
 * supervisor's log lines, which quote job text their own way.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "proto/utf8.h"
#include "proto/termsafe.h"
#include "proto/frame.h"
#include "supervisor/core/log.h"
#include "check.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One-shot escape of n bytes (may hold NULs) into a static buffer. */
static const char *esc_n(const char *in, size_t n, unsigned flags)
{
	static char out[4096];
	struct termsafe ts;
	termsafe_init(&ts, flags);
	size_t o = termsafe_feed(&ts, in, n, out);
	o += termsafe_flush(&ts, out + o);
	out[o] = '\0';
	return out;
}

static int esc_is(const char *in, unsigned flags, const char *want)
{
	const char *got = esc_n(in, strlen(in), flags);
	if (strcmp(got, want) == 0)
		return 1;
	fprintf(stderr, "# escaped: '%s', wanted '%s'\n", got, want);
	return 0;
}

/* Independent of the code under test: valid UTF-8 (proto/utf8's checker), no control byte but
 * the kept \n / \t, no C1 or bidi control code point. */
static int is_safe(const char *s, size_t n, unsigned flags)
{
	const unsigned char *p = (const unsigned char *)s;
	if (!utf8_valid(s, n))
		return 0;
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		if (c < 0x80) {
			if ((c < 0x20 || c == 0x7f) && !(c == '\n' && (flags & TERMSAFE_NL)) &&
			    !(c == '\t' && (flags & TERMSAFE_TAB)))
				return 0;
			i++;
			continue;
		}
		size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
		uint32_t cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
		for (size_t k = 1; k < len; k++)
			cp = (cp << 6) | (p[i + k] & 0x3f);
		if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
		    (cp >= 0x2066 && cp <= 0x2069))
			return 0;
		i += len;
	}
	return 1;
}

static void test_attacks(struct tally *t)
{
	CHECK(t, esc_is("\x1b]0;pwned\x07", 0, "\\x1b]0;pwned\\x07"), "window title (OSC 0) shown, not run");
	CHECK(t, esc_is("\x1b]52;c;ZXZpbA==\x1b\\", 0, "\\x1b]52;c;ZXZpbA==\\x1b\\"),
	      "OSC 52 clipboard write shown, not run");
	CHECK(t, esc_is("\x1b[2J\x1b[H", TERMSAFE_TEXT, "\\x1b[2J\\x1b[H"), "screen clear shown, not run");
	CHECK(t, esc_is("done\r[sudo] password for root: ", TERMSAFE_TEXT,
			"done\\x0d[sudo] password for root: "), "a carriage return cannot draw over a line");
	CHECK(t, esc_is("ok\n[sudo] password: ", 0, "ok\\x0a[sudo] password: "),
	      "one-line fields: a newline cannot start a fake prompt line");
	CHECK(t, esc_is("\xc2\x9b" "31m", 0, "\\u009b31m"), "C1 CSI (U+009B) as UTF-8");
	CHECK(t, esc_is("\x9b" "31m", 0, "\\x9b31m"), "8-bit CSI byte (invalid UTF-8)");
	CHECK(t, esc_is("\x1bP+q\x1b\\", 0, "\\x1bP+q\\x1b\\"), "DCS query shown, not run");
	CHECK(t, esc_is("abc\xe2\x80\xae" "fdp.exe", 0, "abc\\u202efdp.exe"), "RLO (U+202E) shown");
}

static void test_classes(struct tally *t)
{
	static const char c0[] = "\x01\x08\x0b\x0c\x1f\x7f";
	CHECK(t, strcmp(esc_n(c0, sizeof c0 - 1, TERMSAFE_TEXT), "\\x01\\x08\\x0b\\x0c\\x1f\\x7f") == 0,
	      "C0 controls and DEL as \\xHH");
	CHECK(t, strcmp(esc_n("a\0b", 3, 0), "a\\x00b") == 0, "NUL as \\x00");
	CHECK(t, esc_is("a\tb\nc", TERMSAFE_TEXT, "a\tb\nc"), "TERMSAFE_TEXT keeps \\t and \\n");
	CHECK(t, esc_is("a\tb\nc", TERMSAFE_NL, "a\\x09b\nc"), "TERMSAFE_NL keeps \\n only");
	CHECK(t, esc_is("a\tb\nc", 0, "a\\x09b\\x0ac"), "no flags: both escaped");
	CHECK(t, esc_is("\xc2\x80|\xc2\x9f|\xc2\xa0", 0, "\\u0080|\\u009f|\xc2\xa0"),
	      "C1 range U+0080..U+009F, not U+00A0");
	CHECK(t, esc_is("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae", 0,
			"\\u202a\\u202b\\u202c\\u202d\\u202e"), "bidi embeddings and overrides U+202A..U+202E");
	CHECK(t, esc_is("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", 0,
			"\\u2066\\u2067\\u2068\\u2069"), "bidi isolates U+2066..U+2069");
	CHECK(t, esc_is("\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa", 0,
			"\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa"), "their neighbours pass");
	CHECK(t, esc_is("\xc0\xaf", 0, "\\xc0\\xaf"), "overlong form: each byte");
	CHECK(t, esc_is("\xed\xa0\x80", 0, "\\xed\\xa0\\x80"), "surrogate: each byte");
	CHECK(t, esc_is("\xf4\x90\x80\x80", 0, "\\xf4\\x90\\x80\\x80"), "above U+10FFFF: each byte");
	CHECK(t, esc_is("\x80x\xff", 0, "\\x80x\\xff"), "stray continuation and 0xff");
	CHECK(t, esc_is("ab\xe2\x82", 0, "ab\\xe2\\x82"), "a sequence cut off at the end");
	CHECK(t, esc_is("\xe2\x82z", 0, "\\xe2\\x82z"), "a sequence broken by ASCII");
}

static void test_passes(struct tally *t)
{
	const char *plain = "Hello, world! ~`'\"\\ {json:[1,2]} 100% café 中文 \xf0\x9f\x98\x80 \xef\xbf\xbd";
	CHECK(t, esc_is(plain, 0, plain), "printable ASCII, backslash and valid UTF-8 pass unchanged");
	CHECK(t, esc_is("", 0, ""), "empty input");
	char *s = termsafe_str(NULL, 0);
	CHECK(t, s && strcmp(s, "") == 0, "termsafe_str(NULL) is \"\"");
	free(s);
	s = termsafe_str("t\x1b[1m", TERMSAFE_TEXT);
	CHECK(t, s && strcmp(s, "t\\x1b[1m") == 0, "termsafe_str");
	free(s);
}

static void test_json(struct tally *t)
{
	CHECK(t, esc_is("\x1b\xff\xc2\x9b\xe2\x80\xae", TERMSAFE_JSON, "\\u001b\\ufffd\\u009b\\u202e"),
	      "JSON mode: JSON string escapes, U+FFFD for a bad byte");
	/* cJSON escapes C0 itself; C1 and bidi characters it prints as they are. */
	cJSON *v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "title", "\x1b]0;x\x07 \xc2\x9b" "2J \xe2\x80\xae" "abc\n\ttab");
	cJSON_AddItemToObject(v, "list", cJSON_CreateIntArray((const int[]){ 1, 2 }, 2));
	char *text = cJSON_Print(v);
	char *safe = termsafe_str(text, TERMSAFE_JSON | TERMSAFE_TEXT);
	cJSON *back = safe ? cJSON_Parse(safe) : NULL;
	CHECK(t, back && cJSON_Compare(v, back, 1), "escaped JSON parses to the same value");
	CHECK(t, safe && is_safe(safe, strlen(safe), TERMSAFE_TEXT), "and is safe to show");
	CHECK(t, safe && text && strchr(safe, '\n') && strcmp(safe, text) != 0,
	      "its layout (newlines between members) is kept");
	cJSON_Delete(back);
	cJSON_Delete(v);
	free(text);
	free(safe);
}

/* Chunked input must give the one-pass output at every split point, and byte by byte. */
static void test_streaming(struct tally *t)
{
	static const char in[] = "a\xe2\x80\xae" "b\xf0\x9f\x98\x80" "c\xc2\x9b" "d\xe2\x82" "e\xff\xc3\xa9\x1b[0m\xe2";
	size_t n = sizeof in - 1;
	char want[1024], got[1024];
	snprintf(want, sizeof want, "%s", esc_n(in, n, TERMSAFE_TEXT));
	int bad = 0;
	for (size_t cut = 0; cut <= n; cut++) {
		struct termsafe ts;
		termsafe_init(&ts, TERMSAFE_TEXT);
		size_t o = termsafe_feed(&ts, in, cut, got);
		o += termsafe_feed(&ts, in + cut, n - cut, got + o);
		o += termsafe_flush(&ts, got + o);
		got[o] = '\0';
		bad += strcmp(got, want) != 0;
	}
	CHECK(t, bad == 0, "two chunks, split anywhere: the same output");
	struct termsafe ts;
	termsafe_init(&ts, TERMSAFE_TEXT);
	size_t o = 0;
	for (size_t i = 0; i < n; i++)
		o += termsafe_feed(&ts, in + i, 1, got + o);
	o += termsafe_feed(&ts, "", 0, got + o);
	o += termsafe_flush(&ts, got + o);
	got[o] = '\0';
	CHECK(t, strcmp(got, want) == 0, "byte by byte: the same output");
	size_t wl = strlen(want);
	CHECK(t, strstr(want, "d\\xe2\\x82e") && wl > 11 && strcmp(want + wl - 11, "\\x1b[0m\\xe2") == 0,
	      "a broken sequence mid-stream and a cut one at the very end are both escaped");
}

static void test_random(struct tally *t)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	unsigned char in[64];
	char out[TERMSAFE_OUT_MAX(64)];
	int unsafe = 0, over = 0;
	for (int round = 0; round < 20000; round++) {
		size_t n = (size_t)(check_rand(&seed) % sizeof in);
		/* Mostly bytes near the interesting ranges, so sequences and near-misses are common. */
		for (size_t i = 0; i < n; i++) {
			uint64_t r = check_rand(&seed);
			static const unsigned char picks[] = { 0x1b, 0x0a, 0x09, 0x0d, 0x7f, 0x80, 0x9b, 0xc2,
							       0xe2, 0x80, 0xae, 0x81, 0xa9, 0xf0, 0xf4, 0xed };
			in[i] = r & 1 ? picks[(r >> 1) % sizeof picks] : (unsigned char)(r >> 8);
		}
		unsigned flags = (unsigned)(round % 8);
		struct termsafe ts;
		termsafe_init(&ts, flags);
		size_t cut = n ? (size_t)(check_rand(&seed) % n) : 0;
		size_t o1 = termsafe_feed(&ts, in, cut, out);
		size_t o2 = termsafe_feed(&ts, in + cut, n - cut, out + o1);
		over += o1 > TERMSAFE_OUT_MAX(cut) || o2 > TERMSAFE_OUT_MAX(n - cut);
		size_t o = o1 + o2;
		o += termsafe_flush(&ts, out + o);
		unsafe += !is_safe(out, o, flags & TERMSAFE_TEXT);
	}
	CHECKF(t, unsafe == 0, "%d random inputs came out unsafe", unsafe);
	CHECKF(t, over == 0, "%d random inputs exceeded TERMSAFE_OUT_MAX", over);
	CHECK(t, unsafe == 0 && over == 0, "20000 random inputs: always safe, always within the bound");
}

static void test_cut(struct tally *t)
{
	char a[] = "a\xc3\xa9z", b[] = "a\xc3\xa9z", c[] = "ab", d[] = "\xe4\xb8\xad";
	CHECK(t, strcmp(termsafe_cut(a, 2), "a") == 0, "cut inside a sequence goes before it");
	CHECK(t, strcmp(termsafe_cut(b, 3), "a\xc3\xa9") == 0, "cut after a whole sequence keeps it");
	CHECK(t, strcmp(termsafe_cut(c, 5), "ab") == 0, "short strings stay");
	CHECK(t, strcmp(termsafe_cut(d, 1), "") == 0, "nothing fits: empty");
}

/* The log escapes ASCII its own way (\" \\ \n \xHH) and leaves the rest to termsafe_char. */
static void test_log(struct tally *t)
{
	size_t used = 0;
	char out[8];
	size_t n = termsafe_char("\xe2\x80\xae" "x", 4, 0, out, &used);
	CHECK(t, n == 6 && used == 3 && memcmp(out, "\\u202e", 6) == 0, "termsafe_char: one character");
	n = termsafe_char("\xe2\x80", 2, 0, out, &used);
	CHECK(t, n == 4 && used == 1 && memcmp(out, "\\xe2", 4) == 0, "termsafe_char: a cut sequence is a bad byte");

	int p[2];
	if (pipe(p) < 0)
		check_die("pipe");
	struct fplog lg;
	fplog_init(&lg, p[1], FPLOG_DEBUG);
	fplog(&lg, FPLOG_WARNING, "t1", "job: %s", "a\x1b]0;t\x07 \xc2\x9b \xe2\x80\xae \xff \"q\" \\ \xc3\xa9\nz");
	char line[4700];
	ssize_t got = read(p[0], line, sizeof line - 1);
	line[got > 0 ? got : 0] = '\0';
	close(p[0]);
	close(p[1]);
	CHECK(t, strstr(line, " level=warning task=t1 msg=\"job: a\\x1b]0;t\\x07 \\u009b \\u202e \\xff \\\"q\\\" \\\\ \xc3\xa9\\nz\"\n") != NULL,
	      "log line: C0 as \\xHH, C1 and bidi as \\uXXXX, bad bytes as \\xHH, UTF-8 kept");
	CHECK(t, got > 0 && is_safe(line, (size_t)got, TERMSAFE_NL), "log line: safe for a terminal");
	if (!strstr(line, "msg="))
		fprintf(stderr, "# log line: %s", line);
}

int main(void)
{
	struct tally t = { 0, 0 };
	test_attacks(&t);
	test_classes(&t);
	test_passes(&t);
	test_json(&t);
	test_streaming(&t);
	test_random(&t);
	test_cut(&t);
	test_log(&t);
	return check_done(&t);
}
