# tp_deps.m4: runs the optional-dependency check and prints what configure found.

# TP_CHECK_DEPENDENCIES: PMIx, then what tp.pc lists in Libs.private.
AC_DEFUN([TP_CHECK_DEPENDENCIES], [
m4_ifndef([PKG_PROG_PKG_CONFIG],
  [m4_fatal([pkg.m4 not found: install pkg-config (scripts/install-deps.sh does) and rerun ./autogen.sh])])
PKG_PROG_PKG_CONFIG
tp_summary_rows=
TP_CHECK_PMIX
dnl What a static libtp needs beside it, never the dlopen'd PMIx.
TP_PRIVATE_LIBS=`echo "$LIBS -lpthread -ldl -lm" | sed 's/  */ /g; s/^ //; s/ $//'`
AC_SUBST([TP_PRIVATE_LIBS])
])

# TP_PRINT_SUMMARY: the table users read to see what this build can do.
AC_DEFUN([TP_PRINT_SUMMARY], [
cat <<EOF_SUMMARY

$PACKAGE_NAME $PACKAGE_VERSION configured
  prefix:     $prefix
  compiler:   $CC $CFLAGS
  warnings:   $TP_WARN_CFLAGS
  sanitizers: ${TP_SANITIZER_FLAGS:-no (--enable-sanitizers adds ASan and UBSan)}
  libtp LTO:  $tp_lto_summary

EOF_SUMMARY
printf '  %-12s %-10s %-40s %s\n' dependency status where "how used"
printf '  %-12s %-10s %-40s %s\n' ---------- ------ ----- --------
printf '%s' "$tp_summary_rows" | while IFS='|' read -r tp_name tp_status tp_where tp_use; do
  printf '  %-12s %-10s %-40s %s\n' "$tp_name" "$tp_status" "$tp_where" "$tp_use"
done
echo
])
