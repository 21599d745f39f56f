# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Sourced by tests/test_twohost.sh: its NVMe-oF phases, pollcore-nvmf on VM
# a and the Linux kernel's initiator (nvme-cli, fio; tests/nvmf_lib.sh) on
# VM b, across the wire.
#
#   nvmf    a RAM namespace of 64 MiB: nvme discover lists it, nvme connect
#           gives a device that nvme list shows, of exactly that size; fio
#           writes at random and reads back with crc32c verification (4 KiB
#           and 128 KiB, iodepth 32; every byte checked twice and counted);
#           fio randread and randwrite 4 KiB at iodepth 32 for the figures;
#           nvme disconnect removes one controller; SIGTERM: exit 0, no
#           failed transfer or backend operation, no lost completion.
#   nvcrash a file namespace (on a's /dev/shm), the host connected with
#           --ctrl-loss-tmo and --reconnect-delay: fio writes a region with
#           verify data, nvme flush; then fio writes and verifies another
#           region while a SIGKILLs the target and starts it again on the
#           same file, NQN, address and port. The host reconnects by itself
#           (dmesg: "Successfully reconnected"; the controller live again,
#           the same device), the I/O in flight at the kill completes and
#           verifies (the host requeued it), and the flushed region reads
#           back intact (fio --verify_only). If the host cannot reconnect and
#           rping cannot connect either, the wire is what failed (see the
#           crash phase of test_twohost.sh): the I/O then fails with EIO, never
#           a verify error, and the phase says so.
# Side functions run in the VMs (nvmf_side_a, nvmf_side_b), nvmf_check on the host.

NV_NQN=nqn.2026-12.io.pollcore:twohost
NV_PORT=4420
NV_SIZE=$((64 << 20))
NV_CRASH_LOSS_TMO=60 # s: the host gives the controller up after this

# --- VM a: the target --------------------------------------------------------------------
nvmf_side_a() {
	serve nvmf "$NVMF" --addr "$PC_TEST_ADDR" --port $NV_PORT --nqn $NV_NQN --ram 64m --no-numa
	[ "$URING" = uring ] || return 0

	# nvcrash: rping's server is the oracle for "can this wire still connect"
	rping -s -a "$PC_TEST_ADDR" -p 7472 -P >"$DIR/a.nvcrash_rping.out" 2>&1 &
	RPING_PID=$!
	# the VM's own tmpfs: no O_DIRECT, so the page cache (which the kill leaves
	# to the kernel, as it would a disk's contents)
	truncate -s 64M /dev/shm/nvcrash.img
	local tgt=("$NVMF" --addr "$PC_TEST_ADDR" --port "$NV_PORT" --nqn "$NV_NQN"
		--file /dev/shm/nvcrash.img --bs 4096 --no-numa)
	start_srv nvcrash "${tgt[@]}"
	netdiag nvcrash.before_kill
	touch "$DIR/a.nvcrash.listening"
	await "$DIR/b.nvcrash.running" 600 || fail "a: b's I/O for the kill did not start"
	kill -KILL "$SRV_PID"
	wait "$SRV_PID" 2>/dev/null
	echo "--- SIGKILLed at $(date +%T.%N)" >>"$DIR/a.nvcrash.server.out"
	start_srv nvcrash "${tgt[@]}"
	touch "$DIR/a.nvcrash.restarted"
	await "$DIR/b.nvcrash.done" 900 || fail "a: b did not finish its nvcrash phase"
	netdiag nvcrash.done
	stop_srv nvcrash
	kill "$RPING_PID" 2>/dev/null
	wait "$RPING_PID" 2>/dev/null
}

# --- VM b: the kernel's initiator ---------------------------------------------------------
# nv_ok MESSAGE: a line of the phase's outcome, which the host prints.
nv_ok() { echo "ok: $*" >>"$DIR/b.nvmf.ok"; }

nvmf_side_b() {
	TMP=$DIR/b.nvmf
	mkdir -p "$TMP"
	nvmf_need_initiator
	await "$DIR/a.nvmf.listening" 300 || fail "b: a's pollcore-nvmf is not listening"
	nvmf_discover "$PC_PAIR_PEER_ADDR" $NV_PORT $NV_NQN
	# keep-alive 30 s, not the kernel's 5: b has one vCPU under TCG, and during
	# fio at iodepth 32 more than 5 s have passed without a Keep Alive from it
	# while the target kept serving its I/O; the target then expires the
	# controller, as it must, and fio hangs in the host's reconnects
	nvmf_connect "$PC_PAIR_PEER_ADDR" $NV_PORT $NV_NQN --keep-alive-tmo=30
	nvmf_listed "$NVMF_DEV"
	nvmf_check_size "$NVMF_DEV" $NV_SIZE
	nv_ok "nvmf: nvme discover lists $NV_NQN; nvme connect: $NVMF_DEV, in nvme list, $NV_SIZE bytes"
	nvmf_fio_verify "$NVMF_DEV" "4096 32 512" "131072 32 32"
	nv_ok "nvmf: fio crc32c verify, 4 KiB and 128 KiB at iodepth 32 (2 and 4 MiB), every byte checked twice and counted"
	# the figures: one fio process, the jobs one after the other
	nvmf_fio figures --filename="$NVMF_DEV" --ioengine=libaio --direct=1 --bs=4k --iodepth=32 \
		--size=$NV_SIZE --time_based --runtime=5 --norandommap --randrepeat=0 \
		--name=randread --rw=randread --name=randwrite --stonewall --rw=randwrite
	nvmf_disconnect $NV_NQN
	nv_ok "nvmf: nvme disconnect: 1 controller, its device gone"
	touch "$DIR/b.nvmf.done"
	[ "$URING" = uring ] || return 0
	nvcrash_b
}

nvcrash_b() {
	local ctrl cntlid0 cntlid1 w0 io_pid rc=0 v st lines0
	await "$DIR/a.nvcrash.listening" 300 || fail "b: a's nvcrash target is not listening"
	netdiag nvcrash.start
	nvmf_connect "$PC_PAIR_PEER_ADDR" $NV_PORT $NV_NQN \
		--ctrl-loss-tmo=$NV_CRASH_LOSS_TMO --reconnect-delay=1
	ctrl=$(nvmf_ctrl_of $NV_NQN)
	[ -n "$ctrl" ] || fail "b: no controller of $NV_NQN in /sys/class/nvme"
	cntlid0=$(< "/sys/class/nvme/$ctrl/cntlid")
	# fio's verify data in the first 4 MiB, then flushed
	v=(--filename="$NVMF_DEV" --ioengine=libaio --direct=1 --bs=4k --iodepth=32 --rw=randwrite
		--verify=crc32c --verify_state_save=0 --verify_fatal=1)
	local flushed=(--name=flushed --offset=0 --size=4M --randseed=7)
	nvmf_fio nvcrash_w "${v[@]}" "${flushed[@]}" --do_verify=0
	jq -e '.jobs[0].write.io_bytes == 4194304' "$TMP/nvcrash_w.json" >/dev/null ||
		fail "b: nvcrash: fio wrote $(jq '.jobs[0].write.io_bytes' "$TMP/nvcrash_w.json") bytes, expected 4 MiB"
	timeout 60 nvme flush "$NVMF_DEV" -n 1 >"$TMP/flush.out" 2>&1 ||
		fail "b: nvme flush $NVMF_DEV: $(< "$TMP/flush.out")"
	nv_ok "nvcrash: 4 MiB written with fio's verify data (crc32c); nvme flush"

	# the I/O that the kill meets: 32 writes in flight, then a read-back of all
	w0=$(nvmf_writes "$NVMF_DEV")
	lines0=$(dmesg | wc -l)
	(nvmf_fio nvcrash_io "${v[@]}" --name=inflight --offset=8M --size=16M --randseed=9 --do_verify=1) &
	io_pid=$!
	for _ in $(seq 1200); do
		[ "$(nvmf_writes "$NVMF_DEV")" -ge $((w0 + 256)) ] && break
		kill -0 "$io_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$io_pid" 2>/dev/null || fail "b: fio ended before the kill (exit status below)"
	touch "$DIR/b.nvcrash.running"
	await "$DIR/a.nvcrash.restarted" 300 || fail "b: a's target did not restart"
	# still running: the kill met its I/O (a kill after its end leaves it done)
	kill -0 "$io_pid" 2>/dev/null || echo "fio had ended when the target was back" >"$DIR/b.nvcrash.early"
	wait "$io_pid" || rc=$?
	echo "$rc" >"$DIR/b.nvcrash.io.rc"
	# what the kernel said of this controller since the kill
	dmesg | tail -n +$((lines0 + 1)) | grep -F "nvme $ctrl:" >"$TMP/dmesg.out"
	st=$(cat "/sys/class/nvme/$ctrl/state" 2>/dev/null || echo gone)
	echo "$st" >"$DIR/b.nvcrash.state"
	if [ "$rc" != 0 ]; then
		netdiag nvcrash.failed
		# the oracle, as in the crash and flap phases: can rdma-core's own rping connect?
		timeout 60 rping -c -a "$PC_PAIR_PEER_ADDR" -p 7472 -C 3 >"$DIR/b.nvcrash_rping.out" 2>&1
		echo $? >"$DIR/b.nvcrash_rping.rc"
		[ "$(cat "$DIR/b.nvcrash_rping.rc")" = 0 ] ||
			touch "$DIR/b.wire_broken" "$DIR/b.nvcrash.wire_broken"
		timeout 60 nvme disconnect -n $NV_NQN >/dev/null 2>&1
		touch "$DIR/b.nvcrash.done"
		return 0
	fi
	[ ! -e "$DIR/b.nvcrash.early" ] || fail "b: nvcrash: $(< "$DIR/b.nvcrash.early"): the kill met no I/O"
	[ "$st" = live ] || fail "b: nvcrash: controller $ctrl is $st after the I/O, not live"
	grep -q "Successfully reconnected" "$TMP/dmesg.out" ||
		fail "b: nvcrash: the kernel did not say it reconnected $ctrl: $(tail -n 5 "$TMP/dmesg.out")"
	[ "$(nvmf_find_dev $NV_NQN)" = "$NVMF_DEV" ] || fail "b: nvcrash: the namespace is no longer $NVMF_DEV"
	jq -e '.jobs[0] | .write.io_bytes == 16777216 and .read.io_bytes == 16777216' \
		"$TMP/nvcrash_io.json" >/dev/null ||
		fail "b: nvcrash: the in-flight job moved $(jq -c '.jobs[0] | {w: .write.io_bytes, r: .read.io_bytes}' "$TMP/nvcrash_io.json") bytes, expected 16 MiB written and read back"
	cntlid1=$(< "/sys/class/nvme/$ctrl/cntlid")
	nv_ok "nvcrash: a SIGKILLed and restarted the target under 32 writes in flight; $ctrl reconnected by itself ($(grep -o 'Successfully reconnected.*' "$TMP/dmesg.out" | tail -1); cntlid $cntlid0 -> $cntlid1, state live, still $NVMF_DEV); every write of the 16 MiB job completed and read back verified"
	nvmf_fio nvcrash_v "${v[@]}" "${flushed[@]}" --verify_only=1
	jq -e '.jobs[0].read.io_bytes == 4194304' "$TMP/nvcrash_v.json" >/dev/null ||
		fail "b: nvcrash: fio --verify_only read $(jq '.jobs[0].read.io_bytes' "$TMP/nvcrash_v.json") bytes, expected 4 MiB"
	nv_ok "nvcrash: the flushed 4 MiB read back intact after the restart (fio --verify_only, crc32c, 1024 blocks)"
	nvmf_disconnect $NV_NQN
	touch "$DIR/b.nvcrash.done"
}

# --- on the host ------------------------------------------------------------------------
# nv_counters LOG: the last counters line of a pollcore-nvmf log has no failed
# transfer or backend operation and no lost completion.
nv_counters() {
	local c line
	line=$(grep -E '^pollcore-nvmf: worker 0: queues ' "$1" | tail -n 1)
	[ -n "$line" ] || { show; fail "$1: no counters line"; }
	for c in xfer_errors io_errors cqe_lost; do
		[[ "$line" == *" $c 0 "* ]] || { show; fail "${1##*/}: $c is not 0: $line"; }
	done
	! grep -Eq '^pollcore-nvmf: worker [0-9]+: namespace ' "$1" ||
		{ show; fail "${1##*/}: a backend operation failed"; }
}

# nv_fig JOB: IOPS MiB/s p50 p99 (ms) of a job of the figures run.
nv_fig() {
	local side=read
	[ "$1" = randwrite ] && side="write"
	jq -r --arg j "$1" --arg s "$side" '.jobs[] | select(.jobname == $j) | .[$s] |
		"\(.iops) \(.bw) \(.clat_ns.percentile["50.000000"]) \(.clat_ns.percentile["99.000000"])"' \
		"$DIR/b.nvmf/figures.json" |
		awk '{printf "%8d %8.2f %8.1f %8.1f", $1, $2 / 1024, $3 / 1e6, $4 / 1e6}'
}

nvmf_check() {
	[ -e "$DIR/b.nvmf.done" ] || { show; fail "nvmf: b did not finish the phase"; }
	srv_ok nvmf
	nv_counters "$DIR/a.nvmf.server.out"
	grep -q "queue 0 of controller [0-9]* closed" "$DIR/a.nvmf.server.out" ||
		{ show; fail "nvmf: the target saw no admin queue close"; }
	grep '^ok: nvmf:' "$DIR/b.nvmf.ok"
	echo "ok: nvmf: SIGTERM: exit 0; no failed transfer or backend operation, no lost completion"
	if [ "$URING" != uring ]; then
		echo "SKIP (part): nvcrash: pollcore-nvmf was built without liburing (no file namespace)"
		return 0
	fi
	srv_ok nvcrash
	if [ -e "$DIR/b.nvcrash.wire_broken" ]; then
		# What this test cannot promise: that rxe and the virtual wire still connect
		# after a target was killed with transfers in flight (as in the crash phase).
		# What it still checks: the host gave the controller up, the I/O failed with
		# EIO (an error, not wrong data), and rping could not connect either.
		jq -e '[.jobs[] | select(.error == 5)] | length == 1' "$DIR/b.nvmf/nvcrash_io.json" >/dev/null ||
			{ show; fail "nvcrash: the host could not reconnect, and the I/O did not fail with EIO"; }
		! grep -qi 'verify' "$DIR/b.nvmf/nvcrash_io.out" ||
			{ show; fail "nvcrash: fio reports a verify error"; }
		for f in "$DIR"/b.nvcrash.failed.net "$DIR"/a.nvcrash.done.net; do
			[ -s "$f" ] && { echo "--- ${f##*/}"; cat "$f"; }
		done
		echo "ok (wire limit): nvcrash: after the target was SIGKILLed and restarted, the host" \
			"could not reconnect in ${NV_CRASH_LOSS_TMO} s and rping could not connect either: the" \
			"wire or rxe, not pollcore (netdiag above); the I/O in flight failed with EIO, no" \
			"verify error; the flushed region could not be read back, and the flap is skipped"
		return 0
	fi
	[ "$(rc_of "$DIR/b.nvcrash.io.rc")" = 0 ] ||
		{ show; fail "nvcrash: the I/O across the kill failed (exit $(rc_of "$DIR/b.nvcrash.io.rc")), but rping could connect"; }
	[ -e "$DIR/b.nvcrash.done" ] || { show; fail "nvcrash: b did not finish the phase"; }
	# the restarted target served the host's reconnect: its admin and I/O queue
	sed -n '/^--- SIGKILLed/,$p' "$DIR/a.nvcrash.server.out" >"$DIR/a.nvcrash.restart.out"
	[ "$(grep -c ': queue [01] ([0-9]* entries) connected' "$DIR/a.nvcrash.restart.out")" -ge 2 ] ||
		{ show; fail "nvcrash: the restarted target did not see the host's queues connect"; }
	nv_counters "$DIR/a.nvcrash.restart.out"
	grep '^ok: nvcrash:' "$DIR/b.nvmf.ok"
	echo "ok: nvcrash: the restarted target served the reconnected queues; SIGTERM: exit 0, clean counters"
}
