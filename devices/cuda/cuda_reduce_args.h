/* cuda_reduce_args.h: the one argument of the reduce kernels, shared by cuda_reduce.cu and the C that launches them. */
#ifndef CUDA_REDUCE_ARGS_H
#define CUDA_REDUCE_ARGS_H

/* Sources per launch: the pointers travel in the kernel's parameter (1 KiB of its 4 KiB). */
#define TP_CUDA_MAX_SRCS 128

/* tp_op_t's values, restated so the .cu needs no libtp header. */
#define TP_CUDA_SUM 0
#define TP_CUDA_MAX 1
#define TP_CUDA_MIN 2

typedef struct tp_cuda_reduce_args {
    const void *srcs[TP_CUDA_MAX_SRCS];
    void *dst;
    unsigned long long count;
    int n;
    int op;
    int aligned; /* every pointer is aligned to the element size: one load per element */
} tp_cuda_reduce_args_t;

#endif
