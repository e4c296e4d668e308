#!/bin/bash
# Views that outlive their daemon (contract §6, "Failover", issue 17): the daemon killed
# (SIGKILL, as a crash or the OOM killer would) is replaced by its keeper's successor, which serves the same
# views: they stay mounted, in the host's and in a container's namespace, open files and
# directory streams keep working, writers see no error, nothing fsynced is lost, and the
# quota ledger equals a fresh scan. status shows the generation and when it took over.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# transport-independent: test_failover_locks_held_across_kills: the held locks cross each kill in the handover state, whatever carries requests; an io_uring successor is carried by test_failover_sigkill_keeps_views, test_failover_lock_waiters_survive_a_kill and test_slow_failover_kills_under_load in both passes
# transport-independent: test_failover_upgrade_refused_for_a_binary_that_cannot_take_over: which binary an upgrade accepts; a handover over io_uring is carried by test_failover_upgrade_keeps_views_and_files in both passes
# transport-independent: test_failover_crash_with_an_incompatible_binary_installed: which binary the keeper runs; a crash's handover over io_uring is carried by test_failover_sigkill_keeps_views in both passes
# transport-independent: test_failover_with_a_system_log: what the failover tells the system log; an io_uring successor is carried by test_failover_sigkill_keeps_views in both passes

four_views() { # views of LOOP at A (acl), N (noacl,nouser_xattr), C (casefold), Q (quota)
	view "" "$LOOP" "$A"
	view noacl,nouser_xattr "$LOOP" "$N"
	view casefold "$LOOP" "$C"
	view quota "$LOOP" "$Q"
}

daemon_field() { # PID JQ-PATH
	sq --argjson p "$1" ".daemons[]? | select(.pid == \$p) | $2"
}

# The checks every test of the four views (four_views, in the calling test's A N C Q of LOOP)
# ends with.

# start_writer SECONDS: the durable_writer on Q/log for SECONDS, acknowledging to acked and
# ending in dw.out, once it has written; its pid in REPLY.
start_writer() {
	durable_writer "$Q/log" "$T_DIR/acked" "$1" >"$T_DIR/dw.out" &
	REPLY=$!
	wait_until 10 test -s "$T_DIR/acked" || die "the writer did not start"
}

# writer_lost_nothing PID: the durable_writer PID (output dw.out, acknowledgements acked, log
# A/log) ended without an error and every line it acknowledged is in the log.
writer_lost_nothing() {
	wait "$1"
	assert_eq END "$(cat "$T_DIR/dw.out")" "the fsyncing writer saw no error"
	assert_ok acked_lines_present "$A/log" "$T_DIR/acked"
}

# held_writes_on FD WHEN: a descriptor of "held" that wrote "one" before WHEN writes on; closed.
held_writes_on() {
	local fd=$1
	echo two >&"$fd"
	exec {fd}>&-
	assert_eq "one two" "$(tr '\n' ' ' <"$A/held" | sed 's/ $//')" "a descriptor opened before $2 writes on"
}

# end_four_views PID: the four views unmounted, the daemon PID gone with them, the device
# free and e2fsck clean.
end_four_views() {
	local mp
	[[ -n $1 ]] || fail "end_four_views: no daemon pid to wait for"
	for mp in "$A" "$N" "$C" "$Q"; do assert_ok "$STRICTFS" umount "$mp"; done
	assert_ok wait_daemon_gone "$1" 5
	assert_ok device_free "$LOOP"
	assert_ok fsck_clean "$LOOP"
}

# dir_reader DIR IN OUT: lists DIR through one stream, half before a line arrives on the fifo
# IN and the rest after; prints the count of entries and the errno, if any, to OUT.
dir_reader() {
	"$PY" - "$1" "$2" "$3" <<'EOF' &
import errno, os, sys
d, fifo, out = sys.argv[1:4]
names = []
try:
    it = os.scandir(d)
    for _ in range(300):
        names.append(next(it).name)
    open(fifo).read()
    names.extend(e.name for e in it)
    res = "%d" % len(set(names))
except OSError as e:
    res = errno.errorcode.get(e.errno, str(e.errno))
open(out, "w").write(res + "\n")
EOF
}

test_failover_sigkill_keeps_views() {
	new_source fo
	local A=$T_DIR/a N=$T_DIR/n C=$T_DIR/c Q=$T_DIR/q pid keeper succ succ_keeper key i
	key=$(source_key "$LOOP")
	four_views
	pid=$(view_pid "$A")
	keeper=$(keeper_of "$pid")
	assert_ne "" "$keeper" "the daemon has a keeper"
	assert_eq "$keeper" "$(daemon_field "$pid" .keeper)" "status names the keeper"
	assert_eq 1 "$(daemon_field "$pid" .generation)" "the first daemon is generation 1"
	# the sanitizers' own allocator and shadow take megabytes in any process they run in
	local keeper_max=2048
	[[ -n ${ASAN_OPTIONS:-} ]] && keeper_max=8192
	assert_lt "$(awk '/^RssAnon:/ { print $2 }' "/proc/$keeper/status")" "$keeper_max" \
		"the keeper is tiny (under $((keeper_max / 1024)) MiB of its own)"

	mkdir "$A/dir" && for ((i = 0; i < 600; i++)); do : >"$A/dir/f$i"; done
	echo mixed >"$A/MixedCase"
	setfacl -m "u:$SFS_ALICE:r" "$A/MixedCase"
	exec {held}<>"$N/held"
	echo one >&"$held"
	mkfifo "$T_DIR/go"
	dir_reader "$A/dir" "$T_DIR/go" "$T_DIR/dr.out"
	start_writer 8
	dw=$REPLY
	sleep 0.5

	assert_ok kill -KILL "$pid"
	assert_ok successor_of "$pid" "$key"
	succ=$REPLY
	assert_eq "$keeper" "$succ" "the keeper became the successor"
	assert_eq 2 "$(daemon_field "$succ" .generation)" "status: generation 2"
	assert_ne "" "$(daemon_field "$succ" .took_over)" "status: when it took over"
	# its keeper's pid now, while the successor runs: once it has exited, keeper_of finds none
	succ_keeper=$(keeper_of "$succ")
	assert_ne "" "$succ_keeper" "the successor has a keeper of its own"
	remember_pid "$succ_keeper"
	assert_eq "$A $C $N $Q" "$(sq --argjson p "$succ" '.daemons[] | select(.pid == $p) | [.views[].mountpoint] | sort | join(" ")')" \
		"the successor serves the four views"

	for mp in "$A" "$N" "$C" "$Q"; do
		assert_eq "$mp fuse.strictfs" "$(findmnt -n -o TARGET,FSTYPE "$mp" | tr -s ' ')" "$mp is still mounted"
	done
	assert_eq mixed "$(cat "$C/mixedcase" 2>&1)" "the casefold view still folds"
	assert_contains "$(getfacl -p "$A/MixedCase" 2>&1)" "user:$SFS_ALICE:r--" "the acl view still has ACLs"
	assert_not_contains "$(getfacl -p "$N/MixedCase" 2>&1)" "user:$SFS_ALICE" "the noacl view still has none"
	assert_fails_with "Operation not supported" setfattr -n user.x -v 1 "$N/held"
	held_writes_on "$held" "the kill"
	echo >"$T_DIR/go"
	assert_ok wait_until 10 test -s "$T_DIR/dr.out"
	assert_eq 600 "$(cat "$T_DIR/dr.out")" "a directory stream opened before the kill lists on"
	writer_lost_nothing "$dw"
	assert_ok "$STRICTFS" quota check "$LOOP"

	for mp in "$A" "$N" "$C" "$Q"; do assert_ok "$STRICTFS" umount "$mp"; done
	assert_ok wait_daemon_gone "$succ" 5
	assert_eq "" "$(daemon_procs "$key")" "no daemon left"
	assert_ok wait_until 3 pid_gone "$succ_keeper"
	assert_ok device_free "$LOOP"
	assert_ok fsck_clean "$LOOP"
}

test_failover_view_in_a_container() {
	local C M=$T_DIR/ct A=$T_DIR/a pid succ key
	mkdir -p "$M"
	container_start
	C=$REPLY
	mkimg ct
	IMG=$REPLY
	key=$(source_key "$IMG")
	view "" "$IMG" "$A"
	pid=$(view_pid "$A")
	assert_ok "$STRICTFS" mount --namespace "$C" -o noacl "$IMG" "$M"
	assert_ok nsenter -t "$C" -m -p -- sh -c "echo before > '$M/f'"
	assert_ok kill -KILL "$pid"
	assert_ok successor_of "$pid" "$key"
	succ=$REPLY
	assert_eq "$IMG $M fuse.strictfs" "$(in_ns_mounts "$C" "$M")" "the container's view is still mounted"
	assert_ok nsenter -t "$C" -m -p -- sh -c "echo after >> '$M/f'"
	assert_eq "before after" "$(tr '\n' ' ' <"$A/f" | sed 's/ $//')" "the container's view is served"
	assert_eq "$(readlink "/proc/$C/ns/mnt")" "$(view_field "$M" .mount_ns)" "status: its mount_ns"
	assert_ok "$STRICTFS" umount --namespace "$C" "$M"
	assert_ok not_in_ns "$C" "$M"
	assert_ok "$STRICTFS" umount "$A"
	assert_ok wait_daemon_gone "$succ" 5
}

# Where a system log listens at /dev/log (journald's or rsyslog's socket), a successor must
# not lose its way to it: it closes every descriptor its state does not name, the log's
# socket among them, and glibc, still holding that number, would send the next message to
# whatever took it (a view's /dev/fuse, an open file) and close that when the send failed.
test_failover_with_a_system_log() {
	in_private_ns _failover_with_a_system_log
}

_failover_with_a_system_log() {
	local A=$T_DIR/a N=$T_DIR/n C=$T_DIR/c Q=$T_DIR/q log=$T_DIR/syslog pid key listener mp i dw held
	private_dev_with_log "$log"
	listener=$REPLY
	new_source fo
	key=$(source_key "$LOOP")
	STRICTFS_CRASH_LIMIT=100 four_views # five kills within the minute are not a crash loop here
	pid=$(view_pid "$A")
	exec {held}<>"$N/held"
	echo one >&"$held"
	start_writer 6
	dw=$REPLY
	for ((i = 2; i <= 6; i++)); do
		sleep 0.3
		assert_ok kill -KILL "$pid"
		assert_ok successor_of "$pid" "$key"
		pid=$REPLY
		for mp in "$A" "$N" "$C" "$Q"; do echo "$i" >"$mp/gen$i" || fail "writing in $mp after kill $i"; done
	done
	assert_ok wait_until 5 grep -q "generation 6 took over 4 view(s) after a crash" "$log"
	assert_eq 5 "$(grep -c "took over 4 view(s) after a crash" "$log")" "the log has each successor's line"
	held_writes_on "$held" "five kills"
	writer_lost_nothing "$dw"
	for mp in "$A" "$N" "$C" "$Q"; do
		assert_eq "2 3 4 5 6" "$(cat "$mp"/gen? | tr '\n' ' ' | sed 's/ $//')" "$mp served after each kill"
	done
	end_four_views "$pid"

	# a view in a container's namespace: there the daemon holds one more descriptor (the
	# namespace's), and the numbers fall so that, without the log opened again, the send
	# closed one the daemon needed (2 runs in 3 left a daemon that never exits)
	test_failover_view_in_a_container
	assert_ok grep -q "generation 2 took over 2 view(s) after a crash" "$log"
	kill "$listener" && wait "$listener" 2>/dev/null
}

# Requests made while no daemon serves (the predecessor dead, the successor not started) wait
# for the successor. Through io_uring, a dead daemon's idle entries stayed in their queues as
# long as their rings were open (the keeper shares the descriptor table), and each took a
# request of its CPU that the kernel ended ECANCELED: 12 such requests in 12. Each entry now
# leaves its queue as its thread dies (arm_tripwire in fuse_uring_serve.c). The requests go out from
# processes ready on each CPU as soon as every thread of the daemon has exited.
test_failover_requests_made_while_no_daemon_serves_are_answered() {
	mkimg gap
	IMG=$REPLY
	local V=$T_DIR/v pid key cpu n
	key=$(source_key "$IMG")
	view "" "$IMG" "$V"
	echo x >"$V/f"
	pid=$(view_pid "$V")
	sleep 0.3 # the keeper starts a successor at once only for a daemon older than 250 ms
	n=$(nproc)
	assert_ok "$PY" - "$pid" "$V" "$T_DIR/gap" <<'PYEOF'
import os, select, sys
pid, mp, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
callers = []
for cpu in range(os.cpu_count()):
    for what in ("statfs", "read"):
        r, w = os.pipe()
        k = os.fork()
        if k == 0:
            os.close(w)
            os.sched_setaffinity(0, {cpu})
            os.read(r, 1)
            try:
                if what == "statfs":
                    os.statvfs(mp)
                    res = "answered"
                else:
                    with open(mp + "/f") as f:
                        res = "read " + f.read().strip()
            except OSError as e:
                res = os.strerror(e.errno)
            with open("%s.%d.%s" % (out, cpu, what), "w") as f:
                f.write(res + "\n")
            os._exit(0)
        os.close(r)
        callers.append((k, w))
pidfd = os.pidfd_open(pid)
os.kill(pid, 9)
select.select([pidfd], [], [])  # readable once every thread of the daemon has exited
for k, w in callers:
    os.write(w, b"x")
for k, w in callers:
    os.waitpid(k, 0)
PYEOF
	assert_ok successor_of "$pid" "$key"
	pid=$REPLY
	for ((cpu = 0; cpu < n; cpu++)); do
		assert_eq answered "$(cat "$T_DIR/gap.$cpu.statfs")" "a statfs from CPU $cpu made in the gap"
		assert_eq "read x" "$(cat "$T_DIR/gap.$cpu.read")" "a read from CPU $cpu made in the gap"
	done
	assert_ok "$STRICTFS" umount "$V"
	assert_ok wait_daemon_gone "$pid" 5
}

# strays_of PID: the descriptors of PID that it can only have from the command that started
# the daemon: stdio not on /dev/null, a pipe, a file of the test's temp dir (the image is
# reached through its loop device, the views' files through the backing).
strays_of() {
	local f t
	for f in /proc/"$1"/fd/*; do
		t=$(readlink "$f") || continue
		if [[ ${f##*/} -le 2 && $t != /dev/null ]] || [[ $t == pipe:* || $t == "$T_DIR"/* ]]; then
			echo "${f##*/} -> $t"
		fi
	done
}

# The daemon, its keeper and a successor start with none of the caller's descriptors: a lock
# the caller holds is free once `strictfs mount` returns, and a script reading the command's
# output through a pipe (here on fd 7 too) gets its end of file then, not at the daemon's exit.
test_failover_no_caller_descriptors_in_daemon_keeper_successor() {
	mkimg fds
	IMG=$REPLY
	local V=$T_DIR/v L=$T_DIR/lockf pid keeper succ key rc
	key=$(source_key "$IMG")
	mkdir -p "$V"
	timeout 10 bash -c 'exec 9>"$1"; flock 9; out=$(exec 7>&1; "$2" mount "$3" "$4")' _ \
		"$L" "$STRICTFS" "$IMG" "$V" </dev/null >"$T_DIR/mount.out" 2>&1
	rc=$?
	assert_eq 0 "$rc" "out=\$(strictfs mount ...) returns at once (124: it waited for the daemon)"
	assert_ok is_mounted "$V"
	pid=$(view_pid "$V")
	assert_ne "" "$pid" "a daemon serves the view"
	assert_ok flock -n "$L" true
	keeper=$(keeper_of "$pid")
	assert_ne "" "$keeper" "the daemon has a keeper"
	assert_eq "" "$(strays_of "$pid")" "the daemon has none of the caller's descriptors"
	assert_eq "" "$(strays_of "$keeper")" "nor has its keeper"
	echo x >"$V/f"
	assert_ok kill -KILL "$pid"
	assert_ok successor_of "$pid" "$key"
	succ=$REPLY
	assert_eq "" "$(strays_of "$succ")" "nor has the successor"
	assert_eq x "$(cat "$V/f" 2>&1)" "the successor serves the view"
	keeper=$(keeper_of "$succ")
	remember_pid "$keeper"
	assert_eq "" "$(strays_of "$keeper")" "nor has the successor's keeper"
	assert_ok "$STRICTFS" umount "$V"
}

test_failover_keeper_killed_is_replaced() {
	mkimg kk
	IMG=$REPLY
	local V=$T_DIR/v pid keeper k2 key
	key=$(source_key "$IMG")
	view "" "$IMG" "$V"
	pid=$(view_pid "$V")
	keeper=$(keeper_of "$pid")
	assert_ok kill -KILL "$keeper"
	assert_ok wait_until 5 eval '[[ -n $(keeper_of '"$pid"') && $(keeper_of '"$pid"') != '"$keeper"' ]]'
	k2=$(keeper_of "$pid")
	assert_eq "$k2" "$(daemon_field "$pid" .keeper)" "status names the new keeper"
	echo x >"$V/f"
	assert_ok kill -KILL "$pid"
	assert_ok successor_of "$pid" "$key"
	assert_eq "$k2" "$REPLY" "the new keeper took over"
	assert_eq x "$(cat "$V/f" 2>&1)" "the view is served"
	assert_ok "$STRICTFS" umount "$V"
}

test_failover_sigterm_ends_views_for_good() {
	mkimg term
	IMG=$REPLY
	local V=$T_DIR/v pid keeper key
	key=$(source_key "$IMG")
	view "" "$IMG" "$V"
	pid=$(view_pid "$V")
	keeper=$(keeper_of "$pid")
	assert_ne "" "$keeper" "the daemon has a keeper"
	assert_eq "$pid" "$(daemon_procs "$key")" "the daemon is the one daemon of its key"
	assert_ok kill -TERM "$pid"
	assert_ok wait_daemon_gone "$pid" 10
	assert_ok wait_until 3 pid_gone "$keeper"
	assert_eq "" "$(daemon_procs "$key")" "SIGTERM: no successor"
	assert_ok not_mounted "$V"
	assert_ok wait_until 5 no_loop_for "$IMG"
}

test_failover_crash_loop_ends_in_eio() {
	mkimg loop
	IMG=$REPLY
	local V=$T_DIR/v W=$T_DIR/w pid key i
	mkdir -p "$W"
	key=$(source_key "$IMG")
	view "" "$IMG" "$V"
	echo data >"$V/f"
	pid=$(view_pid "$V")
	for ((i = 1; i <= 4; i++)); do
		assert_ok kill -KILL "$pid"
		assert_ok successor_of "$pid" "$key"
		pid=$REPLY
		assert_eq data "$(cat "$V/f" 2>&1)" "served again after crash $i"
		assert_eq null "$(daemon_field "$pid" .failed)" "not failed after $i crashes"
	done
	assert_ok kill -KILL "$pid"
	assert_ok successor_of "$pid" "$key"
	pid=$REPLY
	assert_contains "$(daemon_field "$pid" .failed)" "crashed 5 times within 60 s" "status: why it failed"
	assert_contains "$("$STRICTFS" status 2>&1)" "FAILED: the daemon crashed 5 times" "status text says so"
	assert_fails_with "Input/output error" cat "$V/f"
	assert_eq "$V fuse.strictfs" "$(findmnt -n -o TARGET,FSTYPE "$V" | tr -s ' ')" "the view stays mounted"
	assert_refused "its daemon failed" "$STRICTFS" mount "$IMG" "$W"
	assert_ok "$STRICTFS" umount "$V"
	assert_ok wait_daemon_gone "$pid" 5
	assert_eq "" "$(daemon_procs "$key")" "no daemon left"
	assert_ok wait_until 5 no_loop_for "$IMG"
	view "" "$IMG" "$V"
	assert_eq data "$(cat "$V/f" 2>&1)" "a new daemon serves the source again"
}

test_failover_upgrade_keeps_views_and_files() {
	new_source up
	local A=$T_DIR/a N=$T_DIR/n C=$T_DIR/c Q=$T_DIR/q pid keeper out succ dw
	four_views
	pid=$(view_pid "$A")
	keeper=$(keeper_of "$pid")
	exec {held}<>"$N/held"
	echo one >&"$held"
	start_writer 4
	dw=$REPLY
	out=$("$STRICTFS" upgrade "$LOOP" 2>&1)
	assert_eq 0 "$?" "strictfs upgrade: $out"
	assert_contains "$out" "generation 2 (pid $keeper) took over from generation 1 (pid $pid) in" \
		"it says who took over and how long the views waited"
	log "upgrade: $out"
	succ=$keeper
	remember_pid "$succ"
	writer_lost_nothing "$dw"
	for mp in "$A" "$N" "$C" "$Q"; do
		assert_eq "$mp fuse.strictfs" "$(findmnt -n -o TARGET,FSTYPE "$mp" | tr -s ' ')" "$mp is still mounted"
	done
	held_writes_on "$held" "the upgrade"
	assert_eq 2 "$(daemon_field "$succ" .generation)" "status: generation 2"
	assert_ok "$STRICTFS" quota check "$LOOP"
	end_four_views "$succ"
}

# strictfs upgrade --all (what the package runs): every daemon, each to its next generation;
# in a run directory of the test's own, so that no daemon of the machine is touched.
test_failover_upgrade_all() {
	in_private_ns _failover_upgrade_all
}

_failover_upgrade_all() {
	local V=$T_DIR/v W=$T_DIR/w out p q
	private_run_dir
	out=$("$STRICTFS" upgrade --all 2>&1)
	assert_eq "0 no strictfs daemon runs: nothing to upgrade" "$? $out" "with no daemon: nothing to do"
	mkimg all1
	view "" "$REPLY" "$V"
	mkimg all2
	view noacl "$REPLY" "$W"
	p=$(view_pid "$V") q=$(view_pid "$W")
	[[ -n $p && -n $q ]] || die "status does not list the daemons of $V and $W"
	echo v >"$V/f" && echo w >"$W/f"
	out=$("$STRICTFS" upgrade --all 2>&1)
	assert_eq 0 "$?" "strictfs upgrade --all: $out"
	assert_eq 2 "$(grep -c "took over from generation 1" <<<"$out")" "one line for each daemon"
	assert_eq "2 2" "$(daemon_field "$(view_pid "$V")" .generation) $(daemon_field "$(view_pid "$W")" .generation)" \
		"both daemons: generation 2"
	assert_ok pid_gone "$p"
	assert_ok pid_gone "$q"
	assert_eq "v w" "$(cat "$V/f") $(cat "$W/f")" "both views are served"
	assert_fails_with "Operation not supported" setfacl -m u:root:r "$W/f"
	assert_exit 2 "$STRICTFS" upgrade --all "$V"
	assert_ok "$STRICTFS" umount "$V"
	assert_ok "$STRICTFS" umount "$W"
}

test_failover_upgrade_refused_for_a_binary_that_cannot_take_over() {
	mkimg refu
	IMG=$REPLY
	local V=$T_DIR/v bin=$T_DIR/bin/strictfs pid before
	mkdir -p "$T_DIR/bin"
	cp "$STRICTFS" "$bin"
	STRICTFS=$bin view "" "$IMG" "$V"
	pid=$(view_pid "$V")
	assert_eq "$bin" "$(readlink "/proc/$pid/exe")" "the daemon runs the copy"
	echo data >"$V/f"
	mv "$bin" "$bin.real"
	printf '#!/bin/sh\necho "0 0x0"\n' >"$bin"
	chmod +x "$bin"
	assert_refused "reads state 0 0x0, this daemon writes" "$STRICTFS" upgrade "$IMG"
	assert_eq 1 "$(daemon_field "$pid" .generation)" "the daemon serves on"
	assert_eq data "$(cat "$V/f" 2>&1)" "and its view"
	rm "$bin"
	assert_refused "$bin: cannot hand over to it" "$STRICTFS" upgrade "$IMG"
	mkimg none
	assert_refused "no strictfs daemon serves it" "$STRICTFS" upgrade "$REPLY"
	mv "$bin.real" "$bin"
	assert_ok "$STRICTFS" upgrade "$IMG"
	assert_eq 2 "$(sq '.daemons[] | select(.source == "'"$IMG"'") | .generation')" "the real binary takes over"
	assert_eq data "$(cat "$V/f" 2>&1)" "the view is served"
	assert_ok "$STRICTFS" umount "$V"
}


# A package installed since the daemon started, whose binary reads another state (an upgrade
# was refused for it): a crash must not hand the views to it, where they would end. The
# keeper asks it first and runs the daemon's own binary instead; a binary that reads the
# state, installed later, takes the next crash over.
test_failover_crash_with_an_incompatible_binary_installed() {
	mkimg incompat
	IMG=$REPLY
	local V=$T_DIR/v bin=$T_DIR/bin/strictfs pid succ key
	mkdir -p "$T_DIR/bin"
	cp "$STRICTFS" "$bin"
	STRICTFS_CRASH_LIMIT=100 STRICTFS=$bin view "" "$IMG" "$V"
	pid=$(view_pid "$V")
	key=$(source_key "$IMG")
	echo data >"$V/f"
	exec {held}<"$V/f"
	mv "$bin" "$bin.real"
	printf '#!/bin/sh\necho "0 0x0"\n' >"$bin"
	chmod +x "$bin"
	assert_ok kill -KILL "$pid"
	STRICTFS=$bin.real assert_ok successor_of "$pid" "$key"
	succ=$REPLY
	assert_eq "$bin.real" "$(readlink "/proc/$succ/exe")" "the successor runs the binary its predecessor ran"
	assert_eq 2 "$(daemon_field "$succ" .generation)" "status: generation 2"
	assert_eq data "$(cat <&"$held")" "a file opened before the crash reads on"
	echo more >>"$V/f" || fail "the view is served"
	# a binary that reads the state installed (a new file): the next crash runs it
	cp "$bin.real" "$bin.new" && mv "$bin.new" "$bin"
	pid=$succ
	assert_ok kill -KILL "$pid"
	STRICTFS=$bin assert_ok successor_of "$pid" "$key"
	succ=$REPLY
	assert_eq "$bin" "$(readlink "/proc/$succ/exe")" "the next successor runs the binary installed"
	assert_eq "data more" "$(tr '\n' ' ' <"$V/f" | sed 's/ $//')" "nothing was lost"
	exec {held}<&-
	assert_ok "$STRICTFS" umount "$V"
	assert_ok wait_daemon_gone "$succ" 5
}

# load_start SECONDS XATTR DIR...: the issue's load on each view DIR for SECONDS: fio randwrite
# with verify=crc32c, and stress-ng writing and verifying files and changing names (hdd,
# fallocate, dir, rename, link, and xattr when XATTR is "xattr"). The pids in LOAD_PIDS, each
# tool's output under $T_DIR/load.
load_start() {
	local secs=$1 xattr=() d v
	[[ $2 == xattr ]] && xattr=(--xattr 1)
	shift 2
	LOAD_PIDS=()
	LOAD_VIEWS=()
	mkdir -p "$T_DIR/load"
	for d; do
		v=$(basename "$d")
		LOAD_VIEWS+=("$v")
		mkdir -p "$d/fio" "$d/sng" || die "mkdir in $d"
		fio --name="w-$v" --directory="$d/fio" --rw=randwrite --bsrange=4k-64k --size=16M \
			--nrfiles=2 --verify_backlog=64 --verify_fatal=1 --fsync=64 --time_based \
			--runtime="$secs" --ioengine=psync --verify=crc32c --output-format=json \
			>"$T_DIR/load/fio-$v.json" 2>"$T_DIR/load/fio-$v.err" &
		LOAD_PIDS+=($!)
		stress-ng --hdd 1 --hdd-bytes 8M --fallocate 1 --fallocate-bytes 8M --dir 1 --rename 1 \
			--link 1 "${xattr[@]}" --verify --timeout "${secs}s" --temp-path "$d/sng" \
			--metrics-brief --yaml "$T_DIR/load/sng-$v.yaml" >"$T_DIR/load/sng-$v.log" 2>&1 &
		LOAD_PIDS+=($!)
	done
}

# load_ended_well: waits for the load and checks what its tools said: fio wrote, read back and
# verified with no error, stress-ng completed every stressor without a failure. Logs a line per
# view, and each problem with the tool's own words.
load_ended_well() {
	local p v j w r e mm ops bad=0
	for p in "${LOAD_PIDS[@]}"; do wait "$p"; done
	for v in "${LOAD_VIEWS[@]}"; do
		j=$T_DIR/load/fio-$v.json
		w=$(jq -r '[.jobs[].write.io_bytes] | add' "$j" 2>/dev/null)
		r=$(jq -r '[.jobs[].read.io_bytes] | add' "$j" 2>/dev/null)
		e=$(jq -r '[.jobs[].error] | add' "$j" 2>/dev/null)
		mm=$(grep -c 'verify failed\|bad magic\|bad header' "$T_DIR/load/fio-$v.err")
		ops=$(awk '/bogo-ops:/ { s += $2 } END { print s + 0 }' "$T_DIR/load/sng-$v.yaml" 2>/dev/null)
		log "load on $v: fio wrote ${w:-?} bytes, verified ${r:-?}, error ${e:-?}, $mm mismatches; stress-ng $ops bogo ops"
		if ! [[ $w =~ ^[0-9]+$ && $w -gt 0 && $r =~ ^[0-9]+$ && $r -gt 0 && $e == 0 && $mm == 0 ]]; then
			log "fio on $v: $(_short "$T_DIR/load/fio-$v.err")"
			bad=1
		fi
		if grep -qE 'unsuccessful|FAIL|fail:|error' "$T_DIR/load/sng-$v.log" ||
			! grep -q 'successful run completed' "$T_DIR/load/sng-$v.log" || ((ops == 0)); then
			log "stress-ng on $v: $(grep -vE '^(stress-ng: )?(info|metrc)' "$T_DIR/load/sng-$v.log" | head -5 | tr '\n' '|')"
			bad=1
		fi
	done
	return "$bad"
}

all_mounted() { # MOUNTPOINT...
	local mp
	for mp; do
		[[ $(findmnt -n -o TARGET,FSTYPE "$mp" | tr -s ' ') == "$mp fuse.strictfs" ]] || {
			log "$mp is not mounted"
			return 1
		}
	done
}

test_failover_upgrade_under_load() {
	new_source upl
	local A=$T_DIR/a N=$T_DIR/n C=$T_DIR/c Q=$T_DIR/q pid out dw i
	four_views
	pid=$(view_pid "$A")
	exec {held}<>"$C/held"
	echo one >&"$held"
	load_start 24 xattr "$A" "$N" "$C" "$Q"
	durable_writer "$Q/log" "$T_DIR/acked" 24 >"$T_DIR/dw.out" &
	dw=$!
	for i in 2 3; do
		sleep 8
		out=$("$STRICTFS" upgrade "$LOOP" 2>&1)
		assert_eq 0 "$?" "strictfs upgrade under load: $out"
		assert_contains "$out" "generation $i (pid" "generation $i took over"
		log "upgrade: $out"
		pid=$(daemon_procs "$(source_key "$LOOP")" | head -n1)
		remember_pid "$pid"
	done
	load_ended_well
	assert_eq 0 "$?" "fio verified its data and stress-ng completed, with no error"
	writer_lost_nothing "$dw"
	assert_ok all_mounted "$A" "$N" "$C" "$Q"
	held_writes_on "$held" "the upgrades"
	assert_eq 3 "$(daemon_field "$pid" .generation)" "status: generation 3"
	assert_ok "$STRICTFS" quota check "$LOOP"
	end_four_views "$pid"
}

# killer KEY PROBE KILLS SEED OUT: kills the daemon serving KEY KILLS times, each at a random
# moment 0.25 to 0.85 s after its successor has a keeper (a keeper holds back a successor
# that dies within 0.25 s of its start: a crash loop is slowed down on purpose). Right after each kill it times a statfs
# of PROBE: the stall an application sees. Writes one line per kill (milliseconds) to OUT and
# prints "KILLS kills" when all were made, else why not.
killer() {
	"$PY" - "$@" <<'EOF'
import os, random, signal, sys, time
key, probe, kills, seed, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
random.seed(seed)

def cmdline(p):
    try:
        return open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
    except OSError:
        return []

def alive(p):
    try:
        return open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False

def daemons():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()
            and cmdline(p)[1:3] == [b"__daemon", key.encode()] and alive(int(p))]

def has_keeper(d):
    kids = []
    for t in os.listdir("/proc/%d/task" % d):
        try:
            kids += open("/proc/%d/task/%s/children" % (d, t)).read().split()
        except OSError:
            pass
    return any(b"__keeper" in cmdline(k) for k in kids)

with open(out, "w") as f:
    for i in range(kills):
        end = time.monotonic() + 10
        while True:
            ds = daemons()
            if len(ds) == 1 and has_keeper(ds[0]):
                break
            if time.monotonic() > end:
                print("kill %d: no daemon with a keeper after 10 s (%s)" % (i + 1, ds))
                sys.exit(1)
            time.sleep(0.002)
        time.sleep(random.uniform(0.25, 0.85))
        t0 = time.monotonic()
        os.kill(ds[0], signal.SIGKILL)
        try:
            os.statvfs(probe)
        except OSError as e:
            print("kill %d: statfs after it: %s" % (i + 1, e))
            sys.exit(1)
        f.write("%.1f\n" % ((time.monotonic() - t0) * 1000))
        f.flush()
print("%d kills" % kills)
EOF
}

# prober PATH SECONDS: statfs of PATH without pause for SECONDS; prints the count and errors.
prober() {
	"$PY" - "$1" "$2" <<'EOF'
import os, sys, time
n = errs = 0
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        os.statvfs(sys.argv[1])
    except OSError as e:
        errs += 1
        last = e
    n += 1
print("%d statfs, %d errors%s" % (n, errs, " (%s)" % last if errs else ""))
EOF
}

# A slow test (test_slow_*): test/run runs it, with SFS_SLOW_TIMEOUT, unless SFS_SKIP_SLOW=1.
# test/stress/failover runs it alone, by hand, with another number of kills (KILLS, default
# 100) or another seed (SEED), and records what the runs it made found.
test_slow_failover_kills_under_load() {
	new_source kills
	local A=$T_DIR/a N=$T_DIR/n C=$T_DIR/c Q=$T_DIR/q key pid out dw pr seed=${SEED:-$RANDOM} stalls
	local kills=${KILLS:-100}
	key=$(source_key "$LOOP")
	# a hundred kills within a minute are this test's doing, not a crash loop
	STRICTFS_CRASH_LIMIT=1000 view "" "$LOOP" "$A"
	view noacl,nouser_xattr "$LOOP" "$N"
	view casefold "$LOOP" "$C"
	view quota "$LOOP" "$Q"
	exec {held}<>"$C/held"
	echo one >&"$held"
	# The xattr stressor is left out: an XATTR_CREATE or removexattr made just before a kill
	# answers EEXIST or ENODATA when sent again, a documented limit (strictfs(8), FAILOVER).
	load_start 75 noxattr "$A" "$N" "$C" "$Q"
	durable_writer "$Q/log" "$T_DIR/acked" 75 >"$T_DIR/dw.out" &
	dw=$!
	prober "$N" 75 >"$T_DIR/probe.out" &
	pr=$!
	log "killer seed $seed"
	out=$(killer "$key" "$A" "$kills" "$seed" "$T_DIR/stalls" 2>&1)
	assert_eq "$kills kills" "$out" "$kills SIGKILLs under load, each daemon replaced"
	for pid in $(daemon_procs "$key"); do remember_pid "$pid"; done
	stalls=$(sort -n "$T_DIR/stalls" | awk '{ a[NR] = $1 } END { if (NR) printf "median %s ms, worst %s ms, of %d", a[int((NR + 1) / 2)], a[NR], NR }')
	log "stall from a kill to a statfs begun then answered: $stalls"
	load_ended_well
	assert_eq 0 "$?" "fio verified its data and stress-ng completed, with no error"
	writer_lost_nothing "$dw"
	wait "$pr"
	log "prober: $(cat "$T_DIR/probe.out")"
	assert_contains "$(cat "$T_DIR/probe.out")" " 0 errors" "a statfs without pause saw no error"
	assert_ok all_mounted "$A" "$N" "$C" "$Q"
	held_writes_on "$held" "the kills"
	pid=$(daemon_procs "$key" | head -n1)
	assert_eq $((kills + 1)) "$(daemon_field "$pid" .generation)" "status: generation $((kills + 1))"
	assert_ok "$STRICTFS" quota check "$LOOP"
	end_four_views "$pid"
}

# all_threads_traced PID TRACER: every thread of PID is traced by TRACER (false if PID is gone)
all_threads_traced() {
	local t
	[[ -d /proc/$1/task ]] || return 1
	for t in /proc/"$1"/task/*; do
		grep -q "^TracerPid:[[:space:]]*$2\$" "$t/status" 2>/dev/null || return 1
	done
}

# held_seen SYSCALL ARGS: strace (-ff, a file a thread) shows a SYSCALL whose arguments match
# ARGS returned success and is held
held_seen() {
	cat "$T_DIR"/held.strace.* 2>/dev/null | grep -qE "^$1\\(.*$2.*\\) += [0-9]+ .*\\(DELAYED\\)\$"
}

# held_change SYSCALL ARGS CMD...: runs CMD through a view while the daemon's SYSCALL is held
# at its return (strace delays it 5 s): the change is made in the backing, the answer not
# sent. Once strace shows the call (its arguments matching the extended regex ARGS) returned
# success and is held, and CMD still waits, the daemon is killed; its successor gets the
# request again (FUSE_NOTIFY_RESEND). CMD's exit status and output in RC, OUT.
# (Not a lookup through another view to see the change: its kernel may have the name cached
# from before the change, and would see the change only once the answer had gone. And every
# SYSCALL of the daemon is held: for openat, the O_PATH opens of lookups too.)
held_change() {
	local sc=$1 args=$2 pid st c key
	shift 2
	key=$(source_key "$IMG")
	pid=$(daemon_procs "$key" | head -n1)
	rm -f "$T_DIR"/held.strace.*
	strace -qq -ff -p "$pid" -e trace="$sc" -e inject="$sc":delay_exit=5000000 \
		-o "$T_DIR/held.strace" 2>"$T_DIR/held.err" &
	st=$!
	# every thread, not only the main one: a request taken by a thread not yet traced would
	# not be held
	wait_until 10 all_threads_traced "$pid" "$st" || die "strace did not attach to every thread of $pid"
	"$@" >"$T_DIR/held.out" 2>&1 &
	c=$!
	if wait_until 20 held_seen "$sc" "$args"; then
		ok "held: $(cat "$T_DIR"/held.strace.* | grep -E "^$sc\\(.*$args" | grep -m1 DELAYED)"
	else
		fail "$sc ($args) not seen held: $*: $(cat "$T_DIR"/held.strace.* 2>/dev/null | tr '\n' '|' | cut -c1-300)"
	fi
	# the answer still held back: else the kill resends nothing
	if pid_alive "$c"; then
		ok "$* still waits for its answer at the kill"
	else
		fail "$* had its answer before the kill: nothing to resend"
	fi
	kill -KILL "$pid"
	successor_of "$pid" "$key" || fail "no successor"
	wait "$c"
	RC=$?
	OUT=$(cat "$T_DIR/held.out")
	wait "$st" 2>/dev/null
}

test_failover_resent_changes_answer_as_first() {
	mkimg resent
	IMG=$REPLY
	local V=$T_DIR/v W=$T_DIR/w
	# five kills within a minute are this test's doing, not a crash loop
	STRICTFS_CRASH_LIMIT=100 view "" "$IMG" "$V"
	view "" "$IMG" "$W"
	echo x >"$V/victim"
	echo y >"$V/moved"
	echo z >"$V/target"
	held_change mkdirat '"d"' mkdir "$V/d"
	assert_eq "0 " "$RC $OUT" "a mkdir made before the kill answers success, not EEXIST"
	held_change unlinkat '"victim"' rm "$V/victim"
	assert_eq "0 " "$RC $OUT" "an unlink made before the kill answers success, not ENOENT"
	held_change renameat2 '"moved", .*"renamed"' mv -T "$V/moved" "$V/renamed"
	assert_eq "0 " "$RC $OUT" "a rename made before the kill answers success"
	assert_eq y "$(cat "$W/renamed")" "the moved file is where the rename put it"
	held_change linkat '"hard"' ln "$V/target" "$V/hard"
	assert_eq "0 " "$RC $OUT" "a link made before the kill answers success, not EEXIST"
	held_change openat '"excl", [^)]*O_EXCL' "$PY" -c \
		'import os, sys; fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644); os.write(fd, b"new"); os.close(fd)' \
		"$V/excl"
	assert_eq "0 " "$RC $OUT" "an O_EXCL create made before the kill answers success, not EEXIST"
	assert_eq new "$(cat "$W/excl")" "and its descriptor writes"
	assert_eq "d excl hard renamed target" "$(find "$W" -mindepth 1 -maxdepth 1 ! -name lost+found -printf '%f\n' | sort | tr '\n' ' ' | sed 's/ $//')" \
		"the other view lists each change, made once"
	assert_ok "$STRICTFS" quota check "$IMG"
	assert_ok "$STRICTFS" umount "$V"
	assert_ok "$STRICTFS" umount "$W"
}

# A successor finds an open file's node again through the file's descriptor record; that
# descriptor is on the view's clone of the backing, and a node given it made every link or
# rename of the file EXDEV (stress-ng's link stressor saw it once in 100 kills).
no_lock_owners() { [[ $(daemon_field "$1" .lock_owners) == 0 ]]; } # PID

# Locks survive failover (contract §4.6): a POSIX lock and a flock held through view A across
# 100 SIGKILLs of the daemon keep view B's processes out after every one, their holder lets
# them go afterwards, and the daemon keeps no lock owner once the file is closed.
test_failover_locks_held_across_kills() {
	new_source fol
	local A=$T_DIR/a B=$T_DIR/b pid key i lost=0 reply
	key=$(source_key "$LOOP")
	STRICTFS_CRASH_LIMIT=1000 view "" "$LOOP" "$A"
	view noacl "$LOOP" "$B"
	echo x >"$A/f"
	coproc HOLDER { "$PY" -u -c 'import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
fcntl.flock(fd, fcntl.LOCK_SH)
print("held")
sys.stdin.readline()
fcntl.lockf(fd, fcntl.LOCK_UN)
fcntl.flock(fd, fcntl.LOCK_UN)
print("let go")
sys.stdin.readline()
os.close(fd)
print("closed")' "$A/f"; }
	read -r -t 10 reply <&"${HOLDER[0]}"
	assert_eq held "$reply" "the holder has its locks through A"
	pid=$(view_pid "$A")
	for ((i = 0; i < 100; i++)); do
		kill -KILL "$pid"
		successor_of "$pid" "$key" || break
		pid=$REPLY
		if "$PY" "$SFS_TEST_DIR/locks_try.py" "$B/f" 2>/dev/null ||
			"$PY" -c 'import fcntl, sys; fcntl.flock(open(sys.argv[1]), fcntl.LOCK_EX | fcntl.LOCK_NB)' "$B/f" 2>/dev/null; then
			lost=$((lost + 1))
		fi
	done
	assert_eq 100 "$i" "100 kills, each taken over"
	assert_eq 0 "$lost" "kills after which B could take a lock the holder had"
	echo >&"${HOLDER[1]}"
	read -r -t 10 reply <&"${HOLDER[0]}"
	assert_eq "let go" "$reply" "the holder lets its locks go through the last successor"
	assert_ok "$PY" "$SFS_TEST_DIR/locks_try.py" "$B/f"
	echo >&"${HOLDER[1]}"
	read -r -t 10 reply <&"${HOLDER[0]}"
	assert_eq closed "$reply" "the holder closed the file"
	assert_ok wait_until 10 no_lock_owners "$pid"
}

# Lock waiters outlive the daemon: four processes on one CPU wait through view B for a lock
# held through view A (over io_uring all four in one queue, three of them in spare entries);
# the daemon is killed while they wait, and once the holder lets go every one of them is
# granted the lock in turn, through the successor.
test_failover_lock_waiters_survive_a_kill() {
	new_source folw
	local A=$T_DIR/a B=$T_DIR/b pid key reply i granted=0 ws=()
	key=$(source_key "$LOOP")
	view "" "$LOOP" "$A"
	view noacl "$LOOP" "$B"
	echo x >"$A/f"
	coproc HOLDER { "$PY" -u -c 'import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("held")
sys.stdin.readline()
os.close(fd)
print("let go")' "$A/f"; }
	read -r -t 10 reply <&"${HOLDER[0]}"
	assert_eq held "$reply" "the holder has its lock through A"
	for ((i = 0; i < 4; i++)); do
		taskset -c 0 "$PY" -c 'import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
fcntl.lockf(fd, fcntl.LOCK_UN)' "$B/f" >"$T_DIR/w$i.out" 2>&1 &
		ws+=($!)
	done
	sleep 1
	for i in "${ws[@]}"; do
		kill -0 "$i" 2>/dev/null || fail "waiter $i ended before the holder let go: $(cat "$T_DIR"/w*.out)"
	done
	pid=$(view_pid "$A")
	kill -KILL "$pid"
	successor_of "$pid" "$key" || fail "no successor took the views over"
	echo >&"${HOLDER[1]}"
	read -r -t 10 reply <&"${HOLDER[0]}"
	assert_eq "let go" "$reply" "the holder lets go through the successor"
	for i in "${ws[@]}"; do
		timeout 30 tail --pid="$i" -f /dev/null && wait "$i" && granted=$((granted + 1))
	done
	assert_eq 4 "$granted" "waiters granted the lock after the kill (out: $(cat "$T_DIR"/w*.out))"
}

test_failover_open_files_link_and_rename_after_kill() {
	mkimg exdev
	IMG=$REPLY
	local V=$T_DIR/v pid
	view "" "$IMG" "$V"
	mkdir "$V/d" "$V/e"
	echo x >"$V/d/f"
	echo y >"$V/d/m"
	exec {held}<"$V/d/f"
	exec {dh}<"$V/e"
	pid=$(view_pid "$V")
	assert_ok kill -KILL "$pid"
	assert_ok successor_of "$pid" "$(source_key "$IMG")"
	pyop() { "$PY" -c "import os, sys; getattr(os, sys.argv[1])(sys.argv[2], sys.argv[3])" "$@"; }
	assert_ok pyop link "$V/d/f" "$V/d/g"
	assert_ok pyop link "$V/d/f" "$V/e/h"
	assert_ok pyop rename "$V/d/m" "$V/e/m"
	assert_ok pyop rename "$V/e/h" "$V/d/h"
	assert_eq "x x y" "$(cat "$V/d/g" "$V/d/h" "$V/e/m" | tr '\n' ' ' | sed 's/ $//')" \
		"the links and renames of an open file and in an open directory hold"
	exec {held}<&- {dh}<&-
	assert_ok "$STRICTFS" umount "$V"
}
[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
