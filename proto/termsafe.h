/* proto/termsafe.h — text that others control, made safe to show on a terminal.
 *
 * Jobs (and clients, through arguments) control much of what `forkpoint logs`, `show`, `ls`
 * and `call` print: output, progress messages, prompts, error messages, names.  Written as
 * they are, those bytes drive the terminal: escape sequences clear the screen, move the
 * cursor, set the window title or write the clipboard (OSC 52); a carriage return overwrites
 * what was printed, so a fake "[sudo] password" prompt can stand where a real one would;
 * bidi controls reorder what is shown.  The escaper renders each such character as visible
 * text instead, and passes everything else (printable ASCII, valid UTF-8, backslash) as it is:
 *
 *   C0 controls and DEL                        \x1b   (\n and \t pass if the flags say so)
 *   C1 controls U+0080..U+009F                 \u009b
 *   bidi controls U+202A..U+202E, U+2066..U+2069  \u202e
 *   each byte of invalid UTF-8                 \xff
 *
 * With TERMSAFE_JSON every rendering is a JSON string escape instead (\u001b, \u009b, \u202e,
 * and \ufffd for an invalid byte), so escaped JSON text parses to the same value (up to the
 * replacement of invalid bytes, which JSON cannot carry anyway).  The rendering is for
 * reading, not reversible: a literal "\x1b" in the input looks the same.  Callers offer
 * --raw for the bytes as they are.
 *
 * Pure functions over buffers; no allocation except termsafe_str(). */
#ifndef FP_TERMSAFE_H
#define FP_TERMSAFE_H

#include <stddef.h>

enum {
	TERMSAFE_NL = 1,      /* keep \n: it separates the records of multi-line text */
	TERMSAFE_TAB = 2,     /* keep \t */
	TERMSAFE_JSON = 4,    /* JSON string escapes (for JSON text; implies nothing about \n) */
};
#define TERMSAFE_TEXT (TERMSAFE_NL | TERMSAFE_TAB)

/* Streaming state: an incomplete UTF-8 sequence at the end of one chunk is held until the
 * next one completes (or breaks) it. */
struct termsafe {
	unsigned flags;
	unsigned char pend[4];
	size_t npend;
};

/* Room termsafe_feed() or termsafe_flush() may need for len input bytes. */
#define TERMSAFE_OUT_MAX(len) (6 * ((len) + 4))

void termsafe_init(struct termsafe *ts, unsigned flags);
/* Escape len bytes from in into out (not NUL-terminated), which has room for
 * TERMSAFE_OUT_MAX(len) bytes.  Returns the number of bytes written. */
size_t termsafe_feed(struct termsafe *ts, const void *in, size_t len, char *out);
/* At the end of the input: render a held incomplete sequence as invalid bytes.  out has room
 * for TERMSAFE_OUT_MAX(0) bytes.  Returns the number written. */
size_t termsafe_flush(struct termsafe *ts, char *out);

/* One character (or one bad byte) at p, avail >= 1 bytes available, rendered as at the end of
 * the input; *used gets the bytes it took.  out has room for 6 bytes.  Returns the bytes
 * written.  For callers that escape ASCII their own way (the log's quoted strings). */
size_t termsafe_char(const char *p, size_t avail, unsigned flags, char *out, size_t *used);

/* A malloc'd, NUL-terminated escaped copy of s (NULL counts as ""); NULL when out of memory. */
char *termsafe_str(const char *s, unsigned flags);
/* Cut s in place to at most max bytes, never inside a UTF-8 sequence.  Returns s. */
char *termsafe_cut(char *s, size_t max);

#endif
