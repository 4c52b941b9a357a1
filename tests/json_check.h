/* json_check.h - a strict JSON (RFC 8259) validity check for the tests of
 * generated JSON (traces, exports, list --json). */
#ifndef SG_JSON_CHECK_H
#define SG_JSON_CHECK_H

#include <stddef.h>

/* 1 when text is exactly one JSON value (whitespace around allowed) with
 * valid escapes, no control characters in strings, and valid UTF-8;
 * otherwise 0 and *where (may be NULL) is the byte offset of the error. */
int jc_valid(const char *text, size_t *where);

/* Occurrences of needle in hay. */
long jc_count(const char *hay, const char *needle);

#endif
