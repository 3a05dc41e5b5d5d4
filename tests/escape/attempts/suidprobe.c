/* suidprobe — not an attempt: the setuid program the setuid attempt runs.  The battery
 * installs a copy owned by another user with the setuid bit; it prints its ids. */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	printf("uid=%u euid=%u\n", (unsigned)getuid(), (unsigned)geteuid());
	return 0;
}
