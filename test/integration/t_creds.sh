#!/bin/bash
# Caller credentials (contract §4.1): each request acts as the caller, in a noacl view (A) and an acl
# view (B) alike: ownership, umask, setgid directories, supplementary groups, suid/sgid clearing,
# and no privilege of the daemon reaching a caller.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

creds_setup() {
	noacl_and_acl_views creds
	mkdir -m 1777 "$B/pub" || die "mkdir pub"
	ALICE_GROUP=$(id -gn "$SFS_ALICE")
}

test_creds_new_entries_belong_to_caller() {
	creds_setup
	local V n
	for V in "$A" "$B"; do
		n=${V##*/}
		assert_ok as_user "$SFS_ALICE" sh -c "touch '$V/pub/f$n' && mkdir '$V/pub/d$n' && ln -s x '$V/pub/l$n' && mkfifo '$V/pub/p$n'"
		assert_eq "$SFS_ALICE:$ALICE_GROUP" "$(stat -c %U:%G "$V/pub/f$n")" "$n: file owned by the caller"
		assert_eq "$SFS_ALICE:$ALICE_GROUP" "$(stat -c %U:%G "$V/pub/d$n")" "$n: directory owned by the caller"
		assert_eq "$SFS_ALICE:$ALICE_GROUP" "$(stat -c %U:%G "$V/pub/l$n")" "$n: symlink owned by the caller"
		assert_eq "$SFS_ALICE:$ALICE_GROUP" "$(stat -c %U:%G "$V/pub/p$n")" "$n: fifo owned by the caller"
		assert_ok sh -c "echo root > '$V/pub/r$n'"
		assert_eq root:root "$(stat -c %U:%G "$V/pub/r$n")" "$n: root's file owned by root"
	done
}

test_creds_umask_of_caller() {
	creds_setup
	local V n
	for V in "$A" "$B"; do
		n=${V##*/}
		assert_ok as_user "$SFS_ALICE" sh -c "umask 077 && touch '$V/pub/a$n' && mkdir '$V/pub/da$n'"
		assert_ok as_user "$SFS_ALICE" sh -c "umask 027 && touch '$V/pub/b$n'"
		assert_eq 600 "$(stat -c %a "$V/pub/a$n")" "$n: umask 077 file"
		assert_eq 700 "$(stat -c %a "$V/pub/da$n")" "$n: umask 077 dir"
		assert_eq 640 "$(stat -c %a "$V/pub/b$n")" "$n: umask 027 file"
		# a FIFO (MKNOD), and a umask of 0 right after the others: each creation its own
		assert_ok as_user "$SFS_ALICE" sh -c "umask 077 && mkfifo '$V/pub/fa$n' && umask 000 &&
			touch '$V/pub/c$n' && mkdir '$V/pub/dc$n'"
		assert_eq 600 "$(stat -c %a "$V/pub/fa$n")" "$n: umask 077 FIFO"
		assert_eq 666 "$(stat -c %a "$V/pub/c$n")" "$n: umask 000 file"
		assert_eq 777 "$(stat -c %a "$V/pub/dc$n")" "$n: umask 000 dir"
	done
}

test_creds_setgid_directory_gives_group() {
	creds_setup
	mkdir "$B/sg"
	chgrp "$SFS_GRP" "$B/sg"
	chmod 2777 "$B/sg"
	local V n
	for V in "$A" "$B"; do
		n=${V##*/}
		assert_ok as_user "$SFS_BOB" sh -c "umask 022 && touch '$V/sg/f$n' && mkdir '$V/sg/d$n'"
		assert_eq "$SFS_BOB:$SFS_GRP" "$(stat -c %U:%G "$V/sg/f$n")" "$n: file gets the directory's group"
		assert_eq "$SFS_BOB:$SFS_GRP" "$(stat -c %U:%G "$V/sg/d$n")" "$n: directory gets the directory's group"
		assert_eq 2755 "$(stat -c %a "$V/sg/d$n")" "$n: subdirectory inherits setgid"
	done
}

test_creds_chgrp_uses_supplementary_groups() {
	creds_setup
	local V n
	for V in "$A" "$B"; do
		n=${V##*/}
		need as_user "$SFS_ALICE" touch "$V/pub/c$n"
		assert_ok as_user "$SFS_ALICE" chgrp "$SFS_GRP" "$V/pub/c$n"
		assert_eq "$SFS_GRP" "$(stat -c %G "$V/pub/c$n")" "$n: chgrp to a supplementary group"
		assert_fails_with "Operation not permitted" as_user "$SFS_ALICE" chgrp root "$V/pub/c$n"
		assert_fails_with "Operation not permitted" as_user "$SFS_BOB" chgrp "$SFS_GRP" "$V/pub/c$n"
		assert_fails_with "Operation not permitted" as_user "$SFS_ALICE" chown "$SFS_BOB" "$V/pub/c$n"
		assert_eq "$SFS_ALICE:$SFS_GRP" "$(stat -c %U:%G "$V/pub/c$n")" "$n: ownership unchanged after refusals"
	done
}

test_creds_group_access_uses_supplementary_groups() {
	creds_setup
	local V n
	echo g >"$B/g"
	chgrp "$SFS_GRP" "$B/g"
	chmod 0640 "$B/g"
	for V in "$A" "$B"; do
		n=${V##*/}
		assert_eq g "$(as_user "$SFS_ALICE" cat "$V/g" 2>&1)" "$n: member of the file's group reads"
		assert_fails_with "Permission denied" as_user "$SFS_BOB" cat "$V/g"
	done
}

test_creds_suid_cleared_on_write_by_non_owner() {
	creds_setup
	local V n
	for V in "$A" "$B"; do
		n=${V##*/}
		printf 'a\n' >"$V/s$n"
		chmod 4777 "$V/s$n"
		printf 'a\n' >"$V/g$n"
		chmod 2777 "$V/g$n"
		assert_ok as_user "$SFS_ALICE" sh -c "echo b >> '$V/s$n'"
		assert_eq 777 "$(stat -c %a "$V/s$n")" "$n: suid cleared by a non-owner's write"
		assert_eq "a b" "$(tr '\n' ' ' <"$V/s$n" | sed 's/ $//')" "$n: the write landed"
		assert_ok as_user "$SFS_ALICE" sh -c "echo b >> '$V/g$n'"
		assert_eq 777 "$(stat -c %a "$V/g$n")" "$n: sgid (group-exec) cleared by a non-owner's write"
	done
}

test_creds_suid_cleared_on_truncate_by_non_owner() {
	creds_setup
	local V n
	for V in "$A" "$B"; do
		n=${V##*/}
		printf 'abc\n' >"$V/t$n"
		chmod 4777 "$V/t$n"
		assert_ok as_user "$SFS_ALICE" truncate -s 0 "$V/t$n"
		assert_eq 777 "$(stat -c %a "$V/t$n")" "$n: suid cleared by truncate"
		assert_eq 0 "$(stat -c %s "$V/t$n")" "$n: truncated"
	done
}

# security.capability goes when a writer changes the data, as on ext4 (contract §4.1). A
# fallocate and a copy into the file reach the daemon as the kernel's own removal of it, asked
# as the writer, who holds no CAP_SETFCAP; a removal asked directly stays the capable's.
test_creds_capability_removed_by_writers_as_native() {
	ensure_users
	native_ref
	creds_setup
	local caps='b"\x01\x00\x00\x02\xc0" + bytes(15)' native d
	caps_of() {
		"$PY" -c 'import os, sys
try: print(len(os.getxattr(sys.argv[1], "security.capability")), "bytes of capabilities")
except OSError as e: print("none" if e.errno == 61 else e.strerror)' "$1"
	}
	transcript() { # DIR: what alice's writes do to files with capabilities
		local f
		for f in falloc copy explicit; do
			echo x >"$1/$f"
			chmod 777 "$1/$f"
			"$PY" -c "import os, sys; os.setxattr(sys.argv[1], 'security.capability', $caps)" \
				"$1/$f" || echo "setcap $f failed"
		done
		as_user "$SFS_ALICE" fallocate -l 65536 "$1/falloc" 2>&1 | sed 's/^.*: //'
		echo "falloc: $(stat -c %s "$1/falloc") $(caps_of "$1/falloc")"
		as_user "$SFS_ALICE" "$PY" -c 'import os, sys
src = os.open(sys.argv[1], os.O_RDONLY); dst = os.open(sys.argv[2], os.O_WRONLY)
print("copied", os.copy_file_range(src, dst, 2, 0, 0))' "$1/falloc" "$1/copy" 2>&1
		echo "copy: $(caps_of "$1/copy")"
		as_user "$SFS_ALICE" "$PY" -c 'import os, sys
try: os.removexattr(sys.argv[1], "security.capability"); print("removed")
except OSError as e: print(e.strerror)' "$1/explicit"
		echo "explicit: $(caps_of "$1/explicit")"
		fallocate -l 65536 "$1/explicit"
		echo "root's fallocate: $(caps_of "$1/explicit")"
	}
	mkdir -m 1777 "$REF/cap"
	native=$(transcript "$REF/cap")
	assert_contains "$native" "falloc: 65536 none" "native: a writer's fallocate removes the capabilities"
	assert_contains "$native" "explicit: 20 bytes" "native: a user may not remove them directly"
	for d in "$A/capa" "$B/capb"; do
		mkdir -m 1777 "$d"
		assert_eq "$native" "$(transcript "$d")" "${d##*/}: as on native ext4"
	done
}

test_creds_suid_kept_on_write_by_root() {
	creds_setup
	printf 'a\n' >"$B/s"
	chmod 4755 "$B/s"
	assert_ok sh -c "echo b >> '$B/s'"
	assert_eq 4755 "$(stat -c %a "$B/s")" "root's write keeps suid (CAP_FSETID), as on ext4"
}

test_creds_unprivileged_caller_denied() {
	creds_setup
	local V n
	echo s >"$B/secret"
	chmod 0600 "$B/secret"
	echo r >"$B/readonly"
	chmod 0644 "$B/readonly"
	mkdir -m 0755 "$B/rootdir"
	echo x >"$B/rootdir/x"
	for V in "$A" "$B"; do
		n=${V##*/}
		assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$V/secret"
		assert_fails_with "Permission denied" as_user "$SFS_ALICE" sh -c "echo y > '$V/readonly'"
		assert_fails_with "Permission denied" as_user "$SFS_ALICE" rm -f "$V/rootdir/x"
		assert_fails_with "Permission denied" as_user "$SFS_ALICE" touch "$V/rootdir/new"
		assert_fails_with "Operation not permitted" as_user "$SFS_ALICE" chmod 0666 "$V/readonly"
		assert_fails_with "Permission denied" as_user "$SFS_ALICE" touch -d @1 "$V/readonly"
	done
	assert_eq r "$(cat "$B/readonly")" "file unchanged"
	assert_eq 644 "$(stat -c %a "$B/readonly")" "mode unchanged"
	assert_ok test -e "$B/rootdir/x"
}

test_creds_sticky_directory() {
	creds_setup
	local V n
	for V in "$A" "$B"; do
		n=${V##*/}
		need as_user "$SFS_ALICE" touch "$V/pub/mine$n"
		assert_fails_with "Operation not permitted" as_user "$SFS_BOB" rm -f "$V/pub/mine$n"
		assert_fails_with "Operation not permitted" as_user "$SFS_BOB" mv "$V/pub/mine$n" "$V/pub/stolen$n"
		assert_ok test -e "$V/pub/mine$n"
		assert_ok as_user "$SFS_ALICE" rm "$V/pub/mine$n"
	done
}

test_creds_root_keeps_root_power() {
	creds_setup
	local V n
	for V in "$A" "$B"; do
		n=${V##*/}
		need as_user "$SFS_ALICE" sh -c "echo hers > '$V/pub/z$n' && chmod 000 '$V/pub/z$n'"
		assert_eq hers "$(cat "$V/pub/z$n" 2>&1)" "$n: root reads a 0000 file"
		assert_ok chown "$SFS_BOB" "$V/pub/z$n"
		assert_eq "$SFS_BOB" "$(stat -c %U "$V/pub/z$n")" "$n: root chowns"
		assert_fails_with "Permission denied" as_user "$SFS_ALICE" cat "$V/pub/z$n"
	done
}

_all_traced() { # PID TRACER: every thread of PID is traced by TRACER
	local t
	for t in /proc/"$1"/task/*; do
		grep -q "^TracerPid:[[:space:]]*$2\$" "$t/status" 2>/dev/null || return 1
	done
}

_write_seen() { grep -qs "^pwrite64(.*\"$1" "$T_DIR"/caps.strace.*; }

# trace_writes PID: strace holds each pwrite64 of daemon PID at its return for 3 s (one
# attachment for every write of a test: attaching interrupts the daemon's threads). STRACE set.
trace_writes() {
	rm -f "$T_DIR"/caps.strace.*
	strace -qq -ff -p "$1" -e trace=pwrite64 -e inject=pwrite64:delay_exit=3000000 \
		-o "$T_DIR/caps.strace" 2>"$T_DIR/caps.err" &
	STRACE=$!
	wait_until 10 _all_traced "$1" "$STRACE" || die "strace did not attach to every thread of $1"
}

# held_write_caps PID WHO TEXT FILE: WHO (root, or a user) writes TEXT to FILE through a view
# of daemon PID (traced by trace_writes); prints "EFF PRM", the effective and permitted
# capabilities of the thread serving the write, read while its pwrite64 is held.
held_write_caps() {
	local pid=$1 who=$2 text=$3 file=$4 w f
	if [[ $who == root ]]; then
		sh -c "echo $text >'$file'" &
	else
		as_user "$who" sh -c "echo $text >'$file'" &
	fi
	w=$!
	wait_until 20 _write_seen "$text"
	f=$(grep -ls "^pwrite64(.*\"$text" "$T_DIR"/caps.strace.* | head -n1)
	[[ -n $f ]] && awk '/^CapEff:/ { e = $2 } /^CapPrm:/ { p = $2 } END { print e, p }' \
		"/proc/$pid/task/${f##*.}/status"
	wait "$w"
}

# A thread acting for an ordinary user holds none of the daemon's capabilities in its
# effective set (CAP_SYS_RESOURCE would let the user's writes take ext4's blocks reserved for
# root; this machine's bounding set may lack it, so the set itself is checked), only in its
# permitted set, to be root's again for root's next request. Root keeps them all.
test_creds_user_write_holds_no_capability() {
	command -v strace >/dev/null || die "strace is needed"
	new_source capeff
	A=$T_DIR/a
	view nopassthrough "$LOOP" "$A"
	mkdir -m 1777 "$A/pub" || die "mkdir pub"
	local pid caps
	pid=$(view_pid "$A")
	trace_writes "$pid"
	caps=$(held_write_caps "$pid" "$SFS_ALICE" alicedata "$A/pub/alice")
	assert_ne "" "$caps" "alice's write was seen held in a thread of the daemon"
	assert_eq 0000000000000000 "${caps%% *}" "the thread writing for alice has no effective capability"
	assert_ne 0000000000000000 "${caps##* }" "and keeps its permitted ones"
	assert_eq alicedata "$(cat "$A/pub/alice")" "alice's write landed"
	caps=$(held_write_caps "$pid" root rootdata "$A/pub/root")
	assert_ne "" "$caps" "root's write was seen held in a thread of the daemon"
	assert_eq "${caps##* }" "${caps%% *}" "the thread writing for root has every capability it holds"
	assert_ne 0000000000000000 "${caps%% *}" "which are not none"
	caps=$(held_write_caps "$pid" "$SFS_ALICE" alicemore "$A/pub/alice2")
	assert_eq 0000000000000000 "${caps%% *}" "alice again after root: none"
	kill "$STRACE"
	wait "$STRACE" 2>/dev/null
}

test_creds_write_is_one_request() {
	# The backing clears set-id bits and security.capability itself, as the caller, so the
	# daemon takes that over from the kernel (FUSE_HANDLE_KILLPRIV_V2): a write is then one
	# request, where the kernel would otherwise ask for security.capability before each.
	# nopassthrough: a passthrough view's writes go to the backing without a request at all,
	# so they would count nothing.
	new_source onereq
	A=$T_DIR/a
	B=$T_DIR/b
	view noacl,nopassthrough "$LOOP" "$A"
	view acl,nopassthrough "$LOOP" "$B"
	local V before after
	for V in "$A" "$B"; do
		assert_eq false "$(view_json "$V" | jq -r .data_path.passthrough)" "${V##*/}: writes go through the daemon"
		head -c 65536 /dev/zero >"$V/f"
		requests_of "$V"
		before=$REPLY
		assert_ok dd if=/dev/zero of="$V/f" bs=4096 count=200 conv=notrunc status=none
		requests_of "$V"
		after=$REPLY
		log "${V##*/}: $((after - before)) requests for open + 200 writes"
		assert_gt $((after - before)) 199 "${V##*/}: each of the 200 writes reaches the daemon"
		assert_lt $((after - before)) 230 "${V##*/}: 200 writes cost about 200 requests"
	done
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
