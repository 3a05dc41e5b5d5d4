/* supervisor/core/tombs.h — tombstones: names of things that are gone, each remembered until a
 * time, so a request for one can be told it expired rather than that it never existed. */
#ifndef FP_TOMBS_H
#define FP_TOMBS_H

#include <stddef.h>
#include <stdint.h>

struct task_tombs;

struct task_tombs *task_tombs_new(void);        /* NULL when out of memory */
void task_tombs_free(struct task_tombs *tb);
int task_tombs_add(struct task_tombs *tb, const char *id, int64_t until);   /* 0 or -ENOMEM */
int64_t task_tombs_find(const struct task_tombs *tb, const char *id);      /* until, 0 if none */
void task_tombs_each(const struct task_tombs *tb, void (*fn)(void *arg, const char *id, int64_t until),
                     void *arg);
/* Drop the tombstones whose time is up (until <= now). */
void task_tombs_prune(struct task_tombs *tb, int64_t now);

#endif
