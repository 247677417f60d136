# Placeholder detection; replaced by one m4 file per dependency.
AC_DEFUN([TP_CHECK_DEPENDENCIES], [
  AC_SUBST([TP_PRIVATE_LIBS], ["-lpthread -ldl -lm"])
])
AC_DEFUN([TP_PRINT_SUMMARY], [])
