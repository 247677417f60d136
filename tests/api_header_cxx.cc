// api_header_cxx: tp.h compiles alone as C++ and links from C++ (extern "C").
#include <tp.h>

static_assert(TP_OK == 0, "TP_OK is 0");

int main()
{
    tp_comm_t *world = nullptr;
    (void)world;
    return tp_status_scope(TP_ERR_INVALID) == TP_SCOPE_CALL ? 0 : 1;
}
