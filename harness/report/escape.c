/* escape.c - HTML, JSON and CSV writers for database strings (escape.h). */
#include "escape.h"

#include <stdlib.h>
#include <string.h>

int sg_utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  int n;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) n = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) n = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, min = 0x10000;
  else return 0;
  unsigned cp = c & (0x3f >> (n - 1));
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  /* overlong forms, UTF-16 surrogates and > U+10FFFF are not UTF-8 */
  if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return 0;
  return n;
}

void sg_html_text(FILE *f, const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  while (*s) {
    int n = sg_utf8_len(s);
    switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&#39;", f); break;
    default:
      if (!n || (*s < 0x20 && *s != '\n' && *s != '\t') || *s == 0x7f)
        fputs("\xef\xbf\xbd", f); /* U+FFFD */
      else
        fwrite(s, 1, (size_t)n, f);
    }
    s += n ? n : 1;
  }
}

void sg_json_str(FILE *f, const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  fputc('"', f);
  while (*s) {
    int n = sg_utf8_len(s);
    if (!n) fputs("\\ufffd", f);
    else if (*s == '"') fputs("\\\"", f);
    else if (*s == '\\') fputs("\\\\", f);
    else if (*s == '\n') fputs("\\n", f);
    else if (*s == '\r') fputs("\\r", f);
    else if (*s == '\t') fputs("\\t", f);
    else if (*s < 0x20 || *s == 0x7f || *s == '<' || *s == '>' || *s == '&')
      fprintf(f, "\\u%04x", *s);
    else fwrite(s, 1, (size_t)n, f);
    s += n ? n : 1;
  }
  fputc('"', f);
}

void sg_csv_field(FILE *f, const char *s) {
  size_t len = strlen(s);
  int quote = strpbrk(s, ",\"\r\n") != NULL ||
              (len && (s[0] == ' ' || s[len - 1] == ' '));
  if (!quote) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

const char *sg_fmt_real(char *buf, size_t len, double v) {
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, len, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  return buf;
}

int sg_nonce_hex(char out[33]) {
  unsigned char b[16];
  FILE *f = fopen("/dev/urandom", "rbe");
  size_t got = f ? fread(b, 1, sizeof b, f) : 0;
  if (f) fclose(f);
  if (got != sizeof b) return -1;
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
  return 0;
}
