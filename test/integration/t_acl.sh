#!/bin/bash
# acl / noacl semantics (contract §5.1) and the trusted.* rule (§5.2): A is a noacl view, B an acl
# view of the same device. Where ext4 can show the expected result, compare with a native mount.
# transport-independent: which access an ACL grants is decided by the kernel's checks and the view profile, the same code whichever way requests come; t_security and t_creds carry the request path in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

acl_setup() {
	noacl_and_acl_views acl
}

_inherit_ops() { # DIR: default ACL inheritance under umask 077; prints modes and ACLs
	mkdir "$1/d" && setfacl -d -m "u:$SFS_ALICE:rwx" "$1/d" || return 1
	bash -c "umask 077 && touch '$1/d/f' && mkdir '$1/d/sub'" || return 1
	echo "f $(stat -c %a "$1/d/f")"
	getfacl -c "$1/d/f"
	echo "sub $(stat -c %a "$1/d/sub")"
	getfacl -c "$1/d/sub"
}

test_acl_default_acl_inherited_in_acl_view() {
	acl_setup
	native_ref
	local got want acl
	got=$(_inherit_ops "$B" 2>&1)
	want=$(_inherit_ops "$REF" 2>&1)
	assert_eq "$want" "$got" "inheritance in the acl view equals native ext4"
	acl=$(getfacl -c "$B/d/f" 2>/dev/null)
	assert_contains "$acl" "user:$SFS_ALICE:rwx" "inherited named entry"
	assert_contains "$acl" "mask::rw-" "mask from the create mode, not the umask"
	assert_contains "$acl" "other::r--" "umask 077 not applied under a default ACL"
	assert_eq 664 "$(stat -c %a "$B/d/f")" "file mode from the default ACL"
	assert_contains "$(getfacl -c "$B/d/sub" 2>&1)" "default:user:$SFS_ALICE:rwx" "subdirectory inherits the default ACL"
	assert_eq 775 "$(stat -c %a "$B/d/sub")" "subdirectory mode from the default ACL"
}

test_acl_umask_applied_without_default_acl() {
	acl_setup
	assert_ok bash -c "umask 027 && touch '$B/f' && mkdir '$B/d'"
	assert_eq 640 "$(stat -c %a "$B/f")" "file mode 0666 & ~027"
	assert_eq 750 "$(stat -c %a "$B/d")" "dir mode 0777 & ~027"
	assert_fails_with "No such attribute" getfattr -n system.posix_acl_access "$B/f"
	assert_ok bash -c "umask 077 && touch '$B/g'"
	assert_eq 600 "$(stat -c %a "$B/g")" "file mode 0666 & ~077"
}

test_noacl_create_under_default_acl_gets_no_acl() {
	acl_setup
	mkdir "$B/d"
	need setfacl -d -m "u:$SFS_ALICE:rwx" "$B/d"
	assert_ok bash -c "umask 022 && touch '$A/d/f' && mkdir '$A/d/sub'"
	assert_ok bash -c "umask 077 && touch '$A/d/g'"
	assert_eq 644 "$(stat -c %a "$B/d/f")" "file mode = 0666 & ~umask"
	assert_eq 755 "$(stat -c %a "$B/d/sub")" "dir mode = 0777 & ~umask"
	assert_eq 600 "$(stat -c %a "$B/d/g")" "file mode = 0666 & ~077"
	assert_eq "$(printf 'user::rw-\ngroup::r--\nother::r--')" "$(getfacl -c "$B/d/f" 2>/dev/null)" "file has only base entries"
	assert_fails_with "No such attribute" getfattr -n system.posix_acl_access "$B/d/f"
	assert_fails_with "No such attribute" getfattr -n system.posix_acl_access "$B/d/sub"
	assert_fails_with "No such attribute" getfattr -n system.posix_acl_default "$B/d/sub"
	assert_fails_with "No such attribute" getfattr -n system.posix_acl_access "$B/d/g"
	assert_eq 644 "$(stat -c %a "$A/d/f")" "mode as seen in the noacl view"
}

test_noacl_named_user_entry_does_not_deny_read() {
	acl_setup
	echo data >"$B/f"
	chmod 0664 "$B/f"
	need setfacl -m "u:$SFS_BOB:---" "$B/f"
	assert_eq 664 "$(stat -c %a "$B/f")" "mode stays 0664"
	assert_eq data "$(as_user "$SFS_BOB" cat "$A/f" 2>&1)" "noacl: bob reads as other (mode only)"
	assert_fails_with "Permission denied" as_user "$SFS_BOB" cat "$B/f"
	assert_eq data "$(as_user "$SFS_ALICE" cat "$B/f" 2>&1)" "acl: alice (no entry) reads as other"
}

test_noacl_named_user_entry_does_not_deny_write() {
	acl_setup
	echo data >"$B/f"
	chmod 0666 "$B/f"
	need setfacl -m "u:$SFS_BOB:r" "$B/f"
	assert_ok as_user "$SFS_BOB" sh -c "echo bob >> '$A/f'"
	assert_fails_with "Permission denied" as_user "$SFS_BOB" sh -c "echo bob2 >> '$B/f'"
	assert_eq "data bob" "$(tr '\n' ' ' <"$B/f" | sed 's/ $//')" "exactly the noacl write landed"
}

test_noacl_named_group_entry_does_not_deny() {
	acl_setup
	echo data >"$B/f"
	chmod 0664 "$B/f"
	need setfacl -m "g:$SFS_GRP:---" "$B/f"
	assert_eq data "$(as_user "$SFS_ALICE" cat "$A/f" 2>&1)" "noacl: group member reads as other"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$B/f"
	assert_eq data "$(as_user "$SFS_BOB" cat "$B/f" 2>&1)" "acl: non-member reads as other"
}

test_noacl_named_entries_do_not_grant() {
	acl_setup
	echo u >"$B/u"
	chmod 0600 "$B/u"
	need setfacl -m "u:$SFS_ALICE:rw" "$B/u"
	echo g >"$B/g"
	chmod 0640 "$B/g"
	need setfacl -m "g:$SFS_GRP:rw" "$B/g"
	assert_eq u "$(as_user "$SFS_ALICE" cat "$B/u" 2>&1)" "acl: named user grants"
	assert_eq g "$(as_user "$SFS_ALICE" cat "$B/g" 2>&1)" "acl: named group grants"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$A/u"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$A/g"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" sh -c "echo x >> '$A/u'"
}

test_noacl_mode_only_never_grants_more() {
	acl_setup
	echo data >"$B/f"
	chmod 0644 "$B/f"
	need setfacl -m "u:$SFS_BOB:---" "$B/f"
	assert_eq data "$(as_user "$SFS_BOB" cat "$A/f" 2>&1)" "bob reads as other"
	assert_fails_with "Permission denied" as_user "$SFS_BOB" sh -c "echo x >> '$A/f'"
	assert_fails_with "Permission denied" as_user "$SFS_BOB" truncate -s 0 "$A/f"
	echo s >"$B/s"
	chmod 0600 "$B/s"
	assert_fails_with "Permission denied" as_user "$SFS_BOB" cat "$A/s"
	mkdir -m 0755 "$B/d"
	assert_fails_with "Permission denied" as_user "$SFS_BOB" touch "$A/d/x"
	assert_eq "data" "$(cat "$B/f")" "file unchanged"
}

test_noacl_getfacl_shows_mode_only() {
	acl_setup
	echo data >"$B/f"
	chmod 0600 "$B/f"
	need setfacl -m "u:$SFS_ALICE:r" "$B/f"
	local out
	out=$(getfacl -c "$A/f" 2>/dev/null)
	assert_eq 0 "$?" "getfacl exits 0 in the noacl view"
	assert_eq "$(printf 'user::rw-\ngroup::r--\nother::---')" "$out" "getfacl shows entries from the mode only"
}

test_noacl_chmod_of_file_with_acl_keeps_mask_consistent() {
	acl_setup
	echo data >"$B/f"
	chmod 0640 "$B/f"
	need setfacl -m "u:$SFS_ALICE:rw" "$B/f"
	assert_eq 660 "$(stat -c %a "$B/f")" "mask rw- shows as group bits"
	assert_ok chmod 0640 "$A/f"
	assert_eq 640 "$(stat -c %a "$B/f")" "mode changed"
	assert_contains "$(getfacl -c "$B/f" 2>&1)" "mask::r--" "ACL mask follows the mode"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" sh -c "echo x >> '$B/f'"
}

test_trusted_xattr_listed_only_for_root() {
	acl_setup
	echo data >"$B/f"
	chmod 0644 "$B/f"
	need setfattr -n trusted.x -v 1 "$B/f"
	need setfattr -n user.u -v 1 "$B/f"
	local V out
	for V in "$A" "$B"; do
		out=$(getfattr -d -m - "$V/f" 2>&1)
		assert_contains "$out" trusted.x "root lists trusted.x in ${V##*/}"
		out=$(as_user "$SFS_ALICE" getfattr -d -m - "$V/f" 2>&1)
		assert_not_contains "$out" trusted. "alice does not see trusted.* in ${V##*/}"
		assert_fails as_user "$SFS_ALICE" getfattr -n trusted.x "$V/f"
	done
	assert_contains "$(as_user "$SFS_ALICE" getfattr -d -m - "$B/f" 2>&1)" user.u "alice sees user.* in B"
	assert_fails_with "Operation not permitted" as_user "$SFS_ALICE" setfattr -n trusted.y -v 1 "$B/f"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
