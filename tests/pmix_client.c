/* pmix_client.c: a plain PMIx program (no libtp) for tests/pmix_server.sh: world, fence and get, abort, events. */
#include <pmix.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pmix_proc_t me;

/* A status by PMIx 4's names: PMIx 5 spells them PMIX_ERR_TIMEOUT, PMIX_ERR_PROC_ABORTED, ... (PMIx_Error_string). */
static const char *status_name(pmix_status_t rc)
{
    switch (rc) {
    case PMIX_SUCCESS: return "SUCCESS";
    case PMIX_ERR_TIMEOUT: return "TIMEOUT";
    case PMIX_ERR_PROC_ABORTED: return "PROC-ABORTED";
    case PMIX_ERR_PARTIAL_SUCCESS: return "PARTIAL SUCCESS";
    case PMIX_ERR_UNREACH: return "UNREACHABLE";
    default: return PMIx_Error_string(rc);
    }
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = write(STDOUT_FILENO, line, (size_t)n);
    (void)w;
}

static void die(const char *what, pmix_status_t rc)
{
    say("rank %u: %s failed: %s", me.rank, what, status_name(rc));
    exit(1);
}

static pmix_value_t *get(const pmix_proc_t *proc, const char *key)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS) die(key, rc);
    return v;
}

static unsigned long number(pmix_value_t *v)
{
    unsigned long n = v->type == PMIX_UINT32 ? v->data.uint32
                      : v->type == PMIX_UINT16 ? v->data.uint16
                      : v->type == PMIX_PROC_RANK ? v->data.rank
                                                  : 999999;
    PMIX_VALUE_RELEASE(v);
    return n;
}

/* Waits to be ended by tprun; a bounded wait so a tprun that never acts fails the test instead of hanging it. */
static void wait_to_be_killed(void)
{
    for (int i = 0; i < 200; i++) usleep(100000);
    say("rank %u: still alive after 20 s", me.rank);
    exit(3);
}

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                     pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id, (void)source, (void)results, (void)nresults;
    long affected = -1;
    for (size_t i = 0; i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC)
            affected = (long)info[i].value.data.proc->rank;
    say("rank %u: event %s affected rank %ld", me.rank, status_name(status), affected);
    if (cbfunc != NULL) cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* A fence over procs (NULL: the whole namespace), collecting the data or not, with a PMIX_TIMEOUT when > 0. */
static pmix_status_t fence_over(const pmix_proc_t *procs, size_t nprocs, bool collect, int timeout)
{
    pmix_info_t info[2];
    size_t n = 0;
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
    if (collect) PMIX_INFO_LOAD(&info[n++], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    if (timeout > 0) PMIX_INFO_LOAD(&info[n++], PMIX_TIMEOUT, &timeout, PMIX_INT);
    return PMIx_Fence(procs != NULL ? procs : &all, procs != NULL ? nprocs : 1, n > 0 ? info : NULL, n);
}

static void fence(void)
{
    pmix_status_t rc = fence_over(NULL, 0, true, 0);
    if (rc != PMIX_SUCCESS) die("PMIx_Fence", rc);
}

static void put_string(const char *key, const char *value)
{
    pmix_value_t val = {.type = PMIX_STRING, .data.string = (char *)value};
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &val);
    if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) die("PMIx_Put/Commit", rc);
}

/* Fails unless peer's key holds want. */
static void expect_string(unsigned peer_rank, const char *key, const char *want)
{
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me.nspace, peer_rank);
    pmix_value_t *got = get(&peer, key);
    if (got->type != PMIX_STRING || strcmp(got->data.string, want) != 0) {
        say("rank %u: %s of rank %u is \"%s\", expected \"%s\"", me.rank, key, peer_rank,
            got->type == PMIX_STRING ? got->data.string : "(not a string)", want);
        exit(1);
    }
    PMIX_VALUE_RELEASE(got);
}

/* Rounds of collecting fences over everyone, then over the ranks of the same parity (each set its own sequence). */
static void many_fences(unsigned size, int rounds)
{
    char key[64], want[64];
    for (int i = 0; i < rounds; i++) {
        snprintf(key, sizeof(key), "test.round%d", i);
        snprintf(want, sizeof(want), "r-%u-%d", me.rank, i);
        put_string(key, want);
        fence();
        unsigned peer = (me.rank + 1 + (unsigned)i) % size;
        snprintf(want, sizeof(want), "r-%u-%d", peer, i);
        expect_string(peer, key, want);
    }
    pmix_proc_t *set = calloc(size, sizeof(*set));
    size_t n = 0;
    for (unsigned r = me.rank % 2; r < size; r += 2, n++) PMIX_LOAD_PROCID(&set[n], me.nspace, r);
    for (int i = 0; i < rounds; i++) {
        snprintf(key, sizeof(key), "test.parity%d", i);
        snprintf(want, sizeof(want), "p-%u-%d", me.rank, i);
        put_string(key, want);
        pmix_status_t rc = fence_over(set, n, true, 0);
        if (rc != PMIX_SUCCESS) die("PMIx_Fence over the same parity", rc);
        unsigned peer = set[(size_t)i % n].rank;
        snprintf(want, sizeof(want), "p-%u-%d", peer, i);
        expect_string(peer, key, want);
    }
    free(set);
    say("rank %u: %d fences over all and %d over ranks of parity %u matched", me.rank, rounds, rounds, me.rank % 2);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "info";
    int target = argc > 2 ? atoi(argv[2]) : -1;
    if (strcmp(mode, "version") == 0) { /* the library's, before any init: "OpenPMIx 5.0.1 (...)" */
        printf("%s\n", PMIx_Get_version());
        return 0;
    }
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        say("PMIx_Init failed: %s", status_name(rc));
        return 1;
    }
    pmix_proc_t job, self = me;
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    if (strcmp(mode, "info") == 0) {
        unsigned long size = number(get(&job, PMIX_JOB_SIZE)), lsize = number(get(&job, PMIX_LOCAL_SIZE));
        unsigned long lrank = number(get(&self, PMIX_LOCAL_RANK)), node = number(get(&self, PMIX_NODEID));
        pmix_value_t *peers = get(&job, PMIX_LOCAL_PEERS), *host = get(&self, PMIX_HOSTNAME);
        char ep[64];
        snprintf(ep, sizeof(ep), "ep-of-rank-%u-pid-%d", me.rank, (int)getpid());
        pmix_value_t val = {.type = PMIX_STRING, .data.string = ep};
        if ((rc = PMIx_Put(PMIX_GLOBAL, "test.ep", &val)) != PMIX_SUCCESS) die("PMIx_Put", rc);
        if ((rc = PMIx_Commit()) != PMIX_SUCCESS) die("PMIx_Commit", rc);
        fence();
        pmix_proc_t peer;
        PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
        pmix_value_t *got = get(&peer, "test.ep");
        say("rank %u size %lu local %lu/%lu peers %s node %lu host %s nspace %s peer %u says %s", me.rank, size,
            lrank, lsize, peers->data.string, node, host->data.string, me.nspace, peer.rank, got->data.string);
        PMIX_VALUE_RELEASE(peers);
        PMIX_VALUE_RELEASE(host);
        PMIX_VALUE_RELEASE(got);
    } else if (strcmp(mode, "abort") == 0) {
        fence();
        if ((int)me.rank == target) {
            rc = PMIx_Abort(7, "rank asked to abort", NULL, 0);
            say("rank %u: PMIx_Abort returned %s", me.rank, status_name(rc));
        }
        wait_to_be_killed();
    } else if (strcmp(mode, "events") == 0) {
        pmix_status_t code = PMIX_ERR_PROC_ABORTED;
        rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_event, NULL, NULL);
        if (rc < 0) die("PMIx_Register_event_handler", rc);
        fence(); /* every handler is in place before the target dies */
        if ((int)me.rank == target) raise(SIGKILL);
        wait_to_be_killed();
    } else if (strcmp(mode, "dmodex") == 0) {
        /* A fence without data: each peer's data comes on demand from its own host. */
        char ep[64];
        unsigned long size = number(get(&job, PMIX_JOB_SIZE));
        snprintf(ep, sizeof(ep), "dm-of-rank-%u", me.rank);
        put_string("test.dm", ep);
        if ((rc = fence_over(NULL, 0, false, 0)) != PMIX_SUCCESS) die("PMIx_Fence without data", rc);
        for (unsigned long k = 1; k < size; k++) {
            unsigned peer = (me.rank + (unsigned)k) % (unsigned)size;
            snprintf(ep, sizeof(ep), "dm-of-rank-%u", peer);
            expect_string(peer, "test.dm", ep);
        }
        say("rank %u: every peer's data came on demand", me.rank);
    } else if (strcmp(mode, "fences") == 0) {
        many_fences((unsigned)number(get(&job, PMIX_JOB_SIZE)), target > 0 ? target : 10);
    } else if (strcmp(mode, "dies") == 0) {
        /* Rank target dies once every rank is up (a first fence): the others' next fence must end with an error, not
         * wait for the teardown. Dying before that fence raced the others' start: a survivor still starting when
         * tprun's teardown came (0.25 s after the death) would never print its fence (FUZZING.md). */
        fence();
        if ((int)me.rank == target) raise(SIGKILL);
        rc = fence_over(NULL, 0, true, 0);
        say("rank %u: fence with rank %d dead: %s", me.rank, target, status_name(rc));
        wait_to_be_killed();
    } else if (strcmp(mode, "late") == 0) {
        /* Rank target never enters the fence; the others give up after the 1 s PMIX_TIMEOUT. */
        if ((int)me.rank == target) wait_to_be_killed();
        rc = fence_over(NULL, 0, true, 1);
        say("rank %u: fence without rank %d: %s", me.rank, target, status_name(rc));
        return rc == PMIX_SUCCESS ? 0 : 1;
    } else {
        say("usage: pmix_client [version | info | abort RANK | events RANK | dmodex | fences ROUNDS | dies RANK |"
            " late RANK]");
        return 2;
    }
    PMIx_Finalize(NULL, 0);
    return 0;
}
