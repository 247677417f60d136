/* config_doc: prints every registered component's TP_* table as the markdown that docs/ENVIRONMENT.md must hold
 * between its markers. */
#include <stdio.h>
#include <string.h>

#include "runtime_components.h"
#include "runtime_config.h"

static const char *kind_name(tp_config_kind_t k)
{
    switch (k) {
    case TP_CONFIG_STRING: return "string";
    case TP_CONFIG_INT: return "integer";
    case TP_CONFIG_SIZE: return "bytes (K, M, G)";
    case TP_CONFIG_SECONDS: return "seconds";
    case TP_CONFIG_BOOL: return "boolean";
    }
    return "?";
}

int main(void)
{
    int first = 1;
    for (size_t c = 0; c < tp_components_len; c++) {
        const tp_component_t *comp = &tp_components[c];
        if (comp->config == NULL || comp->config->env == NULL) continue;
        const char *kind = tp_component_kind_name(comp->kind);
        printf(strcmp(kind, comp->name) == 0 ? "%s### %s\n\n" : "%s### %s (%s)\n\n", first ? "" : "\n", comp->name,
               kind);
        first = 0;
        printf("| variable | set by | type | default | agreed | meaning |\n");
        printf("|---|---|---|---|---|---|\n");
        for (const tp_config_entry_t *e = comp->config; e->env != NULL; e++) {
            const char *who = (e->flags & TP_CONFIG_LAUNCHER) ? "launcher"
                              : !(e->flags & TP_CONFIG_USER)  ? "tprun"
                              : (e->flags & TP_CONFIG_TPRUN)  ? "user (tprun)"
                                                              : "user";
            const char *def = e->default_value == NULL ? "unset" : e->default_value[0] ? e->default_value : "empty";
            printf("| `%s` | %s | %s | %s | %s | %s |\n", e->env, who, kind_name(e->kind), def,
                   (e->flags & TP_CONFIG_AGREE) ? "yes" : "", e->help);
        }
    }
    return 0;
}
