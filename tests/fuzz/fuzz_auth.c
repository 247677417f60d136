/* fuzz_auth.c: both sides of the connection handshake against a peer sending arbitrary bytes (runtime_auth.c). */
#include <stdio.h>

#include "fuzz_util.h"
#include "runtime_wire.h"

static const uint8_t key[TP_JOB_KEY_BYTES] = "fuzz-job-key-16b";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_logs();
    return 0;
}

/* Byte 0: bit 0 picks the side (listener or connecting rank), bit 1 the connection kind; the rest is the peer. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int client = data[0] & 1;
    tp_conn_kind_t kind = data[0] & 2 ? TP_CONN_TCP : TP_CONN_BOOT;
    data++, size--;
    int fds[2];
    if (fuzz_socketpair(fds) != 0) return 0;
    size_t off = 0;
    if (client) {
        fuzz_feed(fds[1], data, size, &off);
        if (off == size) /* the handshake is small: more than a socket holds is refused before it matters */
            (void)tp_auth_connect(fds[0], key, kind, 3, tp_now_ns(), "fuzz peer");
    } else {
        tp_auth_accept_t st;
        tp_auth_accept_init(&st);
        char why[256] = "";
        for (int rounds = 0; rounds < 100000; rounds++) {
            fuzz_feed(fds[1], data, size, &off);
            tp_auth_result_t r = tp_auth_accept_step(&st, fds[0], key, kind, why, sizeof(why));
            if (r != TP_AUTH_MORE) {
                FUZZ_ASSERT(r == TP_AUTH_REFUSED, "a peer without the key was accepted");
                FUZZ_ASSERT(why[0] != '\0', "a refusal without a reason");
                break;
            }
            FUZZ_ASSERT(off < size, "the handshake waits for bytes after the peer closed");
        }
    }
    close(fds[0]);
    close(fds[1]);
    return 0;
}
