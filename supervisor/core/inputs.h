/* supervisor/core/inputs.h — copying a job's input files into its work folder.
 *
 * transfer_prepare_args decides which file each forkpoint-upload argument names and where
 * its copy goes (work/inputs/<argument>/<name>); the copy itself can take as long as the file
 * is large, so it is done here, on the worker pool when there is one.  Functions return 0 /
 * -errno. */
#ifndef FP_INPUTS_H
#define FP_INPUTS_H

#include <stddef.h>
#include <stdint.h>

/* Copy the first size bytes of src to dirfd/name as a read-only file, atomically (a temp
 * name, then rename; a leftover temp file of an earlier try is replaced).  buf (buflen bytes)
 * is scratch space for when the file system cannot copy by itself.  Thread-safe: touches only
 * its arguments. */
int inputs_copy_file(int src, int64_t size, int dirfd, const char *name, unsigned char *buf, size_t buflen);

#endif
