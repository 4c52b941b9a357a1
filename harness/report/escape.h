/* escape.h - writing database strings into HTML, JSON and CSV.
 *
 * Every string read from the results database is data: it reaches an
 * output format only through one of these writers.  Each writer accepts
 * any bytes (invalid UTF-8 included) and produces well-formed output.
 */
#ifndef SG_ESCAPE_H
#define SG_ESCAPE_H

#include <stdio.h>

/* HTML text or a quoted attribute value: & < > " ' become entities;
 * control characters other than tab and newline become U+FFFD, as do
 * bytes that are not UTF-8. */
void sg_html_text(FILE *f, const char *s);

/* A JSON string, quotes included: " \ and control characters escaped
 * (\n, \t, \u0001, ...), '<' '>' '&' as \u003c.. so the text is also
 * safe inside HTML; bytes that are not UTF-8 become \ufffd (the result
 * is always valid JSON). */
void sg_json_str(FILE *f, const char *s);

/* One CSV field (RFC 4180): quoted, with quotes doubled, when it holds a
 * comma, a quote, CR or LF (or starts or ends with a space); as is
 * otherwise. */
void sg_csv_field(FILE *f, const char *s);

/* The shortest "%.*g" of v (15..17 digits) that reads back as v. */
const char *sg_fmt_real(char *buf, size_t len, double v);

/* Length of the valid UTF-8 sequence at s (1..4), 0 when s does not
 * start one (s[0] != 0). */
int sg_utf8_len(const unsigned char *s);

/* 32 random hex digits (kernel random source) for a page script's
 * Content-Security-Policy nonce; -1 when /dev/urandom cannot be read. */
int sg_nonce_hex(char out[33]);

#endif
