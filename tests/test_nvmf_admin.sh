#!/bin/bash
# SPDX-License-Identifier: MIT
# interop suite: pollcore-nvmf's admin command set against the kernel's own
# target (nvmet-rdma), through the kernel's initiator and nvme-cli: what
# docs/storage.md's table ("Admin commands, logs and features against
# nvmet") says, checked.
#   usage: test_nvmf_admin.sh path/to/pollcore-nvmf path/to/kernel-target
#                             path/to/nvmf_probe.py path/to/storage.md
#
# In the VM (tools/rxe-vm --modules nvme-rdma,nvmet-rdma,null_blk:nr_devices=0;
# run-tests starts it so), one boot, both targets connected once each:
#  - nvmet (kernel-target, port 4421): connected, swept by nvmf_probe.py
#    (every admin opcode, Identify CNS, log page and feature, through the
#    passthrough ioctl nvme-cli uses) in the background while pollcore-nvmf
#    is checked; the sweep shows that it answers the log pages and features
#    checked below with nvme-cli (Firmware Slot, SMART, Error Information,
#    Effects, Changed Namespace List, ANA; features 06h, 81h, 84h);
#  - pollcore-nvmf (port 4420, two RAM namespaces), those commands through
#    nvme-cli, and their values: id-ctrl's FRMW, LPA, CMIC, OAES, ANA fields, MNAN, NWPC,
#    ELPE; the Firmware Slot log's 512 bytes (AFI slot 1, FRS1 = FR); SMART
#    counting a 1 MiB write and read; a refused command at the head of the
#    error log, counted in SMART; the Commands Supported and Effects entries;
#    the ANA group; the Volatile Write Cache, the Host Identifier (sysfs's);
#    write protection of namespace 2 (the notice makes the host re-read it:
#    read-only; Write Zeroes refused by the target with Namespace is Write
#    Protected, reads served), and with the notice disabled the Changed
#    Namespace List names namespace 2 once (cleared by the read); unprotected
#    it writes again;
#  - the sweep of pollcore-nvmf compared with nvmet's and the table: what
#    nvmet answers and pollcore-nvmf refuses is in the table with its reason,
#    every verdict in it is what the sweeps found (nvmf_probe.py compare);
#  - pollcore-nvmf stops with exit 0 on SIGTERM, no failed transfer.
# On a host without RDMA: exit 77.
set -u

NVMF=${1:?usage: test_nvmf_admin.sh pollcore-nvmf kernel-target nvmf_probe.py storage.md}
KTARGET=${2:?usage: test_nvmf_admin.sh pollcore-nvmf kernel-target nvmf_probe.py storage.md}
PROBE=${3:?usage: test_nvmf_admin.sh pollcore-nvmf kernel-target nvmf_probe.py storage.md}
TABLE=${4:?usage: test_nvmf_admin.sh pollcore-nvmf kernel-target nvmf_probe.py storage.md}
. "$(dirname "$0")/testbed.sh"
. "$(dirname "$0")/nvmf_lib.sh"
step() { ok "$* [${SECONDS} s]"; }
ADDR=$PC_TEST_ADDR
PORT=4420 KPORT=4421
NQN=nqn.2026-12.io.pollcore:test-nvmf-admin
KNQN=nqn.2026-12.io.pollcore:test-nvmf-admin-kernel
TMP=$(mktemp -d)
TGT_PID='' kstarted=0 KSWEEP=''
cleanup() {
	[ -z "$KSWEEP" ] || kill "$KSWEEP" 2>/dev/null
	nvme disconnect -n "$NQN" >/dev/null 2>&1
	nvme disconnect -n "$KNQN" >/dev/null 2>&1
	[ "$kstarted" = 0 ] || "$KTARGET" stop --nqn "$KNQN" >/dev/null 2>&1
	[ -z "$TGT_PID" ] || kill -KILL "$TGT_PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

pc_need_device
[ "$(id -u)" = 0 ] || fail "needs root (configfs, nvme connect, passthrough)"
nvmf_need_initiator
for t in python3 od cmp; do
	command -v "$t" >/dev/null || fail "$t is not installed"
done

# cli NAME ARGS...: nvme ARGS, exit 0, output in $TMP/NAME.out (stdin closed:
# set-feature would read data from it).
cli() {
	local name=$1
	shift
	timeout 60 nvme "$@" </dev/null >"$TMP/$name.out" 2>&1 || fail "nvme $* exited $?: $(< "$TMP/$name.out")"
}

# cli_refused NAME STATUS ARGS...: nvme ARGS fails with the status (hex, as
# nvme-cli prints it, e.g. 0x4020).
cli_refused() {
	local name=$1 status=$2
	shift 2
	timeout 60 nvme "$@" </dev/null >"$TMP/$name.out" 2>&1 && fail "nvme $* succeeded: $(< "$TMP/$name.out")"
	grep -q "($status)" "$TMP/$name.out" || fail "nvme $*: want status $status: $(< "$TMP/$name.out")"
}

# jcheck FILE FILTER: jq -e FILTER holds on FILE, with $c the controller (nvmeX).
jcheck() {
	jq -e --arg c "$CTRL" "$2" "$1" >/dev/null || fail "$(basename "$1"): want $2, got $(jq -c . "$1")"
}

# --- nvmet: the reference -----------------------------------------------------------
"$KTARGET" start --addr "$ADDR" --port "$KPORT" --nqn "$KNQN" --size 16M >"$TMP/ktarget.out" 2>&1 ||
	fail "kernel-target start failed: $(< "$TMP/ktarget.out")"
kstarted=1
nvmf_connect "$ADDR" "$KPORT" "$KNQN"
KCTRL=$(nvmf_ctrl_of "$KNQN")
# nvmet's sweep runs while pollcore-nvmf is checked (the other controller, its
# own NQN): the sweeps are admin round trips, and the VM has two vCPUs
timeout 300 python3 "$PROBE" sweep "/dev/$KCTRL" >"$TMP/nvmet.sweep" 2>"$TMP/sweep.err" &
KSWEEP=$!

# --- pollcore-nvmf --------------------------------------------------------------------
"$NVMF" --addr "$ADDR" --port "$PORT" --nqn "$NQN" --no-numa --ram 16m --ram 8m \
	>"$TMP/target.log" 2>&1 &
TGT_PID=$!
for _ in $(seq 1200); do
	grep -q '^pollcore-nvmf: listening' "$TMP/target.log" && break
	kill -0 "$TGT_PID" 2>/dev/null || fail "pollcore-nvmf exited at start: $(< "$TMP/target.log")"
	sleep 0.1
done
grep -q '^pollcore-nvmf: listening' "$TMP/target.log" || fail "pollcore-nvmf is not listening after 120 s"
nvmf_connect "$ADDR" "$PORT" "$NQN"
CTRL=$(nvmf_ctrl_of "$NQN")
C=/dev/$CTRL
NS1=$NVMF_DEV
NS2=${NS1%n1}n2
for _ in $(seq 100); do
	[ -b "$NS2" ] && break
	sleep 0.1
done
[ -b "$NS2" ] || fail "namespace 2's block device $NS2 is not there"

cli id-ctrl id-ctrl "$C" -o json
FR=$(jq -r .fr "$TMP/id-ctrl.out" | sed 's/ *$//')
[ -n "$FR" ] && [ ${#FR} -le 8 ] || fail "id-ctrl: FR '$FR'"
jcheck "$TMP/id-ctrl.out" '.frmw == 3 and .lpa == 6 and .cmic == 10 and .oaes == 256 and .elpe == 15 and
	.anatt == 10 and .anacap == 1 and .anagrpmax == 1 and .nanagrpid == 1 and .nn == 2 and .mnan == 2 and
	.nwpc == 1 and .vwc == 6'
step "id-ctrl: FRMW 3 (one read-only slot), LPA 6, CMIC 0Ah (ANA), OAES 100h, ELPE 15, ANA one group, MNAN 2, NWPC 1, FR '$FR'"

# Firmware Slot: AFI 01h, FRS1 = FR space padded, the rest zero
timeout 60 nvme get-log "$C" --log-id=3 --log-len=512 -b </dev/null >"$TMP/fw.bin" 2>"$TMP/fw.err" ||
	fail "nvme get-log --log-id=3 --log-len=512 exited $?: $(< "$TMP/fw.err")"
{ printf '\001\0\0\0\0\0\0\0%-8s' "$FR"; head -c 496 /dev/zero; } >"$TMP/fw.want"
cmp "$TMP/fw.bin" "$TMP/fw.want" ||
	fail "firmware slot log: $(od -A d -t x1 "$TMP/fw.bin" | head -3)"
cli fw-log fw-log "$C" -o json
jq -e --arg c "$CTRL" --arg fr "($FR" '.[$c]["Active Firmware Slot (afi)"] == 1 and
	(.[$c]["Firmware Rev Slot 1"] | contains($fr))' "$TMP/fw-log.out" >/dev/null ||
	fail "fw-log: $(< "$TMP/fw-log.out")"
step "get-log --log-id=3 --log-len=512: exit 0, AFI slot 1, FRS1 '$FR'; fw-log says so"

# SMART: 1 MiB written and read back on namespace 1
cli smart0 smart-log "$C" -o json
head -c $((1 << 20)) /dev/urandom >"$TMP/mib"
dd if="$TMP/mib" of="$NS1" bs=1M count=1 oflag=direct status=none || fail "dd to $NS1 failed"
dd if="$NS1" of="$TMP/mib.back" bs=1M count=1 iflag=direct status=none || fail "dd from $NS1 failed"
cmp "$TMP/mib" "$TMP/mib.back" || fail "the 1 MiB read back differs"
# Error Information: a refused Get Log Page heads it, SMART counts it (an
# admin command: no data unit or host command of SMART's)
cli_refused bad-log 0x4002 get-log "$C" --log-id=0x42 --log-len=512
cli error-log error-log "$C" -e 2 -o json
cli smart smart-log "$C" -o json
jcheck "$TMP/smart.out" '.critical_warning == 0 and .temperature == 295 and .avail_spare == 100 and
	.spare_thresh == 10 and .media_errors == "0"'
jq -n --slurpfile a "$TMP/smart0.out" --slurpfile b "$TMP/smart.out" -e '
	def n(f): ($b[0] | f | tonumber) - ($a[0] | f | tonumber);
	n(.data_units_written) == 3 and n(.data_units_read) >= 2 and n(.data_units_read) <= 3 and
	n(.host_write_commands) == 8 and n(.host_read_commands) >= 8' >/dev/null ||
	fail "smart-log after 1 MiB written (2048 sectors: 3 units of 1000) and read: before $(jq -c . "$TMP/smart0.out"), after $(jq -c . "$TMP/smart.out")"
step "smart-log: 295 K, spare 100%/10%, 1 MiB written = 3 data units, 8 commands of 128 KiB"

jq -n --slurpfile e "$TMP/error-log.out" --slurpfile s "$TMP/smart.out" -e '
	$e[0].errors[0].status_field == 16386 and $e[0].errors[0].sqid == 0 and
	$e[0].errors[0].error_count == ($s[0].num_err_log_entries | tonumber) and
	$e[0].errors[1].error_count == $e[0].errors[0].error_count - 1' >/dev/null ||
	fail "error-log: $(jq -c . "$TMP/error-log.out"), smart num_err_log_entries $(jq .num_err_log_entries "$TMP/smart.out")"
step "error-log: the refused get-log 42h at its head (4002h, admin queue), numbered as SMART counts"

# Commands Supported and Effects
cli effects effects-log "$C" --csi=0 -o json
jcheck "$TMP/effects.out" '.[0].command_set_identifier == 0 and
	.[0].admin_cmd_set == {"ACS_2 (Get Log Page)": 1, "ACS_6 (Identify)": 1, "ACS_8 (Abort)": 1,
		"ACS_9 (Set Features)": 1, "ACS_10 (Get Features)": 1,
		"ACS_12 (Asynchronous Event Request)": 1, "ACS_24 (Keep Alive)": 1} and
	.[0].io_cmd_set == {"IOCS_0 (Flush)": 1, "IOCS_1 (Write)": 3, "IOCS_2 (Read)": 1,
		"IOCS_8 (Write Zeroes)": 3, "IOCS_9 (Dataset Management)": 3}'
step "effects-log --csi=0: CSUPP for the 7 admin and 5 I/O commands, LBCC for Write, Write Zeroes, DSM"

# ANA: one group, Optimized, both namespaces
cli ana ana-log "$C" -o json
jcheck "$TMP/ana.out" '.ngrps == 1 and (."ANA DESC LIST " | length) == 1 and
	."ANA DESC LIST "[0].grpid == 1 and ."ANA DESC LIST "[0].state == "optimized" and
	."ANA DESC LIST "[0].nnsids == 2 and [."ANA DESC LIST "[0].NSIDS[].nsid] == [1, 2]'
step "ana-log: group 1, optimized, namespaces 1 and 2"

# features: Volatile Write Cache (RAM: none, WCE 0), Host Identifier (sysfs's)
cli vwc get-feature "$C" -f 6
grep -q "Current value:0*0$" "$TMP/vwc.out" || fail "get-feature 6: $(< "$TMP/vwc.out")"
cli hostid get-feature "$C" -f 0x81 -c 1
want=$(tr -d -- '-\n' < "/sys/class/nvme/$CTRL/hostid")
got=$(sed -n 's/^[0-9a-f]*: \(\([0-9a-f][0-9a-f] \)\{16\}\).*/\1/p' "$TMP/hostid.out" | tr -d ' \n')
[ "$got" = "$want" ] || fail "get-feature 0x81: $got, sysfs hostid $want: $(< "$TMP/hostid.out")"
step "get-feature 6: WCE 0 (RAM namespaces); get-feature 81h: the host's identifier $want"

# Namespace Write Protection: the notice makes the host re-read namespace 2
cli wp-on set-feature "$C" -f 0x84 -n 2 -v 1
for _ in $(seq 200); do
	[ "$(< "/sys/block/${NS2#/dev/}/ro")" = 1 ] && break
	sleep 0.1
done
[ "$(< "/sys/block/${NS2#/dev/}/ro")" = 1 ] || fail "namespace 2 protected: $NS2 is not read-only after 20 s (no notice?)"
cli wp-get get-feature "$C" -f 0x84 -n 2
grep -q "Current value:\(0x\)\{0,1\}0*1$" "$TMP/wp-get.out" || fail "get-feature 0x84 -n 2: $(< "$TMP/wp-get.out")"
cli id-ns2 id-ns "$C" -n 2 -o json
jcheck "$TMP/id-ns2.out" '.nsattr == 1 and .anagrpid == 1'
cli changed-read changed-ns-list-log "$C" -o json
jcheck "$TMP/changed-read.out" '.[$c] == {}'
# the target refuses what writes (passthrough reaches it; the block layer would not)
cli_refused wz 0x4020 write-zeroes "$NS2" -n 2 -s 0 -c 0
dd if="$NS2" of=/dev/null bs=4k count=1 iflag=direct status=none || fail "a read of protected $NS2 failed"
step "set-feature 84h -n 2 -v 1: $NS2 read-only (the host re-read it on the notice, which read the changed list empty), nsattr 1, Write Zeroes refused 4020h, reads served"

cli aec get-feature "$C" -f 0xb
AEC=$(sed -n 's/.*Current value:\(0x\)\{0,1\}\([0-9a-fA-F]*\)$/\2/p' "$TMP/aec.out")
[ -n "$AEC" ] || fail "get-feature 0xb: $(< "$TMP/aec.out")"
cli aec-off set-feature "$C" -f 0xb -v 0
cli wp-off set-feature "$C" -f 0x84 -n 2 -v 0
cli changed changed-ns-list-log "$C" -o json
jcheck "$TMP/changed.out" '.[$c] == {"[   1]": "0x2"}'
cli changed2 changed-ns-list-log "$C" -o json
jcheck "$TMP/changed2.out" '.[$c] == {}'
cli aec-on set-feature "$C" -f 0xb -v "0x$AEC"
cli rescan ns-rescan "$C"
for _ in $(seq 100); do
	[ "$(< "/sys/block/${NS2#/dev/}/ro")" = 0 ] && break
	sleep 0.1
done
[ "$(< "/sys/block/${NS2#/dev/}/ro")" = 0 ] || fail "namespace 2 unprotected: $NS2 still read-only after a rescan"
cli wz-ok write-zeroes "$NS2" -n 2 -s 0 -c 0
step "notices off (AEC 0), protection off: changed-ns-list-log names namespace 2, then nothing; AEC 0x$AEC again, rescan: writable"

# --- the sweeps, compared -------------------------------------------------------------
rc=0
wait "$KSWEEP" || rc=$?
KSWEEP=
[ "$rc" = 0 ] || fail "nvmf_probe.py sweep of nvmet exited $rc: $(< "$TMP/sweep.err")"
for k in 'log 03h ns all' 'log 02h ns all' 'log 01h ns all' 'log 05h ns all' 'log 04h ns all' \
	'log 0ch ns all' 'get 06h' 'get 81h' 'get 84h'; do
	grep -qx "$k: 0000" "$TMP/nvmet.sweep" || fail "nvmet does not answer $k: $(grep "^$k:" "$TMP/nvmet.sweep")"
done
step "nvmet: swept, $(grep -c ': 0000$' "$TMP/nvmet.sweep") probes answered, among them the log pages 01h-05h and 0Ch and the features 06h, 81h, 84h checked above"
nvmf_disconnect "$KNQN"
"$KTARGET" stop --nqn "$KNQN" >"$TMP/kstop.out" 2>&1 || fail "kernel-target stop: $(< "$TMP/kstop.out")"
kstarted=0
timeout 300 python3 "$PROBE" sweep "$C" >"$TMP/pollcore.sweep" 2>"$TMP/sweep.err" ||
	fail "nvmf_probe.py sweep of pollcore-nvmf: $(< "$TMP/sweep.err")"
python3 "$PROBE" compare "$TMP/nvmet.sweep" "$TMP/pollcore.sweep" "$TABLE" >"$TMP/compare.out" 2>&1 || {
	cat "$TMP/compare.out"
	fail "the sweeps and docs/storage.md's table disagree (above)"
}
step "sweep: $(grep -c ': 0000$' "$TMP/pollcore.sweep") probes answered (nvmet $(grep -c ': 0000$' "$TMP/nvmet.sweep")); every difference is in the table, every verdict of the table holds"

nvmf_disconnect "$NQN"
kill -TERM "$TGT_PID"
rc=0
wait "$TGT_PID" || rc=$?
TGT_PID=
[ "$rc" = 0 ] || fail "pollcore-nvmf exited $rc after SIGTERM: $(tail -5 "$TMP/target.log")"
grep -E '^pollcore-nvmf: worker 0: ' "$TMP/target.log" | grep -q ' xfer_errors 0 io_errors 0 .* cqe_lost 0 ' ||
	fail "pollcore-nvmf's counters: $(grep -E '^pollcore-nvmf: worker' "$TMP/target.log")"
step "pollcore-nvmf: SIGTERM, exit 0, no failed transfer or lost completion"
echo "PASS: test_nvmf_admin"
