/*
 * coll_intruder: connects to a rank's TCP transport listener and misbehaves in one chosen way; or, with "self",
 * opens the TCP transport as rank 1 of 3 and intrudes on its own listener in every way, one after the other, before
 * dialing it as rank 2: each stray is refused and logged, and the mesh still completes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/wait.h>
#include <tp_provider.h>

#include "tcp_raw.h"

#define MAX_SIZE 129 /* the largest world opened here (the burst's) */

/* The TCP transport, found among the registered ones: this test reaches it through its ops table only. */
static const tp_transport_ops_t *tcp_ops(void)
{
    for (int i = 0; tp_transport_at(i) != NULL; i++)
        if (strcmp(tp_transport_at(i)->name, "tcp") == 0) return tp_transport_at(i);
    fprintf(stderr, "coll_intruder: no transport named tcp is registered\n");
    return NULL;
}

/* Directions the transport reported connected, by peer: each one admitted or dialed is reported once. */
static int connected[MAX_SIZE];

static void on_connected(void *ctx, int peer, const char *local, const char *remote)
{
    if (peer >= 0 && peer < MAX_SIZE) connected[peer]++;
}

static int parse_key(const char *hex, uint8_t key[TP_JOB_KEY_BYTES])
{
    if (hex == NULL || strlen(hex) != 2 * TP_JOB_KEY_BYTES) return 0;
    for (int i = 0; i < TP_JOB_KEY_BYTES; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 0;
        key[i] = (uint8_t)v;
    }
    return 1;
}

/* One stray on 127.0.0.1:port; returns once the listener has closed the connection (or after 20 s). */
static int intrude(int port, const char *how, const uint8_t job_key[TP_JOB_KEY_BYTES])
{
    uint8_t key[TP_JOB_KEY_BYTES];
    memcpy(key, job_key, sizeof(key));
    if (strcmp(how, "wrongkey") == 0) memset(key, 0x5a, sizeof(key));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        perror("coll_intruder: connect");
        return 1;
    }
    printf("coll_intruder: %s: connected\n", how);
    fflush(stdout);
    int64_t deadline = tp_now_ns() + 20000000000LL;
    if (strcmp(how, "garbage") == 0) {
        const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        if (write(fd, req, sizeof(req) - 1) < 0) return 1;
    } else {
        /* wrongkey: another job's key; bootkind: this job's, as a bootstrap client; lowrank: rank 0, which rank 1
         * dials itself; badrank: a rank the job does not have; rank2, rank2r: the real rank 2's two connections
         * (the one it sends on, the one it reads: rank + size) */
        int rank = strcmp(how, "lowrank") == 0   ? 0
                   : strcmp(how, "badrank") == 0 ? 1000
                   : strcmp(how, "rank2r") == 0  ? 5
                                                 : 2;
        tp_conn_kind_t kind = strcmp(how, "bootkind") == 0 ? TP_CONN_BOOT : TP_CONN_TCP;
        tp_status_t s = tp_auth_connect(fd, key, kind, rank, deadline, "the tcp listener");
        printf("coll_intruder: %s: handshake %s\n", how, s == TP_OK ? "accepted" : "refused");
        fflush(stdout);
        if (strncmp(how, "rank2", 5) == 0) return s == TP_OK ? 0 : 1; /* left open until the child exits */
        if (s != TP_OK) { /* as a client of another job does when the listener fails its proof */
            close(fd);
            return 0;
        }
    }
    char buf[64];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (poll(&p, 1, 20000) > 0 && read(fd, buf, sizeof(buf)) > 0) {
    }
    close(fd);
    return 0;
}

/* The TCP transport opened as rank of size with a key made from seed; its state, and its listener's port. */
static void *open_tcp(const tp_transport_ops_t *ops, int rank, int size, double timeout_s, int seed,
                      uint8_t key[TP_JOB_KEY_BYTES], int *port)
{
    for (int i = 0; i < TP_JOB_KEY_BYTES; i++) key[i] = (uint8_t)(i * seed + 3);
    tp_transport_env_t env = {.rank = rank,
                              .size = size,
                              .job_key = key,
                              .connect_timeout_s = timeout_s,
                              .spin_us = 50,
                              .part_bytes = 65536,
                              .ip = "",
                              .on_loopback = 1,
                              .connected = on_connected};
    void *state;
    char address[128];
    if (ops == NULL || ops->open(&env, &state, address, sizeof(address)) != TP_OK) return NULL;
    *port = atoi(strrchr(address, ':') + 1);
    return state;
}

/* Rank 1 of 3 (rank 0 not used): only rank 2 may dial in; a child tries every stray first, then dials as rank 2. */
static int self_test(void)
{
    uint8_t key[TP_JOB_KEY_BYTES];
    int port;
    const tp_transport_ops_t *ops = tcp_ops();
    void *state = open_tcp(ops, 1, 3, 20, 17, key, &port);
    if (state == NULL) return 1;
    pid_t child = fork();
    if (child == 0) {
        static const char *const hows[] = {"garbage", "wrongkey", "bootkind", "lowrank", "badrank", "rank2", "rank2r"};
        for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++)
            if (intrude(port, hows[i], key) != 0) _exit(1);
        _exit(0);
    }
    tp_transport_peer_t peers[3] = {{.use = 0}, {.use = 0}, {.use = 1, .dial = ""}};
    tp_status_t s = ops->connect(state, peers);
    int ok = s == TP_OK && connected[2] == 2, status = 1;
    waitpid(child, &status, 0);
    printf("coll_intruder: self: %s, rank 2 %s\n", tp_status_string(s), ok ? "connected" : "not connected");
    ops->close(state);
    return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

#define BURST_SIZE MAX_SIZE /* a world whose rank 0 takes 256 connections at once */
#define BURST_IDLE 70

typedef struct burst_conn {
    int port, claim, ok;
    const uint8_t *key;
} burst_conn_t;

/* One real connection of the burst: connects and proves the key as the claimed direction of a higher rank. */
static void *burst_dial(void *arg)
{
    burst_conn_t *b = arg;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)b->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) return NULL;
    b->ok = tp_auth_connect(fd, b->key, TP_CONN_TCP, b->claim, tp_now_ns() + 15000000000LL, "rank 0") == TP_OK;
    return NULL; /* the socket stays open until the process exits */
}

/*
 * Rank 0 of BURST_SIZE: a child opens BURST_IDLE idle connections, then every higher rank's two connections at once
 * (one thread each, all mid-handshake together). Every real one must be admitted, however many strays are held.
 */
static int burst_test(void)
{
    uint8_t key[TP_JOB_KEY_BYTES];
    int port;
    const tp_transport_ops_t *ops = tcp_ops();
    void *state = open_tcp(ops, 0, BURST_SIZE, 15, 29, key, &port);
    if (state == NULL) return 1;
    int hold[2]; /* the child keeps its idle connections open until this end closes: until the mesh is done */
    if (pipe2(hold, O_CLOEXEC) != 0) return 1;
    pid_t child = fork();
    if (child == 0) {
        close(hold[1]);
        static burst_conn_t conns[2 * (BURST_SIZE - 1)];
        static pthread_t threads[2 * (BURST_SIZE - 1)];
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        for (int i = 0; i < BURST_IDLE; i++) {
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) _exit(3);
        }
        int n = 2 * (BURST_SIZE - 1), ok = 0;
        for (int i = 0; i < n; i++) {
            conns[i] = (burst_conn_t){.port = port, .claim = i / 2 + 1 + (i % 2) * BURST_SIZE, .key = key};
            if (pthread_create(&threads[i], NULL, burst_dial, &conns[i]) != 0) _exit(4);
        }
        for (int i = 0; i < n; i++) {
            pthread_join(threads[i], NULL);
            ok += conns[i].ok;
        }
        printf("coll_intruder: burst: %d of %d connections authenticated\n", ok, n);
        fflush(stdout);
        char c;
        while (read(hold[0], &c, 1) < 0 && errno == EINTR) {
        }
        _exit(ok == n ? 0 : 1);
    }
    close(hold[0]);
    tp_transport_peer_t peers[BURST_SIZE];
    for (int r = 0; r < BURST_SIZE; r++) peers[r] = (tp_transport_peer_t){.use = r > 0, .dial = ""};
    int64_t start = tp_now_ns();
    tp_status_t s = ops->connect(state, peers);
    double took = (double)(tp_now_ns() - start) / 1e9;
    int in = 0, status = 1;
    for (int r = 1; r < BURST_SIZE; r++) in += connected[r];
    close(hold[1]);
    waitpid(child, &status, 0);
    printf("coll_intruder: burst: %s, %d of %d connections in, %.2f s\n", tp_status_string(s), in, 2 * (BURST_SIZE - 1),
           took);
    ops->close(state);
    return s == TP_OK && in == 2 * (BURST_SIZE - 1) && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* The fake rank 0 of dropped_test: authenticates each dial and closes the first (always: every) one instead of
 * admitting it, as a listener drops a handshake it held past its deadline; returns once two are admitted. */
static int fake_listener(int lfd, const uint8_t key[TP_JOB_KEY_BYTES], int always)
{
    int handshakes = 0, admitted = 0, rank;
    while (admitted < 2) {
        int fd = tcp_raw_accept(lfd, key, &rank);
        if (fd < 0) return 5;
        if (always || ++handshakes == 1) { /* authenticated, then dropped before the admission byte */
            close(fd);
            continue;
        }
        char ok = 'A'; /* the transport's admission byte */
        if (write(fd, &ok, 1) != 1) return 6;
        admitted++; /* left open until the process exits */
    }
    printf("coll_intruder: dropped: %d handshakes for 2 connections\n", handshakes);
    fflush(stdout);
    return handshakes == 3 ? 0 : 1;
}

/*
 * Rank 1 of 2 dials rank 0, a listener of the test's own that drops rank 1's first connection after the handshake
 * (once: it must dial again and connect; always: it must fail by its timeout, saying what happened, in the calling
 * thread). A dialer that took a dropped connection for a made one left its peer waiting for the whole boot timeout.
 */
static int dropped_test(int always)
{
    uint8_t key[TP_JOB_KEY_BYTES];
    int port;
    const tp_transport_ops_t *ops = tcp_ops();
    void *state = open_tcp(ops, 1, 2, always ? 2 : 20, 23, key, &port);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (state == NULL || lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 8) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0)
        return 1;
    pid_t child = fork();
    if (child == 0) _exit(fake_listener(lfd, key, always));
    close(lfd);
    char dial[64];
    snprintf(dial, sizeof(dial), "127.0.0.1:%d", ntohs(sa.sin_port));
    tp_transport_peer_t peers[2] = {{.use = 1, .dial = dial}, {.use = 0}};
    int64_t start = tp_now_ns();
    tp_status_t s = ops->connect(state, peers);
    double took = (double)(tp_now_ns() - start) / 1e9;
    int status = 1;
    if (always) kill(child, SIGKILL);
    waitpid(child, &status, 0);
    printf("coll_intruder: dropped %s: %s after %.2f s, %d directions connected: %s\n", always ? "always" : "once",
           tp_status_string(s), took, connected[0], tp_last_error());
    ops->close(state);
    if (always) return s == TP_ERR_BOOTSTRAP && connected[0] == 0 && took < 10 ? 0 : 1;
    return s == TP_OK && connected[0] == 2 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "self") == 0) return self_test();
    if (argc == 2 && strcmp(argv[1], "burst") == 0) return burst_test();
    if (argc == 3 && strcmp(argv[1], "dropped") == 0) return dropped_test(strcmp(argv[2], "always") == 0);
    if (argc != 3) {
        fprintf(
            stderr,
            "usage: coll_intruder self | burst | dropped once|always | PORT garbage|wrongkey|bootkind|lowrank|badrank\n"
            "  (bootkind, lowrank and badrank authenticate with $TP_JOB_KEY)\n");
        return 2;
    }
    uint8_t key[TP_JOB_KEY_BYTES];
    if (!parse_key(getenv("TP_JOB_KEY"), key)) {
        fprintf(stderr, "coll_intruder: needs TP_JOB_KEY\n");
        return 2;
    }
    return intrude(atoi(argv[1]), argv[2], key);
}
