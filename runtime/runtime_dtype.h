/* runtime_dtype.h: facts about element types and ops that every layer shares (names for messages). */
#ifndef RUNTIME_DTYPE_H
#define RUNTIME_DTYPE_H

#include "tp_provider.h"

const char *tp_dtype_name(tp_dtype_t dtype);
const char *tp_op_name(tp_op_t op);

#endif
