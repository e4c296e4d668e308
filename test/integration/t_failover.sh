#!/bin/bash
# Views that outlive their daemon (contract §6.4, issue 17): the daemon killed (SIGKILL, as a
# crash or the OOM killer would) is replaced by its keeper's successor, which serves the same
# views: they stay mounted, in the host's and in a container's namespace, open files and
# directory streams keep working, writers see no error, nothing fsynced is lost, and the
# quota ledger equals a fresh scan. status shows the generation and when it took over.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# successor_of PID: waits for the daemon that took over from PID (its keeper) to answer; its
# pid in REPLY.
successor_of() {
	local k=$1 key=$2 i p
	for ((i = 0; i < 100; i++)); do
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
	view "" "$LOOP" "$A"
	view noacl,nouser_xattr "$LOOP" "$N"
	view casefold "$LOOP" "$C"
	view quota "$LOOP" "$Q"
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

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
