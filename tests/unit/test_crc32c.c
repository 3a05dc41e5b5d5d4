/* tests/unit/test_crc32c.c — CRC32C: published test vectors, the table-driven path against a
 * bit-by-bit reference, the hardware path against the table path on every length 0..1024 at
 * every alignment, incremental extension, and the on-disk mask.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "state/crc32c.h"
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The definition itself, one bit at a time: slow, obviously right, shares nothing with the
 * code under test. */
static uint32_t crc_bitwise(uint32_t crc, const unsigned char *p, size_t len)
{
	uint32_t c = ~crc;
	for (size_t i = 0; i < len; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ ((c & 1u) ? 0x82F63B78u : 0u);
	}
	return ~c;
}

static void test_vectors(struct tally *t)
{
	unsigned char buf[32];

	CHECK(t, crc32c(0, "123456789", 9) == 0xE3069283u, "\"123456789\" -> 0xE3069283 (dispatch)");
	CHECK(t, crc32c_sw(0, "123456789", 9) == 0xE3069283u, "\"123456789\" -> 0xE3069283 (software)");
	CHECK(t, crc32c(0, "", 0) == 0 && crc32c_sw(0, NULL, 0) == 0, "empty input -> 0");

	/* RFC 3720 (iSCSI) appendix B.4 vectors. */
	memset(buf, 0, sizeof buf);
	CHECK(t, crc32c(0, buf, 32) == 0x8A9136AAu && crc32c_sw(0, buf, 32) == 0x8A9136AAu,
	      "32 zero bytes -> 0x8A9136AA");
	memset(buf, 0xff, sizeof buf);
	CHECK(t, crc32c(0, buf, 32) == 0x62A8AB43u && crc32c_sw(0, buf, 32) == 0x62A8AB43u,
	      "32 0xff bytes -> 0x62A8AB43");
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)i;
	CHECK(t, crc32c(0, buf, 32) == 0x46DD794Eu && crc32c_sw(0, buf, 32) == 0x46DD794Eu,
	      "bytes 0..31 -> 0x46DD794E");
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)(31 - i);
	CHECK(t, crc32c(0, buf, 32) == 0x113FDB5Cu && crc32c_sw(0, buf, 32) == 0x113FDB5Cu,
	      "bytes 31..0 -> 0x113FDB5C");
	CHECK(t, crc_bitwise(0, (const unsigned char *)"123456789", 9) == 0xE3069283u,
	      "the bit-by-bit reference agrees with the published vector");
}

/* Every length 0..1024 at every alignment 0..15, random content: software == bitwise and
 * dispatch (hardware where present) == software. */
static void test_all_lengths(struct tally *t)
{
	enum { MAXLEN = 1024, ALIGNS = 16 };
	unsigned char *raw = malloc(MAXLEN + ALIGNS + 8);
	uint64_t seed = 0x9E3779B97F4A7C15ull;
	size_t sw_bad = 0, hw_bad = 0;

	if (raw == NULL) {
		CHECK(t, 0, "allocate test buffer");
		return;
	}
	for (size_t i = 0; i < MAXLEN + ALIGNS + 8; i++)
		raw[i] = (unsigned char)check_rand(&seed);
	for (size_t a = 0; a < ALIGNS; a++) {
		for (size_t len = 0; len <= MAXLEN; len++) {
			const unsigned char *p = raw + a;
			uint32_t seedcrc = (uint32_t)check_rand(&seed);
			uint32_t ref = crc_bitwise(seedcrc, p, len);
			if (crc32c_sw(seedcrc, p, len) != ref)
				sw_bad++;
			if (crc32c(seedcrc, p, len) != ref)
				hw_bad++;
		}
	}
	free(raw);
	CHECK(t, sw_bad == 0, "software == bit-by-bit for lengths 0..1024 at 16 alignments");
	CHECK(t, hw_bad == 0, crc32c_hw_available()
	      ? "hardware == bit-by-bit for lengths 0..1024 at 16 alignments"
	      : "dispatch (software, no SSE4.2) == bit-by-bit for all lengths");
	printf("# hardware path %s\n", crc32c_hw_available() ? "in use" : "not available");
}

/* Extending in pieces equals one pass over the whole, for every split point. */
static void test_incremental(struct tally *t)
{
	unsigned char buf[300];
	uint64_t seed = 42;
	int bad = 0;

	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)check_rand(&seed);
	uint32_t whole = crc32c(0, buf, sizeof buf);
	for (size_t cut = 0; cut <= sizeof buf; cut++) {
		if (crc32c(crc32c(0, buf, cut), buf + cut, sizeof buf - cut) != whole)
			bad++;
		if (crc32c_sw(crc32c_sw(0, buf, cut), buf + cut, sizeof buf - cut) != whole)
			bad++;
	}
	CHECK(t, bad == 0, "crc(crc(a), b) == crc(a || b) at every split point, both paths");
}

static void test_mask(struct tally *t)
{
	uint32_t c = crc32c(0, "123456789", 9);
	uint32_t m = crc32c_mask(c);
	/* Unmasking by hand: subtract the constant, rotate back. */
	uint32_t r = m - 0xa282ead8u;
	uint32_t back = (r >> 17) | (r << 15);
	CHECK(t, m != c && back == c, "mask differs from the raw CRC and is reversible");
	CHECK(t, crc32c_mask(0) == 0xa282ead8u, "mask(0) is the LevelDB constant");
}

/* Not a pass/fail check (the machine is shared and noisy): throughput for the record. */
static void report_speed(void)
{
	enum { LEN = 1 << 20, ROUNDS = 256 };
	unsigned char *buf = calloc(1, LEN);
	struct timespec a, b;
	uint32_t sink = 0;

	if (buf == NULL)
		return;
	for (int pass = 0; pass < 2; pass++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (int i = 0; i < ROUNDS; i++)
			sink ^= pass ? crc32c_sw(sink, buf, LEN) : crc32c(sink, buf, LEN);
		clock_gettime(CLOCK_MONOTONIC, &b);
		double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
		printf("# %s: %.2f GB/s\n", pass ? "slicing-by-8" : "dispatch",
		       (double)LEN * ROUNDS / s / 1e9);
	}
	printf("# (checksum %08x)\n", sink);
	free(buf);
}

int main(void)
{
	struct tally t = {0, 0};

	test_vectors(&t);
	test_all_lengths(&t);
	test_incremental(&t);
	test_mask(&t);
	report_speed();
	return check_done(&t);
}
