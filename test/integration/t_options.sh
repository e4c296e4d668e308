#!/bin/bash
# View options (contract §5): ro, subdir=, per-mount flags, bsddf/minixdf, superblock-only options,
# cache=, and the list of options that must be accepted.
# transport-independent: options are decided by the view profile above the transport, the same code whichever way requests come; t_data, t_security and t_coherence carry the request path in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# ---- ro -------------------------------------------------------------------------------------

test_ro_view_refuses_every_change() {
	new_source ro
	local W=$T_DIR/w R=$T_DIR/r
	view "" "$LOOP" "$W"
	view ro "$LOOP" "$R"
	echo data >"$W/f"
	mkdir "$W/d"
	assert_ok has_mount_opt "$R" ro
	assert_ok has_mount_opt "$W" rw
	assert_eq true "$(view_opt "$R" ro)" "status: R ro"
	assert_eq false "$(view_opt "$W" ro)" "status: W rw"
	local E="Read-only file system"
	assert_fails_with "$E" touch "$R/new"
	assert_fails_with "$E" touch "$R/f"
	assert_fails_with "$E" sh -c "echo x > '$R/f'"
	assert_fails_with "$E" sh -c "echo x >> '$R/f'"
	assert_fails_with "$E" truncate -s 0 "$R/f"
	assert_fails_with "$E" mkdir "$R/nd"
	assert_fails_with "$E" rmdir "$R/d"
	assert_fails_with "$E" rm "$R/f"
	assert_fails_with "$E" mv "$R/f" "$R/g"
	assert_fails_with "$E" ln -s x "$R/l"
	assert_fails_with "$E" ln "$R/f" "$R/h"
	assert_fails_with "$E" chmod 600 "$R/f"
	assert_fails_with "$E" chown "$SFS_ALICE" "$R/f"
	assert_fails_with "$E" setfattr -n user.x -v 1 "$R/f"
	assert_fails_with "$E" setfacl -m "u:$SFS_ALICE:r" "$R/f"
	assert_fails_with "$E" mkfifo "$R/p"
	assert_eq data "$(cat "$R/f")" "R reads"
	assert_eq "644 data" "$(stat -c %a "$W/f") $(cat "$W/f")" "file unchanged"
	assert_ok sh -c "echo more >> '$W/f'"
	assert_eq "data more" "$(tr '\n' ' ' <"$R/f" | sed 's/ $//')" "rw view writes, ro view sees it"
	assert_ok touch "$W/new"
	assert_ok test -e "$R/new"
}

# super_opts MOUNTPOINT: the superblock options of the top mount there (mountinfo's last field)
super_opts() { awk -v m="$1" '$5 == m { o = $NF } END { print o }' /proc/self/mountinfo; }

# A ro view is ro on its mount, never on its superblock, so a remount can make it writable, as
# natively: mount -o ro, then remount,rw writes (by strictfs mount and by mount(8)).
test_ro_view_becomes_writable_by_remount() {
	local V=$T_DIR/v REF=$T_DIR/ref
	# native: a read-write loop device (mount -o ro,loop would attach it read-only)
	mkimg ref
	attach_loop "$REPLY"
	mkdir -p "$REF"
	need mount -o ro "$REPLY" "$REF"
	new_source rorw
	assert_fails_with "Read-only file system" touch "$REF/x"
	assert_ok mount -o remount,rw "$REF"
	assert_ok touch "$REF/x"
	view ro "$LOOP" "$V"
	assert_ok has_mount_opt "$V" ro
	assert_eq rw "$(super_opts "$V" | cut -d, -f1)" "the view's superblock is read-write"
	assert_fails_with "Read-only file system" touch "$V/x"
	assert_ok "$STRICTFS" mount -o remount,rw "$V"
	assert_ok has_mount_opt "$V" rw
	assert_eq false "$(view_opt "$V" ro)" "status: rw"
	assert_ok touch "$V/x"
	assert_ok sh -c "echo data > '$V/x'"
	assert_ok "$STRICTFS" mount -o remount,ro "$V"
	assert_fails_with "Read-only file system" touch "$V/y"
	assert_eq data "$(cat "$V/x")" "what was written is there"
}

test_ro_view_remount_rw_via_mount_8() { with_mount_helper _ro_rw_body; }
_ro_rw_body() {
	new_source rorw8
	local V=$T_DIR/v
	mkdir -p "$V"
	assert_ok mount -t strictfs -o ro "$LOOP" "$V"
	assert_fails_with "Read-only file system" touch "$V/x"
	assert_ok mount -o remount,rw "$V"
	assert_ok has_mount_opt "$V" rw
	assert_ok touch "$V/x"
}

# ---- subdir ---------------------------------------------------------------------------------

subdir_setup() {
	new_source sub
	F=$T_DIR/full
	S=$T_DIR/s
	view "" "$LOOP" "$F"
	mkdir -p "$F/sub/deeper"
	echo in >"$F/sub/inner"
	echo OUTSIDE-SECRET >"$F/outside"
	ln -s ../outside "$F/sub/esc_rel"
	ln -s /etc "$F/sub/esc_abs"
	ln -s ../../.. "$F/sub/esc_up"
	ln -s ../../outside "$F/sub/deeper/esc2"
	view subdir=/sub "$LOOP" "$S"
}

test_subdir_shows_only_subtree() {
	subdir_setup
	assert_eq "deeper esc_abs esc_rel esc_up inner" "$(ls -A "$S" | sort | tr '\n' ' ' | sed 's/ $//')" "view root lists sub"
	assert_eq in "$(cat "$S/inner")" "file in sub"
	assert_eq / "$(view_opt "$F" subdir)" "status: full view subdir"
	assert_eq /sub "$(view_opt "$S" subdir)" "status: subdir view"
	assert_eq "" "$(find "$S" -name outside -o -name lost+found 2>/dev/null)" "nothing from outside sub"
	assert_eq "" "$(grep -rs OUTSIDE-SECRET "$S")" "no content from outside sub"
	echo new >"$S/created"
	assert_eq new "$(cat "$F/sub/created" 2>&1)" "writes land in sub"
}

test_subdir_dotdot_stays_in_view() {
	subdir_setup
	assert_eq "$(stat -c %d:%i "$T_DIR")" "$(stat -c %d:%i "$S/..")" "S/.. is the mountpoint's parent, not the backing"
	assert_eq "$(stat -c %d:%i "$S")" "$(stat -c %d:%i "$S/deeper/..")" "deeper/.. is the view root"
	assert_fails stat "$S/../outside"
	assert_fails stat "$S/deeper/../../outside"
	assert_eq "$T_DIR" "$(cd "$S/deeper/../.." && pwd -P)" "cd ../.. leaves the view by the mountpoint"
	assert_eq "" "$("$PY" -c 'import os,sys; print(" ".join(n for n in os.listdir(sys.argv[1]) if n in ("outside","sub")))' "$S/..")" \
		"listing .. shows the mountpoint's parent"
}

test_subdir_symlinks_do_not_escape() {
	subdir_setup
	assert_eq ../outside "$(readlink "$S/esc_rel")" "readlink shows the target"
	assert_eq /etc "$(readlink "$S/esc_abs")" "readlink shows the target"
	assert_eq ../../.. "$(readlink "$S/esc_up")" "readlink shows the target"
	local out
	out=$(cat "$S/esc_rel" 2>&1)
	assert_not_contains "$out" OUTSIDE-SECRET "relative symlink does not reach the backing outside sub"
	out=$(cat "$S/deeper/esc2" 2>&1)
	assert_not_contains "$out" OUTSIDE-SECRET "../../ symlink does not reach the backing outside sub"
	assert_eq "$(stat -L -c %d:%i "$S/../../..")" "$(stat -L -c %d:%i "$S/esc_up")" "../../.. resolves in the caller's namespace"
	assert_eq "$(stat -c %d:%i /etc)" "$(stat -L -c %d:%i "$S/esc_abs")" "/etc resolves in the caller's namespace"
}

test_subdir_through_symlink_refused() {
	subdir_setup
	ln -s /etc "$F/lnk_abs"
	ln -s sub "$F/lnk_rel"
	mkdir "$T_DIR/v1" "$T_DIR/v2"
	assert_refused subdir "$STRICTFS" mount -o subdir=/lnk_abs "$LOOP" "$T_DIR/v1"
	assert_refused subdir "$STRICTFS" mount -o subdir=/lnk_rel "$LOOP" "$T_DIR/v2"
}

test_subdir_dotdot_in_option_no_escape() {
	subdir_setup
	local V=$T_DIR/v first
	mkdir "$V"
	_capture "$STRICTFS" mount -o subdir=/sub/../.. "$LOOP" "$V"
	if ((RC == 0)); then
		view_pid "$V" >/dev/null
		assert_ok test -e "$V/outside"
		assert_ok test -d "$V/sub"
		assert_fails test -e "$V/etc/passwd"
		assert_fails test -e "$V/$(basename "$T_DIR")"
	else
		first=$(head -n1 "$T_DIR/.err")
		assert_eq 1 "$RC" "refused with exit 1"
		assert_contains "$first" "strictfs: subdir" "refusal names subdir"
		assert_ok not_mounted "$V"
	fi
}

test_subdir_missing_or_not_a_directory_refused() {
	subdir_setup
	mkdir "$T_DIR/v"
	assert_refused subdir "$STRICTFS" mount -o subdir=/nope "$LOOP" "$T_DIR/v"
	assert_refused subdir "$STRICTFS" mount -o subdir=/outside "$LOOP" "$T_DIR/v"
	assert_refused subdir "$STRICTFS" mount -o subdir=/sub/inner "$LOOP" "$T_DIR/v"
}

# ---- per-mount flags ------------------------------------------------------------------------

test_mount_flags_in_proc_mounts() {
	new_source flags
	local V=$T_DIR/v f
	view nosuid,nodev,noexec,nosymfollow,noatime,nodiratime "$LOOP" "$V"
	for f in nosuid nodev noexec nosymfollow noatime nodiratime; do
		assert_ok has_mount_opt "$V" "$f"
	done
	local flags
	flags=",$(view_opt "$V" mount_flags),"
	for f in nosuid nodev noexec nosymfollow; do
		assert_contains "$flags" ",$f," "status mount_flags has $f"
	done
}

test_mount_flags_explicit_suid_dev_exec() {
	new_source flags
	local V=$T_DIR/v f
	view suid,dev,exec,strictatime "$LOOP" "$V"
	for f in nosuid nodev noexec noatime relatime nosymfollow; do
		assert_fails has_mount_opt "$V" "$f"
	done
	local W=$T_DIR/w
	view relatime "$LOOP" "$W"
	assert_ok has_mount_opt "$W" relatime
}

test_noexec_prevents_execution() {
	new_source exec
	local X=$T_DIR/x N=$T_DIR/n
	view exec "$LOOP" "$X"
	view noexec "$LOOP" "$N"
	printf '#!/bin/sh\necho ran\n' >"$X/s.sh"
	chmod 755 "$X/s.sh"
	assert_eq ran "$("$X/s.sh" 2>&1)" "script runs in the exec view"
	assert_fails_with "Permission denied" "$N/s.sh"
	assert_eq ran "$(sh "$N/s.sh" 2>&1)" "noexec view still reads the script"
}

test_nosuid_ignores_suid_bit() {
	new_source suid
	local X=$T_DIR/x N=$T_DIR/n
	view suid "$LOOP" "$X"
	view nosuid "$LOOP" "$N"
	need cp /usr/bin/id "$X/id"
	need chmod 4755 "$X/id"
	assert_eq 0 "$(as_user "$SFS_ALICE" "$X/id" -u 2>&1)" "suid view: euid 0"
	assert_eq "$(id -u "$SFS_ALICE")" "$(as_user "$SFS_ALICE" "$N/id" -u 2>&1)" "nosuid view: euid unchanged"
}

test_nosymfollow_blocks_following() {
	new_source sym
	local X=$T_DIR/x Y=$T_DIR/y
	view "" "$LOOP" "$X"
	view nosymfollow "$LOOP" "$Y"
	echo t >"$X/target"
	ln -s target "$X/link"
	assert_eq t "$(cat "$X/link" 2>&1)" "symlink followed in the plain view"
	assert_fails_with "Too many levels of symbolic links" cat "$Y/link"
	assert_eq target "$(readlink "$Y/link")" "readlink works with nosymfollow"
}

test_nodev_blocks_device_nodes() {
	new_source dev
	local D=$T_DIR/d N=$T_DIR/n
	view dev "$LOOP" "$D"
	view nodev "$LOOP" "$N"
	need mknod "$D/null" c 1 3
	assert_eq "1,3" "$(stat -c '%Hr,%Lr' "$N/null")" "device node visible in the nodev view"
	assert_ok sh -c "echo x > '$D/null'"
	assert_fails_with "Permission denied" sh -c "echo x > '$N/null'"
}

# ---- statfs ---------------------------------------------------------------------------------

_df_size() { df -B1 --output=size "$1" | tail -n1 | tr -d ' '; }

test_df_bsddf_and_minixdf() {
	new_source df
	local V1=$T_DIR/bsd V2=$T_DIR/minix N=$T_DIR/native b m nb nm pid
	view bsddf "$LOOP" "$V1"
	view minixdf "$LOOP" "$V2"
	pid=$(view_pid "$V1")
	assert_eq bsddf "$(view_opt "$V1" df)" "status: df bsddf"
	assert_eq minixdf "$(view_opt "$V2" df)" "status: df minixdf"
	b=$(_df_size "$V1")
	m=$(_df_size "$V2")
	assert_gt "$m" "$b" "minixdf total ($m) larger than bsddf total ($b)"
	need sfs_umount "$V1"
	wait_until 2 status_lacks_view "$V1"
	need sfs_umount "$V2"
	wait_daemon_gone "$pid" 5 || die "daemon did not exit"
	mkdir "$N"
	need mount -o bsddf "$LOOP" "$N"
	nb=$(_df_size "$N")
	need umount "$N"
	need mount -o minixdf "$LOOP" "$N"
	nm=$(_df_size "$N")
	need umount "$N"
	assert_eq "$nb" "$b" "bsddf view total equals native ext4 bsddf"
	assert_eq "$nm" "$m" "minixdf view total equals native ext4 minixdf"
}

test_df_default_is_bsddf() {
	new_source df
	local V=$T_DIR/v W=$T_DIR/w
	view "" "$LOOP" "$V"
	view bsddf "$LOOP" "$W"
	assert_eq bsddf "$(view_opt "$V" df)" "status: default df"
	assert_eq "$(_df_size "$W")" "$(_df_size "$V")" "default total equals bsddf total"
}

# ---- superblock-only options and cache= ------------------------------------------------------

test_superblock_option_set_and_repeated() {
	new_source sb
	local V=$T_DIR/v W=$T_DIR/w X=$T_DIR/x pid
	view data=journal,commit=30 "$LOOP" "$V"
	pid=$(view_pid "$V")
	local opts
	opts=",$(daemon_field "$V" '.backing.options | join(",")'),"
	assert_contains "$opts" ",data=journal," "status: backing has data=journal"
	assert_contains "$opts" ",commit=30," "status: backing has commit=30"
	view data=journal "$LOOP" "$W"
	view "" "$LOOP" "$X"
	assert_eq "$V $W $X" "$(daemon_views "$pid")" "same value and omitted value both accepted"
	echo x >"$W/f"
	assert_eq x "$(cat "$X/f")" "views work"
}

# The kernel reports some superblock options under another name of their family (noload as
# norecovery, bsdgroups as grpid, dioread_lock as nodioread_nolock): each is accepted, shown
# as the kernel has it, and a later view may use either name (contract §3.3).
test_superblock_option_reported_under_another_name() {
	local o shown other V W pid
	for o in noload:norecovery:norecovery bsdgroups:grpid:grpid dioread_lock:nodioread_nolock:dioread_lock; do
		IFS=: read -r o shown other <<<"$o"
		new_source "sb-$o"
		V=$T_DIR/v-$o W=$T_DIR/w-$o
		assert_ok sfs_mount -o "$o" "$LOOP" "$V" || continue
		pid=$(view_pid "$V")
		assert_contains ",$(daemon_field "$V" '.backing.options | join(",")')," ",$shown," \
			"-o $o: the kernel reports $shown"
		view "$other" "$LOOP" "$W"
		assert_eq "$V $W" "$(daemon_views "$pid")" "-o $o: a later view with $other joins it"
		assert_ok sh -c "echo x > '$W/f' && cat '$V/f'"
		sfs_umount "$W" && sfs_umount "$V" && wait_daemon_gone "$pid" || fail "unmounting -o $o"
	done
}

test_cache_writeback_sole_view() {
	new_source wb
	local V=$T_DIR/v W=$T_DIR/w pid
	view cache=writeback "$LOOP" "$V"
	pid=$(view_pid "$V")
	assert_ok sh -c "for i in 1 2 3 4 5; do echo \$i >> '$V/f'; done"
	assert_eq "1 2 3 4 5" "$(tr '\n' ' ' <"$V/f" | sed 's/ $//')" "writeback view reads its writes"
	assert_ok sfs_umount "$V"
	assert_ok pid_gone "$pid"
	view "" "$LOOP" "$W"
	assert_eq "1 2 3 4 5" "$(tr '\n' ' ' <"$W/f" | sed 's/ $//')" "data reached the backing"
}

test_cache_strict_views_coexist() {
	new_source cs
	local V=$T_DIR/v W=$T_DIR/w
	view cache=strict "$LOOP" "$V"
	view cache=strict "$LOOP" "$W"
	echo a >"$V/f"
	assert_eq a "$(cat "$W/f")" "two cache=strict views"
}

test_accepted_options_mount() {
	new_source acc
	local o V=$T_DIR/v pid
	for o in acl noacl user_xattr nouser_xattr nocasefold noquota ro rw subdir=/ bsddf minixdf \
		nosuid suid nodev dev noexec exec noatime atime nodiratime relatime strictatime nosymfollow \
		cache=strict cache=writeback share=exclusive data=journal data=ordered commit=15 \
		errors=remount-ro nodelalloc noacl,nouser_xattr,ro,nosuid,nodev; do
		if sfs_mount -o "$o" "$LOOP" "$V" 2>"$T_DIR/.err"; then
			pid=$(view_pid "$V")
			if is_mounted "$V" && [[ -n $pid ]]; then ok "accepted: -o $o"; else fail "-o $o: exit 0 but no view"; fi
			sfs_umount "$V" || fail "strictfs umount after -o $o"
			[[ -z $pid ]] || wait_daemon_gone "$pid" 5 || fail "daemon did not exit after -o $o"
		else
			fail "-o $o refused: $(_short "$T_DIR/.err")"
		fi
	done
}

# ---- remount (contract §2: changes a view's options in place, or refuses by name) ----------------

test_remount_changes_options_in_place() {
	new_source rem
	local V=$T_DIR/v O=$T_DIR/o pid
	view nouser_xattr "$LOOP" "$V"
	view "" "$LOOP" "$O"
	pid=$(view_pid "$V")
	echo data >"$V/f"
	assert_fails_with "Operation not supported" setfattr -n user.x -v 1 "$V/f"
	assert_ok "$STRICTFS" mount -o remount,user_xattr,ro,nosuid "$V"
	assert_ok has_mount_opt "$V" ro
	assert_ok has_mount_opt "$V" nosuid
	assert_eq true "$(view_opt "$V" ro)" "status: ro after remount"
	assert_eq true "$(view_opt "$V" user_xattr)" "status: user_xattr after remount"
	assert_contains "$(view_opt "$V" mount_flags)" nosuid "status: nosuid after remount"
	assert_fails_with "Read-only file system" touch "$V/g"
	assert_fails_with "Read-only file system" setfattr -n user.x -v 1 "$V/f"
	assert_ok "$STRICTFS" mount -o remount,rw "$V"
	assert_ok has_mount_opt "$V" rw
	assert_ok has_mount_opt "$V" nosuid
	assert_ok setfattr -n user.x -v 1 "$V/f"
	assert_eq 1 "$(getfattr --only-values -n user.x "$O/f" 2>/dev/null)" "the other view sees it"
	assert_eq "$pid" "$(view_pid "$V")" "same daemon, same view"
	assert_eq data "$(cat "$V/f")" "data intact"
}

test_remount_refuses_what_cannot_change_live() {
	new_source rem2
	local V=$T_DIR/v
	view acl "$LOOP" "$V"
	touch "$V/f"
	assert_refused noacl "$STRICTFS" mount -o remount,noacl "$V"
	assert_refused subdir "$STRICTFS" mount -o remount,subdir=/lost+found "$V"
	assert_refused cache=writeback "$STRICTFS" mount -o remount,cache=writeback "$V"
	assert_refused casefold "$STRICTFS" mount -o remount,casefold "$V"
	assert_refused bogus "$STRICTFS" mount -o remount,bogus "$V"
	assert_refused data=journal "$STRICTFS" mount -o remount,data=journal "$V"
	assert_eq true "$(view_opt "$V" acl)" "still an acl view"
	assert_ok has_mount_opt "$V" rw
	assert_ok touch "$V/g"
	local T=$T_DIR/plain
	mkdir "$T"
	assert_refused "$T" "$STRICTFS" mount -o remount,ro "$T"
}

test_remount_via_mount_8() { with_mount_helper _remount_body; }
_remount_body() {
	new_source rem3
	local V=$T_DIR/v
	view "" "$LOOP" "$V"
	assert_ok mount -o remount,ro "$V"
	assert_ok has_mount_opt "$V" ro
	assert_eq true "$(view_opt "$V" ro)" "status: ro"
	assert_fails_with "Read-only file system" touch "$V/x"
	assert_exit 32 mount -o remount,noacl "$V"
	assert_eq true "$(view_opt "$V" acl)" "still acl"
}

# The daemon's state lives in /.strictfs at the backing root (contract §3.5): no view sees it,
# lists it, or can make, rename or link anything onto that name.
test_admin_state_invisible_in_views() {
	new_source admin
	local V=$T_DIR/v C=$T_DIR/c
	view "" "$LOOP" "$V"
	view casefold "$LOOP" "$C"
	need "$STRICTFS" quota set "$LOOP" -u root --bhard 1G
	echo x >"$V/f"
	need mkdir "$V/d"
	assert_not_contains "$(ls -a "$V")" ".strictfs" "not listed"
	assert_fails_with "No such file or directory" stat "$V/.strictfs"
	assert_fails_with "No such file or directory" stat "$C/.strictfs"
	assert_fails_with "Operation not permitted" mkdir "$V/.strictfs"
	assert_fails_with "Operation not permitted" touch "$V/.strictfs"
	assert_fails_with "Operation not permitted" mv "$V/f" "$V/.strictfs"
	assert_fails_with "Operation not permitted" mv -T "$V/d" "$V/.strictfs"
	assert_fails_with "Operation not permitted" ln "$V/f" "$V/.strictfs"
	assert_fails_with "Operation not permitted" ln -s f "$V/.strictfs"
	assert_ok test -f "$V/f"
	assert_refused subdir sfs_mount -o subdir=/.strictfs "$LOOP" "$T_DIR/s"
	need "$STRICTFS" umount "$V"
	need "$STRICTFS" umount "$C"
	wait_until 30 device_free "$LOOP" || die "the daemon did not let go of the device"
	need mkdir -p "$T_DIR/n"
	need mount -o ro "$LOOP" "$T_DIR/n"
	assert_ok test -f "$T_DIR/n/.strictfs/quota"
	need umount "$T_DIR/n"
}

# mount(8) and the contract put -o after the operands; util-linux takes options anywhere.
test_options_after_operands() {
	new_source after
	local V=$T_DIR/v W=$T_DIR/w
	mkdir -p "$V" "$W"
	assert_ok "$STRICTFS" mount "$LOOP" "$V" -o noacl,ro
	view_pid "$V" >/dev/null
	assert_eq false "$(view_opt "$V" acl)" "-o after the operands: noacl in effect"
	assert_eq true "$(view_opt "$V" ro)" "-o after the operands: ro in effect"
	assert_ok "$STRICTFS" mount "$LOOP" -o nouser_xattr "$W"
	assert_eq false "$(view_opt "$W" user_xattr)" "-o between the operands"
}

# One formatter says a view's effective options: the text status shows every option the view
# took, as the JSON's "effective" does.
test_status_shows_every_option() {
	new_source every
	need mkdir -p "$T_DIR/m"
	local d=$T_DIR/d V views=(
		"noacl,nouser_xattr,ro,minixdf,casefold,nosuid,nodev,noexec,noatime,nodiratime,nosymfollow"
		"casefold=strict,strictatime,usrquota,size=104857600,inodes=1000"
		"grpquota,subdir=/sub"
		"quota,acl,user_xattr,rw,bsddf"
	)
	local i=0 text o tok line
	view "" "$LOOP" "$T_DIR/base"
	need mkdir -p "$T_DIR/base/sub"
	for o in "${views[@]}"; do
		view "$o" "$LOOP" "$d$i"
		((i++))
	done
	text=$("$STRICTFS" status)
	i=0
	for o in "${views[@]}"; do
		V=$d$i
		line=$(grep -F "  $V " <<<"$text")
		assert_eq "$(view_field "$V" .effective)" "$(awk '{ print $2 }' <<<"$line")" \
			"$V: the text status says what the JSON says"
		for tok in ${o//,/ }; do
			[[ $tok == subdir=* ]] && tok=subdir=/sub
			assert_contains ",$(view_field "$V" .effective)," ",$tok," "$V: shows $tok"
		done
		((i++))
	done
}

# ---- long option lists (never cut: what follows the cut would be dropped in silence) -----------

_a_run() { head -c "$1" /dev/zero | tr '\0' a; } # N: a string of N a's

test_long_option_lists_never_cut() {
	new_source long
	local V=$T_DIR/v fits
	mkdir -p "$V"
	# 4096 bytes with ",ro,nosuid": one byte too many for the kernel's page of mount data
	assert_refused "-o: the option list is longer than 4095 bytes" \
		"$STRICTFS" mount -o "comment=$(_a_run 4078),ro,nosuid" "$LOOP" "$V"
	assert_refused "-o: the option list is longer than 4095 bytes" \
		"$STRICTFS" mount -o "comment=$(_a_run 4078)" -o ro,nosuid "$LOOP" "$V"
	assert_refused "-o: the option list is longer than 4095 bytes" \
		"$MOUNT_HELPER" "$LOOP" "$V" -o "comment=$(_a_run 4078),ro,nosuid"
	# 4095 bytes: taken whole, the options after the comment in force
	fits="comment=$(_a_run 4077),ro,nosuid"
	assert_eq 4095 "${#fits}" "the list that fits is 4095 bytes"
	mount_view -o "comment=$(_a_run 4077)" -o ro,nosuid "$LOOP" "$V"
	assert_ok has_mount_opt "$V" ro
	assert_ok has_mount_opt "$V" nosuid
	assert_eq true "$(view_opt "$V" ro)" "status: ro"
	assert_eq nosuid "$(view_opt "$V" mount_flags)" "status: nosuid"
	assert_eq "$fits" "$(view_field "$V" .requested)" "status: requested whole"
	assert_fails_with "Read-only file system" touch "$V/f"
	assert_ok sfs_umount "$V"
}

# The requested history of a view grows with each remount; once it would pass the limit it
# starts again from the options in force, and a remount is never refused or cut for it.
test_remount_history_never_cut() {
	new_source hist
	local V=$T_DIR/v i
	view noacl "$LOOP" "$V"
	for ((i = 0; i < 3; i++)); do
		assert_ok "$STRICTFS" mount -o "remount,comment=$(_a_run 1500),nouser_xattr" "$V"
	done
	assert_eq false "$(view_opt "$V" user_xattr)" "nouser_xattr in force"
	assert_ok "$STRICTFS" mount -o "remount,comment=$(_a_run 3000),ro" "$V"
	assert_eq true "$(view_opt "$V" ro)" "ro in force after the history was full"
	assert_eq "noacl,nouser_xattr,rw,bsddf,remount,comment=$(_a_run 3000),ro" \
		"$(view_field "$V" .requested)" "requested: what was in force, then the last remount"
	assert_fails_with "Read-only file system" touch "$V/f"
	assert_refused "-o: the option list is longer than 4095 bytes" \
		"$STRICTFS" mount -o "remount,comment=$(_a_run 4090),rw" "$V"
	assert_eq true "$(view_opt "$V" ro)" "a refused remount changes nothing"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
