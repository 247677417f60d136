/* runtime_bootstrap.c: rank 0 collects the check-ins in one poll loop; the others connect, send, and wait. */
#include "runtime_bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "runtime_config.h"
#include "runtime_iface.h"
#include "topo_report.h"
#include "runtime_log.h"
#include "runtime_record.h"
#include "runtime_wire.h"

#define RECORD_MAX    (TP_SETTINGS_MAX * (TP_SETTING_KEY_MAX + TP_SETTING_VALUE_MAX + 8) + TP_RECORD_TEXT_MAX)
/* The longest table of n records: rank 0's record with its settings, the others' without (as rank 0 sends it). */
#define TABLE_MAX(n)  ((size_t)(n) * TP_RECORD_TEXT_MAX + RECORD_MAX)
#define PENDING_EXTRA 64 /* handshakes held beyond one per rank still expected */

enum { CONN_AUTH, CONN_RECORD, CONN_IN };

typedef struct boot_conn {
    int fd;
    int state;
    int rank;
    char name[64];
    tp_auth_accept_t auth;
    tp_msg_reader_t reader;
} boot_conn_t;

static int64_t seconds_ns(double s) { return (int64_t)(s * 1e9); }

static tp_status_t resolve_ipv4(const char *host, char *out, size_t len)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0) return TP_ERR_NOT_FOUND;
    inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, out, (socklen_t)len);
    freeaddrinfo(ai);
    return TP_OK;
}

static tp_status_t root_listen(tp_world_t *w)
{
    char why[256];
    if (w->boot_listen_fd < 0) {
        tp_status_t s =
            tp_tcp_listen(NULL, w->boot_port, w->size + PENDING_EXTRA, &w->boot_listen_fd, why, sizeof(why));
        if (s != TP_OK) {
            tp_log(TP_LOG_ERROR, "boot", "rank 0: %s (is another job using port %d? set TP_BOOT_ADDR)", why,
                   w->boot_port);
            return TP_ERR_BOOTSTRAP;
        }
    }
    tp_fd_set_nonblocking(w->boot_listen_fd);
    tp_socket_local_ip(w->boot_listen_fd, w->advertise_ip, sizeof(w->advertise_ip));
    if (strcmp(w->advertise_ip, "0.0.0.0") == 0 &&
        resolve_ipv4(w->boot_host, w->advertise_ip, sizeof(w->advertise_ip)) != TP_OK)
        snprintf(w->advertise_ip, sizeof(w->advertise_ip), "127.0.0.1");
    return TP_OK;
}

/* An address of rank 0's host that is not the last to try gets at most this long to answer a connect. */
#define BOOT_ATTEMPT_NS 2000000000LL
tp_status_t tp_boot_connect(tp_world_t *w)
{
    if (w->rank == 0) return root_listen(w);
    int64_t start = tp_now_ns(), deadline = start + seconds_ns(w->boot_timeout_s);
    int64_t next_report = start + seconds_ns(w->boot_report_s), backoff = 1000000;
    /* TP_BOOT_ADDR's addresses, best first: rank 0's bootstrap, then the others of its host. */
    const char *hosts[TP_BOOT_MORE_MAX + 1] = {w->boot_host};
    int ports[TP_BOOT_MORE_MAX + 1] = {w->boot_port}, n = 1;
    for (int k = 0; k < w->boot_nmore; k++, n++) hosts[n] = w->boot_more_host[k], ports[n] = w->boot_more_port[k];
    char peer[TP_HOST_MAX + 64], why[TP_BOOT_MORE_MAX + 1][256];
    for (int k = 0; k < n; k++) why[k][0] = '\0';
    for (;;) {
        /* One round over the addresses: a refused one (the listener not up yet) or a dead one gives way to the next. */
        for (int k = 0; k < n; k++) {
            int fd;
            int64_t until = deadline;
            if (n > 1 && until - tp_now_ns() > BOOT_ATTEMPT_NS) until = tp_now_ns() + BOOT_ATTEMPT_NS;
            snprintf(peer, sizeof(peer), "rank 0's bootstrap at %s:%d", hosts[k], ports[k]);
            tp_status_t s = tp_tcp_connect(hosts[k], ports[k], until, &fd, why[k], sizeof(why[k]));
            if (s == TP_ERR_INVALID) {
                tp_log(TP_LOG_ERROR, "boot", "%s: %s", peer, why[k]);
                return TP_ERR_BOOTSTRAP;
            }
            if (s != TP_OK) continue;
            s = tp_auth_connect(fd, w->job_key, TP_CONN_BOOT, w->rank, deadline, peer);
            if (s == TP_OK) {
                for (int j = 0; j < k; j++)
                    tp_log(TP_LOG_WARN, "boot", "rank 0's bootstrap at %s:%d did not answer (%s); checked in at %s:%d",
                           hosts[j], ports[j], why[j], hosts[k], ports[k]);
                w->boot_fd = fd;
                tp_socket_local_ip(fd, w->advertise_ip, sizeof(w->advertise_ip));
                return TP_OK;
            }
            close(fd);
            if (s == TP_ERR_PROTOCOL) return TP_ERR_BOOTSTRAP;
            snprintf(why[k], sizeof(why[k]), "%s",
                     s == TP_ERR_BOOTSTRAP ? "no answer to the handshake"
                                           : "it closed the connection during the handshake");
        }
        /* "rank 0's bootstrap at H:P (why)", or with several addresses each with its own reason. */
        char all[1200];
        size_t o = (size_t)snprintf(all, sizeof(all), "rank 0's bootstrap at ");
        for (int k = 0; k < n && o < sizeof(all) - 1; k++)
            o += (size_t)snprintf(all + o, sizeof(all) - o, "%s%s:%d (%s)", k ? ", " : "", hosts[k], ports[k], why[k]);
        int64_t now = tp_now_ns();
        if (now >= deadline) {
            tp_log(TP_LOG_ERROR, "boot",
                   "bootstrap timed out after %g s: could not check in with %s; waiting for rank 0", w->boot_timeout_s,
                   all);
            return TP_ERR_BOOTSTRAP;
        }
        if (now >= next_report) {
            tp_log(TP_LOG_WARN, "boot", "waiting for rank 0: %s", all);
            next_report = now + seconds_ns(w->boot_report_s);
        }
        struct timespec ts = {0, (long)backoff};
        nanosleep(&ts, NULL); /* retry pacing for a listener that is not up yet, not synchronization */
        if (backoff < 100000000) backoff *= 2;
    }
}

/* ---- rank 0 ---- */

static void conn_close(boot_conn_t *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    tp_msg_reader_free(&c->reader);
}

static void missing_ranks(const int *in, int n, char *out, size_t len)
{
    int *m = malloc((size_t)n * sizeof(int)), k = 0;
    if (m == NULL) return (void)snprintf(out, len, "?");
    for (int r = 0; r < n; r++)
        if (!in[r]) m[k++] = r;
    tp_format_ranks(m, k, out, len);
    free(m);
}

/* Sends an error to every checked-in rank; they fail with the same message. */
static void root_broadcast_error(boot_conn_t *conns, int nconns, tp_status_t status, const char *msg)
{
    char buf[4200];
    int n = snprintf(buf, sizeof(buf), "%d\n%s", (int)status, msg);
    if (n >= (int)sizeof(buf)) n = (int)sizeof(buf) - 1;
    for (int i = 0; i < nconns; i++)
        if (conns[i].fd >= 0 && conns[i].state == CONN_IN)
            tp_wire_send_msg(conns[i].fd, TP_MSG_ERROR, buf, (size_t)n, tp_now_ns() + 1000000000);
}

/* Connections still proving the key: room for each rank still expected and PENDING_EXTRA strays. */
static int auth_pending(const boot_conn_t *conns, int nconns)
{
    int n = 0;
    for (int i = 0; i < nconns; i++) n += conns[i].fd >= 0 && conns[i].state == CONN_AUTH;
    return n;
}

/*
 * Drops the connections past their handshake deadline; returns the earliest deadline of the others (INT64_MAX
 * when none). A real rank proves the key at once, so only strays and the idle are dropped.
 */
static int64_t root_expire(boot_conn_t *conns, int nconns, tp_refusals_t *refused)
{
    int64_t now = tp_now_ns(), next = INT64_MAX;
    for (int i = 0; i < nconns; i++) {
        if (conns[i].fd < 0 || conns[i].state != CONN_AUTH || !tp_auth_accept_expired(&conns[i].auth, now, &next))
            continue;
        struct pollfd q = {.fd = conns[i].fd, .events = POLLIN};
        if (poll(&q, 1, 0) == 1) continue; /* its proof came while this loop did not run: read before dropping it */
        tp_refusals_note(refused, TP_REFUSED_LATE, conns[i].name, "%s", "");
        conn_close(&conns[i]);
    }
    return next;
}

/* Accepts while there is room: a connection beyond it waits in the kernel's queue until a stray is dropped. */
static void root_accept(tp_world_t *w, boot_conn_t *conns, int *nconns, int cap, int room)
{
    for (int pending = auth_pending(conns, *nconns); pending < room && *nconns < cap; pending++) {
        int fd = accept4(w->boot_listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        int one = 1; /* these carry fate's verdict and stop news later: no Nagle wait behind an unacknowledged heartbeat */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        boot_conn_t *c = &conns[(*nconns)++];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->rank = -1;
        c->state = CONN_AUTH;
        tp_sockaddr_string(fd, 1, c->name, sizeof(c->name));
        tp_auth_accept_init(&c->auth);
        tp_msg_reader_init(&c->reader, RECORD_MAX);
    }
}

/* Handles one readable connection; returns a job-fatal status with msg set, or TP_OK. */
static tp_status_t root_service(tp_world_t *w, boot_conn_t *c, tp_checkin_t *checkins, int *in, int *checked, char *msg,
                                size_t msg_len, tp_refusals_t *refused)
{
    char why[256];
    if (c->state == CONN_AUTH) {
        tp_auth_result_t a = tp_auth_accept_step(&c->auth, c->fd, w->job_key, TP_CONN_BOOT, why, sizeof(why));
        if (a == TP_AUTH_MORE) return TP_OK;
        if (a == TP_AUTH_DONE && (c->auth.rank < 1 || c->auth.rank >= w->size)) {
            snprintf(why, sizeof(why), "claims rank %d, not in 1..%d", c->auth.rank, w->size - 1);
            a = TP_AUTH_REFUSED;
        }
        if (a == TP_AUTH_REFUSED) {
            tp_refusals_note(refused, TP_REFUSED_BAD, c->name, "refused connection from %s: %s", c->name, why);
            conn_close(c);
            return TP_OK;
        }
        c->rank = c->auth.rank;
        c->state = CONN_RECORD;
    }
    tp_read_result_t r = tp_msg_reader_step(&c->reader, c->fd, why, sizeof(why));
    if (r == TP_READ_MORE) return TP_OK;
    if (c->state == CONN_IN) {
        snprintf(msg, msg_len, "rank %d (host %s, pid %d) %s during the bootstrap", c->rank,
                 checkins[c->rank].record.host, (int)checkins[c->rank].record.pid,
                 r == TP_READ_EOF ? "closed its connection (it died or exited)" : "broke the protocol");
        return TP_ERR_BOOTSTRAP;
    }
    if (r == TP_READ_MSG && c->reader.header.type != TP_MSG_RECORD) {
        snprintf(why, sizeof(why), "sent message type %u before its record", c->reader.header.type);
        r = TP_READ_ERROR;
    }
    tp_checkin_t ci;
    char *text = c->reader.payload;
    if (r == TP_READ_MSG && tp_record_parse(&text, &ci, why, sizeof(why)) != TP_OK) r = TP_READ_ERROR;
    if (r == TP_READ_MSG) ci.text = tp_msg_reader_take(&c->reader); /* the text the check-in's strings are in */
    if (r == TP_READ_MSG && ci.record.rank != c->rank) {
        snprintf(why, sizeof(why), "authenticated as rank %d but its record says rank %d", c->rank, ci.record.rank);
        tp_checkin_free(&ci);
        r = TP_READ_ERROR;
    }
    if (r != TP_READ_MSG) {
        tp_refusals_note(refused, TP_REFUSED_BAD, c->name, "dropped connection from %s (rank %d): %s", c->name, c->rank,
                         r == TP_READ_EOF ? "closed before checking in" : why);
        conn_close(c);
        return TP_OK;
    }
    if (in[c->rank]) {
        snprintf(msg, msg_len, "rank %d checked in twice: pid %d on %s and pid %d on %s", c->rank,
                 (int)checkins[c->rank].record.pid, checkins[c->rank].record.host, (int)ci.record.pid, ci.record.host);
        tp_checkin_free(&ci);
        return TP_ERR_BOOTSTRAP;
    }
    checkins[c->rank] = ci;
    in[c->rank] = 1;
    (*checked)++;
    c->state = CONN_IN;
    tp_msg_reader_reset(&c->reader);
    return TP_OK;
}

/* Sends the table to every rank; *out is its text (the records' strings on rank 0 as well). */
static tp_status_t root_send_table(tp_world_t *w, boot_conn_t *conns, int nconns, tp_checkin_t *checkins, char **out)
{
    size_t cap = TABLE_MAX(w->size), used = 0;
    char *table = malloc(cap);
    if (table == NULL) return TP_ERR_NO_MEMORY;
    for (int r = 0; r < w->size; r++) {
        int n = tp_record_format_after(&checkins[r].record, r > 0 ? &checkins[r - 1].record : NULL,
                                       checkins[0].settings, r == 0 ? checkins[0].num_settings : 0, table + used,
                                       cap - used);
        if (n < 0) {
            free(table);
            return TP_ERR_NO_MEMORY;
        }
        used += (size_t)n;
    }
    int64_t deadline = tp_now_ns() + seconds_ns(w->boot_timeout_s);
    double delay_s = tp_config_seconds("TP_TEST_TABLE_DELAY"); /* for tests: a slow bootstrap's end */
    for (int i = 0; i < nconns; i++) {
        if (conns[i].fd < 0 || conns[i].state != CONN_IN) continue;
        /* room for the whole table: a rank that is slow to read it does not hold up the others' */
        int room = used + 65536 < (size_t)INT32_MAX ? (int)used + 65536 : INT32_MAX;
        setsockopt(conns[i].fd, SOL_SOCKET, SO_SNDBUF, &room, sizeof(room));
        if (tp_wire_send_msg(conns[i].fd, TP_MSG_TABLE, table, used, deadline) != TP_OK) {
            tp_log(TP_LOG_ERROR, "boot", "rank %d (host %s) closed its connection before the table reached it",
                   conns[i].rank, checkins[conns[i].rank].record.host);
            free(table);
            return TP_ERR_PEER_FAILED;
        }
        w->fate_fds[conns[i].rank] = conns[i].fd;
        conns[i].fd = -1; /* kept open for the fate path */
        if (delay_s > 0)
            nanosleep(&(struct timespec){(time_t)delay_s, (long)((delay_s - (time_t)delay_s) * 1e9)}, NULL);
    }
    char *fit = realloc(table, used + 1);
    *out = fit != NULL ? fit : table;
    return TP_OK;
}

static tp_status_t root_exchange(tp_world_t *w, tp_checkin_t *checkins)
{
    /* checked-in ranks, ranks sending their record, and the handshakes (at most one per rank expected + extra) */
    int cap = 2 * w->size + PENDING_EXTRA, nconns = 0, checked = 1;
    tp_refusals_t refused = {.subsys = "boot"};
    boot_conn_t *conns = calloc((size_t)cap, sizeof(*conns));
    int *in = calloc((size_t)w->size, sizeof(int));
    struct pollfd *pfd = calloc((size_t)cap + 1, sizeof(*pfd));
    char msg[4096] = "";
    tp_status_t s = TP_OK;
    if (conns == NULL || in == NULL || pfd == NULL) {
        s = TP_ERR_NO_MEMORY;
        goto out;
    }
    in[0] = 1;
    int64_t start = tp_now_ns(), deadline = start + seconds_ns(w->boot_timeout_s);
    int64_t next_report = start + seconds_ns(w->boot_report_s);
    while (checked < w->size) {
        int64_t now = tp_now_ns();
        char list[512];
        if (now >= deadline) {
            missing_ranks(in, w->size, list, sizeof(list));
            snprintf(msg, sizeof(msg), "bootstrap timed out after %g s: rank%s %s never checked in (%d/%d did)",
                     w->boot_timeout_s, strchr(list, ',') || strchr(list, '-') ? "s" : "", list, checked, w->size);
            s = TP_ERR_BOOTSTRAP;
            break;
        }
        if (now >= next_report) {
            missing_ranks(in, w->size, list, sizeof(list));
            tp_log(TP_LOG_WARN, "boot", "waiting for rank%s %s: %d/%d checked in", w->size - checked > 1 ? "s" : "",
                   list, checked, w->size);
            tp_refusals_report(&refused);
            next_report = now + seconds_ns(w->boot_report_s);
        }
        int64_t until = next_report < deadline ? next_report : deadline,
                next_expiry = root_expire(conns, nconns, &refused);
        if (next_expiry < until) until = next_expiry;
        /* Compact closed connections, then poll the listener (while there is room) and every open connection. */
        int k = 0;
        for (int i = 0; i < nconns; i++)
            if (conns[i].fd >= 0) conns[k++] = conns[i];
        nconns = k;
        int room = w->size - checked + PENDING_EXTRA;
        int full = auth_pending(conns, nconns) >= room || nconns >= cap;
        pfd[0] = (struct pollfd){.fd = full ? -1 : w->boot_listen_fd, .events = POLLIN};
        for (int i = 0; i < nconns; i++) pfd[i + 1] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        int rc = poll(pfd, (nfds_t)nconns + 1, until > now ? (int)((until - now + 999999) / 1000000) : 0);
        if (rc < 0 && errno != EINTR) {
            snprintf(msg, sizeof(msg), "poll failed: %s", strerror(errno));
            s = TP_ERR_SYSTEM;
            break;
        }
        if (rc <= 0) continue;
        int polled = nconns;
        for (int i = 0; i < polled && s == TP_OK; i++)
            if (pfd[i + 1].revents) s = root_service(w, &conns[i], checkins, in, &checked, msg, sizeof(msg), &refused);
        if (s != TP_OK) break;
        if (pfd[0].revents) root_accept(w, conns, &nconns, cap, w->size - checked + PENDING_EXTRA);
    }
    for (int i = 0; i < nconns; i++)
        if (conns[i].fd >= 0 && conns[i].state != CONN_IN) {
            tp_refusals_note(&refused, TP_REFUSED_STRAY, conns[i].name,
                             "refused connection from %s: still in the handshake when every rank had checked in",
                             conns[i].name);
            conn_close(&conns[i]);
        }
    tp_refusals_report(&refused);
    if (s == TP_OK) s = tp_settings_compare(checkins, w->size, msg, sizeof(msg));
    tp_peer_record_t *records = s == TP_OK ? malloc((size_t)w->size * sizeof(*records)) : NULL;
    if (s == TP_OK && records == NULL) {
        snprintf(msg, sizeof(msg), "rank 0: out of memory for %d records", w->size);
        s = TP_ERR_NO_MEMORY;
    }
    if (s == TP_OK) {
        for (int r = 0; r < w->size; r++) records[r] = checkins[r].record;
        tp_records_derive_locality(records, w->size);
        for (int r = 0; r < w->size; r++) checkins[r].record = records[r];
        free(records);
        int64_t in_at = tp_now_ns();
        struct timespec cpu0, cpu1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
        char *table = NULL;
        s = root_send_table(w, conns, nconns, checkins, &table);
        if (s == TP_OK && tp_table_adopt(w, table, msg, sizeof(msg)) != TP_OK) {
            tp_log(TP_LOG_ERROR, "boot", "rank 0 cannot read its own table: %s", msg);
            s = TP_ERR_PROTOCOL;
        }
        /* where the bootstrap's time goes: waiting for ranks to start, or this loop */
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
        tp_log(TP_LOG_DEBUG, "boot",
               "%d ranks checked in %.3f s after rank 0 listened; tables sent in %.3f s (%.3f s of this thread's CPU)",
               w->size, (double)(in_at - start) / 1e9, (double)(tp_now_ns() - in_at) / 1e9,
               (double)(cpu1.tv_sec - cpu0.tv_sec) + (double)(cpu1.tv_nsec - cpu0.tv_nsec) / 1e9);
    } else {
        tp_log(TP_LOG_ERROR, "boot", "%s", msg);
        root_broadcast_error(conns, nconns, s, msg);
    }
out:
    for (int i = 0; conns && i < nconns; i++) conn_close(&conns[i]);
    free(conns);
    free(in);
    free(pfd);
    return s;
}

/* ---- every other rank ---- */

static tp_status_t join_wait_table(tp_world_t *w, tp_msg_reader_t *rd)
{
    int64_t start = tp_now_ns();
    /* Rank 0 reports the outcome at its own deadline; the grace covers ranks that started before it. */
    int64_t deadline = start + seconds_ns(w->boot_timeout_s) + 5000000000LL;
    int64_t next_report = start + seconds_ns(w->boot_report_s);
    char why[256];
    for (;;) {
        tp_read_result_t r = tp_msg_reader_step(rd, w->boot_fd, why, sizeof(why));
        if (r == TP_READ_MSG) return TP_OK;
        if (r == TP_READ_EOF) return TP_ERR_PEER_FAILED; /* the caller checks in again, or says so */
        if (r == TP_READ_ERROR) {
            tp_log(TP_LOG_ERROR, "boot", "bad message from rank 0: %s", why);
            return TP_ERR_PROTOCOL;
        }
        int64_t now = tp_now_ns();
        if (now >= deadline) {
            tp_log(TP_LOG_ERROR, "boot",
                   "bootstrap timed out: checked in with rank 0 but no table came within "
                   "%g s",
                   w->boot_timeout_s + 5);
            return TP_ERR_BOOTSTRAP;
        }
        if (now >= next_report) {
            tp_log(TP_LOG_INFO, "boot", "checked in; waiting for the other ranks (rank 0 names the missing ones)");
            next_report = now + seconds_ns(w->boot_report_s);
        }
        int64_t until = next_report < deadline ? next_report : deadline;
        struct pollfd p = {.fd = w->boot_fd, .events = POLLIN};
        poll(&p, 1, (int)((until - now + 999999) / 1000000));
    }
}

static tp_status_t join_exchange(tp_world_t *w, const char *record, size_t len)
{
    int64_t deadline = tp_now_ns() + seconds_ns(w->boot_timeout_s);
    if (tp_wire_send_msg(w->boot_fd, TP_MSG_RECORD, record, len, deadline) != TP_OK) return TP_ERR_PEER_FAILED;
    tp_msg_reader_t rd;
    tp_msg_reader_init(&rd, TABLE_MAX(w->size));
    tp_status_t s = join_wait_table(w, &rd);
    if (s == TP_OK && rd.header.type == TP_MSG_ERROR) {
        char *nl = strchr(rd.payload, '\n');
        int code = atoi(rd.payload);
        tp_log(TP_LOG_ERROR, "boot", "%s", nl ? nl + 1 : rd.payload);
        s = code <= -200 && code >= -203 ? (tp_status_t)code : TP_ERR_BOOTSTRAP;
    } else if (s == TP_OK && rd.header.type != TP_MSG_TABLE) {
        tp_log(TP_LOG_ERROR, "boot", "rank 0 sent message type %u instead of the table", rd.header.type);
        s = TP_ERR_PROTOCOL;
    }
    if (s == TP_OK) {
        char why[256];
        s = tp_table_adopt(w, tp_msg_reader_take(&rd), why, sizeof(why)) == TP_OK ? TP_OK : TP_ERR_PROTOCOL;
        if (s != TP_OK) tp_log(TP_LOG_ERROR, "boot", "bad table from rank 0 %s", why);
    }
    tp_msg_reader_free(&rd);
    return s;
}

/* This rank's record, its strings in room. */
static void own_record(const tp_world_t *w, tp_record_room_t *room, tp_peer_record_t *me)
{
    *me = (tp_peer_record_t){.rank = w->rank,
                             .local_rank = w->local_rank,
                             .local_size = w->local_size,
                             .node_rank = w->node_rank,
                             .pid = getpid()};
    tp_record_room_point(room, me);
    /* The launcher's name for this host: hosts that share a kernel (namespaces, containers) share gethostname. */
    const char *host = getenv("TP_HOST");
    if (host != NULL && host[0] != '\0') snprintf(room->host, sizeof(room->host), "%s", host);
    else if (gethostname(room->host, sizeof(room->host)) != 0 || room->host[0] == '\0')
        snprintf(room->host, sizeof(room->host), "?");
    room->host[sizeof(room->host) - 1] = '\0';
    tp_iface_publish(room->ifaces, sizeof(room->ifaces));
    tp_topo_publish(w->local_rank, w->local_size, room);
    snprintf(room->boot_ip, sizeof(room->boot_ip), "%s", w->advertise_ip);
    snprintf(room->addresses, sizeof(room->addresses), "%s", w->my_addresses);
    tp_kernel_identity(room->kernel, sizeof(room->kernel));
}

/* This rank's record as text in a buffer about its size (most are under 1 KB; *n = -1 when over RECORD_MAX): a
 * RECORD_MAX buffer, freed, would raise glibc's mmap threshold to 300 KB, and this rank's later large callocs (the
 * collectives' per-peer tables) would be cleared page by page rather than mapped untouched. NULL: no memory. */
static char *format_own(const tp_world_t *w, int *n)
{
    tp_record_room_t room = {0};
    tp_peer_record_t me;
    own_record(w, &room, &me);
    *n = -1;
    for (size_t cap = 4096;; cap *= 2) {
        char *record = malloc(cap);
        if (record == NULL) return NULL;
        if ((*n = tp_record_format(&me, w->settings, w->num_settings, record, cap)) >= 0 || cap >= RECORD_MAX)
            return record;
        free(record);
    }
}

tp_status_t tp_boot_exchange(tp_world_t *w)
{
    int n;
    char *record = format_own(w, &n);
    w->fate_fds = malloc((size_t)w->size * sizeof(int));
    if (record == NULL || w->fate_fds == NULL) {
        free(record);
        return TP_ERR_NO_MEMORY;
    }
    for (int r = 0; r < w->size; r++) w->fate_fds[r] = -1;
    tp_status_t s;
    if (n < 0) {
        tp_log(TP_LOG_ERROR, "boot", "this rank's record exceeds %zu bytes (too many or too long settings)",
               (size_t)RECORD_MAX);
        s = TP_ERR_INVALID;
    } else if (w->size == 1) { /* a world of one needs no exchange: its table is its own record */
        char why[256];
        s = tp_table_adopt(w, record, why, sizeof(why));
        record = NULL; /* the world's now */
        if (s != TP_OK) tp_log(TP_LOG_ERROR, "boot", "this rank's own record does not parse: %s", why);
        else tp_records_derive_locality(w->peers, 1);
    } else if (w->rank == 0) {
        tp_checkin_t *checkins = calloc((size_t)w->size, sizeof(*checkins));
        char *text = record; /* kept until the table is made: checkins[0]'s strings */
        char why[256];
        s = checkins == NULL ? TP_ERR_NO_MEMORY : tp_record_parse(&text, &checkins[0], why, sizeof(why));
        if (s == TP_OK) s = root_exchange(w, checkins);
        for (int r = 0; checkins && r < w->size; r++) tp_checkin_free(&checkins[r]);
        free(checkins);
    } else {
        /* Rank 0 drops a handshake it could not read by its deadline (it, or this rank, did not run in time): a
         * connection closed before the table checks in again while rank 0 still listens. */
        for (int again = 0; (s = join_exchange(w, record, (size_t)n)) == TP_ERR_PEER_FAILED && again < 3; again++) {
            tp_log(TP_LOG_DEBUG, "boot", "rank 0 closed the bootstrap connection before the table; checking in again");
            close(w->boot_fd);
            w->boot_fd = -1;
            double timeout = w->boot_timeout_s;
            w->boot_timeout_s = timeout < 10 ? timeout : 10; /* a live rank 0 answers at once; a dead one never */
            tp_status_t c = tp_boot_connect(w);
            w->boot_timeout_s = timeout;
            if (c != TP_OK) break;
        }
        if (s == TP_ERR_PEER_FAILED) {
            tp_log(TP_LOG_ERROR, "boot",
                   "rank 0 closed the bootstrap connection before sending the table, and did not take this rank's "
                   "check-in again (rank 0 failed; its own message says why)");
            s = TP_ERR_BOOTSTRAP;
        }
        w->fate_fds[0] = w->boot_fd;
    }
    free(record);
    return s;
}
