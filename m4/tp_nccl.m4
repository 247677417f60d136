# tp_nccl.m4: the NCCL transport builds against nccl.h, which includes cuda_runtime.h; libnccl is dlopen'd.
AC_DEFUN([TP_CHECK_NCCL], [
AC_REQUIRE([TP_CHECK_CUDA])
dnl NCCL moves CUDA buffers, so without the CUDA headers it is skipped (auto) or refused (yes, PATH).
AS_IF([test "x$tp_cuda_found" = xyes],
  [tp_nccl_search="$NCCL_HOME $tp_cuda_prefix /usr/local/cuda default"],
  [tp_nccl_search=
   AS_CASE([${with_nccl-auto}],
     [auto|no], [],
     [AC_MSG_ERROR([--with-nccl=$with_nccl: nccl.h includes cuda_runtime.h, but the CUDA headers are not used (--with-cuda=${with_cuda-auto}); give --with-cuda=yes or PATH, or --with-nccl=no])])])
TP_CHECK_VENDOR_HEADERS([nccl], [TP_NCCL], [nccl.h], [$tp_nccl_search], [HAVE_NCCL_H], [$TP_CUDA_CPPFLAGS],
                        [libnccl-dev])
])
