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
#   nvnetem the same target, the host connected again with --ctrl-loss-tmo
#           and --reconnect-delay: fio randrw 4 KiB at iodepth 32 with crc32c
#           verify over 8 MiB while b's eth0 is under netem (0.5% loss,
#           reordering): every block written reads back verified (a queue
#           closed meanwhile, the host reconnects and requeues: the dmesg
#           lines and the target's reasons are printed), netem dropped
#           packets and b's rxe retried.
#   nvcrash a file namespace (on a's /dev/shm), the host connected with
#           --ctrl-loss-tmo and --reconnect-delay: fio writes a region with
#           verify data, nvme flush; then fio writes and verifies another
#           region while a SIGKILLs the target and starts it again on the
#           same file, NQN, address and port. The host reconnects by itself
#           (dmesg: "Successfully reconnected"; the controller live again,
#           the same device), the I/O in flight at the kill completes and
#           verifies (the host requeued it), and the flushed region reads
#           back intact (fio --verify_only). If the host has not reconnected
#           within 60 s (nv_wait_io then deletes the controller) and rping
#           cannot connect either, the wire is what failed (see the crash
#           phase of test_twohost.sh): the I/O then fails with EIO, never a
#           verify error, and the phase says so.
#   nvflap  last, on the same connection: fio randrw with crc32c verify on
#           another region while b's eth0 goes down for 2 s: the controller
#           survives or the host reconnects by itself (dmesg), and every block
#           reads back verified; if the host has not reconnected within 60 s
#           and rping cannot connect either, that is rxe after a flap
#           (docs/reliability.md): the I/O fails with EIO, never a verify
#           error.
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
	nvnetem_b
	touch "$DIR/b.nvmf.done"
	[ "$URING" = uring ] || return 0
	nvcrash_b
}

# nv_fio_bg NAME FIO-ARGS...: fio in the background (IO_PID), its JSON in
# TMP/NAME.json; nv_fio_wait NAME then gives its exit status. Not nvmf_fio:
# its fail() in a subshell would fail the side for an outcome the caller
# judges itself (EIO when the wire is gone).
nv_fio_bg() {
	local name=$1
	shift
	timeout "${NV_TIMEOUT:-600}" fio --output-format=json --output="$TMP/$name.json" "$@" >"$TMP/$name.out" 2>&1 &
	IO_PID=$!
}

# nv_started DEV W0: until DEV has completed 256 writes more than W0
# (60 s at most); false if fio (IO_PID) ended before.
nv_started() {
	for _ in $(seq 600); do
		[ "$(nvmf_writes "$1")" -ge $(($2 + 256)) ] && break
		kill -0 "$IO_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	kill -0 "$IO_PID" 2>/dev/null
}

# nv_wait_io CTRL PHASE: waits for fio (IO_PID); its exit status in IO_RC.
# The host gives a controller up after a count of attempts, not a time
# (--ctrl-loss-tmo / --reconnect-delay), and on rxe an attempt whose CM
# request goes unanswered takes about 100 s: so once CTRL has not been live
# for NV_CRASH_LOSS_TMO s in a row, nv_oracle asks rping and deletes the
# controller, which ends its I/O with EIO.
nv_wait_io() {
	local ctrl=$1 phase=$2 since=$SECONDS st
	IO_RC=0
	while kill -0 "$IO_PID" 2>/dev/null; do
		st=$(cat "/sys/class/nvme/$ctrl/state" 2>/dev/null || echo gone)
		[ "$st" = live ] && since=$SECONDS
		if [ $((SECONDS - since)) -ge $NV_CRASH_LOSS_TMO ]; then
			echo "$ctrl $st for ${NV_CRASH_LOSS_TMO} s at $(date +%T): deleted" >"$DIR/b.$phase.gaveup"
			nv_oracle "$phase"
			break
		fi
		sleep 0.5
	done
	wait "$IO_PID" || IO_RC=$?
}

# nv_oracle PHASE: once per phase, after its I/O failed or stalled: the
# wire's state, whether rdma-core's own rping still connects
# (b.PHASE_rping.rc), then the controller deleted (an attempt under way
# ends first: up to about 100 s).
nv_oracle() {
	[ -e "$DIR/b.$1_rping.rc" ] && return 0
	netdiag "$1.failed"
	timeout 60 rping -c -a "$PC_PAIR_PEER_ADDR" -p 7472 -C 3 >"$DIR/b.$1_rping.out" 2>&1
	echo $? >"$DIR/b.$1_rping.rc"
	timeout 200 nvme disconnect -n $NV_NQN >/dev/null 2>&1
}

# nv_dmesg CTRL LINES0 FILE: what the kernel said of controller CTRL since
# dmesg had LINES0 lines.
nv_dmesg() {
	dmesg | tail -n +$(($2 + 1)) | grep -F "nvme $1:" >"$3"
}

nvnetem_b() {
	local ctrl lines0 rc=0
	nvmf_connect "$PC_PAIR_PEER_ADDR" $NV_PORT $NV_NQN --keep-alive-tmo=30 \
		--ctrl-loss-tmo=$NV_CRASH_LOSS_TMO --reconnect-delay=1
	ctrl=$(nvmf_ctrl_of $NV_NQN)
	lines0=$(dmesg | wc -l)
	netem_on
	snap nvnetem.before
	NV_TIMEOUT=300 nv_fio_bg nvnetem --filename="$NVMF_DEV" --ioengine=libaio --direct=1 --name=randrw \
		--rw=randrw --bs=4k --iodepth=32 --size=8M --randseed=11 --verify=crc32c \
		--verify_fatal=1 --verify_state_save=0 --do_verify=1
	wait "$IO_PID" || rc=$?
	snap nvnetem.after
	netem_off nvnetem
	nv_dmesg "$ctrl" "$lines0" "$TMP/nvnetem.dmesg"
	dmesg | tail -n +$((lines0 + 1)) >"$DIR/b.nvnetem.dmesg"
	[ "$rc" = 0 ] || fail "b: nvnetem: fio exited $rc: $(tail -n 3 "$TMP/nvnetem.out"); the kernel: $(grep -v 'rdma_rxe\|rxe0' "$DIR/b.nvnetem.dmesg" | tail -n 8)"
	jq -e '[.jobs[] | select(.error != 0)] | length == 0' "$TMP/nvnetem.json" >/dev/null ||
		fail "b: nvnetem: fio reports an error: $(jq -c '[.jobs[] | .error]' "$TMP/nvnetem.json")"
	# randrw covers the 8 MiB once (fio's random map): what it read plus
	# what it wrote, and the verify reads back every block written
	jq -e '.jobs[0] | .read.io_bytes == 8388608 and .write.io_bytes > 0 and
		.write.io_bytes < 8388608' "$TMP/nvnetem.json" >/dev/null ||
		fail "b: nvnetem: fio moved $(jq -c '.jobs[0] | {r: .read.io_bytes, w: .write.io_bytes}' "$TMP/nvnetem.json"), expected 8 MiB read (randrw and verify) and some written"
	nv_ok "nvnetem: fio randrw 4 KiB iodepth 32 under netem, crc32c verify: $(jq -r '.jobs[0].write.io_bytes / 4096' "$TMP/nvnetem.json") blocks written, every one read back verified; controller $ctrl $(grep -c 'Successfully reconnected' "$TMP/nvnetem.dmesg") reconnects"
	nvmf_disconnect $NV_NQN
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
	nv_fio_bg nvcrash_io "${v[@]}" --name=inflight --offset=8M --size=16M --randseed=9 --do_verify=1
	io_pid=$IO_PID
	nv_started "$NVMF_DEV" "$w0" || fail "b: fio ended before the kill: $(tail -n 5 "$TMP/nvcrash_io.out")"
	touch "$DIR/b.nvcrash.running"
	await "$DIR/a.nvcrash.restarted" 300 || fail "b: a's target did not restart"
	# still running: the kill met its I/O (a kill after its end leaves it done)
	kill -0 "$io_pid" 2>/dev/null || echo "fio had ended when the target was back" >"$DIR/b.nvcrash.early"
	nv_wait_io "$ctrl" nvcrash
	rc=$IO_RC
	echo "$rc" >"$DIR/b.nvcrash.io.rc"
	# what the kernel said of this controller since the kill
	nv_dmesg "$ctrl" "$lines0" "$TMP/dmesg.out"
	st=$(cat "/sys/class/nvme/$ctrl/state" 2>/dev/null || echo gone)
	echo "$st" >"$DIR/b.nvcrash.state"
	if [ "$rc" != 0 ]; then
		# the oracle, as in the crash and flap phases: can rdma-core's own rping connect?
		nv_oracle nvcrash
		[ "$(cat "$DIR/b.nvcrash_rping.rc")" = 0 ] ||
			touch "$DIR/b.wire_broken" "$DIR/b.nvcrash.wire_broken"
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
	# the check can fail: the 4 MiB after it were never written, and fail it
	if timeout 300 fio --output-format=json --output="$TMP/nvcrash_neg.json" "${v[@]}" --name=never \
		--offset=4M --size=4M --randseed=7 --verify_only=1 >"$TMP/nvcrash_neg.out" 2>&1; then
		fail "b: nvcrash: fio --verify_only passed on a region never written: the check cannot fail"
	fi
	nv_ok "nvcrash: the flushed 4 MiB read back intact after the restart (fio --verify_only, crc32c, 1024 blocks; the same check fails on the 4 MiB never written)"
	nvflap_b "$ctrl" "${v[@]}"
	touch "$DIR/b.nvcrash.done"
}

# nvflap_b CTRL FIO-ARGS...: last (on rxe a flap may leave the device unable
# to connect), on the nvcrash connection: eth0 down for 2 s under fio randrw
# with verify.
nvflap_b() {
	local ctrl=$1 w0 lines0 rc=0
	shift
	snap nvflap.before
	w0=$(nvmf_writes "$NVMF_DEV")
	lines0=$(dmesg | wc -l)
	nv_fio_bg nvflap "$@" --name=flap --rw=randrw --offset=32M --size=24M --randseed=13 --do_verify=1
	nv_started "$NVMF_DEV" "$w0" || fail "b: nvflap: fio ended before the flap: $(tail -n 5 "$TMP/nvflap.out")"
	ip link set eth0 down
	sleep 2
	ip link set eth0 up
	echo "eth0 down for 2 s at $(date +%T)" >"$DIR/b.nvflap.link"
	nv_wait_io "$ctrl" nvflap
	rc=$IO_RC
	echo "$rc" >"$DIR/b.nvflap.io.rc"
	snap nvflap.after
	nv_dmesg "$ctrl" "$lines0" "$TMP/nvflap.dmesg"
	cat "/sys/class/nvme/$ctrl/state" >"$DIR/b.nvflap.state" 2>/dev/null || echo gone >"$DIR/b.nvflap.state"
	if [ "$rc" != 0 ]; then
		nv_oracle nvflap
		return 0
	fi
	jq -e '.jobs[0] | .error == 0 and .read.io_bytes == 25165824 and .write.io_bytes > 0' \
		"$TMP/nvflap.json" >/dev/null ||
		fail "b: nvflap: fio moved $(jq -c '.jobs[0] | {e: .error, r: .read.io_bytes, w: .write.io_bytes}' "$TMP/nvflap.json"), expected 24 MiB read (randrw and verify)"
	[ "$(< "$DIR/b.nvflap.state")" = live ] || fail "b: nvflap: controller $ctrl is $(< "$DIR/b.nvflap.state") after the I/O"
	nv_ok "nvflap: $(< "$DIR/b.nvflap.link") under fio randrw with crc32c verify: $(jq -r '.jobs[0].write.io_bytes / 4096' "$TMP/nvflap.json") blocks written, every one read back verified; controller $ctrl live, $(grep -c 'Successfully reconnected' "$TMP/nvflap.dmesg") reconnects$(grep -m1 -o 'starting error recovery\|Reconnecting in.*' "$TMP/nvflap.dmesg" | sed 's/^/ (/;s/$/)/')"
	nvmf_disconnect $NV_NQN
}

# --- on the host ------------------------------------------------------------------------
# nv_counters LOG [COUNTER...]: the last counters line of a pollcore-nvmf log
# has no failed transfer or backend operation and no lost completion (or
# only these COUNTERs: a link flap may fail transfers in flight).
nv_counters() {
	local c line log=$1
	shift
	line=$(grep -E '^pollcore-nvmf: worker 0: queues ' "$log" | tail -n 1)
	[ -n "$line" ] || { show; fail "$log: no counters line"; }
	for c in xfer_errors io_errors cqe_lost; do
		[[ " $* " == *" $c "* ]] && continue
		[[ "$line" == *" $c 0 "* ]] || { show; fail "${log##*/}: $c is not 0: $line"; }
	done
	! grep -Eq '^pollcore-nvmf: worker [0-9]+: namespace ' "$log" ||
		{ show; fail "${log##*/}: a backend operation failed"; }
}

# nv_fig JOB [RUN]: IOPS MiB/s p50 p99 (ms) of a job of the figures run (or of RUN).
nv_fig() {
	local side=read
	[ "$1" = randread ] || side="write"
	jq -r --arg j "$1" --arg s "$side" '.jobs[] | select(.jobname == $j) | .[$s] |
		"\(.iops) \(.bw) \(.clat_ns.percentile["50.000000"]) \(.clat_ns.percentile["99.000000"])"' \
		"$DIR/b.nvmf/${2:-figures}.json" |
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
	nvnetem_check
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
	grep '^ok: nvcrash:' "$DIR/b.nvmf.ok"
	echo "ok: nvcrash: the restarted target served the reconnected queues; SIGTERM: exit 0"
	nvflap_check
}

nvnetem_check() {
	local dropped retries=0 v
	grep '^ok: nvnetem:' "$DIR/b.nvmf.ok" || { show; fail "nvnetem: b did not finish the phase"; }
	grep -q "netem.*loss 0.5%" "$DIR/b.nvnetem.qdisc" || fail "nvnetem: netem was not on b's eth0"
	dropped=$(grep -o 'dropped [0-9]*' "$DIR/b.nvnetem.qdisc" | head -1 | grep -o '[0-9]*')
	[ "${dropped:-0}" -gt 0 ] || fail "nvnetem: netem dropped no packet; the phase proved nothing"
	for v in duplicate_request out_of_seq_request rcvd_seq_err completer_retry_err; do
		retries=$((retries + $(delta b nvnetem "$v")))
	done
	[ "$retries" -gt 0 ] || fail "nvnetem: netem dropped $dropped packets but b's rxe counted no retry"
	echo "ok: nvnetem: netem dropped $dropped packets, b's rxe retry counters +$retries"
	grep -E 'no send completed|closed after|: queue [0-9]+ .*closed' "$DIR/a.nvmf.server.out" | sed 's/^/    a: /' | head -n 10
	sed 's/^/    b: /' "$DIR/b.nvmf/nvnetem.dmesg" | head -n 10
}

nvflap_check() {
	if [ "$(rc_of "$DIR/b.nvflap.io.rc")" = 0 ]; then
		grep '^ok: nvflap:' "$DIR/b.nvmf.ok" || { show; fail "nvflap: b did not finish the phase"; }
		# transfers in flight when the link went down may have failed: only theirs
		nv_counters "$DIR/a.nvcrash.restart.out" xfer_errors
		echo "ok: nvflap: the restarted target's SIGTERM counters: no failed backend operation, no lost completion"
	else
		# pollcore's promise: nothing read was wrong; whether a new connection can be
		# made after a flap is the device's, and rping is the oracle
		[ -s "$DIR/b.nvflap.link" ] || { show; fail "nvflap: fio failed before the flap"; }
		jq -e '.jobs[0].error == 5' "$DIR/b.nvmf/nvflap.json" >/dev/null ||
			{ show; fail "nvflap: fio failed (exit $(rc_of "$DIR/b.nvflap.io.rc")), not with EIO"; }
		! grep -qi 'verify' "$DIR/b.nvmf/nvflap.out" || { show; fail "nvflap: fio reports a verify error"; }
		[ "$(rc_of "$DIR/b.nvflap_rping.rc")" != 0 ] ||
			{ show; fail "nvflap: the host did not reconnect in ${NV_CRASH_LOSS_TMO} s, but rping then could connect"; }
		echo "ok (rxe limit): nvflap: $(< "$DIR/b.nvflap.link"): the host could not reconnect in" \
			"${NV_CRASH_LOSS_TMO} s and neither could rping: rxe (kernel 6.1) after a flap under" \
			"traffic (docs/reliability.md); the I/O failed with EIO, no verify error"
		sed 's/^/    b: /' "$DIR/b.nvmf/nvflap.dmesg" | head -n 10
	fi
}
