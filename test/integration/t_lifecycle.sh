#!/bin/bash
# Control and lifecycle (contract §2, §6): status, external umount, last view, SIGTERM (also for a
# view in another mount namespace), the control socket, and the daemon's detachment.
# transport-independent: test_syslog_lines: the lines a mount, a refusal and an unmount log, before or after any request
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

two_image_views() {
	mkimg life
	IMG=$REPLY
	A=$T_DIR/a
	B=$T_DIR/b
	view noacl "$IMG" "$A"
	view "" "$IMG" "$B"
	PID=$(view_pid "$A")
	[[ -n $PID ]] || die "status does not list $A"
}

jcheck() { # JQ-ARGS... FILTER MSG: the filter over the status is true
	local msg=${!#}
	local args=("${@:1:$#-1}")
	if sfs_json | jq -e "${args[@]}" >/dev/null 2>&1; then ok "status: $msg"; else fail "status: $msg"; fi
}

test_status_json_schema() {
	two_image_views
	local d='.daemons[] | select(.pid == $p)'
	jcheck '.version == 1' "version 1"
	jcheck '.daemons | type == "array"' "daemons is an array"
	jcheck --argjson p "$PID" "[$d] | length == 1" "daemon listed once"
	jcheck --argjson p "$PID" --arg s "$IMG" "$d | .source == \$s" "source"
	jcheck --argjson p "$PID" "$d | .backing.device | test(\"^[0-9]+:[0-9]+\$\")" "backing.device is MAJ:MIN"
	jcheck --argjson p "$PID" "$d | .backing.mode == \"exclusive\"" "backing.mode"
	jcheck --argjson p "$PID" --arg l "$(loops_of "$IMG")" "$d | .backing.loop == \$l" "backing.loop"
	jcheck --argjson p "$PID" "$d | .backing.options | type == \"array\"" "backing.options is an array"
	jcheck --argjson p "$PID" "$d | .views | length == 2" "two views"
	jcheck --argjson p "$PID" "$d | .views | all(.requested | type == \"string\")" "views[].requested"
	jcheck --argjson p "$PID" "$d | .views | all(.options | (.acl | type == \"boolean\") and (.user_xattr | type == \"boolean\") and (.ro | type == \"boolean\"))" \
		"views[].options acl/user_xattr/ro are booleans"
	jcheck --argjson p "$PID" "$d | .views | all(.options | (.casefold | type == \"string\") and (.quota | type == \"string\") and (.subdir | type == \"string\") and (.df | type == \"string\"))" \
		"views[].options casefold/quota/subdir/df are strings"
	jcheck --argjson p "$PID" "$d | .views | all(.options.mount_flags | type == \"array\")" "views[].options.mount_flags is an array"
	assert_eq noacl "$(view_field "$A" .requested)" "requested as given"
}

test_status_human_readable() {
	two_image_views
	local out
	out=$("$STRICTFS" status 2>&1)
	assert_eq 0 "$?" "strictfs status exits 0"
	assert_contains "$out" "$IMG" "names the source"
	assert_contains "$out" "$A" "names view A"
	assert_contains "$out" "$B" "names view B"
	assert_contains "$out" "$PID" "shows the pid"
	assert_contains "$out" exclusive "shows the mode"
}

test_external_umount_noticed() {
	two_image_views
	assert_ok umount "$A"
	assert_ok wait_until 3 status_lacks_view "$A"
	assert_eq "$B" "$(daemon_views "$PID")" "status lists only B"
	assert_ok pid_alive "$PID"
	assert_ok sh -c "echo x > '$B/f'"
	assert_eq x "$(cat "$B/f")" "B still works"
}

test_last_external_umount_ends_daemon() {
	two_image_views
	assert_ok umount "$A"
	assert_ok umount "$B"
	assert_ok wait_daemon_gone "$PID" 3
	assert_ok wait_until 3 no_loop_for "$IMG"
	assert_eq "" "$(sq --argjson p "$PID" '.daemons[]? | select(.pid == $p) | .pid')" "status no longer lists the daemon"
}

test_strictfs_umount_of_last_view_waits_for_daemon() {
	two_image_views
	assert_ok sfs_umount "$A"
	assert_ok not_mounted "$A"
	assert_ok pid_alive "$PID"
	assert_ok wait_until 2 status_lacks_view "$A"
	assert_ok sfs_umount "$B"
	assert_ok pid_gone "$PID"
	assert_ok wait_until 2 no_loop_for "$IMG"
}

test_sigterm_unmounts_views_and_releases_loop() {
	two_image_views
	echo kept >"$B/f"
	assert_ok kill -TERM "$PID"
	assert_ok wait_daemon_gone "$PID" 10
	assert_ok not_mounted "$A"
	assert_ok not_mounted "$B"
	assert_ok wait_until 3 no_loop_for "$IMG"
	view "" "$IMG" "$B"
	assert_ne "$PID" "$(view_pid "$B")" "a new daemon serves a new view"
	assert_eq kept "$(cat "$B/f" 2>&1)" "data written before SIGTERM is there"
}

# swapped_view: an attacker's set-up. sfs_alice owns a directory D ($T_DIR/home/d) with a
# view mounted at D/v, and another mount (a tmpfs with a file "mark") is at $T_DIR/other/v.
# Sets D, V, O (the other mount), PID. swap_view then has alice rename D to D.old and put a
# symlink to $T_DIR/other in its place: the view's path leads to the other mount.
swapped_view() {
	local H=$T_DIR/home
	mkimg swap
	IMG=$REPLY
	D=$H/d
	V=$D/v
	O=$T_DIR/other/v
	mkdir -p "$H" "$O"
	chown "$SFS_ALICE" "$H"
	need as_user "$SFS_ALICE" mkdir "$D" "$V"
	mount -t tmpfs other "$O" || die "mount tmpfs at $O"
	echo keep >"$O/mark"
	view "" "$IMG" "$V"
	PID=$(view_pid "$V")
}

swap_view() {
	as_user "$SFS_ALICE" mv "$D" "$D.old" && as_user "$SFS_ALICE" ln -s "${O%/v}" "$D"
}

# SIGTERM unmounts the view the daemon made, not whatever its path leads to by then.
test_sigterm_unmounts_the_view_not_what_its_path_leads_to() {
	swapped_view
	assert_ok swap_view
	assert_eq "$O" "$(readlink -f "$V")" "the view's path now leads to the other mount"
	assert_ok kill -TERM "$PID"
	assert_ok wait_daemon_gone "$PID" 10
	assert_ok is_mounted "$O"
	assert_eq keep "$(cat "$O/mark" 2>&1)" "the other mount is untouched"
	assert_ok not_mounted "$D.old/v"
	assert_eq "" "$(findmnt -rn -t fuse.strictfs -o TARGET | grep -F "$T_DIR/")" \
		"no view of this test is left mounted, dead"
}

# strictfs umount resolves the mountpoint once: a swap while it runs (here while it asks the
# daemons which one serves the view) makes it refuse, never unmount the other mount.
test_strictfs_umount_refuses_a_path_swapped_under_it() {
	command -v strace >/dev/null || die "strace is needed"
	swapped_view
	local c
	strace -qq -o "$T_DIR/umount.strace" -e trace=connect -e inject=connect:delay_exit=2000000:when=1 \
		"$STRICTFS" umount "$V" >"$T_DIR/umount.out" 2>&1 &
	c=$!
	assert_ok wait_until 10 grep -q DELAYED "$T_DIR/umount.strace"
	assert_ok swap_view
	wait "$c"
	assert_eq 1 "$?" "strictfs umount fails"
	assert_eq 1 "$(wc -l <"$T_DIR/umount.out")" "with one line: $(cat "$T_DIR/umount.out")"
	assert_ok is_mounted "$O"
	assert_eq keep "$(cat "$O/mark" 2>&1)" "the other mount is untouched"
	assert_ok is_mounted "$D.old/v"
	assert_ok ls "$D.old/v/lost+found"
	assert_ok "$STRICTFS" umount "$D.old/v"
	assert_ok wait_daemon_gone "$PID" 10
}

# A remount changes the flags of the view's own mount, never of what its path leads to after a
# swap while the command runs: ro through a swapped path would land on the other mount.
test_remount_refuses_a_path_swapped_under_it() {
	command -v strace >/dev/null || die "strace is needed"
	swapped_view
	local c
	strace -qq -o "$T_DIR/remount.strace" -e trace=connect -e inject=connect:delay_exit=2000000:when=1 \
		"$STRICTFS" mount -o remount,ro "$V" >"$T_DIR/remount.out" 2>&1 &
	c=$!
	assert_ok wait_until 10 grep -q DELAYED "$T_DIR/remount.strace"
	assert_ok swap_view
	wait "$c"
	assert_eq 1 "$?" "the remount fails"
	assert_eq 1 "$(wc -l <"$T_DIR/remount.out")" "with one line: $(cat "$T_DIR/remount.out")"
	assert_ok sh -c "echo still > '$O/mark'"
	assert_ok has_mount_opt "$O" rw
	assert_ok has_mount_opt "$D.old/v" rw
	assert_eq false "$(view_opt "$V" ro)" "the view is unchanged too (status names it by its path)"
	assert_ok "$STRICTFS" umount "$D.old/v"
}

test_sigterm_unmounts_view_in_other_namespace() {
	local H N=$T_DIR/nsview
	mkdir "$N"
	# The namespace first, so that it holds no copies of the host's views.
	ns_start
	H=$REPLY
	two_image_views
	assert_ok ns_exec "$H" "$STRICTFS" mount "$IMG" "$N"
	assert_eq "$IMG $N fuse.strictfs" "$(awk -v m="$N" '$2 == m { print $1, $2, $3 }' "/proc/$H/mounts")" \
		"view mounted in the other namespace"
	assert_ok not_mounted "$N"
	assert_eq "$PID" "$(view_pid "$N")" "served by the same daemon"
	assert_ok ns_exec "$H" sh -c "echo ns > '$N/f'"
	assert_eq ns "$(cat "$B/f" 2>&1)" "the namespace's view shares the backing"
	assert_ok kill -TERM "$PID"
	assert_ok wait_daemon_gone "$PID" 10
	assert_ok not_mounted "$A"
	assert_ok wait_until 3 sh -c "test -r /proc/$H/mounts && ! awk -v m='$N' '\$2 == m { f = 1 } END { exit !f }' /proc/$H/mounts"
	assert_ok wait_until 3 no_loop_for "$IMG"
}

no_daemon_for() { [[ -z $(daemons_for_source "$1") ]]; }

test_view_ends_with_its_namespace() {
	# a container's view goes when its mount namespace does: the daemon keeps no reference
	# that would keep the namespace alive (doc/kernel.md §4.4b), and the last view ends it
	new_source nsd
	local N=$T_DIR/nsview
	mkdir "$N"
	assert_ok unshare -m --propagation private -- sh -c \
		"'$STRICTFS' mount '$LOOP' '$N' && echo inside > '$N/f' && test -n \"\$('$STRICTFS' status --json | grep '$N')\""
	assert_ok not_mounted "$N"
	assert_ok wait_until 10 no_daemon_for "$LOOP"
	assert_ok device_free "$LOOP"
	mkdir "$T_DIR/nat"
	assert_ok mount "$LOOP" "$T_DIR/nat"
	assert_eq inside "$(cat "$T_DIR/nat/f")" "the data written in the namespace is there"
	umount "$T_DIR/nat"
}

test_daemon_detached_in_own_session() {
	two_image_views
	local sid
	sid=$(ps -o sid= -p "$PID" | tr -d ' ')
	assert_ne "$(ps -o sid= -p $$ | tr -d ' ')" "$sid" "daemon is not in the caller's session"
	assert_ne "" "$sid" "daemon has a session"
	assert_eq "?" "$(ps -o tty= -p "$PID" | tr -d ' ')" "daemon has no terminal"
	assert_ne "$$" "$(awk '{ print $4 }' "/proc/$PID/stat")" "daemon is not a child of the caller"
	assert_eq strictfs "$(ps -o comm= -p "$PID")" "ps names the daemon strictfs"
	assert_contains "$(pgrep -a strictfs)" "$PID strictfs __daemon " "pgrep -a strictfs finds it"
	assert_contains "$(pgrep -a strictfs | grep "^$PID ")" "$IMG" "with its source"
}

# daemon_sockets PID: "PATH TYPE" of the unix sockets bound to a path that PID holds
daemon_sockets() {
	local inodes
	inodes=$(for f in /proc/"$1"/fd/*; do readlink "$f"; done 2>/dev/null |
		sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' | sort -u | tr '\n' ' ')
	awk -v list=" $inodes " 'NR > 1 && $8 != "" && index(list, " " $7 " ") { print $8, $5 }' /proc/net/unix | sort -u
}

_CONNECT_PY='
import socket, sys
path, typ = sys.argv[1], int(sys.argv[2], 16)
t = {1: socket.SOCK_STREAM, 2: socket.SOCK_DGRAM, 5: socket.SOCK_SEQPACKET}[typ]
s = socket.socket(socket.AF_UNIX, t)
try:
    s.connect(path)
except PermissionError:
    print("PermissionError"); sys.exit(3)
except OSError as e:
    print("OSError", e.errno); sys.exit(4)
print("connected")
'

test_control_socket_mode_0600() {
	two_image_views
	local socks path typ
	socks=$(daemon_sockets "$PID")
	assert_contains "$socks" /run/strictfs/ "the daemon listens under /run/strictfs/"
	while read -r path typ; do
		[[ $path == /run/strictfs/* ]] || continue
		assert_eq "srw------- root" "$(stat -c '%A %U' "$path")" "$path: mode 0600, owned by root"
	done <<<"$socks"
}

test_control_socket_refuses_non_root() {
	two_image_views
	local socks path typ n=0
	socks=$(daemon_sockets "$PID")
	while read -r path typ; do
		[[ $path == /run/strictfs/* ]] || continue
		n=$((n + 1))
		_capture as_user "$SFS_ALICE" "$PY" -c "$_CONNECT_PY" "$path" "$typ"
		assert_eq "3 PermissionError" "$RC $(cat "$T_DIR/.out")" "$path: alice cannot connect"
		_capture as_user "$SFS_BOB" "$PY" -c "$_CONNECT_PY" "$path" "$typ"
		assert_eq "3 PermissionError" "$RC $(cat "$T_DIR/.out")" "$path: bob cannot connect"
		_capture "$PY" -c "$_CONNECT_PY" "$path" "$typ"
		assert_eq "0 connected" "$RC $(cat "$T_DIR/.out")" "$path: root can connect (the check is not vacuous)"
	done <<<"$socks"
	assert_gt "$n" 0 "found the daemon's control socket"
	assert_ok pid_alive "$PID"
}

# status as another user: the daemons answer only root, so the user is told why in one line
# (exit 1), not that no daemon runs (contract §2).
test_status_as_non_root_names_the_permission() {
	ensure_users
	two_image_views
	local args
	for args in "$A" "" "--json" "$IMG --json"; do
		# shellcheck disable=SC2086
		_capture as_user "$SFS_ALICE" "$STRICTFS" status $args
		assert_eq 1 "$RC" "status $args as alice: exit 1"
		assert_eq "strictfs: /run/strictfs: not accessible: Permission denied (run as root)" \
			"$(cat "$T_DIR/.err")" "status $args as alice: one line naming the permission"
		assert_eq "" "$(cat "$T_DIR/.out")" "status $args as alice: nothing on stdout"
	done
	assert_ok "$STRICTFS" status "$A"
	assert_contains "$(cat "$T_DIR/.out")" "$A" "root sees the view"
}

test_control_socket_survives_garbage() {
	two_image_views
	local socks path typ n=0
	socks=$(daemon_sockets "$PID")
	while read -r path typ; do
		[[ $path == /run/strictfs/* ]] || continue
		n=$((n + 1))
		_capture "$PY" - "$path" "$typ" <<'EOF'
import os, socket, sys
path, typ = sys.argv[1], int(sys.argv[2], 16)
t = {1: socket.SOCK_STREAM, 2: socket.SOCK_DGRAM, 5: socket.SOCK_SEQPACKET}[typ]
connected = 0
for payload in [b"", b"\0" * 16, b"{bogus", b"\xff" * 4096, os.urandom(65536), b"x" * (1 << 20)]:
    s = socket.socket(socket.AF_UNIX, t)
    s.settimeout(3)
    try:
        s.connect(path)
        connected += 1
        try:
            if t == socket.SOCK_STREAM:
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
            else:
                s.send(payload)
            s.recv(65536)
        except OSError:
            pass
    except OSError:
        pass
    finally:
        s.close()
print("connected %d of 6" % connected)
EOF
		assert_eq "0 connected 6 of 6" "$RC $(cat "$T_DIR/.out")" "$path: each garbage payload went over a connection"
	done <<<"$socks"
	assert_gt "$n" 0 "found the daemon's control socket"
	assert_ok pid_alive "$PID"
	assert_eq "$A $B" "$(daemon_views "$PID")" "daemon still answers status"
	assert_ok sh -c "echo x > '$B/f'"
	view "" "$IMG" "$T_DIR/c"
	assert_eq "$PID" "$(view_pid "$T_DIR/c")" "daemon still adds views"
	assert_eq x "$(cat "$T_DIR/c/f" 2>&1)" "new view works"
}

# ---- syslog (contract §6: every view added, refused or removed, and every backing mount) ----------
# The daemon logs to /dev/log. The test gives it one of its own: in a private mount namespace
# /dev is replaced by a tmpfs of links to the real entries plus a log socket read by the test,
# so nothing on the machine changes and no system logger is needed.

_syslog_listener() { # SOCKET OUTFILE
	"$PY" - "$1" "$2" <<'PYEOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(65536).decode(errors="replace") + "\n")
PYEOF
}

test_syslog_lines() { with_mount_helper _syslog_body; }
_syslog_body() {
	local real=$T_DIR/realdev fake=$T_DIR/fakedev log=$T_DIR/syslog.txt e lpid A=$T_DIR/a B=$T_DIR/b
	mkdir -p "$real" "$fake"
	mount --rbind /dev "$real" || die "rbind /dev"
	mount -t tmpfs -o mode=0755 sfs-fakedev "$fake" || die "tmpfs for /dev"
	for e in "$real"/*; do ln -s "$e" "$fake/${e##*/}"; done
	rm -f "$fake/log"
	: >"$log"
	_syslog_listener "$fake/log" "$log"
	lpid=$!
	wait_until 3 test -S "$fake/log" || die "log socket"
	mount --bind "$fake" /dev || die "bind the new /dev"
	new_source sys
	view noacl "$LOOP" "$A"
	view acl "$LOOP" "$B"
	"$STRICTFS" mount -o bogus "$LOOP" "$B" 2>/dev/null
	mkdir -p "$T_DIR/c"
	"$STRICTFS" mount -o data=journal "$LOOP" "$T_DIR/c" 2>/dev/null
	assert_ok sfs_umount "$A"
	assert_ok sfs_umount "$B"
	sleep 0.3
	kill "$lpid" 2>/dev/null
	local text
	text=$(cat "$log")
	assert_contains "$text" "strictfs[" "lines carry the ident strictfs"
	assert_contains "$text" "loop${LOOP#/dev/loop} mounted (exclusive" "backing mount logged"
	assert_contains "$text" "view added at $A (-o noacl)" "view added logged"
	assert_contains "$text" "view added at $B (-o acl)" "second view logged"
	assert_contains "$text" "view at $T_DIR/c refused: strictfs: data=journal:" "refusal by the daemon logged"
	assert_contains "$text" "view at $B refused: strictfs: bogus: unknown option" "refusal by the command logged"
	assert_contains "$text" "view at $A removed" "removal logged"
	assert_contains "$text" "backing released; daemon exits" "release logged"
	assert_not_contains "$text" "malformed" "no spurious protocol complaints"
	umount /dev && umount "$fake" && umount -R "$real" || fail "undoing the private /dev"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
