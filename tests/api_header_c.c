/* api_header_c: tp.h compiles alone as C with every warning, and its constants hold their documented values. */
#include <tp.h>

_Static_assert(TP_OK == 0, "TP_OK is 0");
_Static_assert(TP_EXIT_PEER_FAILED == 70, "documented fate exit status");

int main(void)
{
    return tp_status_scope(TP_ERR_PEER_FAILED) == TP_SCOPE_PEER && tp_status_scope(TP_ERR_MISMATCH) == TP_SCOPE_JOB &&
                   tp_dtype_size(TP_BF16) == 2
               ? 0
               : 1;
}
