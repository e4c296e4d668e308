#!/bin/bash
# mount.strictfs: mount(8) -t strictfs, fstab lines with mount -a, and the helper's own
# conventions. mount(8) tests run in a private mount namespace where /sbin is overlaid with
# mount.strictfs (with_mount_helper); views made there live only in that namespace.
# transport-independent: mount.strictfs and mount(8)'s conventions, decided before any view serves a request
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

test_helper_seed_view_b_via_mount_t() { with_mount_helper _helper_seed_body; }
_helper_seed_body() {
	new_source seed
	local A=$T_DIR/a B=$T_DIR/b pid
	view noacl,nouser_xattr "$LOOP" "$A"
	mkdir -p "$B"
	assert_ok mount -t strictfs "$LOOP" "$B" -o acl,user_xattr
	pid=$(view_pid "$A")
	assert_eq "$LOOP $B fuse.strictfs" "$(mount_line "$B")" "/proc/self/mounts: view made by mount -t"
	assert_eq "$pid" "$(view_pid "$B")" "one daemon serves both views"
	assert_eq 1 "$(daemons_for_source "$LOOP" | wc -l)" "status: one daemon for $LOOP"
	assert_eq "$A $B" "$(daemon_views "$pid")" "status: two views"
	assert_eq false "$(view_opt "$A" acl)" "status: A acl"
	assert_eq false "$(view_opt "$A" user_xattr)" "status: A user_xattr"
	assert_eq true "$(view_opt "$B" acl)" "status: B acl"
	assert_eq true "$(view_opt "$B" user_xattr)" "status: B user_xattr"

	echo secret >"$B/s"
	chmod 600 "$B/s"
	assert_fails_with "Operation not supported" setfacl -m "u:$SFS_ALICE:r" "$A/s"
	assert_fails_with "Operation not supported" setfattr -n user.x -v 1 "$A/s"
	assert_ok setfacl -m "u:$SFS_ALICE:r" "$B/s"
	assert_ok setfattr -n user.x -v 1 "$B/s"
	assert_eq secret "$(as_user "$SFS_ALICE" cat "$B/s" 2>&1)" "alice reads through the ACL in B"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$A/s"
	local out
	out=$(getfattr -d -m - "$A/s" 2>&1 | grep -v '^#')
	assert_not_contains "$out" system.posix_acl "A lists no ACL"
	assert_not_contains "$out" user. "A lists no user xattr"

	assert_ok umount "$B"
	assert_ok wait_until 3 status_lacks_view "$B"
	assert_eq "$A" "$(daemon_views "$pid")" "status: B dropped after plain umount"
	assert_ok sfs_umount "$A"
	assert_ok pid_gone "$pid"
}

_write_fstab() { # LOOP
	printf '%s %s strictfs noacl,nouser_xattr 0 0\n%s %s strictfs acl,user_xattr 0 0\n' \
		"$1" "$T_DIR/a" "$1" "$T_DIR/b" >"$T_DIR/fstab"
	mkdir -p "$T_DIR/a" "$T_DIR/b"
}

test_helper_fstab_mount_all() { with_mount_helper _helper_fstab_all_body; }
_helper_fstab_all_body() {
	new_source fst
	local A=$T_DIR/a B=$T_DIR/b pid
	_write_fstab "$LOOP"
	assert_ok mount -a -T "$T_DIR/fstab"
	assert_eq "$LOOP $A fuse.strictfs" "$(mount_line "$A")" "fstab line 1 mounted"
	assert_eq "$LOOP $B fuse.strictfs" "$(mount_line "$B")" "fstab line 2 mounted"
	pid=$(view_pid "$A")
	assert_eq "$A $B" "$(daemon_views "$pid")" "one daemon, both views"
	assert_eq false "$(view_opt "$A" acl)" "A acl off"
	assert_eq true "$(view_opt "$B" acl)" "B acl on"
	echo x >"$B/f"
	assert_fails_with "Operation not supported" setfattr -n user.x -v 1 "$A/f"
	assert_ok setfattr -n user.x -v 1 "$B/f"
	assert_ok umount "$A" "$B"
	assert_ok wait_daemon_gone "$pid" 5
}

test_helper_fstab_one_entry() { with_mount_helper _helper_fstab_one_body; }
_helper_fstab_one_body() {
	new_source fst
	local A=$T_DIR/a B=$T_DIR/b pid
	_write_fstab "$LOOP"
	assert_ok mount -T "$T_DIR/fstab" "$B"
	assert_ok is_mounted "$B"
	assert_ok not_mounted "$A"
	assert_eq true "$(view_opt "$B" acl)" "options taken from the fstab line"
	assert_eq true "$(view_opt "$B" user_xattr)" "options taken from the fstab line"
	pid=$(view_pid "$B")
	assert_ok umount "$B"
	assert_ok wait_daemon_gone "$pid" 5
}

test_helper_refusal_exit_32() { with_mount_helper _helper_refusal_body; }
_helper_refusal_body() {
	new_source ref
	local V=$T_DIR/v
	mkdir -p "$V"
	assert_exit 32 mount -t strictfs "$LOOP" "$V" -o quota,cache=writeback
	assert_contains "$(cat "$T_DIR/.err")" "strictfs: cache=writeback: cannot be combined with quota" \
		"mount(8) shows the helper's message"
	assert_ok not_mounted "$V"
	assert_eq "" "$(daemons_for_source "$LOOP")" "no daemon started"
	assert_exit 32 mount -t strictfs "$LOOP" "$V" -o bogus
	assert_contains "$(cat "$T_DIR/.err")" "strictfs: bogus" "mount(8) shows the helper's message"
	assert_ok not_mounted "$V"
}

test_helper_direct_invocation() {
	[[ -x $MOUNT_HELPER ]] || die "mount helper not found: $MOUNT_HELPER"
	new_source dir
	local V=$T_DIR/v W=$T_DIR/w X=$T_DIR/x pid
	mkdir -p "$V" "$W" "$X"
	assert_ok "$MOUNT_HELPER" "$LOOP" "$V" -o rw,noacl
	assert_eq "$LOOP $V fuse.strictfs" "$(mount_line "$V")" "helper mounted the view"
	assert_eq false "$(view_opt "$V" acl)" "helper passed the options"
	pid=$(view_pid "$V")
	assert_ok "$MOUNT_HELPER" "$LOOP" "$W" -n -o ro
	assert_ok has_mount_opt "$W" ro
	_capture "$MOUNT_HELPER" "$LOOP" "$X" -o bogus
	assert_eq 32 "$RC" "helper: refused option exits 32"
	assert_eq 1 "$(grep -c '' "$T_DIR/.err")" "helper: one line on stderr"
	assert_contains "$(head -n1 "$T_DIR/.err")" "strictfs: bogus" "helper: message names the option"
	assert_ok not_mounted "$X"
	assert_eq "$V $W" "$(daemon_views "$pid")" "refusal left the daemon's views alone"
	assert_ok umount "$V"
	assert_ok wait_until 3 status_lacks_view "$V"
	assert_ok sfs_umount "$W"
	assert_ok pid_gone "$pid"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
