#!/bin/bash
# SLOW. 100,000 files walked through a view whose daemon runs with RLIMIT_NOFILE 1024 (soft and
# hard): the daemon's descriptors stay bounded whatever the number of inodes the kernel
# remembers (contract §4.2), also when it acts as an unprivileged caller.
# transport-independent: the descriptor cache and the inode table bound the daemon above the transport; t_stress and t_failover carry many requests through both
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

_nodes_below() { (($(daemon_field "$1" .cache.inodes) < $2)); }
_rss_below() { (($(proc_status "$1" VmRSS) < $2)); }

test_slow_walk_100k_files() {
	mkimg walk -N 160000
	IMG=$REPLY
	local V=$T_DIR/v pid n limit fds rss_idle
	mkdir -p "$V"
	# The daemon is started by this mount and inherits the limit.
	(ulimit -n 1024 && exec "$STRICTFS" mount "$IMG" "$V") || die "strictfs mount under ulimit -n 1024"
	pid=$(view_pid "$V")
	[[ -n $pid ]] || die "no daemon for $V"
	rss_idle=$(proc_status "$pid" VmRSS)
	limit=$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")
	assert_eq 1024 "$limit" "daemon runs with a soft limit of 1024 descriptors"

	assert_ok "$PY" - "$V" <<'EOF'
import os, sys
root = sys.argv[1]
for d in range(100):
    dp = os.path.join(root, "d%03d" % d)
    os.mkdir(dp)
    for f in range(1000):
        os.close(os.open(os.path.join(dp, "f%04d" % f), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
EOF
	assert_ok pid_alive "$pid"

	n=$(find "$V" -type f | wc -l)
	assert_eq 100000 "$n" "find sees 100000 files"
	n=$(find "$V" -mindepth 1 -maxdepth 1 -type d -name 'd*' | wc -l)
	assert_eq 100 "$n" "find sees 100 directories"
	assert_ok sh -c "ls -lR '$V' > /dev/null"

	touch "$T_DIR/marker"
	sleep 1.1
	assert_ok sh -c "find '$V' -type f -print0 | xargs -0 -n 2000 touch"
	n=$(find "$V" -type f -newer "$T_DIR/marker" | wc -l)
	assert_eq 100000 "$n" "every file touched"

	# The same walk as an unprivileged caller (lost+found is root's): reopening evicted inodes
	# must work as her too.
	n=$(as_user "$SFS_ALICE" sh -c "find '$V' -path '$V/lost+found' -prune -o -type f -print | wc -l")
	assert_eq 100000 "$n" "alice's find sees 100000 files"
	assert_ok as_user "$SFS_ALICE" sh -c "find '$V' -path '$V/lost+found' -prune -o -type f -print0 | xargs -0 -n 2000 cat > /dev/null"
	assert_ok as_user "$SFS_ALICE" sh -c "ls -lR '$V'/d[0-9]* > /dev/null"

	assert_ok pid_alive "$pid"
	fds=$(ls "/proc/$pid/fd" | wc -l)
	assert_lt "$fds" 1024 "daemon holds $fds descriptors"

	# memory follows the inodes the kernel remembers: at most 1 KiB a node, given back once
	# the kernel forgets them
	local nodes rss per
	nodes=$(daemon_field "$V" .cache.inodes)
	rss=$(proc_status "$pid" VmRSS)
	per=$(((rss - rss_idle) * 1024 / nodes))
	log "daemon: $nodes nodes, RSS $rss kB (idle $rss_idle kB): $per bytes a node"
	assert_gt "$nodes" 50000 "the kernel remembers most of the files"
	assert_lt "$per" 1024 "a node costs under 1 KiB"
	sync
	echo 2 >/proc/sys/vm/drop_caches
	assert_ok wait_until 20 _nodes_below "$V" 1000
	assert_ok wait_until 10 _rss_below "$pid" $((rss_idle + (rss - rss_idle) / 2))
	log "after the kernel forgot them: $(daemon_field "$V" .cache.inodes) nodes, RSS $(proc_status "$pid" VmRSS) kB"
	assert_ok sfs_umount "$V"
	assert_ok pid_gone "$pid"
	assert_ok wait_until 3 no_loop_for "$IMG"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
