/* coll_frame.h: the frame header every collective and point-to-point frame starts with. */
#ifndef COLL_FRAME_H
#define COLL_FRAME_H

#include <stdint.h>

#include "runtime_dtype.h"
#include "tp_provider.h"

#define TP_FRAME_MAGIC 0x31465054u /* "TPF1" */
#define TP_FRAME_STEP_DESYNC 0xff  /* a rank that failed a call tells every peer, which then fails it too */

/* What a frame belongs to; the numbers are on the wire. */
typedef enum tp_coll_kind {
    TP_COLL_BARRIER = 1,
    TP_COLL_BROADCAST = 2,
    TP_COLL_ALL_GATHER = 3,
    TP_COLL_ALL_GATHERV = 4,
    TP_COLL_ALL_REDUCE = 5,
    TP_COLL_REDUCE_SCATTER = 6,
    TP_COLL_ALL_TO_ALL = 7,
    TP_COLL_SEND = 8,
    TP_COLL_EXCHANGE = 9,
    TP_COLL_SPLIT = 10,
    TP_COLL_KIND_MAX = 10, /* under 16: tp_frame_kind tells transports the kind in 4 bits */
} tp_coll_kind_t;

/* A call's identity: every frame of one call carries it, and receivers compare it. */
typedef struct tp_frame_id {
    tp_coll_kind_t coll;
    tp_dtype_t dtype;
    tp_op_t op;
    uint32_t comm_id;
    int32_t root;
    uint64_t seq;
    uint64_t count;
} tp_frame_id_t;

const char *tp_coll_name(tp_coll_kind_t coll);

/* Writes a header template for one step of a call (part and size zero). */
void tp_frame_pack(uint8_t header[TP_FRAME_HEADER_BYTES], const tp_frame_id_t *id, uint8_t step);
/* Reads a header's fields back (no checks). */
void tp_frame_unpack(const uint8_t header[TP_FRAME_HEADER_BYTES], tp_frame_id_t *id, uint8_t *step, uint32_t *part,
                     uint32_t *bytes);

#endif
