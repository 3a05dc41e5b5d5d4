/* supervisor/workers.h — a small pool of threads for blocking work the event loop must not do
 * itself: hashing large files, and later fsyncs, blob writes, copies and tree removal.
 *
 * A job is a closure in two halves: run(w, arg) on a worker thread, then done(arg, ran) on the
 * loop thread.  The loop hears that jobs finished through an eventfd registered in it, so done
 * callbacks run as ordinary loop callbacks, in the order the jobs finished; they may submit
 * more jobs and touch any supervisor state.  run must touch nothing but what arg owns (no
 * loop, no logger, no task table): it runs concurrently with the loop.
 *
 * Long jobs should poll workers_stopping() and give up early when it says so: workers_free
 * waits for every running job.
 *
 * Functions return 0 / -errno. */
#ifndef FP_WORKERS_H
#define FP_WORKERS_H

#include <stddef.h>

struct loop;
struct workers;

typedef void (*workers_run_fn)(struct workers *w, void *arg);
/* ran: 1 after run(), 0 when the job was dropped unrun (workers_free with jobs still queued). */
typedef void (*workers_done_fn)(void *arg, int ran);

#define WORKERS_MAX 64

/* threads: 1..WORKERS_MAX.  The eventfd is added to l (the loop must outlive the pool). */
int workers_new(struct loop *l, unsigned threads, struct workers **out);
/* Stop: running jobs finish (and should see workers_stopping), then every finished job's done
 * runs with ran=1 and every queued job's done with ran=0, on the calling (loop) thread.  NULL
 * is fine. */
void workers_free(struct workers *w);

/* Queue a job.  done is called exactly once, unless this returns an error (-ENOMEM, or
 * -ESHUTDOWN while the pool is being freed). */
int workers_submit(struct workers *w, workers_run_fn run, workers_done_fn done, void *arg);

/* Jobs submitted whose done has not run yet (loop thread). */
size_t workers_pending(const struct workers *w);
/* Thread-safe: 1 once workers_free has begun. */
int workers_stopping(struct workers *w);
/* Tests and shutdown paths without a running loop: block until at least one job has finished
 * or timeout_ms passed, then run the finished jobs' done callbacks.  Returns how many ran. */
size_t workers_wait(struct workers *w, int timeout_ms);

#endif
