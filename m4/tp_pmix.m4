# tp_pmix.m4: PMIx lets ranks started by another launcher (srun, mpirun) bootstrap; libtp builds against its headers and dlopens it.
AC_DEFUN([TP_CHECK_PMIX],
  [TP_CHECK_LINKED_DEP([pmix], [TP_PMIX], [pmix], [pmix.h], [PMIx_Init], [pmix], [HAVE_PMIX], [libpmix-dev],
                     [dlopen at run time])
TP_PMIX_LIBDIR_DEFINE])
dnl libtp dlopens libpmix.so.2 from the loader's path, then from this directory (Debian's pmix2/lib is not on it).
AC_DEFUN([TP_PMIX_LIBDIR_DEFINE], [
tp_pmix_libdir=
AS_IF([test "x$tp_pmix_found" = xyes], [
  AS_CASE([$with_pmix],
    [auto|yes], [AS_IF([test -n "$PKG_CONFIG"], [tp_pmix_libdir=`$PKG_CONFIG --variable=libdir pmix 2>/dev/null`])],
    [tp_pmix_libdir=$with_pmix/lib])])
AC_DEFINE_UNQUOTED([TP_PMIX_LIBDIR], ["$tp_pmix_libdir"], [Directory libtp dlopens libpmix.so.2 from when the loader does not find it.])
])
