/* runtime_stop.c: finalize news for waiting calls: who called tp_finalize after how many calls, checked against
 * where a call waits (the stop word), and the eventfd that wakes a waiting call when news or a failure arrives. */
#include "runtime_stop.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime_log.h"

static struct {
    pthread_mutex_t lock;
    char **tables; /* by world rank: what it reported with its BYE, NULL while it has not */
    char *relayed; /* rank 0, by world rank: its table went to the ranks still in their calls */
    int size;
    int wake_fd;
    atomic_int failed;
    _Atomic uint64_t gen;
} stop = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake_fd = -1};

int tp_stop_wake_fd(void) { return stop.wake_fd; }

tp_status_t tp_stop_open(void)
{
    stop.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stop.wake_fd < 0) {
        tp_log(TP_LOG_ERROR, "fate", "eventfd for waiting calls: %m");
        return TP_ERR_SYSTEM;
    }
    atomic_store(&stop.failed, 0);
    atomic_store(&stop.gen, 0);
    return TP_OK;
}

void tp_stop_close(void)
{
    pthread_mutex_lock(&stop.lock);
    for (int r = 0; r < stop.size; r++) free(stop.tables[r]);
    free(stop.tables);
    free(stop.relayed);
    stop.tables = NULL;
    stop.relayed = NULL;
    stop.size = 0;
    pthread_mutex_unlock(&stop.lock);
    if (stop.wake_fd >= 0) close(stop.wake_fd);
    stop.wake_fd = -1;
}

static void wake(void)
{
    uint64_t one = 1;
    if (stop.wake_fd >= 0 && write(stop.wake_fd, &one, sizeof(one)) < 0) { /* the counter is already set */
    }
}

void tp_stop_wake_failed(void)
{
    atomic_store(&stop.failed, 1);
    wake();
}

int tp_stop_news(const char *news, int size)
{
    int r;
    for (const char *p = news; *p != '\0'; p = strchr(p, '\n') + 1) { /* every rank named is one of the job's */
        if (strchr(p, '\n') == NULL) return -1;
        if (p[0] == 'r' && (sscanf(p, "r %d", &r) != 1 || r < 0 || r >= size)) return -1;
    }
    pthread_mutex_lock(&stop.lock);
    if (stop.tables == NULL && (stop.tables = calloc((size_t)size, sizeof(*stop.tables))) != NULL) stop.size = size;
    for (const char *p = news; *p != '\0' && stop.tables != NULL;) {
        sscanf(p, "r %d", &r);
        const char *table = strchr(p, '\n') + 1, *end = table;
        while (*end != '\0' && *end != 'r') end = strchr(end, '\n') + 1;
        if (p[0] == 'r' && stop.tables[r] == NULL) stop.tables[r] = strndup(table, (size_t)(end - table));
        p = end; /* out of memory: those calls wait for the job's end as before the news */
    }
    pthread_mutex_unlock(&stop.lock);
    atomic_fetch_add(&stop.gen, 1);
    wake();
    return 0;
}

int tp_stop_relay_add(int rank, const char *bye_table, int size)
{
    size_t len = (bye_table != NULL ? strlen(bye_table) : 0) + 16;
    char *news = malloc(len);
    if (news == NULL) return -1;
    int n = snprintf(news, len, "r %d\n", rank);
    for (const char *line = bye_table, *nl; line != NULL && (nl = strchr(line, '\n')) != NULL; line = nl + 1)
        if ((line[0] == 'c' || line[0] == 'p') && line[1] == ' ') {
            memcpy(news + n, line, (size_t)(nl + 1 - line));
            n += (int)(nl + 1 - line);
        }
    news[n] = '\0';
    int rc = tp_stop_news(news, size);
    free(news);
    return rc;
}

char *tp_stop_relay_take(size_t *len)
{
    pthread_mutex_lock(&stop.lock);
    if (stop.relayed == NULL && stop.size > 0) stop.relayed = calloc((size_t)stop.size, 1);
    size_t need = 1;
    for (int r = 0; stop.relayed != NULL && r < stop.size; r++)
        if (stop.tables[r] != NULL && !stop.relayed[r]) need += 16 + strlen(stop.tables[r]);
    char *msg = need > 1 ? malloc(need) : NULL;
    size_t used = 0;
    for (int r = 0; msg != NULL && r < stop.size; r++)
        if (stop.tables[r] != NULL && !stop.relayed[r]) {
            stop.relayed[r] = 1;
            used += (size_t)snprintf(msg + used, need - used, "r %d\n%s", r, stop.tables[r]);
        }
    pthread_mutex_unlock(&stop.lock);
    *len = used;
    return msg;
}

uint64_t tp_stop_gen(void) { return atomic_load(&stop.gen); }

/* In r's table: its call count on comm_id (*calls), and with peer >= 0 its point-to-point counts with that world
 * rank (0 when none); returns 0 when the comm is not in it (its counts did not fit in memory: nothing is known). */
static int table_counts(const char *table, uint32_t comm_id, int peer, uint64_t *calls, uint64_t *sent,
                        uint64_t *received)
{
    int found = 0;
    *calls = *sent = *received = 0;
    for (const char *line = table; line != NULL && *line != '\0';) {
        unsigned id;
        int p;
        uint64_t a, b;
        if (sscanf(line, "c %u %" SCNu64, &id, &a) == 2 && id == comm_id) {
            found = 1;
            *calls = a;
        } else if (peer >= 0 && sscanf(line, "p %u %d %" SCNu64 " %" SCNu64, &id, &p, &a, &b) == 4 && id == comm_id &&
                   p == peer) {
            *sent = a;
            *received = b;
        }
        line = strchr(line, '\n');
        if (line != NULL) line++;
    }
    return found;
}

/* Whether member m (a world rank that reported) can no longer take part in the call. */
static int blocks(const char *table, const tp_comm_t *comm, const tp_stop_call_t *call, int me)
{
    uint64_t calls, sent, received;
    if (!table_counts(table, comm->comm_id, call->peer >= 0 ? me : -1, &calls, &sent, &received)) return 0;
    if (call->peer < 0) return calls <= call->index;
    /* it sent this rank `sent` messages and received `received` from it: the ones this rank waits for never come */
    return (call->recvs && sent <= call->recv_index) || (call->sends && received <= call->send_index);
}

tp_status_t tp_stop_check(const tp_comm_t *comm, const tp_stop_call_t *call)
{
    int first = -1, others = 0, me = comm->world_ranks[comm->rank];
    pthread_mutex_lock(&stop.lock);
    for (int i = 0; i < comm->size; i++) {
        int r = comm->world_ranks[i];
        if (i == comm->rank || r >= stop.size || stop.tables[r] == NULL) continue;
        if (call->peer >= 0 && i != call->peer) continue;
        if (!blocks(stop.tables[r], comm, call, me)) continue;
        if (first < 0) first = r;
        else others++;
    }
    pthread_mutex_unlock(&stop.lock);
    if (first < 0) {
        uint64_t v;
        if (!atomic_load(&stop.failed) && read(stop.wake_fd, &v, sizeof(v)) < 0) { /* nothing pending */
        }
        return TP_OK;
    }
    char more[48] = "";
    if (others > 0) snprintf(more, sizeof(more), " and %d other%s", others, others > 1 ? "s" : "");
    tp_log_status(TP_LOG_INFO, "coll",
                  "rank %d%s called tp_finalize while this rank waits in %s call %" PRIu64 " on comm %" PRIu32, first,
                  more, call->name, call->index, comm->comm_id);
    return TP_STOPPED;
}
