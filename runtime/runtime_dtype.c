/* runtime_dtype.c: element types and ops, below the collectives and the devices so neither includes the other. */
#include "runtime_dtype.h"

size_t tp_dtype_size(tp_dtype_t dtype)
{
    switch (dtype) {
    case TP_BYTES: return 1;
    case TP_F32: return 4;
    case TP_F64: return 8;
    case TP_BF16: return 2;
    case TP_F16: return 2;
    case TP_I32: return 4;
    case TP_I64: return 8;
    }
    return 0;
}

const char *tp_dtype_name(tp_dtype_t dtype)
{
    static const char *const names[] = {"bytes", "f32", "f64", "bf16", "f16", "i32", "i64"};
    return (int)dtype >= 0 && dtype <= TP_I64 ? names[dtype] : "unknown";
}

const char *tp_op_name(tp_op_t op)
{
    static const char *const names[] = {"sum", "max", "min"};
    return (int)op >= 0 && op <= TP_MIN ? names[op] : "unknown";
}

int tp_reduce_supported(tp_dtype_t dtype, tp_op_t op)
{
    return dtype >= TP_F32 && dtype <= TP_I64 && (op == TP_SUM || op == TP_MAX || op == TP_MIN);
}
