/* runtime_pmix_compat.h: the PMIx header macros that PMIx 5 made libpmix functions, kept inline (after <pmix.h>). */
#ifndef RUNTIME_PMIX_COMPAT_H
#define RUNTIME_PMIX_COMPAT_H

#include <stdlib.h>
#include <string.h>

/* libpmix is dlopen'd, never linked: PMIx 5's PMIx_Load_procid and friends would be undefined symbols. */
static inline void tp_pmix_load_nspace(char *ns, const char *src)
{
    memset(ns, 0, PMIX_MAX_NSLEN + 1);
    if (src != NULL) memcpy(ns, src, strnlen(src, PMIX_MAX_NSLEN));
}

static inline int tp_pmix_check_nspace(const char *a, const char *b)
{
    return a == NULL || b == NULL || a[0] == '\0' || b[0] == '\0' || strncmp(a, b, PMIX_MAX_NSLEN) == 0;
}

#undef PMIX_LOAD_NSPACE
#define PMIX_LOAD_NSPACE(a, b) tp_pmix_load_nspace((char *)(a), (b))
#undef PMIX_LOAD_PROCID
#define PMIX_LOAD_PROCID(a, b, c)                                                                                      \
    do {                                                                                                               \
        tp_pmix_load_nspace((a)->nspace, (b));                                                                         \
        (a)->rank = (c);                                                                                               \
    } while (0)
#undef PMIX_CHECK_NSPACE
#define PMIX_CHECK_NSPACE(a, b) tp_pmix_check_nspace((a), (b))
#undef PMIX_INFO_DESTRUCT
#define PMIX_INFO_DESTRUCT(m)                                                                                          \
    do {                                                                                                               \
        if (!((m)->flags & PMIX_INFO_PERSISTENT)) PMIx_Value_destruct(&(m)->value);                                    \
    } while (0)
#undef PMIX_INFO_CONSTRUCT
#define PMIX_INFO_CONSTRUCT(m)                                                                                         \
    do {                                                                                                               \
        memset((m), 0, sizeof(pmix_info_t));                                                                           \
        (m)->value.type = PMIX_UNDEF;                                                                                  \
    } while (0)
#undef PMIX_VALUE_CONSTRUCT
#define PMIX_VALUE_CONSTRUCT(m)                                                                                        \
    do {                                                                                                               \
        memset((m), 0, sizeof(pmix_value_t));                                                                          \
        (m)->type = PMIX_UNDEF;                                                                                        \
    } while (0)
#undef PMIX_VALUE_CREATE
#define PMIX_VALUE_CREATE(m, n) ((m) = (n) > 0 ? (pmix_value_t *)calloc((n), sizeof(pmix_value_t)) : NULL)
#undef PMIX_VALUE_RELEASE
#define PMIX_VALUE_RELEASE(m)                                                                                          \
    do {                                                                                                               \
        PMIx_Value_destruct(m);                                                                                        \
        free(m);                                                                                                       \
        (m) = NULL;                                                                                                    \
    } while (0)
#undef PMIX_CHECK_KEY
#define PMIX_CHECK_KEY(a, b) (strncmp((a)->key, (b), PMIX_MAX_KEYLEN) == 0)

#endif
