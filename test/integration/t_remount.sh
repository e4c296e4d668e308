#!/bin/bash
# Every option honoured at every moment (contract §5): a remount gives exactly what a fresh
# mount with the new options gives, files already open through the view included, or is
# refused by name and changes nothing. The view profile (doc/design.md) is what is compared.
# transport-independent: a remount puts a new profile in force above the transport (passthrough's backing files are registered through /dev/fuse either way); t_passthrough and t_data carry the data path in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

EDQUOT_MSG="Disk quota exceeded"

# hold_open USER FILE MODE NAME: USER's process holding FILE open (MODE r, a or w) until
# release NAME; waits until it holds it.
hold_open() {
	local ready=$T_DIR/hold/$4.ready
	mkdir -p -m 1777 "$T_DIR/hold"
	as_user "$1" "$PY" - "$2" "$3" "$ready" "$T_DIR/hold/$4.stop" <<'EOF' &
import os, sys, time
path, mode, ready, stop = sys.argv[1:5]
flags = {"r": os.O_RDONLY, "a": os.O_WRONLY | os.O_APPEND | os.O_CREAT, "w": os.O_WRONLY | os.O_CREAT}[mode]
fd = os.open(path, flags, 0o644)
open(ready, "w").close()
while not os.path.exists(stop):
    time.sleep(0.05)
os.close(fd)
EOF
	echo $! >"$T_DIR/hold/$4.pid"
	wait_until 10 test -e "$ready" || die "$1 could not hold $2 open"
}

release() { # NAME: the holder ends, its file closed
	touch "$T_DIR/hold/$1.stop"
	wait "$(cat "$T_DIR/hold/$1.pid")" 2>/dev/null
}

# What a view's options mean, from status: its effective options as fields and text, its
# profile, and where its files' data goes.
meaning() { # MOUNTPOINT
	view_json "$1" | jq -c '{effective, options, profile,
		passthrough: .data_path.passthrough, why: .data_path.why_not}'
}

# The per-mount flags the kernel shows for the view (the options field without its FUSE part)
kernel_flags() { mount_opts "$1" | tr ',' '\n' | grep -vE '^(user_id|group_id)=|^default_permissions$|^allow_other$' | paste -sd,; }

# ---- limits added to a live view (issue: writes passed a hard limit by passthrough) ---------

test_remount_usrquota_refused_while_passthrough_writers() {
	new_source lim
	local V=$T_DIR/v
	view "" "$LOOP" "$V"
	chmod 1777 "$V"
	assert_ok "$STRICTFS" quota set "$LOOP" -u "$SFS_ALICE" --bhard 2M
	assert_eq true "$(view_field "$V" .data_path.passthrough)" "no limits: files pass through"
	hold_open "$SFS_ALICE" "$V/held" a h
	assert_refused "usrquota: 1 file is open for writing through $V by the kernel's passthrough" \
		"$STRICTFS" mount -o remount,usrquota "$V"
	assert_eq none "$(view_opt "$V" quota)" "a refused remount changes nothing"
	assert_eq true "$(view_field "$V" .data_path.passthrough)" "still passthrough"
	assert_refused "size: 1 file is open for writing" \
		"$STRICTFS" quota set "$LOOP" --view "$V" --bhard 5M
	assert_eq null "$(view_opt "$V" size)" "no size limit set"
	release h
	assert_ok "$STRICTFS" mount -o remount,usrquota "$V"
	assert_eq usrquota "$(view_opt "$V" quota)" "status: usrquota"
	assert_eq false "$(view_field "$V" .data_path.passthrough)" "files take the daemon path now"
	assert_eq usrquota "$(view_field "$V" .data_path.why_not)" "and say which option"
	# the same write as on a view mounted with usrquota from the start
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" dd if=/dev/zero of="$V/big" bs=1M count=20
	assert_lt "$(stat -c %s "$V/big")" $((2 * 1024 * 1024 + 1)) "alice wrote no more than 2 MiB"
	assert_ok rm -f "$V/big" "$V/held"
	assert_ok "$STRICTFS" mount -o remount,noquota "$V"
	assert_eq true "$(view_field "$V" .data_path.passthrough)" "noquota: passthrough again"
	assert_ok as_user "$SFS_ALICE" dd if=/dev/zero of="$V/big" bs=1M count=20 status=none
	# a view limit set live, as quota set --view does it
	assert_ok rm -f "$V/big"
	assert_ok "$STRICTFS" quota set "$LOOP" --view "$V" --bhard 5M
	assert_eq false "$(view_field "$V" .data_path.passthrough)" "size=: the daemon path"
	assert_fails_with "$EDQUOT_MSG" dd if=/dev/zero of="$V/big" bs=1M count=30
	assert_lt "$(du -sk "$V" | cut -f1)" 5121 "the view holds at most 5 MiB"
}

# A reader that opened a file by passthrough before the limits came keeps it; the kernel then
# takes every open of that file only by passthrough, so a writer of it waits for the reader
# (EBUSY) rather than write past the limits. Other files are priced as usual.
test_remount_usrquota_with_passthrough_readers() {
	new_source rdr
	local V=$T_DIR/v
	view "" "$LOOP" "$V"
	chmod 1777 "$V"
	assert_ok as_user "$SFS_ALICE" sh -c "echo data > '$V/f'"
	assert_ok "$STRICTFS" quota set "$LOOP" -u "$SFS_ALICE" --bhard 2M
	hold_open "$SFS_ALICE" "$V/f" r r
	assert_ok "$STRICTFS" mount -o remount,usrquota "$V"
	assert_fails_with "Device or resource busy" as_user "$SFS_ALICE" sh -c "echo more >> '$V/f'"
	assert_eq data "$(as_user "$SFS_ALICE" cat "$V/f")" "the file reads"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" dd if=/dev/zero of="$V/big" bs=1M count=20
	release r
	assert_ok as_user "$SFS_ALICE" sh -c "echo more >> '$V/f'"
	assert_eq "data more" "$(tr '\n' ' ' <"$V/f" | sed 's/ $//')" "the writer goes on once the reader closed"
}

# ---- a remount equals a fresh mount -----------------------------------------------------------

# Every option that can change live, each way, with a file open for reading and one for
# writing through the view at the time: the view then means what a fresh mount with its
# options means (status: effective, options, profile, data path; the kernel's mount flags).
test_remount_every_live_option_equals_a_fresh_mount() {
	new_source live
	local V=$T_DIR/v F=$T_DIR/fresh o i=0
	view "" "$LOOP" "$V"
	echo data >"$V/r"
	exec 7<"$V/r"
	exec 8>>"$V/w"
	for o in nouser_xattr user_xattr minixdf bsddf noatime strictatime relatime nodiratime \
		diratime nosuid suid nodev dev noexec exec nosymfollow symfollow nopassthrough passthrough \
		grpquota quota usrquota noquota size=64M inodes=1000 size=0,inodes=0; do
		if [[ $o == *quota* || $o == size=64M || $o == inodes=* || $o == nopassthrough ]]; then
			exec 8>&- # an open passthrough writer would hold the limits off (tested above)
		fi
		assert_ok "$STRICTFS" mount -o "remount,$o" "$V"
		mkdir -p "$F$i"
		mount_view -o "$(view_field "$V" .effective)" "$LOOP" "$F$i"
		assert_eq "$(meaning "$F$i")" "$(meaning "$V")" "remount,$o: the view means what a fresh mount means"
		assert_eq "$(kernel_flags "$F$i")" "$(kernel_flags "$V")" "remount,$o: the kernel's flags of a fresh mount"
		assert_ok sfs_umount "$F$i"
		i=$((i + 1))
	done
	# ro and back, with only the reader open (a writer keeps a view writable, as natively)
	exec 8>&-
	for o in ro rw; do
		assert_ok "$STRICTFS" mount -o "remount,$o" "$V"
		mkdir -p "$F$i"
		mount_view -o "$(view_field "$V" .effective)" "$LOOP" "$F$i"
		assert_eq "$(meaning "$F$i")" "$(meaning "$V")" "remount,$o: the view means what a fresh mount means"
		assert_ok sfs_umount "$F$i"
		i=$((i + 1))
	done
	assert_eq data "$(cat <&7)" "the file open throughout reads"
	exec 7<&-
}

# ro with a file open for writing: refused by name, as natively (EBUSY), nothing changed.
test_remount_ro_refused_with_writers() {
	new_source rob
	local V=$T_DIR/v
	view "" "$LOOP" "$V"
	exec 8>>"$V/w"
	assert_refused "ro: files are open for writing through $V" "$STRICTFS" mount -o remount,ro "$V"
	assert_eq false "$(view_opt "$V" ro)" "status: still rw"
	assert_ok has_mount_opt "$V" rw
	assert_ok sh -c "echo more >&8"
	exec 8>&-
	assert_ok "$STRICTFS" mount -o remount,ro "$V"
	assert_fails_with "Read-only file system" touch "$V/x"
}

# ---- files open at a remount follow the new atime rule (issue: a read still moved atime) ------

_atime() { stat -c %X "$1"; }

test_remount_open_files_follow_the_atime_rule() {
	new_source at
	local V=$T_DIR/v R=$T_DIR/ref rl a0 a1
	# native: a file open for reading, the mount remounted noatime, then read: atime stays
	mkimg ref
	attach_loop "$REPLY"
	rl=$REPLY
	mkdir -p "$R"
	need mount -o strictatime "$rl" "$R"
	echo data >"$R/f"
	touch -a -d @1000000000 "$R/f"
	exec 6<"$R/f"
	assert_ok mount -o remount,noatime "$R"
	cat <&6 >/dev/null
	assert_eq 1000000000 "$(_atime "$R/f")" "native: a read after remount,noatime leaves atime"
	exec 6<&-
	for o in noatime ro; do
		view strictatime "$LOOP" "$V"
		echo data >"$V/f"
		touch -a -d @1000000000 "$V/f"
		exec 7<"$V/f"
		assert_ok "$STRICTFS" mount -o "remount,$o" "$V"
		cat <&7 >/dev/null
		assert_eq 1000000000 "$(_atime "$V/f")" "remount,$o: a read through a file open before leaves atime"
		exec 7<&-
		assert_ok sfs_umount "$V"
	done
	# and the other way: noatime -> strictatime, the open file's next read moves it
	view noatime "$LOOP" "$V"
	touch -a -d @1000000000 "$V/f"
	exec 7<"$V/f"
	assert_ok "$STRICTFS" mount -o remount,strictatime "$V"
	cat <&7 >/dev/null
	assert_ne 1000000000 "$(_atime "$V/f")" "remount,strictatime: the open file's read moves atime"
	exec 7<&-
}

# A successor takes the view's clone over with the files open through it: a remount after a
# takeover still reaches them.
test_remount_after_a_takeover_reaches_open_files() {
	new_source tko
	local V=$T_DIR/v pid key succ i
	key=$(source_key "$LOOP")
	view strictatime "$LOOP" "$V"
	pid=$(view_pid "$V")
	echo data >"$V/f"
	touch -a -d @1000000000 "$V/f"
	exec 7<"$V/f"
	assert_ok kill -KILL "$pid"
	for ((i = 0; i < 200; i++)); do
		succ=$(daemon_procs "$key" | head -n1)
		[[ -n $succ && $succ != "$pid" ]] && break
		sleep 0.05
	done
	assert_ne "$pid" "${succ:-$pid}" "a successor serves the view"
	remember_pid "$succ"
	assert_ok wait_until 10 status_has_view "$V"
	assert_ok "$STRICTFS" mount -o remount,noatime "$V"
	cat <&7 >/dev/null
	assert_eq 1000000000 "$(_atime "$V/f")" "a file open before the takeover follows remount,noatime"
	exec 7<&-
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
