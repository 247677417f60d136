/*
 * coll_pair_unit: the way of a 2-rank all_reduce over a lending transport (runtime/coll_pair_way.c), both ranks
 * played call by call. The first COLL_PAIR_EXPLORE calls go two by two, lent then streamed, at both ranks; then the
 * way whose timed calls have the lower median (only for COLL_PAIR_MARGIN_PCT percent lower), with probes of two calls
 * the other way at both ranks, ever further apart in an epoch (32, 64, ... 512 calls, then every 512), and only the
 * second call of a run of one way timed (the first after a change here costs 1000x). The follower goes the leader's
 * way at every call but the one where the leader changes; a pair that cannot lend stops trying after its
 * exploration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"

#include "unit_check.h"

typedef struct pair {
    coll_pair_class_t lead, follow;
    int can_lend;        /* the transport reads pieces whole from the sender's buffer */
    int calls, mismatch; /* calls, and those where the two ranks went different ways */
    int lent_after;      /* calls both ranks went lent after the exploration */
    int changes;         /* the leader's changes of best way */
} pair_t;

static void pair_init(pair_t *p, int can_lend)
{
    memset(p, 0, sizeof(*p));
    p->can_lend = can_lend;
}

/* count calls at lent and streamed ns per KiB of the way both went; a call where the ranks differ costs 3x the
 * slower, and the first of a run of one way first_x times its way's. */
static void calls(pair_t *p, int count, uint32_t lent, uint32_t streamed, uint32_t first_x)
{
    for (int i = 0; i < count; i++, p->calls++) {
        int last = p->lead.last, best = p->lead.best, sample, ignored, n = p->calls;
        int wl = coll_pair_way(&p->lead, 1, &sample), wf = coll_pair_way(&p->follow, 0, &ignored);
        CHECK(!ignored, "call %d: the follower would time its call", n);
        if (n < COLL_PAIR_EXPLORE) CHECK(wl == (n / 2 + 1) % 2, "call %d: the exploration went %d", n, wl);
        p->mismatch += wl != wf;
        p->lent_after += n >= COLL_PAIR_EXPLORE && wl == COLL_PAIR_LENT && wf == COLL_PAIR_LENT;
        uint64_t t = wl == COLL_PAIR_LENT ? lent : streamed;
        if (wl != wf) t = 3 * (lent > streamed ? lent : streamed);
        else if (n > 0 && wl != last) t *= first_x;
        tp_xfer_t lead_sent = {.peer_lent = p->can_lend && wl == COLL_PAIR_LENT};
        tp_xfer_t follow_sent = {.peer_lent = p->can_lend && wf == COLL_PAIR_LENT};
        /* 1 MiB vectors: ns per KiB times 1024 KiB */
        coll_pair_done(&p->lead, 1, wl, sample, (int64_t)(t * 1024), 1 << 20, &lead_sent, &follow_sent);
        coll_pair_done(&p->follow, 0, wf, 0, 0, 1 << 20, &follow_sent, &lead_sent);
        p->changes += p->lead.best != best;
    }
}

/* Calls n from COLL_PAIR_EXPLORE to count - 1 that probe the other way in an epoch that began at call epoch. */
static int probes(int count, int epoch)
{
    int k = 0;
    for (int n = COLL_PAIR_EXPLORE; n < count; n++) k += coll_pair_probes((uint64_t)(n - epoch));
    return k;
}

int main(void)
{
    pair_t p;

    /* lent 20% faster: settles on lent; after the exploration only the probes stream, at both ranks */
    pair_init(&p, 1);
    calls(&p, 320, 800, 1000, 1);
    CHECK(p.lead.best == COLL_PAIR_LENT && p.follow.best == COLL_PAIR_LENT, "best %d / %d, not lent", p.lead.best,
          p.follow.best);
    CHECK(p.mismatch <= p.changes, "%d calls of different ways for %d changes", p.mismatch, p.changes);
    CHECK(p.changes == 1 && p.lead.epoch == COLL_PAIR_EXPLORE && p.follow.epoch == p.lead.epoch,
          "%d changes, epochs %llu / %llu", p.changes, (unsigned long long)p.lead.epoch,
          (unsigned long long)p.follow.epoch);
    CHECK(p.lent_after == 320 - COLL_PAIR_EXPLORE - probes(320, COLL_PAIR_EXPLORE) - 1,
          "%d calls lent after the exploration", p.lent_after);

    /* streamed faster: stays streamed, lent only in the probes */
    pair_init(&p, 1);
    calls(&p, 320, 1000, 800, 1);
    CHECK(p.lead.best == COLL_PAIR_STREAMED && p.changes == 0, "best %d after %d changes", p.lead.best, p.changes);
    CHECK(p.mismatch == 0, "%d calls of different ways", p.mismatch);
    CHECK(p.lent_after == probes(320, 0), "%d calls lent after the exploration, not the probes' %d", p.lent_after,
          probes(320, 0));
    /* ... and ever fewer: in 20000 calls, the probes of 32-512 calls in, then every 512 */
    calls(&p, 20000 - 320, 1000, 800, 1);
    CHECK(p.lent_after == probes(20000, 0) && p.lent_after < 100, "%d calls lent in 20000", p.lent_after);

    /* within the margin: no change */
    pair_init(&p, 1);
    calls(&p, 320, 1000 - COLL_PAIR_MARGIN_PCT * 10 + 10, 1000, 1);
    CHECK(p.changes == 0, "%d changes for a difference under the margin", p.changes);

    /* a change decided at call 63, just before the probe at 64: it waits for call 66, where both ranks start the
     * epoch */
    pair_init(&p, 1);
    calls(&p, 61, 1000, 800, 1);
    calls(&p, 3, 1000, 2000, 1);
    CHECK(p.lead.pending && p.lead.best == COLL_PAIR_STREAMED, "no change pending at call 63");
    calls(&p, 300, 1000, 2000, 1);
    CHECK(p.lead.epoch == 66 && p.follow.epoch == 66 && p.mismatch == 1,
          "epochs %llu / %llu, %d calls of different ways", (unsigned long long)p.lead.epoch,
          (unsigned long long)p.follow.epoch, p.mismatch);

    /* lent faster, then streamed, then lent again, each first call of a run 1000x: the probes bring it back and
     * forth, and the slow first calls never enter a window */
    pair_init(&p, 1);
    calls(&p, 320, 800, 1000, 1000);
    CHECK(p.lead.best == COLL_PAIR_LENT, "not lent with lent faster (first calls slow)");
    calls(&p, 3000, 1000, 600, 1000);
    CHECK(p.lead.best == COLL_PAIR_STREAMED, "not back to streamed with streamed faster");
    calls(&p, 3000, 600, 1000, 1000);
    CHECK(p.lead.best == COLL_PAIR_LENT && p.follow.best == COLL_PAIR_LENT, "not back to lent");
    CHECK(p.changes == 3 && p.mismatch == p.changes, "%d changes, %d calls of different ways", p.changes, p.mismatch);

    /* times that flip every 2000 calls: one change a flip, and the ranks differ only at the leader's changes, both
     * starting each epoch at the same call */
    pair_init(&p, 1);
    for (int k = 0; k < 12; k++) {
        calls(&p, 2000, k % 2 ? 500 : 1000, k % 2 ? 1000 : 500, 2);
        CHECK(p.lead.epoch == p.follow.epoch, "flip %d: epochs %llu / %llu", k, (unsigned long long)p.lead.epoch,
              (unsigned long long)p.follow.epoch);
    }
    CHECK(p.changes >= 11 && p.mismatch == p.changes, "%d changes, %d calls of different ways", p.changes, p.mismatch);

    /* a transport that cannot lend: both stop trying at the end of the exploration */
    pair_init(&p, 0);
    calls(&p, 320, 100, 1000, 1);
    CHECK(p.lead.no_lend && p.follow.no_lend, "no_lend %d / %d", p.lead.no_lend, p.follow.no_lend);
    CHECK(p.lead.best == COLL_PAIR_STREAMED && p.lead.lent == 0, "best %d, %llu lent", p.lead.best,
          (unsigned long long)p.lead.lent);
    int sample;
    CHECK(coll_pair_way(&p.lead, 1, &sample) == COLL_PAIR_STREAMED, "a probe went lent after no_lend");

    /* classes: none below COLL_PAIR_MIN, one per doubling, the last for everything above */
    coll_state_t cs;
    memset(&cs, 0, sizeof(cs));
    CHECK(coll_pair_class(&cs, 0, COLL_PAIR_MIN - 1) == NULL, "a class below the minimum");
    coll_pair_class_t *a = coll_pair_class(&cs, 0, COLL_PAIR_MIN), *b = coll_pair_class(&cs, 0, 2 * COLL_PAIR_MIN - 1);
    CHECK(a != NULL && a == b && a->min_bytes == COLL_PAIR_MIN, "the first class");
    CHECK(coll_pair_class(&cs, 0, 2 * COLL_PAIR_MIN) == a + 1, "the second class");
    CHECK(coll_pair_class(&cs, 1, COLL_PAIR_MIN) != a, "reduce_scatter shares all_reduce's class");
    CHECK(coll_pair_class(&cs, 0, (size_t)1 << 40) == a + COLL_PAIR_CLASSES - 1, "the last class");
    free(cs.pair_ways);

    if (failures == 0) printf("coll_pair_unit: ok\n");
    return failures != 0;
}
