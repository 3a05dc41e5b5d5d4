/* supervisor/call.h — `forkpoint call TOOL ['JSON'] --config FILE`: an MCP client in a few
 * hundred lines.  It starts `forkpoint mcp` as a child and drives it over its stdio exactly as an
 * MCP host would (initialize, tools/call, durable_task_get polling, durable_task_respond), so
 * what a person sees is what a model would get.  Progress is a live bar on a terminal and plain
 * lines otherwise; a job's questions are asked on the terminal. */
#ifndef FP_CALL_H
#define FP_CALL_H

/* Returns the process exit code: 0 completed, 1 failed/cancelled or error, 2 usage. */
int call_main(int argc, char **argv);

#endif
