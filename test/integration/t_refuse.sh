#!/bin/bash
# Refusals (contract §2, §3.3, §4.3, §5): exit 1, one line "strictfs: OBJECT: reason" naming what is
# at fault, and nothing left mounted, started or attached; a running daemon is left as it was.
# transport-independent: a refusal is decided before any view serves a request
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Options refused on a fresh source: "OPTION|REGEX" where the one stderr line must match REGEX:
# the option comes first, as contract §2 has it ("strictfs: OPTION: reason").
REFUSED_OPTIONS=(
	"casefold=bogus|^strictfs: casefold=bogus: "
	"quota,cache=writeback|^strictfs: cache=writeback: cannot be combined with quota"
	"usrquota,share=existing|^strictfs: usrquota: cannot be enforced with share=existing"
	"grpquota,cache=writeback|^strictfs: cache=writeback: "
	"size=1Q|^strictfs: size=1Q: not a size"
	"inodes=x|^strictfs: inodes=x: not a count"
	"bogus|^strictfs: bogus: "
	"acl,bogus,user_xattr|^strictfs: bogus: "
	"noacl,quota,cache=writeback|^strictfs: cache=writeback: "
	"subdir=|^strictfs: subdir=?: "
	"commit=abc|^strictfs: commit(=abc)?: "
	"cache=foo|^strictfs: cache(=foo)?: "
	"share=sometimes|^strictfs: share(=sometimes)?: "
	"data=bogus|^strictfs: data(=bogus)?: "
	"errors=bogus|^strictfs: errors(=bogus)?: "
	"uid=1000|^strictfs: uid(=1000)?: "
	"ro=yes|^strictfs: ro(=yes)?: "
	# a loop device has no DAX: ext4 refuses it, and the line names the option, not the device
	"dax|^strictfs: dax: /dev/loop[0-9]+ does not support DAX"
	"dax=always|^strictfs: dax=always: /dev/loop[0-9]+ does not support DAX"
)

_refuse_option() { # OPTION REGEX
	new_source ref
	mkdir "$T_DIR/v"
	assert_refused_re "$2" "$STRICTFS" mount -o "$1" "$LOOP" "$T_DIR/v"
	assert_ok not_mounted "$T_DIR/v"
	assert_eq "" "$(daemons_for_source "$LOOP")" "no daemon for $LOOP"
}

for _spec in "${REFUSED_OPTIONS[@]}"; do
	_name=$(printf '%s' "${_spec%%|*}" | tr -c 'a-zA-Z0-9' '_')
	eval "test_refuse_option_${_name}() { _refuse_option '${_spec%%|*}' '${_spec#*|}'; }"
done
unset _spec _name

test_refuse_option_on_image_source_leaves_no_loop() {
	mkimg img
	IMG=$REPLY
	mkdir "$T_DIR/v"
	# refused by the daemon, after it attached the image: the loop device goes with it
	assert_refused share=existing "$STRICTFS" mount -o share=existing "$IMG" "$T_DIR/v"
	assert_ok no_loop_for "$IMG"
	assert_refused bogus "$STRICTFS" mount -o bogus "$IMG" "$T_DIR/v"
	assert_ok no_loop_for "$IMG"
}

test_refuse_option_on_running_daemon_changes_nothing() {
	new_source ref
	local V=$T_DIR/v W=$T_DIR/w pid
	view noacl "$LOOP" "$V"
	pid=$(view_pid "$V")
	mkdir "$W"
	assert_refused casefold=bogus "$STRICTFS" mount -o casefold=bogus "$LOOP" "$W"
	assert_refused cache=writeback "$STRICTFS" mount -o quota,cache=writeback "$LOOP" "$W"
	assert_refused bogus "$STRICTFS" mount -o bogus "$LOOP" "$W"
	assert_eq "$V" "$(daemon_views "$pid")" "daemon still has exactly its view"
	assert_eq false "$(view_opt "$V" acl)" "view options unchanged"
	assert_ok touch "$V/still-works"
}

test_refuse_source_missing() {
	mkdir "$T_DIR/v"
	assert_refused "$T_DIR/nope.img" "$STRICTFS" mount "$T_DIR/nope.img" "$T_DIR/v"
}

test_refuse_source_directory() {
	mkdir "$T_DIR/dir" "$T_DIR/v"
	assert_refused "$T_DIR/dir" "$STRICTFS" mount "$T_DIR/dir" "$T_DIR/v"
}

test_refuse_source_not_ext4() {
	truncate -s 64M "$T_DIR/junk.img"
	mkdir "$T_DIR/v"
	assert_refused_re "$T_DIR/junk\\.img|/dev/loop[0-9]+" "$STRICTFS" mount "$T_DIR/junk.img" "$T_DIR/v"
	assert_ok no_loop_for "$T_DIR/junk.img"
	# another file system's image, not only an empty one (mkfs.vfat: dosfstools, scripts/deps)
	need mkfs.vfat -C "$T_DIR/vfat.img" 65536
	assert_refused_re "$T_DIR/vfat\\.img|/dev/loop[0-9]+" "$STRICTFS" mount "$T_DIR/vfat.img" "$T_DIR/v"
	assert_ok no_loop_for "$T_DIR/vfat.img"
}

test_refuse_source_char_device() {
	mkdir "$T_DIR/v"
	assert_refused /dev/null "$STRICTFS" mount /dev/null "$T_DIR/v"
}

test_refuse_mountpoint_missing() {
	new_source ref
	assert_refused "$T_DIR/nowhere" "$STRICTFS" mount "$LOOP" "$T_DIR/nowhere"
	assert_ok test ! -e "$T_DIR/nowhere"
}

test_refuse_mountpoint_is_a_file() {
	new_source ref
	touch "$T_DIR/file"
	assert_refused "$T_DIR/file" "$STRICTFS" mount "$LOOP" "$T_DIR/file"
}

test_refuse_superblock_option_mismatch() {
	new_source sb
	local V=$T_DIR/v W=$T_DIR/w pid
	view "" "$LOOP" "$V"
	pid=$(view_pid "$V")
	mkdir "$W"
	assert_refused data=journal "$STRICTFS" mount -o data=journal "$LOOP" "$W"
	assert_refused nodelalloc "$STRICTFS" mount -o nodelalloc "$LOOP" "$W"
	assert_refused commit=60 "$STRICTFS" mount -o commit=60 "$LOOP" "$W"
	assert_eq "$V" "$(daemon_views "$pid")" "daemon unchanged"
	assert_ok touch "$V/still-works"
}

test_refuse_superblock_option_other_value() {
	new_source sb
	local V=$T_DIR/v W=$T_DIR/w pid
	view data=journal,commit=30 "$LOOP" "$V"
	pid=$(view_pid "$V")
	mkdir "$W"
	assert_refused data=ordered "$STRICTFS" mount -o data=ordered "$LOOP" "$W"
	assert_contains "$(cat "$T_DIR/.err")" "journal" "message names the value in force"
	assert_refused commit=60 "$STRICTFS" mount -o commit=60 "$LOOP" "$W"
	assert_contains "$(cat "$T_DIR/.err")" "commit=30" "message names the value in force"
	assert_eq "$V" "$(daemon_views "$pid")" "daemon unchanged"
}

test_refuse_second_view_while_writeback() {
	new_source wb
	local V=$T_DIR/v W=$T_DIR/w pid
	view cache=writeback "$LOOP" "$V"
	pid=$(view_pid "$V")
	mkdir "$W"
	assert_refused cache=writeback "$STRICTFS" mount "$LOOP" "$W"
	assert_refused cache=writeback "$STRICTFS" mount -o cache=writeback "$LOOP" "$W"
	assert_refused cache=writeback "$STRICTFS" mount -o noacl,ro "$LOOP" "$W"
	assert_eq "$V" "$(daemon_views "$pid")" "daemon unchanged"
	assert_ok touch "$V/still-works"
}

test_refuse_writeback_with_other_views() {
	new_source wb
	local V=$T_DIR/v W=$T_DIR/w pid
	view "" "$LOOP" "$V"
	pid=$(view_pid "$V")
	mkdir "$W"
	assert_refused cache=writeback "$STRICTFS" mount -o cache=writeback "$LOOP" "$W"
	assert_eq "$V" "$(daemon_views "$pid")" "daemon unchanged"
}

test_usage_errors_exit_2() {
	assert_exit 2 "$STRICTFS"
	assert_exit 2 "$STRICTFS" frobnicate
	assert_exit 2 "$STRICTFS" mount
	assert_exit 2 "$STRICTFS" mount /dev/null
	assert_exit 2 "$STRICTFS" mount -o
	assert_exit 2 "$STRICTFS" umount
	assert_exit 2 "$STRICTFS" mount --no-such-flag /dev/null /mnt
	assert_exit 0 "$STRICTFS" --help
	assert_contains "$(cat "$T_DIR/.out")" mount "--help prints usage to stdout"
}

# Every error is one line of at most 512 bytes (contract §2): a newline or a control character
# in what the user gave is escaped, and a long argument (3,000 bytes of subdir=, 100 KB
# elsewhere) is cut in its middle, so the line still starts with the object and ends with the
# reason.
_line_bounded() { # MSG: the first line of $T_DIR/.err is at most 512 bytes
	local n
	n=$(head -n1 "$T_DIR/.err" | tr -d '\n' | wc -c)
	if ((n <= 512)); then ok "$1 ($n bytes)"; else fail "$1: $n bytes"; fi
}
_100k() { head -c "${2:-100000}" /dev/zero | tr '\0' "$1"; } # CHAR [N]: 100 KB (N bytes) of it
# the commands with a long argument made inside (the log shows the command)
_mount_long_subdir() { "$STRICTFS" mount -o "subdir=/$(_100k y 3000)" "$@"; }
_grace_100k() { "$STRICTFS" quota grace "$1" --blocks "$(_100k 9)"; }
_mount_100k_flag() { "$STRICTFS" mount "--$(_100k y)" "$@"; }
_100k_command() { "$STRICTFS" "$(_100k y)"; }

test_refuse_message_is_one_bounded_escaped_line() {
	new_source ref
	local V=$T_DIR/v
	mkdir "$V"
	assert_refused_re '^strictfs: subdir=/a\\nb: No such file or directory$' \
		"$STRICTFS" mount -o $'subdir=/a\nb' "$LOOP" "$V"
	assert_refused_re '^strictfs: bogus\\x1b\[31m\\t: unknown option$' \
		"$STRICTFS" mount -o $'bogus\e[31m\t' "$LOOP" "$V"
	assert_refused_re '^strictfs: subdir=/y+\.\.\.y+: File name too long$' \
		_mount_long_subdir "$LOOP" "$V"
	_line_bounded "a 3,000-byte subdir= is cut"
	assert_refused_re '^strictfs: --blocks=9+\.\.\.9+: not a duration' _grace_100k "$LOOP"
	_line_bounded "a 100 KB --blocks= is cut"
	assert_refused_re "^strictfs: $T_DIR/no\\\\nwhere: " "$STRICTFS" umount "$T_DIR/no"$'\n'where
	# usage errors: the message line and the hint, the first bounded
	assert_exit 2 _mount_100k_flag "$LOOP" "$V"
	assert_eq 2 "$(grep -c '' "$T_DIR/.err")" "a bad option: two lines (the error, the hint)"
	assert_contains "$(head -n1 "$T_DIR/.err")" "y...y" "the option is cut in its middle"
	assert_contains "$(head -n1 "$T_DIR/.err")" "y: bad option" "the reason is kept"
	_line_bounded "a 100 KB option name is cut"
	assert_exit 2 _100k_command
	assert_eq 2 "$(grep -c '' "$T_DIR/.err")" "an unknown command: two lines"
	_line_bounded "a 100 KB command is cut"
}

# A refused mount leaves no lock file in /run/strictfs (contract §2: nothing left behind), when
# the daemon it started refused (not ext4, share=existing with no native mount) or the view
# was refused by the daemon it started (subdir= missing); a source with a daemon keeps its own.
_lock_of() { # SOURCE: the source's lock file
	local s=$1
	if [[ -b $s ]]; then
		printf '/run/strictfs/b-%d-%d.lock' "0x$(stat -c %t "$s")" "0x$(stat -c %T "$s")"
	else
		printf '/run/strictfs/f-%s-%s.lock' "$(stat -c %d "$s")" "$(stat -c %i "$s")"
	fi
}

test_refuse_leaves_no_lock_file() {
	new_source ref
	local V=$T_DIR/v W=$T_DIR/w junk=$T_DIR/junk.img lock
	mkdir "$V" "$W"
	truncate -s 64M "$junk"
	assert_refused_re "$junk|/dev/loop[0-9]+" "$STRICTFS" mount "$junk" "$V"
	assert_ok test ! -e "$(_lock_of "$junk")"
	lock=$(_lock_of "$LOOP")
	assert_refused share=existing "$STRICTFS" mount -o share=existing "$LOOP" "$V"
	assert_ok test ! -e "$lock"
	assert_refused subdir=/nowhere "$STRICTFS" mount -o subdir=/nowhere "$LOOP" "$V"
	assert_ok test ! -e "$lock"
	assert_refused subdir=/nowhere "$STRICTFS" mount -o subdir=/nowhere "$IMG" "$V"
	assert_ok test ! -e "$(_lock_of "$IMG")"
	view "" "$LOOP" "$V"
	assert_ok test -e "$lock"
	assert_refused subdir=/nowhere "$STRICTFS" mount -o subdir=/nowhere "$LOOP" "$W"
	assert_ok test -e "$lock"
	assert_ok touch "$V/still-works"
	# the next mount after a removed lock file starts a daemon as before
	sfs_umount "$V" || die "umount"
	view "" "$LOOP" "$W"
	assert_ok touch "$W/works"
}

test_refuse_umount_of_non_view() {
	mkdir "$T_DIR/plain"
	assert_refused "$T_DIR/plain" "$STRICTFS" umount "$T_DIR/plain"
	assert_refused "$T_DIR/nowhere" "$STRICTFS" umount "$T_DIR/nowhere"
}

# A root that is not a mount point (a chroot): the daemon cannot make / private for the probe
# that reads the backing's options back, and says so rather than only that it failed. The chroot
# lives in a private mount namespace of its own, so its binds go with it. The directory of the
# binary under test ($STRICTFS: the ASan build under --asan) is bound at /sfsbin.
_in_chroot_that_is_no_mount_point() { # ROOT CMD...
	local root=$1 bin
	bin=$(dirname "$(readlink -f "$STRICTFS")")
	shift
	unshare -m --propagation private bash -c '
		root=$1 bin=$2
		shift 2
		mkdir -p "$root"/{usr,etc,dev,proc,sys,run,sfsbin} "$root/tmp/v"
		for d in usr etc dev sys; do mount --rbind "/$d" "$root/$d" || exit 9; done
		for l in bin sbin lib lib64; do [[ -L /$l ]] && ln -sfn "$(readlink "/$l")" "$root/$l"; done
		mount -t proc proc "$root/proc" && mount -t tmpfs tmpfs "$root/run" &&
			mount --bind "$bin" "$root/sfsbin" || exit 9
		exec chroot "$root" "$@"' _ "$root" "$bin" "$@"
}

test_refuse_in_a_root_that_is_not_a_mount_point() {
	new_source ref
	assert_refused "/ is not a mount point here (a chroot?)" \
		_in_chroot_that_is_no_mount_point "$T_DIR/root" "/sfsbin/${STRICTFS##*/}" mount -o acl "$LOOP" /tmp/v
	assert_contains "$(cat "$T_DIR/.err")" "strictfs: $LOOP: cannot read the backing's options back" \
		"the line names the source and what failed"
	assert_eq "" "$(daemons_for_source "$LOOP")" "no daemon for $LOOP"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
