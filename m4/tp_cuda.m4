# tp_cuda.m4: the CUDA device builds against the runtime and driver headers; libcudart and libcuda are dlopen'd.
AC_DEFUN([TP_CHECK_CUDA],
  [TP_CHECK_VENDOR_HEADERS([cuda], [TP_CUDA], [cuda_runtime.h cuda.h], [$CUDA_HOME $CUDA_PATH /usr/local/cuda default],
                           [HAVE_CUDA_H], [], [the CUDA toolkit])])
