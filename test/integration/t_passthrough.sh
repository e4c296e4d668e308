#!/bin/bash
# Kernel passthrough (contract §4.4): a view's open files read, write and map the backing file
# itself, with the caller's credentials, while every other view of the source, passthrough or
# not, sees the writer's bytes and size at once; views that must see every write (quota
# limits, nopassthrough, cache=writeback) say why they do not use it. Compared with native
# ext4 where a user could tell the difference.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

data_path() { # MOUNTPOINT FIELD: .data_path.FIELD of the view in status
	view_json "$1" | jq -r ".data_path.$2"
}

backing_files_are() { # MOUNTPOINT N: the view holds N backing files (a predicate for wait_until)
	[[ $(data_path "$1" backing_files) == "$2" ]]
}

test_passthrough_in_effect_and_why_not() {
	new_source pt
	view acl "$LOOP" "$T_DIR/a"
	view nopassthrough "$LOOP" "$T_DIR/n"
	view usrquota "$LOOP" "$T_DIR/q"
	assert_eq true "$(data_path "$T_DIR/a" passthrough)" "acl view: passthrough by default"
	assert_eq null "$(data_path "$T_DIR/a" why_not)" "acl view: no reason given"
	assert_eq false "$(data_path "$T_DIR/n" passthrough)" "nopassthrough view: off"
	assert_eq nopassthrough "$(data_path "$T_DIR/n" why_not)" "nopassthrough view: the option named"
	assert_eq usrquota "$(data_path "$T_DIR/q" why_not)" "quota view: the option named"
	assert_contains "$(view_field "$T_DIR/n" .effective)" nopassthrough "effective options"

	new_source wb
	view cache=writeback "$LOOP" "$T_DIR/w"
	assert_eq cache=writeback "$(data_path "$T_DIR/w" why_not)" "writeback view: why"
	# passthrough can change live (t_remount.sh), but never past cache=writeback
	assert_ok "$STRICTFS" mount -o remount,passthrough "$T_DIR/w"
	assert_eq cache=writeback "$(data_path "$T_DIR/w" why_not)" "writeback view: still off"
}

# The data of an open file goes to the backing without the daemon: a 64 MiB read costs the
# view a handful of requests (open, getattr, release), not one per 128 KiB; the backing file
# is counted while open and given back at close.
test_passthrough_reads_do_not_reach_the_daemon() {
	new_source pt
	view acl "$LOOP" "$T_DIR/a"
	view nopassthrough "$LOOP" "$T_DIR/n"
	dd if=/dev/urandom of="$T_DIR/a/f" bs=1M count=64 status=none
	sync
	echo 3 >/proc/sys/vm/drop_caches
	local before after
	requests_of "$T_DIR/a"
	before=$REPLY
	exec 7<"$T_DIR/a/f"
	assert_eq 1 "$(data_path "$T_DIR/a" backing_files)" "one backing file while the file is open"
	cat <&7 >/dev/null
	exec 7<&-
	requests_of "$T_DIR/a"
	after=$REPLY
	assert_lt $((after - before)) 20 "passthrough view: requests for a 64 MiB read"
	# the release is answered in the background: asked again until then
	if wait_until 5 backing_files_are "$T_DIR/a" 0; then
		ok "the backing file is given back at close"
	else
		fail "the backing file is given back at close: $(data_path "$T_DIR/a" backing_files) left"
	fi
	requests_of "$T_DIR/n"
	before=$REPLY
	cat "$T_DIR/n/f" >/dev/null
	requests_of "$T_DIR/n"
	after=$REPLY
	assert_gt $((after - before)) 100 "nopassthrough view: the daemon serves the data"
	assert_eq "$(md5sum <"$T_DIR/a/f")" "$(md5sum <"$T_DIR/n/f")" "the same bytes both ways"
}

# A writer; readers in other views see each write's bytes and the new size at once, through
# read() and, where the reader's path is not marked "nomap:", through a map taken before the
# writes; one marked "stat:" only stats (its view then has no read of its own that would
# refresh its attributes). MODE "map" writes every other step through the writer's own map.
COHERENT='import mmap, os, sys
mode, w, readers = sys.argv[1], sys.argv[2], sys.argv[3:]
fd = os.open(w, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
size = 8192
os.write(fd, b"a" * size)
maps = {}
for r in readers:
    if not r.startswith(("nomap:", "stat:")):
        maps[r] = mmap.mmap(os.open(r, os.O_RDONLY), 8192, prot=mmap.PROT_READ)
wm = mmap.mmap(fd, 8192) if mode == "map" else None
bad = []
for step in range(40):
    want = bytes([97 + step % 26]) * 100
    off = (step * 199) % 8000
    if wm and step % 2 == 0:
        wm[off:off + 100] = want
    else:
        os.pwrite(fd, want, off)
    os.pwrite(fd, b"z" * 10, size)
    size += 10
    for r in readers:
        p = r.split(":", 1)[-1]
        st = os.stat(p).st_size
        if st != size:
            bad.append("%s step %d: size %d, the writer has %d" % (p, step, st, size))
        if r.startswith("stat:"):
            continue
        with open(p, "rb") as f:
            f.seek(off)
            got = f.read(100)
        if got != want:
            bad.append("%s step %d: read() shows old bytes" % (p, step))
        if r in maps and maps[r][off:off + 100] != want:
            bad.append("%s step %d: the map shows old bytes" % (p, step))
print("\n".join(bad[:6]) if bad else "coherent")'

# The daemon-path reader reads around its page cache while a passthrough writer is open, but
# what it maps is its kernel's page cache, which the daemon cannot refresh on writes it never
# sees: its map is left out (doc/design.md, "Passthrough").
test_passthrough_writer_seen_at_once_by_every_view() {
	new_source pt
	view acl "$LOOP" "$T_DIR/w"
	view acl "$LOOP" "$T_DIR/a"
	view noacl "$LOOP" "$T_DIR/n"
	view casefold "$LOOP" "$T_DIR/c"
	view nopassthrough "$LOOP" "$T_DIR/d"
	view acl "$LOOP" "$T_DIR/s"
	: >"$T_DIR/w/F"
	: >"$T_DIR/w/G"
	# every reader view has the files' attributes cached before the writer starts
	stat "$T_DIR"/{a,n,d,w,s}/F "$T_DIR/c/f" "$T_DIR"/{w,c,s}/G >/dev/null
	assert_eq coherent "$("$PY" -c "$COHERENT" map "$T_DIR/w/F" "$T_DIR/a/F" "$T_DIR/n/F" \
		"$T_DIR/c/f" "nomap:$T_DIR/d/F" "stat:$T_DIR/s/F" 2>&1)" \
		"acl, noacl, casefold and daemon-path readers, and a view that only stats"
	assert_eq coherent "$("$PY" -c "$COHERENT" write "$T_DIR/d/G" "$T_DIR/w/G" "$T_DIR/c/g" \
		"stat:$T_DIR/s/G" 2>&1)" \
		"a daemon-path writer, passthrough readers"
}

# A file just made is the creator's to cache for a moment (a create waits for no GETATTR of it):
# whatever writes it first, the creator's own view, another view by passthrough or one by the
# daemon's path, the creator sees the size and times at once, as on one ext4 mount.
test_passthrough_made_file_written_at_once_seen_by_its_creator() {
	new_source pt
	view acl "$LOOP" "$T_DIR/a"
	view acl "$LOOP" "$T_DIR/b"
	view nopassthrough "$LOOP" "$T_DIR/d"
	assert_ok "$PY" - "$T_DIR/a" "$T_DIR/b" "$T_DIR/d" <<'EOF2'
import os, sys
a, b, d = sys.argv[1:4]
for writer in (a, b, d):
    for i in range(200):
        name = "f%d" % i
        fd = os.open(os.path.join(a, name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        os.fstat(fd)  # the creator's kernel has the new file's attributes
        w = os.open(os.path.join(writer, name), os.O_WRONLY)
        os.write(w, b"x" * (i + 1))
        truth = os.fstat(w)  # the writer's own kernel dropped what it had at the write
        os.close(w)
        st = os.fstat(fd)
        seen = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        assert seen == (i + 1, truth.st_mtime_ns, truth.st_ctime_ns), (writer, i, seen, truth)
        os.close(fd)
        os.unlink(os.path.join(a, name))
EOF2
}

# Set-id bits: a non-owner's write clears them, root's keeps them, as native. The backing
# write runs with the writer's credentials, not the daemon's.
SETID_CASES='for m in 4777 2777 6777; do
	cp /bin/true "$1/s$m"; chmod "$m" "$1/s$m"
done'

setid_after_writes() { # DIR -> the modes after bob's and root's appends
	local m
	for m in 4777 2777 6777; do
		as_user "$SFS_BOB" sh -c "printf x >>'$1/s$m'"
		printf '%s ' "$(stat -c %a "$1/s$m")"
		chmod "$m" "$1/s$m"
		printf y >>"$1/s$m"
		printf '%s ' "$(stat -c %a "$1/s$m")"
	done
}

# A write through a shared mapping moves mtime and ctime at the fault, on ext4; the pages are the
# backing's, so no request tells a view, whose stat must still show the new times at once
# (xfstests generic/080 and generic/215), in the writer's view and in another. stat(1) asks only
# for the times it prints: a cached answer would do for it.
MAP_WRITE='import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 4096)
m[0:5] = b"hello"
m.close(); os.close(fd)'

times_ns() { # FILE -> "MTIME CTIME", each in nanoseconds since the epoch
	local t
	t=$(stat -c '%.9Y %.9Z' "$1") || return 1
	[[ $t =~ ^([0-9]+)\.([0-9]{9})\ ([0-9]+)\.([0-9]{9})$ ]] || return 1
	echo "$((10#${BASH_REMATCH[1]}${BASH_REMATCH[2]})) $((10#${BASH_REMATCH[3]}${BASH_REMATCH[4]}))"
}

moved() { # BEFORE AFTER LETTER: LETTER if AFTER is later than BEFORE, "-" if not, "?" if unread
	if [[ ! $1 =~ ^[0-9]+$ || ! $2 =~ ^[0-9]+$ ]]; then
		echo "?"
	elif (($2 > $1)); then
		echo "$3"
	else
		echo -
	fi
}

mapped_write_moves() { # FILE [FILE...]: "mc" per file whose mtime and ctime moved
	local f m1 c1 m2 c2 before=() out=
	dd if=/dev/zero of="$1" bs=4096 count=1 conv=fsync status=none || die "writing $1"
	sleep 0.5 # the close is answered in the background: no writer is left
	for f in "$@"; do before+=("$(times_ns "$f")"); done
	sleep 1.1 # as generic/080: the new times differ in the second
	"$PY" -c "$MAP_WRITE" "$1" || die "mapped write of $1"
	for f in "$@"; do
		read -r m1 c1 <<<"${before[0]}"
		before=("${before[@]:1}")
		read -r m2 c2 < <(times_ns "$f")
		out+="$(moved "$m1" "$m2" m)$(moved "$c1" "$c2" c) "
	done
	echo "${out% }"
}

test_passthrough_mapped_write_moves_times_as_native() {
	native_ref
	new_source mw
	view acl "$LOOP" "$T_DIR/a"
	view acl "$LOOP" "$T_DIR/b"
	assert_eq "mc" "$(mapped_write_moves "$REF/f")" "native: mtime and ctime move"
	assert_eq "mc mc" "$(mapped_write_moves "$T_DIR/a/f" "$T_DIR/b/f")" \
		"view: mtime and ctime move, in the writer's view and another"
}

test_passthrough_setid_bits_as_native() {
	ensure_users
	native_ref
	new_source pt
	view acl "$LOOP" "$T_DIR/v"
	sh -c "$SETID_CASES" - "$REF"
	sh -c "$SETID_CASES" - "$T_DIR/v"
	local native
	native=$(setid_after_writes "$REF")
	assert_eq "777 4777 777 2777 777 6777 " "$native" "native: bob's write clears, root's keeps"
	assert_eq "$native" "$(setid_after_writes "$T_DIR/v")" "view: as native"
}

# A set-group-ID file without group execute keeps the bit when a member of its group writes it,
# and loses it for anyone else (xfstests generic/193): the member's write must not run with
# nobody's credentials, as every unprivileged write's did.
sgid_after_writes() { # DIR -> the modes after the writes of alice (a member) and of bob
	local u f=$1/g
	for u in "$SFS_ALICE" "$SFS_BOB"; do
		chmod 2666 "$f"
		as_user "$u" sh -c "printf x >>'$f'"
		printf '%s ' "$(stat -c %a "$f")"
		chmod 2666 "$f"
		as_user "$u" sh -c "echo >'$f'"
		printf '%s ' "$(stat -c %a "$f")"
	done
}

test_passthrough_setgid_kept_for_group_members_as_native() {
	ensure_users
	native_ref
	new_source pt
	view acl "$LOOP" "$T_DIR/v"
	local d native
	for d in "$REF" "$T_DIR/v"; do
		touch "$d/g"
		chown "$SFS_ALICE:$SFS_GRP" "$d/g"
	done
	native=$(sgid_after_writes "$REF")
	assert_eq "2666 2666 666 666 " "$native" "native: the member's writes keep S_ISGID, bob's clear it"
	assert_eq "$native" "$(sgid_after_writes "$T_DIR/v")" "view: as native"
	assert_eq true "$(data_path "$T_DIR/v" passthrough)" "through passthrough"
}

# A backing registration is shared only where the writes give the result they would give
# alone: with another process reading the file through the view (its registration made as
# nobody), bob's append clears the set-id bit as natively, and root's, which natively keeps
# it, is refused (EBUSY) rather than made with nobody's power, until the reader closes.
test_passthrough_root_write_beside_a_reader() {
	ensure_users
	native_ref
	new_source pt
	local V=$T_DIR/v D
	view acl "$LOOP" "$V"
	for D in "$REF" "$V"; do
		echo data >"$D/f" && chown "$SFS_BOB" "$D/f" && chmod 4777 "$D/f"
		exec 7<"$D/f"
		if [[ $D == "$V" ]]; then
			assert_fails_with "Device or resource busy" sh -c "echo root >> '$D/f'"
			assert_eq 4777 "$(stat -c %a "$D/f")" "view: root's refused append changed nothing"
		else
			assert_ok sh -c "echo root >> '$D/f'"
			assert_eq 4777 "$(stat -c %a "$D/f")" "native: root's append keeps the set-id bit"
		fi
		assert_ok as_user "$SFS_BOB" sh -c "echo bob >> '$D/f'"
		assert_eq 777 "$(stat -c %a "$D/f")" "${D##*/}: bob's append beside a reader clears it"
		exec 7<&-
		chmod 4777 "$D/f"
		assert_ok sh -c "echo root >> '$D/f'"
		assert_eq 4777 "$(stat -c %a "$D/f")" "${D##*/}: root's append alone keeps it"
	done
}

# Where root's write would keep nothing nobody's clears (no set-id bit), root shares the
# reader's registration: an append beside a reader of its own works, as natively (xfstests
# generic/079 appends to an append-only file it holds open for reading).
test_passthrough_root_appends_beside_its_own_reader() {
	ensure_users
	native_ref
	new_source pt
	local V=$T_DIR/v D
	view acl "$LOOP" "$V"
	for D in "$REF" "$V"; do
		echo data >"$D/f" && chmod 666 "$D/f" && chattr +a "$D/f"
		exec 7<"$D/f"
		assert_ok sh -c "echo root >> '$D/f'"
		assert_ok as_user "$SFS_BOB" sh -c "echo bob >> '$D/f'"
		assert_fails_with "Operation not permitted" sh -c "echo over > '$D/f'"
		exec 7<&-
		chattr -a "$D/f"
		assert_eq "data root bob" "$(tr '\n' ' ' <"$D/f" | sed 's/ $//')" "${D##*/}: both appends landed"
		assert_eq 666 "$(stat -c %a "$D/f")" "${D##*/}: the mode as it was"
	done
	assert_eq true "$(data_path "$V" passthrough)" "through passthrough"
}

# ext4 keeps 5% of the blocks for root: a user's writes stop where native stops them.
fill_as_bob() { # DIR -> bytes bob wrote before ENOSPC
	as_user "$SFS_BOB" dd if=/dev/zero of="$1/bob.fill" bs=1M status=none 2>/dev/null
	stat -c %s "$1/bob.fill"
}

test_passthrough_reserved_blocks_as_native() {
	ensure_users
	native_ref
	chmod 1777 "$REF"
	new_source pt
	view acl "$LOOP" "$T_DIR/v"
	chmod 1777 "$T_DIR/v"
	local n v
	n=$(fill_as_bob "$REF")
	v=$(fill_as_bob "$T_DIR/v")
	assert_gt "$n" $((300 << 20)) "native: bob fills the non-reserved space"
	assert_lt "$(((v > n ? v - n : n - v) >> 20))" 4 \
		"view: bob stops where native stops (native $n, view $v bytes)"
	assert_contains "$(LC_ALL=C dd if=/dev/zero of="$T_DIR/v/root.fill" bs=1M count=8 2>&1)" \
		"8388608 bytes" "root still writes into the reserved blocks"
}

# One backing file per inode per view, with its registrant's credentials: another user may
# not write through root's; a reader shares anyone's; another view is another connection.
test_passthrough_writer_of_another_user_waits() {
	ensure_users
	new_source pt
	view acl "$LOOP" "$T_DIR/v"
	view acl "$LOOP" "$T_DIR/o"
	printf start >"$T_DIR/v/f"
	chmod 666 "$T_DIR/v/f"
	exec 7>>"$T_DIR/v/f"
	assert_fails_with "Device or resource busy" as_user "$SFS_BOB" sh -c "printf b >>'$T_DIR/v/f'"
	assert_eq start "$(as_user "$SFS_BOB" cat "$T_DIR/v/f")" "bob reads while root writes"
	assert_ok as_user "$SFS_BOB" sh -c "printf b >>'$T_DIR/o/f'"
	exec 7>&-
	assert_ok as_user "$SFS_BOB" sh -c "printf c >>'$T_DIR/v/f'"
	exec 7<"$T_DIR/v/f"
	assert_ok as_user "$SFS_BOB" sh -c "printf d >>'$T_DIR/v/f'"
	exec 7<&-
	assert_eq startbcd "$(cat "$T_DIR/o/f")" "every write landed"
}

# What a passthrough writer allocates reaches the quota ledger at fsync, stat and close.
test_passthrough_usage_settled_in_the_ledger() {
	ensure_users
	new_source pt
	view usrquota "$LOOP" "$T_DIR/q"
	view acl "$LOOP" "$T_DIR/v"
	# alice's own directory: root's O_CREAT open of her file below is then no case for
	# fs.protected_regular, which refuses it in a sticky world-writable one as natively
	mkdir "$T_DIR/v/d"
	chown "$SFS_ALICE" "$T_DIR/v/d"
	local base
	base=$(_alice_bytes_used)
	as_user "$SFS_ALICE" dd if=/dev/zero of="$T_DIR/v/d/a" bs=1M count=8 status=none
	assert_ok "$STRICTFS" quota check "$LOOP"
	assert_contains "$(cat "$T_DIR/.out")" "live accounting equals a fresh scan" "after close"
	assert_eq $((base + (8 << 20))) "$(_alice_bytes_used)" "alice's 8 MiB counted"
	exec 7>>"$T_DIR/v/d/a"
	dd if=/dev/zero bs=1M count=4 status=none >&7
	stat "$T_DIR/v/d/a" >/dev/null
	assert_eq $((base + (12 << 20))) "$(_alice_bytes_used)" \
		"an open writer's blocks counted once stat sees them"
	exec 7>&-
}

_alice_bytes_used() {
	"$STRICTFS" quota report "$LOOP" --json |
		jq -r --argjson id "$(id -u "$SFS_ALICE")" '.users[] | select(.id == $id) | .bytes.used'
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
