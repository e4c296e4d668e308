#!/bin/bash
# Files shared between views (contract §4.6): POSIX, OFD and flock locks taken through one view
# exclude those asked through any other, as through two mounts of one ext4; waits end when the
# holder dies or a signal comes; close(2) ends them as natively; many waiters hold nothing up;
# databases shared between views lose nothing; leases are broken by opens through any view;
# change notices reach other views' watchers as far as the kernel lets them. The reference is two mounts of a native ext4
# image (a mount and a bind mount of it), the same case run through both (locks.py).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LOCKS_PY=$SFS_TEST_DIR/locks.py
LOCKS_PY_TRY=$SFS_TEST_DIR/locks_try.py # PATH: a write lock on PATH, now or fail
LOCKS_CYCLES=$SFS_TEST_DIR/locks_cycles.py # ROUNDS DIR_A DIR_B: lock cycles over 1,000 files
LEASES_PY=$SFS_TEST_DIR/leases.py

# native_pair: REF (a native ext4 mount) and REF2, a bind mount of it; REFRO, a read-only one.
native_pair() {
	native_ref
	REF2=$T_DIR/ref2
	REFRO=$T_DIR/refro
	mkdir -p "$REF2" "$REFRO"
	need mount --bind "$REF" "$REF2"
	need mount --bind -o ro "$REF" "$REFRO"
	need mount -o remount,bind,ro "$REFRO"
}

# lock_views: a source with views of different options, all of one backing: A (acl), B
# (noacl), C (casefold), Q (usrquota), R (ro).
lock_views() {
	new_source locks
	A=$T_DIR/a B=$T_DIR/b C=$T_DIR/c Q=$T_DIR/q R=$T_DIR/r
	view acl "$LOOP" "$A"
	view noacl "$LOOP" "$B"
	view casefold "$LOOP" "$C"
	view usrquota "$LOOP" "$Q"
	view ro "$LOOP" "$R"
}

# same_as_native CASE NATIVE_A NATIVE_B [VIEW_A VIEW_B]...: locks.py CASE answers through each
# pair of views as through the two native mounts (CHECKER: another script of that form).
same_as_native() {
	local checker=${CHECKER:-$LOCKS_PY} c=$1 native got
	native=$("$PY" "$checker" "$c" "$2" "$3" 2>&1)
	shift 3
	while (($# >= 2)); do
		got=$("$PY" "$checker" "$c" "$1" "$2" 2>&1)
		assert_eq "$native" "$got" "$c: ${1#"$T_DIR"/} then ${2#"$T_DIR"/} as between native mounts"
		shift 2
	done
}

test_locks_between_views_as_between_mounts() {
	native_pair
	lock_views
	echo x >"$REF/f"
	echo x >"$A/f"
	local c
	for c in posix split ofd flock getlk setlkw flock_wait interrupt dpkg; do
		# acl beside noacl; a casefold view that names the file otherwise beside a quota view
		same_as_native "$c" "$REF/f" "$REF2/f" "$A/f" "$B/f" "$C/F" "$Q/f"
	done
	# a ro view takes read and flock locks, as a read-only mount; its read lock keeps a writer
	# of another view out
	same_as_native ro "$REF/f" "$REFRO/f" "$A/f" "$R/f"
	same_as_native ro_holder "$REFRO/f" "$REF/f" "$R/f" "$B/f"
	locks_leave_no_descriptor
}

# A lease taken through one view is broken by an open or truncate through any other, the
# opener waiting for its holder as between two mounts (before, it went on at once and the
# holder heard nothing); the daemon's breaks leave no descriptor and no mount behind.
test_leases_between_views_as_between_mounts() {
	native_pair
	lock_views
	echo x >"$REF/f"
	echo x >"$A/f"
	local pid fds mounts
	pid=$(view_pid "$A")
	fds=$(ls /proc/"$pid"/fd | wc -l)
	mounts=$(wc -l </proc/self/mountinfo)
	CHECKER=$LEASES_PY same_as_native all "$REF/f" "$REF2/f" "$A/f" "$B/f" "$C/F" "$Q/f"
	# a ro view holds read leases (not write leases, which need a file open for writing) and
	# its own opens break leases of the others
	CHECKER=$LEASES_PY same_as_native ro "$REFRO/f" "$REF2/f" "$R/f" "$B/f"
	CHECKER=$LEASES_PY same_as_native ro "$REF/f" "$REFRO/f" "$A/f" "$R/f"
	assert_eq "$fds" "$(ls /proc/"$pid"/fd | wc -l)" "daemon descriptors after the lease breaks"
	assert_eq "$mounts" "$(wc -l </proc/self/mountinfo)" "mounts after the lease breaks"
}

# Change notices: a watcher in one view sees, of the changes made through another, what the
# kernel lets a FUSE server cause (IN_DELETE_SELF and IN_IGNORED of an object whose last link
# went), exactly as a watcher on a bind mount sees them, and nothing it would not (before,
# nothing at all). The rest of the native events are listed in contract §4.6.
NOTICES_PY=$SFS_TEST_DIR/notices.py
CARRIED=(DELETE_SELF IGNORED)

test_notices_between_views_as_between_mounts() {
	native_pair
	lock_views
	local native
	mkdir "$REF/n" "$REF/n2"
	native=$("$PY" "$NOTICES_PY" "$REF2/n" "$REF/n" "${CARRIED[@]}" 2>&1)
	assert_contains "$native" "unlink victim: victim:DELETE_SELF victim:IGNORED" "the native events carried"
	mkdir "$A/n" "$C/n2"
	# all that reaches the view's watcher, unfiltered
	assert_eq "$native" "$("$PY" "$NOTICES_PY" "$B/n" "$A/n" 2>&1)" "a watcher in noacl B, changes in acl A"
	assert_eq "$native" "$("$PY" "$NOTICES_PY" "$C/n2" "$Q/n2" 2>&1)" "a watcher in casefold C, changes in quota Q"
}

test_locks_many_waiters() {
	native_pair
	lock_views
	echo x >"$REF/f"
	echo x >"$A/f"
	same_as_native many_waiters "$REF/f" "$REF2/f" "$A/f" "$B/f"
}

# Forty waiters on one CPU, and the requests made on that CPU while they wait: over io_uring
# they all reach one queue, whose two entries a waiter each would hold (a spare entry joins
# the queue for each waiter past the first: doc/kernel.md §4.12). Before, the second waiter
# was refused with ENOLCK (xfstests generic/089: "can't lock lock file t_mtab~").
test_locks_many_waiters_on_one_cpu() {
	native_pair
	lock_views
	echo x >"$REF/g"
	echo x >"$A/g"
	same_as_native many_waiters_one_cpu "$REF/g" "$REF2/g" "$A/g" "$B/g"
}

# Requests that reach one CPU's queue all at once, before the daemon runs there (the callers
# have real-time priority): half are lock waits, which leave the queue's entries waiting, half
# are stats, which are answered while the lock is still held. Over io_uring the queue's spares
# register after the stats were queued, and the kernel hands such requests only to an entry
# that commits (doc/kernel.md §4.12): before the queue was woken, they waited for the holder.
test_locks_waiters_and_stats_at_once_on_one_cpu() {
	native_pair
	lock_views
	echo x >"$REF/h"
	echo x >"$A/h"
	same_as_native waiters_and_stats_at_once "$REF/h" "$REF2/h" "$A/h" "$B/h"
}

# Databases of the row in issue 29's table: writers in views of different options, each row
# its own transaction, lose nothing (before, one writer failed with "disk I/O error" and
# half the rows were missing).
test_locks_sqlite_writers_in_many_views() {
	lock_views
	local D=() o i
	for o in A B C Q; do
		mkdir -p "${!o}/db2" && D+=("${!o}")
	done
	assert_eq "3000 of 3000 rows, integrity ok" \
		"$("$PY" "$LOCKS_PY" sqlite "$A/db2" "$B/db2" 2>&1)" "two writers, rollback journal"
	# eight writers in eight views
	for i in 1 2 3 4 5; do
		view "$([[ $i == [135] ]] && echo noacl || echo acl)" "$LOOP" "$T_DIR/v$i"
	done
	mkdir -p "$A/db8" "$A/wal"
	local eight=() wal=()
	for o in "$A" "$B" "$C" "$Q" "$T_DIR/v1" "$T_DIR/v2" "$T_DIR/v3" "$T_DIR/v4"; do
		eight+=("$o/db8")
	done
	assert_eq "12000 of 12000 rows, integrity ok" \
		"$("$PY" "$LOCKS_PY" sqlite "${eight[@]}" 2>&1)" "eight writers in eight views, rollback journal"
	# WAL maps its -shm file shared: coherent between views whose data goes by passthrough
	# (one page cache, the backing's); Q serves data itself (contract §4.6)
	for o in "$A" "$B" "$C" "$T_DIR/v1" "$T_DIR/v2" "$T_DIR/v3" "$T_DIR/v4" "$T_DIR/v5"; do
		wal+=("$o/wal")
	done
	assert_eq "3200 of 3200 rows, integrity ok" \
		"$("$PY" "$LOCKS_PY" sqlite_wal "${wal[@]}" 2>&1)" "eight writers in eight views, WAL"
}

# The daemon keeps a description per lock owner and file while it holds locks: 10,000 lock and
# unlock cycles over 1,000 files, then closed, leave it with the descriptors the same opens
# without locks leave (its cache of O_PATH descriptors keeps some either way), and no owner.
no_lock_owners() { [[ $(daemon_field "$1" .lock_owners) == 0 ]]; }

locks_leave_no_descriptor() {
	local pid plain locked
	mkdir -p "$A/many"
	pid=$(view_pid "$A")
	assert_ok "$PY" "$LOCKS_CYCLES" 0 "$A/many" "$B/many"
	plain=$(ls /proc/"$pid"/fd | wc -l)
	assert_ok "$PY" "$LOCKS_CYCLES" 10 "$A/many" "$B/many"
	# the kernel sends the RELEASEs after close(2) returns
	assert_ok wait_until 10 no_lock_owners "$A"
	locked=$(ls /proc/"$pid"/fd | wc -l)
	assert_eq "$plain" "$locked" "daemon descriptors after 10,000 lock cycles over 1,000 files, as after none"
}

# The locks taken through a view whose connection ends (aborted) go with it; the other
# views go on, and take the lock.
test_locks_end_with_their_view() {
	lock_views
	echo x >"$A/f"
	local holder conn
	"$PY" -c 'import fcntl, os, sys, time, struct
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
print("held", flush=True)
time.sleep(300)' "$B/f" >"$T_DIR/held" &
	holder=$!
	assert_ok wait_until 10 grep -q held "$T_DIR/held"
	assert_fails "$PY" "$LOCKS_PY_TRY" "$A/f"
	# umount -f aborts a FUSE connection (fuse_umount_begin); the open file keeps the mount busy
	umount -f "$B" 2>/dev/null
	assert_ok wait_until 10 "$PY" "$LOCKS_PY_TRY" "$A/f"
	kill "$holder"
	wait "$holder" 2>/dev/null
	umount -l "$B"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
