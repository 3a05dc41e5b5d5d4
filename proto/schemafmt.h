/* proto/schemafmt.h — the string formats a JSON Schema "format" keyword may ask for, checked
 * as assertions (proto/schema.c refuses any other format name at load).
 *
 *   date-time  RFC 3339 date-time: 2026-12-01T10:45:38Z, fractions and ±hh:mm offsets, T/Z in
 *              either case, real calendar days, a leap second only at 23:59:60 UTC
 *   date       RFC 3339 full-date;  time  RFC 3339 full-time (offset required)
 *   email      an RFC 5321 mailbox: dot-atom local part (no quoted form) @ a host name or an
 *              [IPv4] / [IPv6:...] literal
 *   uri        an RFC 3986 absolute URI: scheme ":" then only URI characters and valid %XX
 *   uuid       RFC 4122 text: 8-4-4-4-12 hex digits
 *   ipv4, ipv6 as inet_pton(3) reads them (dotted quad without leading zeros; RFC 4291 text)
 *   hostname   RFC 1123: labels of 1-63 letters, digits and inner hyphens, 253 bytes at most
 *   duration   ISO 8601 as RFC 3339 appendix A: P1Y2M3W4DT5H6M7.5S (parts in order, one at least)
 * Accepted without a check (nothing to enforce on a string): forkpoint-upload (an argument
 * that names an input file, resolved by supervisor/core/transfer.c), password and binary
 * (OpenAPI annotations that pydantic writes).
 *
 * Pure functions over NUL-terminated strings; nothing allocates. */
#ifndef FP_SCHEMAFMT_H
#define FP_SCHEMAFMT_H

/* The format named `name`: an index >= 0, or -1 if it is not one of the list above. */
int schemafmt_find(const char *name);
/* The name and the phrase for messages ("a date-time (RFC 3339)") of format index f. */
const char *schemafmt_name(int f);
const char *schemafmt_phrase(int f);
/* 1 if s is in format f, else 0. */
int schemafmt_check(int f, const char *s);
/* The supported names, comma-separated, for messages. */
const char *schemafmt_list(void);

#endif
