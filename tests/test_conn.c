// SPDX-License-Identifier: MIT
/*
 * unit suite, white-box: workers/conn.c alone. A connection's memory and
 * the control messages that name it (issue 21, fault 5: a close request
 * still queued when the connection retired was dequeued from freed memory):
 *  - a queued control message holds the conn: the engine's reference may
 *    go first (the retire and its grace period), and the consumer still
 *    finds it, with its reason, and frees it by dropping the message's;
 *  - only the first close request of a conn is posted;
 *  - handles (pc_connect()'s, pc_conn_get()'s) hold it the same way.
 * The ASan build of the unit suite reports any read of freed memory here.
 */
#include "conn.h"

#include <string.h>

#include "pc_test.h"

static unsigned int wakes;

static void count_wake(void *arg)
{
	(void)arg;
	wakes++;
}

START_TEST(test_queued_message_holds_the_conn)
{
	struct ctl_inbox in;
	struct ctl_msg *m;
	struct conn *c = conn_alloc();

	ck_assert_ptr_nonnull(c);
	ctl_inbox_init(&in, count_wake, NULL);
	ck_assert_uint_eq(atomic_load(&c->hrefs), 1);
	ck_assert(conn_request_close(c, &in, -ECONNRESET, "closed by the test"));
	ck_assert_uint_eq(wakes, 1);
	/* a second request is not posted: the node is embedded, once per kind */
	ck_assert(!conn_request_close(c, &in, -EIO, "again"));
	ck_assert_uint_eq(atomic_load(&c->hrefs), 2);
	/* the retire and its grace period: the engine lets go first */
	conn_drop(c);
	ck_assert_uint_eq(atomic_load(&c->hrefs), 1);
	m = ctl_next(&in);
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_eq(m->conn, c);
	ck_assert_int_eq(m->kind, CTL_CLOSE_REQ);
	ck_assert_int_eq(m->conn->req_err, -ECONNRESET);
	ck_assert_str_eq(m->conn->req_why, "closed by the test");
	ck_assert_ptr_null(ctl_next(&in));
	/* the consumer is done: the last reference frees it (ASan: no leak, no reuse) */
	conn_drop(m->conn);
}
END_TEST

START_TEST(test_handles_hold_the_conn)
{
	struct conn *c = conn_alloc();

	ck_assert_ptr_nonnull(c);
	conn_hold(c);	/* pc_connect()'s */
	conn_hold(c);	/* pc_conn_get() in on_conn(UP) */
	conn_drop(c);	/* the engine's, after the retire */
	c->user = &wakes;
	ck_assert_ptr_eq(c->user, &wakes);
	conn_drop(c);
	ck_assert_uint_eq(atomic_load(&c->hrefs), 1);
	conn_drop(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("conn");
	TCase *tc = tcase_create("conn");

	tcase_add_test(tc, test_queued_message_holds_the_conn);
	tcase_add_test(tc, test_handles_hold_the_conn);
	suite_add_tcase(s, tc);
	return pc_test_run(s);
}
