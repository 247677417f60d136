/* tprun_wire.c: escaping and base64 for the tprun-agent channel (a peer's bytes are never trusted to be text). */
#include "tprun_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tprun_wire_escape(const char *in, char *out)
{
    for (; *in != '\0'; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '%' || c == '\n' || c == '\r') out += sprintf(out, "%%%02X", c);
        else *out++ = (char)c;
    }
    *out = '\0';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void tprun_wire_unescape(char *s)
{
    /* One pass: '%' and two hex digits is a byte, anything else is itself. */
    char *w = s;
    for (const char *r = s; *r != '\0'; r++) {
        int hi = r[0] == '%' ? hex_value(r[1]) : -1, lo = hi >= 0 ? hex_value(r[2]) : -1;
        if (lo >= 0) {
            *w++ = (char)(hi << 4 | lo);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

long tprun_wire_parse_uint(const char *text, size_t len, long max, size_t *used)
{
    size_t i = 0;
    long v = 0;
    while (i < len && text[i] >= '0' && text[i] <= '9') {
        v = v * 10 + (text[i] - '0');
        if (v > max || (i == 1 && text[0] == '0')) return -1; /* over max, or a leading zero */
        i++;
    }
    if (i == 0 || (i < len && text[i] != ' ')) return -1;
    *used = i < len ? i + 1 : i;
    return v;
}

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t tprun_wire_b64_len(size_t len) { return len == 0 ? 1 : (len + 2) / 3 * 4; }

void tprun_wire_b64_encode(const void *data, size_t len, char *out)
{
    const unsigned char *p = data;
    if (len == 0) {
        strcpy(out, "-");
        return;
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < len) v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < len) v |= p[i + 2];
        out[o++] = b64_alphabet[(v >> 18) & 63];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? b64_alphabet[v & 63] : '=';
    }
    out[o] = '\0';
}

size_t tprun_wire_b64_line_into(char *out, const char *head, const void *data, size_t len)
{
    size_t h = strlen(head);
    memcpy(out, head, h);
    out[h] = ' ';
    tprun_wire_b64_encode(data, len, out + h + 1);
    size_t n = h + 1 + strlen(out + h + 1);
    out[n++] = '\n';
    out[n] = '\0';
    return n;
}

char *tprun_wire_b64_line(const char *head, const void *data, size_t len, size_t *line_len)
{
    char *line = malloc(strlen(head) + tprun_wire_b64_len(len) + 3);
    if (line == NULL) return NULL;
    size_t n = tprun_wire_b64_line_into(line, head, data, len);
    if (line_len != NULL) *line_len = n;
    return line;
}

static int b64_value(char c)
{
    const char *at = c != '\0' ? strchr(b64_alphabet, c) : NULL;
    return at != NULL ? (int)(at - b64_alphabet) : -1;
}

int tprun_wire_b64_decode(const char *text, unsigned char **out, size_t *out_len)
{
    size_t n = strlen(text);
    if (strcmp(text, "-") == 0) {
        *out = NULL;
        *out_len = 0;
        return 0;
    }
    if (n == 0 || n % 4 != 0) return -1;
    size_t pad = text[n - 1] == '=' ? (text[n - 2] == '=' ? 2 : 1) : 0;
    size_t len = n / 4 * 3 - pad;
    unsigned char *buf = malloc(len > 0 ? len : 1);
    if (buf == NULL) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int last = i + 4 == n;
        int v[4];
        for (int k = 0; k < 4; k++) {
            /* '=' only as the padding of the last group. */
            v[k] = text[i + k] == '=' && last && k >= 4 - (int)pad ? 0 : b64_value(text[i + k]);
            if (v[k] < 0) {
                free(buf);
                return -1;
            }
        }
        unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | (unsigned)v[3];
        buf[o++] = (unsigned char)(w >> 16);
        if (o < len) buf[o++] = (unsigned char)(w >> 8);
        if (o < len) buf[o++] = (unsigned char)w;
    }
    *out = buf;
    *out_len = len;
    return 0;
}
