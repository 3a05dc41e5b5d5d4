/* supervisor/core/tombs.c — see tombs.h. */
#include "supervisor/core/tombs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tomb {
	char id[33];
	int64_t until;
	struct tomb *next;
};

/* Tombstones are few (expired names, for a limited time); a list is enough. */
struct tombs {
	struct tomb *head;          /* newest first */
	size_t n;
};

struct tombs *tombs_new(void)
{
	return calloc(1, sizeof(struct tombs));
}

void tombs_free(struct tombs *tb)
{
	if (!tb)
		return;
	for (struct tomb *b = tb->head, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	free(tb);
}

/* Added at the head without looking for an older tombstone of the same name: tombs_find
 * meets the newest first, which is the one tombs.h says it returns, so no search is needed.
 * The copy is cut at 32 characters (tombs.h), so a caller-supplied name of any length
 * cannot overrun the entry. */
int tombs_add(struct tombs *tb, const char *id, int64_t until)
{
	struct tomb *b = calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	snprintf(b->id, sizeof b->id, "%s", id);
	b->until = until;
	b->next = tb->head;
	tb->head = b;
	tb->n++;
	return 0;
}

/* 0 means "no tombstone": an until of 0 could never be in the future, so callers can test
 * the result directly.  A linear scan, because the list stays short (see struct tombs). */
int64_t tombs_find(const struct tombs *tb, const char *id)
{
	for (const struct tomb *b = tb->head; b; b = b->next)
		if (strcmp(b->id, id) == 0)
			return b->until;
	return 0;
}

/* The walk that writes tombstones into a snapshot.  fn must not add or prune tombstones: the
 * walk holds a pointer into the list. */
void tombs_each(const struct tombs *tb, void (*fn)(void *arg, const char *id, int64_t until),
                     void *arg)
{
	for (const struct tomb *b = tb->head; b; b = b->next)
		fn(arg, b->id, b->until);
}

/* until <= now goes: a tombstone is only worth keeping while it may still be asked about.
 * Pruning walks a pointer to the link rather than the node, so the head and inner nodes are
 * unlinked the same way.  Each owner calls it on its own clock (tombs.h). */
size_t tombs_prune(struct tombs *tb, int64_t now)
{
	size_t n = 0;
	for (struct tomb **pp = &tb->head; *pp;) {
		if ((*pp)->until <= now) {
			struct tomb *b = *pp;
			*pp = b->next;
			free(b);
			tb->n--;
			n++;
		} else {
			pp = &(*pp)->next;
		}
	}
	return n;
}

size_t tombs_count(const struct tombs *tb)
{
	return tb->n;
}
