# tp_hip.m4: the HIP device builds against hip/hip_runtime_api.h; libamdhip64 is dlopen'd at run time.
AC_DEFUN([TP_CHECK_HIP],
  [TP_CHECK_VENDOR_HEADERS([hip], [TP_HIP], [hip/hip_runtime_api.h], [$ROCM_PATH /opt/rocm default], [HAVE_HIP_H],
                           [-D__HIP_PLATFORM_AMD__], [the ROCm HIP headers (Debian: libamdhip64-dev)])])
