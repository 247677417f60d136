/* coll_frame.c: frame headers, packed little-endian, and the check that refuses what does not belong. */
#include "coll_frame.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime_fate.h"

enum { OFF_MAGIC = 0, OFF_COLL = 4, OFF_DTYPE = 5, OFF_OP = 6, OFF_STEP = 7, OFF_COMM = 8, OFF_ROOT = 12,
       OFF_SEQ = 16, OFF_COUNT = 24, OFF_PART = 32, OFF_BYTES = 36 };

const char *tp_coll_name(tp_coll_kind_t coll)
{
    static const char *const names[] = {"?", "barrier", "broadcast", "all_gather", "all_gatherv", "all_reduce",
                                        "reduce_scatter", "all_to_all", "send", "exchange", "comm_split"};
    return (int)coll >= 1 && coll <= TP_COLL_KIND_MAX ? names[coll] : "unknown";
}

void tp_frame_pack(uint8_t h[TP_FRAME_HEADER_BYTES], const tp_frame_id_t *id, uint8_t step)
{
    memset(h, 0, TP_FRAME_HEADER_BYTES);
    tp_put_le32(h + OFF_MAGIC, TP_FRAME_MAGIC);
    h[OFF_COLL] = (uint8_t)id->coll;
    h[OFF_DTYPE] = (uint8_t)id->dtype;
    h[OFF_OP] = (uint8_t)id->op;
    h[OFF_STEP] = step;
    tp_put_le32(h + OFF_COMM, id->comm_id);
    tp_put_le32(h + OFF_ROOT, (uint32_t)id->root);
    tp_put_le64(h + OFF_SEQ, id->seq);
    tp_put_le64(h + OFF_COUNT, id->count);
}

void tp_frame_unpack(const uint8_t h[TP_FRAME_HEADER_BYTES], tp_frame_id_t *id, uint8_t *step, uint32_t *part,
                     uint32_t *bytes)
{
    id->coll = (tp_coll_kind_t)h[OFF_COLL];
    id->dtype = (tp_dtype_t)h[OFF_DTYPE];
    id->op = (tp_op_t)h[OFF_OP];
    id->comm_id = tp_get_le32(h + OFF_COMM);
    id->root = (int32_t)tp_get_le32(h + OFF_ROOT);
    id->seq = tp_get_le64(h + OFF_SEQ);
    id->count = tp_get_le64(h + OFF_COUNT);
    if (step) *step = h[OFF_STEP];
    if (part) *part = tp_get_le32(h + OFF_PART);
    if (bytes) *bytes = tp_get_le32(h + OFF_BYTES);
}

void tp_frame_set_part(uint8_t h[TP_FRAME_HEADER_BYTES], uint32_t part, uint32_t bytes)
{
    tp_put_le32(h + OFF_PART, part);
    tp_put_le32(h + OFF_BYTES, bytes);
}

uint32_t tp_frame_bytes(const uint8_t h[TP_FRAME_HEADER_BYTES]) { return tp_get_le32(h + OFF_BYTES); }

unsigned tp_frame_kind(const uint8_t h[TP_FRAME_HEADER_BYTES]) { return h[OFF_COLL] & 15u; }

/* "all_reduce f32 count 1024" (with the root for the calls that have one). */
static void describe(const tp_frame_id_t *id, char *out, size_t len)
{
    int n = snprintf(out, len, "%s %s", tp_coll_name(id->coll), tp_dtype_name(id->dtype));
    if (id->coll == TP_COLL_ALL_REDUCE || id->coll == TP_COLL_REDUCE_SCATTER)
        n += snprintf(out + n, len - (size_t)n, " %s", tp_op_name(id->op));
    n += snprintf(out + n, len - (size_t)n, " count %" PRIu64, id->count);
    if (id->coll == TP_COLL_BROADCAST) snprintf(out + n, len - (size_t)n, " root %d", (int)id->root);
    if (id->coll == TP_COLL_ALL_GATHERV) snprintf(out + n, len - (size_t)n, " counts #%08x", (unsigned)id->root);
}

/* A frame refused: the error just logged goes to fate as what the peer did (rank 0 decides what every rank names). */
static tp_status_t refused(int peer, tp_status_t s)
{
    char reason[600];
    snprintf(reason, sizeof(reason), "%s: %s",
             s == TP_ERR_DESYNC ? "ranks called different collectives" : "it broke the collective protocol",
             tp_last_error());
    tp_fate_blame(peer, s, reason);
    return s;
}

tp_status_t tp_frame_check(const uint8_t expected[TP_FRAME_HEADER_BYTES], const uint8_t got[TP_FRAME_HEADER_BYTES],
                           uint64_t max_bytes, int peer, int *matched)
{
    tp_frame_id_t e, g;
    uint8_t estep, gstep;
    uint32_t epart, gpart, ebytes, gbytes;
    *matched = 0;
    /* The frame this receive waits for, byte for byte (the usual case): nothing else to compare */
    if (memcmp(expected, got, TP_FRAME_HEADER_BYTES) == 0 && got[OFF_STEP] != TP_FRAME_STEP_DESYNC &&
        tp_get_le32(got + OFF_MAGIC) == TP_FRAME_MAGIC && tp_get_le32(got + OFF_BYTES) <= max_bytes) {
        *matched = 1;
        return TP_OK;
    }
    if (tp_get_le32(got + OFF_MAGIC) != TP_FRAME_MAGIC) {
        tp_log(TP_LOG_ERROR, "coll", "rank %d sent a frame with a bad magic 0x%08x: refused", peer,
               tp_get_le32(got + OFF_MAGIC));
        return refused(peer, TP_ERR_PROTOCOL);
    }
    tp_frame_unpack(expected, &e, &estep, &epart, &ebytes);
    tp_frame_unpack(got, &g, &gstep, &gpart, &gbytes);
    if (gbytes > max_bytes) {
        tp_log(TP_LOG_ERROR, "coll", "rank %d sent a frame of %" PRIu32 " bytes, over the part size %" PRIu64
               ": refused", peer, gbytes, max_bytes);
        return refused(peer, TP_ERR_PROTOCOL);
    }
    if (g.coll < 1 || g.coll > TP_COLL_KIND_MAX || (int)g.dtype < 0 || g.dtype > TP_I64 || (int)g.op < 0 ||
        g.op > TP_MIN) {
        tp_log(TP_LOG_ERROR, "coll", "rank %d sent a frame with an unknown collective %d, type %d or op %d: refused",
               peer, (int)g.coll, (int)g.dtype, (int)g.op);
        return refused(peer, TP_ERR_PROTOCOL);
    }
    if (g.comm_id != e.comm_id || g.seq != e.seq || g.coll != e.coll || g.dtype != e.dtype || g.op != e.op ||
        g.count != e.count || g.root != e.root) {
        char here[128], there[128];
        describe(&e, here, sizeof(here));
        describe(&g, there, sizeof(there));
        if (g.comm_id != e.comm_id || g.seq != e.seq)
            tp_log(TP_LOG_ERROR, "coll", "desync with rank %d on comm %" PRIu32 " call %" PRIu64
                   ": %s here, comm %" PRIu32 " call %" PRIu64 " %s there", peer, e.comm_id, e.seq, here,
                   g.comm_id, g.seq, there);
        else
            tp_log(TP_LOG_ERROR, "coll", "desync with rank %d on comm %" PRIu32 " call %" PRIu64
                   ": %s here, %s there", peer, e.comm_id, e.seq, here, there);
        return refused(peer, TP_ERR_DESYNC);
    }
    if (gstep == TP_FRAME_STEP_DESYNC) {
        char here[128];
        describe(&e, here, sizeof(here));
        tp_log(TP_LOG_ERROR, "coll", "desync with rank %d on comm %" PRIu32 " call %" PRIu64
               ": it failed this call (%s) against another rank and reports it", peer, e.comm_id, e.seq, here);
        return TP_ERR_DESYNC;
    }
    if (gstep != estep || gpart != epart) return TP_OK; /* another receive of this call: the caller matches */
    *matched = 1;
    if (gbytes != ebytes) {
        tp_log(TP_LOG_ERROR, "coll", "rank %d sent %" PRIu32 " bytes for part %" PRIu32 " of %s call %" PRIu64
               " where %" PRIu32 " belong: refused", peer, gbytes, gpart, tp_coll_name(e.coll), e.seq, ebytes);
        return refused(peer, TP_ERR_PROTOCOL);
    }
    return TP_OK;
}

void tp_xfer_enqueue(tp_xfer_t *x, uint64_t max_part, tp_xfer_t **head, tp_xfer_t **tail)
{
    x->done = 0;
    x->complete = x->peer_lent = 0;
    x->frame_off = 0;
    x->growing = x->is_send && x->ready < x->len;
    x->next = NULL;
    if (x->part_bytes == 0 || x->part_bytes > max_part) x->part_bytes = max_part;
    if (*tail != NULL) (*tail)->next = x;
    else *head = x;
    *tail = x;
}

size_t tp_xfer_frame_len(const tp_xfer_t *x, size_t base)
{
    return x->len - base < x->part_bytes ? x->len - base : x->part_bytes;
}

size_t tp_xfer_frame_ready(const tp_xfer_t *x, size_t base)
{
    size_t fl = tp_xfer_frame_len(x, base);
    if (x->ready <= base) return 0;
    return x->ready - base < fl ? x->ready - base : fl;
}

void tp_xfer_frame_header(const tp_xfer_t *x, size_t base, uint8_t out[TP_FRAME_HEADER_BYTES])
{
    memcpy(out, x->header, TP_FRAME_HEADER_BYTES);
    tp_frame_set_part(out, x->first_part + (uint32_t)(base / x->part_bytes), (uint32_t)tp_xfer_frame_len(x, base));
}
