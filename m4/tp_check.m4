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

# TP_CHECK_VENDOR_HEADERS(NAME, VAR, HEADERS, PREFIXES, DEFINE, EXTRA-CPPFLAGS, WHAT-TO-INSTALL)
# A vendor library that is never linked, only dlopen'd at run time: finds the first of PREFIXES (or PATH) whose
# include/ holds HEADERS that compile (with EXTRA-CPPFLAGS); the word "default" stands for the compiler's own
# include path. Sets and substitutes VAR_CPPFLAGS (which also carries -DDEFINE=1, so only code built with those
# flags sees DEFINE), the automake conditional DEFINE, and tp_NAME_prefix.
AC_DEFUN([TP_CHECK_VENDOR_HEADERS], [
TP_ARG_WITH([$1], [build against the $1 headers (the library is dlopen'd at run time, never linked); PATH is a prefix holding include/])
$2_CPPFLAGS=
tp_$1_found=no
tp_$1_prefix=
tp_$1_where=
tp_$1_looked=
AS_CASE([$with_$1],
  [auto|yes], [tp_prefixes="$4"],
  [no], [tp_prefixes=],
  [tp_prefixes=$with_$1])
AS_IF([test "x$with_$1" != xno], [
  AC_MSG_CHECKING([for $3])
  tp_saved_CPPFLAGS=$CPPFLAGS
  for tp_prefix in $tp_prefixes; do
    AS_IF([test "x$tp_prefix" = xdefault],
      [tp_inc_flag=
       tp_looked="default include path"],
      [tp_inc_flag="-I$tp_prefix/include"
       tp_looked=$tp_prefix/include])
    tp_$1_looked="${tp_$1_looked:+$tp_$1_looked, }$tp_looked"
    AS_IF([test "x$tp_prefix" = xdefault || test -d "$tp_prefix/include"], [
      CPPFLAGS="$tp_saved_CPPFLAGS $6 $tp_inc_flag"
      AC_COMPILE_IFELSE([AC_LANG_SOURCE([m4_foreach_w([tp_hdr], [$3], [[#include <]tp_hdr[>]
])])], [tp_$1_found=yes
        tp_$1_prefix=$tp_prefix
        tp_$1_where=$tp_looked
        $2_CPPFLAGS=
        for tp_flag in -D$5=1 $6 $tp_inc_flag; do
          AS_CASE([" $$2_CPPFLAGS "], [*" $tp_flag "*], [], [$2_CPPFLAGS="${$2_CPPFLAGS:+$$2_CPPFLAGS }$tp_flag"])
        done
        break])
    ])
  done
  CPPFLAGS=$tp_saved_CPPFLAGS
  AS_IF([test "x$tp_$1_found" = xyes], [AC_MSG_RESULT([$tp_$1_where])], [AC_MSG_RESULT([no])])
])
AS_CASE([$with_$1:$tp_$1_found],
  [no:*], [TP_SUMMARY_ADD([$1], [disabled], [--with-$1=no], [-])],
  [*:yes], [TP_SUMMARY_ADD([$1], [found], [$tp_$1_where], [dlopen at run time])],
  [auto:no], [TP_SUMMARY_ADD([$1], [not found], [-], [-])],
  [AC_MSG_ERROR([--with-$1=$with_$1: $3 not found or not compiling (looked in: $tp_$1_looked); install $7 or pass --with-$1=PATH (see config.log)])])
AC_SUBST([$2_CPPFLAGS])
AM_CONDITIONAL([$5], [test "x$tp_$1_found" = xyes])
])
