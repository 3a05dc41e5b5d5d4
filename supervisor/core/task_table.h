/* supervisor/core/task_table.h — the index of tasks by id: a hash table (separate chaining
 * through small side nodes, so struct task stays free of table internals) that owns its
 * nodes, never the tasks.  Ids are 32 hex digits. */
#ifndef FP_TASK_TABLE_H
#define FP_TASK_TABLE_H

#include <stddef.h>

struct task;
struct task_table;

struct task_table *task_table_new(void);   /* NULL when out of memory */
void task_table_free(struct task_table *tb);   /* the nodes; the tasks are the caller's */
/* Index t under t->id (which must not be indexed yet).  0 or -ENOMEM. */
int task_table_put(struct task_table *tb, struct task *t);
void task_table_del(struct task_table *tb, const struct task *t);
struct task *task_table_find(const struct task_table *tb, const char *id);   /* NULL: none */

#endif
