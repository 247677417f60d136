/* tprun_wire.h: how values travel on the one-line-per-message channel between tprun and its agents. */
#ifndef TPRUN_WIRE_H
#define TPRUN_WIRE_H

#include <stddef.h>

/* Escapes '%' and newlines as %XX so that a value fits one protocol line; out must hold 3 * strlen(in) + 1. */
void tprun_wire_escape(const char *in, char *out);
/* Undoes tprun_wire_escape in place, in one pass: "%XX" (two hex digits) is a byte, any other '%' stays. */
void tprun_wire_unescape(char *s);

/*
 * A message's number field: decimal digits at the start of text[0..len) (no sign, blank or leading zero), not above
 * max, ending at len or a space; *used gets its length with the space. Returns it, or -1 (nothing read past len).
 */
long tprun_wire_parse_uint(const char *text, size_t len, long max, size_t *used);

/* Bytes base64 encoding of len bytes takes, without the terminating NUL. */
size_t tprun_wire_b64_len(size_t len);
/* Encodes len bytes of data as base64 into out (tprun_wire_b64_len(len) + 1 bytes), NUL-terminated. */
void tprun_wire_b64_encode(const void *data, size_t len, char *out);
/* "HEAD B64\n": one protocol line carrying len bytes (malloc'd, NUL-terminated; *line_len gets its length when not
 * NULL); NULL when out of memory. */
char *tprun_wire_b64_line(const char *head, const void *data, size_t len, size_t *line_len);
/* The same line written into out (strlen(head) + tprun_wire_b64_len(len) + 3 bytes); returns its length. */
size_t tprun_wire_b64_line_into(char *out, const char *head, const void *data, size_t len);
/*
 * Decodes the base64 text (padding required, "-" for no bytes) into a malloc'd buffer; *out is NULL for no
 * bytes. Returns 0, or -1 on text that is not base64 (then nothing is allocated).
 */
int tprun_wire_b64_decode(const char *text, unsigned char **out, size_t *out_len);

#endif
