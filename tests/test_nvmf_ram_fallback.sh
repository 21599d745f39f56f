#!/bin/bash
# SPDX-License-Identifier: MIT
# interop suite: pollcore-nvmf with a RAM namespace it cannot register on the
# device, served to the Linux kernel's NVMe-oF/RDMA initiator (nvme-cli, fio).
#   usage: test_nvmf_ram_fallback.sh path/to/pollcore-nvmf
#
# The target runs without CAP_IPC_LOCK (setpriv takes it out of every
# capability set; root's would let ibv_reg_mr pin past the limit) and with
# RLIMIT_MEMLOCK at 96 MiB (prlimit): room for the engine's own registered
# pools and the staging buffers, not for its 256 MiB RAM namespace, whose
# ibv_reg_mr fails (ENOMEM) when the first queue comes up. On the test bed
# (in the VM, tools/rxe-vm --modules nvme-rdma,...):
#  - the limit is the one meant: the target has no CAP_IPC_LOCK, its
#    RLIMIT_MEMLOCK is 96 MiB, and once connected what it has pinned
#    (VmPin) is below the limit while that plus the namespace is above;
#  - the target says once that it cannot register the namespace's bytes
#    (ENOMEM) and that its reads are copied through staging buffers: one
#    line for every queue of two connections;
#  - fio writes at random and reads back with crc32c verification, 512 B,
#    4 KiB and 128 KiB at iodepths 1 and 32, every byte checked and counted;
#    1 MiB written at 200 MiB before a disconnect reads back the same after
#    the reconnect;
#  - SIGTERM stops it with exit 0, no failed transfer, failed backend
#    operation or lost completion; it served at least 100 reads, none of
#    them from the RAM disk in place (unregistered memory).
# A target that closes a queue the host did not ask to close (a transfer
# failed) would leave the host's I/O waiting for ever (native multipath
# requeues it across reconnects): a watchdog then kills the target and
# deletes the host's controller, so that the step waiting fails at once,
# with the target's reason.
# On a host without RDMA: exit 77.
set -u

NVMF=${1:?usage: test_nvmf_ram_fallback.sh path/to/pollcore-nvmf}
. "$(dirname "$0")/testbed.sh"
. "$(dirname "$0")/nvmf_lib.sh"
ADDR=$PC_TEST_ADDR
PORT=4421
NQN=nqn.2026-12.io.pollcore:test-nvmf-ram-fallback
RAM=$((256 << 20))
LIMIT=$((96 << 20))
TMP=$(mktemp -d)
TGT_PID=
WD_PID=
connected=0
cleanup() {
	[ -z "$WD_PID" ] || kill "$WD_PID" 2>/dev/null
	[ "$connected" = 0 ] || nvme disconnect -n "$NQN" >/dev/null 2>&1
	[ -z "$TGT_PID" ] || kill -KILL "$TGT_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

pc_need_device
nvmf_need_initiator
for t in setpriv prlimit cmp dd; do
	command -v "$t" >/dev/null || fail "$t is not installed (util-linux, coreutils)"
done

# the target, without CAP_IPC_LOCK, RLIMIT_MEMLOCK at $LIMIT (setpriv and prlimit exec it: same pid);
# its log is a *.out: fail shows its end
LOG=$TMP/target.out
setpriv --inh-caps=-ipc_lock --ambient-caps=-ipc_lock --bounding-set=-ipc_lock \
	prlimit --memlock=$LIMIT:$LIMIT \
	"$NVMF" --addr "$ADDR" --port "$PORT" --nqn "$NQN" --no-numa --ram $RAM >"$LOG" 2>&1 &
TGT_PID=$!
for _ in $(seq 1200); do
	grep -q '^pollcore-nvmf: listening' "$LOG" && break
	kill -0 "$TGT_PID" 2>/dev/null || { cat "$LOG"; fail "pollcore-nvmf exited at start"; }
	sleep 0.1
done
grep -q '^pollcore-nvmf: listening' "$LOG" || { cat "$LOG"; fail "pollcore-nvmf is not listening after 120 s"; }
grep -q '^pollcore-nvmf: namespace 1: RAM disk of 256 MiB, 524288 blocks of 512 bytes$' "$LOG" ||
	{ cat "$LOG"; fail "the namespace line is not what was asked"; }
[ "$(readlink "/proc/$TGT_PID/exe")" = "$(readlink -f "$NVMF")" ] ||
	fail "pid $TGT_PID is $(readlink "/proc/$TGT_PID/exe"), not pollcore-nvmf"
capeff=$(awk '/^CapEff:/ { print $2 }' "/proc/$TGT_PID/status")
(( (16#$capeff >> 14) & 1 )) && fail "the target has CAP_IPC_LOCK (CapEff $capeff): the limit would not hold"
grep -Eq "^Max locked memory +$LIMIT +$LIMIT +bytes" "/proc/$TGT_PID/limits" ||
	fail "the target's RLIMIT_MEMLOCK: $(grep 'locked memory' "/proc/$TGT_PID/limits")"
ok "pollcore-nvmf listening without CAP_IPC_LOCK (CapEff $capeff), RLIMIT_MEMLOCK $((LIMIT >> 20)) MiB, a $((RAM >> 20)) MiB RAM namespace"

# queues the target closed; the watchdog's allowance in $TMP/closes (a huge one while the host disconnects)
closed() { grep -Ec '^pollcore-nvmf: qp 0x[0-9a-f]+: queue [0-9]+ of controller [0-9]+ closed' "$LOG"; }
allow_closes() { echo "$1" >"$TMP/closes.new" && mv "$TMP/closes.new" "$TMP/closes"; }
allow_closes 0
(
	while sleep 1; do
		[ "$(closed)" -le "$(cat "$TMP/closes")" ] && continue
		{
			echo "watchdog: the target closed a queue the host did not ask to close; target killed, controller deleted:"
			grep -E '^pollcore-nvmf: qp .* closed' "$LOG" | tail -3
		} >"$TMP/watchdog.err"
		# not nvme disconnect, which opens the namespace (held by the waiting I/O): sysfs
		kill -KILL "$TGT_PID"
		ctrl=$(nvmf_ctrl_of "$NQN")
		[ -z "$ctrl" ] || echo 1 >"/sys/class/nvme/$ctrl/delete_controller"
		exit 0
	done
) &
WD_PID=$!

nvmf_connect "$ADDR" "$PORT" "$NQN"
connected=1
nvmf_check_size "$NVMF_DEV" $RAM
# what the engine and the staging buffers pinned fits, the namespace on top would not
pinned=$(awk '/^VmPin:/ { print $2 * 1024 }' "/proc/$TGT_PID/status")
[ "$pinned" -gt 0 ] && [ "$pinned" -lt $LIMIT ] && [ $((pinned + RAM)) -gt $LIMIT ] ||
	fail "pinned $pinned bytes with a limit of $LIMIT: not a namespace that cannot fit alone"
ok "connected: $NVMF_DEV, $RAM bytes; $((pinned >> 10)) KiB pinned, below the $((LIMIT >> 20)) MiB limit"

nvmf_fio_verify "$NVMF_DEV" "512 1 256" "512 32 1024" "4096 1 128" "4096 32 512" "131072 1 8" \
	"131072 32 64"
ok "fio crc32c verify, 512 B / 4 KiB / 128 KiB at iodepth 1 and 32, every byte counted"

head -c $((1 << 20)) /dev/urandom >"$TMP/keep"
dd if="$TMP/keep" of="$NVMF_DEV" bs=1M seek=200 oflag=direct status=none || fail "dd to $NVMF_DEV failed"
allow_closes 1000000
nvmf_disconnect "$NQN"
connected=0
# every queue of the first connection closed at the target, and no more: the allowance
ups=$(grep -Ec '^pollcore-nvmf: rxe[0-9]+ qp 0x[0-9a-f]+: queue [0-9]+ .* connected on worker 0$' "$LOG")
for _ in $(seq 300); do
	[ "$(closed)" = "$ups" ] && break
	sleep 0.1
done
[ "$(closed)" = "$ups" ] || { cat "$LOG"; fail "$(closed) of $ups queues closed at the target 30 s after the disconnect"; }
allow_closes "$ups"
nvmf_connect "$ADDR" "$PORT" "$NQN"
connected=1
dd if="$NVMF_DEV" of="$TMP/keep.back" bs=1M skip=200 count=1 iflag=direct status=none ||
	fail "dd from $NVMF_DEV failed"
cmp "$TMP/keep" "$TMP/keep.back" || fail "the 1 MiB written at 200 MiB is not there after the reconnect"
kill "$WD_PID"
wait "$WD_PID" 2>/dev/null
WD_PID=
[ ! -s "$TMP/watchdog.err" ] || fail "$(head -1 "$TMP/watchdog.err")"
nvmf_disconnect "$NQN"
connected=0
ok "1 MiB at 200 MiB written, read back the same after a reconnect"

kill -TERM "$TGT_PID"
for _ in $(seq 600); do
	kill -0 "$TGT_PID" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$TGT_PID" 2>/dev/null && { cat "$LOG"; fail "pollcore-nvmf still runs 60 s after SIGTERM"; }
rc=0
wait "$TGT_PID" || rc=$?
TGT_PID=
[ "$rc" = 0 ] || { cat "$LOG"; fail "pollcore-nvmf exited $rc after SIGTERM"; }
grep -q '^pollcore-nvmf: stopped$' "$LOG" || { cat "$LOG"; fail "pollcore-nvmf: no 'stopped' line"; }

# said once, for the queues of both connections: what failed, why, and what it does instead
said="^pollcore-nvmf: worker 0: namespace 1: cannot register its $RAM bytes: .*ibv_reg_mr\\($RAM bytes, .*\\): Cannot allocate memory; its reads are copied through staging buffers\$"
[ "$(grep -Ec "$said" "$LOG")" = 1 ] ||
	{ cat "$LOG"; fail "the target did not say exactly once that it falls back to staging buffers"; }
[ "$(grep -Ec '^pollcore-nvmf: worker [0-9]+: namespace ' "$LOG")" = 1 ] ||
	{ cat "$LOG"; fail "another namespace line: a backend operation failed"; }
queues=$(grep -Ec '^pollcore-nvmf: rxe[0-9]+ qp 0x[0-9a-f]+: queue [0-9]+ .* connected on worker 0$' "$LOG")
[ "$queues" -ge 4 ] || { cat "$LOG"; fail "$queues queues connected, expected at least 4 (two connections)"; }
grep -E '^pollcore-nvmf: worker 0: queues ' "$LOG" >"$TMP/counters" || { cat "$LOG"; fail "no counters"; }
for c in xfer_errors io_errors cqe_lost; do
	grep -q " $c 0 " "$TMP/counters" || { cat "$LOG"; fail "counter $c is not 0: $(cat "$TMP/counters")"; }
done
reads=$(sed -E 's/.* reads ([0-9]+) .*/\1/' "$TMP/counters")
in_place=$(sed -E 's/.* ([0-9]+) in place\).*/\1/' "$TMP/counters")
[ "$reads" -ge 100 ] && [ "$in_place" = 0 ] ||
	{ cat "$LOG"; fail "reads $reads, $in_place of them in place (want >= 100, none)"; }
ok "SIGTERM: exit 0; said once for $queues queues that the namespace's reads go through staging buffers; reads $reads, none in place, no failed transfer or lost completion"
echo "PASS: test_nvmf_ram_fallback"
