/* proto/schemafmt.c — see schemafmt.h.
 *
 * Each checker is a small hand-written scanner over the grammar its RFC gives, not a regular
 * expression: these run on every call with a model's strings and must be linear and exact
 * (a regex engine with a match limit is for the patterns operators write, in schema.c). */
#include "proto/schemafmt.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>

enum { F_DATE_TIME, F_DATE, F_TIME, F_DURATION, F_EMAIL, F_URI, F_UUID, F_IPV4, F_IPV6, F_HOSTNAME,
       F_UPLOAD, F_PASSWORD, F_BINARY, F_N };

static const char *const names[F_N] = {
	"date-time", "date", "time", "duration", "email", "uri", "uuid", "ipv4", "ipv6", "hostname",
	"forkpoint-upload", "password", "binary",
};
static const char *const phrases[F_N] = {
	"a date-time (RFC 3339, e.g. 2026-12-01T10:45:38Z)", "a date (RFC 3339, e.g. 2026-12-01)",
	"a time (RFC 3339, e.g. 10:45:38Z)", "a duration (ISO 8601, e.g. P1DT2H30M)", "an email address", "an absolute URI (RFC 3986)",
	"a UUID (8-4-4-4-12 hex digits)", "an IPv4 address", "an IPv6 address", "a host name",
	"an upload handle", "a password", "binary data",
};

/* Formats are indexes into these tables, so a compiled schema stores an int and the check is
 * a switch. */
int schemafmt_find(const char *name)
{
	for (int i = 0; i < F_N; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

const char *schemafmt_name(int f)
{
	return f >= 0 && f < F_N ? names[f] : "?";
}

const char *schemafmt_phrase(int f)
{
	return f >= 0 && f < F_N ? phrases[f] : "?";
}

/* Spelled out for the "unsupported format" message, so an operator sees what may be used. */
const char *schemafmt_list(void)
{
	return "date-time, date, time, duration, email, uri, uuid, ipv4, ipv6, hostname, "
	       "forkpoint-upload, password, binary";
}

/* n ASCII digits at s into *out; 0 if any is not a digit. */
static int digits(const char *s, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 1;
}

/* full-date = YYYY-MM-DD with a day the month has; returns the length (10) or 0. */
static int scan_date(const char *s)
{
	static const int mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int y, m, d;
	if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &m) || s[7] != '-' ||
	    !digits(s + 8, 2, &d))
		return 0;
	if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
		return 0;
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (m == 2 && d == 29 && !leap)
		return 0;
	return 10;
}

/* full-time = HH:MM:SS[.frac](Z|±HH:MM); a second of 60 only where it is 23:59:60 UTC. */
static int scan_time(const char *s)
{
	int h, mi, sec, oh = 0, om = 0, sign = 0;
	if (!digits(s, 2, &h) || s[2] != ':' || !digits(s + 3, 2, &mi) || s[5] != ':' ||
	    !digits(s + 6, 2, &sec) || h > 23 || mi > 59 || sec > 60)
		return 0;
	const char *p = s + 8;
	if (*p == '.') {
		if (!isdigit((unsigned char)p[1]))
			return 0;
		for (p++; isdigit((unsigned char)*p); p++)
			;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '+' ? 1 : -1;
		if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om) || oh > 23 || om > 59)
			return 0;
		p += 6;
	} else {
		return 0;
	}
	if (sec == 60) {
		int utc = ((h * 60 + mi - sign * (oh * 60 + om)) % 1440 + 1440) % 1440;
		if (utc != 23 * 60 + 59)
			return 0;
	}
	return (int)(p - s);
}

/* ISO 8601 duration as RFC 3339 appendix A has it: P then Y M W D, T then H M S (each a
 * whole number, seconds may have a fraction), in that order, at least one of them, and a T
 * only with a time part after it. */
static int is_duration(const char *s)
{
	static const char date_units[] = "YMWD", time_units[] = "HMS";
	if (*s++ != 'P')
		return 0;
	int parts = 0, in_time = 0;
	const char *units = date_units;
	while (*s) {
		if (*s == 'T') {
			if (in_time || !s[1])
				return 0;
			in_time = 1;
			units = time_units;
			s++;
			continue;
		}
		if (!isdigit((unsigned char)*s))
			return 0;
		while (isdigit((unsigned char)*s))
			s++;
		if (*s == '.' && in_time) {
			if (!isdigit((unsigned char)*++s))
				return 0;
			while (isdigit((unsigned char)*s))
				s++;
			if (*s != 'S')
				return 0;
		}
		const char *u = *s ? strchr(units, *s) : NULL;
		if (!u)
			return 0;
		units = u + 1;   /* each unit once, in order */
		parts++;
		s++;
	}
	return parts > 0;
}

/* RFC 3339 allows a lower-case 't' as the separator; both are taken. */
static int is_date_time(const char *s)
{
	int n = scan_date(s);
	if (!n || (s[n] != 'T' && s[n] != 't'))
		return 0;
	int m = scan_time(s + n + 1);
	return m && s[n + 1 + m] == '\0';
}

/* RFC 1123 host name: dot-separated labels, each 1..63 of [A-Za-z0-9-] not starting or
 * ending with '-'; at most 253 bytes; len bytes of s are examined. */
static int is_hostname_n(const char *s, size_t len)
{
	if (len == 0 || len > 253)
		return 0;
	size_t label = 0;
	for (size_t i = 0; i <= len; i++) {
		char c = i < len ? s[i] : '.';
		if (c == '.') {
			if (label == 0 || label > 63 || s[i - 1] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!isalnum((unsigned char)c) && (c != '-' || label == 0))
			return 0;
		label++;
	}
	return 1;
}

/* The local part's atext (RFC 5322 3.2.3). */
static int is_atext(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-/=?^_`{|}~", c));
}

/* The dot-atom form of RFC 5321/5322 only (no quoted local parts, no comments): what a form
 * or a model means by an email address.  The last '@' splits, the local part is at most 64
 * bytes, and the domain is a host name or an address literal. */
static int is_email(const char *s)
{
	const char *at = strrchr(s, '@');
	if (!at || at == s || at - s > 64)
		return 0;
	/* dot-atom: atext runs separated by single dots */
	for (const char *p = s; p < at; p++) {
		if (*p == '.') {
			if (p == s || p + 1 == at || p[1] == '.')
				return 0;
		} else if (!is_atext((unsigned char)*p)) {
			return 0;
		}
	}
	const char *dom = at + 1;
	size_t dl = strlen(dom);
	if (dl > 2 && dom[0] == '[' && dom[dl - 1] == ']') {
		char lit[64];
		if (dl - 2 >= sizeof lit)
			return 0;
		memcpy(lit, dom + 1, dl - 2);
		lit[dl - 2] = '\0';
		unsigned char buf[16];
		if (strncmp(lit, "IPv6:", 5) == 0)
			return inet_pton(AF_INET6, lit + 5, buf) == 1;
		return inet_pton(AF_INET, lit, buf) == 1;
	}
	return is_hostname_n(dom, dl);
}

/* isxdigit through an unsigned char: a negative char would be undefined behaviour. */
static int is_hex(unsigned char c)
{
	return isxdigit(c) != 0;
}

/* RFC 3986: scheme ":" hier-part [ "?" query ] [ "#" fragment ], checked as a scheme followed
 * by characters URIs may hold (unreserved, reserved, valid %XX; at most one '#'). */
static int is_uri(const char *s)
{
	if (!isalpha((unsigned char)s[0]))
		return 0;
	const char *p = s + 1;
	while (isalnum((unsigned char)*p) || *p == '+' || *p == '-' || *p == '.')
		p++;
	if (*p != ':')
		return 0;
	int hashes = 0;
	for (p++; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '%') {
			if (!is_hex((unsigned char)p[1]) || !is_hex((unsigned char)p[2]))
				return 0;
			p += 2;
		} else if (c == '#') {
			if (++hashes > 1)
				return 0;
		} else if (!isalnum(c) && !strchr("-._~:/?[]@!$&'()*+,;=", c)) {
			return 0;
		}
	}
	return 1;
}

/* Any version and either case: the format is about the shape, as JSON Schema defines it. */
static int is_uuid(const char *s)
{
	static const int groups[5] = { 8, 4, 4, 4, 12 };
	for (int g = 0; g < 5; g++) {
		for (int i = 0; i < groups[g]; i++, s++)
			if (!is_hex((unsigned char)*s))
				return 0;
		if (*s++ != (g == 4 ? '\0' : '-'))
			return 0;
	}
	return 1;
}

/* ipv4 and ipv6 use inet_pton, which takes only the standard textual forms (no octal, hex or
 * shortened IPv4 as inet_aton would allow). */
int schemafmt_check(int f, const char *s)
{
	unsigned char buf[16];
	int n;
	switch (f) {
	case F_DATE_TIME: return is_date_time(s);
	case F_DATE: return scan_date(s) == 10 && s[10] == '\0';
	case F_TIME: return (n = scan_time(s)) > 0 && s[n] == '\0';
	case F_DURATION: return is_duration(s);
	case F_EMAIL: return is_email(s);
	case F_URI: return is_uri(s);
	case F_UUID: return is_uuid(s);
	case F_IPV4: return inet_pton(AF_INET, s, buf) == 1;
	case F_IPV6: return inet_pton(AF_INET6, s, buf) == 1;
	case F_HOSTNAME: return is_hostname_n(s, strlen(s));
	/* Annotations: an upload handle is resolved later (supervisor/core/transfer.c); password
	 * and binary (OpenAPI's, which pydantic writes) constrain nothing a string could break. */
	case F_UPLOAD:
	case F_PASSWORD:
	case F_BINARY: return 1;
	default: return 0;
	}
}
