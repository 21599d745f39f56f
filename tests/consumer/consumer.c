// SPDX-License-Identifier: MIT
/*
 * An out-of-tree program built against the *installed* pollcore through
 * pkg-config (tools/run-tests builds and runs it). It proves the headers are
 * self-contained and the library links.
 */
#include <pollcore/pollcore.h>

#include <stdio.h>

int main(void)
{
	struct pc_dev *dev = pc_dev_open(NULL, 1, 0);

	if (dev) {
		printf("consumer: opened %s port %u\n", dev->name, dev->port);
		pc_dev_close(dev);
	} else {
		/* Expected on a host without RDMA: an exact errno and a message. */
		if (errno != ENODEV) {
			printf("consumer: unexpected errno %d\n", errno);
			return 1;
		}
		printf("consumer: linked against pollcore %s; no device here (%s)\n",
		       pc_version(), pc_last_error());
	}
	return 0;
}
