#!/bin/bash
# The administrator's side: meson install puts everything where util-linux users look for it,
# the man pages render without warnings and cover every command and view option, and the bash
# completion knows the commands, every option of -o, and the views to unmount.
# transport-independent: install, man pages and completion; no view serves a request
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MAN_PAGES=("$SFS_REPO/doc/strictfs.8" "$SFS_REPO/doc/mount.strictfs.8")
COMPLETION=$SFS_REPO/bash-completion/strictfs

# Options mount(8) or FUSE hand to every helper; strictfs accepts them, they are no view option.
NOT_VIEW_OPTIONS="_netdev allow_other auto comment default_permissions defaults group_id noauto nofail user_id"

known_options() { # the option names of the table in src/options.c, sorted
	sed -n -E 's/^\t(DEF|BOOL|VALUE|CHOICE|FLAG|NOFLAG|IGNORED|SB|SB_SET|FIXED_BOOL|FIXED_VALUE|FIXED_CHOICE)\("([^"]*)".*/\2/p
		s/^\tSB_FLAG\("([^"]*)", "([^"]*)".*/\1\n\2/p' "$SFS_REPO/src/options.c" | sort -u
}

test_admin_meson_install_layout() {
	local build dest=$T_DIR/dest prefix sbin
	build=$(dirname "$(readlink -f "$STRICTFS")")
	[[ -f $build/build.ninja ]] || die "STRICTFS is not in a meson build directory: $STRICTFS"
	assert_ok env DESTDIR="$dest" meson install -C "$build" --no-rebuild --quiet
	prefix=$(meson introspect "$build" --buildoptions | jq -r '.[] | select(.name == "prefix") | .value')
	sbin=$(meson introspect "$build" --buildoptions | jq -r '.[] | select(.name == "sbindir") | .value')
	assert_ok test -x "$dest$prefix/$sbin/strictfs"
	assert_ok test -x "$dest/sbin/mount.strictfs"
	assert_eq mount.strictfs "$(readlink "$dest/sbin/mount.fuse.strictfs")" "mount.fuse.strictfs links to the helper"
	assert_ok test -f "$dest$prefix/share/man/man8/strictfs.8"
	assert_ok test -f "$dest$prefix/share/man/man8/mount.strictfs.8"
	assert_ok test -f "$dest$prefix/share/bash-completion/completions/strictfs"
	assert_eq "" "$(find "$dest" -path '*/run*' -o -path '*/var/*' | head -n1)" "nothing installed under /run or /var"
	assert_eq "strictfs $(meson introspect "$build" --projectinfo | jq -r .version)" \
		"$("$dest$prefix/$sbin/strictfs" -V)" "the installed strictfs runs"
	# uninstall removes what install put there (meson's log holds the DESTDIR paths)
	assert_ok ninja -C "$build" uninstall
	assert_eq "" "$(find "$dest" ! -type d | head -n3)" "ninja uninstall left no file"
	# /run/strictfs is not installed: the first mount makes it (0700) if it is missing
	new_source inst
	view "" "$LOOP" "$T_DIR/v"
	assert_eq "700 root" "$(stat -c '%a %U' /run/strictfs)" "/run/strictfs made at run time, 0700"
	assert_ok sfs_umount "$T_DIR/v"
}

test_admin_man_pages_lint() {
	local page out
	for page in "${MAN_PAGES[@]}"; do
		out=$(groff -ww -z -man "$page" 2>&1)
		assert_eq "0:" "$?:$out" "groff -ww -z: no warnings in ${page##*/}"
		if command -v mandoc >/dev/null; then
			out=$(mandoc -T lint "$page" 2>&1)
			assert_eq "0:" "$?:$out" "mandoc -T lint: nothing to say about ${page##*/}"
		fi
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=all -l "$page" 2>&1 >/dev/null)
		assert_eq "" "$out" "man -l ${page##*/} renders without warnings"
	done
}

# rendered PAGE: the page as man shows it, as plain text: no hyphenation (a word broken at the end
# of a line is not found) and no justification (words one space apart), spaces not tabs.
rendered() { LC_ALL=C.UTF-8 MANWIDTH=200 man --nh --nj -l "$1" 2>/dev/null | col -bx; }

# section TEXT NAME: the lines of the section NAME of a rendered page, up to the next heading
section() { awk -v s="$2" '/^[A-Z]/ { on = ($0 == s); next } on' <<<"$1"; }

# long_options: the long options of the program's own help texts (strictfs, strictfs quota)
long_options() {
	{ "$STRICTFS" --help && "$STRICTFS" quota --help; } | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

test_admin_man_pages_cover_cli() {
	local page sec text o cmd opts vo
	text=$(rendered "$SFS_REPO/doc/strictfs.8")
	assert_contains "$(head -n1 <<<"$text")" "STRICTFS(8)" "strictfs(8) renders"
	for sec in NAME SYNOPSIS DESCRIPTION COMMANDS OPTIONS "VIEW OPTIONS" FAILOVER \
		"DIFFERENCES FROM NATIVE EXT4" "EXIT STATUS" FILES EXAMPLES "SEE ALSO"; do
		assert_ok grep -qx "$sec" <<<"$text"
	done
	# every command and option of the program's own help
	for cmd in mount umount status demo upgrade "quota set" "quota grace" "quota report" "quota check"; do
		assert_word "$text" "strictfs $cmd" "strictfs(8) shows 'strictfs $cmd'"
	done
	opts=$(long_options)
	assert_gt "$(wc -w <<<"$opts")" 10 "the help texts name their options"
	for o in $opts; do
		assert_word "$text" "$o" "strictfs(8) documents $o"
	done
	# every view option of contract §5, in the section VIEW OPTIONS
	vo=$(section "$text" "VIEW OPTIONS")
	for o in acl noacl user_xattr nouser_xattr casefold casefold=strict nocasefold quota \
		usrquota grpquota noquota size= inodes= ro rw subdir= bsddf minixdf nosuid nodev \
		noexec noatime nodiratime relatime strictatime nosymfollow cache=strict \
		cache=writeback share=exclusive share=existing data= commit= errors=; do
		assert_word "$vo" "$o" "strictfs(8) documents $o under VIEW OPTIONS"
	done
	assert_contains "$text" "Unknown parameter 'noacl'" "says the kernel has no noacl"
	assert_contains "$text" "stored spelling stays" "says what a case-only rename does (contract §5.3)"
	assert_contains "$text" "share=existing cannot promise" "says what share=existing cannot promise"
	text=$(rendered "$SFS_REPO/doc/mount.strictfs.8")
	assert_contains "$(head -n1 <<<"$text")" "MOUNT.STRICTFS(8)" "mount.strictfs(8) renders"
	for sec in FSTAB CONTAINERS "EXIT STATUS"; do
		assert_ok grep -qx "$sec" <<<"$text"
	done
	assert_word "$text" "x-systemd.requires=" "mount.strictfs(8) documents x-systemd.requires="
	assert_word "$text" "umount -a -t fuse.strictfs" "mount.strictfs(8) documents umount -a"
	assert_word "$text" "--namespace" "mount.strictfs(8) documents --namespace"
}

test_admin_documented_case_only_rename() {
	# strictfs(8): a case-only rename keeps the spelling; renaming through another name changes it
	local C=$T_DIR/c N=$T_DIR/n
	new_source cf
	view casefold "$LOOP" "$C"
	view nocasefold "$LOOP" "$N"
	touch "$C/foo"
	assert_ok "$PY" -c "import os,sys; os.rename(sys.argv[1], sys.argv[2])" "$C/foo" "$C/FOO"
	assert_eq foo "$(ls "$N" | grep -ix foo)" "rename foo FOO: the stored spelling stays"
	assert_fails_with "are the same file" mv "$C/foo" "$C/FOO"
	assert_ok sh -c "mv '$C/foo' '$C/tmp' && mv '$C/tmp' '$C/FOO'"
	assert_eq FOO "$(ls "$N" | grep -ix foo)" "through another name: the spelling changes"
	assert_eq FOO "$(ls "$C" | grep -ix foo)" "and the casefold view lists it so"
}

test_admin_status_skips_a_daemon_that_does_not_answer() {
	# one wedged daemon must not hang `strictfs status` (nor every command that lists views):
	# run in a private mount namespace with its own /run/strictfs, beside a listener that
	# never accepts and whose backlog is full
	mkdir -p /run/strictfs
	unshare -m --propagation private -- env T_INNER=1 T_DIR="$T_DIR" T_NAME="$T_NAME" \
		bash "$T_FILE" --ns-run _status_wedged_body
	assert_eq 0 "$?" "the namespace part ran to its end"
}
_status_wedged_body() {
	local start took listener
	[[ $(readlink /proc/self/ns/mnt) != "$(readlink /proc/1/ns/mnt)" ]] || die "not in a private namespace"
	mount -t tmpfs -o mode=0700 sfs-run /run/strictfs || die "tmpfs on /run/strictfs"
	new_source wedge
	view "" "$LOOP" "$T_DIR/v"
	"$PY" -c '
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind("/run/strictfs/f-0-0.sock"); s.listen(0)
c1 = socket.socket(socket.AF_UNIX); c1.connect("/run/strictfs/f-0-0.sock")
c2 = socket.socket(socket.AF_UNIX); c2.setblocking(False)
try: c2.connect("/run/strictfs/f-0-0.sock")
except BlockingIOError: pass
open(sys.argv[1], "w").close(); time.sleep(600)' "$T_DIR/wedged" &
	listener=$!
	wait_until 5 test -e "$T_DIR/wedged" || die "the wedged listener did not start"
	start=$SECONDS
	_capture timeout 60 "$STRICTFS" status --json
	took=$((SECONDS - start))
	assert_eq 0 "$RC" "strictfs status returns"
	assert_lt "$took" 30 "within the connect timeout, not forever (${took}s)"
	assert_contains "$(cat "$T_DIR/.out")" "\"$T_DIR/v\"" "the daemon that answers is listed"
	kill "$listener"
	wait "$listener" 2>/dev/null
	assert_ok sfs_umount "$T_DIR/v"
}

# complete LINE: what the completion offers for LINE (cursor at its end), one per line
complete_line() {
	SFS_WB=$' \t\n"\'><=;|&(:' bash --norc -c '
		source "$1"
		COMP_WORDBREAKS=$SFS_WB COMP_LINE=$2 COMP_POINT=${#2}
		_strictfs
		((${#COMPREPLY[@]} == 0)) || printf "%s\n" "${COMPREPLY[@]}"' _ "$COMPLETION" "$1"
}

test_admin_completion_commands_and_options() {
	local got o missing=
	assert_eq "$(printf '%s\n' mount umount status quota upgrade demo)" \
		"$(complete_line 'strictfs ' | grep -v '^-')" "commands"
	assert_eq umount "$(complete_line 'strictfs um')" "a command prefix"
	assert_eq "$(printf '%s\n' set grace report check)" "$(complete_line 'strictfs quota ')" "quota subcommands"
	got=$(complete_line 'strictfs mount -')
	assert_ok grep -qx -- --namespace <<<"$got"
	assert_ok grep -qx -- --options <<<"$got"
	assert_eq "$(printf '%s\n' acl,casefold acl,casefold=strict)" \
		"$(complete_line 'strictfs mount -o acl,casef')" "-o: the last item of a comma list"
	assert_eq "$(printf '%s\n' strict writeback)" "$(complete_line 'strictfs mount -o ro,cache=')" \
		"-o: values after '=' (a word break for bash)"
	assert_ok grep -qx "$$" <(complete_line "strictfs mount -N $$")
	assert_ok grep -qx -- --namespace <(complete_line "strictfs umount --n")
	assert_ok grep -qx "$$" <(complete_line "strictfs umount -N $$")
	assert_ok grep -qx root <(complete_line 'strictfs quota set /dev/sdb1 -u roo')
	assert_ok grep -qx -- --bhard <(complete_line 'strictfs quota set /dev/sdb1 --bh')
	# every option strictfs knows is offered after -o, and nothing it does not know
	assert_gt "$(known_options | wc -l)" 40 "the option table of src/options.c is read"
	got=$(bash --norc -c 'source "$1"; _strictfs_view_options' _ "$COMPLETION" | sed 's/=.*//' | sort -u)
	for o in $(known_options); do
		[[ " $NOT_VIEW_OPTIONS " == *" $o "* ]] && continue
		grep -qx -- "$o" <<<"$got" || missing+=" $o"
	done
	assert_eq "" "$missing" "-o completion offers every option of src/options.c"
	assert_eq "" "$(comm -23 <(printf '%s\n' "$got") <(known_options) | tr '\n' ' ')" \
		"-o completion offers no option strictfs does not know"
}

test_admin_completion_umount_views() {
	local got
	new_source comp
	view noacl "$LOOP" "$T_DIR/a"
	view "" "$LOOP" "$T_DIR/b"
	mkdir -p "$T_DIR/t"
	mount -t tmpfs sfs-comp "$T_DIR/t" || die "tmpfs"
	got=$(complete_line "strictfs umount $T_DIR/")
	assert_eq "$(printf '%s\n' "$T_DIR/a" "$T_DIR/b")" "$got" "umount: the views, and only them"
	assert_ok grep -qx "$T_DIR/a" <(complete_line "strictfs quota set $LOOP --view $T_DIR/")
	assert_ok grep -qx "$LOOP" <(complete_line "strictfs status /dev/")
	umount "$T_DIR/t"
}

if [[ ${BASH_SOURCE[0]} == "$0" && ${1:-} == --ns-run ]]; then
	T_FILE=$(readlink -f "${BASH_SOURCE[0]}")
	t_begin "$2"
	"$2"
	exit 0
fi
[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
