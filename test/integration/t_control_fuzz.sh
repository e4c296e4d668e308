#!/bin/bash
# The control socket under attack (contract §6): a malformed or oversized request gets an error reply
# and the daemon keeps serving; clients that stall (connect and never send, send part of a
# frame, trickle a byte at a time) do not hold up the others. control_fuzz.py throws the
# requests; afterwards the daemon must still answer status, serve its view and add a new one.
# transport-independent: the control socket, not the view's request channel
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

daemon_socket() { # PID -> its control socket under /run/strictfs
	local inodes
	inodes=$(for f in /proc/"$1"/fd/*; do readlink "$f"; done 2>/dev/null |
		sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' | sort -u | tr '\n' ' ')
	awk -v list=" $inodes " 'NR > 1 && index(list, " " $7 " ") && $8 ~ /^\/run\/strictfs\// { print $8 }' /proc/net/unix | head -n1
}

jnum() { jq -r "$1" "$T_DIR/fuzz.json"; }

# fds_back PID N: the daemon holds no more descriptors than N: the descriptors the clients
# passed, and their connections, are all closed
fds_back() {
	local n
	n=$(ls /proc/"$1"/fd | wc -l)
	((n <= $2)) || { log "daemon $1 holds $n descriptors, $2 before"; return 1; }
}

test_control_fuzz() {
	mkimg cf
	IMG=$REPLY
	A=$T_DIR/a
	view noacl "$IMG" "$A"
	need sh -c "echo before > '$A/f'"
	PID=$(view_pid "$A")
	SOCK=$(daemon_socket "$PID")
	[[ -S $SOCK ]] || die "no control socket for daemon $PID"
	local fds_before
	fds_before=$(ls /proc/"$PID"/fd | wc -l)
	log "throwing ${SFS_FUZZ_REQUESTS:-3000} bad requests and 50 clients at $SOCK"
	"$PY" "$SFS_TEST_DIR/control_fuzz.py" "$SOCK" --requests "${SFS_FUZZ_REQUESTS:-3000}" \
		--clients 50 --hold 8 >"$T_DIR/fuzz.json" || die "control_fuzz.py failed"
	log "$(jq -c 'del(.by_kind)' "$T_DIR/fuzz.json")"
	log "by kind: $(jq -c '.by_kind' "$T_DIR/fuzz.json")"

	assert_ok pid_alive "$PID"
	assert_ok wait_until 5 fds_back "$PID" "$fds_before"
	assert_eq 0 "$(jnum .status_between_failed)" "every status between the bad requests was answered"
	assert_eq 0 "$(jnum '[.by_kind | to_entries[] | select(.key != "many-fds") | .value["ok-reply"] // 0] | add')" \
		"no bad request was accepted"
	assert_eq "$(jnum '.by_kind["many-fds"] | add')" "$(jnum '.by_kind["many-fds"]["ok-reply"]')" \
		"a status request with extra descriptors is answered"
	assert_eq 0 "$(jnum '[.by_kind[] | .closed // 0] | add')" "every bad request got an error reply"
	assert_eq "$(jnum .status_requests)" "$(jnum .status_answered)" \
		"every status request beside the stalled clients was answered"
	assert_gt "$(jnum .status_requests)" 50 "status clients kept getting answers"
	assert_lt "$(jnum '.status_max_seconds * 1000 | floor')" 3000 \
		"no status waited 3 s or more behind a stalled client"
	assert_eq "$A" "$(daemon_views "$PID")" "status lists the view, and only it"
	assert_eq before "$(cat "$A/f" 2>&1)" "the view still reads"
	assert_ok sh -c "echo after > '$A/g'"
	view acl "$IMG" "$T_DIR/b"
	assert_eq "$PID" "$(view_pid "$T_DIR/b")" "the same daemon adds a new view"
	assert_eq after "$(cat "$T_DIR/b/g" 2>&1)" "the new view sees the first one's file"

}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
