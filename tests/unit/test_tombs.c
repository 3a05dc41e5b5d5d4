/* tests/unit/test_tombs.c — the tombstone table tasks and transfers share: add / find, the
 * newest tombstone of a name wins, each walks newest first, prune drops exactly those whose
 * time is up, names are kept to 32 characters.
 * Prints one TAP-style line per check and "N passed, M failed"; exits 1 on any failure. */
#include "supervisor/core/tombs.h"
#include "check.h"

#include <string.h>

struct walk {
	char names[8][40];
	int64_t until[8];
	int n;
};

static void collect(void *arg, const char *name, int64_t until)
{
	struct walk *w = arg;
	if (w->n < 8) {
		snprintf(w->names[w->n], sizeof w->names[w->n], "%s", name);
		w->until[w->n++] = until;
	}
}

int main(void)
{
	struct tally t = {0, 0};
	static const char a[] = "0123456789abcdef0123456789abcdef";
	static const char b[] = "fedcba9876543210fedcba9876543210";
	struct tombs *tb = tombs_new();
	struct walk w = { .n = 0 };

	CHECK(&t, tb != NULL && tombs_count(tb) == 0 && tombs_find(tb, a) == 0, "a new table is empty");
	CHECK(&t, tombs_add(tb, a, 1000) == 0 && tombs_add(tb, b, 2000) == 0 && tombs_count(tb) == 2, "add two");
	CHECK(&t, tombs_find(tb, a) == 1000 && tombs_find(tb, b) == 2000 && tombs_find(tb, "x") == 0,
	      "find gives each name's time, 0 for a name never added");
	tombs_each(tb, collect, &w);
	CHECK(&t, w.n == 2 && strcmp(w.names[0], b) == 0 && w.until[0] == 2000 && strcmp(w.names[1], a) == 0,
	      "each walks newest first");
	CHECK(&t, tombs_add(tb, a, 3000) == 0 && tombs_find(tb, a) == 3000, "the newest tombstone of a name wins");
	CHECK(&t, tombs_prune(tb, 999) == 0 && tombs_count(tb) == 3, "prune before any time is up drops nothing");
	CHECK(&t, tombs_prune(tb, 2000) == 2 && tombs_count(tb) == 1 && tombs_find(tb, a) == 3000 &&
	         tombs_find(tb, b) == 0, "prune drops those whose time is up (until <= now), keeps the rest");
	char longer[80];
	snprintf(longer, sizeof longer, "%s%s", b, "tail");
	CHECK(&t, tombs_add(tb, longer, 5000) == 0 && tombs_find(tb, b) == 5000, "a longer name is kept to 32 characters");
	CHECK(&t, tombs_prune(tb, 10000) == 2 && tombs_count(tb) == 0 && tombs_find(tb, a) == 0, "prune can empty it");
	tombs_free(tb);
	tombs_free(NULL);
	return check_done(&t);
}
