/* config_doc: prints every registered component's TP_* table as the markdown that docs/ENVIRONMENT.md must hold
 * between its markers. */
#include <unistd.h>

#include "runtime_config.h"

int main(void)
{
    tp_config_print_doc(STDOUT_FILENO);
    return 0;
}
