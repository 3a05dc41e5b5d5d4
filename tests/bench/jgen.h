/* tests/bench/jgen.h — writes synthetic journals through the journal API, with records encoded
 * exactly as supervisor/core/persist.c encodes them (one msgpack map each, JSON values as JSON
 * text), so that persist_open() and `forkpoint mcp` replay them like real history.  If
 * persist.c changes its encoding, replaying these journals fails loudly rather than measuring
 * something else.
 *
 * Task ids are derived from a number (jgen_task_id) so the callers can find them again.
 * All functions return 0 or -errno, with a message in err. */
#ifndef FP_BENCH_JGEN_H
#define FP_BENCH_JGEN_H

#include <stddef.h>
#include <stdint.h>

/* 32 lowercase hex digits that look random but depend only on n. */
void jgen_task_id(uint64_t n, char out[33]);

/* A journal of `total` records: `tasks` REC_CREATE records, each followed by its share of
 * REC_PROGRESS records (what a long job reporting progress leaves behind). */
int jgen_progress_history(const char *state_dir, const char *tool, unsigned tasks, unsigned total,
                          char *err, size_t errlen);

/* A journal of `finished` completed tasks of tool `done_tool` (created, started, finished,
 * expiring in a day) and `queued` tasks of `queued_tool` that were accepted but never
 * started. */
int jgen_restart_state(const char *state_dir, const char *done_tool, unsigned finished,
                       const char *queued_tool, const char *queued_args, unsigned queued,
                       char *err, size_t errlen);

#endif
