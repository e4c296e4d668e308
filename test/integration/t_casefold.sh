#!/bin/bash
# Casefold views (contract §5.3): Unicode case-insensitive, case-preserving names through every
# call that takes a name, collisions, strict mode, FS_CASEFOLD_FL, and no stale spelling in
# any view's cache. Each test has a casefold view C and a nocasefold view N of one image.
# transport-independent: names are folded by the daemon's name layer above the transport; t_coherence carries the notifications in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cf_setup() { # [CASEFOLD-OPTION]
	new_source cf
	C=$T_DIR/c
	N=$T_DIR/n
	view "${1:-casefold}" "$LOOP" "$C"
	view nocasefold "$LOOP" "$N"
}

names_in() { ls -A "$1" | grep -v '^lost+found$' | tr '\n' ' ' | sed 's/ $//'; }

test_casefold_lookup_any_spelling() {
	cf_setup
	printf s >"$C/Straße"
	assert_eq s "$(cat "$C/STRASSE")" "ß matches SS"
	assert_eq s "$(cat "$C/strasse")" "ß matches ss"
	assert_eq s "$(cat "$C/STRAẞE")" "ß matches capital ẞ"
	printf k >"$N/kelvin"
	assert_eq k "$(cat "$C/$(printf '\u212a')ELVIN")" "Kelvin sign K matches k"
	printf e >"$N/$(printf 'caf\u00e9')"
	assert_eq e "$(cat "$C/$(printf 'CAFE\u0301')")" "NFD spelling matches NFC name"
	printf f >"$N/file"
	assert_eq f "$(cat "$C/$(printf '\ufb01le')")" "ligature fi matches fi"
	assert_eq f "$(cat "$C/$(printf 'fi\u200dle')")" "a zero-width joiner is ignored"
	printf i >"$N/istanbul"
	assert_fails_with "No such file or directory" cat "$C/$(printf '\u0130STANBUL')"
	printf I >"$N/$(printf 'i\u0307stanbul')"
	assert_eq I "$(cat "$C/$(printf '\u0130STANBUL')")" "dotted I folds to i + combining dot, not to i"
	assert_fails_with "No such file or directory" cat "$N/STRASSE"
}

test_casefold_case_preserving() {
	cf_setup
	touch "$C/MixedCase.TXT"
	mkdir "$C/SubDir"
	assert_eq "MixedCase.TXT SubDir" "$(names_in "$C")" "listed as first given"
	assert_eq "MixedCase.TXT SubDir" "$(names_in "$N")" "stored as first given"
	touch "$C/mixedcase.txt"
	assert_eq "MixedCase.TXT SubDir" "$(names_in "$N")" "touch of another spelling makes no new name"
	assert_ok touch "$C/subdir/inner"
	assert_eq inner "$(names_in "$N/SubDir")" "a path through another spelling"
	assert_eq "$(stat -c %i "$C/SubDir")" "$(stat -c %i "$C/SUBDIR")" "one inode under both spellings"
}

test_casefold_creation_under_any_spelling_exists() {
	cf_setup
	echo x >"$C/foo"
	local py='import os,sys
try:
    os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)); print("created")
except FileExistsError: print("EEXIST")'
	assert_eq EEXIST "$("$PY" -c "$py" "$C/FOO")" "O_EXCL through another spelling"
	assert_fails_with "File exists" mkdir "$C/Foo"
	assert_fails_with "File exists" ln -s target "$C/fOO"
	assert_fails_with "File exists" mkfifo "$C/FoO"
	touch "$C/other"
	assert_fails_with "File exists" ln "$C/other" "$C/FOO"
	assert_eq "foo other" "$(names_in "$N")" "nothing was created"
	assert_eq x "$(cat "$C/FOO")" "O_CREAT without O_EXCL opens the existing file"
}

test_casefold_unlink_and_rename_through_other_spellings() {
	cf_setup
	touch "$C/alpha" "$C/beta"
	mkdir "$C/gamma"
	assert_ok rm "$C/ALPHA"
	assert_ok rmdir "$C/GAMMA"
	assert_eq beta "$(names_in "$N")" "removed through other spellings"
	assert_ok mv "$C/BETA" "$C/Delta"
	assert_eq Delta "$(names_in "$N")" "renamed through another spelling"
	echo a >"$C/a1"
	echo b >"$C/B2"
	assert_ok mv "$C/a1" "$C/b2"
	assert_eq "B2 Delta" "$(names_in "$N")" "rename onto a case variant replaces that entry"
	assert_eq a "$(cat "$N/B2")" "with the moved file"
}

test_casefold_case_only_rename_keeps_spelling() {
	# doc/kernel.md §5 (the contract corrects the issue): the kernel sees one inode and never asks
	cf_setup
	touch "$C/foo"
	mkdir "$C/Dir"
	assert_fails_with "are the same file" mv "$C/foo" "$C/FOO"
	assert_ok "$PY" -c "import os,sys; os.rename(sys.argv[1], sys.argv[2])" "$C/foo" "$C/FOO"
	assert_eq "Dir foo" "$(names_in "$N")" "the spelling stays, as on casefold ext4"
}

test_casefold_attributes_xattrs_acls_through_any_spelling() {
	cf_setup
	touch "$C/doc"
	assert_ok chmod 600 "$C/DOC"
	assert_ok setfattr -n user.k -v v "$C/Doc"
	assert_ok setfacl -m "u:$SFS_ALICE:r" "$C/dOC"
	assert_eq 640 "$(stat -c %a "$N/doc")" "chmod and the ACL mask through other spellings"
	assert_eq v "$(getfattr --only-values -n user.k "$N/doc" 2>/dev/null)" "xattr through another spelling"
	assert_contains "$(getfacl -c "$N/doc" 2>/dev/null)" "user:$SFS_ALICE:r--" "ACL through another spelling"
	assert_ok touch -d @86400 "$C/DOC"
	assert_eq 86400 "$(stat -c %Y "$N/doc")" "utimes through another spelling"
}

test_casefold_collisions() {
	cf_setup
	echo lower >"$N/foo"
	echo upper >"$N/FOO"
	echo mixed >"$N/Foo"
	assert_eq FOO "$(names_in "$C")" "readdir lists the class once, by its bytewise-smallest member"
	assert_eq lower "$(cat "$C/foo")" "the exact spelling when it exists"
	assert_eq mixed "$(cat "$C/Foo")" "the exact spelling when it exists"
	assert_eq upper "$(cat "$C/fOO")" "otherwise the bytewise-smallest member"
	assert_eq 2 "$(daemon_field "$C" .casefold_collisions)" "status counts the names hidden"
	rm "$N/FOO"
	assert_eq Foo "$(names_in "$C")" "the next smallest member represents the class"
	assert_eq mixed "$(cat "$C/fOO")" "and lookups follow"
	assert_eq 1 "$(daemon_field "$C" .casefold_collisions)" "count follows"
}

test_casefold_invalid_utf8() {
	cf_setup
	local bad=$'caf\xe9' BAD=$'CAF\xe9'
	assert_ok touch "$C/$bad"
	assert_ok test -e "$N/$bad"
	assert_fails_with "No such file or directory" stat "$C/$BAD"
	assert_ok test -e "$C/$bad"
}

test_casefold_strict_refuses_invalid_utf8() {
	cf_setup casefold=strict
	assert_eq strict "$(view_opt "$C" casefold)" "status: casefold strict"
	assert_fails_with "Invalid argument" touch "$C/"$'caf\xe9'
	assert_fails_with "Invalid argument" mkdir "$C/"$'\xff'
	assert_ok touch "$C/$(printf 'caf\u00e9')"
	assert_ok touch "$N/"$'old\xff'
	assert_ok test -e "$C/"$'old\xff'
}

# flag_of PATH LETTER: "set" or "unset" as the flags field of lsattr -d shows LETTER (the field
# only: the path after it may hold any letter); nothing if lsattr fails.
flag_of() {
	local f
	f=$(lsattr -d "$1") || return 1
	f=${f%% *}
	[[ $f =~ ^[-a-zA-Z]+$ ]] || return 1
	if [[ $f == *"$2"* ]]; then echo set; else echo unset; fi
}

test_casefold_flag_for_wine() {
	cf_setup
	mkdir "$C/d"
	assert_eq set "$(flag_of "$C/d" F)" "casefold view: FS_CASEFOLD_FL"
	assert_eq unset "$(flag_of "$N/d" F)" "nocasefold view: no flag"
	assert_eq on "$(view_opt "$C" casefold)" "status: casefold on"
	assert_eq off "$(view_opt "$N" casefold)" "status: casefold off"
}

test_casefold_no_stale_spelling() {
	cf_setup
	touch "$C/foo"
	assert_ok stat "$C/FOO"
	assert_ok rm "$C/foo"
	assert_fails_with "No such file or directory" stat "$C/FOO"
	assert_ok sh -c "echo new > '$C/FOO'"
	assert_eq FOO "$(names_in "$N")" "a write through the old alias made a new file"
	assert_fails_with "No such file or directory" stat "$C/bar"
	assert_fails_with "No such file or directory" stat "$C/BAR"
	touch "$N/Bar"
	assert_ok stat "$C/BAR"
	assert_ok stat "$C/bar"
	rm "$N/Bar"
	assert_fails_with "No such file or directory" stat "$C/BAR"
	touch "$C/baz"
	assert_ok stat "$C/baz"
	assert_ok rm "$C/BAZ"
	assert_fails_with "No such file or directory" stat "$C/baz"
}

# The file a create made is the creator's open file: the view must not drop its dentry behind
# it (the kernel then reports the open file deleted: "(deleted)" in /proc/PID/fd, ENOENT from
# getcwd in a directory just made).
test_casefold_made_entry_stays_the_creators() {
	cf_setup
	local py='import os,sys,time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
os.mkdir(sys.argv[2]); os.chdir(sys.argv[2])
time.sleep(0.3)
print(os.readlink("/proc/self/fd/%d" % fd)); print(os.getcwd())'
	assert_eq "$C/made
$C/dir" "$("$PY" -c "$py" "$C/made" "$C/dir" 2>&1)" "the made file and directory, as their creator holds them"
	assert_eq "$N/other
$N/dir2" "$("$PY" -c "$py" "$N/other" "$N/dir2" 2>&1)" "the same in the nocasefold view"
}

# A dentry the kernel made positive itself (a create or rename over the spelling it had looked
# up as absent) is the view's own and stays: overlayfs holds its upper directory's dentries and
# fails with "failed to lock workdir+upperdir" (EIO) when one is dropped (xfstests generic/631).
test_casefold_overlay_on_a_view_copies_up() {
	cf_setup
	local m=$C/merged i d failed=0
	mkdir "$C/lower" "$m"
	for d in 1 2 3 4 5; do
		mkdir "$C/lower/etc$d"
		echo "salts$d" >"$C/lower/etc$d/access.conf"
	done
	for ((i = 1; i <= 12; i++)); do
		mkdir "$C/upper$i" "$C/work$i"
		if ! mount -t overlay sfs-cf -o "lowerdir=$C/lower,upperdir=$C/upper$i,workdir=$C/work$i,index=off" "$m"; then
			((failed += 10))
			continue
		fi
		for d in 1 2 3 4 5; do
			mv "$m/etc$d/access.conf" "$m/etc$d/access.conf.bak" && touch "$m/etc$d/access.conf" ||
				((failed++))
		done
		umount "$m" || die "umount of the overlay"
		for d in 1 2 3 4 5; do
			[[ $(names_in "$N/upper$i/etc$d") == "access.conf access.conf.bak" &&
				$(cat "$N/upper$i/etc$d/access.conf.bak") == "salts$d" ]] || ((failed++))
		done
	done
	assert_eq 0 "$failed" "mounts, copy-ups and upper layers that went wrong, of 120"
}

test_casefold_and_nocasefold_views_alternate() {
	cf_setup
	local i
	for i in 1 2 3; do
		touch "$C/File$i"
		assert_ok test -e "$N/File$i"
		assert_fails_with "No such file or directory" stat "$N/file$i"
		assert_ok test -e "$C/FILE$i"
		mv "$N/File$i" "$N/FILE$i"
		assert_ok test -e "$C/file$i"
		assert_eq "FILE$i" "$(ls "$C" | grep -i "^file$i\$")" "C lists the new spelling"
		rm "$C/file$i"
		assert_fails_with "No such file or directory" stat "$N/FILE$i"
	done
}

# The admin state /.strictfs (contract §3.5) is one name as each view matches names: in a
# casefold view every spelling that folds to it is it (invisible, and nothing is made under
# it), in a nocasefold view only the exact bytes are.
test_casefold_admin_state_reserved_in_every_spelling() {
	cf_setup
	"$STRICTFS" quota set "$LOOP" -u root --bhard 100M || die "strictfs quota set (makes /.strictfs)"
	local sp ign
	ign=$(printf '.strict\u200dfs')
	touch "$C/plain" || die "touch"
	for sp in .strictfs .STRICTFS .StrictFS "$ign"; do
		assert_fails_with "No such file or directory" stat "$C/$sp"
		assert_fails_with "Operation not permitted" mkdir "$C/$sp"
		assert_fails_with "Operation not permitted" touch "$C/$sp"
		assert_fails_with "Operation not permitted" ln -s plain "$C/$sp"
		assert_fails_with "Operation not permitted" ln "$C/plain" "$C/$sp"
		assert_fails_with "Operation not permitted" mv "$C/plain" "$C/$sp"
	done
	assert_eq plain "$(names_in "$C")" "casefold view: no spelling of .strictfs was made or listed"
	assert_eq plain "$(names_in "$N")" "nor on the backing"
	assert_fails_with "No such file or directory" stat "$N/.strictfs"
	assert_fails_with "Operation not permitted" mkdir "$N/.strictfs"
	# nocasefold: another spelling is another name, as on ext4 without casefold
	assert_ok mkdir "$N/.STRICTFS"
	assert_eq ".STRICTFS plain" "$(names_in "$N")" "nocasefold view: .STRICTFS is a name of its own"
	assert_eq plain "$(names_in "$C")" "casefold view: a spelling of the admin state, not listed"
	assert_fails_with "No such file or directory" stat "$C/.STRICTFS"
	assert_fails_with "No such file or directory" stat "$C/.strictfs"
	assert_ok "$STRICTFS" quota report "$LOOP"
	assert_contains "$(cat "$T_DIR/.out")" root "the daemon's state is still read"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
