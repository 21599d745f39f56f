#!/bin/bash
# SPDX-License-Identifier: MIT
# interop suite: pollcore-nvmf, served to the Linux kernel's NVMe-oF/RDMA
# initiator (nvme-cli, fio) - the same checks test_nvmf_kernel.sh makes
# of the kernel's own target, and more.
#   usage: test_nvmf_target.sh path/to/pollcore-nvmf
#
# Everywhere: bad usage is refused with exit 2 and a message naming the option.
# On the test bed (in the VM, tools/rxe-vm --modules nvme-rdma,...;
# run-tests starts it so), twice: a 64 MiB RAM namespace (512 B blocks), then
# a 64 MiB file (4 KiB blocks) with only 4 staging buffers (--staging 4):
#  - nvme discover lists the subsystem (rdma, this port);
#  - nvme connect gives a device that nvme list shows, of exactly the size,
#    and nvme id-ctrl / id-ns report the model, serial, NQN, MDTS, block
#    size and namespace size configured;
#  - fio writes at random and reads back with crc32c verification, 512 B,
#    4 KiB and 128 KiB at iodepths 1 and 32, 4 KiB at 128 (RAM), 4 KiB at 32 and 128 KiB
#    at 1 (file), every byte checked and counted; then two jobs at once;
#  - nvme flush succeeds; blkdiscard (deallocate) and blkdiscard -z (Write
#    Zeroes) leave exactly their ranges reading as zeroes, the bytes around
#    them intact;
#  - nvme disconnect removes exactly one controller; a reconnect gets a
#    new controller (another cntlid) and the data written before;
#  - SIGTERM stops the target with exit 0, its counters showing the
#    flushes, zeroes and discards, and no failed transfer, failed backend
#    operation or lost completion; every read of the RAM namespace was sent
#    from the RAM disk in place (none of the file's); the file then holds
#    what was written through the target (synced at exit); on the file
#    namespace, with 4 staging buffers for 32 commands in flight, commands
#    waited for one (staging_waits, backpressure) and none failed.
# On a host without RDMA: exit 77.
set -u

NVMF=${1:?usage: test_nvmf_target.sh path/to/pollcore-nvmf}
. "$(dirname "$0")/testbed.sh"
. "$(dirname "$0")/nvmf_lib.sh"
ADDR=$PC_TEST_ADDR
PORT=4420
NQN=nqn.2026-12.io.pollcore:test-nvmf-target
TMP=$(mktemp -d)
TGT_PID=
connected=0
cleanup() {
	[ "$connected" = 0 ] || nvme disconnect -n "$NQN" >/dev/null 2>&1
	[ -z "$TGT_PID" ] || kill -KILL "$TGT_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

# --- usage (no device needed) ------------------------------------------------------------
usage_error() {
	pc_usage_error "$1" "$NVMF" "${@:2}"
	grep -q '^usage: pollcore-nvmf .*--addr' "$TMP/u.stderr" ||
		fail "pollcore-nvmf ${*:2}: no usage text on stderr"
}
usage_error "--addr is missing" --nqn "$NQN" --ram 1m
usage_error "--nqn is missing" --addr "$ADDR" --ram 1m
usage_error "no namespace: give --ram SIZE or --file PATH" --addr "$ADDR" --nqn "$NQN"
usage_error "--ram: '1k' is not a size from 1048576" --addr "$ADDR" --nqn "$NQN" --ram 1k
usage_error "--bs: '1024' is neither 512 nor 4096" --addr "$ADDR" --nqn "$NQN" --ram 1m --bs 1024
usage_error "--in-capsule: '100' is not a multiple of 16" --addr "$ADDR" --nqn "$NQN" --ram 1m --in-capsule 100
usage_error "--max-queue-depth: '1' is not a number from 2 to 1024" --addr "$ADDR" --nqn "$NQN" --ram 1m --max-queue-depth 1
usage_error "--port: '0' is not a number from 1 to 65535" --addr "$ADDR" --nqn "$NQN" --ram 1m --port 0
usage_error "--idle-spins: '0' is not a number from 1 to 1000000" --addr "$ADDR" --nqn "$NQN" --ram 1m --idle-spins 0
usage_error "unexpected argument 'extra'" --addr "$ADDR" --nqn "$NQN" --ram 1m extra
usage_error "unknown option or missing value: '--bogus'" --bogus
"$NVMF" --help >"$TMP/u.stdout" 2>&1 || fail "pollcore-nvmf --help exited non-zero"
grep -q 'raw_bufs = N x (32 + max-io-queues x max-queue-depth)' "$TMP/u.stdout" ||
	fail "--help does not say how the receive buffers are sized"
ok "usage errors: exit 2 with a message naming the option"

pc_need_device
nvmf_need_initiator
for t in jq cmp dd blkdiscard od; do
	command -v "$t" >/dev/null || fail "$t is not installed"
done

# target_start LOG ARGS...: pollcore-nvmf in the background, listening within 120 s.
target_start() {
	local log=$1
	shift
	"$NVMF" --addr "$ADDR" --port "$PORT" --nqn "$NQN" --no-numa "$@" >"$log" 2>&1 &
	TGT_PID=$!
	for _ in $(seq 1200); do
		grep -q '^pollcore-nvmf: listening' "$log" && return 0
		kill -0 "$TGT_PID" 2>/dev/null || { cat "$log"; fail "pollcore-nvmf $* exited at start"; }
		sleep 0.1
	done
	cat "$log"
	fail "pollcore-nvmf $* is not listening after 120 s"
}

# target_stop LOG: SIGTERM, exit 0 within 60 s, and the counters are clean.
target_stop() {
	local log=$1 rc=0
	kill -TERM "$TGT_PID"
	for _ in $(seq 600); do
		kill -0 "$TGT_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$TGT_PID" 2>/dev/null && { cat "$log"; fail "pollcore-nvmf still runs 60 s after SIGTERM"; }
	wait "$TGT_PID" || rc=$?
	TGT_PID=
	[ "$rc" = 0 ] || { cat "$log"; fail "pollcore-nvmf exited $rc after SIGTERM"; }
	grep -q '^pollcore-nvmf: stopped$' "$log" || { cat "$log"; fail "pollcore-nvmf: no 'stopped' line"; }
	grep -E '^pollcore-nvmf: worker 0: queues ' "$log" >"$TMP/counters" || { cat "$log"; fail "no counters"; }
	! grep -E '^pollcore-nvmf: worker [0-9]+: namespace ' "$log" ||
		{ cat "$log"; fail "a backend operation failed (above)"; }
	for c in xfer_errors io_errors cqe_lost; do
		grep -q " $c 0 " "$TMP/counters" || { cat "$log"; fail "counter $c is not 0: $(cat "$TMP/counters")"; }
	done
}

# counter NAME: the value of counter NAME on the last counters line.
counter() {
	sed -E "s/.* $1 ([0-9]+).*/\1/" "$TMP/counters"
}

# id_checks DEV BYTES LBADS: nvme id-ctrl and id-ns say what the target was told.
id_checks() {
	local dev=$1 bytes=$2 lbads=$3
	timeout 60 nvme id-ctrl -o json "$dev" >"$TMP/id-ctrl.json" 2>"$TMP/id-ctrl.err" ||
		fail "nvme id-ctrl $dev failed"
	jq -e --arg n "$NQN" --arg sn "$SERIAL" '.subnqn == $n and (.mn | sub(" +$"; "")) == "pollcore-nvmf" and
		(.sn | sub(" +$"; "")) == $sn and .mdts == 5 and .nn == 1 and .cntlid > 0' \
		"$TMP/id-ctrl.json" >/dev/null ||
		fail "nvme id-ctrl $dev: $(jq -c '{subnqn, mn, sn, mdts, nn, cntlid}' "$TMP/id-ctrl.json")"
	nvmf_check_size "$dev" "$bytes"
	jq -e --argjson d "$lbads" --argjson n "$((bytes >> lbads))" \
		'.nsze == $n and .ncap == $n and .lbafs[.flbas % 16].ds == $d' "$TMP/id-ns.json" >/dev/null ||
		fail "nvme id-ns $dev: $(jq -c '{nsze, ncap, flbas, lbafs}' "$TMP/id-ns.json")"
}

# zero_checks DEV: a deallocated range and a zeroed range read back as zeroes,
# and the 4 KiB around each are intact.
zero_checks() {
	local dev=$1
	head -c $((3 << 20)) /dev/urandom >"$TMP/pat"
	dd if="$TMP/pat" of="$dev" bs=1M count=3 oflag=direct status=none || fail "dd to $dev failed"
	timeout 60 blkdiscard -o $((1 << 20)) -l $((1 << 20)) "$dev" || fail "blkdiscard $dev failed"
	timeout 60 blkdiscard -z -o $((2 << 20)) -l $((512 << 10)) "$dev" || fail "blkdiscard -z $dev failed"
	dd if="$dev" of="$TMP/back" bs=1M count=3 iflag=direct status=none || fail "dd from $dev failed"
	cmp -n $((1 << 20)) "$TMP/pat" "$TMP/back" || fail "the bytes before the discarded range changed"
	[ "$(dd if="$TMP/back" bs=1M skip=1 count=1 status=none | od -An -v -tx1 | tr -s ' \n' '\n\n' | sort -u | tr -d '\n')" = 00 ] ||
		fail "the discarded 1 MiB does not read back as zeroes"
	[ "$(dd if="$TMP/back" bs=512K skip=4 count=1 status=none | od -An -v -tx1 | tr -s ' \n' '\n\n' | sort -u | tr -d '\n')" = 00 ] ||
		fail "the 512 KiB zeroed by Write Zeroes do not read back as zeroes"
	cmp -i $((5 << 19)) -n $((512 << 10)) "$TMP/pat" "$TMP/back" ||
		fail "the bytes after the zeroed range changed"
}

# serve WHAT BYTES LBADS ARGS...: the whole sequence on one target.
serve() {
	local what=$1 bytes=$2 lbads=$3 log=$TMP/target-$1.log cntlid1 cntlid2
	shift 3
	SERIAL=pollcore-$what
	target_start "$log" --serial "$SERIAL" "$@"
	grep -q "^pollcore-nvmf: namespace 1: .*, $((bytes >> lbads)) blocks of $((1 << lbads)) bytes$" "$log" ||
		{ cat "$log"; fail "$what: the namespace line is not what was asked"; }
	nvmf_discover "$ADDR" "$PORT" "$NQN"
	jq -e --arg a "$ADDR" --arg n "$NQN" '[.records[] | select(.subnqn == $n and .traddr == $a and .adrfam == "ipv6")] | length == 1' \
		"$TMP/discover.json" >/dev/null || fail "$what: the discovery log's address: $(jq -c . "$TMP/discover.json")"
	ok "$what: nvme discover lists $NQN at $ADDR port $PORT"

	nvmf_connect "$ADDR" "$PORT" "$NQN"
	connected=1
	nvmf_listed "$NVMF_DEV"
	id_checks "$NVMF_DEV" "$bytes" "$lbads"
	cntlid1=$(jq .cntlid "$TMP/id-ctrl.json")
	ok "$what: nvme connect: $NVMF_DEV, listed, $bytes bytes of $((1 << lbads))-byte blocks, id-ctrl and id-ns as configured"

	if [ "$what" = ram ]; then
		nvmf_fio_verify "$NVMF_DEV" "512 1 256" "512 32 1024" "4096 1 128" "4096 32 512" \
			"4096 128 2048" "131072 1 8" "131072 32 64"
		ok "$what: fio crc32c verify, 512 B / 4 KiB / 128 KiB at iodepth 1 and 32, and 4 KiB at 128 (the host's whole queue), every byte counted"
	else
		nvmf_fio_verify "$NVMF_DEV" "4096 32 512" "131072 1 8"
		ok "$what: fio crc32c verify, 4 KiB at iodepth 32 and 128 KiB at iodepth 1, every byte counted"
	fi
	# two jobs at once, on regions of their own; fio may put a note before its JSON
	timeout 600 fio --output-format=json --output="$TMP/jobs.raw" --filename="$NVMF_DEV" \
		--ioengine=libaio --direct=1 --verify=crc32c --verify_state_save=0 --verify_fatal=1 \
		--rw=randwrite --do_verify=1 --bs=4k --iodepth=16 --size=2M \
		--name=pair-a --offset=0 --name=pair-b --offset=2M >"$TMP/jobs.out" 2>&1 ||
		fail "$what: two fio jobs at once exited $?: $(head -5 "$TMP/jobs.raw")"
	sed -n '/^{/,$p' "$TMP/jobs.raw" >"$TMP/jobs.json"
	[ "$(jq -r '[.jobs[] | "\(.jobname) \(.error) \(.write.io_bytes) \(.read.io_bytes)"] | sort | join(",")' \
		"$TMP/jobs.json")" = "pair-a 0 $((2 << 20)) $((2 << 20)),pair-b 0 $((2 << 20)) $((2 << 20))" ] ||
		fail "$what: two fio jobs at once: $(head -3 "$TMP/jobs.raw"; jq -c '[.jobs[] | {jobname, error, write: .write.io_bytes, read: .read.io_bytes}]' "$TMP/jobs.json")"
	ok "$what: two fio jobs at once, 4 KiB at iodepth 16 each, verified"

	timeout 60 nvme flush "$NVMF_DEV" -n 1 >"$TMP/flush.out" 2>&1 || fail "$what: nvme flush: $(cat "$TMP/flush.out")"
	zero_checks "$NVMF_DEV"
	ok "$what: nvme flush; blkdiscard and blkdiscard -z read back as zeroes, exactly their ranges"

	head -c $((1 << 20)) /dev/urandom >"$TMP/keep"
	dd if="$TMP/keep" of="$NVMF_DEV" bs=1M seek=8 oflag=direct status=none || fail "dd to $NVMF_DEV failed"
	nvmf_disconnect "$NQN"
	connected=0
	nvmf_connect "$ADDR" "$PORT" "$NQN"
	connected=1
	timeout 60 nvme id-ctrl -o json "$NVMF_DEV" >"$TMP/id-ctrl.json" 2>&1 || fail "nvme id-ctrl after reconnect"
	cntlid2=$(jq .cntlid "$TMP/id-ctrl.json")
	[ "$cntlid2" != "$cntlid1" ] || fail "$what: the reconnect got controller $cntlid2 again"
	dd if="$NVMF_DEV" of="$TMP/keep.back" bs=1M skip=8 count=1 iflag=direct status=none ||
		fail "dd from $NVMF_DEV failed"
	cmp "$TMP/keep" "$TMP/keep.back" || fail "$what: what was written before the disconnect is not there after"
	nvmf_disconnect "$NQN"
	connected=0
	ok "$what: disconnect removes one controller; reconnect gets controller $cntlid2 (was $cntlid1) and the data"

	target_stop "$log"
	[ "$(counter flushes)" -ge 1 ] && [ "$(counter zeroes)" -ge 1 ] && [ "$(counter discards)" -ge 1 ] ||
		{ cat "$log"; fail "$what: flush, zeroes or discard not counted: $(cat "$TMP/counters")"; }
	grep -q "queue 0 of controller $cntlid1 closed" "$log" ||
		{ cat "$log"; fail "$what: no line for the admin queue of controller $cntlid1 closing"; }
	ok "$what: SIGTERM: exit 0; flushes $(counter flushes), zeroes $(counter zeroes), discards $(counter discards), no failed transfer or lost completion"
	# a RAM namespace's reads leave from the disk itself; a file's through staging buffers
	in_place=$(sed -E 's/.* ([0-9]+) in place\).*/\1/' "$TMP/counters")
	want=0
	[ "$what" = ram ] && want=$(counter reads)
	[ "$(counter reads)" -ge 100 ] && [ "$in_place" = "$want" ] ||
		{ cat "$log"; fail "$what: reads $(counter reads), $in_place of them in place (want $want)"; }
	ok "$what: reads $(counter reads), $in_place of them sent from the RAM disk in place"
	if [ "$what" = file ]; then
		[ "$(counter staging_waits)" -gt 0 ] ||
			{ cat "$log"; fail "file: 4 staging buffers, 32 commands in flight, and no command waited"; }
		ok "file: $(counter staging_waits) commands waited for one of the 4 staging buffers; none failed"
	fi
}

serve ram $((64 << 20)) 9 --ram 64m

dd if=/dev/zero of="$TMP/disk" bs=1M count=64 status=none || fail "cannot create $TMP/disk"
serve file $((64 << 20)) 12 --file "$TMP/disk" --bs 4096 --staging 4
# synced at exit: the file holds what the host wrote through the target
cmp -i $((8 << 20)):0 -n $((1 << 20)) "$TMP/disk" "$TMP/keep" ||
	fail "file: the backing file does not hold the 1 MiB written at 8 MiB"
ok "file: the backing file holds what was written through the target"
echo "PASS: test_nvmf_target"
