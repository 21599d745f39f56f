# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Sourced by the NVMe-oF tests after tests/testbed.sh (which gives fail, ok
# and $TMP): the Linux kernel's NVMe-oF/RDMA initiator (nvme-cli) against a
# target, whichever it is (the kernel's nvmet-rdma through
# tools/nvmf/kernel-target, or pollcore-nvmf), and fio's verified I/O on the
# namespace it gives.
#
#   nvmf_need_initiator              nvme-cli, fio, jq, module nvme-rdma
#   nvmf_discover ADDR PORT NQN      the discovery log lists NQN over rdma
#   nvmf_connect ADDR PORT NQN [OPT...]
#                                    connects (OPT: more nvme connect options);
#                                    sets NVMF_DEV (/dev/nvmeXnY)
#   nvmf_find_dev NQN                prints the namespace's block device
#   nvmf_ctrl_of NQN                 prints its controller (nvmeX)
#   nvmf_writes DEV                  writes completed on DEV, paths included
#   nvmf_listed DEV                  nvme list shows DEV
#   nvmf_check_size DEV BYTES        DEV is BYTES long (block layer, id-ns)
#   nvmf_fio_verify DEV "BS DEPTH N"...
#                                    per run, N blocks of BS written at random,
#                                    then read back at random, crc32c-verified
#   nvmf_fio NAME ARGS...            fio, JSON in $TMP/NAME.json, no errors
#   nvmf_disconnect NQN              exactly one controller disconnected,
#                                    and its device gone
#
# Each fails the test (fail MESSAGE) when what it checks does not hold. Logs
# go to $TMP as *.out and *.json, which fail prints.

# nvmf_need_initiator: the tools and the host-side module are here.
nvmf_need_initiator() {
	local t
	for t in nvme fio jq timeout blockdev; do
		command -v "$t" >/dev/null || fail "$t is not installed (tools/setup installs nvme-cli, fio and jq)"
	done
	[ -s /etc/nvme/hostnqn ] || fail "/etc/nvme/hostnqn is missing (tools/setup writes it)"
	if [ ! -d /sys/module/nvme_rdma ]; then
		[ "${PC_IN_VM:-}" = 1 ] || modprobe nvme-rdma 2>/dev/null ||
			fail "module nvme-rdma is not loaded (in the VM: tools/rxe-vm --modules nvme-rdma,nvmet-rdma,null_blk:nr_devices=0)"
		[ -d /sys/module/nvme_rdma ] ||
			fail "module nvme-rdma is not loaded (in the VM: tools/rxe-vm --modules nvme-rdma,nvmet-rdma,null_blk:nr_devices=0)"
	fi
	[ -c /dev/nvme-fabrics ] || fail "/dev/nvme-fabrics is missing (module nvme-fabrics)"
}

# nvmf_discover ADDR PORT NQN: the discovery log at ADDR PORT has NQN, over
# rdma, at that address and port.
nvmf_discover() {
	local addr=$1 port=$2 nqn=$3 n
	timeout 60 nvme discover -t rdma -a "$addr" -s "$port" -o json >"$TMP/discover.json" 2>"$TMP/discover.err" ||
		fail "nvme discover -t rdma -a $addr -s $port failed (exit $?)"
	n=$(jq --arg n "$nqn" --arg p "$port" \
		'[.records[] | select(.subnqn == $n and .trtype == "rdma" and .trsvcid == $p)] | length' \
		"$TMP/discover.json") || fail "nvme discover: unreadable JSON"
	[ "$n" = 1 ] || fail "nvme discover lists $n rdma entries for $nqn port $port, expected 1"
}

# nvmf_find_dev NQN: the block device of NQN's namespace 1, by the
# subsystem's NQN in sysfs (with native multipath the disk belongs to the
# subsystem, nvme-subsysN; without, to the controller). Nothing printed if
# there is none.
nvmf_find_dev() {
	local d b
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ -f "$d/subsysnqn" ] && [ "$(< "$d/subsysnqn")" = "$1" ] || continue
		for b in "$d"/nvme*n*; do
			b=${b##*/}
			[[ "$b" =~ ^nvme[0-9]+n[0-9]+$ ]] || continue # not nvmeXcYnZ, a path
			[ -f "$d/$b/nsid" ] && [ "$(< "$d/$b/nsid")" = 1 ] || continue
			[ -b "/dev/$b" ] && { echo "/dev/$b"; return 0; }
		done
	done
	return 0
}

# nvmf_ctrl_of NQN: the controller (nvmeX, in /sys/class/nvme) of NQN;
# nothing printed if there is none.
nvmf_ctrl_of() {
	local d
	for d in /sys/class/nvme/nvme*; do
		[ -f "$d/subsysnqn" ] && [ "$(< "$d/subsysnqn")" = "$1" ] && { echo "${d##*/}"; return 0; }
	done
	return 0
}

# nvmf_writes DEV: writes completed on DEV (/dev/nvmeXnY) so far, from
# /proc/diskstats. With native multipath the disk is bio-based and counts
# nothing itself: its paths (nvmeXcZnY) count the requests.
nvmf_writes() {
	local n=${1#/dev/}
	awk -v d="$n" -v p="^${n%n*}c[0-9]+n${n##*n}\$" '$3 == d || $3 ~ p {s += $8} END {print s + 0}' \
		/proc/diskstats
}

# nvmf_connect ADDR PORT NQN [OPTION...]: nvme connect (with the further
# nvme connect options given, e.g. --ctrl-loss-tmo=60), then the namespace's
# block device within 30 s, in NVMF_DEV. A controller of NQN connected before
# is an error (its device would be taken for ours).
nvmf_connect() {
	local addr=$1 port=$2 nqn=$3
	shift 3
	[ -z "$(nvmf_find_dev "$nqn")" ] || fail "a controller of $nqn is connected already"
	timeout 60 nvme connect -t rdma -a "$addr" -s "$port" -n "$nqn" "$@" >"$TMP/connect.out" 2>&1 ||
		fail "nvme connect -t rdma -a $addr -s $port -n $nqn $* failed (exit $?)"
	NVMF_DEV=
	for _ in $(seq 300); do
		NVMF_DEV=$(nvmf_find_dev "$nqn")
		[ -n "$NVMF_DEV" ] && break
		sleep 0.1
	done
	[ -n "$NVMF_DEV" ] || fail "nvme connect to $nqn succeeded, but no block device appeared within 30 s"
}

# nvmf_listed DEV: nvme list shows DEV.
nvmf_listed() {
	timeout 60 nvme list -o json >"$TMP/list.json" 2>"$TMP/list.err" || fail "nvme list failed (exit $?)"
	jq -e --arg d "$1" '[.Devices[] | select(.DevicePath == $d)] | length == 1' "$TMP/list.json" >/dev/null ||
		fail "nvme list does not show $1"
}

# nvmf_check_size DEV BYTES: the device's size, as the block layer reports
# it and as the namespace's Identify data (NSZE blocks of its LBA format).
nvmf_check_size() {
	local got nsze lbads
	got=$(blockdev --getsize64 "$1") || fail "cannot read the size of $1"
	[ "$got" = "$2" ] || fail "$1 is $got bytes, expected $2"
	timeout 60 nvme id-ns -o json "$1" >"$TMP/id-ns.json" 2>"$TMP/id-ns.err" || fail "nvme id-ns $1 failed"
	nsze=$(jq .nsze "$TMP/id-ns.json")
	lbads=$(jq '.lbafs[.flbas % 16].ds' "$TMP/id-ns.json")
	[[ "$nsze" =~ ^[0-9]+$ ]] && [[ "$lbads" =~ ^[0-9]+$ ]] || fail "nvme id-ns $1: no nsze or LBA format"
	[ $((nsze << lbads)) = "$2" ] ||
		fail "nvme id-ns $1: $nsze blocks of $((1 << lbads)) bytes, expected $2 bytes"
}

# nvmf_fio NAME ARGS...: fio with a JSON report in $TMP/NAME.json; it must
# exit 0 and report no error in any job.
nvmf_fio() {
	local name=$1 rc=0
	shift
	timeout 600 fio --output-format=json --output="$TMP/$name.json" "$@" >"$TMP/$name.out" 2>&1 || rc=$?
	[ "$rc" = 0 ] || fail "fio $name ($*) exited $rc"
	jq -e '[.jobs[] | select(.error != 0)] | length == 0' "$TMP/$name.json" >/dev/null ||
		fail "fio $name: a job reports an error: $(jq -c '[.jobs[] | {(.jobname): .error}]' "$TMP/$name.json")"
}

# nvmf_fio_verify DEV "BS DEPTH N"...: for each run in turn, N blocks of BS
# bytes at random offsets covering the first N*BS bytes exactly once,
# written with crc32c and a header naming each block's offset, at iodepth
# DEPTH, then read back and verified by the writing job; then a read-only
# job reads them all again, in another random order, and verifies them.
# Every byte written is checked twice, and the byte counts must be exact;
# any mismatch fails fio (verify_fatal) and the test. One fio process runs
# every job, one after another (stonewall): fio starts slowly in the VM.
nvmf_fio_verify() {
	local dev=$1 run bs depth n region jobs=()
	shift
	for run in "$@"; do
		read -r bs depth n <<< "$run"
		region=$((bs * n))
		jobs+=(--name="w-$bs-$depth" --stonewall --rw=randwrite --bs="$bs" --iodepth="$depth"
			--size="$region" --do_verify=1 --randseed="$depth$bs"
			--name="r-$bs-$depth" --stonewall --rw=randread --bs="$bs" --iodepth="$depth"
			--size="$region" --randseed="$bs$depth")
	done
	nvmf_fio verify --filename="$dev" --ioengine=libaio --direct=1 --verify=crc32c --verify_state_save=0 \
		--verify_fatal=1 "${jobs[@]}"
	# every job's name, bytes read and bytes written, in one jq call
	jq -r '.jobs[] | "\(.jobname) \(.read.io_bytes) \(.write.io_bytes)"' "$TMP/verify.json" \
		>"$TMP/verify.bytes" || fail "fio verify: unreadable JSON"
	for run in "$@"; do
		read -r bs depth n <<< "$run"
		region=$((bs * n))
		grep -qx "w-$bs-$depth $region $region" "$TMP/verify.bytes" ||
			fail "fio job w-$bs-$depth: want $region bytes written and read back, got (name read write): $(grep "^w-$bs-$depth " "$TMP/verify.bytes")"
		grep -qx "r-$bs-$depth $region 0" "$TMP/verify.bytes" ||
			fail "fio job r-$bs-$depth: want $region bytes read and 0 written, got (name read write): $(grep "^r-$bs-$depth " "$TMP/verify.bytes")"
	done
}

# nvmf_disconnect NQN: nvme disconnect says it disconnected exactly one
# controller, and the namespace's device is gone within 10 s.
nvmf_disconnect() {
	timeout 60 nvme disconnect -n "$1" >"$TMP/disconnect.out" 2>&1 ||
		fail "nvme disconnect -n $1 failed (exit $?)"
	grep -q "disconnected 1 controller(s)" "$TMP/disconnect.out" ||
		fail "nvme disconnect -n $1: $(< "$TMP/disconnect.out")"
	for _ in $(seq 100); do
		[ -z "$(nvmf_find_dev "$1")" ] && return 0
		sleep 0.1
	done
	fail "$1's block device is still there 10 s after nvme disconnect"
}
