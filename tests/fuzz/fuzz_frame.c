/* fuzz_frame.c: a received frame header checked against the expected one (coll_frame.c tp_frame_check). */
#include <stdio.h>

#include "coll_frame.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_quiet_logs();
    return 0;
}

/* Bytes 0-7: the part size; 8-47: the expected header; 48-87: the received one (short inputs are zero-padded). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t in[8 + 2 * TP_FRAME_HEADER_BYTES] = {0};
    memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
    const uint8_t *expected = in + 8, *got = in + 8 + TP_FRAME_HEADER_BYTES;
    int matched = -1;
    tp_status_t s = tp_frame_check(expected, got, tp_get_le64(in), 1, &matched);
    FUZZ_ASSERT(matched == 0 || (matched == 1 && (s == TP_OK || s == TP_ERR_PROTOCOL)), "matched is not 0 or 1");
    FUZZ_ASSERT(s == TP_OK || s == TP_ERR_PROTOCOL || s == TP_ERR_DESYNC, "an unexpected status");
    FUZZ_ASSERT(s != TP_OK || tp_frame_bytes(got) <= tp_get_le64(in), "a frame over the part size passed");
    /* Every field is on the wire: unpacking and packing again gives the same 40 bytes (magic included). */
    tp_frame_id_t id;
    uint8_t step, again[TP_FRAME_HEADER_BYTES];
    uint32_t part, bytes;
    tp_frame_unpack(got, &id, &step, &part, &bytes);
    tp_frame_pack(again, &id, step);
    tp_frame_set_part(again, part, bytes);
    FUZZ_ASSERT(memcmp(again + 4, got + 4, TP_FRAME_HEADER_BYTES - 4) == 0, "a header changed through unpack and pack");
    (void)tp_coll_name(id.coll), (void)tp_dtype_name(id.dtype), (void)tp_op_name(id.op);
    return 0;
}
