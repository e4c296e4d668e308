#!/bin/bash
# statx through a view (contract §4.7): the birth time ext4 keeps, for files, directories and
# symbolic links, by name and by open file, as on native ext4, the same through every view of
# the source. A statx that asks for more than stat's fields reaches the daemon as FUSE_STATX,
# which libfuse 3.14 cannot dispatch and the transport carries (fuse_adapt.h), so this file runs
# in both passes.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FILEATTR_PY=$SFS_TEST_DIR/fileattr.py

test_statx_birth_time_as_on_native() {
	native_ref
	local REF2=$T_DIR/ref2 A=$T_DIR/a B=$T_DIR/b C=$T_DIR/c Q=$T_DIR/q native
	mkdir -p "$REF2"
	need mount --bind "$REF" "$REF2"
	new_source statx
	view acl "$LOOP" "$A"
	view noacl "$LOOP" "$B"
	view casefold "$LOOP" "$C"
	view usrquota "$LOOP" "$Q"
	native=$("$PY" "$FILEATTR_PY" statx "$REF" "$REF2" 2>&1)
	assert_contains "$native" "btime at the creation: True" "native ext4 keeps the birth time"
	assert_not_contains "$native" "False" "native: every line holds"
	mkdir "$A/ab"
	assert_eq "$native" "$("$PY" "$FILEATTR_PY" statx "$A/ab" "$B/ab" 2>&1)" \
		"asked through an acl view and a noacl view, as natively"
	mkdir "$A/ac"
	assert_eq "$native" "$("$PY" "$FILEATTR_PY" statx "$C/ac" "$A/ac" 2>&1)" \
		"through a casefold view"
	mkdir "$A/aq"
	assert_eq "$native" "$("$PY" "$FILEATTR_PY" statx "$Q/aq" "$B/aq" 2>&1)" \
		"through a quota view"
	assert_ne "-" "$(stat -c %w "$A/ab/born")" "stat(1) prints it"
	assert_eq "$(stat -c %W "$A/ab/born")" "$(stat -c %W "$C/AB/BORN")" "the same under another case"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
