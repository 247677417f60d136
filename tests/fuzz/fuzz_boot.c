/* fuzz_boot.c: the bootstrap's message reader on a socket and what rank 0 and the ranks parse out of it
 * (runtime_wire.c tp_msg_reader_step, runtime_record.c tp_record_parse, as runtime_bootstrap.c uses them). */
#include <stdio.h>

#include "fuzz_util.h"
#include "runtime_record.h"
#include "runtime_wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_logs();
    return 0;
}

/* As join_exchange: a table of records, then nothing; or an error message "CODE\nreason". */
static void parse_message(tp_msg_reader_t *rd)
{
    char *text = rd->payload;
    FUZZ_ASSERT(strlen(text) <= rd->header.length, "a message longer than its header says");
    if (rd->header.type == TP_MSG_ERROR) {
        const char *nl = strchr(text, '\n');
        (void)nl;
        (void)atoi(text);
        return;
    }
    int records = 0; /* the world's size: the records the table holds, up to 64 */
    for (const char *e = text; records < 64 && (e = strstr(e, "\nend\n")) != NULL; e++) records++;
    tp_world_t w = {.size = records > 0 ? records : 1};
    char why[256];
    (void)tp_table_adopt(&w, tp_msg_reader_take(rd), why, sizeof(why)); /* the world's now, as in join_exchange */
    free(w.peers);
    free(w.peer_text);
}

/* Byte 0: the reader's payload limit (small ones exercise the refusal); the rest is what the peer sends. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t max_payload = data[0] < 128 ? (size_t)data[0] * 64 : (size_t)1 << 20;
    data++, size--;
    int fds[2];
    if (fuzz_socketpair(fds) != 0) return 0;
    tp_msg_reader_t rd;
    tp_msg_reader_init(&rd, max_payload);
    size_t off = 0;
    char why[256];
    for (int rounds = 0; rounds < 100000; rounds++) {
        fuzz_feed(fds[1], data, size, &off);
        tp_read_result_t r = tp_msg_reader_step(&rd, fds[0], why, sizeof(why));
        if (r == TP_READ_MSG) {
            parse_message(&rd);
            tp_msg_reader_reset(&rd);
            continue;
        }
        if (r == TP_READ_EOF || r == TP_READ_ERROR) break;
        FUZZ_ASSERT(off < size, "the reader waits for bytes after the peer closed");
    }
    tp_msg_reader_free(&rd);
    close(fds[0]);
    close(fds[1]);
    return 0;
}
