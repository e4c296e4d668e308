#!/bin/bash
# The seed scenario: one ext4 device, a noacl,nouser_xattr view A and an acl,user_xattr view B,
# served by one daemon, each behaving as ext4 with its options would; then teardown releases the
# device for a native mount and losetup -d. (The same with view B made by mount -t strictfs is
# in t_helper.sh.)
# transport-independent: the seed scenario's semantics are the profiles'; t_data, t_security and t_coherence carry the request path in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

seed_setup() {
	new_source seed
	A=$T_DIR/a
	B=$T_DIR/b
	view noacl,nouser_xattr "$LOOP" "$A"
	view acl,user_xattr "$LOOP" "$B"
	PID=$(view_pid "$A")
	[[ -n $PID ]] || die "status does not list view $A"
}

test_seed_one_daemon_two_views() {
	seed_setup
	assert_eq 1 "$(daemons_for_source "$LOOP" | wc -l)" "status: one daemon for $LOOP"
	assert_eq "$PID" "$(view_pid "$B")" "status: both views served by the same daemon"
	assert_eq "$A $B" "$(daemon_views "$PID")" "status: the daemon has exactly the two views"
	assert_ok pid_alive "$PID"
	assert_eq "$LOOP" "$(daemon_field "$A" .source)" "status: source"
	assert_eq exclusive "$(daemon_field "$A" .backing.mode)" "status: backing mode"
	assert_eq "$(lsblk -dno MAJ:MIN "$LOOP" | tr -d ' ')" "$(daemon_field "$A" .backing.device)" "status: backing device"
	assert_eq false "$(view_opt "$A" acl)" "status: A acl"
	assert_eq false "$(view_opt "$A" user_xattr)" "status: A user_xattr"
	assert_eq true "$(view_opt "$B" acl)" "status: B acl"
	assert_eq true "$(view_opt "$B" user_xattr)" "status: B user_xattr"
	assert_eq noacl,nouser_xattr "$(view_field "$A" .requested)" "status: A requested"
	assert_eq acl,user_xattr "$(view_field "$B" .requested)" "status: B requested"
	assert_eq off "$(view_opt "$A" casefold)" "status: A casefold off"
	assert_eq none "$(view_opt "$A" quota)" "status: A quota none"
	assert_eq false "$(view_opt "$A" ro)" "status: A rw"
	assert_eq / "$(view_opt "$A" subdir)" "status: A subdir /"
	assert_eq "$LOOP $A fuse.strictfs" "$(mount_line "$A")" "/proc/self/mounts: view A"
	assert_eq "$LOOP $B fuse.strictfs" "$(mount_line "$B")" "/proc/self/mounts: view B"
	assert_eq "" "$(awk -v d="$LOOP" '$1 == d && $3 == "ext4"' /proc/self/mounts)" "the backing is in no mount table"
}

test_seed_noacl_view_refuses_acl_and_user_xattr() {
	seed_setup
	echo data >"$B/f"
	assert_fails_with "Operation not supported" setfacl -m "u:$SFS_ALICE:r" "$A/f"
	assert_fails_with "Operation not supported" setfacl -d -m "u:$SFS_ALICE:r" "$A"
	assert_fails_with "Operation not supported" setfattr -n user.x -v 1 "$A/f"
	assert_eq "" "$(getfattr --absolute-names -n user.x "$B/f" 2>/dev/null | grep user.x)" "failed setfattr in A set nothing"
	assert_ok setfattr -n user.y -v 1 "$B/f"
	assert_ok setfacl -m "u:$SFS_ALICE:r" "$B/f"
	assert_fails_with "Operation not supported" getfattr -n user.y "$A/f"
	assert_fails_with "Operation not supported" setfattr -x user.y "$A/f"
	assert_fails_with "Operation not supported" getfattr -n system.posix_acl_access "$A/f"
	assert_fails_with "Operation not supported" setfattr -x system.posix_acl_access "$A/f"
	assert_eq 1 "$(getfattr --only-values -n user.y "$B/f" 2>/dev/null)" "user.y intact in B"
	assert_contains "$(getfacl -c "$B/f" 2>/dev/null)" "user:$SFS_ALICE:r--" "ACL intact in B"
}

test_seed_noacl_view_lists_neither() {
	seed_setup
	echo data >"$B/f"
	mkdir "$B/d"
	need setfacl -m "u:$SFS_ALICE:r" "$B/f"
	need setfattr -n user.x -v 1 "$B/f"
	need setfacl -d -m "u:$SFS_ALICE:rx" "$B/d"
	need setfattr -n user.x -v 1 "$B/d"
	local out
	for obj in f d; do
		out=$(getfattr -d -m - "$A/$obj" 2>&1 | grep -v '^#')
		assert_not_contains "$out" system.posix_acl "A/$obj: getfattr -d -m - lists no ACL"
		assert_not_contains "$out" user. "A/$obj: getfattr -d -m - lists no user xattr"
		out=$(getfattr -d -m - "$B/$obj" 2>&1 | grep -v '^#')
		assert_contains "$out" user.x "B/$obj: user.x listed"
	done
	assert_contains "$(getfattr -d -m - "$B/f" 2>&1)" system.posix_acl_access "B/f: ACL listed"
	assert_contains "$(getfattr -d -m - "$B/d" 2>&1)" system.posix_acl_default "B/d: default ACL listed"
}

test_seed_acl_view_works() {
	seed_setup
	echo data >"$B/f"
	assert_ok setfacl -m "u:$SFS_ALICE:rw,g:$SFS_GRP:r" "$B/f"
	local acl
	acl=$(getfacl -c "$B/f" 2>&1)
	assert_contains "$acl" "user:$SFS_ALICE:rw-" "getfacl shows the named user"
	assert_contains "$acl" "group:$SFS_GRP:r--" "getfacl shows the named group"
	assert_contains "$acl" "mask::rw-" "getfacl shows the mask"
	assert_ok setfattr -n user.x -v hello "$B/f"
	assert_eq hello "$(getfattr --only-values -n user.x "$B/f" 2>/dev/null)" "user.x readable"
	assert_ok setfattr -x user.x "$B/f"
	assert_fails_with "No such attribute" getfattr -n user.x "$B/f"
	assert_ok setfacl -b "$B/f"
	assert_fails_with "No such attribute" getfattr -n system.posix_acl_access "$B/f"
}

test_seed_named_acl_grants_only_in_acl_view() {
	seed_setup
	echo secret >"$B/s"
	chmod 600 "$B/s"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$B/s"
	assert_ok setfacl -m "u:$SFS_ALICE:r" "$B/s"
	assert_eq secret "$(as_user "$SFS_ALICE" cat "$B/s" 2>&1)" "alice reads through the ACL in B"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$A/s"
	assert_fails_with "Permission denied" as_user "$SFS_BOB" cat "$B/s"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" sh -c "echo x >> '$B/s'"
}

test_seed_teardown_releases_device() {
	seed_setup
	echo one >"$B/f"
	need setfacl -m "u:$SFS_ALICE:r" "$B/f"
	need setfattr -n user.x -v 1 "$B/f"

	assert_ok sfs_umount "$A"
	assert_ok not_mounted "$A"
	assert_ok wait_until 2 status_lacks_view "$A"
	assert_eq "$B" "$(daemon_views "$PID")" "status: only B left"
	assert_ok sh -c "echo two >> '$B/f'"
	assert_eq "one two" "$(tr '\n' ' ' <"$B/f" | sed 's/ $//')" "B still reads and writes"
	assert_contains "$(getfacl -c "$B/f" 2>&1)" "user:$SFS_ALICE:r--" "B still has ACLs"

	assert_ok sfs_umount "$B"
	assert_ok not_mounted "$B"
	assert_ok pid_gone "$PID"
	assert_eq "" "$(daemons_for_source "$LOOP")" "status: no daemon for $LOOP"
	assert_ok device_free "$LOOP"

	# A native mount gets a fresh superblock with its own options (not a shared one).
	mkdir "$T_DIR/native"
	assert_ok mount -o nodelalloc "$LOOP" "$T_DIR/native"
	assert_ok has_mount_opt "$T_DIR/native" nodelalloc
	assert_eq "one two" "$(tr '\n' ' ' <"$T_DIR/native/f" | sed 's/ $//')" "data on the device"
	assert_contains "$(getfacl -c "$T_DIR/native/f" 2>&1)" "user:$SFS_ALICE:r--" "ACL on the device"
	assert_eq 1 "$(getfattr --only-values -n user.x "$T_DIR/native/f" 2>/dev/null)" "user.x on the device"
	assert_ok umount "$T_DIR/native"
	assert_ok losetup -d "$LOOP"
	assert_ok wait_until 3 no_loop_for "$IMG"
}

# The README's first command: the demo shows what it says it shows, and leaves nothing behind.
test_seed_demo_as_the_readme_runs_it() {
	local out t loop
	assert_ok timeout 120 "$STRICTFS" demo
	out=$(cat "$T_DIR/.out" "$T_DIR/.err")
	t=$(grep -o -m1 '/tmp/strictfs-demo\.[A-Za-z0-9]*' <<<"$out")
	assert_ne "" "$t" "the demo names its temporary directory"
	assert_eq "$t/k2 rw,relatime,nodelalloc" "$(grep -o "$t/k2 .*" <<<"$out" | tr -s ' ')" \
		"the kernel alone: the second mount got the first one's nodelalloc"
	assert_eq "setfacl: $t/a/file: Operation not supported" \
		"$(grep -o "setfacl: $t/a/file: .*" <<<"$out")" "the noacl view refuses an ACL"
	assert_eq "setfattr: $t/a/file: Operation not supported" \
		"$(grep -o "setfattr: $t/a/file: .*" <<<"$out")" "the nouser_xattr view refuses a user xattr"
	assert_eq 0 "$(grep -c "$t/b/file: Operation not supported" <<<"$out")" "the acl,user_xattr view refuses nothing"
	assert_eq 1 "$(grep -cx '  user:nobody:r--' <<<"$out")" "the acl view shows the ACL entry"
	assert_eq 1 "$(grep -cx '  user.colour="blue"' <<<"$out")" "the user_xattr view shows the xattr"
	assert_eq "$t/a noacl,nouser_xattr,rw,bsddf" "$(grep -o "$t/a  *[a-z_,]*" <<<"$out" | tr -s ' ')" \
		"status lists view a with its options"
	assert_eq "$t/b acl,user_xattr,rw,bsddf" "$(grep -o "$t/b  *[a-z_,]*" <<<"$out" | tr -s ' ')" \
		"status lists view b with its options"
	assert_contains "$out" "(a plain mount of the device works again)" "teardown frees the device"
	assert_ok test ! -e "$t"
	loop=$(grep -o -m1 'The kernel alone, on /dev/loop[0-9]*' <<<"$out")
	loop=${loop##* }
	assert_ne "" "$loop" "the demo names its loop device"
	assert_eq "" "$(awk -v t="$t/" 'index($2, t) == 1' /proc/self/mounts)" "nothing mounted under $t"
	assert_eq "" "$(losetup -l -n -O NAME,BACK-FILE | grep -F "$t/")" "no loop device left on the demo's image"
	assert_eq "" "$(daemon_procs "$(source_key "$loop")")" "no daemon left for $loop"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
