#!/bin/bash
# fstab and boot (contract §2): several views of one source from /etc/fstab-style lines with
# mount -a, in file order, findmnt showing the source as named, umount -a -t fuse.strictfs, and
# the mount units systemd's fstab generator makes of such lines. mount(8) runs in a private
# mount namespace where /sbin holds the mount.strictfs under test (with_mount_helper).
# transport-independent: how mount(8), fstab and systemd make views, decided before any view serves a request
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

GENERATOR=/lib/systemd/system-generators/systemd-fstab-generator

# seeded_image: an image with /inner and /games/Save.dat; IMG, and LINK (a symlink to it).
seeded_image() {
	mkdir -p "$T_DIR/seed/inner" "$T_DIR/seed/games"
	echo saved >"$T_DIR/seed/games/Save.dat"
	mkimg fst -d "$T_DIR/seed"
	IMG=$REPLY
	LINK=$T_DIR/disk-link
	ln -s "$IMG" "$LINK"
}

# the fstab of the test: four views of one image, the second inside the first
write_fstab() {
	cat >"$T_DIR/fstab" <<EOF
# strictfs views of one image
$IMG $T_DIR/a strictfs noacl,nouser_xattr 0 0
$IMG $T_DIR/a/inner strictfs acl,user_xattr,subdir=/inner 0 0
$LINK $T_DIR/g strictfs casefold,ro,subdir=/games,x-systemd.requires-mounts-for=$T_DIR 0 0
$IMG $T_DIR/n strictfs nosuid,nodev,noexec,noatime,nofail 0 0
EOF
	mkdir -p "$T_DIR/a" "$T_DIR/g" "$T_DIR/n"
}

strictfs_targets() { # the views under T_DIR in mount order
	findmnt -rn -t fuse.strictfs -o TARGET | grep "^$T_DIR/" | tr '\n' ' '
}

test_fstab_mount_all_in_order() { with_mount_helper _fstab_order_body; }
_fstab_order_body() {
	local pid
	seeded_image
	write_fstab
	assert_ok mount -a -T "$T_DIR/fstab"
	# the second line mounts inside the first: only file order makes that work
	assert_eq "$T_DIR/a $T_DIR/a/inner $T_DIR/g $T_DIR/n " "$(strictfs_targets)" \
		"the views are mounted in fstab order"
	assert_eq "$IMG" "$(findmnt -n -o SOURCE "$T_DIR/a")" "findmnt: the source as named"
	assert_eq fuse.strictfs "$(findmnt -n -o FSTYPE "$T_DIR/a")" "findmnt: type fuse.strictfs"
	assert_eq "$IMG" "$(findmnt -n -o SOURCE "$T_DIR/a/inner")" "findmnt: the nested view's source"
	# mount(8) canonicalizes a path before it calls the helper; what it passes is shown
	assert_eq "$IMG" "$(findmnt -n -o SOURCE "$T_DIR/g")" "findmnt: a symlinked source, as mount(8) resolved it"
	pid=$(view_pid "$T_DIR/a")
	assert_eq "$T_DIR/a $T_DIR/a/inner $T_DIR/g $T_DIR/n" "$(daemon_views "$pid")" "one daemon serves the four views"
	assert_eq false "$(view_opt "$T_DIR/a" acl)" "line 1: noacl"
	assert_eq /inner "$(view_opt "$T_DIR/a/inner" subdir)" "line 2: subdir"
	assert_eq saved "$(cat "$T_DIR/g/SAVE.DAT" 2>&1)" "line 3: casefold, subdir"
	assert_ok has_mount_opt "$T_DIR/n" noexec
	echo x >"$T_DIR/a/inner/f"
	assert_ok setfattr -n user.x -v 1 "$T_DIR/a/inner/f"
	echo y >"$T_DIR/a/f0"
	assert_fails_with "Operation not supported" setfattr -n user.x -v 1 "$T_DIR/a/f0"
	# mount -a again: all mounted already, nothing changes
	assert_ok mount -a -T "$T_DIR/fstab"
	assert_eq "$T_DIR/a $T_DIR/a/inner $T_DIR/g $T_DIR/n " "$(strictfs_targets)" "a second mount -a adds nothing"

	# umount -a -t fuse.strictfs unmounts every view of this namespace (the copies of other
	# views this private namespace holds go too; their mounts outside it are untouched)
	assert_ok umount -a -t fuse.strictfs
	assert_eq "" "$(strictfs_targets)" "umount -a -t fuse.strictfs: no view left"
	assert_ok wait_daemon_gone "$pid" 10
	assert_ok wait_until 3 no_loop_for "$IMG"
}

test_fstab_refused_line() { with_mount_helper _fstab_refused_body; }
_fstab_refused_body() {
	# one line refused by name; mount -a mounts the others and reports the failure
	seeded_image
	printf '%s %s strictfs noacl 0 0\n%s %s strictfs casefold=bogus 0 0\n%s %s strictfs ro 0 0\n' \
		"$IMG" "$T_DIR/a" "$IMG" "$T_DIR/b" "$IMG" "$T_DIR/c" >"$T_DIR/fstab"
	mkdir -p "$T_DIR/a" "$T_DIR/b" "$T_DIR/c"
	# mount(8): 64, some mounts succeeded
	assert_exit 64 mount -a -T "$T_DIR/fstab"
	assert_contains "$(cat "$T_DIR/.err")" "strictfs: casefold=bogus: unknown value" "the refused line is named"
	assert_ok is_mounted "$T_DIR/a"
	assert_ok not_mounted "$T_DIR/b"
	assert_ok is_mounted "$T_DIR/c"
	assert_ok umount "$T_DIR/a" "$T_DIR/c"
}

test_fstab_systemd_generator() {
	[[ -x $GENERATOR ]] || die "systemd-fstab-generator not installed ($GENERATOR; scripts/deps installs systemd)"
	with_mount_helper _fstab_generator_body
}
_fstab_generator_body() {
	local out=$T_DIR/units unit u what where type opts n=0 pid
	seeded_image
	attach_loop "$IMG"
	LOOP=$REPLY
	local dev_unit
	dev_unit=$(systemd-escape -p --suffix=device "$LOOP")
	cat >"$T_DIR/fstab" <<EOF
$LOOP $T_DIR/a strictfs noacl,x-systemd.requires=$dev_unit 0 0
$LOOP $T_DIR/b strictfs acl,user_xattr,nofail 0 0
EOF
	mkdir -p "$T_DIR/a" "$T_DIR/b" "$out"
	assert_ok env SYSTEMD_FSTAB="$T_DIR/fstab" SYSTEMD_PROC_CMDLINE= SYSTEMD_LOG_LEVEL=warning \
		"$GENERATOR" "$out" "$out" "$out"
	unit=$out/$(systemd-escape -p --suffix=mount "$T_DIR/a")
	assert_ok test -f "$unit"
	assert_contains "$(cat "$unit")" "Type=strictfs" "unit A: Type=strictfs"
	assert_contains "$(cat "$unit")" "What=$LOOP" "unit A: What"
	assert_contains "$(cat "$unit")" "Requires=$dev_unit" "unit A: x-systemd.requires= gives Requires="
	assert_contains "$(cat "$unit")" "After=$dev_unit" "unit A: and After="
	assert_contains "$(cat "$unit")" "Before=local-fs.target" "unit A: before local-fs.target"
	assert_ok test -L "$out/local-fs.target.requires/${unit##*/}"
	assert_ok test -L "$out/local-fs.target.wants/$(systemd-escape -p --suffix=mount "$T_DIR/b")"
	if command -v systemd-analyze >/dev/null; then
		assert_ok timeout 60 systemd-analyze verify --man=no "$unit"
	fi
	# what systemd runs for each unit: mount WHAT WHERE -t TYPE -o OPTIONS
	for u in "$unit" "$out/$(systemd-escape -p --suffix=mount "$T_DIR/b")"; do
		what=$(sed -n 's/^What=//p' "$u")
		where=$(sed -n 's/^Where=//p' "$u")
		type=$(sed -n 's/^Type=//p' "$u")
		opts=$(sed -n 's/^Options=//p' "$u")
		assert_ok mount "$what" "$where" -t "$type" -o "$opts"
		n=$((n + 1))
	done
	assert_eq "$LOOP" "$(findmnt -n -o SOURCE "$T_DIR/a")" "the unit's view A"
	assert_eq "$LOOP" "$(findmnt -n -o SOURCE "$T_DIR/b")" "the unit's view B"
	pid=$(view_pid "$T_DIR/a")
	assert_eq false "$(view_opt "$T_DIR/a" acl)" "unit A's options"
	assert_eq true "$(view_opt "$T_DIR/b" acl)" "unit B's options"
	# what systemd runs to stop them
	assert_ok umount "$T_DIR/b"
	assert_ok umount "$T_DIR/a"
	assert_ok wait_daemon_gone "$pid" 10
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
