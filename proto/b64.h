/* proto/b64.h — base64 (RFC 4648, standard alphabet) for chunks carried in JSON strings.
 * Decoding is strict: only the alphabet, '=' padding at the very end (optional), no whitespace,
 * no bits set past the data.  Both functions write into caller buffers and never allocate. */
#ifndef FP_B64_H
#define FP_B64_H

#include <stddef.h>
#include <sys/types.h>

/* Bytes needed to encode n bytes, including the NUL written after them. */
#define B64_ENCODED_SIZE(n) ((((n) + 2) / 3) * 4 + 1)
/* Upper bound of the decoded size of an n-character text. */
#define B64_DECODED_MAX(n)  (((n) / 4) * 3 + 3)

/* Encode; out must hold B64_ENCODED_SIZE(n).  Returns the length written (without the NUL). */
size_t b64_encode(const void *in, size_t n, char *out);
/* Decode len characters into out (room for B64_DECODED_MAX(len)).  The decoded length, or -1
 * for text that is not strict base64 (*bad_at gets the offset of the first bad character). */
ssize_t b64_decode(const char *in, size_t len, void *out, size_t *bad_at);

#endif
