#!/bin/bash
# Inode flags and the other file-attribute ioctls (contract §4.7): chattr, lsattr and xfs_io's
# chattr and lsproj through a view do what they do on native ext4, as root and as an ordinary
# user, in acl, noacl, casefold and quota views; the casefold flag is the view's; a ro view
# refuses changes; flags set through one view hold in the others; what the kernel keeps from a
# FUSE server (fallocate collapse and insert, FIEMAP, FS_IOC_SHUTDOWN, swap files) is answered
# as by a file system without it, never with a made-up answer; fstrim trims the backing, and the
# label is the backing's.
# transport-independent: the ioctls are served above the transport, where both transports hand them; t_statx carries the transport's own translation in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FILEATTR_PY=$SFS_TEST_DIR/fileattr.py

fileattr() { "$PY" "$FILEATTR_PY" "$@" 2>&1; }

# attr_views: a source with an acl view A, a noacl view B, a casefold view C and a usrquota view
# Q, all writable by everyone at the root.
attr_views() {
	new_source fileattr
	A=$T_DIR/a
	B=$T_DIR/b
	C=$T_DIR/c
	Q=$T_DIR/q
	view acl "$LOOP" "$A"
	view noacl "$LOOP" "$B"
	view casefold "$LOOP" "$C"
	view usrquota "$LOOP" "$Q"
	chmod 1777 "$A"
}

# compare_case CASE NAME: CASE run in a fresh directory NAME of native ext4 and of every view;
# each view's lines must be native's.
compare_case() {
	local native v dir
	mkdir "$REF/$2"
	native=$(fileattr "$1" "$REF/$2")
	for v in A B C Q; do
		dir=${!v}/$2-$v
		mkdir "$dir"
		assert_eq "$native" "$(fileattr "$1" "$dir")" "$1 in view $v as on native ext4"
	done
	REPLY=$native
}

test_fileattr_flags_as_root_as_on_native() {
	native_ref
	attr_views
	compare_case root root
	assert_contains "$REPLY" "lsattr +a: ae" "native: chattr +a sets append-only"
	assert_contains "$REPLY" "file unlink: EPERM" "native: an append-only file cannot be removed"
	assert_contains "$REPLY" "dir+i create in: EPERM" "native: nothing is made in an immutable directory"
	compare_case fsx fsx
	assert_contains "$REPLY" "project 7: ENOTSUP" "native: no project ids without the project feature"
	assert_contains "$REPLY" "write to it: EPERM" "native: the append xflag holds"
}

test_fileattr_flags_as_a_user_as_on_native() {
	ensure_users
	native_ref
	attr_views
	local native d
	for d in "$REF/u" "$A/u" "$B/u"; do
		mkdir -m 1777 "$d"
		echo data >"$d/theirs"
		fileattr immutable "$d/theirs" >/dev/null
		"$PY" -c 'import fcntl,os,struct,sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, 0x40086602, struct.pack("I", 0x80020))' "$d/theirs" ||
			die "chattr +a on $d/theirs"
	done
	native=$(as_user "$SFS_ALICE" "$PY" "$FILEATTR_PY" user "$REF/u" 2>&1)
	assert_contains "$native" "chattr +d mine: ok" "native: an owner sets nodump"
	assert_contains "$native" "chattr +i mine: EPERM" "native: immutable asks CAP_LINUX_IMMUTABLE"
	assert_contains "$native" "chattr +d theirs: EPERM" "native: only the owner changes flags"
	assert_eq "$native" "$(as_user "$SFS_ALICE" "$PY" "$FILEATTR_PY" user "$A/u" 2>&1)" \
		"an ordinary user in an acl view as on native ext4"
	assert_eq "$native" "$(as_user "$SFS_ALICE" "$PY" "$FILEATTR_PY" user "$B/u" 2>&1)" \
		"and in a noacl view"
}

# The capability decides, not the uid: a user holding CAP_LINUX_IMMUTABLE may set +i, root
# without it may not, in a view as natively.
test_fileattr_immutable_follows_the_capability() {
	ensure_users
	native_ref
	attr_views
	local d native cap_user no_cap_root
	for d in "$REF" "$A"; do
		echo x >"$d/capf"
		chown "$SFS_ALICE" "$d/capf"
	done
	cap_user=(setpriv --reuid="$(id -u "$SFS_ALICE")" --regid="$(id -g "$SFS_ALICE")" --clear-groups
		--inh-caps=+linux_immutable --ambient-caps=+linux_immutable --)
	no_cap_root=(setpriv --bounding-set=-linux_immutable --inh-caps=-linux_immutable --)
	native=$("${cap_user[@]}" "$PY" "$FILEATTR_PY" immutable "$REF/capf" 2>&1)
	assert_eq "chattr +i: ok
lsattr: ie
chattr -i: ok" "$native" "native: the owner holding CAP_LINUX_IMMUTABLE sets +i"
	assert_eq "$native" "$("${cap_user[@]}" "$PY" "$FILEATTR_PY" immutable "$A/capf" 2>&1)" \
		"in a view too"
	native=$("${no_cap_root[@]}" "$PY" "$FILEATTR_PY" immutable "$REF/capf" 2>&1)
	assert_contains "$native" "chattr +i: EPERM" "native: root without it may not"
	assert_eq "$native" "$("${no_cap_root[@]}" "$PY" "$FILEATTR_PY" immutable "$A/capf" 2>&1)" \
		"nor in a view"
}

test_fileattr_casefold_flag_is_the_views() {
	native_ref
	attr_views
	local native
	mkdir "$REF/n" "$A/n" "$B/n2"
	native=$(fileattr nocasefold "$REF/n")
	assert_contains "$native" "chattr +F on a directory: ENOTSUP" "native: no casefold here"
	assert_eq "$native" "$(fileattr nocasefold "$A/n")" "acl view: +F refused as natively"
	assert_eq "$native" "$(fileattr nocasefold "$B/n2")" "noacl view: the same"
	mkdir "$C/cf1"
	assert_eq "lsattr -d: eF
lsattr file: e
chattr +d (F kept): ok
lsattr -d: deF
chattr -F: ENOTSUP
chattr +F on a file: ENOTSUP
chattr -d: ok
lsattr -d: eF" "$(fileattr casefold "$C/cf1")" \
		"casefold view: F shown on directories, kept through other changes, never turned off"
	assert_eq "e" "$(fileattr nocasefold "$A/cf1" | sed -n 's/^lsattr -d: //p' | head -1)" \
		"the same directory has no F in a view that does not fold (nothing reached the backing)"
}

test_fileattr_ro_view_refuses_changes() {
	native_ref
	new_source fileattr_ro
	local W=$T_DIR/w R=$T_DIR/r RO=$T_DIR/refro native
	view "" "$LOOP" "$W"
	view ro "$LOOP" "$R"
	echo x >"$W/file"
	echo x >"$REF/file"
	mkdir -p "$RO"
	need mount --bind -o ro "$REF" "$RO"
	native=$(fileattr readonly "$RO")
	assert_contains "$native" "chattr +d: EROFS" "native read-only mount: EROFS"
	assert_eq "$native" "$(fileattr readonly "$R")" "a ro view as a read-only ext4 mount"
	assert_eq "e" "$(fileattr readonly "$W" | sed -n 's/^lsattr: //p')" "nothing changed"
}

test_fileattr_flags_hold_in_every_view() {
	attr_views
	local before
	echo data >"$A/shared"
	before=$(stat -c %Z.%z "$B/shared")
	sleep 1.1
	assert_ok chattr +i "$A/shared"
	assert_contains "$(lsattr "$B/shared")" "i" "B sees the flag A set"
	assert_ne "$before" "$(stat -c %Z.%z "$B/shared")" "and the ctime it moved, at once"
	assert_fails_with "Operation not permitted" sh -c "echo more >>'$B/shared'"
	assert_fails_with "Operation not permitted" rm "$Q/shared"
	local gen
	gen=$(lsattr -v "$A/shared" | awk '{print $1}')
	assert_ok test -n "$gen"
	assert_eq "$gen" "$(lsattr -v "$C/shared" | awk '{print $1}')" \
		"lsattr -v: the backing's inode generation, the same in every view"
	assert_ok chattr -i "$C/shared"
	assert_ok sh -c "echo more >>'$A/shared'"
	assert_eq "data more" "$(tr '\n' ' ' <"$B/shared" | sed 's/ $//')" "writable again everywhere"
}

# The label is the device's, as for every mount of an ext4 device: set through one view, seen
# through the others; a ro view or a caller without CAP_SYS_ADMIN is refused as natively.
test_fileattr_label_is_the_backings() {
	native_ref
	attr_views
	local RO=$T_DIR/refro R=$T_DIR/r
	view ro "$LOOP" "$R"
	mkdir -p "$RO"
	need mount --bind -o ro "$REF" "$RO"
	assert_eq "set label: ok
label: viewlabel" "$(fileattr label "$A" viewlabel)" "root sets the label through a view"
	assert_eq "label: viewlabel" "$(fileattr label "$C")" "every view of the source shows it"
	assert_eq "set label: ok
label: native" "$(fileattr label "$REF" native)" "as natively"
	assert_eq "$(fileattr label "$RO" other)" "$(fileattr label "$R" other | sed 's/viewlabel/native/')" \
		"a ro view refuses as a read-only ext4 mount"
	assert_contains "$(fileattr label "$R" other)" "set label: EROFS" "EROFS"
	local native
	native=$(as_user nobody "$PY" "$FILEATTR_PY" label "$REF" x 2>&1 | head -1)
	assert_eq "set label: EPERM" "$native" "native: a user may not"
	assert_eq "$native" "$(as_user nobody "$PY" "$FILEATTR_PY" label "$B" x 2>&1 | head -1)" \
		"nor through a view"
	assert_eq "label: viewlabel" "$(fileattr label "$Q")" "nothing changed the label"
}

# blkid(8) reads the label a view set at once, as it does after a native mount, and after the
# view's umount(8). The daemon reads the device's UUID without writing blkid's cache, which
# blkid trusts for 2 seconds (xfstests generic/492).
test_fileattr_label_seen_by_blkid_at_once() {
	native_ref
	new_source fileattr
	A=$T_DIR/a
	view acl "$LOOP" "$A"
	local ref_dev
	ref_dev=$(loops_of "$T_DIR/ref.img" | head -1)
	fileattr label "$REF" native.492 >/dev/null
	fileattr label "$A" view.492 >/dev/null
	assert_eq "native.492" "$(blkid -s LABEL -o value "$ref_dev")" "native: blkid sees the new label"
	assert_eq "view.492" "$(blkid -s LABEL -o value "$LOOP")" "blkid sees the label set through a view"
	assert_ok umount "$A"
	assert_eq "view.492" "$(blkid -s LABEL -o value "$LOOP")" "and after umount(8) of the view"
}

# What the kernel's FUSE keeps from the daemon (contract §4.7): refused as a file system without
# it would, never answered wrongly, and nothing reaches the daemon to be half done.
test_fileattr_kernel_limits_answered_as_without() {
	native_ref
	attr_views
	mkdir "$REF/l" "$A/l"
	assert_eq "collapse range: ok
insert range: ok
size: 12288
fiemap extents: 2
file system uuid: True" "$(fileattr limits "$REF/l")" "native ext4 does them"
	assert_eq "collapse range: ENOTSUP
insert range: ENOTSUP
size: 12288
fiemap extents: ENOTSUP
file system uuid: ENOTTY" "$(fileattr limits "$A/l")" "a view: EOPNOTSUPP, the data as it was"
	# the kernel refuses before asking: the daemon counts no request for them
	assert_eq "requests for collapse and insert: 0" "$("$PY" -c '
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
def requests():
    s = json.loads(subprocess.run([sys.argv[1], "status", "--json"], capture_output=True).stdout)
    return next(v["requests"] for d in s["daemons"] for v in d["views"] if v["mountpoint"] == sys.argv[2])
fd = os.open(sys.argv[2] + "/l/three", os.O_RDWR)
asking = -requests() + requests()  # what asking the daemon costs the view itself
before = requests()
libc.fallocate(fd, 0x08, ctypes.c_long(4096), ctypes.c_long(4096))
libc.fallocate(fd, 0x20, ctypes.c_long(0), ctypes.c_long(4096))
print("requests for collapse and insert:", requests() - before - asking)' "$STRICTFS" "$A")" "no request"
	assert_eq "shutdown: ENOTTY
still serving: True" "$(fileattr shutdown "$A/l")" \
		"FS_IOC_SHUTDOWN: not a view's to do (its flags never reach the daemon)"
	dd if=/dev/zero of="$A/swap" bs=1M count=4 status=none
	chmod 600 "$A/swap"
	need mkswap "$A/swap" >/dev/null
	assert_fails_with "Invalid argument" swapon "$A/swap"
	assert_not_contains "$(cat /proc/swaps)" "$A/swap" "no swap file in use"
}

test_fileattr_fstrim_trims_the_backing() {
	ensure_users
	native_ref
	attr_views
	assert_ok fstrim "$REF"
	assert_ok fstrim "$A"
	assert_ok fstrim "$Q"
	assert_fails_with "Operation not permitted" as_user "$SFS_ALICE" fstrim "$REF"
	assert_fails_with "Operation not permitted" as_user "$SFS_ALICE" fstrim "$A"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
