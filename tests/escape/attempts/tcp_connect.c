/* tcp_connect — connect to a listener the battery opened on 127.0.0.1 (port in argv[1]). */
#include "attempt.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(attempt_arg(argc, argv))) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		contained("socket(AF_INET): %s", strerror(errno));
	if (connect(s, (struct sockaddr *)&a, sizeof a) == 0)
		escaped("connected to 127.0.0.1:%s", attempt_arg(argc, argv));
	contained("connect: %s", strerror(errno));
}
