# tp_check.m4: the --with-X=auto|yes|no|PATH logic shared by the one-file-per-dependency checks.
#
# auto: look in the usual places and skip quietly when absent; yes: the same, but stop configure with a message
# naming what is missing; no: skip; PATH: look only under PATH/include and PATH/lib, and stop when absent.
# Each check appends one row to the summary that TP_PRINT_SUMMARY prints.

# TP_ARG_WITH(NAME, HELP): declares --with-NAME and leaves a validated value in with_NAME.
AC_DEFUN([TP_ARG_WITH], [
AC_ARG_WITH([$1],
  [AS_HELP_STRING([--with-$1=auto|yes|no|PATH], [$2 (default: auto)])],
  [], [with_$1=auto])
AS_CASE([$with_$1],
  [auto|yes|no], [],
  [/*], [AS_IF([test -d "$with_$1"], [],
          [AC_MSG_ERROR([--with-$1=$with_$1: no such directory; give the prefix that holds include/ and lib/, or auto, yes or no])])],
  [AC_MSG_ERROR([--with-$1: expected auto, yes, no or an absolute PATH, got "$with_$1"])])
])

# TP_SUMMARY_ADD(NAME, STATUS, WHERE, HOW-USED): one row of the closing summary table.
AC_DEFUN([TP_SUMMARY_ADD], [tp_summary_rows="${tp_summary_rows}$1|$2|$3|$4
"])

# TP_CHECK_LINKED_DEP(NAME, VAR, PKG-MODULE, HEADER, FUNCTION, LIB, DEFINE, DEBIAN-PACKAGE, [HOW-USED])
# A library libtp links (HOW-USED, default "linked", names another use in the summary): flags from pkg-config (PATH's own .pc when PATH is given), else -IPATH/include
# -LPATH/lib -lLIB (or the compiler's default paths); either way HEADER must compile and FUNCTION must link.
# Sets and substitutes VAR_CFLAGS and VAR_LIBS, and defines DEFINE and the automake conditional DEFINE.
AC_DEFUN([TP_CHECK_LINKED_DEP], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
TP_ARG_WITH([$1], [link libtp with $1; PATH is a prefix holding include/ and lib/])
$2_CFLAGS=
$2_LIBS=
tp_$1_found=no
tp_$1_where=
AS_IF([test "x$with_$1" != xno], [
  tp_pc=
  AS_IF([test -n "$PKG_CONFIG"], [
    AS_CASE([$with_$1],
      [auto|yes], [AS_IF([$PKG_CONFIG --exists $3], [tp_pc=$3])],
      [for tp_dir in lib lib64 share; do
         AS_IF([test -f "$with_$1/$tp_dir/pkgconfig/$3.pc"], [tp_pc="$with_$1/$tp_dir/pkgconfig/$3.pc"; break])
       done])])
  AS_IF([test -n "$tp_pc"], [
    $2_CFLAGS=`$PKG_CONFIG --cflags "$tp_pc"`
    $2_LIBS=`$PKG_CONFIG --libs "$tp_pc"`
    tp_$1_where="`$PKG_CONFIG --modversion "$tp_pc"` (pkg-config)"
  ], [
    AS_CASE([$with_$1],
      [auto|yes], [$2_LIBS="-l$6"
                   tp_$1_where="default paths"],
      [$2_CFLAGS="-I$with_$1/include"
       $2_LIBS="-L$with_$1/lib -Wl,-rpath,$with_$1/lib -l$6"
       tp_$1_where=$with_$1])
  ])
  AC_MSG_CHECKING([for $1 ($4 compiles, $5 links)])
  tp_saved_CPPFLAGS=$CPPFLAGS
  tp_saved_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $$2_CFLAGS"
  LIBS="$$2_LIBS $LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <$4>]], [[(void)&$5;]])], [tp_$1_found=yes])
  CPPFLAGS=$tp_saved_CPPFLAGS
  LIBS=$tp_saved_LIBS
  AS_IF([test "x$tp_$1_found" = xyes], [AC_MSG_RESULT([$tp_$1_where])], [AC_MSG_RESULT([no])])
])
AS_CASE([$with_$1:$tp_$1_found],
  [no:*], [TP_SUMMARY_ADD([$1], [disabled], [--with-$1=no], [-])],
  [*:yes], [AC_DEFINE([$7], [1], [Define to 1 when libtp is built with $1.])
            TP_SUMMARY_ADD([$1], [found], [$tp_$1_where], [m4_default([$9], [linked])])],
  [auto:no], [$2_CFLAGS=
              $2_LIBS=
              TP_SUMMARY_ADD([$1], [not found], [-], [-])],
  [yes:no], [AC_MSG_ERROR([--with-$1=yes: $1 not found: pkg-config knows no "$3" and $4 with -l$6 does not build; install $8 or pass --with-$1=PATH (see config.log)])],
  [AC_MSG_ERROR([--with-$1=$with_$1: $1 not found: no usable $4 and lib$6 under $with_$1/include and $with_$1/lib (see config.log)])])
AC_SUBST([$2_CFLAGS])
AC_SUBST([$2_LIBS])
AM_CONDITIONAL([$7], [test "x$tp_$1_found" = xyes])
])
