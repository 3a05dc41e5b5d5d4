/* tests/unit/test_task_table.c — the id index (supervisor/core/task_table.c): every task put is
 * found by its id across growth of the table, a deleted one is gone while the others stay,
 * unknown and NULL ids find nothing, and deleting what is not there changes nothing.
 * Prints "N passed, M failed" last; exits non-zero on any failure. */
#include "check.h"
#include "supervisor/core/task_table.h"
#include "supervisor/core/tasks.h"

#define N 5000

int main(void)
{
	struct tally t = { 0, 0 };
	struct task *v[N];
	struct task_table *tb = task_table_new();
	uint64_t rng = 42;
	CHECK(&t, tb != NULL, "a table");
	int ok = 1;
	for (int i = 0; i < N; i++) {
		char id[33];
		for (int k = 0; k < 32; k++)
			id[k] = "0123456789abcdef"[check_rand(&rng) % 16];
		id[32] = 0;
		v[i] = task_alloc(id);
		ok &= v[i] && task_table_put(tb, v[i]) == 0;
	}
	CHECK(&t, ok, "5000 tasks put (the table grows past its first 1024 buckets)");
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= task_table_find(tb, v[i]->id) == v[i];
	CHECK(&t, ok, "each is found by its id");
	for (int i = 0; i < N; i += 2)
		task_table_del(tb, v[i]);
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= task_table_find(tb, v[i]->id) == (i % 2 ? v[i] : NULL);
	CHECK(&t, ok, "deleted ones are gone, the others stay");
	task_table_del(tb, v[0]);   /* not there any more */
	CHECK(&t, task_table_find(tb, v[1]->id) == v[1], "deleting a task not in the table changes nothing");
	CHECK(&t, !task_table_find(tb, "ffffffffffffffffffffffffffffffff") && !task_table_find(tb, NULL),
	      "an unknown or NULL id finds nothing");
	CHECK(&t, !task_table_find(NULL, v[1]->id), "a NULL table finds nothing");
	task_table_free(tb);
	for (int i = 0; i < N; i++)
		task_free(v[i]);
	return check_done(&t);
}
