/* frame_abuse — misuse the frame socket (fd 3) as argv[1] says: "oversize" (a header
 * claiming 2 GiB, then a trickle), "garbage" (a header, then bytes that are not msgpack),
 * "array32" (an array header claiming 2^27 elements), "flood" (valid progress frames as fast
 * as the socket takes them).  The supervisor must kill the job and carry on. */
#include "attempt.h"
#include <stdint.h>
#include <time.h>

static void put(const void *p, size_t n)
{
	const unsigned char *b = p;
	while (n > 0) {
		ssize_t w = write(3, b, n);
		if (w <= 0)
			contained("the supervisor closed the socket: %s", w < 0 ? strerror(errno) : "EOF");
		b += w;
		n -= (size_t)w;
	}
}

int main(int argc, char **argv)
{
	const char *mode = attempt_arg(argc, argv);
	struct timespec ms = { 0, 1000000 };
	if (strcmp(mode, "oversize") == 0) {
		unsigned char h[4] = { 0x80, 0, 0, 0 };
		put(h, 4);
		for (;;) {
			put("x", 1);
			nanosleep(&ms, NULL);
		}
	} else if (strcmp(mode, "garbage") == 0) {
		unsigned char h[4] = { 0, 0, 0, 16 };
		put(h, 4);
		put("\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1\xc1", 16);
	} else if (strcmp(mode, "array32") == 0) {
		unsigned char f[9] = { 0, 0, 0, 5, 0xdd, 0x08, 0, 0, 0 };
		put(f, sizeof f);
	} else if (strcmp(mode, "flood") == 0) {
		/* {"type":"progress","fraction":0.5} */
		static const unsigned char body[] = {
			0x82, 0xa4, 't', 'y', 'p', 'e', 0xa8, 'p', 'r', 'o', 'g', 'r', 'e', 's', 's',
			0xa8, 'f', 'r', 'a', 'c', 't', 'i', 'o', 'n', 0xcb, 0x3f, 0xe0, 0, 0, 0, 0, 0, 0,
		};
		unsigned char frame[4 + sizeof body] = { 0, 0, 0, (unsigned char)sizeof body };
		memcpy(frame + 4, body, sizeof body);
		for (;;)
			put(frame, sizeof frame);
	} else {
		escaped("nothing to try: unknown mode '%s'", mode);
	}
	for (int i = 0; i < 30000; i++)
		nanosleep(&ms, NULL);
	escaped("the supervisor let a broken protocol pass for 30 s");
}
