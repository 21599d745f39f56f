/* SPDX-License-Identifier: MIT */
/*
 * What the code examples of the docs (docs/, .md files) that are not whole programs take as
 * given (tests/test_doc_examples.py puts this in front of each): the
 * handles a surrounding program would have, and the application's own
 * functions and types they call. Declarations only: the examples are
 * compiled, not linked.
 */
#include <pollcore/pollcore.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#if __has_include(<liburing.h>)
#include <liburing.h>
#endif

/* an engine, a connection, a request received, and a buffer of the application's */
extern struct pc_engine *e;
extern struct pc_conn *c;
extern struct pc_msg *req;
extern void *buf;
extern uint32_t len;
extern size_t size;
extern uint32_t n;
extern uint64_t raddr;
extern uint32_t peer_rkey;
extern void *my_ctx, *ctx;
extern unsigned int k;
extern int datafd;

/* the application's own functions */
void process(struct pc_msg *m);
void handler(struct pc_msg *m, void *arg);
void fill(void *data, size_t len);
void done(struct pc_msg *m, int status, void *arg);
void io_done(struct pc_op *op, int status);
void slot_free(void *arg, int status);
uint64_t offset_of(const struct pc_msg *m);

/* a registered buffer the application keeps for large messages (on_large) */
struct slot {
	void *buf;
	void *mem;
};
struct slot *my_slot_for(uint32_t len);

/* the application's connect protocol (raw peers, on_request) */
struct my_connect {
	uint32_t version;
	uint32_t queue_size;
};
struct my_accept {
	uint32_t version;
};
struct my_reject {
	uint32_t status;
};
enum { MY_BUSY = 1 };
