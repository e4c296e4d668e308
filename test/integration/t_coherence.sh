#!/bin/bash
# Coherence between views (contract §4.3): a change made through view A is seen through view B as
# soon as the call returns. B looks at each object first, so that it has it cached.
# transport-independent: test_coherence_reaches_256_views: a notice is written to each view's /dev/fuse whatever carries its requests; 256 views serving over io_uring are carried by t_stress's test_stress_short in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

coh_setup() {
	new_source coh
	A=$T_DIR/a
	B=$T_DIR/b
	view "" "$LOOP" "$A"
	view "" "$LOOP" "$B"
}

test_direct_io_writes_and_reads() {
	# O_DIRECT wants aligned buffers on the backing (the benchmark's fio found EINVAL)
	coh_setup
	head -c 1048576 /dev/urandom >"$T_DIR/src"
	assert_ok dd if="$T_DIR/src" of="$A/d" bs=4096 oflag=direct status=none
	assert_ok cmp "$T_DIR/src" "$B/d"
	assert_ok dd if="$T_DIR/src" of="$A/d" bs=4096 seek=3 count=5 skip=7 conv=notrunc oflag=direct status=none
	assert_ok dd if="$A/d" of="$T_DIR/back" bs=4096 iflag=direct status=none
	assert_ok cmp "$T_DIR/back" "$B/d"
	assert_eq "$(dd if="$T_DIR/src" bs=4096 skip=7 count=5 status=none | md5sum)" \
		"$(dd if="$B/d" bs=4096 skip=3 count=5 status=none | md5sum)" "the direct overwrite landed"
}

test_coherence_overwrite_in_place() {
	coh_setup
	printf aaaa >"$A/f"
	assert_eq aaaa "$(cat "$B/f")" "B reads the first content"
	printf bbbb | dd of="$A/f" conv=notrunc status=none
	assert_eq bbbb "$(cat "$B/f")" "B sees the overwrite (same size)"
	printf cc | dd of="$A/f" bs=1 seek=1 conv=notrunc status=none
	assert_eq bccb "$(cat "$B/f")" "B sees a partial overwrite"
}

test_coherence_overwrite_seen_by_open_file() {
	coh_setup
	printf 'old-data' >"$A/f"
	local out
	out=$("$PY" - "$A/f" "$B/f" <<'EOF'
import os, sys
a, b = sys.argv[1], sys.argv[2]
fb = os.open(b, os.O_RDONLY)
first = os.pread(fb, 100, 0)
fa = os.open(a, os.O_WRONLY)
os.pwrite(fa, b'new-data', 0)
os.close(fa)
second = os.pread(fb, 100, 0)
print(first.decode(), second.decode())
EOF
)
	assert_eq "old-data new-data" "$out" "an fd open in B reads A's write"
}

test_coherence_append_and_truncate() {
	coh_setup
	printf '12345' >"$A/f"
	assert_eq 5 "$(stat -c %s "$B/f")" "B size"
	printf '6789' >>"$A/f"
	assert_eq 9 "$(stat -c %s "$B/f")" "B sees the appended size"
	assert_eq 123456789 "$(cat "$B/f")" "B reads the appended data"
	truncate -s 2 "$A/f"
	assert_eq 2 "$(stat -c %s "$B/f")" "B sees the truncated size"
	assert_eq 12 "$(cat "$B/f")" "B reads the truncated data"
}

test_coherence_create_after_negative_lookup() {
	coh_setup
	assert_fails_with "No such file or directory" stat "$B/new"
	assert_fails_with "No such file or directory" stat "$B/newdir"
	echo n >"$A/new"
	mkdir "$A/newdir"
	assert_ok stat "$B/new"
	assert_eq n "$(cat "$B/new" 2>&1)" "B reads the new file"
	assert_ok test -d "$B/newdir"
	assert_contains " $(ls "$B" | tr '\n' ' ')" " new " "B lists the new file"
}

test_coherence_unlink_and_rmdir() {
	coh_setup
	echo x >"$A/f"
	mkdir "$A/d"
	assert_eq x "$(cat "$B/f")" "B has the file"
	assert_ok test -d "$B/d"
	rm "$A/f"
	rmdir "$A/d"
	assert_fails_with "No such file or directory" stat "$B/f"
	assert_fails_with "No such file or directory" stat "$B/d"
	assert_eq lost+found "$(ls -A "$B")" "B does not list them"
}

test_coherence_rename() {
	coh_setup
	echo one >"$A/x"
	echo two >"$A/y"
	assert_eq one "$(cat "$B/x")" "B has x"
	assert_eq two "$(cat "$B/y")" "B has y"
	mv "$A/x" "$A/z"
	assert_fails_with "No such file or directory" stat "$B/x"
	assert_eq one "$(cat "$B/z" 2>&1)" "B sees the new name"
	mv "$A/z" "$A/y"
	assert_eq one "$(cat "$B/y" 2>&1)" "B sees the rename over an existing name"
	assert_fails_with "No such file or directory" stat "$B/z"
	mkdir "$A/d1"
	echo in >"$A/d1/f"
	assert_eq in "$(cat "$B/d1/f")" "B has d1/f"
	mv "$A/d1" "$A/d2"
	assert_fails_with "No such file or directory" stat "$B/d1/f"
	assert_eq in "$(cat "$B/d2/f" 2>&1)" "B sees the renamed directory"
}

# The kernel of a view keeps directory listings (cache_readdir) while the daemon is the only
# writer: a listing must follow every change made through another view, at once.
test_coherence_cached_listing_follows_other_view() {
	coh_setup
	mkdir "$A/d"
	touch "$A/d/one"
	local i
	for i in 1 2 3; do ls "$B/d" >/dev/null; done
	touch "$A/d/two"
	assert_eq "one two" "$(ls "$B/d" | tr '\n' ' ' | sed 's/ $//')" "B lists a file A created"
	mv "$A/d/one" "$A/d/three"
	assert_eq "three two" "$(ls "$B/d" | tr '\n' ' ' | sed 's/ $//')" "B lists a rename by A"
	rm "$A/d/two"
	assert_eq "three" "$(ls "$B/d" | tr '\n' ' ' | sed 's/ $//')" "B drops a file A removed"
	ln "$A/d/three" "$A/d/four"
	mkdir "$A/d/sub"
	assert_eq "four sub three" "$(ls "$B/d" | tr '\n' ' ' | sed 's/ $//')" "B lists A's link and mkdir"
	touch "$B/d/five"
	assert_eq "five four sub three" "$(ls "$A/d" | tr '\n' ' ' | sed 's/ $//')" "and the other way round"
}

test_coherence_attributes() {
	coh_setup
	echo x >"$A/f"
	assert_eq "644 root:root" "$(stat -c '%a %U:%G' "$B/f")" "B attributes"
	chmod 0600 "$A/f"
	assert_eq 600 "$(stat -c %a "$B/f")" "B sees chmod"
	chown "$SFS_ALICE:$SFS_GRP" "$A/f"
	assert_eq "$SFS_ALICE:$SFS_GRP" "$(stat -c %U:%G "$B/f")" "B sees chown"
	touch -d @1000000000 "$A/f"
	assert_eq 1000000000 "$(stat -c %Y "$B/f")" "B sees utimes"
	ln "$A/f" "$A/g"
	assert_eq 2 "$(stat -c %h "$B/f")" "B sees the link count"
	assert_eq "$(stat -c %i "$B/f")" "$(stat -c %i "$B/g")" "B sees the hard link"
}

test_coherence_permission_change_takes_effect() {
	coh_setup
	echo x >"$A/f"
	chmod 0644 "$A/f"
	assert_eq x "$(as_user "$SFS_ALICE" cat "$B/f" 2>&1)" "alice reads via B"
	chmod 0600 "$A/f"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$B/f"
	need setfacl -m "u:$SFS_ALICE:r" "$A/f"
	assert_eq x "$(as_user "$SFS_ALICE" cat "$B/f" 2>&1)" "ACL set via A grants via B"
	need setfacl -x "u:$SFS_ALICE" "$A/f"
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$B/f"
}

# getfacl -c of a 0644 file of root's without an ACL
NO_ACL=$'user::rw-\ngroup::r--\nother::r--'

test_coherence_acl() {
	coh_setup
	echo x >"$A/f"
	assert_eq "$NO_ACL" "$(getfacl -cp "$B/f" 2>&1)" "no ACL yet"
	need setfacl -m "u:$SFS_ALICE:rw" "$A/f"
	assert_contains "$(getfacl -c "$B/f" 2>&1)" "user:$SFS_ALICE:rw-" "B sees setfacl"
	need setfacl -m "u:$SFS_ALICE:r" "$A/f"
	assert_contains "$(getfacl -c "$B/f" 2>&1)" "user:$SFS_ALICE:r--" "B sees the changed entry"
	need setfacl -b "$A/f"
	assert_eq "$NO_ACL" "$(getfacl -cp "$B/f" 2>&1)" "B sees the ACL removed"
	mkdir "$A/d"
	getfacl -c "$B/d" >/dev/null 2>&1
	need setfacl -d -m "u:$SFS_ALICE:rx" "$A/d"
	assert_contains "$(getfacl -c "$B/d" 2>&1)" "default:user:$SFS_ALICE:r-x" "B sees the default ACL"
}

test_coherence_xattr() {
	coh_setup
	echo x >"$A/f"
	assert_fails_with "No such attribute" getfattr -n user.c "$B/f"
	need setfattr -n user.c -v 1 "$A/f"
	assert_eq 1 "$(getfattr --only-values -n user.c "$B/f" 2>/dev/null)" "B sees the new xattr"
	need setfattr -n user.c -v 2 "$A/f"
	assert_eq 2 "$(getfattr --only-values -n user.c "$B/f" 2>/dev/null)" "B sees the changed value"
	assert_ok getfattr -d "$B/f"
	assert_eq 'user.c="2"' "$(grep -v '^#' "$T_DIR/.out" | grep .)" "B lists it"
	need setfattr -x user.c "$A/f"
	assert_fails_with "No such attribute" getfattr -n user.c "$B/f"
	assert_ok getfattr -d "$B/f"
	assert_eq "" "$(cat "$T_DIR/.out")" "B no longer lists it"
}

# mtime_ctime PATH: "MTIME CTIME", both to the nanosecond
mtime_ctime() { stat -c '%.9Y %.9Z' "$1"; }

# assert_time_within T FROM TO MSG: the time T (seconds.nanoseconds) lies in the seconds FROM..TO
# (read with date before and after the call). FROM is taken one second early: the kernel stamps
# files from a coarse clock, which may be a tick behind date's.
assert_time_within() {
	if [[ $1 =~ ^[0-9]+\.[0-9]{9}$ ]] && ((${1%.*} >= $2 - 1 && ${1%.*} <= $3)); then
		ok "$4"
	else
		fail "$4: $1 is not within $(($2 - 1))..$3"
	fi
}

test_coherence_ctime_and_mtime_after_write() {
	coh_setup
	local t0 t1 a b m c m2 c2
	echo x >"$A/f"
	stat "$B/f" >/dev/null # B caches the file's attributes
	t0=$(date +%s)
	touch -d @1000000000 "$A/f"
	t1=$(date +%s)
	a=$(mtime_ctime "$A/f")
	b=$(mtime_ctime "$B/f")
	read -r m c <<<"$b"
	assert_eq "$a" "$b" "after utimes: B's mtime and ctime equal A's, to the nanosecond"
	assert_eq 1000000000.000000000 "$m" "B's mtime is the one set"
	assert_time_within "$c" "$t0" "$t1" "B's ctime is the time of the utimes"
	sleep 1.1 # the write's times are of a later second
	t0=$(date +%s)
	echo y >>"$A/f"
	t1=$(date +%s)
	a=$(mtime_ctime "$A/f")
	b=$(mtime_ctime "$B/f")
	read -r m2 c2 <<<"$b"
	assert_eq "$a" "$b" "after a write: B's mtime and ctime equal A's, to the nanosecond"
	assert_eq "$c2" "$m2" "B: the write set mtime and ctime to the same time"
	assert_time_within "$m2" "$t0" "$t1" "B's mtime is the time of the write"
	assert_gt "${c2%.*}" "${c%.*}" "B's ctime moved on from the utimes"
}

# small_cache_views: view A served by a daemon limited to 1024 descriptors (a node cache of
# 256, so that a test can push nodes out of it), and view B of the same source.
small_cache_views() {
	new_source coh
	A=$T_DIR/a
	B=$T_DIR/b
	mkdir -p "$A" "$B"
	(ulimit -n 1024 && exec "$STRICTFS" mount "$LOOP" "$A") || die "strictfs mount under ulimit -n 1024"
	view_pid "$A" >/dev/null
	view "" "$LOOP" "$B"
}

test_open_file_unlinked_elsewhere_keeps_its_attributes() {
	# fstat carries no file handle to the daemon, so an open file whose last name went through
	# another view must stay reachable however many other nodes pass through the daemon's
	# descriptor cache (an open file holds its node's descriptor).
	small_cache_views
	assert_ok "$PY" - "$A" "$B" <<'EOF2'
import os, sys
a, b = sys.argv[1], sys.argv[2]
fd = os.open(os.path.join(a, "held"), os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"x" * 5000)
os.unlink(os.path.join(b, "held"))
os.mkdir(os.path.join(a, "many"))
for i in range(2000):  # every one a node with a cached descriptor, pushing "held" out
    p = os.path.join(a, "many", "f%d" % i)
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
    os.stat(p)
st = os.fstat(fd)
assert st.st_size == 5000 and st.st_nlink == 0, (st.st_size, st.st_nlink)
os.ftruncate(fd, 100)
assert os.fstat(fd).st_size == 100
os.close(fd)
EOF2
}

test_open_files_cost_the_daemon_one_descriptor_each() {
	# The daemon holds the backing descriptor of every file its callers hold open, and no
	# more: 700 files open at once fit a daemon of 1024 descriptors (its node cache keeps at
	# most 256), as they fit one process on native ext4. Unlinked, each still answers fstat
	# (no file handle reaches the daemon: it reopens the node by handle) and takes writes.
	# xfstests generic/488 is the same with 10,000 files.
	small_cache_views
	assert_ok "$PY" - "$A" "$B" <<'EOF2'
import os, sys
a, b = sys.argv[1], sys.argv[2]
os.mkdir(os.path.join(a, "d"))
fds = []
for i in range(700):
    p = os.path.join(a, "d", "f%d" % i)
    fds.append(os.open(p, os.O_CREAT | os.O_RDWR, 0o644))
    os.unlink(os.path.join(b, "d", "f%d" % i) if i % 2 else p)
for i, fd in enumerate(fds):
    os.write(fd, b"x" * (i + 1))
for i, fd in enumerate(fds):
    st = os.fstat(fd)
    assert st.st_size == i + 1 and st.st_nlink == 0, (i, st.st_size, st.st_nlink)
    os.close(fd)
assert os.listdir(os.path.join(a, "d")) == []
EOF2
	assert_eq "$(df --output=iused "$A" | tail -1)" "$(df --output=iused "$B" | tail -1)" \
		"both views count the same inodes once the files are closed"
}

test_inode_number_reused_is_a_new_object() {
	# The daemon's table is keyed by inode number. A directory removed through view B while a
	# process in view A still has it as its working directory keeps its node; once the daemon's
	# cached descriptor is let go, ext4 frees the inode and gives its number to a new directory.
	# That one must get a node of its own: not the old node, whose file handle names the dead
	# inode (ESTALE later) and which A's kernel still knows as the dead directory.
	small_cache_views
	assert_ok "$PY" - "$A" "$B" <<'EOF2'
import os, sys
a, b = sys.argv[1], sys.argv[2]
os.mkdir(os.path.join(a, "d"))
os.mkdir(os.path.join(a, "many"))
for i in range(4000):
    os.close(os.open(os.path.join(a, "many", "f%d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
n = 0
def churn():  # 2000 nodes through the cache of 256: every older descriptor is let go
    global n
    for i in range(2000):
        os.stat(os.path.join(b, "many", "f%d" % n))  # new to B's kernel: a lookup each
        n += 1
os.mkdir(os.path.join(a, "d", "old"))
old = os.stat(os.path.join(a, "d", "old")).st_ino
os.chdir(os.path.join(a, "d", "old"))  # A's kernel keeps the old directory's node
os.rmdir(os.path.join(b, "d", "old"))
churn()
reused = None
for i in range(3000):  # ext4 gives the freed number to a new directory soon
    p = os.path.join(b, "d", "new%d" % i)
    os.mkdir(p)
    if os.stat(p).st_ino == old:
        reused = p
        break
assert reused, "ext4 did not reuse inode %d" % old
with open(os.path.join(reused, "inside"), "w") as f:
    f.write("fresh content")
p = os.path.join(a, "d", os.path.basename(reused))
assert os.listdir(p) == ["inside"], os.listdir(p)
try:
    seen = os.listdir(".")  # the removed directory, as ext4 answers: ENOENT
except OSError:
    seen = []
assert seen == [], "the removed working directory shows %r" % seen
churn()
with open(os.path.join(reused, "inside"), "a") as f:
    f.write(" and more")
assert os.stat(os.path.join(p, "inside")).st_size == 22
assert os.stat(p).st_ino == old
os.chdir("/")
EOF2
}

# Every view is told of a change, however many there are: 256 views of one source each cache a
# file's attributes and name, then one view changes both. Each look runs in one process, well
# within the views' 5 s cache timeouts, so a view that was not told shows the old state.
MANY_LOOK='import os, sys
views = sys.argv[2:]
if sys.argv[1] == "cache":
    for v in views: os.stat(v + "/f")
elif sys.argv[1] == "size":
    print(sum(os.stat(v + "/f").st_size != 9 for v in views))
else:
    print(sum(os.path.exists(v + "/f") or not os.path.exists(v + "/g") for v in views))'

test_coherence_reaches_256_views() {
	new_source many
	local n=256 i others=()
	for ((i = 1; i <= n; i++)); do
		view "" "$LOOP" "$T_DIR/v$i"
		((i > 1)) && others+=("$T_DIR/v$i")
	done
	echo 1 >"$T_DIR/v1/f"
	need "$PY" -c "$MANY_LOOK" cache "${others[@]}"
	echo abcdefgh >"$T_DIR/v1/f"
	assert_eq 0 "$("$PY" -c "$MANY_LOOK" size "${others[@]}")" \
		"views showing the old size after a write through v1"
	need "$PY" -c "$MANY_LOOK" cache "${others[@]}"
	need mv "$T_DIR/v1/f" "$T_DIR/v1/g"
	assert_eq 0 "$("$PY" -c "$MANY_LOOK" name "${others[@]}")" \
		"views still showing the old name after a rename through v1"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
