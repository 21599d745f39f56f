# SPDX-License-Identifier: MIT
# Sourced by the shell tests of the rdma, interop and bench suites: the test
# bed they run on. Set these in the environment to run on a real NIC
# (tools/run-tests does, when it finds an active port); the defaults are the
# soft-RoCE VM's first device (tools/rxe-vm), and match tests/pc_test.h.
#   PC_TEST_DEVICE     RDMA device                    (rxe0)
#   PC_TEST_PORT       its port                       (1)
#   PC_TEST_GID_INDEX  GID index for perftest -x      (0)
#   PC_TEST_ADDR       rdma_cm address on that port   (fe80::ff:fe00:1%d0)
: "${PC_TEST_DEVICE:=rxe0}"
: "${PC_TEST_PORT:=1}"
: "${PC_TEST_GID_INDEX:=0}"
: "${PC_TEST_ADDR:=fe80::ff:fe00:1%d0}"
export PC_TEST_DEVICE PC_TEST_PORT PC_TEST_GID_INDEX PC_TEST_ADDR

# pc_need_device: returns when an RDMA device is visible. Without one a host
# skips the test (exit 77), while inside the VM the test fails (exit 1): a
# missing device there is a broken test bed.
pc_need_device() {
	[ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] && return 0
	if [ "${PC_IN_VM:-}" = 1 ]; then
		echo "FAIL: running inside the soft-RoCE VM but no RDMA device is visible" >&2
		exit 1
	fi
	echo "SKIP: no RDMA device here; run this test inside tools/rxe-vm"
	exit 77
}

# fail MESSAGE: FAIL on stderr with the last lines of every log the test
# kept in $TMP (*.out, *.err, *.json), then exit 1.
fail() {
	local f
	echo "FAIL: $*" >&2
	for f in "${TMP:-/nonexistent}"/*.out "${TMP:-/nonexistent}"/*.err \
		"${TMP:-/nonexistent}"/*.json; do
		[ -s "$f" ] && { echo "--- $(basename "$f")"; tail -n 30 "$f"; } >&2
	done
	exit 1
}

ok() { echo "ok: $*"; }

# pc_usage_error EXPECTED-TEXT PROGRAM ARGS...: PROGRAM ARGS exits 2, says the
# text on stderr and prints nothing on stdout (a usage error, not a run).
pc_usage_error() {
	local want=$1 prog=$2 rc
	shift 2
	"$prog" "$@" >"$TMP/u.stdout" 2>"$TMP/u.stderr"
	rc=$?
	[ "$rc" = 2 ] || fail "${prog##*/} $* exited $rc, expected 2 (usage error)"
	grep -qF -- "$want" "$TMP/u.stderr" ||
		fail "${prog##*/} $*: stderr does not say '$want': $(cat "$TMP/u.stderr")"
	[ ! -s "$TMP/u.stdout" ] || fail "${prog##*/} $*: output on stdout despite the error"
}
