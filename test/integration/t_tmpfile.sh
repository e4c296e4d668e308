#!/bin/bash
# O_TMPFILE (contract §4.1): a file with no name, made in a directory of a view, written, and
# given names with linkat(2), as on native ext4: the same answers through a pair of views as
# through a native mount and a bind mount of it (tmpfile.py), in acl, noacl and casefold views;
# quota views charge it from its birth, as ext4 does, and refuse past a limit. The request reaches
# the daemon through the transport's own translation (fuse_adapt.h), so this file runs in both
# passes.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMPFILE_PY=$SFS_TEST_DIR/tmpfile.py

# native_pair: REF (a native ext4 mount) and REF2, a bind mount of it.
native_pair() {
	native_ref
	REF2=$T_DIR/ref2
	mkdir -p "$REF2"
	need mount --bind "$REF" "$REF2"
}

# tmpfile_views: a source with an acl view A, a noacl view B and a casefold view C.
tmpfile_views() {
	new_source tmpfile
	A=$T_DIR/a
	B=$T_DIR/b
	C=$T_DIR/c
	view acl "$LOOP" "$A"
	view noacl "$LOOP" "$B"
	view casefold "$LOOP" "$C"
}

# fresh_dirs NAME: NAME made empty in REF and in the views' backing; D_REF, D_A.. its paths.
fresh_dirs() {
	mkdir -m 755 "$REF/$1" "$A/$1"
}

test_tmpfile_as_on_native_ext4() {
	native_pair
	tmpfile_views
	local native got
	fresh_dirs basic
	native=$("$PY" "$TMPFILE_PY" basic "$REF/basic" "$REF2/basic" 2>&1)
	assert_contains "$native" "link as kept: ok" "native ext4 links an O_TMPFILE file"
	got=$("$PY" "$TMPFILE_PY" basic "$A/basic" "$B/basic" 2>&1)
	assert_eq "$native" "$got" "made in an acl view, seen in a noacl view, as between native mounts"
	mkdir -m 755 "$B/basic2"
	got=$("$PY" "$TMPFILE_PY" basic "$B/basic2" "$C/basic2" 2>&1)
	assert_eq "$native" "$got" "made in a noacl view, seen in a casefold view"
	assert_eq "kept second sub" "$(ls "$REF2/basic" | tr '\n' ' ' | sed 's/ $//')" "native names"
	assert_eq "kept second sub" "$(ls "$A/basic" | tr '\n' ' ' | sed 's/ $//')" "view names"
}

test_tmpfile_acl_inheritance_per_view() {
	native_pair
	tmpfile_views
	local native
	native=$("$PY" "$TMPFILE_PY" acl "$REF" "$REF2" 2>&1)
	assert_contains "$native" "B: access ACL: 44" "native ext4: the default ACL is inherited"
	assert_eq "$native" "$("$PY" "$TMPFILE_PY" acl "$A/" "$A/" 2>&1)" "acl view as native ext4"
	# noacl: as ext4 without ACLs (this kernel's ext4 cannot be mounted noacl: doc/kernel.md
	# §1): mode & ~umask, no ACL, the default ACL of the backing's directory ignored
	mkdir -m 755 "$A/n"
	assert_eq "fstat: nlink=0 size=0 mode=-rw-------
B: mode: -rw-------
B: access ACL: ENOTSUP" "$("$PY" "$TMPFILE_PY" acl "$B/n" "$B/n" 2>&1)" "noacl view: no inherited ACL, the umask applies"
}

test_tmpfile_casefold_names() {
	tmpfile_views
	mkdir "$A/cf"
	# no native reference: this kernel's ext4 has no casefold (doc/kernel.md); a casefold
	# view answers as contract §5.3 says casefold ext4 does
	assert_eq "link as FOO: EEXIST
link as Bar: ok
A reads BAR: cf
names B: Bar Foo" "$("$PY" "$TMPFILE_PY" casefold "$C/cf" "$B/cf" 2>&1)" \
		"a name of the class of an existing one is taken; a new one is kept as given"
}

test_tmpfile_refused_where_native_refuses() {
	tmpfile_views
	local R=$T_DIR/r
	view ro "$LOOP" "$R"
	assert_eq "EROFS" "$("$PY" -c '
import errno, os, sys
try: os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600); print("made")
except OSError as e: print(errno.errorcode[e.errno])' "$R")" "a ro view refuses O_TMPFILE"
	ensure_users
	mkdir -m 755 "$A/closed"
	assert_eq "EACCES" "$(as_user "$SFS_ALICE" "$PY" -c '
import errno, os, sys
try: os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600); print("made")
except OSError as e: print(errno.errorcode[e.errno])' "$A/closed")" "no write permission on the directory: EACCES"
}

# the quota ledger's figures: "INODES BYTES" of uid
usage_of() {
	"$STRICTFS" quota report "$LOOP" --json |
		jq -r --argjson id "$1" '[.users[] | select(.id == $id)] | if length == 0 then "0 0"
			else "\(.[0].inodes.used) \(.[0].bytes.used)" end'
}

# tmp_then_link DIR BYTES NAME: as alice, an O_TMPFILE file of BYTES in DIR, linked as NAME;
# prints "linked" or the errno's name. It writes 256 KiB at a time.
tmp_then_link() {
	as_user "$SFS_ALICE" "$PY" -c '
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d, n, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o644)
except OSError as e:
    print("open", errno.errorcode[e.errno]); sys.exit()
try:
    for off in range(0, n, 262144):
        os.write(fd, b"q" * min(262144, n - off))
except OSError as e:
    print("write", errno.errorcode[e.errno]); sys.exit()
os.fsync(fd)
if libc.linkat(-100, f"/proc/self/fd/{fd}".encode(), -100, f"{d}/{name}".encode(), 0x400) < 0:
    print("link", errno.errorcode[ctypes.get_errno()])
else:
    print("linked")' "$@"
}

test_tmpfile_quota_charged_from_its_birth() {
	ensure_users
	new_source tmpquota
	local Q=$T_DIR/q ua
	view usrquota "$LOOP" "$Q"
	chmod 1777 "$Q"
	ua=$(id -u "$SFS_ALICE")
	assert_eq "0 0" "$(usage_of "$ua")" "alice owns nothing yet"
	assert_eq linked "$(tmp_then_link "$Q" 262144 kept)" "alice links her O_TMPFILE file"
	assert_eq "1 262144" "$(usage_of "$ua")" "its inode and 256 KiB are charged to alice"
	# one held open with no name is charged until it is closed, as ext4 charges it
	: >"$T_DIR/held"
	chmod 666 "$T_DIR/held"
	as_user "$SFS_ALICE" "$PY" -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_TMPFILE | os.O_WRONLY, 0o644)
os.write(fd, b"z" * 65536); os.fsync(fd)
open(sys.argv[2], "w").write("held")
end = time.time() + 60
while not os.path.exists(sys.argv[3]) and time.time() < end:
    time.sleep(0.05)
os.close(fd)' "$Q" "$T_DIR/held" "$T_DIR/go" &
	local pid=$!
	wait_until 20 test -s "$T_DIR/held" || die "the O_TMPFILE holder did not get ready"
	assert_eq "2 327680" "$(usage_of "$ua")" "open with no name: charged"
	assert_ok "$STRICTFS" quota check "$LOOP"
	touch "$T_DIR/go"
	wait "$pid"
	assert_eq "1 262144" "$(usage_of "$ua")" "closed with no name: nothing stays"
	assert_ok "$STRICTFS" quota check "$LOOP"
	# limits: no inode left refuses the open; a write past the block limit is refused
	assert_ok "$STRICTFS" quota set "$LOOP" -u "$SFS_ALICE" --ihard 1
	assert_eq "open EDQUOT" "$(tmp_then_link "$Q" 4096 more)" "no inode left: EDQUOT"
	assert_ok "$STRICTFS" quota set "$LOOP" -u "$SFS_ALICE" --ihard 0 --bhard 1M
	assert_eq "write EDQUOT" "$(tmp_then_link "$Q" 1048576 big)" "writes past 1M: EDQUOT"
	assert_eq "1 262144" "$(usage_of "$ua")" "nothing charged for the refused one once closed"
	assert_eq linked "$(tmp_then_link "$Q" 65536 small)" "one within the limit is linked"
	assert_eq "2 327680" "$(usage_of "$ua")" "and charged"
	assert_fails test -e "$Q/big"
	assert_ok "$STRICTFS" quota check "$LOOP"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
