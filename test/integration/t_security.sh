#!/bin/bash
# No privilege leak (contract §4.1, §5, issue 7 part 1), tested adversarially: unprivileged callers
# try what they must not be able to do, one system call at a time (probe.py), on a native ext4
# mount and in a noacl view (A) and an acl view (B) of an identically prepared tree; each
# outcome (errno name, or OK with the resulting mode/owner) must be native ext4's. Where a view
# differs by design (noacl ignores ACLs; a subdir view refuses handles a bind mount honours),
# the designed outcome is asserted and the reason given beside it.
# transport-independent: what a caller may do is the kernel's checks on the view and the credentials the request carries, the same in both transports; t_creds carries the switch of an io_uring entry's thread to them in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PROBE=

_install_probe() { # the test users cannot read the work tree; the probe lives in T_DIR
	PROBE=$T_DIR/probe.py
	cp "$SFS_TEST_DIR/probe.py" "$PROBE" && chmod 755 "$PROBE" || die "installing probe.py"
}

# probe USER OP ARGS...: one syscall as USER (root: as is); prints OK... or the errno name.
probe() {
	local u=$1
	shift
	case $u in alice) u=$SFS_ALICE ;; bob) u=$SFS_BOB ;; esac
	if [[ $u == alice_userns ]]; then # all capabilities, in a user namespace of its own
		as_user "$SFS_ALICE" unshare -Ur "$PY" "$PROBE" "$@"
	elif [[ $u == root ]]; then
		(cd / && "$PY" "$PROBE" "$@")
	else
		as_user "$u" "$PY" "$PROBE" "$@"
	fi
}

# fs.protected_hardlinks on for this test, the old value back in every exit path.
_hardlinks_on() {
	SEC_OLD_HARDLINKS=$(sysctl -n fs.protected_hardlinks) || die "reading fs.protected_hardlinks"
	t_on_exit _hardlinks_restore
	sysctl -q -w fs.protected_hardlinks=1 || die "setting fs.protected_hardlinks"
}

_hardlinks_restore() {
	[[ -n ${SEC_OLD_HARDLINKS:-} ]] && sysctl -q -w fs.protected_hardlinks="$SEC_OLD_HARDLINKS"
}

# sec_tree ROOT: the tree every case runs against, made the same way natively and in views.
sec_tree() {
	local r=$1
	need mkdir -m 0755 "$r"
	need mkdir -m 0755 "$r/closed" "$r/closed/sub"
	echo c >"$r/closed/f"
	need mkdir -m 0777 "$r/open"
	chmod 0777 "$r/open"
	need mkdir -m 0755 "$r/open/rootdir"
	echo r >"$r/open/rootfile"
	need mkdir "$r/noexec"
	chmod 0776 "$r/noexec"
	echo n >"$r/noexec/f"
	need mkdir "$r/sticky"
	chmod 1777 "$r/sticky"
	need as_user "$SFS_ALICE" sh -c "umask 022 && echo a > '$r/sticky/alice_f' && echo mine > '$r/open/alice_f'"
	echo pub >"$r/root_f"
	echo secret >"$r/root_secret"
	chmod 0600 "$r/root_secret"
	echo w >"$r/root_rw"
	chmod 0666 "$r/root_rw"
	echo nog >"$r/alice_nog"
	need chown "$SFS_ALICE:nogroup" "$r/alice_nog"
	echo grp >"$r/alice_grp"
	need chown "$SFS_ALICE:$SFS_GRP" "$r/alice_grp"
	echo t >"$r/acl_f"
	need setfacl -m "u:$SFS_BOB:---" "$r/acl_f"
	need mkdir "$r/sgdef"
	need chgrp nogroup "$r/sgdef"
	chmod 2777 "$r/sgdef"
	need setfacl -d -m "u:$SFS_ALICE:rwx" "$r/sgdef"
	need setfattr -n trusted.t -v tv "$r/root_f"
	need setfattr -n user.u -v uv "$r/root_f"
	need install -m 0711 /bin/true "$r/exec_only"
	need install -m 0700 /bin/true "$r/exec_none"
	need install -m 0755 /bin/true "$r/exec_acl"
	need setfacl -m "u:$SFS_BOB:r--" "$r/exec_acl"
}

# The cases: "USER|OP ARGS (@ = the tree's root)|NATIVE OUTCOME[|NOACL OUTCOME, by design]".
# The native outcome is asserted too, so that a case which denies nothing cannot pass unseen.
SEC_CASES=(
	# directories without write or search permission
	"alice|create @/closed/new|EACCES"
	"alice|mkdir @/closed/newd|EACCES"
	"alice|mknod_chr @/open/dev|EPERM"
	"alice|symlink x @/closed/l|EACCES"
	"alice|unlink @/closed/f|EACCES"
	"alice|rmdir @/closed/sub|EACCES"
	"alice|rename @/closed/f @/open/f2|EACCES"
	"alice|rename @/open/rootfile @/closed/x|EACCES"
	"alice|exchange @/open/alice_f @/closed/f|EACCES"
	"alice|link @/open/alice_f @/closed/l2|EACCES"
	"alice|create @/noexec/new|EACCES"
	"alice|read @/noexec/f|EACCES"
	"alice|unlink @/noexec/f|EACCES"
	"alice|rename @/open/rootdir @/sticky/moved|EACCES"
	"alice|rename @/open/rootdir @/closed/moved|EACCES"
	"alice|rename @/open/rootdir @/open/moved|OK"
	# sticky directory
	"bob|unlink @/sticky/alice_f|EPERM"
	"bob|rename @/sticky/alice_f @/sticky/x|EPERM"
	"bob|exchange @/sticky/alice_f @/open/rootfile|EPERM"
	"bob|rename @/open/rootfile @/sticky/alice_f|EPERM"
	# attributes of another user's file
	"bob|chmod @/open/alice_f 666|EPERM"
	"bob|chown @/open/alice_f sfs_bob -1|EPERM"
	"alice|chown @/open/alice_f sfs_bob -1|EPERM"
	"alice|chown @/open/alice_f -1 root|EPERM"
	"alice|chown @/open/alice_f -1 nogroup|EPERM"
	"bob|chown @/open/alice_f -1 users|EPERM"
	"bob|utimes @/open/alice_f|EPERM"
	"bob|touch_now @/open/alice_f|EACCES"
	"bob|utimes @/root_rw|EPERM"
	"bob|touch_now @/root_rw|OK"
	"alice|chown @/open/alice_f -1 sfs_grp|OK sfs_alice:sfs_grp mode=644"
	# set-group-ID: kept for a member of the file's group, cleared silently otherwise
	"alice|chmod @/alice_nog 2755|OK mode=755"
	"alice|chmod @/alice_grp 2755|OK mode=2755"
	"alice|chmod @/alice_nog 4755|OK mode=4755"
	# in a setgid directory of a group the caller is not in, under a default ACL (which a
	# noacl view does not apply: mode & ~umask, as ext4 mounted noacl)
	"bob|create_mode @/sgdef/f 2755|OK sfs_bob:nogroup mode=755|OK sfs_bob:nogroup mode=755"
	"bob|mkdir_mode @/sgdef/d 0777|OK sfs_bob:nogroup mode=2777|OK sfs_bob:nogroup mode=2755"
	"alice|create_mode @/sgdef/g 6777|OK sfs_alice:nogroup mode=4777|OK sfs_alice:nogroup mode=4755"
	# data of files the caller may not write or read
	"bob|open_w @/root_f|EACCES"
	"bob|append @/root_f|EACCES"
	"bob|open_trunc @/root_f|EACCES"
	"bob|truncate @/root_f 0|EACCES"
	"bob|read @/root_secret|EACCES"
	"nobody|read @/root_secret|EACCES"
	"alice|open_noatime @/root_f|EPERM"
	# execute-only programs run without read permission (the kernel opens them for exec)
	"bob|exec @/exec_only|OK"
	"bob|read @/exec_only|EACCES"
	"bob|exec @/exec_none|EACCES"
	"bob|exec @/exec_acl|EACCES|OK"
	"alice|open_noatime @/open/alice_f|OK"
	# hard links (fs.protected_hardlinks=1): neither owner nor able to read and write
	"alice|link @/root_secret @/open/l_secret|EPERM"
	"alice|link @/root_f @/open/l_rootf|EPERM"
	"alice|link @/root_rw @/open/l_rw|OK"
	"bob|link @/open/alice_f @/open/l_bob|EPERM"
	"alice|link @/open/alice_f @/open/l_mine|OK"
	# xattrs
	"alice|setxattr @/open/alice_f trusted.x v|EPERM"
	"alice|getxattr @/root_f trusted.t|ENODATA"
	"alice|removexattr @/root_f trusted.t|EPERM"
	"alice|listxattr @/root_f|OK user.u"
	"root|listxattr @/root_f|OK trusted.t,user.u"
	"root|getxattr @/root_f trusted.t|OK tv"
	"alice_userns|listxattr @/root_f|OK user.u"
	"alice_userns|getxattr @/root_f trusted.t|ENODATA"
	"alice_userns|setxattr @/open/alice_f trusted.x v|EPERM"
	"alice_userns|setxattr @/open/alice_f security.x v|EPERM"
	"alice_userns|setcap @/open/alice_f|EPERM"
	"alice|setcap @/open/alice_f|EPERM"
	"alice|setxattr @/open/alice_f security.x v|EPERM"
	"alice|setxattr @/root_f user.x v|EACCES"
	"bob|removexattr @/root_f user.u|EACCES"
	"root|setcap @/open/alice_f|OK"
	"alice|getxattr @/open/alice_f security.capability|OK 0100000200040000000000000000000000000000"
	# POSIX ACLs: user:sfs_bob:--- on a 0644 file; noacl views check the mode bits only
	"bob|read @/acl_f|EACCES|OK t"
	"alice|read @/acl_f|OK t"
	"bob|setxattr @/acl_f user.x v|EACCES|EACCES"
	# (a non-owner's set is refused by the VFS owner check before the view's EOPNOTSUPP)
	"alice|setacl @/acl_f|EPERM|EPERM"
	"alice|setacl @/open/alice_f|OK|ENOTSUP"
	"root|setacl @/open/alice_f|OK|ENOTSUP"
	"bob|listxattr @/acl_f|OK system.posix_acl_access|OK "
)

_case_args() { # ROOT "ARGS with @" -> words with @ replaced
	local root=$1 w out=()
	for w in $2; do out+=("${w//@/$root}"); done
	printf '%s\n' "${out[@]}"
}

# run_cases NAME:ROOT... : every case on each root; the first root is native ext4.
run_cases() {
	local spec u args want want_noacl native got var root rootspec
	local -a argv
	for spec in "${SEC_CASES[@]}"; do
		IFS='|' read -r u args want want_noacl <<<"$spec"
		[[ $spec == *"|"*"|"*"|"* ]] || want_noacl=$want
		for rootspec in "$@"; do
			var=${rootspec%%:*}
			root=${rootspec#*:}
			mapfile -t argv < <(_case_args "$root" "$args")
			got=$(probe "$u" "${argv[@]}" 2>&1)
			if [[ $var == native ]]; then
				native=$got
				assert_eq "$want" "$got" "native: $u ${args//@/} (the case denies what it should)"
			elif [[ $var == noacl && $want_noacl != "$want" ]]; then
				# by design: a noacl view has ext4 noacl semantics (mode bits, no ACL xattrs)
				assert_eq "$want_noacl" "$got" "$var: $u ${args//@/} (noacl by design)"
			else
				assert_eq "$native" "$got" "$var: $u ${args//@/} as native"
			fi
		done
	done
}

_tree_listing() { # ROOT: what the cases may have changed: names, modes, owners, sizes, xattrs
	(cd "$1" && find . -printf '%p %M %U %G %s %n\n' | sort)
	(cd "$1" && getfattr -R -h -d -m '^(user|trusted|security)\.' . 2>/dev/null | grep -v '^#' | sort)
}

sec_setup() {
	noacl_and_acl_views sec
	native_ref
	_install_probe
	_hardlinks_on
	sec_tree "$REF/t"
	sec_tree "$B/ta"
	sec_tree "$B/tb"
}

test_security_native_equivalence() {
	sec_setup
	run_cases "native:$REF/t" "noacl:$A/ta" "acl:$B/tb"
	local want
	want=$(_tree_listing "$REF/t")
	assert_eq "$want" "$(_tree_listing "$B/tb")" "acl view: the tree after every case equals native"
	# by design the noacl view's new entries under sgdef have no default ACL's modes
	assert_eq "$(grep -v '^\./sgdef/' <<<"$want")" "$(_tree_listing "$B/ta" | grep -v '^\./sgdef/')" \
		"noacl view: the tree after every case equals native (but what the default ACL made)"
}

test_security_ro_view() {
	noacl_and_acl_views secro
	native_ref
	_install_probe
	sec_tree "$REF/t"
	sec_tree "$B/t"
	local R=$T_DIR/r RR=$T_DIR/refro u op spec got native
	view ro "$LOOP" "$R"
	mkdir -p "$RR"
	need mount --bind "$REF" "$RR"
	need mount -o remount,bind,ro "$RR"
	local cases=(
		"root|append @/root_rw" "alice|append @/root_rw" "root|open_w @/root_f"
		"root|open_trunc @/root_f" "root|truncate @/root_f 0" "root|create @/open/new"
		"alice|create @/open/new" "root|mkdir @/open/d" "root|unlink @/root_f"
		"root|rmdir @/closed/sub" "root|rename @/root_f @/open/x" "root|link @/root_f @/open/l"
		"root|symlink x @/open/s" "root|chmod @/root_f 600" "alice|chmod @/open/alice_f 600"
		"root|chown @/root_f sfs_alice -1" "root|utimes @/root_f" "alice|touch_now @/root_rw"
		"root|setxattr @/root_f user.x v" "root|removexattr @/root_f user.u"
		"root|setxattr @/root_f trusted.x v" "root|setcap @/root_f" "root|mknod_chr @/open/c"
		"alice|open_noatime @/open/alice_f" "alice|read @/open/alice_f"
	)
	local -a argv
	for spec in "${cases[@]}"; do
		IFS='|' read -r u op <<<"$spec"
		mapfile -t argv < <(_case_args "$RR/t" "$op")
		native=$(probe "$u" "${argv[@]}" 2>&1)
		mapfile -t argv < <(_case_args "$R/t" "$op")
		got=$(probe "$u" "${argv[@]}" 2>&1)
		assert_eq "$native" "$got" "ro view: $u ${op//@/} as a native ro mount ($native)"
	done
	assert_eq "$(_tree_listing "$REF/t")" "$(_tree_listing "$B/t")" "nothing changed through the ro view"
}

# A file open for writing pins a mount read-write: remounting ro is refused, natively (EBUSY)
# and for a view (by the option's name), and the writer keeps writing; without it the remount takes, and new writes
# fail with EROFS.
test_security_remount_ro_with_writer() {
	new_source secrw
	native_ref
	local V=$T_DIR/v RB=$T_DIR/rb r
	view "" "$LOOP" "$V"
	mkdir -p "$RB"
	need mount --bind "$REF" "$RB"
	for r in "$RB" "$V"; do
		echo a >"$r/f"
		exec 7>>"$r/f"
		if [[ $r == "$V" ]]; then
			assert_exit 1 "$STRICTFS" mount -o remount,ro "$V"
			assert_eq "strictfs: ro: files are open for writing through $V" "$(cat "$T_DIR/.err")" \
				"view: remount ro refused by name"
		else
			assert_fails_with "busy" mount -o remount,bind,ro "$RB"
		fi
		assert_ok has_mount_opt "$r" rw
		assert_ok sh -c "echo b >&7"
		exec 7>&-
		if [[ $r == "$V" ]]; then
			assert_ok "$STRICTFS" mount -o remount,ro "$V"
		else
			assert_ok mount -o remount,bind,ro "$RB"
		fi
		assert_fails_with "Read-only file system" sh -c "echo c >> '$r/f'"
		assert_eq "a b" "$(tr '\n' ' ' <"$r/f" | sed 's/ $//')" "$r: what was written, no more"
	done
}

# ---- subdir= confinement ------------------------------------------------------------------

# A full view F and a subdir=/sub view S of one source; natively, the same tree on REF and a
# bind mount of REF/sub at RS (what a native subdir mount is).
sec_subdir_setup() {
	new_source secsub
	native_ref
	_install_probe
	F=$T_DIR/full
	S=$T_DIR/s
	RS=$T_DIR/refsub
	view "" "$LOOP" "$F"
	local r
	for r in "$F" "$REF"; do
		need mkdir -p "$r/sub/deeper" "$r/secretdir"
		chmod 0777 "$r/sub"
		echo in >"$r/sub/inner"
		echo OUTSIDE-SECRET >"$r/outside"
		echo OUTSIDE-SECRET >"$r/secretdir/s"
		ln -s ../secretdir "$r/sub/lnk"
	done
	view subdir=/sub "$LOOP" "$S"
	mkdir -p "$RS"
	need mount --bind "$REF/sub" "$RS"
}

test_security_subdir_handles() {
	sec_subdir_setup
	local got native
	# root, the one caller allowed open_by_handle_at (CAP_DAC_READ_SEARCH)
	native=$(probe root open_handle "$REF/outside" "$RS")
	got=$(probe root open_handle "$F/outside" "$S")
	# by design: a bind mount of a subdirectory lets root's handle reach the whole ext4 (the
	# kernel accepts any dentry of the superblock for a fully privileged caller); a subdir
	# view's FUSE connection has no export support, so a handle of an inode the view never
	# looked up is stale there
	assert_eq "OK OUTSIDE-SECRET" "$native" "native: root's handle escapes a bind-mounted subdir"
	assert_eq ESTALE "$got" "view: a handle from the full view does not reach outside subdir="
	got=$(probe root open_handle "$F/secretdir" "$S")
	assert_eq ESTALE "$got" "view: a directory handle from outside is stale"
	got=$(probe root open_handle "$REF/outside" "$S")
	assert_eq ESTALE "$got" "view: a native ext4 handle is stale in the view"
	got=$(probe root open_handle "$S/inner" "$S")
	log "view: a handle of the view's own file, opened on the view: $got"
	assert_one_of "$got" "view: a handle of its own file opens it or is stale" ESTALE "OK in"
	# (an error would hide what the handle reaches: the same file or stale, nothing else)
	got=$(probe root open_handle "$S/inner" "$F")
	assert_one_of "$got" "the view's handle, opened on the full view: its file, no secret" "OK in" ESTALE
	assert_eq "$(probe sfs_alice open_handle "$RS/inner" "$RS")" "$(probe sfs_alice open_handle "$S/inner" "$S")" \
		"unprivileged open_by_handle_at refused as natively"
	assert_eq EPERM "$(probe sfs_alice open_handle "$S/inner" "$S")" "unprivileged: EPERM"
}

test_security_subdir_links_and_renames() {
	sec_subdir_setup
	local c native got
	local cases=(
		"link @S/inner @F/x" "rename @S/inner @F/x" "link @F/outside @S/x" "rename @F/outside @S/x"
		"symlink ../outside @S/l2" "read @S/lnk/s" "read @S/../outside"
	)
	local -a n v
	for c in "${cases[@]}"; do
		read -ra n <<<"${c//@S/$RS}"
		n=("${n[@]//@F/$REF}")
		read -ra v <<<"${c//@S/$S}"
		v=("${v[@]//@F/$F}")
		native=$(probe sfs_alice "${n[@]}")
		got=$(probe sfs_alice "${v[@]}")
		assert_eq "$native" "$got" "alice ${c//@/} as natively ($native)"
		assert_not_contains "$got" SECRET "alice ${c//@/}: nothing from outside subdir="
	done
	# exit 1: grep read the whole view and found nothing (2, an error, would hide a secret)
	assert_exit 1 grep -r OUTSIDE-SECRET "$S"
	# root acting on a symlink to outside: the daemon reaches it through its own descriptor
	# (a magic link), which lands on the symlink and never follows it on
	cases=("link @S/lnk @S/lnk2" "stat @S/lnk2" "setxattr @S/lnk trusted.s v" "listxattr @S/lnk"
		"chown @S/lnk sfs_bob -1" "stat @S/lnk")
	for c in "${cases[@]}"; do
		read -ra n <<<"${c//@S/$RS}"
		read -ra v <<<"${c//@S/$S}"
		assert_eq "$(probe root "${n[@]}")" "$(probe root "${v[@]}")" "root ${c//@/} as natively"
	done
	assert_eq "OK " "$(probe root listxattr "$F/secretdir")" "the symlink's target got no xattr"
	assert_eq "OK root:root mode=755" "$(probe root stat "$F/secretdir")" "nor a new owner"
}

# A directory of the subdir view, with a process inside it, is moved out of the subtree through
# the full view, back and forth; the process keeps reading "..", its own directory and names
# beside it. Natively (bind mount) ".." of a directory moved out of the mount's subtree is
# ENOENT; the view's ".." stays the view root. Neither may show anything of the backing outside
# sub but the moved directory itself.
# _walker DIR SECONDS READY STOP: loops inside DIR (READY made once inside) until STOP exists;
# prints what it saw. Exits 3 if SECONDS pass first: then the walk did not span the moves.
_walker() {
	"$PY" - "$1" "$2" "$3" "$4" <<'EOF'
import os, sys, time
d, t, stop = sys.argv[1], float(sys.argv[2]), sys.argv[4]
os.chdir(d)
open(sys.argv[3], "w").close()
seen = set()
end = time.time() + t
while not os.path.exists(stop):
    if time.time() > end:
        sys.exit(3)
    for p in ("..", "../..", ".", "../secretdir", "../outside", "../../secretdir"):
        try:
            seen.update(os.listdir(p) if os.path.isdir(p) else [open(p).read().strip()])
        except OSError as e:
            seen.add("E:" + os.strerror(e.errno))
print("\n".join(sorted(seen)))
EOF
}

test_security_subdir_dir_moved_out_while_inside() {
	sec_subdir_setup
	mkdir "$F/sub/room"
	echo mine >"$F/sub/room/m"
	local out i wpid wrc moved=0
	: >"$T_DIR/mv.err"
	_walker "$S/room" 60 "$T_DIR/walk.ready" "$T_DIR/walk.stop" >"$T_DIR/walk.out" &
	wpid=$!
	wait_until 10 test -e "$T_DIR/walk.ready" || die "the walker did not get inside"
	for ((i = 0; i < 150; i++)); do
		mv "$F/sub/room" "$F/room_out" 2>>"$T_DIR/mv.err" && ((++moved))
		mv "$F/room_out" "$F/sub/room" 2>>"$T_DIR/mv.err" && ((++moved))
	done
	touch "$T_DIR/walk.stop"
	assert_eq 300 "$moved" "moved out of sub and back 150 times (mv: $(_short "$T_DIR/mv.err"))"
	wait "$wpid"
	wrc=$?
	assert_eq 0 "$wrc" "the walker was inside all through the moves"
	out=$(cat "$T_DIR/walk.out")
	log "the walker saw: $(tr '\n' ' ' <"$T_DIR/walk.out")"
	# a whole line (a name the walker listed), not the m of "room"
	assert_eq m "$(grep -xF m <<<"$out")" "the walker saw its own directory"
	assert_not_contains "$out" "OUTSIDE-SECRET" "no content from outside sub"
	assert_not_contains "$out" "secretdir" "no names from outside sub"
	assert_not_contains "$out" "$(basename "$T_DIR")" "no names above the mountpoint's parent"
	assert_ok test -d "$F/sub/room"
}

# A directory and a symlink to outside the subtree are swapped with RENAME_EXCHANGE through the
# full view while the subdir view walks into, lists, reads and creates in that directory: the
# daemon never follows the symlink, so nothing lands in or comes from outside sub.
test_security_symlink_swapped_for_directory() {
	sec_subdir_setup
	mkdir -m 0777 "$F/sub/x"
	echo payload >"$F/sub/x/file"
	ln -s ../secretdir "$F/sub/y"
	local before wpid spid out created
	before=$(ls -A "$F/secretdir") || die "ls $F/secretdir"
	# prints how many exchanges succeeded, then the errors of those that failed
	"$PY" - "$F/sub/x" "$F/sub/y" 5 >"$T_DIR/swapper.out" <<'EOF' &
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, t = sys.argv[1].encode(), sys.argv[2].encode(), float(sys.argv[3])
end, n, errs = time.time() + t, 0, set()
while time.time() < end:
    if libc.renameat2(-100, a, -100, b, 2) == 0:
        n += 1
    else:
        errs.add(os.strerror(ctypes.get_errno()))
print(n, *sorted(errs))
EOF
	spid=$!
	as_user "$SFS_ALICE" "$PY" - "$S" 5 >"$T_DIR/swap.out" 2>&1 <<'EOF' &
import os, sys, time
s, t = sys.argv[1], float(sys.argv[2])
seen, n, created = set(), 0, 0
end = time.time() + t
while time.time() < end:
    n += 1
    for name in ("x", "y"):
        p = os.path.join(s, name)
        try:
            seen.update(os.listdir(p))
        except OSError as e:
            seen.add("E:" + os.strerror(e.errno))
        for f in ("file", "s"):
            try:
                with open(os.path.join(p, f)) as fh:
                    seen.add(fh.read().strip())
            except OSError:
                pass
        try:
            fd = os.open(os.path.join(p, "new%d" % n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.close(fd)
            created += 1
        except OSError:
            pass
        try:
            fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
            seen.update(os.listdir(fd))
            os.close(fd)
        except OSError:
            pass
print("\n".join(sorted(seen)))
print("#created %d" % created)
EOF
	wpid=$!
	wait "$wpid"
	assert_eq 0 "$?" "the walker ran to its end"
	wait "$spid"
	assert_eq 0 "$?" "the swapper ran to its end"
	log "swaps (and errors): $(cat "$T_DIR/swapper.out")"
	assert_gt "$(awk '{ print $1 }' "$T_DIR/swapper.out")" 0 "x and y were exchanged while the walker ran"
	created=$(sed -n 's/^#created //p' "$T_DIR/swap.out")
	out=$(grep -v '^#created ' "$T_DIR/swap.out")
	log "the walker saw: $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
	assert_gt "$created" 0 "the walker created files while x and y were exchanged"
	# every file it made is in the real directory, whichever of x and y that is now
	assert_eq "$created" "$(find "$F/sub" -name 'new*' -type f | wc -l)" "what the walker created is in sub"
	assert_eq payload "$(grep -xF payload <<<"$out")" "the walker reached the real directory"
	assert_not_contains "$out" OUTSIDE-SECRET "no content from behind the symlink"
	assert_eq "$before" "$(ls -A "$F/secretdir")" "nothing created behind the symlink"
	assert_ok find "$T_DIR" -maxdepth 2 -name 'new*' -not -path "$F/*" -not -path "$S/*"
	assert_eq "" "$(cat "$T_DIR/.out")" "nothing created in the daemon's own namespace"
	assert_ok test ! -e "$T_DIR/secretdir"
}

# ---- a name made between the kernel's lookup and its create --------------------------------

# open(O_CREAT) without O_EXCL in one view races the creation of that name through the other:
# root's 0600 file, or a FIFO the attacker makes itself. The kernel then checked no permission
# on what the daemon finds: it must not be opened with the noacl view's retry (root's file), nor
# at all if it is not a regular file (a FIFO opened for reading blocks a worker for good, and
# the view's other requests with it).
# _race_creator DIR SECONDS file|fifo: makes and removes x (a 0600 file) or y (a FIFO); prints
# how many it made.
_race_creator() {
	"$PY" - "$1" "$2" "$3" <<'EOF'
import os, sys, time
d, t, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3]
end, made = time.time() + t, 0
p = os.path.join(d, "x" if kind == "file" else "y")
while time.time() < end:
    try:
        if kind == "fifo":
            os.mkfifo(p, 0o666)
        else:
            fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.write(fd, b"SECRET")
            os.close(fd)
        made += 1
    except OSError:
        pass
    try:
        os.unlink(p)
    except OSError:
        pass
print(made)
EOF
}

_race_opener() { # DIR SECONDS: open(O_CREAT|O_RDONLY) of x and y, reading what it gets
	"$PY" - "$1" "$2" <<'EOF'
import os, sys, time
d, t = sys.argv[1], float(sys.argv[2])
end, seen = time.time() + t, set()
while time.time() < end:
    for name in ("x", "y"):
        try:
            fd = os.open(os.path.join(d, name), os.O_CREAT | os.O_RDONLY | os.O_NONBLOCK, 0o644)
            seen.add("read:" + os.read(fd, 16).decode(errors="replace"))
            os.close(fd)
        except OSError as e:
            seen.add(os.strerror(e.errno))
print(" ".join(sorted(seen)))
EOF
}

test_security_create_races_another_view() {
	noacl_and_acl_views race
	mkdir -m 0777 "$B/pub"
	chmod 0777 "$B/pub"
	local V p pids=() i
	_race_creator "$B/pub" 5 file >"$T_DIR/made.file" &
	pids+=($!)
	for V in "$A" "$B"; do
		as_user "$SFS_ALICE" bash -c "$(declare -f _race_creator); PY=$PY; _race_creator '$V/pub' 5 fifo" \
			>"$T_DIR/made.fifo.${V##*/}" &
		pids+=($!)
	done
	for V in "$A" "$B" "$A"; do
		as_user "$SFS_ALICE" bash -c "$(declare -f _race_opener); PY=$PY; _race_opener '$V/pub' 5" \
			>>"$T_DIR/race.out" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		assert_ok wait_until 20 pid_gone "$p"
	done
	wait
	log "openers saw: $(tr '\n' '|' <"$T_DIR/race.out")"
	# the races happened: each creator made its file or FIFO over and over while the openers ran
	assert_gt "$(cat "$T_DIR/made.file")" 0 "root made its 0600 file in $B/pub"
	for V in "$A" "$B"; do
		assert_gt "$(cat "$T_DIR/made.fifo.${V##*/}")" 0 "alice made her FIFO in $V/pub"
	done
	assert_not_contains "$(cat "$T_DIR/race.out")" SECRET "root's 0600 file never read by the racing caller"
	assert_eq 3 "$(grep -c . "$T_DIR/race.out")" "every opener finished"
	for V in "$A" "$B"; do
		assert_ok timeout 5 ls "$V/pub"
		assert_ok timeout 5 sh -c "echo ok > '$V/pub/after' && cat '$V/pub/after'"
	done
}

# fs.protected_regular at a value for this test, the old value back in every exit path.
_protected_regular() {
	SEC_OLD_REGULAR=$(sysctl -n fs.protected_regular) || die "reading fs.protected_regular"
	t_on_exit _protected_regular_restore
	sysctl -q -w fs.protected_regular="$1" || die "setting fs.protected_regular"
}

_protected_regular_restore() {
	[[ -n ${SEC_OLD_REGULAR:-} ]] && sysctl -q -w fs.protected_regular="$SEC_OLD_REGULAR"
}

# The VFS refuses an O_CREAT open that finds another user's file in a sticky world-writable
# directory (fs.protected_regular): the file an attacker made first. A view's kernel checks it
# when its lookup finds the file, but when the file appeared after the lookup (another view, or
# here a native mount sharing the backing: share=existing, no invalidation, 0.5 s caches), the
# open reaches the daemon as a create of a free name, and the kernel checks only after the
# reply. Native ext4 refuses before it truncates anything, and so must the view.
test_security_protected_regular_certain_race() {
	ensure_users
	new_source pr
	local N=$T_DIR/native A=$T_DIR/a level d want
	mkdir -p "$N"
	mount -o acl "$LOOP" "$N" || die "native mount"
	view acl,share=existing "$LOOP" "$A"
	_protected_regular 2
	mkdir "$N/world" "$N/group"
	chmod 1777 "$N/world"
	chgrp "$SFS_GRP" "$N/group" && chmod 1770 "$N/group" || die "the group's sticky directory"
	for level in 0 1 2; do
		sysctl -q -w fs.protected_regular=$level || die "setting fs.protected_regular"
		for d in world group; do
			want=$(_alice_file_opened_by_root "$N/$d" "$N/$d" n$level)
			assert_eq "$want" "$(_alice_file_opened_by_root "$A/$d" "$N/$d" v$level)" \
				"protected_regular=$level, $d-writable sticky directory: as native ($want)"
		done
	done
	assert_eq "refused SECRET" "$(_alice_file_opened_by_root "$N/world" "$N/world" again)" \
		"the case refuses natively what it should"
}

# _alice_file_opened_by_root DIR NATIVE_DIR NAME: root's kernel learns that DIR/NAME is absent,
# alice makes it natively, root opens it O_CREAT|O_TRUNC: "opened" or "refused", then its data.
_alice_file_opened_by_root() {
	local how=opened
	stat "$1/$3" >/dev/null 2>&1 && die "$1/$3 exists"
	as_user "$SFS_ALICE" sh -c "echo SECRET > '$2/$3'" || die "alice's file"
	"$PY" -c "import os; os.open('$1/$3', os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o644)" \
		2>/dev/null || how=refused
	echo "$how $(cat "$2/$3")"
}

test_security_noacl_rename_retry_checks_what_is_there_now() {
	# A noacl view repeats a call the backing's ACLs refused with DAC capabilities, because
	# the kernel has already allowed it by mode bits; but the kernel checked the objects it
	# had cached. Here the backing is shared with a native mount (share=existing: no
	# invalidation, 0.5 s caches), which swaps bob's directory in under a name alice's kernel
	# still knows as her own. Moving it to another parent needs write access to it, which
	# alice lacks: native ext4 refuses, and so must the view.
	ensure_users
	new_source rr
	local N=$T_DIR/native A=$T_DIR/a
	mkdir -p "$N"
	mount -o acl "$LOOP" "$N" || die "native mount"
	view noacl,share=existing "$LOOP" "$A"
	mkdir -m 0777 "$N/p1" "$N/p2" "$N/p3"
	as_user "$SFS_ALICE" mkdir "$N/p1/src" "$N/p1/mine"
	as_user "$SFS_BOB" mkdir -m 0755 "$N/p1/bobs"
	# the retry's own purpose: an ACL entry the view does not honour (alice: r-x on p3)
	setfacl -m "u:$SFS_ALICE:r-x" "$N/p3" || die "setfacl"
	assert_ok as_user "$SFS_ALICE" mv "$A/p1/mine" "$A/p3/"
	assert_eq "$(id -u "$SFS_ALICE")" "$(stat -c %u "$N/p3/mine")" "alice's move allowed by mode bits landed"
	# the race, made certain: alice's kernel caches p1/src, then the native side swaps
	assert_ok "$PY" - "$N" "$A" "$SFS_ALICE" <<'EOF2'
import os, pwd, subprocess, sys
n, a, alice = sys.argv[1:4]
pw = pwd.getpwnam(alice)
def as_alice(*cmd):
    return subprocess.run(["setpriv", "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid),
                           "--init-groups", "--"]
                          + list(cmd), cwd="/", capture_output=True, text=True)
r = as_alice("stat", "-c", "%U", a + "/p1/src")
assert r.returncode == 0 and r.stdout.strip() == alice, r
os.rename(n + "/p1/src", n + "/p1/was-src")
os.rename(n + "/p1/bobs", n + "/p1/src")
r = as_alice("mv", a + "/p1/src", a + "/p2/moved")
print("mv:", r.returncode, r.stderr.strip())
assert r.returncode != 0 and "Permission denied" in r.stderr, r
assert os.path.isdir(n + "/p1/src") and not os.path.exists(n + "/p2/moved"), "bob's directory moved"
EOF2
	# what native ext4 answers for the same call
	assert_fails_with "Permission denied" as_user "$SFS_ALICE" mv "$N/p1/src" "$N/p2/moved"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
