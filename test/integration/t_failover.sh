#!/bin/bash
# Views that outlive their daemon (contract §6, "Failover", issue 17): the daemon killed
# (SIGKILL, as a crash or the OOM killer would) is replaced by its keeper's successor, which serves the same
# views: they stay mounted, in the host's and in a container's namespace, open files and
# directory streams keep working, writers see no error, nothing fsynced is lost, and the
# quota ledger equals a fresh scan. status shows the generation and when it took over.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# successor_of PID: waits for the daemon that took over from PID (its keeper) to answer; its
# pid in REPLY.
successor_of() {
	local k=$1 key=$2 i p
	for ((i = 0; i < 200; i++)); do
		p=$(daemon_procs "$key" | head -n1)
		if [[ -n $p && $p != "$k" ]] && "$STRICTFS" status --json >/dev/null 2>&1; then
			REPLY=$p
			remember_pid "$p"
			return 0
		fi
		sleep 0.05
	done
	return 1
}

four_views() { # views of LOOP at A (acl), N (noacl,nouser_xattr), C (casefold), Q (quota)
	view "" "$LOOP" "$A"
	view noacl,nouser_xattr "$LOOP" "$N"
	view casefold "$LOOP" "$C"
	view quota "$LOOP" "$Q"
}

daemon_field() { # PID JQ-PATH
	sq --argjson p "$1" ".daemons[]? | select(.pid == \$p) | $2"
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
	local A=$T_DIR/a N=$T_DIR/n C=$T_DIR/c Q=$T_DIR/q pid keeper succ key i
	key=$(source_key "$LOOP")
	four_views
	pid=$(view_pid "$A")
	keeper=$(keeper_of "$pid")
	assert_ne "" "$keeper" "the daemon has a keeper"
	assert_eq "$keeper" "$(daemon_field "$pid" .keeper)" "status names the keeper"
	assert_eq 1 "$(daemon_field "$pid" .generation)" "the first daemon is generation 1"
	assert_lt "$(awk '/^RssAnon:/ { print $2 }' "/proc/$keeper/status")" 2048 "the keeper is tiny (under 2 MiB of its own)"

	mkdir "$A/dir" && for ((i = 0; i < 600; i++)); do : >"$A/dir/f$i"; done
	echo mixed >"$A/MixedCase"
	setfacl -m "u:$SFS_ALICE:r" "$A/MixedCase"
	exec {held}<>"$N/held"
	echo one >&"$held"
	mkfifo "$T_DIR/go"
	dir_reader "$A/dir" "$T_DIR/go" "$T_DIR/dr.out"
	durable_writer "$Q/log" "$T_DIR/acked" 8 >"$T_DIR/dw.out" &
	local dw=$!
	wait_until 10 test -s "$T_DIR/acked" || die "the writer did not start"
	sleep 0.5

	assert_ok kill -KILL "$pid"
	assert_ok successor_of "$pid" "$key"
	succ=$REPLY
	assert_eq "$keeper" "$succ" "the keeper became the successor"
	assert_eq 2 "$(daemon_field "$succ" .generation)" "status: generation 2"
	assert_ne "" "$(daemon_field "$succ" .took_over)" "status: when it took over"
	assert_ne "" "$(keeper_of "$succ")" "the successor has a keeper of its own"
	assert_eq "$A $C $N $Q" "$(sq --argjson p "$succ" '.daemons[] | select(.pid == $p) | [.views[].mountpoint] | sort | join(" ")')" \
		"the successor serves the four views"

	for mp in "$A" "$N" "$C" "$Q"; do
		assert_eq "$mp fuse.strictfs" "$(findmnt -n -o TARGET,FSTYPE "$mp" | tr -s ' ')" "$mp is still mounted"
	done
	assert_eq mixed "$(cat "$C/mixedcase" 2>&1)" "the casefold view still folds"
	assert_contains "$(getfacl -p "$A/MixedCase" 2>&1)" "user:$SFS_ALICE:r--" "the acl view still has ACLs"
	assert_not_contains "$(getfacl -p "$N/MixedCase" 2>&1)" "user:$SFS_ALICE" "the noacl view still has none"
	assert_fails_with "Operation not supported" setfattr -n user.x -v 1 "$N/held"
	echo two >&"$held"
	exec {held}>&-
	assert_eq "one two" "$(tr '\n' ' ' <"$A/held" | sed 's/ $//')" "a descriptor opened before the kill writes on"
	echo >"$T_DIR/go"
	assert_ok wait_until 10 test -s "$T_DIR/dr.out"
	assert_eq 600 "$(cat "$T_DIR/dr.out")" "a directory stream opened before the kill lists on"
	wait "$dw"
	assert_eq END "$(cat "$T_DIR/dw.out")" "the fsyncing writer saw no error"
	assert_ok acked_lines_present "$A/log" "$T_DIR/acked"
	assert_ok "$STRICTFS" quota check "$LOOP"

	for mp in "$A" "$N" "$C" "$Q"; do assert_ok "$STRICTFS" umount "$mp"; done
	assert_ok wait_daemon_gone "$succ" 5
	assert_eq "" "$(daemon_procs "$key")" "no daemon left"
	assert_ok wait_until 3 pid_gone "$(keeper_of "$succ")"
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
	durable_writer "$Q/log" "$T_DIR/acked" 4 >"$T_DIR/dw.out" &
	dw=$!
	wait_until 10 test -s "$T_DIR/acked" || die "the writer did not start"
	out=$("$STRICTFS" upgrade "$LOOP" 2>&1)
	assert_eq 0 "$?" "strictfs upgrade: $out"
	assert_contains "$out" "generation 2 (pid $keeper) took over from generation 1 (pid $pid) in" \
		"it says who took over and how long the views waited"
	log "upgrade: $out"
	succ=$keeper
	remember_pid "$succ"
	wait "$dw"
	assert_eq END "$(cat "$T_DIR/dw.out")" "the fsyncing writer saw no error"
	assert_ok acked_lines_present "$A/log" "$T_DIR/acked"
	for mp in "$A" "$N" "$C" "$Q"; do
		assert_eq "$mp fuse.strictfs" "$(findmnt -n -o TARGET,FSTYPE "$mp" | tr -s ' ')" "$mp is still mounted"
	done
	echo two >&"$held"
	exec {held}>&-
	assert_eq "one two" "$(tr '\n' ' ' <"$A/held" | sed 's/ $//')" "a descriptor opened before the upgrade writes on"
	assert_eq 2 "$(daemon_field "$succ" .generation)" "status: generation 2"
	assert_ok "$STRICTFS" quota check "$LOOP"
	for mp in "$A" "$N" "$C" "$Q"; do assert_ok "$STRICTFS" umount "$mp"; done
	assert_ok wait_daemon_gone "$succ" 5
	assert_ok device_free "$LOOP"
	assert_ok fsck_clean "$LOOP"
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


# held_change SYSCALL DONE-CHECK CMD...: runs CMD through a view while the daemon's SYSCALL is
# held at its return (strace delays it): the change is made in the backing, the answer not
# sent. Once DONE-CHECK (a command) sees the change, the daemon is killed; its successor gets
# the request again (FUSE_NOTIFY_RESEND). CMD's exit status and output in RC, OUT.
held_change() {
	local sc=$1 check=$2 pid st c key
	shift 2
	key=$(source_key "$IMG")
	pid=$(daemon_procs "$key" | head -n1)
	strace -qq -f -p "$pid" -e trace="$sc" -e inject="$sc":delay_exit=5000000 -o /dev/null &
	st=$!
	wait_until 5 grep -q "^TracerPid:[[:space:]]*$st" "/proc/$pid/status" || die "strace did not attach"
	"$@" >"$T_DIR/held.out" 2>&1 &
	c=$!
	wait_until 5 eval "$check" || fail "the change was not made: $*"
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
	held_change mkdirat "test -d '$W/d'" mkdir "$V/d"
	assert_eq "0 " "$RC $OUT" "a mkdir made before the kill answers success, not EEXIST"
	held_change unlinkat "test ! -e '$W/victim'" rm "$V/victim"
	assert_eq "0 " "$RC $OUT" "an unlink made before the kill answers success, not ENOENT"
	held_change renameat2 "test ! -e '$W/moved'" mv -T "$V/moved" "$V/renamed"
	assert_eq "0 " "$RC $OUT" "a rename made before the kill answers success"
	assert_eq y "$(cat "$W/renamed")" "the moved file is where the rename put it"
	held_change linkat "test -e '$W/hard'" ln "$V/target" "$V/hard"
	assert_eq "0 " "$RC $OUT" "a link made before the kill answers success, not EEXIST"
	held_change openat "test -e '$W/excl'" "$PY" -c \
		'import os, sys; fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644); os.write(fd, b"new"); os.close(fd)' \
		"$V/excl"
	assert_eq "0 " "$RC $OUT" "an O_EXCL create made before the kill answers success, not EEXIST"
	assert_eq new "$(cat "$W/excl")" "and its descriptor writes"
	assert_ok "$STRICTFS" quota check "$IMG"
	assert_ok "$STRICTFS" umount "$V"
	assert_ok "$STRICTFS" umount "$W"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
