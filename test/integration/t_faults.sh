#!/bin/bash
# Faults survived (issue 7 part 3): the daemon killed or stopped under a write load, the backing
# full, a view unmounted under load, the control socket or /run/strictfs gone, a dead view's
# mountpoint. Nothing may hang (every wait is bounded), nothing fsynced may be lost, the backing
# must pass e2fsck -fn, and each refusal is one line that says what happened.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# transport-independent: test_faults_control_socket_deleted_device: the control socket, not the request channel
# transport-independent: test_faults_control_socket_deleted_image: the control socket, not the request channel
# transport-independent: test_faults_rundir_missing: /run/strictfs and the control socket, not the request channel

# reaper_mount OUT ARGS...: `strictfs mount ARGS` run by a child subreaper, which adopts the
# daemon the command starts and writes "mount RC" then "exit STATUS" (the daemon's) into OUT.
reaper_mount() {
	local out=$1
	shift
	mkdir -p "${!#}"
	"$PY" - "$out" "$STRICTFS" mount "$@" <<'EOF' &
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
out = sys.argv[1]
rc = subprocess.call(sys.argv[2:])
with open(out, "a") as f:
    f.write("mount %d\n" % rc)
while True:
    try:
        pid, st = os.wait()
    except ChildProcessError:
        break
    with open(out, "a") as f:
        f.write("exit %d\n" % os.waitstatus_to_exitcode(st))
EOF
	wait_until 10 grep -q '^mount ' "$out" || die "strictfs mount $* did not finish"
	grep -qx 'mount 0' "$out" || die "strictfs mount $* failed"
	view_pid "${!#}" >/dev/null
}

# bulk_writer DIR SECONDS: unsynced 1 MiB writes, round and round 16 MiB of one open file in
# DIR, for load; prints the errno that ended it.
bulk_writer() {
	"$PY" - "$1" "$2" <<'EOF'
import errno, os, sys, time
d, t = sys.argv[1], float(sys.argv[2])
end, n, buf = time.time() + t, 0, b"z" * (1 << 20)
try:
    fd = os.open(os.path.join(d, "bulk"), os.O_WRONLY | os.O_CREAT, 0o644)
    while time.time() < end:
        os.pwrite(fd, buf, (n % 16) << 20)
        n += 1
    print("END")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
EOF
}

# start_writers V W: an fsyncing writer of V/log (lines it has fsynced in T_DIR/acked, its
# end in T_DIR/dw.out) and a bulk writer in W (T_DIR/bw.out), for 30 s; returns once the first
# line is fsynced and a second of load has passed. Their pids in dw and bw.
start_writers() {
	durable_writer "$1/log" "$T_DIR/acked" 30 >"$T_DIR/dw.out" &
	dw=$!
	bulk_writer "$2" 30 >"$T_DIR/bw.out" &
	bw=$!
	wait_until 10 test -s "$T_DIR/acked" || die "the writer did not start"
	sleep 1
}

# writers_ended: both writers of start_writers end (nothing hangs). The fsyncing writer needs
# the daemon at every fsync and ends at once; the bulk writer's file is open by kernel
# passthrough in W, whose writes go to the backing file without the daemon: the kernel keeps
# that file, and the backing with it, until it is closed, so the bulk writer runs its course
# (30 s) and ends normally, as a writer does on a native mount unmounted lazily.
writers_ended() {
	assert_ok wait_until 10 pid_gone "$dw"
	assert_ok wait_until 40 pid_gone "$bw"
	wait "$dw" "$bw" 2>/dev/null
	assert_eq END "$(cat "$T_DIR/bw.out")" "the passthrough writer wrote to the end"
}

# refused_here REGEX CMD...: as lib.sh's assert_refused_re (exit 1, one line "strictfs: ..."
# matching REGEX), but what must not be left behind is judged by this test's own mounts,
# daemons and loop devices: other suites may mount and start daemons on this machine meanwhile.
refused_here() {
	local re=$1 before after i
	shift
	before=$(_here_snap | sort)
	_capture "$@"
	for ((i = 0; i < 30; i++)); do # a daemon or loop device the command started may take a moment
		after=$(comm -13 <(echo "$before") <(_here_snap | sort))
		[[ -z $after ]] && break
		sleep 0.1
	done
	if ((RC != 1)) || [[ $(grep -c '' "$T_DIR/.err") != 1 ]] || ! grep -qE -- "$re" "$T_DIR/.err"; then
		fail "refused ($re): $*: exit $RC: $(_short "$T_DIR/.err")"
	elif [[ -n $after ]]; then
		fail "refused ($re): $*: left behind: $(tr '\n' ';' <<<"$after")"
	else
		ok "refused ($re): $* -> $(cat "$T_DIR/.err")"
	fi
}

_here_snap() { # mounts under T_DIR, daemons of this test's sources, loop devices of its images
	local img
	awk -v p="$T_DIR/" 'index($2, p) == 1 { print "mount " $2 " " $3 }' /proc/self/mounts
	for img in "$T_DIR"/*.img; do loops_of "$img" | sed 's/^/loop /'; done
	for img in "$T_DIR"/*.img $(_our_loops); do daemon_procs "$(source_key "$img")" | sed 's/^/daemon /'; done
}

# ---- the daemon killed --------------------------------------------------------------------

test_faults_sigkill_under_write_load() {
	new_source kill
	local V=$T_DIR/v W=$T_DIR/w pid dw bw n
	view "" "$LOOP" "$V"
	view noacl "$LOOP" "$W"
	pid=$(view_pid "$V")
	assert_eq true "$(view_json "$W" | jq -r .data_path.passthrough)" "W's files go by passthrough"
	# (the "no daemon left" below would pass with a lookup that finds nothing)
	assert_eq "$pid" "$(daemon_procs "$(source_key "$LOOP")")" "daemon_procs finds the daemon"
	start_writers "$V" "$W"
	# the daemon and its keeper: nothing is left to take the views over (t_failover has the
	# daemon alone killed)
	assert_ok kill_daemon_for_good "$pid"
	assert_ok wait_daemon_gone "$pid" 5
	# fail fast: the writer that needs the daemon ends with ENOTCONN, nothing hangs
	writers_ended
	# a request in flight when the connection dies gets ECONNABORTED, later ones ENOTCONN
	assert_one_of "$(cat "$T_DIR/dw.out")" "the fsyncing writer failed fast" ENOTCONN ECONNABORTED
	assert_fails_with "Transport endpoint is not connected" timeout 5 ls "$V"
	assert_fails_with "Transport endpoint is not connected" timeout 5 stat -f "$W"
	assert_ok timeout 10 "$STRICTFS" status
	assert_eq "" "$(daemon_procs "$(source_key "$LOOP")")" "no daemon left"
	# the dead views: a new mount over one is refused with what to do; strictfs umount clears
	refused_here "strictfs umount" timeout 10 "$STRICTFS" mount "$LOOP" "$V"
	assert_contains "$(cat "$T_DIR/.err")" "strictfs: $V: " "the refusal names the mountpoint"
	assert_contains "$(cat "$T_DIR/.err")" "umount -l" "and umount -l"
	assert_eq 1 "$(grep -c " $V fuse.strictfs " /proc/self/mounts)" "nothing stacked on the dead view"
	assert_ok timeout 10 "$STRICTFS" umount "$V"
	assert_ok not_mounted "$V"
	assert_ok timeout 10 umount -l "$W"
	assert_ok not_mounted "$W"
	# the backing was released by the kernel with the process: clean, and the data is there
	assert_ok device_free "$LOOP"
	assert_ok fsck_clean "$LOOP"
	view "" "$LOOP" "$V"
	n=$(wc -l <"$T_DIR/acked")
	assert_gt "$n" 0 "lines were fsynced before the kill"
	assert_ok acked_lines_present "$V/log" "$T_DIR/acked"
	assert_ok sh -c "echo again >> '$V/log'"
}

test_faults_dead_view_mount_and_umount() {
	mkimg dead
	IMG=$REPLY
	local V=$T_DIR/v pid
	view "" "$IMG" "$V"
	pid=$(view_pid "$V")
	echo before >"$V/f"
	assert_ok kill_daemon_for_good "$pid"
	assert_ok wait_daemon_gone "$pid" 5
	# cat's own failure (1), not timeout's 124 for a hang
	assert_exit 1 timeout 5 cat "$V/f"
	assert_one_of "$(sed 's/.*: //' "$T_DIR/.err")" "the dead view fails at once (ENOTCONN or ECONNABORTED)" \
		"Transport endpoint is not connected" "Software caused connection abort"
	# right away (attributes still cached) and once the cache has expired
	refused_here "^strictfs: $V: .*(umount -l|strictfs umount)" timeout 10 "$STRICTFS" mount "$IMG" "$V"
	sleep 6
	refused_here "^strictfs: $V: .*(umount -l|strictfs umount)" timeout 10 "$STRICTFS" mount "$IMG" "$V"
	assert_eq 1 "$(grep -c " $V fuse.strictfs " /proc/self/mounts)" "one (dead) view at the mountpoint"
	assert_ok timeout 10 "$STRICTFS" umount "$V"
	assert_ok not_mounted "$V"
	# only now: a passthrough backing file registered with the dead view's connection (the
	# write above, if the kill came before its RELEASE) holds the backing until the view
	# is unmounted (doc/kernel.md §4.8)
	assert_ok wait_until 5 no_loop_for "$IMG"
	assert_fails_with "not a strictfs view" timeout 10 "$STRICTFS" umount "$V"
	view "" "$IMG" "$V"
	assert_eq before "$(cat "$V/f" 2>&1)" "a new view over the same image has the data"
}

# ---- the daemon stopped -------------------------------------------------------------------

test_faults_sigterm_under_write_load() {
	new_source term
	local V=$T_DIR/v W=$T_DIR/w pid dw bw
	reaper_mount "$T_DIR/reaper" "$LOOP" "$V"
	view noacl "$LOOP" "$W"
	pid=$(view_pid "$V")
	start_writers "$V" "$W"
	assert_ok kill -TERM "$pid"
	assert_ok wait_daemon_gone "$pid" 15
	writers_ended
	log "writers ended with: $(cat "$T_DIR/dw.out") $(cat "$T_DIR/bw.out")"
	assert_ok wait_until 5 grep -q '^exit ' "$T_DIR/reaper"
	assert_eq "exit 0" "$(grep '^exit ' "$T_DIR/reaper")" "the daemon exited 0"
	assert_ok wait_until 5 not_mounted "$V"
	assert_ok wait_until 5 not_mounted "$W"
	assert_ok device_free "$LOOP"
	assert_ok fsck_clean "$LOOP"
	view "" "$LOOP" "$V"
	assert_gt "$(wc -l <"$T_DIR/acked")" 0 "lines were fsynced before SIGTERM"
	assert_ok acked_lines_present "$V/log" "$T_DIR/acked"
}

# ---- the backing full ---------------------------------------------------------------------

test_faults_backing_full() {
	IMG=$T_DIR/small.img
	truncate -s 24M "$IMG" && mkfs.ext4 -q -F -b 4096 -N 128 "$IMG" >/dev/null || die "mkfs small image"
	attach_loop "$IMG"
	LOOP=$REPLY
	local V=$T_DIR/v A=$T_DIR/a i out
	view "" "$LOOP" "$V"
	view noacl "$LOOP" "$A"
	mkdir -m 1777 "$V/pub"
	echo keep >"$V/keep"
	sync "$V/keep"
	# blocks: an unprivileged writer stops at the reserved blocks, root at the end
	assert_fails_with "No space left on device" as_user "$SFS_ALICE" dd if=/dev/zero of="$A/pub/fill" bs=1M count=64 conv=fsync
	assert_fails_with "No space left on device" dd if=/dev/zero of="$V/rootfill" bs=1M count=64 conv=fsync
	assert_fails_with "No space left on device" dd if=/dev/zero of="$V/pub/more" bs=1M count=1 conv=fsync
	assert_eq keep "$(cat "$A/keep")" "existing data intact"
	assert_ok ls "$V" "$A/pub"
	# inodes
	out=$(for ((i = 0; i < 200; i++)); do touch "$V/pub/i$i" 2>&1 || break; done)
	assert_contains "$out" "No space left on device" "running out of inodes: ENOSPC"
	assert_fails_with "No space left on device" mkdir "$A/pub/d"
	# the quota ledger followed every write that failed half way and every create refused
	assert_ok "$STRICTFS" quota check "$LOOP"
	assert_contains "$(cat "$T_DIR/.out")" "live accounting equals a fresh scan" "full backing: ledger equals a scan"
	# space comes back after deleting, through either view
	assert_ok rm -f "$V/rootfill" "$A/pub/fill"
	assert_ok rm -f "$V"/pub/i*
	assert_ok dd if=/dev/zero of="$A/pub/again" bs=1M count=4 conv=fsync status=none
	assert_eq 4194304 "$(stat -c %s "$V/pub/again")" "writes work again"
	assert_ok "$STRICTFS" quota check "$LOOP"
	assert_ok sfs_umount "$V"
	assert_ok sfs_umount "$A"
	assert_ok wait_until 5 device_free "$LOOP"
	assert_ok fsck_clean "$LOOP"
}

# ---- a view unmounted under load ----------------------------------------------------------

test_faults_view_unmounted_under_load() {
	new_source vul
	local V=$T_DIR/v W=$T_DIR/w pid dw
	view "" "$LOOP" "$V"
	view "" "$LOOP" "$W"
	pid=$(view_pid "$V")
	durable_writer "$V/log" "$T_DIR/acked" 4 >"$T_DIR/dw.out" &
	dw=$!
	wait_until 10 test -s "$T_DIR/acked" || die "the writer did not start"
	assert_exit 1 timeout 10 "$STRICTFS" umount "$V"
	assert_eq "strictfs: $V: Device or resource busy" "$(cat "$T_DIR/.err")" "one line: the view is busy"
	assert_ok timeout 10 umount -l "$V"
	assert_ok not_mounted "$V"
	# the detached view keeps serving its open file until it is closed, then it is dropped
	assert_ok wait_until 15 pid_gone "$dw"
	wait "$dw"
	assert_eq END "$(cat "$T_DIR/dw.out")" "the writer finished its run on the detached view"
	assert_ok wait_until 10 status_lacks_view "$V"
	assert_eq "$W" "$(daemon_views "$pid")" "the daemon serves the other view"
	assert_ok acked_lines_present "$W/log" "$T_DIR/acked"
	assert_ok sh -c "echo more >> '$W/log'"
	assert_ok sfs_umount "$W"
	assert_ok wait_daemon_gone "$pid"
	assert_ok fsck_clean "$LOOP"
}

# ---- the control socket and /run/strictfs -------------------------------------------------

_socket_deleted() { # SOURCE
	local src=$1 key V=$T_DIR/v W=$T_DIR/w X=$T_DIR/x pid
	key=$(source_key "$src")
	view "" "$src" "$V"
	pid=$(view_pid "$V")
	assert_ok test -S "$SFS_RUNDIR/$key.sock"
	rm -f "$SFS_RUNDIR/$key.sock"
	# status waits for the daemon to re-create its socket rather than miss it
	assert_ok timeout 10 "$STRICTFS" status "$V"
	assert_contains "$(cat "$T_DIR/.out")" "$V" "status still shows the view"
	rm -f "$SFS_RUNDIR/$key.sock"
	mkdir -p "$W"
	assert_ok timeout 20 "$STRICTFS" mount "$src" "$W"
	assert_eq "$pid" "$(daemon_procs "$key" | tr '\n' ' ' | sed 's/ $//')" "still exactly one daemon"
	assert_eq "$pid" "$(view_pid "$W")" "the new view joined the running daemon"
	assert_ok wait_until 5 test -S "$SFS_RUNDIR/$key.sock"
	# a daemon that cannot answer (stopped) is named, not doubled
	kill -STOP "$pid"
	rm -f "$SFS_RUNDIR/$key.sock"
	mkdir -p "$X"
	refused_here "^strictfs: .*daemon ${pid}[^0-9]" timeout 20 "$STRICTFS" mount "$src" "$X"
	kill -CONT "$pid"
	assert_eq "$pid" "$(daemon_procs "$key" | tr '\n' ' ' | sed 's/ $//')" "no second daemon was started"
	assert_ok wait_until 5 test -S "$SFS_RUNDIR/$key.sock"
	assert_ok sh -c "echo ok > '$W/f' && test \"\$(cat '$V/f')\" = ok"
	assert_ok sfs_umount "$V"
	assert_ok sfs_umount "$W"
	assert_ok wait_daemon_gone "$pid"
	assert_ok fsck_clean "$src"
}

SFS_RUNDIR=/run/strictfs

test_faults_control_socket_deleted_device() {
	new_source sock
	_socket_deleted "$LOOP"
}

test_faults_control_socket_deleted_image() {
	mkimg sockimg
	IMG=$REPLY
	_socket_deleted "$IMG"
	assert_ok wait_until 5 no_loop_for "$IMG"
}

# /run/strictfs is replaced by an empty tmpfs in a private mount namespace, so that the daemons
# of other sources on this machine are not touched.
test_faults_rundir_missing() { with_mount_helper _rundir_body; }
_rundir_body() {
	local V=$T_DIR/v W=$T_DIR/w pid key
	mount -t tmpfs -o mode=0755 sfs-run /run || die "tmpfs over /run"
	assert_ok test ! -e "$SFS_RUNDIR"
	new_source rundir
	key=$(source_key "$LOOP")
	view "" "$LOOP" "$V"
	assert_eq 700 "$(stat -c %a "$SFS_RUNDIR")" "the command created /run/strictfs 0700"
	pid=$(view_pid "$V")
	rm -rf "$SFS_RUNDIR"
	assert_ok timeout 10 "$STRICTFS" status "$V"
	assert_contains "$(cat "$T_DIR/.out")" "$V" "status finds the daemon again"
	rm -rf "$SFS_RUNDIR"
	mkdir -p "$W"
	assert_ok timeout 20 "$STRICTFS" mount "$LOOP" "$W"
	assert_eq "$pid" "$(daemon_procs "$key" | tr '\n' ' ' | sed 's/ $//')" "one daemon"
	assert_ok wait_until 5 test -S "$SFS_RUNDIR/$key.sock"
	assert_ok wait_until 5 test -e "$SFS_RUNDIR/$key.lock"
	assert_eq 700 "$(stat -c %a "$SFS_RUNDIR")" "/run/strictfs re-created 0700"
	assert_eq 600 "$(stat -c %a "$SFS_RUNDIR/$key.sock")" "the socket re-created 0600"
	assert_ok sfs_umount "$V"
	assert_ok sfs_umount "$W"
	assert_ok wait_daemon_gone "$pid"
	assert_ok device_free "$LOOP"
	umount /run || fail "undoing the tmpfs over /run"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
