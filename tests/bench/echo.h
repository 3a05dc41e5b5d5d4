/* tests/bench/echo.h — the floor of a JSON-RPC round trip: a process that answers every
 * request line on stdin with a prepared response line of the same bytes as forkpoint's own
 * answer (only the id is the request's), over the same pipes and read by the same client
 * code.  What forkpoint costs on top of that is its own: parsing, dispatch, the view, printing.
 *
 * The bench binary runs it as a mode of itself (`bench --echo TEMPLATE`). */
#ifndef FP_BENCH_ECHO_H
#define FP_BENCH_ECHO_H

#include <cJSON.h>

/* Write the template for echo_main(): resp (a whole response message, left unchanged) with
 * its id replaced by a marker.  Returns 0 or -errno. */
int echo_write_template(const cJSON *resp, const char *path);

/* Answer request lines on stdin until EOF: each with the template, the request's id in
 * place of the marker.  Returns the exit status (0, or 1 with a message on stderr). */
int echo_main(const char *template_path);

#endif
