#!/bin/bash
# The io_uring transport (contract §4.5): with fuse.enable_uring on, a view's requests come
# through one io_uring queue per possible CPU and the view answers exactly as a view served
# through /dev/fuse does, payloads of every size included; with it off, or where io_uring
# cannot be set up, the view is served through /dev/fuse and status says why; a CPU that is
# offline when the view is mounted holds nothing up; idle views stay cheap.
# transport-independent: each test sets the switch itself, and puts it back
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
unset SFS_TEST_TRANSPORT # these tests choose the transport of each view themselves

URING_PARAM=/sys/module/fuse/parameters/enable_uring

# The switch, kernel.io_uring_disabled and CPU 1 as the test found them, back in every exit path.
_uring_save() {
	[[ -w $URING_PARAM ]] || die "this kernel cannot serve FUSE over io_uring ($URING_PARAM)"
	U_OLD=$(<"$URING_PARAM")
	U_OLD_DISABLED=$(sysctl -n kernel.io_uring_disabled 2>/dev/null)
	t_on_exit _uring_restore
}

_uring_restore() {
	[[ -n ${U_CPU_OFF:-} ]] && echo 1 >"/sys/devices/system/cpu/cpu$U_CPU_OFF/online"
	[[ -n ${U_OLD_DISABLED:-} ]] && sysctl -q -w kernel.io_uring_disabled="$U_OLD_DISABLED"
	[[ -n ${U_OLD:-} ]] && echo "$U_OLD" >"$URING_PARAM"
}

uring_switch() { echo "$1" >"$URING_PARAM" || die "setting $URING_PARAM to $1"; }

transport() { # MOUNTPOINT FIELD: .transport.FIELD of the view in status
	stat "$1" >/dev/null 2>&1
	view_json "$1" | jq -r ".transport.$2"
}

possible_cpus() {
	local n=0 a b r
	IFS=, read -ra ranges </sys/devices/system/cpu/possible
	for r in "${ranges[@]}"; do
		a=${r%-*} b=${r#*-}
		n=$((n + b - a + 1))
	done
	echo "$n"
}

# The same work in DIR of a view, and a manifest of what it left: payloads from none to the
# largest a request carries (1 MiB writes and reads through a daemon-path view, a directory of
# 600 names read in several batches, xattr values up to a block), and errors.
WORK='import hashlib, os, random, sys
d = sys.argv[1]
os.mkdir(d + "/dir")
for i in range(600):
    with open(d + "/dir/%04d-%s" % (i, "n" * (i % 200)), "w") as f: f.write(str(i))
data = random.Random(16).randbytes(3 << 20)
with open(d + "/big", "wb") as f: f.write(data)
with open(d + "/big", "rb") as f: back = f.read()
assert back == data, "big read back differs"
os.setxattr(d + "/big", "user.small", b"x")
os.setxattr(d + "/big", "user.block", b"v" * 3000)
os.symlink("big", d + "/link")
os.link(d + "/big", d + "/hard")
os.rename(d + "/hard", d + "/hard2")
os.truncate(d + "/big", 12345)
try: os.stat(d + "/missing")
except FileNotFoundError: print("missing: ENOENT")
try: os.getxattr(d + "/big", "user.none")
except OSError as e: print("user.none:", e.errno)
names = sorted(os.listdir(d + "/dir"))
print("dir:", len(names), hashlib.sha256("/".join(names).encode()).hexdigest())
print("big:", os.stat(d + "/big").st_size, hashlib.sha256(open(d + "/big", "rb").read()).hexdigest())
print("xattrs:", sorted(os.listxattr(d + "/big")), len(os.getxattr(d + "/big", "user.block")))
print("link:", os.readlink(d + "/link"), "hard2 nlink:", os.stat(d + "/hard2").st_nlink)'

test_uring_views_answer_as_dev_fuse_views() {
	_uring_save
	new_source u
	uring_switch Y
	view acl,nopassthrough "$LOOP" "$T_DIR/u"
	view acl "$LOOP" "$T_DIR/p"
	uring_switch N
	view acl,nopassthrough "$LOOP" "$T_DIR/d"
	assert_eq io_uring "$(transport "$T_DIR/u" kind)" "mounted with the switch on: io_uring"
	assert_eq "$(possible_cpus)" "$(transport "$T_DIR/u" queues)" "a queue per possible CPU"
	assert_eq io_uring "$(transport "$T_DIR/p" kind)" "a passthrough view too"
	assert_eq dev_fuse "$(transport "$T_DIR/d" kind)" "mounted with the switch off: /dev/fuse"
	assert_contains "$(transport "$T_DIR/d" why_not)" "fuse.enable_uring is off" "and why"

	local ur dr pr
	ur=$("$PY" -c "$WORK" "$T_DIR/u" 2>&1) || fail "work in the io_uring view: $ur"
	need mkdir "$T_DIR/d/x"
	dr=$("$PY" -c "$WORK" "$T_DIR/d/x" 2>&1) || fail "work in the /dev/fuse view: $dr"
	need mkdir "$T_DIR/p/y"
	pr=$("$PY" -c "$WORK" "$T_DIR/p/y" 2>&1) || fail "work in the passthrough io_uring view: $pr"
	assert_eq "$dr" "$ur" "io_uring view: the same answers as the /dev/fuse view"
	assert_eq "$dr" "$pr" "passthrough io_uring view: the same answers"
	assert_eq "$(sha256sum <"$T_DIR/u/x/big")" "$(sha256sum <"$T_DIR/d/x/big")" \
		"a file written through /dev/fuse, read alike through io_uring"
	need setfacl -m u:nobody:r "$T_DIR/u/big"
	assert_contains "$(getfacl -p "$T_DIR/d/big" 2>/dev/null)" "user:nobody:r--" \
		"an ACL set through io_uring, read through /dev/fuse"
}

test_uring_refused_setup_serves_through_dev_fuse() {
	_uring_save
	new_source r
	uring_switch Y
	# io_uring_setup(2) refused to everyone, the administrator's way of turning io_uring off
	sysctl -q -w kernel.io_uring_disabled=2 || die "setting kernel.io_uring_disabled"
	view "" "$LOOP" "$T_DIR/r"
	sysctl -q -w kernel.io_uring_disabled="$U_OLD_DISABLED"
	assert_eq dev_fuse "$(transport "$T_DIR/r" kind)" "no ring: /dev/fuse"
	assert_eq "io_uring set-up failed: Operation not permitted" "$(transport "$T_DIR/r" why_not)" \
		"and why"
	echo data >"$T_DIR/r/f" || fail "writing through the view"
	assert_eq data "$(cat "$T_DIR/r/f")" "the view serves"
}

test_uring_offline_cpu_holds_nothing_up() {
	_uring_save
	local cpu=1
	[[ -w /sys/devices/system/cpu/cpu$cpu/online ]] || die "CPU $cpu cannot be taken offline here"
	new_source c
	uring_switch Y
	U_CPU_OFF=$cpu
	echo 0 >"/sys/devices/system/cpu/cpu$cpu/online" || die "taking CPU $cpu offline"
	view "" "$LOOP" "$T_DIR/c"
	assert_eq io_uring "$(transport "$T_DIR/c" kind)" "io_uring with CPU $cpu offline"
	assert_ok timeout 20 sh -c "echo one >'$T_DIR/c/f' && ls '$T_DIR/c' >/dev/null"
	echo 1 >"/sys/devices/system/cpu/cpu$cpu/online" || die "bringing CPU $cpu back"
	U_CPU_OFF=
	# requests from the CPU that came back reach its queue, registered while it was away
	assert_ok timeout 20 taskset -c "$cpu" sh -c "echo two >>'$T_DIR/c/f' && cat '$T_DIR/c/f' >/dev/null"
	assert_ok timeout 20 taskset -c 0 stat "$T_DIR/c/f"
	assert_eq "one
two" "$(timeout 20 cat "$T_DIR/c/f")" "both writes"
}

# The tmpfiles.d line the package ships turns the switch on, as systemd-tmpfiles runs it at boot.
test_uring_tmpfiles_line_turns_the_switch_on() {
	_uring_save
	uring_switch N
	assert_ok systemd-tmpfiles --create "$SFS_REPO/doc/examples/fuse-uring.conf"
	assert_eq Y "$(<"$URING_PARAM")" "enable_uring after the shipped tmpfiles.d line"
}

_threads_at_most() { (($(proc_status "$1" Threads) <= $2)); }

_views_of_daemon_are() { [[ $(daemon_views "$1") == "$2" ]]; } # PID MOUNTPOINTS (a predicate)

# _uring_areas_placed PID: how many io_uring buffer mappings PID has, and how many lie outside
# [16 TiB, 32 TiB), where a daemon places them so that every successor finds the address free
# (doc/kernel.md §4.11).
_uring_areas_placed() {
	local range rest start n=0 out=0
	while read -r range rest; do
		[[ $rest == *strictfs-uring* ]] || continue
		start=$((16#${range%-*}))
		((n++, start < 1 << 44 || start >= 1 << 45)) && ((out++))
	done <"/proc/$1/maps"
	echo "$n $out"
}

# The entries (threads) the daemon gives each queue of a view: SFS_URING_DEPTH.
_uring_depth() {
	awk '$1 == "#define" && $2 == "SFS_URING_DEPTH" { print $3 }' "$SFS_REPO/include/fuse_uring.h"
}

# Many idle io_uring views cost the daemon little: each view's entries are a thread, a small
# ring and a buffer the kernel writes into only as far as a request needs. What a view costs
# grows with the CPUs: the daemon makes a view one queue per possible CPU, of SFS_URING_DEPTH
# entries each. Measured on 2 CPUs (the default debugoptimized build, 128 views): about 120 KiB
# a view whatever its transport (a /dev/fuse view costs as much), and about 22 KiB an entry:
# its thread's stack as far as it is touched (8-9 KiB), its io_uring's two mapped pages (SQ/CQ
# rings, and the 128-byte SQEs: 8 KiB), and its buffer's header page with what requests wrote
# into the payload (4-6 KiB). The bound allows 128 KiB a view and 32 KiB an entry, so 64 KiB a
# queue: 256 KiB a view on 2 CPUs, 4.1 MiB on 64.
URING_VIEW_KIB=128
URING_ENTRY_KIB=32

test_uring_idle_views_stay_cheap() {
	_uring_save
	new_source many
	uring_switch Y
	local n=128 i pid rss0 rss1 th0 th1 per start queues depth bound
	depth=$(_uring_depth)
	[[ $depth =~ ^[1-9][0-9]*$ ]] || die "SFS_URING_DEPTH not found in include/fuse_uring.h: '$depth'"
	view "" "$LOOP" "$T_DIR/v0"
	pid=$(view_pid "$T_DIR/v0")
	[[ -n $pid ]] || die "no daemon in status for $T_DIR/v0"
	ls "$T_DIR/v0" >/dev/null
	rss0=$(proc_status "$pid" VmRSS) th0=$(proc_status "$pid" Threads)
	[[ $rss0 =~ ^[0-9]+$ && $th0 =~ ^[0-9]+$ ]] || die "daemon $pid: VmRSS '$rss0', Threads '$th0'"
	start=$SECONDS
	for ((i = 1; i <= n; i++)); do
		mkdir -p "$T_DIR/v$i"
		"$STRICTFS" mount "$LOOP" "$T_DIR/v$i" || fail "mounting view $i"
	done
	for ((i = 1; i <= n; i++)); do ls "$T_DIR/v$i" >/dev/null || fail "listing view $i"; done
	log "$n views mounted and listed in $((SECONDS - start)) s"
	assert_eq io_uring "$(transport "$T_DIR/v$n" kind)" "the last view too uses io_uring"
	queues=$(transport "$T_DIR/v$n" queues)
	[[ $queues =~ ^[1-9][0-9]*$ ]] || die "$T_DIR/v$n: .transport.queues is '$queues'"
	rss1=$(proc_status "$pid" VmRSS) th1=$(proc_status "$pid" Threads)
	[[ $rss1 =~ ^[0-9]+$ && $th1 =~ ^[0-9]+$ ]] || die "daemon $pid: VmRSS '$rss1', Threads '$th1'"
	per=$(((rss1 - rss0) / n))
	bound=$((URING_VIEW_KIB + queues * depth * URING_ENTRY_KIB))
	log "daemon: RSS $rss0 -> $rss1 kB ($per kB a view, $queues queues of $depth entries), threads $th0 -> $th1"
	if [[ -n ${ASAN_OPTIONS:-} ]]; then
		# AddressSanitizer's shadow memory, fake stacks and quarantine are not the product's
		log "the $bound KiB bound is for the release build, not checked under AddressSanitizer"
	else
		assert_lt "$per" $((bound + 1)) \
			"an idle io_uring view costs at most $URING_VIEW_KIB KiB + $queues queues x $depth entries x $URING_ENTRY_KIB KiB = $bound KiB"
	fi
	assert_eq "$((n + 1)) 0" "$(_uring_areas_placed "$pid")" \
		"every view's io_uring buffers lie from 16 TiB up, where a successor maps nothing else"
	start=$SECONDS
	for ((i = 1; i <= n; i++)); do sfs_umount "$T_DIR/v$i" || fail "unmounting view $i"; done
	if wait_until 30 _views_of_daemon_are "$pid" "$T_DIR/v0"; then
		ok "the daemon is left with view v0 only"
	else
		fail "the daemon is left with view v0 only: it has '$(daemon_views "$pid")'"
	fi
	log "$n views unmounted in $((SECONDS - start)) s"
	assert_ok wait_until 30 _threads_at_most "$pid" $((th0 + 4))
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
