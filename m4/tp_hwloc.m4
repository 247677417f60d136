# tp_hwloc.m4: hwloc describes the node (cores, NUMA, PCI locality of GPUs and HCAs); libtp links it when found.
AC_DEFUN([TP_CHECK_HWLOC],
  [TP_CHECK_LINKED_DEP([hwloc], [TP_HWLOC], [hwloc], [hwloc.h], [hwloc_topology_init], [hwloc], [HAVE_HWLOC],
                       [libhwloc-dev])])
