/* state/layout.h — where things live under the state dir.  Every path below it is built here
 * and nowhere else, so the layout is written down once:
 *
 *   <state>/journal/                      the journal: segments, HEAD, LOCK (journal.h)
 *   <state>/blobs/<hex[0..1]>/<hex>       content-addressed blobs (blob.h)
 *   <state>/uploads/<handle>.part         staged upload bytes, out of every job's reach
 *   <state>/tasks/<id>/                   one task's folder, removed with the task:
 *       output.log                        the job's captured stdout and stderr
 *       work/                             the job's working directory
 *       work/inputs/<argument>/<name>     read-only copies of uploaded input files
 *       work/outputs/<name>               files the job leaves: its artifacts
 *       work/.forkpoint-args.json         arguments too large for the environment
 *
 * The builders return 0, -ENAMETOOLONG when the path does not fit in len (buf then holds ""),
 * or -EINVAL for a name that would leave its folder (empty, ".", "..", or holding a '/'). */
#ifndef FP_LAYOUT_H
#define FP_LAYOUT_H

#include <stddef.h>

/* The top-level folders, relative to the state dir. */
#define LAYOUT_JOURNAL  "journal"
#define LAYOUT_BLOBS    "blobs"
#define LAYOUT_UPLOADS  "uploads"
#define LAYOUT_TASKS    "tasks"

/* Inside a task's work folder (relative to it: jobs see these names from their cwd). */
#define LAYOUT_INPUTS     "inputs"
#define LAYOUT_OUTPUTS    "outputs"
#define LAYOUT_ARGS_FILE  ".forkpoint-args.json"

enum layout_task_part {
	LAYOUT_TASK_DIR,        /* tasks/<id> */
	LAYOUT_TASK_LOG,        /* tasks/<id>/output.log */
	LAYOUT_TASK_WORK,       /* tasks/<id>/work */
	LAYOUT_TASK_INPUTS,     /* tasks/<id>/work/inputs */
	LAYOUT_TASK_OUTPUTS,    /* tasks/<id>/work/outputs */
	LAYOUT_TASK_ARGS,       /* tasks/<id>/work/.forkpoint-args.json */
};

/* <state>/<top> for one of the top-level folders above. */
int layout_dir(char *buf, size_t len, const char *state_dir, const char *top);
/* A part of task id's folder. */
int layout_task(char *buf, size_t len, const char *state_dir, const char *id, enum layout_task_part part);
/* The same part relative to the task's folder ("" for LAYOUT_TASK_DIR, "work/outputs", ...). */
const char *layout_task_rel(enum layout_task_part part);
/* <state>/blobs/<hex[0..1]>/<hex>; hex must be at least 2 characters. */
int layout_blob(char *buf, size_t len, const char *state_dir, const char *hex);

#endif
