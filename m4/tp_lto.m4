# TP_ENABLE_LTO: builds libtp with link-time optimization where the compiler can (--disable-lto: never). A small
# collective call goes through a dozen of libtp's source files (checks, dispatch, the engine, the transport), and
# inlining across them takes a sixth off a 2-rank 16 B all_reduce (docs/BENCHMARKS.md, "Eighteenth pass"). The
# objects keep their compiled code too (-ffat-lto-objects), and every program links with TP_NO_LTO_LDFLAGS
# (-fno-lto): a test that links libtp's objects would otherwise optimize all of libtp again, under -Werror. libtp
# binds its own calls to its own functions (-fno-semantic-interposition, -Bsymbolic-functions): a program that
# defines a tp_ function replaces it for its own calls only.
AC_DEFUN([TP_ENABLE_LTO], [
AC_ARG_ENABLE([lto],
  [AS_HELP_STRING([--disable-lto],
    [build libtp without link-time optimization (default: with it where the compiler links a library with it)])],
  [], [enable_lto=auto])
AS_CASE([$enable_lto], [yes|no|auto], [],
  [AC_MSG_ERROR([--enable-lto: expected yes or no, got "$enable_lto"])])
TP_LTO_CFLAGS=
TP_LTO_LDFLAGS=
TP_NO_LTO_LDFLAGS=
AS_IF([test "x$enable_lto" != xno], [
  tp_lto_flags="-flto=auto -ffat-lto-objects -fno-semantic-interposition"
  tp_save_CFLAGS=$CFLAGS
  tp_save_LDFLAGS=$LDFLAGS
  CFLAGS="$CFLAGS $tp_lto_flags -fPIC -Werror" # a compiler that ignores a flag (clang 14 and -ffat-lto-objects) fails
  LDFLAGS="$LDFLAGS $tp_lto_flags -shared -Wl,-Bsymbolic-functions"
  AC_MSG_CHECKING([whether $CC links a shared library with $tp_lto_flags])
  AC_LINK_IFELSE([AC_LANG_SOURCE([[int tp_lto_probe(int x) { return x + 1; }]])],
    [AC_MSG_RESULT([yes])
     TP_LTO_CFLAGS=$tp_lto_flags
     TP_LTO_LDFLAGS="$tp_lto_flags -Wl,-Bsymbolic-functions"
     TP_NO_LTO_LDFLAGS=-fno-lto],
    [AC_MSG_RESULT([no])
     AS_IF([test "x$enable_lto" = xyes], [AC_MSG_ERROR([--enable-lto: $CC cannot link a library with $tp_lto_flags])])])
  CFLAGS=$tp_save_CFLAGS
  LDFLAGS=$tp_save_LDFLAGS
])
AS_IF([test -n "$TP_LTO_CFLAGS"], [tp_lto_summary="on ($TP_LTO_CFLAGS)"], [tp_lto_summary=off])
AC_SUBST([TP_LTO_CFLAGS])
AC_SUBST([TP_LTO_LDFLAGS])
AC_SUBST([TP_NO_LTO_LDFLAGS])
])
