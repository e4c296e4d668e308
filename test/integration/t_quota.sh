#!/bin/bash
# Quota (contract §5.4): exact accounting per user, group and in total through every view, limits
# enforced only in the views that ask (quota, usrquota, grpquota, size=, inodes=), soft limits
# with grace, limits kept in /.strictfs/ across restarts, df that tells the caller the truth,
# and `strictfs quota set|grace|report|check`.
# transport-independent: accounting and limits live in the policy layer above the transport; t_data carries the write path in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

EDQUOT_MSG="Disk quota exceeded"

# quota_views OPTS: a fresh source with an enforcing view Q (OPTS) and a noquota view N, both
# writable by everyone at the root.
quota_views() {
	new_source quota
	Q=$T_DIR/q
	N=$T_DIR/n
	view "$1" "$LOOP" "$Q"
	view noquota "$LOOP" "$N"
	chmod 1777 "$N"
}

quota() { "$STRICTFS" quota "$@"; }

# used TYPE ID bytes|inodes: the live usage the daemon reports (0 for an id the report does not
# list: it lists the ids with inodes or limits). A failed report prints "report-failed", which
# is no number and equals no other helper's output: it never reads as 0.
used() {
	local r
	r=$(quota report "$LOOP" --json) || {
		log "used: strictfs quota report $LOOP failed" >&2
		echo report-failed
		return 1
	}
	jq -er --argjson id "$2" --arg t "${1}s" --arg res "$3" '
		.[$t] | if type != "array" then error("no \($t) table") else . end
		| [.[] | select(.id == $id)]
		| if length == 0 then 0 else .[0][$res].used end
		| if type == "number" then . else error("no used \($res)") end' <<<"$r" || {
		log "used: no $1 $2 $3 in the report: $(tr '\n' ' ' <<<"$r" | cut -c1-300)" >&2
		echo report-failed
		return 1
	}
}

# du_of MOUNTPOINT uid|gid ID: bytes (st_blocks * 512) and inodes of ID's objects as a user
# sees them through a view, hard links once; "find-failed" if find fails.
du_of() {
	local fmt=%U out
	[[ $2 == gid ]] && fmt=%G
	out=$(find "$1" -xdev -printf "$fmt %i %b\n") || {
		echo find-failed
		return 1
	}
	awk -v id="$3" '$1 == id && !seen[$2]++ { b += $3 * 512; n++ } END { printf "%d %d\n", b, n }' <<<"$out"
}

assert_check_clean() { # MSG: `strictfs quota check` finds the live ledger equal to a fresh scan
	assert_ok quota check "$LOOP"
	assert_contains "$(cat "$T_DIR/.out")" "live accounting equals a fresh scan" "$1"
}

# python3 probe: one write of SIZE bytes at OFFSET to PATH, prints the errno name or "ok N".
pywrite() {
	"$PY" - "$@" <<'EOF'
import errno, os, sys
path, off, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
try:
    print("ok", os.pwrite(fd, b"q" * size, off))
except OSError as e:
    print(errno.errorcode[e.errno])
EOF
}

# ---- accounting -----------------------------------------------------------------------------

test_quota_accounting_follows_every_operation() {
	quota_views quota
	local A B ua ub
	ua=$(id -u "$SFS_ALICE")
	ub=$(id -u "$SFS_BOB")
	assert_eq done "$(daemon_field "$Q" .quota.scan)" "status: the start-up scan is done"
	assert_eq true "$(daemon_field "$Q" '.quota.progress == 1')" "status: progress 1"
	as_user "$SFS_ALICE" mkdir "$N/al"
	A=$N/al
	as_user "$SFS_ALICE" dd if=/dev/urandom of="$A/dd" bs=64k count=16 status=none
	as_user "$SFS_ALICE" fallocate -l 3M "$A/falloc"
	as_user "$SFS_ALICE" truncate -s 10M "$A/sparse"
	as_user "$SFS_ALICE" dd if=/dev/zero of="$A/sparse" bs=4k count=3 seek=100 conv=notrunc status=none
	as_user "$SFS_ALICE" cp "$A/dd" "$Q/al-copy"
	as_user "$SFS_ALICE" ln "$A/dd" "$A/dd.link"
	as_user "$SFS_ALICE" ln -s "$(printf 'x%.0s' {1..100})" "$A/longlink"
	as_user "$SFS_ALICE" ln -s short "$A/shortlink"
	as_user "$SFS_ALICE" mkdir -p "$A/d1/d2/d3"
	for i in $(seq 1 200); do : >"$A/d1/f$i"; done # root's: makes d1 grow a block
	as_user "$SFS_ALICE" setfattr -n user.big -v "$(head -c 3000 /dev/zero | tr '\0' y)" "$A/falloc"
	assert_check_clean "after creates, writes, links, xattrs"
	assert_eq "$(du_of "$N" uid "$ua" | cut -d' ' -f1)" "$(used user "$ua" bytes)" "alice's bytes = what find sees"
	assert_eq "$(du_of "$N" uid "$ua" | cut -d' ' -f2)" "$(used user "$ua" inodes)" "alice's inodes = what find sees (hard link once)"

	as_user "$SFS_ALICE" mv "$A/dd" "$Q/moved"
	as_user "$SFS_ALICE" truncate -s 4k "$A/falloc"
	as_user "$SFS_ALICE" fallocate -p -o 0 -l 64k "$Q/moved"
	as_user "$SFS_ALICE" setfattr -x user.big "$A/falloc"
	chown "$SFS_BOB" "$Q/al-copy"
	chgrp "$SFS_GRP" "$A/sparse"
	rm -rf "$A/d1"
	as_user "$SFS_ALICE" rm "$A/dd.link"
	: >"$Q/moved.victim"
	mv "$Q/moved.victim" "$A/shortlink" # rename onto a victim
	assert_check_clean "after moves, truncates, punches, chown, chgrp, removals, rename onto a file"
	for who in "uid $ua" "uid $ub" "gid $(getent group "$SFS_GRP" | cut -d: -f3)"; do
		set -- $who
		local t=user
		[[ $1 == gid ]] && t=group
		assert_eq "$(du_of "$N" "$1" "$2" | cut -d' ' -f1)" "$(used "$t" "$2" bytes)" "$t $2 bytes = what find sees"
		assert_eq "$(du_of "$N" "$1" "$2" | cut -d' ' -f2)" "$(used "$t" "$2" inodes)" "$t $2 inodes = what find sees"
	done
}

# scan_done MOUNTPOINT: the start-up scan of the view's daemon has ended well
scan_done() { [[ $(daemon_field "$1" .quota.scan) == done ]]; }

# Past 512 multiply linked files the start-up scan's set of inode numbers grows, and a number
# placed with one hash and looked for with another was counted again at its second name.
test_quota_hard_links_count_once_past_many() {
	new_source qlinks
	local NAT=$T_DIR/native V=$T_DIR/v ua native
	ua=$(id -u "$SFS_ALICE")
	mkdir -p "$NAT"
	need mount "$LOOP" "$NAT"
	need mkdir "$NAT/h"
	need "$PY" -c 'import os, sys
for i in range(3000):
    f = os.path.join(sys.argv[1], "f%d" % i)
    open(f, "w").close()
    os.link(f, os.path.join(sys.argv[1], "g%d" % i))' "$NAT/h"
	need chown -R "$SFS_ALICE" "$NAT/h"
	native=$(du --inodes -s "$NAT/h" | cut -f1)
	assert_eq 3001 "$native" "native du: 3000 files with two names each and their directory"
	assert_eq 6000 "$(find "$NAT/h" -type f -links 2 | wc -l)" "native find: 6000 names of twice linked files"
	umount "$NAT"
	view "" "$LOOP" "$V"
	wait_until 30 scan_done "$V" || die "the start-up scan did not end well"
	assert_eq "$native" "$(used user "$ua" inodes)" "alice's inodes: each file once, as du counts them"
	assert_eq "$(du_of "$V" uid "$ua")" "$(used user "$ua" bytes) $(used user "$ua" inodes)" \
		"alice's bytes and inodes = what find sees through the view"
	assert_check_clean "quota check agrees"
}

test_quota_open_unlinked_file_counted_until_last_close() {
	# contract §5.4: a file whose last name went while it is open stays counted until its
	# last close, as ext4 charges it; writes to it count and are limited like any other
	quota_views quota
	local ua pid
	ua=$(id -u "$SFS_ALICE")
	as_user "$SFS_ALICE" dd if=/dev/zero of="$N/gone" bs=64k count=4 status=none
	assert_eq 1 "$(used user "$ua" inodes)" "alice is charged the file's inode"
	assert_eq 262144 "$(used user "$ua" bytes)" "and its 256 KiB"
	# a process holds the file open while it is removed and written on, and keeps it open
	# until told (the file "go" appears); it writes its blocks into "ready"
	: >"$T_DIR/ready"
	chmod 666 "$T_DIR/ready"
	as_user "$SFS_ALICE" "$PY" -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
os.unlink(sys.argv[1])
os.pwrite(fd, b"z" * 65536, 1 << 20)
os.fsync(fd)
assert os.fstat(fd).st_nlink == 0
open(sys.argv[2], "w").write(str(os.fstat(fd).st_blocks * 512))
end = time.time() + 60
while not os.path.exists(sys.argv[3]) and time.time() < end:
    time.sleep(0.05)
os.close(fd)' "$Q/gone" "$T_DIR/ready" "$T_DIR/go" &
	pid=$!
	wait_until 20 test -s "$T_DIR/ready" || die "the holder of the unlinked file did not get ready"
	assert_ok pid_alive "$pid"
	assert_eq 327680 "$(cat "$T_DIR/ready")" "the unlinked file holds 320 KiB"
	assert_eq 1 "$(used user "$ua" inodes)" "open and unlinked: still alice's inode"
	assert_eq 327680 "$(used user "$ua" bytes)" "and her bytes, the write after the unlink too"
	assert_check_clean "open and unlinked: the ledger equals a scan and the open files"
	touch "$T_DIR/go"
	wait "$pid"
	assert_eq 0 "$?" "the holder wrote on the unlinked file and closed it"
	assert_eq "0 0" "$(used user "$ua" inodes) $(used user "$ua" bytes)" "all of it goes at the last close"
	assert_check_clean "ledger equals a scan"
}

test_quota_writes_to_unlinked_files_are_limited() {
	# files with no name count toward the limit while open: writes to them cannot pass it
	quota_views quota
	assert_ok quota set "$LOOP" -u "$SFS_ALICE" --bhard 1M
	assert_eq "EDQUOT after 1048576" "$(as_user "$SFS_ALICE" "$PY" -c '
import errno, os, sys
fds, n = [], 0
try:
    for i in range(8):
        fd = os.open(f"{sys.argv[1]}/t{i}", os.O_CREAT | os.O_RDWR, 0o600)
        os.unlink(f"{sys.argv[1]}/t{i}")
        fds.append(fd)
        for _ in range(4):
            os.write(fd, b"u" * 65536)
            n += 65536
    print("no limit after", n)
except OSError as e:
    print(errno.errorcode[e.errno], "after", n)' "$Q")" "eight unlinked files together stop at alice's 1M"
	assert_eq "0 0" "$(used user "$(id -u "$SFS_ALICE")" inodes) $(used user "$(id -u "$SFS_ALICE")" bytes)" \
		"closed, nothing stays"
	assert_check_clean "ledger equals a scan"
}

# churn DIR TAG: a few seconds of creates, writes, appends, truncates, links, renames and
# removals in DIR.
churn() {
	local d=$1 t=$2 i end=$((SECONDS + 4))
	mkdir -p "$d/$t"
	while ((SECONDS < end)); do
		i=$((RANDOM % 20))
		case $((RANDOM % 7)) in
		0) head -c $((RANDOM * 4)) /dev/zero >"$d/$t/f$i" ;;
		1) head -c 5000 /dev/zero >>"$d/$t/f$i" ;;
		2) truncate -s $((RANDOM % 100000)) "$d/$t/f$i" ;;
		3) ln "$d/$t/f$i" "$d/$t/l$i" ;;
		4) mv "$d/$t/f$i" "$d/$t/f$(((i + 1) % 20))" ;;
		5) rm -f "$d/$t/f$i" "$d/$t/l$i" ;;
		6) fallocate -l $((RANDOM * 2)) "$d/$t/f$i" ;;
		esac 2>/dev/null
	done
}

test_quota_concurrent_changes_stay_exact() {
	quota_views quota
	assert_ok quota set "$LOOP" -u "$SFS_ALICE" --bhard 100M
	as_user "$SFS_ALICE" bash -c "$(declare -f churn); churn '$Q' a1" &
	local p1=$!
	as_user "$SFS_ALICE" bash -c "$(declare -f churn); churn '$N' a2" &
	local p2=$!
	as_user "$SFS_BOB" bash -c "$(declare -f churn); churn '$Q' b1" &
	local p3=$!
	churn "$N" r1 &
	local p4=$!
	wait "$p1" "$p2" "$p3" "$p4"
	# the same files, reached through both views at once
	as_user "$SFS_ALICE" bash -c "$(declare -f churn); churn '$Q' shared" &
	p1=$!
	as_user "$SFS_ALICE" bash -c "$(declare -f churn); churn '$N' shared" &
	p2=$!
	wait "$p1" "$p2"
	assert_check_clean "four writers, two views, the same files: the ledger equals a scan"
}

# ---- hard limits ------------------------------------------------------------------------------

test_quota_user_block_limit() {
	quota_views usrquota
	local ua
	ua=$(id -u "$SFS_ALICE")
	assert_ok quota set "$LOOP" -u "$SFS_ALICE" --bhard 1M
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" dd if=/dev/zero of="$Q/big" bs=64k count=32 status=none
	local b
	b=$(used user "$ua" bytes)
	assert_eq 1048576 "$b" "alice is charged exactly up to her limit"
	assert_eq 1048576 "$(stat -c %s "$Q/big")" "the file holds what fitted"
	assert_eq EDQUOT "$(as_user "$SFS_ALICE" bash -c "$(declare -f pywrite); PY=$PY pywrite '$Q/big' 1048576 1")" \
		"one more byte: EDQUOT"
	assert_eq 1048576 "$(stat -c %s "$Q/big")" "and the file is as it was"
	assert_eq "ok 4096" "$(as_user "$SFS_ALICE" bash -c "$(declare -f pywrite); PY=$PY pywrite '$Q/big' 0 4096")" \
		"overwriting allocated blocks needs no quota"
	assert_ok as_user "$SFS_ALICE" dd if=/dev/zero of="$N/elsewhere" bs=64k count=4 status=none
	assert_gt "$(used user "$ua" bytes)" 1048576 "a noquota view accounts but does not enforce"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" fallocate -l 1M "$Q/fa"
	assert_eq 0 "$(stat -c %s "$Q/fa")" "refused fallocate leaves the file empty"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" cp "$Q/big" "$Q/copy"
	assert_ok as_user "$SFS_ALICE" truncate -s 1G "$Q/sparse"
	assert_eq 1073741824 "$(stat -c %s "$Q/sparse")" "a sparse extension allocates nothing and passes"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" sh -c "head -c 4096 /dev/zero >> '$Q/sparse'"
	assert_ok as_user "$SFS_ALICE" rm "$N/elsewhere" "$Q/copy" "$Q/big"
	assert_ok as_user "$SFS_ALICE" sh -c "head -c 4096 /dev/zero >> '$Q/sparse'"
	assert_check_clean "ledger equals a scan after the refusals"
}

test_quota_root_is_not_exempt() {
	quota_views usrquota
	assert_ok quota set "$LOOP" -u root --bhard 64K --ihard 10
	assert_fails_with "$EDQUOT_MSG" dd if=/dev/zero of="$Q/r" bs=64k count=4 status=none
	assert_ok dd if=/dev/zero of="$N/r2" bs=64k count=4 status=none
	assert_ok quota set "$LOOP" -u 0 --bhard 0 --ihard 0
	assert_ok dd if=/dev/zero of="$Q/r" bs=64k count=4 status=none
}

test_quota_inode_limit() {
	quota_views quota
	local ua
	ua=$(id -u "$SFS_ALICE")
	assert_ok quota set "$LOOP" -u "$SFS_ALICE" --ihard 3
	assert_ok as_user "$SFS_ALICE" touch "$Q/1" "$Q/2" "$Q/3"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" touch "$Q/4"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" mkdir "$Q/d"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" ln -s 1 "$Q/s"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" mkfifo "$Q/p"
	assert_ok as_user "$SFS_ALICE" ln "$Q/1" "$Q/hard"
	assert_eq 3 "$(used user "$ua" inodes)" "a hard link costs no inode"
	assert_ok test ! -e "$Q/4" -a ! -e "$Q/d" -a ! -e "$Q/s" -a ! -e "$Q/p"
	assert_ok as_user "$SFS_ALICE" touch "$N/4"
	assert_eq 4 "$(used user "$ua" inodes)" "the noquota view creates, and it is counted"
}

test_quota_group_limit_and_setgid_directory() {
	quota_views grpquota
	local g
	g=$(getent group "$SFS_GRP" | cut -d: -f3)
	mkdir "$Q/shared"
	chgrp "$SFS_GRP" "$Q/shared"
	chmod 2777 "$Q/shared"
	assert_ok quota set "$LOOP" -g "$SFS_GRP" --ihard 3
	local before
	before=$(used group "$g" inodes)
	assert_eq 1 "$before" "the setgid directory is the group's"
	assert_ok as_user "$SFS_BOB" touch "$Q/shared/b1" "$Q/shared/b2"
	assert_eq "$SFS_GRP" "$(stat -c %G "$Q/shared/b1")" "bob's file gets the directory's group"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_BOB" touch "$Q/shared/b3"
	assert_ok as_user "$SFS_BOB" touch "$Q/bob-own"
	assert_check_clean "ledger equals a scan"
}

test_quota_chown_to_user_over_limit() {
	quota_views usrquota
	dd if=/dev/zero of="$Q/f" bs=64k count=4 status=none
	assert_ok quota set "$LOOP" -u "$SFS_BOB" --bhard 128K
	assert_fails_with "$EDQUOT_MSG" chown "$SFS_BOB" "$Q/f"
	assert_eq root "$(stat -c %U "$Q/f")" "owner unchanged"
	assert_ok chown "$SFS_BOB" "$N/f"
	assert_eq "$SFS_BOB" "$(stat -c %U "$Q/f")" "a noquota view may chown"
	assert_check_clean "ledger equals a scan"
}

test_quota_xattr_block_past_limit_is_undone() {
	quota_views usrquota
	as_user "$SFS_ALICE" sh -c "echo data > '$Q/x'"
	local ua bytes
	ua=$(id -u "$SFS_ALICE")
	bytes=$(used user "$ua" bytes)
	assert_ok quota set "$LOOP" -u "$SFS_ALICE" --bhard "$bytes"
	assert_ok as_user "$SFS_ALICE" setfattr -n user.small -v 1 "$Q/x"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" setfattr -n user.big -v "$(head -c 3000 /dev/zero | tr '\0' z)" "$Q/x"
	assert_fails_with "No such attribute" getfattr --only-values -n user.big "$Q/x"
	assert_eq 1 "$(getfattr --only-values -n user.small "$Q/x")" "the small one stays"
	assert_eq "$bytes" "$(used user "$ua" bytes)" "usage back where it was"
}

# ---- soft limits and grace ----------------------------------------------------------------

test_quota_soft_limit_grace_expires() {
	quota_views usrquota
	local ua
	ua=$(id -u "$SFS_ALICE")
	assert_ok quota grace "$LOOP" --blocks 2s --inodes 1h
	assert_ok quota set "$LOOP" -u "$SFS_ALICE" --bsoft 64K --bhard 1M
	assert_ok as_user "$SFS_ALICE" dd if=/dev/zero of="$Q/a" bs=64k count=2 status=none
	local ends
	ends=$(quota report "$LOOP" --json | jq -r --argjson id "$ua" '.users[] | select(.id == $id) | .bytes.grace_ends')
	assert_ok test "$ends" -gt 0
	assert_ok as_user "$SFS_ALICE" dd if=/dev/zero of="$Q/b" bs=4k count=1 status=none
	sleep 2.5
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" dd if=/dev/zero of="$Q/c" bs=4k count=1 status=none
	assert_ok as_user "$SFS_ALICE" touch "$Q/empty" # no blocks: inodes are within their grace
	assert_ok as_user "$SFS_ALICE" rm "$Q/a" "$Q/b" "$Q/c"
	assert_eq null "$(quota report "$LOOP" --json | jq -r --argjson id "$ua" '.users[] | select(.id == $id) | .bytes.grace_ends')" \
		"back under the soft limit: no grace timer"
	assert_ok as_user "$SFS_ALICE" dd if=/dev/zero of="$Q/d" bs=4k count=1 status=none
}

# ---- persistence --------------------------------------------------------------------------

test_quota_limits_survive_restart() {
	quota_views quota
	local pid ua
	ua=$(id -u "$SFS_ALICE")
	pid=$(view_pid "$Q")
	assert_ok quota set "$LOOP" -u "$SFS_ALICE" --bsoft 1M --bhard 2M --isoft 10 --ihard 20
	assert_ok quota set "$LOOP" -g "$SFS_GRP" --ihard 5
	assert_ok quota grace "$LOOP" --blocks 3d --inodes 12h
	as_user "$SFS_ALICE" dd if=/dev/zero of="$Q/f" bs=64k count=20 status=none
	assert_ok sfs_umount "$Q"
	assert_ok sfs_umount "$N"
	wait_daemon_gone "$pid"
	mkdir -p "$T_DIR/native"
	need mount -o ro "$LOOP" "$T_DIR/native"
	local st
	st=$(cat "$T_DIR/native/.strictfs/quota")
	assert_ok grep -qx "version 1" <<<"$st"
	assert_ok grep -qE "^user $ua bsoft=1048576 bhard=2097152 isoft=10 ihard=20( |\$)" <<<"$st"
	assert_ok grep -qx "grace blocks=259200 inodes=43200" <<<"$st"
	assert_ok test ! -e "$T_DIR/native/.strictfs/quota.new"
	assert_eq "600 root" "$(stat -c '%a %U' "$T_DIR/native/.strictfs/quota")" "state file is root's, 0600"
	umount "$T_DIR/native"
	view usrquota "$LOOP" "$Q"
	local r
	r=$(quota report "$LOOP" --json)
	assert_eq "1048576 2097152 10 20" "$(jq -r --argjson id "$ua" '.users[] | select(.id == $id) | "\(.bytes.soft) \(.bytes.hard) \(.inodes.soft) \(.inodes.hard)"' <<<"$r")" \
		"limits back after restart"
	assert_eq "259200 43200" "$(jq -r '"\(.grace.blocks) \(.grace.inodes)"' <<<"$r")" "grace times back"
	assert_eq 1310720 "$(jq -r --argjson id "$ua" '.users[] | select(.id == $id) | .bytes.used' <<<"$r")" \
		"usage rebuilt by the scan"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" dd if=/dev/zero of="$Q/g" bs=64k count=20 status=none
}

test_quota_refuses_corrupt_state_file() {
	new_source qbad
	mkdir -p "$T_DIR/native"
	need mount "$LOOP" "$T_DIR/native"
	mkdir "$T_DIR/native/.strictfs"
	printf 'version 1\nuser 1000 bsoft=x\n' >"$T_DIR/native/.strictfs/quota"
	umount "$T_DIR/native"
	mkdir "$T_DIR/v"
	assert_refused "/.strictfs/quota: line 2: malformed line" "$STRICTFS" mount "$LOOP" "$T_DIR/v"
	need mount "$LOOP" "$T_DIR/native"
	assert_eq "$(printf 'version 1\nuser 1000 bsoft=x')" "$(cat "$T_DIR/native/.strictfs/quota")" "the file is left as it was"
	umount "$T_DIR/native"
}

# ---- view limits and df -------------------------------------------------------------------

test_quota_size_and_inodes_view() {
	new_source qsize
	local V=$T_DIR/v W=$T_DIR/w
	view size=4M,inodes=20 "$LOOP" "$V"
	view "" "$LOOP" "$W"
	assert_eq 4194304 "$(view_opt "$V" size)" "status: size"
	assert_eq 20 "$(view_opt "$V" inodes)" "status: inodes"
	local used_kib
	used_kib=$(quota report "$LOOP" --json | jq -r '.total.bytes.used / 1024 | ceil')
	assert_eq "4096 $used_kib" "$(df -B1K --output=size,used "$V" | tail -1 | awk '{print $1, $2}')" "df: the view's size and usage"
	assert_eq 20 "$(df --output=itotal "$V" | tail -1 | tr -d ' ')" "df -i: the view's inodes"
	assert_fails_with "$EDQUOT_MSG" dd if=/dev/zero of="$V/big" bs=1M count=8 status=none
	assert_lt "$(du -k "$W/big" | cut -f1)" 4096 "the view's tree stayed under 4M"
	assert_ok dd if=/dev/zero of="$W/big2" bs=1M count=8 status=none
	assert_ok touch "$V/empty" # an inode without blocks still fits
	assert_fails_with "$EDQUOT_MSG" mkdir "$V/dir" # a directory needs a block
	assert_ok sh -c "rm '$W/big2' '$W/big'"
	assert_ok mkdir "$V/dir"
	local n refused=
	n=$(quota report "$LOOP" --json | jq -r '.total.inodes.used')
	[[ $n =~ ^[0-9]+$ ]] || die "no total inodes in the quota report: '$n'"
	for ((i = n; i < 20; i++)); do touch "$V/f$i" || refused+=" f$i"; done
	assert_eq "" "$refused" "the view creates up to its 20 inodes"
	assert_fails_with "$EDQUOT_MSG" touch "$V/one-more"
	assert_ok touch "$W/one-more"
	assert_ok "$STRICTFS" quota set "$LOOP" --view "$V" --bhard 64M --ihard 0
	assert_eq 67108864 "$(view_opt "$V" size)" "quota set --view changes the view's size live"
	assert_ok dd if=/dev/zero of="$V/big" bs=1M count=8 status=none
}

# tree_usage MOUNTPOINT: usage of a view's tree in the report, "bytes inodes"; "report-failed"
# if the report fails or has no such view.
tree_usage() {
	local r
	if r=$(quota report "$LOOP" --json) &&
		jq -er --arg m "$1" '.views[] | select(.mountpoint == $m) | "\(.bytes) \(.inodes)"' <<<"$r"; then
		return 0
	fi
	echo report-failed
	return 1
}

# what find sees under a directory: "bytes inodes", hard links once; "find-failed" if find fails
find_usage() {
	local out
	out=$(find "$1" -xdev -printf '%i %b\n') || {
		echo find-failed
		return 1
	}
	awk '!seen[$1]++ { b += $2 * 512; n++ } END { printf "%d %d\n", b, n }' <<<"$out"
}

rename_errno() { # FROM TO: rename(2) as one call, the errno name or "ok"
	"$PY" -c 'import errno, os, sys
try:
    os.rename(sys.argv[1], sys.argv[2]); print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])' "$1" "$2"
}

test_quota_subdir_view_trees() {
	new_source qtree
	local F=$T_DIR/f V1=$T_DIR/v1 V2=$T_DIR/v2
	view "" "$LOOP" "$F"
	mkdir -p "$F/c1/deep" "$F/c2"
	dd if=/dev/zero of="$F/c1/deep/old" bs=64k count=16 status=none
	ln "$F/c1/deep/old" "$F/c1/old-link"
	view subdir=/c1,size=4M "$LOOP" "$V1"
	view subdir=/c2,inodes=5 "$LOOP" "$V2"
	assert_eq "$(find_usage "$F/c1")" "$(tree_usage "$V1")" "the tree's usage from its scan = what find sees"
	assert_eq "4096" "$(df -B1K --output=size "$V1" | tail -1 | tr -d ' ')" "df: the view's size"
	assert_fails_with "$EDQUOT_MSG" dd if=/dev/zero of="$V1/big" bs=1M count=8 status=none
	assert_eq "$(find_usage "$F/c1")" "$(tree_usage "$V1")" "usage follows the writes"
	assert_lt "$(find_usage "$F/c1" | cut -d' ' -f1)" 4194305 "the tree stayed within 4M"
	assert_ok dd if=/dev/zero of="$F/c1/big2" bs=1M count=1 status=none # F enforces nothing
	assert_ok dd if=/dev/zero of="$F/outside" bs=1M count=8 status=none
	assert_eq "$(find_usage "$F/c1")" "$(tree_usage "$V1")" "writes outside the tree do not count in it"
	assert_ok touch "$V2/1" "$V2/2" "$V2/3" "$V2/4"
	assert_fails_with "$EDQUOT_MSG" touch "$V2/5"
	assert_eq EXDEV "$(rename_errno "$F/c1/big2" "$F/big2")" "rename out of the tree: EXDEV, as across ext4 project quotas"
	assert_eq EXDEV "$(rename_errno "$F/outside" "$F/c1/outside")" "rename into the tree: EXDEV"
	assert_eq EXDEV "$(rename_errno "$F/c1/deep" "$F/c2/deep")" "a directory from tree to tree: EXDEV"
	assert_fails_with "Invalid cross-device link" ln "$F/c1/deep/old" "$F/old-link"
	assert_eq ok "$(rename_errno "$F/c1/big" "$F/c1/deep/big")" "renames inside the tree work"
	assert_ok mv "$F/c1/big2" "$F/big2" # mv copies across the edge
	assert_ok test -e "$F/big2" -a ! -e "$F/c1/big2"
	assert_ok rm "$V1/old-link"
	assert_eq "$(find_usage "$F/c1")" "$(tree_usage "$V1")" "usage after mv, rename, unlink of one link"
	assert_eq "$(find_usage "$F/c2")" "$(tree_usage "$V2")" "the other tree too"
	assert_check_clean "ledger and trees equal a scan"
	assert_ok sfs_umount "$V1"
	assert_eq ok "$(rename_errno "$F/c1/deep" "$F/deep")" "with no view tracking it, the edge is gone"
}

test_quota_df_shows_callers_own_limits() {
	quota_views usrquota
	assert_ok quota set "$LOOP" -u "$SFS_ALICE" --bsoft 2M --bhard 8M --ihard 100
	as_user "$SFS_ALICE" dd if=/dev/zero of="$Q/a" bs=64k count=8 status=none
	assert_eq "2048 512 1536" "$(as_user "$SFS_ALICE" df -B1K --output=size,used,avail "$Q" | tail -1 | awk '{print $1, $2, $3}')" \
		"alice's df: her soft limit, her usage, what is left"
	assert_eq 100 "$(as_user "$SFS_ALICE" df --output=itotal "$Q" | tail -1 | tr -d ' ')" "alice's df -i: her inode limit"
	local full
	full=$(df -B1K --output=size "$N" | tail -1 | tr -d ' ')
	assert_eq "$full" "$(as_user "$SFS_BOB" df -B1K --output=size "$Q" | tail -1 | tr -d ' ')" "bob has no limit: the backing's size"
	assert_eq "$full" "$(as_user "$SFS_ALICE" df -B1K --output=size "$N" | tail -1 | tr -d ' ')" "a noquota view: the backing's size"
}

test_quota_remount_turns_enforcement_on() {
	quota_views noquota
	assert_ok quota set "$LOOP" -u "$SFS_ALICE" --ihard 1
	assert_ok as_user "$SFS_ALICE" touch "$Q/1" "$Q/2"
	assert_ok "$STRICTFS" mount -o remount,usrquota "$Q"
	assert_eq usrquota "$(view_opt "$Q" quota)" "status after remount"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" touch "$Q/3"
	assert_ok "$STRICTFS" mount -o remount,noquota "$Q"
	assert_ok as_user "$SFS_ALICE" touch "$Q/3"
}

# ---- check ----------------------------------------------------------------------------------

test_quota_check_finds_writes_behind_its_back() {
	new_source qshare
	local NAT=$T_DIR/native V=$T_DIR/v
	mkdir -p "$NAT"
	need mount "$LOOP" "$NAT"
	view share=existing "$LOOP" "$V"
	assert_check_clean "equal before anything changes"
	dd if=/dev/zero of="$NAT/behind" bs=64k count=4 status=none
	sync
	assert_exit 1 quota check "$LOOP"
	assert_contains "$(cat "$T_DIR/.out")" "user 0 bytes: live" "the difference is listed"
	assert_contains "$(cat "$T_DIR/.err")" "quota accounting differs from a fresh scan" "and named on stderr"
	assert_ok sfs_umount "$V"
	umount "$NAT"
}

# ---- a backing the scan cannot read -----------------------------------------------------

# damage_dir_block IMG DIR: the last block of DIR (a directory of a few hundred entries, so an
# htree with leaf blocks of its own) overwritten with random bytes, nothing having IMG mounted.
damage_dir_block() {
	local blk
	blk=$(debugfs -R "blocks $2" "$1" 2>/dev/null | awk '{ print $NF }')
	[[ $blk =~ ^[0-9]+$ ]] || die "no block of $2 in $1"
	need dd if=/dev/urandom of="$1" bs=4096 seek="$blk" count=1 conv=notrunc status=none
}

# big_dir_image: an image IMG (no loop device attached: the daemon attaches its own) with /big,
# 300 entries, and /ok, both alice's.
big_dir_image() {
	local NAT=$T_DIR/native
	mkimg qdamaged
	IMG=$REPLY
	mkdir -p "$NAT"
	need mount "$IMG" "$NAT"
	need mkdir "$NAT/big" "$NAT/ok"
	need "$PY" -c 'import os, sys
for i in range(300):
    open(os.path.join(sys.argv[1], "an-entry-with-a-longish-name-%d" % i), "w").close()' "$NAT/big"
	need chown "$SFS_ALICE" "$NAT/big" "$NAT/ok"
	need umount "$NAT"
}

# damaged_image: big_dir_image with a 1 MiB limit for alice, and /big the start-up scan cannot
# read.
damaged_image() {
	local V=$T_DIR/v pid
	big_dir_image
	view "" "$IMG" "$V"
	pid=$(view_pid "$V")
	need "$STRICTFS" quota set "$IMG" -u "$SFS_ALICE" --bhard 1M
	need sfs_umount "$V"
	wait_daemon_gone "$pid" || die "the daemon of $IMG did not end"
	damage_dir_block "$IMG" /big
}

# The scan failed, so nobody knows how much alice uses: a view that would hold her to 1 MiB
# cannot, and is refused naming where the scan failed, rather than let her write 10 MiB.
scan_ended() { [[ $(daemon_field "$1" .quota.scan) != running ]]; } # MOUNTPOINT

test_quota_unreadable_backing_refuses_quota_views() {
	local V=$T_DIR/v W=$T_DIR/w NAT=$T_DIR/native why
	damaged_image
	mkdir -p "$V" "$W"
	assert_refused "strictfs: /big: quota scan failed: " "$STRICTFS" mount -o usrquota "$IMG" "$V"
	# the same, looked for by this image only (assert_refused sees every test's objects)
	assert_ok not_mounted "$V"
	assert_eq "" "$(daemon_procs "$(source_key "$IMG")")$(loops_of "$IMG")" \
		"no daemon and no loop device of the image are left"
	# native ext4 reading the same directory, for the reason
	need mount -o ro "$IMG" "$NAT"
	why=$(ls "$NAT/big" 2>&1 >/dev/null | sed 's/.*: //')
	umount "$NAT"
	assert_one_of "$why" "native ls of /big fails" "Bad message" "Structure needs cleaning"
	assert_refused "strictfs: /big: quota scan failed: $why (" "$STRICTFS" mount -o usrquota "$IMG" "$V"

	# a view that enforces nothing is served; status says where and why the scan failed
	view "" "$IMG" "$V"
	wait_until 10 scan_ended "$V"
	assert_eq "failed /big $why" "$(daemon_field "$V" '"\(.quota.scan) \(.quota.failed_at) \(.quota.error)"')" \
		"status: the scan failed at /big, and why"
	assert_contains "$("$STRICTFS" status)" "quota scan failed at /big: $why" "the status table too"
	for o in usrquota grpquota quota size=1G inodes=1M; do
		assert_refused "strictfs: /big: quota scan failed: $why" "$STRICTFS" mount -o "$o" "$IMG" "$W"
	done
	assert_refused "strictfs: /big: quota scan failed: $why" "$STRICTFS" mount -o remount,usrquota "$V"
	assert_eq none "$(view_opt "$V" quota)" "the view is unchanged"
	assert_exit 1 quota check "$IMG"
	assert_contains "$(cat "$T_DIR/.err")" "quota check failed: the start-up scan failed at /big: $why" \
		"quota check says so"
	assert_contains "$(quota report "$IMG")" "scan failed at /big: $why" "and so does the report"

	# a subdir= tree with size= is counted by a scan of its own, which can read it
	view subdir=/ok,size=2M "$IMG" "$W"
	assert_fails_with "$EDQUOT_MSG" as_user "$SFS_ALICE" dd if=/dev/zero of="$W/f" bs=1M count=4 status=none
	assert_ok sfs_umount "$W"
	# the noquota view holds alice to nothing, as it says
	assert_ok as_user "$SFS_ALICE" dd if=/dev/zero of="$V/ok/w" bs=1M count=2 status=none
}

# A view already enforcing limits when a scan fails behind it (here a successor's, after an
# upgrade, on a directory block damaged meanwhile): its allocations fail with EIO, as ext4's
# fail when it cannot read its quota, never pass unlimited; what frees space still works.
test_quota_scan_failing_behind_a_view_refuses_its_allocations() {
	local V=$T_DIR/v loop blk
	big_dir_image
	view usrquota "$IMG" "$V"
	assert_eq done "$(daemon_field "$V" .quota.scan)" "the first scan could read /big"
	assert_ok quota set "$IMG" -u "$SFS_ALICE" --bhard 1M
	assert_ok as_user "$SFS_ALICE" dd if=/dev/zero of="$V/ok/small" bs=64k count=1 status=none
	loop=$(daemon_field "$V" .backing.loop)
	blk=$(debugfs -R "blocks /big" "$IMG" 2>/dev/null | awk '{ print $NF }')
	[[ $loop == /dev/loop* && $blk =~ ^[0-9]+$ ]] || die "no loop device ($loop) or block of /big ($blk)"
	# direct I/O: the block's cached copy goes, so the next reader checks it again
	need dd if=/dev/urandom of="$loop" bs=4096 seek="$blk" count=1 oflag=direct conv=notrunc status=none
	assert_ok "$STRICTFS" upgrade "$IMG"
	wait_until 10 scan_ended "$V"
	assert_eq "failed /big" "$(daemon_field "$V" '"\(.quota.scan) \(.quota.failed_at)"')" \
		"the successor's scan failed at /big"
	assert_fails_with "Input/output error" as_user "$SFS_ALICE" dd if=/dev/zero of="$V/ok/w" bs=1M count=10 status=none
	assert_ok test ! -e "$V/ok/w"
	assert_fails_with "Input/output error" as_user "$SFS_ALICE" sh -c "head -c 8192 /dev/zero >> '$V/ok/small'"
	assert_eq 65536 "$(stat -c %s "$V/ok/small")" "the file is as it was"
	assert_fails_with "Input/output error" dd if=/dev/zero of="$V/rootfile" bs=4k count=1 status=none
	assert_ok as_user "$SFS_ALICE" rm "$V/ok/small"
}

# ---- refusals -------------------------------------------------------------------------------

test_quota_refusals() {
	quota_views usrquota
	assert_exit 2 quota set "$LOOP" --bhard 1M
	assert_exit 2 quota set "$LOOP" -u "$SFS_ALICE"
	assert_exit 2 quota bogus "$LOOP"
	assert_exit 2 quota report
	assert_refused "--bhard=1Q: not a size" "$STRICTFS" quota set "$LOOP" -u "$SFS_ALICE" --bhard 1Q
	assert_refused "nosuchuser_sfs: no such user" "$STRICTFS" quota set "$LOOP" -u nosuchuser_sfs --bhard 1M
	assert_refused "--blocks=soon: not a duration" "$STRICTFS" quota grace "$LOOP" --blocks soon
	assert_refused "--bsoft: a view has hard limits only" "$STRICTFS" quota set "$LOOP" --view "$Q" --bsoft 1M
	mkimg idle
	assert_refused "no strictfs daemon serves it" "$STRICTFS" quota report "$REPLY"
	assert_refused "cache=writeback: cannot be combined with quota" "$STRICTFS" mount -o quota,cache=writeback "$LOOP" "$T_DIR/x"
	assert_refused "size=12Q: not a size" "$STRICTFS" mount -o size=12Q "$LOOP" "$T_DIR/x"
	assert_refused "cache=writeback: cannot be combined with usrquota" "$STRICTFS" mount -o remount,cache=writeback "$Q"
	assert_eq strict "$(view_opt "$Q" cache)" "the view is unchanged"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
