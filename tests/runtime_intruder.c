/* runtime_intruder: connects to a bootstrap listener and misbehaves in one chosen way (for the tests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>

#include "runtime_wire.h"

static int parse_key(const char *hex, uint8_t key[16])
{
    if (hex == NULL || strlen(hex) != 32) return 0;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 0;
        key[i] = (uint8_t)v;
    }
    return 1;
}

/* n silent connections at once, each held until the listener closes it (or after 60 s). */
static int idle(const char *host, int port, int n, int64_t deadline)
{
    struct pollfd *p = calloc((size_t)n, sizeof(*p));
    char why[256];
    if (p == NULL) return 1;
    for (int i = 0; i < n; i++) {
        if (tp_tcp_connect(host, port, deadline, &p[i].fd, why, sizeof(why)) != TP_OK) {
            fprintf(stderr, "runtime_intruder: connect %s:%d: %s\n", host, port, why);
            return 1;
        }
        p[i].events = POLLIN;
    }
    printf("connected %d\n", n);
    fflush(stdout);
    int64_t end = tp_now_ns() + 60000000000LL;
    for (int open = n; open > 0 && tp_now_ns() < end;) {
        if (poll(p, (nfds_t)n, 1000) < 0) return 1;
        for (int i = 0; i < n; i++) {
            char buf[64];
            if (p[i].fd < 0 || p[i].revents == 0 || read(p[i].fd, buf, sizeof(buf)) > 0) continue;
            close(p[i].fd);
            p[i].fd = -1;
            open--;
        }
    }
    free(p);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 4 && strcmp(argv[2], "idle") == 0)) {
        fprintf(stderr, "usage: runtime_intruder HOST:PORT garbage|wrongkey|silent|badrank|oversized|badrecord\n"
                        "       runtime_intruder HOST:PORT idle N\n"
                        "  (badrank, oversized and badrecord authenticate with $TP_JOB_KEY; idle opens N silent\n"
                        "  connections, says \"connected N\" and holds them until the listener closes them all)\n");
        return 2;
    }
    char host[256];
    const char *colon = strrchr(argv[1], ':');
    if (colon == NULL || (size_t)(colon - argv[1]) >= sizeof(host)) return 2;
    memcpy(host, argv[1], (size_t)(colon - argv[1]));
    host[colon - argv[1]] = '\0';
    int port = atoi(colon + 1), fd;
    char why[256];
    int64_t deadline = tp_now_ns() + 5000000000LL;
    if (argc == 4) return idle(host, port, atoi(argv[3]), deadline);
    if (tp_tcp_connect(host, port, deadline, &fd, why, sizeof(why)) != TP_OK) {
        fprintf(stderr, "runtime_intruder: connect %s: %s\n", argv[1], why);
        return 1;
    }
    const char *how = argv[2];
    uint8_t key[16] = {0};
    if (strcmp(how, "garbage") == 0) {
        const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        tp_wire_write(fd, req, sizeof(req) - 1, deadline);
    } else if (strcmp(how, "wrongkey") == 0) {
        memset(key, 0x5a, sizeof(key));
        tp_auth_connect(fd, key, TP_CONN_BOOT, 1, deadline, "the bootstrap listener");
        close(fd); /* as a client of another job does when the listener fails its proof */
        return 0;
    } else if (strcmp(how, "silent") == 0) {
        /* holds the connection open without a word until the listener goes away */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, -1);
    } else {
        if (!parse_key(getenv("TP_JOB_KEY"), key)) {
            fprintf(stderr, "runtime_intruder: %s needs TP_JOB_KEY\n", how);
            return 2;
        }
        int rank = strcmp(how, "badrank") == 0 ? 1000 : 1;
        if (tp_auth_connect(fd, key, TP_CONN_BOOT, rank, deadline, "the bootstrap listener") != TP_OK) {
            printf("runtime_intruder: %s: handshake refused\n", how);
        } else if (strcmp(how, "oversized") == 0) {
            tp_msg_header_t h = {.magic = TP_WIRE_MAGIC, .type = TP_MSG_RECORD, .length = 0x7fffffff};
            tp_wire_write(fd, &h, sizeof(h), deadline);
        } else if (strcmp(how, "badrecord") == 0) {
            const char rec[] = "rank=1\npid=1\nhost=intruder\nbogus=1\nend\n";
            tp_wire_send_msg(fd, TP_MSG_RECORD, rec, sizeof(rec) - 1, deadline);
        }
    }
    /* Wait for the listener to drop us, so the refusal is logged before we exit. */
    char buf[64];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (poll(&p, 1, -1) > 0 && read(fd, buf, sizeof(buf)) > 0) {
    }
    close(fd);
    return 0;
}
