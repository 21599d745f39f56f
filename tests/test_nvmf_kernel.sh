#!/bin/bash
# SPDX-License-Identifier: MIT
# interop suite: the Linux kernel's NVMe-oF/RDMA initiator against the
# kernel's own target (nvmet-rdma, tools/nvmf/kernel-target) on a 256 MiB
# memory-backed null_blk device: the baseline that pollcore-nvmf's tests
# repeat with pollcore's target.
#   usage: test_nvmf_kernel.sh path/to/tools/nvmf/kernel-target
#
# Everywhere: kernel-target's bad usage is refused with exit 2 (a few cases;
# each costs seconds in the VM).
# On the test bed (in the VM, tools/rxe-vm --modules
# nvme-rdma,nvmet-rdma,null_blk:nr_devices=0; run-tests starts it so): the
# target starts; nvme discover lists its NQN; nvme connect gives a device
# that nvme list shows, of exactly 256 MiB; fio writes at random and reads
# back with crc32c verification, block sizes 512 B, 4 KiB and 128 KiB at
# iodepths 1 and 32, every byte checked and counted; nvme disconnect removes
# exactly one controller; the target stops, twice (idempotent), leaving
# nothing in configfs. On a host without RDMA: exit 77.
set -u

TARGET=${1:?usage: test_nvmf_kernel.sh path/to/tools/nvmf/kernel-target}
. "$(dirname "$0")/testbed.sh"
. "$(dirname "$0")/nvmf_lib.sh"
# each step says when it ended, in seconds since the start
step() { ok "$* [${SECONDS} s]"; }
ADDR=$PC_TEST_ADDR
PORT=4420
NQN=nqn.2026-12.io.pollcore:test-kernel-target
SIZE=$((256 << 20))
TMP=$(mktemp -d)
started=0 connected=0
cleanup() {
	[ "$connected" = 0 ] || nvme disconnect -n "$NQN" >/dev/null 2>&1
	[ "$started" = 0 ] || "$TARGET" stop --nqn "$NQN" >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

# --- usage (no device needed) ------------------------------------------------------------
pc_usage_error "missing command: start or stop" "$TARGET"
pc_usage_error "--addr is required" "$TARGET" start --nqn "$NQN" --size 1M
pc_usage_error "--size: '1000K' is not a positive whole number of MiB" "$TARGET" start --addr "$ADDR" --nqn "$NQN" --size 1000K
pc_usage_error "stop takes only --nqn" "$TARGET" stop --size 1M
step "kernel-target usage errors: exit 2 with a message"

# --- the device ------------------------------------------------------------------------
pc_need_device
[ "$(id -u)" = 0 ] || fail "needs root (configfs, nvme connect)"
nvmf_need_initiator

"$TARGET" start --addr "$ADDR" --port "$PORT" --nqn "$NQN" --size 256M >"$TMP/target.out" 2>&1 ||
	fail "kernel-target start failed: $(< "$TMP/target.out")"
started=1
grep -q "^kernel-target: $NQN on rdma \[$ADDR\]:$PORT, namespace 1 = /dev/.* ($SIZE bytes)$" "$TMP/target.out" ||
	fail "kernel-target start said: $(< "$TMP/target.out")"
"$TARGET" start --addr "$ADDR" --port "$PORT" --nqn "$NQN" --size 256M >"$TMP/again.err" 2>&1 &&
	fail "a second start of $NQN succeeded"
grep -q "subsystem $NQN is exported already" "$TMP/again.err" || fail "second start: $(< "$TMP/again.err")"
step "$(< "$TMP/target.out")"

nvmf_discover "$ADDR" "$PORT" "$NQN"
step "nvme discover -t rdma -a $ADDR -s $PORT lists $NQN"

nvmf_connect "$ADDR" "$PORT" "$NQN"
connected=1
nvmf_listed "$NVMF_DEV"
nvmf_check_size "$NVMF_DEV" "$SIZE"
step "nvme connect: $NVMF_DEV, in nvme list, $SIZE bytes (block layer and id-ns)"

# BS DEPTH BLOCKS: a few seconds each under TCG
runs=("512 1 128" "512 32 512" "4096 1 128" "4096 32 512" "131072 1 16" "131072 32 64")
start=$SECONDS
nvmf_fio_verify "$NVMF_DEV" "${runs[@]}"
for run in "${runs[@]}"; do
	read -r bs depth n <<< "$run"
	step "fio bs $bs iodepth $depth: $n blocks ($((bs * n)) bytes) written, verified, read again and verified"
done
step "fio: ${#runs[@]} runs in $((SECONDS - start)) s"

nvmf_disconnect "$NQN"
connected=0
step "nvme disconnect -n $NQN: 1 controller, device gone"

"$TARGET" stop --nqn "$NQN" >"$TMP/stop.out" 2>&1 || fail "kernel-target stop failed: $(< "$TMP/stop.out")"
started=0
"$TARGET" stop --nqn "$NQN" >"$TMP/stop2.out" 2>&1 || fail "a second kernel-target stop failed: $(< "$TMP/stop2.out")"
[ ! -e "/sys/kernel/config/nvmet/subsystems/$NQN" ] || fail "the subsystem is still in configfs after stop"
for p in /sys/kernel/config/nvmet/ports/*/; do
	[ -d "$p" ] || continue
	[ "$(< "$p/addr_traddr")" != "$ADDR" ] || [ "$(< "$p/addr_trsvcid")" != "$PORT" ] ||
		fail "port $p ($ADDR $PORT) is still in configfs after stop"
done
[ -z "$(ls -d /sys/kernel/config/nullb/pcnvmf-* 2>/dev/null)" ] || fail "a null_blk device left after stop"
step "kernel-target stop, twice: nothing left in configfs"
echo "PASS"
