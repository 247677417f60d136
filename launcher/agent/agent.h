/* agent/agent.h: `tprun --agent`: the per-host agent that ssh starts, running its host's ranks for tprun. */
#ifndef TPRUN_AGENT_H
#define TPRUN_AGENT_H

/* The agent side: its plan read from stdin, its messages on stdout. Returns its exit status. */
int tprun_agent_main(void);

#endif
