/* supervisor/ops.h — the operators' commands: `forkpoint ls`, `show`, `logs`, `fsck`.  They read
 * the state dir without taking its lock (a running supervisor is not disturbed: the journal is
 * only read, a tail being written is ignored), except `fsck --repair`, which needs the lock.
 * Each returns the process exit code (0 ok, 1 failure, 2 usage). */
#ifndef FP_OPS_H
#define FP_OPS_H

int ops_ls(int argc, char **argv);
int ops_show(int argc, char **argv);
int ops_logs(int argc, char **argv);
int ops_fsck(int argc, char **argv);
/* The default state dir ($FORKPOINT_STATE, else ${XDG_STATE_HOME:-$HOME/.local/state}/forkpoint);
 * malloc'd, NULL if none can be determined. */
char *ops_default_state_dir(void);

#endif
