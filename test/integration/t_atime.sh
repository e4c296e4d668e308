#!/bin/bash
# Access times, against native ext4 with the same options: each view's atime rule (relatime,
# strictatime, noatime, nodiratime) moves atime exactly where the native mount does, also for
# reads the view's own cache would answer, and every other view sees the new atime at once;
# nothing done through a ro view reaches the disk (xfstests generic/003).
# transport-independent: each view's atime rule lives in its clone of the backing and its profile; the data path is the kernel's passthrough in both transports, carried by t_data and t_passthrough in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

steps_on() { # ROOT OTHER: the report of atime_steps.py
	"$PY" "$SFS_TEST_DIR/atime_steps.py" "$1" "$2" 2>&1
}

# compare_rule OPTS NATIVE-EXPECTED...: the steps on a native ext4 mount with OPTS (OTHER: a
# bind mount of it) and on a view with OPTS (OTHER: a second, default view of the source)
# report the same, step by step. The native report must contain each NATIVE-EXPECTED line,
# so that a scenario which moves nothing cannot pass unseen.
compare_rule() {
	local opts=$1 tag=${1//,/_}
	shift
	local N=$T_DIR/n_$tag NB=$T_DIR/nb_$tag V=$T_DIR/v_$tag W=$T_DIR/w_$tag native got k want line
	mkimg "n_$tag"
	mkdir -p "$N" "$NB"
	need mount -o "loop,$opts" "$T_DIR/n_$tag.img" "$N"
	need mount --bind "$N" "$NB"
	new_source "v_$tag"
	view "$opts" "$LOOP" "$V"
	view "" "$LOOP" "$W"
	native=$(steps_on "$N" "$NB")
	got=$(steps_on "$V" "$W")
	for line in "$@"; do
		assert_contains "$native" "$line" "native $opts: $line (the scenario means something)"
	done
	while IFS='=' read -r k want; do
		assert_eq "$want" "$(sed -n "s/^$k=//p" <<<"$got")" "view $opts: $k as native"
	done <<<"$native"
}

test_atime_relatime_as_native() {
	compare_rule relatime first_read=Y second_read=N read_after_full_page_write=Y \
		read_after_chmod=Y first_list=Y second_list=N first_readlink=Y
}

test_atime_strictatime_as_native() {
	compare_rule strictatime second_read=Y read_in_open=Y second_list=Y second_readlink=Y
}

test_atime_noatime_as_native() {
	compare_rule noatime first_read=N first_list=N first_readlink=N
}

test_atime_nodiratime_as_native() {
	compare_rule strictatime,nodiratime second_read=Y first_list=N second_list=N
}

# A remount changes the rule of the reads that follow.
test_atime_remount_changes_the_rule() {
	new_source remount
	local V=$T_DIR/v a1 a2
	view noatime "$LOOP" "$V"
	echo data >"$V/f"
	cat "$V/f" >/dev/null
	a1=$(stat -c %X.%x "$V/f")
	sleep 0.1
	cat "$V/f" >/dev/null
	assert_eq "$a1" "$(stat -c %X.%x "$V/f")" "noatime: a read leaves atime"
	assert_ok "$STRICTFS" mount -o remount,strictatime "$LOOP" "$V"
	sleep 0.1
	cat "$V/f" >/dev/null
	a2=$(stat -c %X.%x "$V/f")
	assert_ne "$a1" "$a2" "after remount,strictatime: a read moves atime"
}

# Every atime rule, with and without nodiratime and ro, as views of one source at once (each
# view opens the backing through a clone of its own, with its flags).
test_atime_every_rule_at_once() {
	new_source every
	local o i=0
	for o in relatime relatime,nodiratime strictatime strictatime,nodiratime noatime \
		noatime,nodiratime ro ro,strictatime ro,nodiratime; do
		assert_ok sfs_mount -o "$o" "$LOOP" "$T_DIR/v$i"
		((i++))
	done
	echo x >"$T_DIR/v0/f"
	assert_eq x "$(cat "$T_DIR/v$((i - 1))/f")" "the last view reads what the first wrote"
}

# tree_state ROOT: every object's times, size and mode, and every file's bytes
tree_state() {
	(cd "$1" && find . -printf '%p %A@ %T@ %C@ %s %m\n' | sort && find . -type f -exec md5sum {} + | sort)
}

# Nothing done through a ro view changes the disk: reads, listings, readlink, exec, xattrs,
# and the daemon's own start with it (its quota scan reads every directory). The tree's atimes
# are set in the past first, so that any access the rules would count shows.
test_ro_view_changes_nothing() {
	mkimg ro
	local img=$REPLY N=$T_DIR/n R=$T_DIR/r before
	mkdir -p "$N"
	need mount -o loop,noatime "$img" "$N" # the snapshots below read everything
	need mkdir -p "$N/d/sub"
	echo one >"$N/d/f"
	head -c 100000 /dev/urandom >"$N/d/sub/big"
	need install -m 0755 /bin/true "$N/d/prog"
	need ln -s f "$N/d/l"
	need setfattr -n user.u -v uv "$N/d/f"
	need find "$N" -exec touch -h -a -d '2001-02-03 04:05:06' {} +
	before=$(tree_state "$N")
	need umount "$N"
	attach_loop "$img"
	LOOP=$REPLY
	view ro,strictatime "$LOOP" "$R"
	cat "$R/d/f" "$R/d/sub/big" >/dev/null
	ls -laR "$R" >/dev/null
	readlink "$R/d/l" >/dev/null
	assert_ok "$R/d/prog"
	getfattr -d "$R/d/f" >/dev/null
	"$PY" -c 'import mmap,sys; f=open(sys.argv[1],"rb"); m=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ); m[0]' "$R/d/sub/big"
	local pid
	pid=$(view_pid "$R")
	assert_ok "$STRICTFS" umount "$R"
	wait_daemon_gone "$pid" 10 || fail "the daemon did not exit"
	need mount -o ro "$LOOP" "$N"
	assert_eq "$before" "$(tree_state "$N")" "the tree as it was: no atime, no change"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
