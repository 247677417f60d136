/*
 * torch_store_rank.c: a rank that does what torch's env:// rendezvous does under tprun: rank 0 binds
 * MASTER_ADDR's port MASTER_PORT with SO_REUSEADDR (on 0.0.0.0, or [::] dual-stack as TCPStore's libuv backend
 * does) and listens, the others connect to MASTER_ADDR:MASTER_PORT (retrying until it listens, as TCPStore's
 * clients do) and every rank exchanges a number with rank 0. Usage: torch_store_rank MODE [inet|inet6] where MODE is
 *   nolibtp      the store only
 *   init-first   tp_init, then the store, then tp_finalize
 *   store-first  the store, then tp_init, then tp_finalize
 *   across       the store, tp_init, an all-reduce, a store exchange, tp_finalize, another store exchange
 *   reserved     no store: on rank 0, a bind to MASTER_PORT without SO_REUSEADDR must fail (tprun holds it)
 * Prints "store rank R of N: ok (...)" and exits 0, or names what failed and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tp.h"

#define STORE_CONNECT_TIMEOUT_S 20

static int rank, world;

static void die(const char *fmt, const char *what)
{
    char msg[512];
    snprintf(msg, sizeof(msg), fmt, what);
    fprintf(stderr, "torch_store_rank: rank %d: %s\n", rank, msg); /* one write: a teardown may cut it short */
    exit(1);
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL) die("%s is not set", name);
    return atoi(v);
}

static void io_all(int fd, void *buf, size_t n, int writing)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k = writing ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) die("the store connection broke: %s", k == 0 ? "end of stream" : strerror(errno));
        p += k;
        n -= (size_t)k;
    }
}

/* Rank 0: the store's server socket, bound as TCPStore binds it. */
static int store_listen(int port, int inet6)
{
    int one = 1, zero = 0;
    int fd = socket(inet6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (inet6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        struct sockaddr_in6 sa = {
            .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = in6addr_any};
        rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    } else {
        struct sockaddr_in sa = {
            .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = {htonl(INADDR_ANY)}};
        rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    }
    if (rc != 0) {
        char what[160];
        snprintf(what, sizeof(what), "%s port %d (SO_REUSEADDR): %s", inet6 ? "[::]" : "0.0.0.0", port,
                 strerror(errno));
        die("bind %s", what);
    }
    if (listen(fd, world) != 0) die("listen on MASTER_PORT: %s", strerror(errno));
    return fd;
}

/* The others: connect to MASTER_ADDR:MASTER_PORT, again until rank 0 listens (TCPStore's clients retry too). */
static int store_connect(const char *addr, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) die("MASTER_ADDR \"%s\" is not an IPv4 address", addr);
    time_t until = time(NULL) + STORE_CONNECT_TIMEOUT_S;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket: %s", strerror(errno));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) return fd;
        int e = errno;
        close(fd);
        if (e != ECONNREFUSED || time(NULL) > until) die("connect to MASTER_ADDR:MASTER_PORT: %s", strerror(e));
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

typedef struct store {
    int listen_fd;
    int *peers; /* rank 0: one connection per other rank, in accept order */
    int fd;     /* the others: the connection to rank 0 */
} store_t;

static void store_open(store_t *s, int inet6)
{
    const char *addr = getenv("MASTER_ADDR");
    if (addr == NULL) die("%s is not set", "MASTER_ADDR");
    int port = env_int("MASTER_PORT");
    s->listen_fd = s->fd = -1;
    s->peers = NULL;
    if (rank != 0) {
        s->fd = store_connect(addr, port);
        return;
    }
    s->listen_fd = store_listen(port, inet6);
    s->peers = calloc((size_t)world, sizeof(int));
    if (s->peers == NULL) die("%s", "out of memory");
    for (int i = 1; i < world; i++)
        if ((s->peers[i] = accept(s->listen_fd, NULL, NULL)) < 0) die("accept: %s", strerror(errno));
}

/* Every rank sends rank + 1000 * round; rank 0 answers each with the sum, which every rank checks. */
static void store_exchange(store_t *s, int round)
{
    int32_t mine = rank + 1000 * round, sum = 0, want = 0;
    for (int r = 0; r < world; r++) want += r + 1000 * round;
    if (rank != 0) {
        io_all(s->fd, &mine, sizeof(mine), 1);
        io_all(s->fd, &sum, sizeof(sum), 0);
    } else {
        sum = mine;
        for (int i = 1; i < world; i++) {
            int32_t v;
            io_all(s->peers[i], &v, sizeof(v), 0);
            sum += v;
        }
        for (int i = 1; i < world; i++) io_all(s->peers[i], &sum, sizeof(sum), 1);
    }
    if (sum != want) die("the store exchange gave a wrong sum (%s)", "a rank was missing or sent twice");
}

static void store_close(store_t *s)
{
    for (int i = 1; s->peers != NULL && i < world; i++) close(s->peers[i]);
    free(s->peers);
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->fd >= 0) close(s->fd);
}

static tp_comm_t *lib_init(void)
{
    tp_comm_t *comm = NULL;
    tp_status_t st = tp_init(NULL, &comm);
    if (st != TP_OK) die("tp_init: %s", tp_status_string(st));
    if (tp_comm_rank(comm) != rank || tp_comm_size(comm) != world) die("%s", "tp_init's rank or size is not RANK's");
    return comm;
}

static void lib_finalize(tp_comm_t *comm)
{
    tp_status_t st = tp_finalize(comm);
    if (st != TP_OK) die("tp_finalize: %s", tp_status_string(st));
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "inet") != 0 && strcmp(argv[2], "inet6") != 0)) {
        fprintf(stderr, "usage: torch_store_rank nolibtp|init-first|store-first|across|reserved [inet|inet6]\n");
        return 2;
    }
    const char *mode = argv[1];
    int inet6 = argc == 3 && strcmp(argv[2], "inet6") == 0;
    rank = env_int("RANK");
    world = env_int("WORLD_SIZE");
    store_t s;
    tp_comm_t *comm = NULL;
    if (strcmp(mode, "nolibtp") == 0) {
        store_open(&s, inet6);
        store_exchange(&s, 1);
    } else if (strcmp(mode, "init-first") == 0) {
        comm = lib_init();
        store_open(&s, inet6);
        store_exchange(&s, 1);
        lib_finalize(comm);
    } else if (strcmp(mode, "store-first") == 0) {
        store_open(&s, inet6);
        comm = lib_init();
        store_exchange(&s, 1);
        lib_finalize(comm);
    } else if (strcmp(mode, "across") == 0) {
        store_open(&s, inet6);
        comm = lib_init();
        int64_t v = rank + 1, sum = 0;
        tp_status_t st = tp_all_reduce(comm, &v, &sum, 1, TP_I64, TP_SUM, NULL);
        if (st != TP_OK) die("tp_all_reduce: %s", tp_status_string(st));
        if (sum != (int64_t)world * (world + 1) / 2) die("%s", "tp_all_reduce gave a wrong sum");
        store_exchange(&s, 1);
        lib_finalize(comm);
        store_exchange(&s, 2);
    } else if (strcmp(mode, "reserved") == 0) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)env_int("MASTER_PORT"))};
        if (fd < 0) die("socket: %s", strerror(errno));
        if (rank == 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            die("%s", "MASTER_PORT is not reserved: a bind to 0.0.0.0 without SO_REUSEADDR took it");
        if (rank == 0 && errno != EADDRINUSE) die("bind to MASTER_PORT without SO_REUSEADDR: %s", strerror(errno));
        close(fd);
        printf("store rank %d of %d: ok (reserved, MASTER_PORT %s)\n", rank, world, getenv("MASTER_PORT"));
        return 0;
    } else {
        fprintf(stderr, "torch_store_rank: unknown mode \"%s\"\n", mode);
        return 2;
    }
    store_close(&s);
    const char *boot = getenv("TP_BOOT_ADDR"), *colon = boot ? strrchr(boot, ':') : NULL;
    /* Under tprun (not --pmix) the bootstrap has its own port: MASTER_PORT is the store's alone. */
    if (colon != NULL && atoi(colon + 1) == env_int("MASTER_PORT"))
        die("MASTER_PORT is the bootstrap's port (TP_BOOT_ADDR=%s)", boot);
    printf("store rank %d of %d: ok (%s, %s, MASTER_PORT %s)\n", rank, world, mode, inet6 ? "inet6" : "inet",
           getenv("MASTER_PORT"));
    return 0;
}
