/* runtime_env.h: reading the world and the settings from the environment. */
#ifndef RUNTIME_ENV_H
#define RUNTIME_ENV_H

#include "runtime_world.h"

/* Fills w from tprun's TP_* variables, torchrun's RANK/WORLD_SIZE/MASTER_*, or as a singleton. */
tp_status_t tp_world_from_env(tp_world_t *w);

#endif
