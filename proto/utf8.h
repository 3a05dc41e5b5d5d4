/* proto/utf8.h — UTF-8 text: checking it, measuring it, cutting it and repairing it.
 *
 * Everything that crosses a boundary as text (JSON-RPC lines, job frames, messages, file
 * names, captured output) is UTF-8, and forkpoint must never send on a byte string that is not:
 * JSON text is UTF-8 (RFC 8259, 8.1).  "Well-formed" here is RFC 3629: no overlong forms, no
 * surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
 *
 * Pure functions over caller-owned buffers: no allocation, no errors beyond what the return
 * values say.  Bytes are read only within the lengths given (or up to a NUL where a function
 * says it takes a C string). */
#ifndef FP_UTF8_H
#define FP_UTF8_H

#include <stddef.h>

/* 1 if s[0..len) is well-formed UTF-8 holding no NUL byte, else 0 (text that becomes a C
 * string must not hide a NUL). */
int utf8_valid(const char *s, size_t len);

/* The length of the sequence a lead byte starts: 1 for ASCII (NUL included), 2..4 for a lead
 * byte that can start a well-formed sequence (0xC2..0xF4), 0 for any other byte (a
 * continuation byte, the overlong leads 0xC0 and 0xC1, 0xF5..0xFF). */
size_t utf8_seq_len(unsigned char lead);

/* 1 if byte k (1..3) of the sequence whose lead byte is p[0] is a valid continuation there:
 * 10xxxxxx, and for k == 1 within the range that keeps the sequence from being overlong, a
 * surrogate or above U+10FFFF.  p[0..k] must be readable. */
int utf8_cont_ok(const unsigned char *p, size_t k);

/* The length (1..4) of the well-formed character at s, of which avail bytes may be read
 * (avail >= 1); 0 if s starts none, or avail cuts it off.  NUL is a character of 1 byte. */
size_t utf8_char_len(const char *s, size_t avail);

/* Where to cut s[0..len) to at most max bytes without splitting a character: len if it fits,
 * else max moved back over continuation bytes to the start of the character it splits. */
size_t utf8_clip(const char *s, size_t len, size_t max);

/* Text that starts at an arbitrary byte (the tail of a log) may begin inside a character: the
 * number of bytes to skip to its first lead byte, which is that character's continuation
 * bytes, at most 3 (more could not belong to one character, and are left to the repairs). */
size_t utf8_resync(const char *s, size_t len);

/* After a truncation at s[len]: drop a sequence cut off at the end of s[0..len) (a lead byte
 * whose continuation bytes are missing), write a NUL at the new end and return its length. */
size_t utf8_trim_tail(char *s, size_t len);

/* The characters (code points) in s[0..len), counted as the bytes that are not continuation
 * bytes: exact for well-formed text, a fair column count for any other. */
size_t utf8_count(const char *s, size_t len);

/* In the C string s, replace every byte that is not part of a well-formed character by '?'.
 * ASCII (and so JSON syntax) is never changed. */
void utf8_scrub(char *s);

/* Copy s[0..len) to out as well-formed UTF-8: each NUL and each byte that is not part of a
 * well-formed character becomes U+FFFD (3 bytes).  out needs room for 3 * len + 1 bytes; it is
 * NUL-terminated.  Returns the bytes written, the NUL not counted. */
size_t utf8_sanitize(const char *s, size_t len, char *out);

#endif
