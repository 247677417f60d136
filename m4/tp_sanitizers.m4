# tp_sanitizers.m4: --enable-sanitizers builds everything with AddressSanitizer and UndefinedBehaviorSanitizer.
#
# Every finding stops the program (-fno-sanitize-recover=all), so make check fails on it; frame pointers keep
# the reports' stacks whole. The flags go into CFLAGS, CXXFLAGS and LDFLAGS, so libtp, tprun and every test
# program are instrumented alike; tests/local.mk sets the run-time options the tests need.
AC_DEFUN([TP_ENABLE_SANITIZERS], [
AC_ARG_ENABLE([sanitizers],
  [AS_HELP_STRING([--enable-sanitizers],
    [build with -fsanitize=address,undefined; any report fails the program (default: no)])],
  [], [enable_sanitizers=no])
AS_CASE([$enable_sanitizers], [yes|no], [],
  [AC_MSG_ERROR([--enable-sanitizers: expected yes or no, got "$enable_sanitizers"])])
TP_SANITIZER_FLAGS=
AS_IF([test "x$enable_sanitizers" = xyes], [
  TP_SANITIZER_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
  tp_save_CFLAGS=$CFLAGS
  tp_save_LDFLAGS=$LDFLAGS
  CFLAGS="$CFLAGS $TP_SANITIZER_FLAGS"
  LDFLAGS="$LDFLAGS $TP_SANITIZER_FLAGS"
  AC_MSG_CHECKING([whether $CC links with $TP_SANITIZER_FLAGS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <stdlib.h>]], [[return abs(-1) - 1;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([--enable-sanitizers: $CC cannot link $TP_SANITIZER_FLAGS; install libasan8 and libubsan1 (gcc) or use CC=clang])])
  CFLAGS="$tp_save_CFLAGS $TP_SANITIZER_FLAGS"
  CXXFLAGS="$CXXFLAGS $TP_SANITIZER_FLAGS"
  LDFLAGS="$tp_save_LDFLAGS $TP_SANITIZER_FLAGS"
])
AM_CONDITIONAL([TP_SANITIZERS], [test "x$enable_sanitizers" = xyes])
AC_SUBST([TP_SANITIZER_FLAGS])
])
