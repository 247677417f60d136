/* fuzz_wire.c: the agent channel's escaping and base64 (launcher/tprun_wire.c), both ways. */
#include <stdio.h>

#include "fuzz_util.h"
#include "tprun_wire.h"

/* Byte 0 picks the direction: decoding a peer's text, or encoding bytes and decoding them back. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int decode = data[0] & 1;
    data++, size--;
    char *text = fuzz_strdup(data, size);
    if (text == NULL) return 0;
    if (decode) {
        unsigned char *out = (unsigned char *)"untouched";
        size_t len = 12345;
        if (tprun_wire_b64_decode(text, &out, &len) == 0) {
            char *again = malloc(tprun_wire_b64_len(len) + 1);
            FUZZ_ASSERT(again != NULL, "out of memory");
            tprun_wire_b64_encode(out, len, again);
            FUZZ_ASSERT(strlen(again) == strlen(text), "decoded bytes encode to another length");
            free(again);
            free(out);
        } else {
            FUZZ_ASSERT(len == 12345, "a refused text changed the length");
        }
        tprun_wire_unescape(text);
    } else {
        /* Escaping then unescaping gives the string back, with no newline in between. */
        char *esc = malloc(3 * strlen(text) + 1);
        FUZZ_ASSERT(esc != NULL, "out of memory");
        tprun_wire_escape(text, esc);
        FUZZ_ASSERT(strchr(esc, '\n') == NULL && strchr(esc, '\r') == NULL, "an escaped value holds a line break");
        tprun_wire_unescape(esc);
        FUZZ_ASSERT(strcmp(esc, text) == 0, "escape then unescape changed the value");
        free(esc);
        size_t line_len = 0;
        char *line = tprun_wire_b64_line("i", data, size, &line_len);
        FUZZ_ASSERT(line != NULL && line_len == strlen(line) && line[line_len - 1] == '\n', "a bad base64 line");
        line[line_len - 1] = '\0';
        unsigned char *back = NULL;
        size_t len = 0;
        FUZZ_ASSERT(tprun_wire_b64_decode(line + 2, &back, &len) == 0 && len == size &&
                        (size == 0 || memcmp(back, data, size) == 0),
                    "base64 did not give the bytes back");
        free(back);
        free(line);
    }
    free(text);
    return 0;
}
