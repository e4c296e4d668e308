#!/bin/bash
# File handles (contract §4.2): a view's node ids are the backing's file handles, so a handle
# taken with name_to_handle_at opens with open_by_handle_at after the kernel has dropped the
# inode and the daemon has forgotten the node, as on native ext4 (xfstests generic/426,
# 467, 477, 756, 777); a subdir view answers no handle for what lies outside its subtree, and
# no view one of the admin state /.strictfs.
# transport-independent: node ids and what a handle may reach are the inode table's and the confine policy's, above the transport
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HANDLES=$SFS_TEST_DIR/handles.py

handle_of() { "$PY" "$HANDLES" encode "$1"; }
read_by_handle() { "$PY" "$HANDLES" read "$1" "$2"; }   # MOUNTPOINT HANDLE
list_by_handle() { "$PY" "$HANDLES" list "$1" "$2"; }   # MOUNTPOINT HANDLE

# forget_all MOUNTPOINT: the kernel drops unused dentries and inodes, and its FORGETs reach the
# daemon; asserts that within 5 s the daemon holds no more than the view's root and the
# backing's (status --json: .cache.inodes, the daemon's node table), so that what follows is
# answered from the backing by handle, not from a node still known.
forget_all() {
	sync
	echo 2 >/proc/sys/vm/drop_caches
	if wait_until 5 _daemon_nodes_at_most "$1" 2; then
		ok "the daemon serving $1 forgot its nodes ($(daemon_field "$1" .cache.inodes) left)"
	else
		fail "the daemon serving $1 still holds '$(daemon_field "$1" .cache.inodes)' nodes, expected at most 2"
	fi
}
_daemon_nodes_at_most() { # MOUNTPOINT N: the daemon serving MOUNTPOINT holds at most N nodes
	local n
	n=$(daemon_field "$1" .cache.inodes)
	[[ $n =~ ^[0-9]+$ ]] && ((n <= $2))
}

_make_tree() { # DIR: d/f (hello), d/sub/g (deep), e/h (outside)
	mkdir -p "$1/d/sub" "$1/e" && echo hello >"$1/d/f" && echo deep >"$1/d/sub/g" &&
		echo outside >"$1/e/h" || die "making the tree in $1"
}

test_export_handles_open_after_the_daemon_forgot() {
	new_source exp
	native_ref
	_make_tree "$REF"
	local V=$T_DIR/v W=$T_DIR/w hf hd hsub nf nd
	view acl "$LOOP" "$V"
	_make_tree "$V"
	hf=$(handle_of "$V/d/f") && hd=$(handle_of "$V/d") && hsub=$(handle_of "$V/d/sub") ||
		die "name_to_handle_at in the view"
	nf=$(handle_of "$REF/d/f") && nd=$(handle_of "$REF/d") || die "name_to_handle_at on ext4"
	sync
	echo 2 >/proc/sys/vm/drop_caches
	assert_eq "hello" "$(read_by_handle "$REF" "$nf")" "native: the file opens by handle"
	assert_eq "f sub" "$(list_by_handle "$REF" "$nd")" "native: the directory opens by handle"

	forget_all "$V"
	assert_eq "hello" "$(read_by_handle "$V" "$hf")" "view: the file opens by handle, as native"
	assert_eq "f sub" "$(list_by_handle "$V" "$hd")" "view: the directory opens by handle, as native"
	# a directory the kernel must connect to the root again, two levels down ("..")
	forget_all "$V"
	assert_eq "g" "$(list_by_handle "$V" "$hsub")" "view: a deeper directory opens by handle"
	# the node ids are the backing's: another view of the source takes the same handles
	view acl "$LOOP" "$W"
	assert_eq "hello" "$(read_by_handle "$W" "$hf")" "another view opens the first view's handle"

	rm "$V/d/f"
	rm "$REF/d/f"
	forget_all "$V"
	assert_eq "ESTALE" "$(read_by_handle "$REF" "$nf")" "native: a removed file's handle is stale"
	assert_eq "ESTALE" "$(read_by_handle "$V" "$hf")" "view: a removed file's handle is stale, as native"
	# its inode number, used again by a new file, does not make the old handle work
	echo new >"$V/d/f2"
	assert_eq "ESTALE" "$(read_by_handle "$V" "$hf")" "view: still stale after a new file"
}

test_export_subdir_view_answers_nothing_outside() {
	new_source exp
	local V=$T_DIR/v S=$T_DIR/s hout hin fd_keep
	view acl "$LOOP" "$V"
	_make_tree "$V"
	view acl,subdir=/d "$LOOP" "$S"
	hout=$(handle_of "$V/e/h") || die "name_to_handle_at in the whole view"
	hin=$(handle_of "$S/f") || die "name_to_handle_at in the subdir view"
	assert_eq "ESTALE" "$(read_by_handle "$S" "$hout")" "outside the subtree, known to the daemon"
	exec {fd_keep}<"$S/f"
	assert_eq "hello" "$(read_by_handle "$S" "$hin")" "inside, while the view's kernel holds it"
	exec {fd_keep}<&-
	sfs_umount "$V" || die "unmounting the whole view"
	forget_all "$S"
	assert_eq "ESTALE" "$(read_by_handle "$S" "$hout")" "outside the subtree, forgotten"
	# the documented limit: a subdir view cannot tell a forgotten file's place in the tree
	assert_eq "ESTALE" "$(read_by_handle "$S" "$hin")" "inside but forgotten: stale (strictfs(8))"
	assert_eq "hello" "$(cat "$S/f")" "the file itself is still there"
}

# A subdir view's kernel holds a directory of its tree (a process has it as its working
# directory) whose inode ext4 has freed: it was removed on a native mount sharing the backing
# (share=existing), and the daemon, limited to 1024 descriptors (a node cache of 256), has let
# its cached descriptor go. ext4 gives the freed number to a new file outside the tree. Its
# handle must be stale in the subdir view: the inode number is the held one's, the generation
# is not (contract §4.2). And the old handle stays stale: the number does not revive it.
test_export_subdir_recycled_inode_number_is_not_the_held_one() {
	new_source exp
	local N=$T_DIR/native S=$T_DIR/s
	mkdir -p "$N" "$S"
	need mount "$LOOP" "$N"
	mkdir -p "$N/d/x" "$N/d/many" || die "making the tree"
	(ulimit -n 1024 && exec "$STRICTFS" mount -o share=existing,subdir=/d "$LOOP" "$S") ||
		die "strictfs mount under ulimit -n 1024"
	view_pid "$S" >/dev/null
	assert_ok "$PY" - "$N" "$S" "$SFS_TEST_DIR" <<'EOF2'
import os, struct, sys
n, s, tdir = sys.argv[1:4]
sys.path.insert(0, tdir)
import handles

def fuse_handle(native_path):  # the handle a view gives the object (fuse_handle in t_export.sh)
    ino, gen = struct.unpack("<II", bytes.fromhex(handles.encode(native_path).split(":")[1]))
    return "129:" + struct.pack("<III", gen, ino, gen).hex()

def answer(handle, directory):
    try:
        fd = handles.open_handle(s, handle, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
        got = "lists %s" % sorted(os.listdir(fd)) if directory else "reads %r" % os.read(fd, 100)
        os.close(fd)
        return got
    except OSError as e:
        return os.strerror(e.errno)

for i in range(600):
    os.close(os.open(os.path.join(n, "d", "many", "f%d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
old = os.stat(os.path.join(n, "d", "x")).st_ino
h_old = handles.encode(os.path.join(s, "x"))
assert h_old == fuse_handle(os.path.join(n, "d", "x")), (h_old, "the view's handle, crafted")
os.chdir(os.path.join(s, "x"))  # the view's kernel holds x
for i in range(600):  # 600 nodes through the cache of 256: x's descriptor is let go
    os.stat(os.path.join(s, "many", "f%d" % i))
os.rmdir(os.path.join(n, "d", "x"))
new = None
for i in range(200):  # a file's inode comes from its directory's group, lowest free first
    p = os.path.join(n, "out%d" % i)
    with open(p, "w") as f:
        f.write("SECRET-OUTSIDE\n")
    if os.stat(p).st_ino == old:
        new = p
        break
assert new, "ext4 did not give inode %d again" % old
print("inode %d: the old directory's handle %s, the new file's %s" % (old, h_old, fuse_handle(new)))
got_new, got_old = answer(fuse_handle(new), False), answer(h_old, True)
print("the new file outside the tree, by handle in the subdir view:", got_new)
print("the old directory's handle in the subdir view:", got_old)
stale = os.strerror(116)
assert got_new == stale, "a reused inode number reached outside subdir=: " + got_new
assert got_old == stale, "the old handle is not stale: " + got_old
EOF2
}

# fuse_handle DEVICE PATH: the handle a view's kernel gives the backing's PATH (the node id is
# generation << 32 | ino, then the generation: fs/fuse/inode.c fuse_encode_fh), read with
# debugfs, for objects no view can name.
fuse_handle() {
	local ino gen
	read -r ino gen < <(debugfs -R "stat $2" "$1" 2>/dev/null |
		awk '/^Inode:/ { i = $2 } /^Generation:/ { g = $2 } END { print i, g }')
	[[ -n $ino && -n $gen ]] || die "debugfs: no inode for $2 on $1"
	"$PY" -c 'import struct, sys; g, i = int(sys.argv[1]), int(sys.argv[2]); print("129:" + struct.pack("<III", g, i, g).hex())' "$gen" "$ino"
}

test_export_admin_state_unreachable_by_handle() {
	new_source exp
	local V=$T_DIR/v hq hd hf
	view acl,quota "$LOOP" "$V"
	mkdir "$V/d" && echo visible >"$V/d/f" || die "writing in the view"
	"$STRICTFS" quota set "$LOOP" -u root --bhard 100M || die "strictfs quota set"
	sync
	hq=$(fuse_handle "$LOOP" /.strictfs/quota) && hd=$(fuse_handle "$LOOP" /.strictfs) &&
		hf=$(fuse_handle "$LOOP" /d/f) || die "crafting handles"
	assert_eq "$hf" "$(handle_of "$V/d/f")" "a crafted handle is the one the view gives"
	forget_all "$V"
	assert_eq "visible" "$(read_by_handle "$V" "$hf")" "a crafted handle of a file opens"
	assert_eq "ESTALE" "$(read_by_handle "$V" "$hq")" "the quota state file: stale, as /.strictfs is invisible"
	assert_eq "ESTALE" "$(list_by_handle "$V" "$hd")" "the admin state directory: stale"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
