# tp_pmix.m4: PMIx lets ranks started by another launcher (srun, mpirun) bootstrap; libtp links it when found.
AC_DEFUN([TP_CHECK_PMIX],
  [TP_CHECK_LINKED_DEP([pmix], [TP_PMIX], [pmix], [pmix.h], [PMIx_Init], [pmix], [HAVE_PMIX], [libpmix-dev])])
