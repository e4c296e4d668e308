# shellcheck shell=bash
# Helpers for the strictfs integration tests: a temp dir and ext4 images per test, test users,
# assertions, status queries, and a cleanup that touches only what the test itself created
# (mounts under its temp dir, daemons of its own sources, loop devices backed by its images).
#
# A test file sources this file, defines functions named test_*, and ends with
#     [[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
# `bash t_x.sh` runs all its tests, `bash t_x.sh --list` lists them, `bash t_x.sh --run FN` runs
# one (that is what test/run does, one process per test).

SFS_TEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SFS_REPO=$(cd "$SFS_TEST_DIR/../.." && pwd)
: "${STRICTFS:=$SFS_REPO/build/strictfs}"
: "${MOUNT_HELPER:=$SFS_REPO/build/mount.strictfs}"
: "${SFS_TMPBASE:=/tmp}"
export STRICTFS MOUNT_HELPER SFS_TMPBASE

# Always the system python: pyenv shims under /root are not reachable by the test users.
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)

SFS_ALICE=sfs_alice
SFS_BOB=sfs_bob
SFS_GRP=sfs_grp

shopt -s nullglob

# ---------------------------------------------------------------------------------------------
# Reporting. Results go to a file in the test's temp dir, so that subshells and the process run
# inside a private mount namespace (with_mount_helper) count too.

log() { printf '%s\n' "$*"; }

_where() {
	local i
	for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
		if [[ ${BASH_SOURCE[i]} != "${BASH_SOURCE[0]}" ]]; then
			printf '%s:%s' "${BASH_SOURCE[i]##*/}" "${BASH_LINENO[i - 1]}"
			return
		fi
	done
}

ok() {
	log "ok   $*"
	[[ -n ${T_DIR:-} && -d $T_DIR ]] && echo ok >>"$T_DIR/.results"
	return 0
}

fail() {
	log "FAIL $* [$(_where)]"
	[[ -n ${T_DIR:-} && -d $T_DIR ]] && echo fail >>"$T_DIR/.results"
	return 1
}

# die MSG: a setup step failed; the test cannot go on (cleanup runs from the EXIT trap).
die() {
	fail "$*"
	exit 1
}

# need CMD...: run a setup command; die if it fails.
need() {
	"$@" || die "setup failed: $*"
}

_short() { # the first 300 characters of a file, on one line
	tr '\n' '|' <"$1" | cut -c1-300
}

# ---------------------------------------------------------------------------------------------
# Assertions. Each records one ok or one fail.

assert_eq() { # EXPECTED ACTUAL MSG
	if [[ $1 == "$2" ]]; then ok "$3"; else fail "$3: expected '$1', got '$2'"; fi
}

assert_ne() { # UNEXPECTED ACTUAL MSG
	if [[ $1 != "$2" ]]; then ok "$3"; else fail "$3: got '$2'"; fi
}

assert_contains() { # HAYSTACK NEEDLE MSG
	if [[ $1 == *"$2"* ]]; then ok "$3"; else fail "$3: '$2' not in '$(printf '%s' "$1" | tr '\n' '|' | cut -c1-400)'"; fi
}

assert_not_contains() { # HAYSTACK NEEDLE MSG
	if [[ $1 != *"$2"* ]]; then ok "$3"; else fail "$3: '$2' found in '$(printf '%s' "$1" | tr '\n' '|' | cut -c1-400)'"; fi
}

# assert_one_of ACTUAL MSG ALTERNATIVE...: ACTUAL is exactly one of the alternatives (an empty
# ACTUAL passes only if "" is listed).
assert_one_of() {
	local actual=$1 msg=$2 a
	shift 2
	for a in "$@"; do
		[[ $actual == "$a" ]] && {
			ok "$msg"
			return 0
		}
	done
	fail "$msg: got '$(printf '%s' "$actual" | tr '\n' '|' | cut -c1-300)', expected one of: $*"
}

# has_word HAYSTACK WORD: WORD occurs in HAYSTACK between characters that cannot be part of an
# option name (letters, digits, '_'), so "acl" is not found in "noacl" nor "ro" in "root".
has_word() {
	local w
	local after='([^[:alnum:]_]|$)'
	w=$(printf '%s' "$2" | sed 's/[][\.*^$/+?(){}|]/\\&/g')
	# "size=" is followed by its value: the end needs no boundary
	[[ $2 =~ [[:alnum:]_]$ ]] || after=
	printf '%s\n' "$1" | grep -qE -- "(^|[^[:alnum:]_])$w$after"
}

assert_word() { # HAYSTACK WORD MSG: WORD appears as a whole word (has_word)
	if has_word "$1" "$2"; then ok "$3"; else fail "$3: the word '$2' not in '$(printf '%s' "$1" | tr '\n' '|' | cut -c1-400)'"; fi
}

assert_gt() { # A B MSG  (integers, A > B)
	if [[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ ]] && (($1 > $2)); then ok "$3"; else fail "$3: expected $1 > $2"; fi
}

assert_lt() { # A B MSG  (integers, A < B)
	if [[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ ]] && (($1 < $2)); then ok "$3"; else fail "$3: expected $1 < $2"; fi
}

_capture() { # CMD... : stdout -> $T_DIR/.out, stderr -> $T_DIR/.err, status -> RC
	"$@" >"$T_DIR/.out" 2>"$T_DIR/.err"
	RC=$?
	((RC == 0)) && _is_mount_command "$@" && check_views_transport
	return 0
}

assert_ok() { # CMD...: succeeds
	_capture "$@"
	if ((RC == 0)); then ok "$*"; else fail "$*: exit $RC: $(_short "$T_DIR/.err")"; fi
}

assert_fails() { # CMD...: fails (any way)
	_capture "$@"
	if ((RC != 0)); then ok "fails: $*"; else fail "expected failure: $*"; fi
}

# assert_fails_with TEXT CMD...: fails, and stderr contains TEXT (e.g. "Operation not supported").
assert_fails_with() {
	local text=$1
	shift
	_capture "$@"
	if ((RC == 0)); then
		fail "expected '$text': $*: succeeded"
	elif ! grep -qF -- "$text" "$T_DIR/.err"; then
		fail "expected '$text': $*: exit $RC: $(_short "$T_DIR/.err")"
	else
		ok "'$text': $*"
	fi
}

assert_exit() { # CODE CMD...
	local code=$1
	shift
	_capture "$@"
	if ((RC == code)); then ok "exit $code: $*"; else fail "expected exit $code, got $RC: $*: $(_short "$T_DIR/.err")"; fi
}

# What a refused command must not leave behind: strictfs views, daemons, loop devices, and any
# mount under the test's temp dir.
_snap() {
	{
		awk -v p="$T_DIR/" '$3 == "fuse.strictfs" || index($2, p) == 1 { print "mount " $1 " " $2 " " $3 }' /proc/self/mounts
		sfs_json | jq -r '.daemons[]?.pid | "daemon \(.)"' 2>/dev/null
		_strictfs_procs | sed 's/^/process /'
		losetup -l -n -O NAME 2>/dev/null | sed 's/^/loop /'
	} | grep -vF "$T_DIR/.helperns" | sort -u
}

# assert_refused EXPECTED CMD...: exit 1, exactly one line on stderr, starting "strictfs: " and
# containing EXPECTED; no new view, daemon or loop device remains. stderr stays in $T_DIR/.err.
assert_refused() {
	_assert_refused_impl fixed "$@"
}

# assert_refused_re REGEX CMD...: as assert_refused, the line matching an extended regex.
assert_refused_re() {
	_assert_refused_impl regex "$@"
}

_names() { # fixed|regex EXPECTED LINE
	if [[ $1 == fixed ]]; then [[ $3 == *"$2"* ]]; else grep -qE -- "$2" <<<"$3"; fi
}

_assert_refused_impl() {
	local how=$1 exp=$2
	shift 2
	local before after new lines first i good=1
	before=$(_snap)
	"$@" >"$T_DIR/.out" 2>"$T_DIR/.err" </dev/null
	RC=$?
	cp "$T_DIR/.err" "$T_DIR/.refused_err"
	lines=$(grep -c '' "$T_DIR/.err")
	first=$(head -n1 "$T_DIR/.err")
	if ((RC != 1)); then
		fail "refused ($exp): $*: exit $RC, expected 1; stderr: $(_short "$T_DIR/.err")"
		good=0
	fi
	if ((lines != 1)); then
		fail "refused ($exp): $*: $lines lines on stderr, expected 1: $(_short "$T_DIR/.err")"
		good=0
	fi
	if [[ $first != "strictfs: "* ]]; then
		fail "refused ($exp): $*: stderr does not start with 'strictfs: ': '$first'"
		good=0
	fi
	if ! _names "$how" "$exp" "$first"; then
		fail "refused: $*: message does not name '$exp': '$first'"
		good=0
	fi
	# A daemon or loop device the command started may take a moment to go.
	for ((i = 0; i < 30; i++)); do
		after=$(_snap)
		new=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after"))
		[[ -z $new ]] && break
		sleep 0.1
	done
	if [[ -n $new ]]; then
		fail "refused ($exp): $*: left behind: $(printf '%s' "$new" | tr '\n' ';')"
		good=0
	fi
	((good)) && ok "refused ($exp): $* -> $first"
	# restore for the caller (the snapshot loop ran commands)
	cp "$T_DIR/.refused_err" "$T_DIR/.err"
	return $((!good))
}

# ---------------------------------------------------------------------------------------------
# Processes

proc_status() { # PID FIELD -> the number of FIELD (VmRSS in kB, Threads) in /proc/PID/status
	awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}

proc_starttime() { # PID -> start time in clock ticks (guards against pid reuse)
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	echo "${20}"
}

pid_alive() { # PID
	local st
	[[ -n $1 && -r /proc/$1/stat ]] || return 1
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	[[ ${st:0:1} != Z ]]
}

pid_gone() { ! pid_alive "$1"; }

wait_until() { # SECONDS CMD...: poll CMD every 0.1 s
	local t=$1 i
	shift
	for ((i = 0; i < t * 10; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	"$@"
}

# wait_daemon_gone PID [SECONDS=5]: true once the process is gone.
wait_daemon_gone() {
	wait_until "${2:-5}" pid_gone "$1"
}

remember_pid() { # PID: a daemon this test caused; cleanup stops it if still there
	[[ $1 =~ ^[0-9]+$ ]] || return 0
	echo "$1 $(proc_starttime "$1")" >>"$T_DIR/.pids"
}

_strictfs_procs() { # pids running the strictfs or mount.strictfs binary
	local e1 e2 p e
	e1=$(readlink -f "$STRICTFS" 2>/dev/null)
	e2=$(readlink -f "$MOUNT_HELPER" 2>/dev/null)
	for p in /proc/[0-9]*; do
		e=$(readlink "$p/exe" 2>/dev/null) || continue
		e=${e% (deleted)}
		if [[ $e == "$e1" || $e == "$e2" ]]; then echo "${p#/proc/}"; fi
	done
}

# ---------------------------------------------------------------------------------------------
# strictfs status --json queries (jq)

sfs_json() { "$STRICTFS" status --json 2>/dev/null; }

sq() { # JQ-ARGS... FILTER: jq -r over the current status
	sfs_json | jq -r "$@" 2>/dev/null
}

view_pid() { # MOUNTPOINT -> pid of the daemon serving it (and remember it)
	local p
	p=$(sq --arg m "$1" '.daemons[]? | select(any(.views[]?; .mountpoint == $m)) | .pid' | head -n1)
	[[ -n $p ]] && remember_pid "$p"
	echo "$p"
}

view_json() { # MOUNTPOINT -> the view object
	sq --arg m "$1" '.daemons[]?.views[]? | select(.mountpoint == $m)'
}

view_opt() { # MOUNTPOINT KEY -> .options[KEY] (arrays joined by ",")
	sq --arg m "$1" --arg k "$2" \
		'.daemons[]?.views[]? | select(.mountpoint == $m) | .options[$k] | if type == "array" then join(",") else tostring end'
}

view_field() { # MOUNTPOINT JQ-PATH (e.g. .requested)
	sq --arg m "$1" ".daemons[]?.views[]? | select(.mountpoint == \$m) | $2"
}

# requests_of MOUNTPOINT: the view's .requests in status, in REPLY; dies if it is not a number (a
# missing field must not read as 0 and make a difference of two counts pass).
requests_of() {
	REPLY=$(view_field "$1" .requests)
	[[ $REPLY =~ ^[0-9]+$ ]] || die "$1: .requests in status is '$REPLY', not a number"
}

daemon_field() { # MOUNTPOINT JQ-PATH: a field of the daemon serving MOUNTPOINT (e.g. .backing.mode)
	sq --arg m "$1" ".daemons[]? | select(any(.views[]?; .mountpoint == \$m)) | $2"
}

daemon_views() { # PID -> the daemon's view mountpoints, sorted, space-separated
	sq --argjson p "$1" '.daemons[]? | select(.pid == $p) | [.views[]?.mountpoint] | sort | join(" ")'
}

daemons_for_source() { # SOURCE -> pids of daemons whose source or backing loop is SOURCE
	sq --arg s "$1" '.daemons[]? | select(.source == $s or (.backing.loop // "") == $s) | .pid'
}

status_has_view() { [[ -n $(view_json "$1") ]]; }
status_lacks_view() { [[ -z $(view_json "$1") ]]; }

# ---------------------------------------------------------------------------------------------
# Mount table

is_mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/self/mounts; }
not_mounted() { ! is_mounted "$1"; }

mount_line() { # MOUNTPOINT -> "SOURCE MOUNTPOINT FSTYPE" of the top mount there
	awk -v m="$1" '$2 == m { l = $1 " " $2 " " $3 } END { print l }' /proc/self/mounts
}

mount_opts() { # MOUNTPOINT -> options field of the top mount there
	awk -v m="$1" '$2 == m { o = $4 } END { print o }' /proc/self/mounts
}

has_mount_opt() { # MOUNTPOINT OPTION
	[[ ,$(mount_opts "$1"), == *",$2,"* ]]
}

# ---------------------------------------------------------------------------------------------
# Images, loop devices, views

# mkimg NAME [MKFS-ARGS...]: a fresh 512M ext4 image $T_DIR/NAME.img; path in REPLY.
mkimg() {
	local name=$1
	shift
	REPLY=$T_DIR/$name.img
	truncate -s 512M "$REPLY" || die "truncate $REPLY"
	mkfs.ext4 -q -F -b 4096 "$@" "$REPLY" >/dev/null || die "mkfs.ext4 $REPLY"
}

# attach_loop IMAGE: a loop device for IMAGE attached by the test; device in REPLY.
attach_loop() {
	REPLY=$(losetup -f --show "$1") || die "losetup -f --show $1"
	echo "$REPLY" >>"$T_DIR/.loops"
}

# new_source [NAME]: image + loop device attached by the test; sets IMG and LOOP.
new_source() {
	mkimg "${1:-img}"
	IMG=$REPLY
	attach_loop "$IMG"
	LOOP=$REPLY
}

# sfs_mount [strictfs mount args] SOURCE MOUNTPOINT: creates the mountpoint, remembers the daemon.
# Under test/run --transport, also checks that the view's requests come the way the run asked
# (SFS_TEST_TRANSPORT): a silent fall back would make the run test the other transport.
sfs_mount() {
	local mp=${!#} rc
	mkdir -p "$mp"
	"$STRICTFS" mount "$@"
	rc=$?
	((rc == 0)) && view_pid "$mp" >/dev/null
	((rc == 0)) && check_views_transport
	return "$rc"
}

# check_views_transport: under test/run --transport, every view of this test that a daemon
# serves (its mountpoint under T_DIR, in any mount namespace, however it was mounted: strictfs
# mount, mount -t strictfs, mount.strictfs, fstab) takes its requests through
# SFS_TEST_TRANSPORT; dies naming the first that does not. The assertions run it after every
# mount command they see succeed, and the cleanup for the views still there at the end.
check_views_transport() {
	local bad
	bad=$(_views_off_transport) || die "$bad"
}

# _views_off_transport: prints the first view of this test served another way than the run asked,
# and fails; waits up to 10 s for a view whose connection the kernel has not started yet.
_views_off_transport() {
	[[ -n ${SFS_TEST_TRANSPORT:-} && -n ${T_DIR:-} ]] || return 0
	local i out
	for ((i = 0; i < 100; i++)); do
		out=$(sq --arg d "$T_DIR/" --arg want "$SFS_TEST_TRANSPORT" '
			[.daemons[]?.views[]? | select(.mountpoint | startswith($d))
				| select(.transport.kind != $want or (.transport.why_not // "" | test("not started")))
				| "view \(.mountpoint) (\(.mount_ns)) is served through \(.transport.kind // "?")"
				  + " (\(.transport.why_not // "")), not \($want)"] | .[0] // empty')
		[[ -z $out ]] && return 0
		[[ $out == *"has not started the connection yet"* ]] || break
		sleep 0.1
	done
	echo "$out"
	return 1
}

# _is_mount_command CMD...: CMD mounts (strictfs mount, mount(8), mount.strictfs, ns_exec ... mount)
_is_mount_command() {
	local w
	for w in "$@"; do
		[[ $w == mount || $w == */mount.strictfs || $w == */mount.fuse.strictfs ]] && return 0
	done
	return 1
}

# noacl_and_acl_views NAME: a fresh source (IMG, LOOP) with a noacl view A and an acl view B.
noacl_and_acl_views() {
	new_source "$1"
	A=$T_DIR/a
	B=$T_DIR/b
	view noacl "$LOOP" "$A"
	view acl "$LOOP" "$B"
}

# mount_view [strictfs mount args] SOURCE MOUNTPOINT: as sfs_mount, dying on failure.
mount_view() {
	sfs_mount "$@" || die "strictfs mount $* failed"
}

# view OPTS SOURCE MOUNTPOINT: mount a view with OPTS (may be empty); die on failure.
view() {
	local o=$1
	shift
	if [[ -n $o ]]; then mount_view -o "$o" "$@"; else mount_view "$@"; fi
}

sfs_umount() { "$STRICTFS" umount "$@"; }

# native_ref: a native ext4 mount of a fresh image at $T_DIR/ref, for comparisons; sets REF.
native_ref() {
	mkimg ref
	REF=$T_DIR/ref
	mkdir -p "$REF"
	mount -o loop "$T_DIR/ref.img" "$REF" || die "native mount of ref.img"
}

# device_free DEV: nobody holds DEV exclusively (no mounted superblock, no daemon holding it).
device_free() {
	"$PY" -c 'import os,sys; os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL))' "$1" 2>/dev/null
}

loops_of() { # IMAGE -> loop devices backed by it
	losetup -l -n -O NAME -j "$1" 2>/dev/null
}

no_loop_for() { [[ -z $(loops_of "$1") ]]; }

# ---------------------------------------------------------------------------------------------
# Users

ensure_users() {
	getent group "$SFS_GRP" >/dev/null || groupadd "$SFS_GRP" || die "groupadd $SFS_GRP"
	id "$SFS_ALICE" >/dev/null 2>&1 || useradd -M -N -G "$SFS_GRP" "$SFS_ALICE" || die "useradd $SFS_ALICE"
	id -nG "$SFS_ALICE" | tr ' ' '\n' | grep -qx "$SFS_GRP" || usermod -aG "$SFS_GRP" "$SFS_ALICE" || die "usermod"
	id "$SFS_BOB" >/dev/null 2>&1 || useradd -M -N "$SFS_BOB" || die "useradd $SFS_BOB"
}

# as_user USER CMD...: run CMD with USER's uid, primary gid and supplementary groups (from /).
as_user() {
	local u=$1 uid gid
	shift
	uid=$(id -u "$u") && gid=$(id -g "$u") || return 125
	(cd / && HOME=/ setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@")
}

# ---------------------------------------------------------------------------------------------
# Private mount namespaces

# ns_start: a process holding a new private mount namespace; its pid in REPLY.
ns_start() {
	unshare -m --propagation private -- sleep 100000 </dev/null >/dev/null 2>&1 &
	local pid=$!
	wait_until 5 _ns_differs "$pid" || die "could not create a mount namespace"
	echo "$pid $(proc_starttime "$pid")" >>"$T_DIR/.nspids"
	REPLY=$pid
}

_ns_differs() {
	local theirs
	theirs=$(readlink "/proc/$1/ns/mnt" 2>/dev/null) || return 1
	[[ -n $theirs && $theirs != "$(readlink /proc/self/ns/mnt)" ]]
}

ns_exec() { # PID CMD...: run an external command in PID's mount namespace
	local pid=$1
	shift
	nsenter -t "$pid" -m -- "$@"
}

# with_mount_helper FN: run the function FN (of the current test file) in a private mount
# namespace in which /sbin/mount.strictfs is $MOUNT_HELPER, so mount(8) -t strictfs and fstab
# lines work there. The machine itself is not changed: /sbin is overlaid inside that namespace.
with_mount_helper() {
	[[ -x $MOUNT_HELPER ]] || die "mount helper not found: $MOUNT_HELPER"
	unshare -m --propagation private -- env T_INNER=1 T_DIR="$T_DIR" T_NAME="$T_NAME" \
		T_OUTER_NS="$(readlink /proc/self/ns/mnt)" bash "$T_FILE" --helper-ns "$1"
	local rc=$?
	((rc == 0)) || fail "$1 (in its mount namespace) exited with status $rc"
}

# in_private_ns FN: runs FN in a mount namespace of its own (the same T_DIR, and its own
# cleanup), for a test that changes what every process of the machine would see.
in_private_ns() {
	unshare -m --propagation private -- env T_INNER=1 T_DIR="$T_DIR" T_NAME="$T_NAME" \
		T_OUTER_NS="$(readlink /proc/self/ns/mnt)" bash "$T_FILE" --private-ns "$1"
	local rc=$?
	((rc == 0)) || fail "$1 (in its mount namespace) exited with status $rc"
}

# private_run_dir: in the namespace of in_private_ns only, an empty /run/strictfs, so that
# what the test does to "every daemon" (strictfs upgrade --all, the package's postinst) sees
# only the daemons it starts there.
private_run_dir() {
	[[ -n ${T_OUTER_NS:-} && $(readlink /proc/self/ns/mnt) != "$T_OUTER_NS" ]] ||
		die "refusing to cover /run/strictfs outside a private mount namespace"
	mkdir -p /run/strictfs && mount -t tmpfs -o mode=0755 sfs-run /run/strictfs ||
		die "tmpfs over /run/strictfs"
}

# private_dev_with_log LOG: in the namespace of in_private_ns only, an empty /dev with the
# nodes the daemon, losetup and e2fsck open, and a system log socket at /dev/log whose
# messages go to the file LOG (as journald's or rsyslog's would; the suite's machines may
# have none). The listener's pid in REPLY.
private_dev_with_log() {
	local log=$1 d max=0 n i
	[[ -n ${T_OUTER_NS:-} && $(readlink /proc/self/ns/mnt) != "$T_OUTER_NS" ]] ||
		die "refusing to cover /dev outside a private mount namespace"
	for d in /sys/block/loop*; do
		[[ -e $d ]] || continue
		n=${d##*/loop}
		((n > max)) && max=$n
	done
	mount -t tmpfs -o mode=0755 sfs-dev /dev || die "tmpfs over /dev"
	mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 &&
		mknod -m 666 /dev/random c 1 8 && mknod -m 666 /dev/urandom c 1 9 &&
		mknod -m 666 /dev/fuse c 10 229 && mknod -m 660 /dev/loop-control c 10 237 &&
		ln -s /proc/self/fd /dev/fd && ln -s /proc/self/fd/0 /dev/stdin &&
		ln -s /proc/self/fd/1 /dev/stdout && ln -s /proc/self/fd/2 /dev/stderr ||
		die "device nodes in the private /dev"
	for ((i = 0; i <= max + 16; i++)); do
		mknod -m 660 "/dev/loop$i" b 7 "$i" || die "mknod /dev/loop$i"
	done
	"$PY" - "$log" <<'PYEOF' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
os.chmod("/dev/log", 0o666)
out = open(sys.argv[1], "ab", buffering=0)
out.write(b"listening\n")
while True:
    out.write(s.recv(65536) + b"\n")
PYEOF
	REPLY=$!
	remember_pid "$REPLY"
	wait_until 5 test -s "$log" || die "no listener on /dev/log"
}

_install_mount_helper_in_ns() {
	local sbin h=$T_DIR/.helperns
	[[ -n ${T_OUTER_NS:-} && $(readlink /proc/self/ns/mnt) != "$T_OUTER_NS" ]] ||
		die "refusing to overlay /sbin outside a private mount namespace"
	sbin=$(readlink -f /sbin)
	mkdir -p "$h" || die "mkdir $h"
	mount -t tmpfs -o mode=0755 sfs-helperns "$h" || die "tmpfs for the helper overlay"
	mkdir "$h/up" "$h/work" || die "mkdir overlay dirs"
	mount -t overlay sfs-helperns -o "lowerdir=$sbin,upperdir=$h/up,workdir=$h/work" "$sbin" ||
		die "overlay over $sbin"
	ln -sf "$MOUNT_HELPER" "$sbin/mount.strictfs" || die "installing mount.strictfs"
	# mount(8) looks for mount.fuse.strictfs when it remounts a view (type fuse.strictfs)
	ln -sf "$MOUNT_HELPER" "$sbin/mount.fuse.strictfs" || die "installing mount.fuse.strictfs"
}

# ---------------------------------------------------------------------------------------------
# Test lifecycle

_check_env() {
	[[ $(id -u) == 0 ]] || die "integration tests must run as root"
	local t
	for t in jq losetup mkfs.ext4 setfacl getfacl setfattr getfattr setpriv unshare nsenter findmnt; do
		command -v "$t" >/dev/null || die "missing tool: $t"
	done
	[[ -x $STRICTFS ]] || die "strictfs binary not found: $STRICTFS"
}

# t_begin NAME: temp dir (T_DIR), cleanup trap, users. Idempotent; in the namespace process of
# with_mount_helper it reuses the outer test's T_DIR.
t_begin() {
	if [[ ${T_INNER:-0} == 1 ]]; then
		[[ -d ${T_DIR:-} ]] || {
			echo "inner test without T_DIR"
			exit 1
		}
	else
		[[ -n ${T_DIR:-} && -d $T_DIR ]] && return 0
		T_NAME=$1
		T_DIR=$(mktemp -d "$SFS_TMPBASE/sfs.XXXXXX") || exit 1
		chmod 755 "$T_DIR"
		export T_DIR T_NAME
	fi
	trap '_t_exit_trap' EXIT
	trap 'log "interrupted"; exit 130' INT TERM HUP
	_check_env
	ensure_users
	umask 022
	cd / || exit 1
}

# t_on_exit FUNCTION: FUNCTION runs when the test process exits, however it exits, before the
# cleanup (to put back a global setting the test changed). The test's exit status is kept.
T_ON_EXIT=()
t_on_exit() { T_ON_EXIT+=("$1"); }

_t_exit_trap() {
	local rc=$? f
	for f in "${T_ON_EXIT[@]}"; do "$f"; done
	t_cleanup || rc=1
	exit "$rc"
}

_count() { # ok|fail
	[[ -f $T_DIR/.results ]] || {
		echo 0
		return
	}
	grep -c "^$1\$" "$T_DIR/.results"
}

t_run() { # FN: run one test function; exit 0 if it passed
	local fn=$1
	declare -F "$fn" >/dev/null || {
		echo "no such test: $fn"
		exit 2
	}
	t_begin "$fn"
	log "# $fn (temp dir $T_DIR)"
	"$fn"
	local nok nfail
	nok=$(_count ok)
	nfail=$(_count fail)
	if ((nok + nfail == 0)); then
		fail "test made no assertions"
		nfail=1
	fi
	log "# $fn: $nok ok, $nfail failed"
	((nfail == 0))
	exit $?
}

_t_inner() { # FN, inside the private namespace of with_mount_helper
	t_begin "$1"
	_install_mount_helper_in_ns
	"$1"
	exit 0
}

t_main() {
	T_FILE=$(readlink -f "${BASH_SOURCE[1]}")
	export T_FILE
	case ${1:-} in
	--list)
		declare -F | awk '{ print $3 }' | grep '^test_'
		exit 0
		;;
	--run) t_run "$2" ;;
	--helper-ns) _t_inner "$2" ;;
	--private-ns)
		t_begin "$2"
		"$2"
		exit 0
		;;
	*)
		local fns=("$@") fn passed=0 failed=0
		((${#fns[@]})) || mapfile -t fns < <(declare -F | awk '{ print $3 }' | grep '^test_')
		for fn in "${fns[@]}"; do
			bash "$T_FILE" --run "$fn" </dev/null 2>&1 | sed -u "s/^/[$fn] /"
			if ((PIPESTATUS[0] == 0)); then ((passed++)); else ((failed++)); fi
		done
		echo "$passed passed, $failed failed"
		((failed == 0))
		exit $?
		;;
	esac
}

# ---------------------------------------------------------------------------------------------
# Cleanup: only what this test made.

_mounts_under_tdir() {
	awk -v p="$T_DIR/" -v h="$T_DIR/.helperns" 'index($2, p) == 1 && index($2, h) != 1 { print $2 }' \
		/proc/self/mounts | sort -ru
}

_fuse_abort() { # MOUNTPOINT: abort its FUSE connection if fusectl is there
	local dev
	dev=$(awk -v m="$1" '$5 == m { d = $3 } END { print d }' /proc/self/mountinfo)
	[[ $dev == 0:* && -w /sys/fs/fuse/connections/${dev#0:}/abort ]] &&
		echo 1 >"/sys/fs/fuse/connections/${dev#0:}/abort"
}

_umount_one() { # MOUNTPOINT: strictfs umount for a view, else umount; lazily if that hangs
	local type
	type=$(awk -v m="$1" '$2 == m { t = $3 } END { print t }' /proc/self/mounts)
	if [[ $type == fuse.strictfs ]]; then
		timeout 15 "$STRICTFS" umount "$1" >/dev/null 2>&1 && return 0
		log "cleanup: strictfs umount $1 failed"
	fi
	timeout 10 umount "$1" 2>/dev/null && return 0
	log "cleanup: umount $1 failed; aborting the connection and detaching lazily"
	_fuse_abort "$1"
	umount -l "$1" 2>/dev/null
}

_umount_under_tdir() {
	local round mp list
	for round in 1 2 3; do
		list=$(_mounts_under_tdir)
		[[ -z $list ]] && return 0
		for mp in $list; do _umount_one "$mp"; done
	done
	[[ -z $(_mounts_under_tdir) ]]
}

_our_loops() {
	local img
	for img in "$T_DIR"/*.img; do loops_of "$img"; done | sort -u
}

_no_our_loops() { [[ -z $(_our_loops) ]]; }

_our_daemon_pids() {
	local p st loops
	{
		if [[ -f $T_DIR/.pids ]]; then
			while read -r p st; do
				[[ -n $p && $(proc_starttime "$p") == "$st" ]] && pid_alive "$p" && echo "$p"
			done <"$T_DIR/.pids"
		fi
		loops=$(_our_loops | jq -R . | jq -s -c .)
		sfs_json | jq -r --arg d "$T_DIR/" --argjson loops "${loops:-[]}" '
			.daemons[]? | select(
				((.source // "") | startswith($d))
				or ((.source // "") as $s | any($loops[]; . == $s))
				or ((.backing.loop // "") as $l | any($loops[]; . == $l))
				or any(.views[]?; (.mountpoint // "") | startswith($d))) | .pid' 2>/dev/null
		for p in $(_strictfs_procs); do
			tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -qF "$T_DIR/" && echo "$p"
		done
	} | grep -E '^[0-9]+$' | sort -un | grep -vx -e "$$" -e "$BASHPID"
}

is_keeper() { [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") == *" __keeper "* ]]; }

keeper_of() { # DAEMON_PID -> the pid of its keeper (a child running "strictfs __keeper")
	local c
	for c in $(cat "/proc/$1/task/"*/children 2>/dev/null); do
		is_keeper "$c" && echo "$c"
	done
}

# kill_daemon_for_good PID: the daemon and its keeper, so that no successor takes its views
# over (the daemon is stopped first: it would start a new keeper for the one killed).
kill_daemon_for_good() {
	local k
	kill -STOP "$1" 2>/dev/null
	k=$(keeper_of "$1")
	[[ -n $k ]] && kill -KILL "$k" 2>/dev/null
	kill -KILL "$1" 2>/dev/null
	[[ -z $k ]] || wait_until 3 pid_gone "$k"
}

_stop_pid() {
	# A daemon whose views are gone exits by itself (and ends its keeper); a moment first.
	wait_until 2 pid_gone "$1" && return 0
	if is_keeper "$1"; then
		kill -KILL "$1" 2>/dev/null
		wait_until 3 pid_gone "$1"
		return
	fi
	log "cleanup: daemon $1 still running after its views were removed; sending SIGTERM"
	kill -TERM "$1" 2>/dev/null
	wait_until 5 pid_gone "$1" && return 0
	kill_daemon_for_good "$1"
	wait_until 3 pid_gone "$1"
}

_stop_ns_holders() {
	local p st mp
	[[ -f $T_DIR/.nspids ]] || return 0
	while read -r p st; do
		[[ -n $p && $(proc_starttime "$p") == "$st" ]] || continue
		for mp in $(awk -v d="$T_DIR/" 'index($2, d) == 1 { print $2 }' "/proc/$p/mounts" 2>/dev/null | sort -ru); do
			timeout 10 nsenter -t "$p" -m -- umount "$mp" 2>/dev/null ||
				timeout 10 nsenter -t "$p" -m -- umount -l "$mp" 2>/dev/null
		done
		kill "$p" 2>/dev/null
	done <"$T_DIR/.nspids"
}

t_cleanup() {
	[[ -n ${T_DIR:-} && -d $T_DIR ]] || return 0
	[[ ${_T_CLEANED:-0} == 1 ]] && return 0
	_T_CLEANED=1
	cd / || true
	local problems=0 pid dev left
	if ! left=$(_views_off_transport); then
		log "FAIL $left [cleanup]"
		problems=1
	fi
	_umount_under_tdir
	_stop_ns_holders
	for pid in $(_our_daemon_pids); do _stop_pid "$pid"; done
	_umount_under_tdir
	for dev in $(_our_loops); do losetup -d "$dev" 2>/dev/null; done
	wait_until 3 _no_our_loops

	left=$(_mounts_under_tdir)
	[[ -n $left ]] && { log "cleanup: still mounted: $left"; problems=1; }
	left=$(_our_daemon_pids)
	[[ -n $left ]] && { log "cleanup: daemons still running: $left"; problems=1; }
	left=$(_our_loops)
	[[ -n $left ]] && { log "cleanup: loop devices still attached: $left"; problems=1; }

	[[ ${T_INNER:-0} == 1 ]] && return "$problems"
	if [[ -z $(_mounts_under_tdir) ]]; then
		rm -rf --one-file-system "$T_DIR"
	else
		log "cleanup: leaving $T_DIR (still mounted)"
	fi
	return "$problems"
}

# t_cleanup_dir DIR: the runner's safety net for a test process that died without cleaning up.
t_cleanup_dir() {
	T_DIR=$1
	_T_CLEANED=0
	t_cleanup
}

# ---------------------------------------------------------------------------------------------
# Daemons, writers and containers shared by the fault, failover and container tests

# source_key SOURCE: the daemon's key (docs/design.md): b-MAJ-MIN or f-DEV-INO.
source_key() {
	local ma mi
	if [[ -b $1 ]]; then
		read -r ma mi < <(stat -L -c '%t %T' "$1")
		echo "b-$((16#$ma))-$((16#$mi))"
	else
		stat -L -c 'f-%d-%i' "$1"
	fi
}

# successor_of PID KEY: waits for the daemon that took over from PID (its keeper) to answer; its
# pid in REPLY.
successor_of() {
	local k=$1 key=$2 i p
	for ((i = 0; i < 200; i++)); do
		p=$(daemon_procs "$key" | head -n1)
		if [[ -n $p && $p != "$k" ]] && "$STRICTFS" status --json >/dev/null 2>&1; then
			REPLY=$p
			remember_pid "$p"
			return 0
		fi
		sleep 0.05
	done
	return 1
}

daemon_procs() { # KEY: pids of strictfs daemons serving KEY
	local p
	for p in $(_strictfs_procs); do
		[[ $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") == "strictfs __daemon $1 "* ]] && echo "$p"
	done
}

# durable_writer FILE ACKED SECONDS: appends numbered lines to FILE, fsyncing each, and after
# each fsync appends the number to ACKED (outside the view); prints the errno that ended it.
durable_writer() {
	"$PY" - "$1" "$2" "$3" <<'EOF'
import errno, os, sys, time
path, acked, t = sys.argv[1], sys.argv[2], float(sys.argv[3])
end = time.time() + t
i = 0
try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    with open(acked, "a", buffering=1) as ack:
        while time.time() < end:
            os.write(fd, b"%d\n" % i)
            os.fsync(fd)
            ack.write("%d\n" % i)
            i += 1
    print("END")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
EOF
}

# every fsynced line is in FILE, in order
acked_lines_present() { # FILE ACKED
	local n
	n=$(wc -l <"$2")
	[[ $n -gt 0 ]] || return 1
	[[ $(head -n "$n" "$1" | md5sum) == $(seq 0 $((n - 1)) | md5sum) ]] && return 0
	log "$1 is not the $n lines acknowledged: $(diff <(seq 0 $((n - 1))) <(head -n "$n" "$1") | head -6 | tr '\n' ' ')"
	return 1
}

fsck_clean() { # DEVICE-OR-IMAGE
	e2fsck -fn "$1" >"$T_DIR/fsck.out" 2>&1 || {
		log "e2fsck: $(_short "$T_DIR/fsck.out")"
		return 1
	}
}

# container_start: a container-like process: pid 1 of its own pid namespace, in its own mount
# namespace with its own /proc and an empty /dev (no /dev/fuse, as in many containers). It ends
# on SIGTERM (the cleanup's), and the namespaces with it; its host pid in REPLY.
container_start() {
	local holder pid i
	unshare -m -p -f --kill-child --mount-proc --propagation private -- \
		sh -c 'trap "exit 0" TERM; sleep 100000 & wait' </dev/null >/dev/null 2>&1 &
	holder=$!
	for ((i = 0; i < 50; i++)); do
		pid=$(cat "/proc/$holder/task/$holder/children" 2>/dev/null)
		pid=${pid%% *}
		[[ -n $pid ]] && _ns_differs "$pid" && break
		sleep 0.1
	done
	[[ -n $pid ]] && _ns_differs "$pid" || die "could not create a container"
	echo "$pid $(proc_starttime "$pid")" >>"$T_DIR/.nspids"
	nsenter -t "$pid" -m mount -t tmpfs -o mode=0755 sfs-ctdev /dev || die "an empty /dev in the container"
	REPLY=$pid
}

in_ns_mounts() { # PID MOUNTPOINT -> "SOURCE MOUNTPOINT TYPE" of the view in PID's namespace
	awk -v m="$2" '$2 == m { l = $1 " " $2 " " $3 } END { print l }' "/proc/$1/mounts"
}

not_in_ns() { [[ -z $(in_ns_mounts "$1" "$2") ]]; }
