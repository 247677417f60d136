# tp_verbs.m4: the RDMA transport builds against infiniband/verbs.h; libibverbs is dlopen'd at run time.
AC_DEFUN([TP_CHECK_VERBS],
  [TP_CHECK_VENDOR_HEADERS([verbs], [TP_VERBS], [infiniband/verbs.h], [default], [HAVE_VERBS_H], [],
                           [libibverbs-dev])])
