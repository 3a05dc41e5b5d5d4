/* supervisor/core/tombs.h — tombstones: names of things that are gone (expired task ids,
 * removed transfer handles), each remembered until a time, so a request for one is told it
 * expired rather than that it never existed.  One table serves tasks and transfers; each
 * owner journals its own tombstones (the records differ) and prunes them on its own clock.
 * Names are kept to 32 characters (ids and handles are 32 hex digits; a longer one is cut).
 * Loop thread only. */
#ifndef FP_TOMBS_H
#define FP_TOMBS_H

#include <stddef.h>
#include <stdint.h>

struct tombs;

struct tombs *tombs_new(void);        /* NULL when out of memory */
void tombs_free(struct tombs *tb);    /* NULL is fine */
/* Remember name until `until` (wall ms).  0 or -ENOMEM. */
int tombs_add(struct tombs *tb, const char *name, int64_t until);
/* The newest tombstone's time for name, 0 if there is none. */
int64_t tombs_find(const struct tombs *tb, const char *name);
/* Every tombstone, newest first (for snapshots). */
void tombs_each(const struct tombs *tb, void (*fn)(void *arg, const char *name, int64_t until), void *arg);
/* Drop the tombstones whose time is up (until <= now); returns how many went. */
size_t tombs_prune(struct tombs *tb, int64_t now);
size_t tombs_count(const struct tombs *tb);

#endif
