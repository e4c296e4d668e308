#!/bin/bash
# Per-container views (contract §6): `strictfs mount --namespace PID` and mount(8)'s -N put a view
# in another process's mount namespace, served by the same daemon as the host's views,
# invisible outside, and dropped when that namespace ends.
# transport-independent: which namespace a view lives in is decided at mount, above the transport
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

test_container_view_beside_host_views() {
	local C N=$T_DIR/ctview A=$T_DIR/a pid
	mkdir -p "$N"
	# the container first, so that it holds no copy of the host's view
	container_start
	C=$REPLY
	mkimg ct
	IMG=$REPLY
	view noacl "$IMG" "$A"
	pid=$(view_pid "$A")
	assert_ok "$STRICTFS" mount --namespace "$C" -o acl,user_xattr "$IMG" "$N"
	assert_eq "$IMG $N fuse.strictfs" "$(in_ns_mounts "$C" "$N")" \
		"the view is in the container's mount table, with the source as named"
	assert_ok not_mounted "$N"
	assert_eq "" "$(findmnt -n -o TARGET "$N")" "findmnt outside the container does not show it"
	assert_eq "$N" "$(nsenter -t "$C" -m -p findmnt -n -o TARGET "$N")" "findmnt inside the container shows it"
	assert_eq "$pid" "$(view_pid "$N")" "served by the daemon that serves the host's view"
	assert_eq "$A $N" "$(daemon_views "$pid")" "status lists both views"
	assert_eq true "$(view_opt "$N" acl)" "the container's view has its own options"
	assert_eq "$(readlink "/proc/$C/ns/mnt")" "$(view_field "$N" .mount_ns)" "status: the container's view's mount_ns"
	assert_eq "$(readlink /proc/self/ns/mnt)" "$(view_field "$A" .mount_ns)" "status: the host view's mount_ns"

	assert_ok nsenter -t "$C" -m -p -- sh -c "echo from-container > '$N/f'"
	assert_eq from-container "$(cat "$A/f" 2>&1)" "what the container wrote is seen by the host's view"
	assert_ok nsenter -t "$C" -m -p -- setfacl -m "u:$SFS_ALICE:r" "$N/f"
	assert_fails_with "Operation not supported" setfacl -m "u:$SFS_ALICE:r" "$A/f"
	assert_ok nsenter -t "$C" -m -p -- setfattr -n user.ct -v 1 "$N/f"

	# the container ends: its view goes, the daemon keeps serving the host
	kill "$C"
	assert_ok wait_until 10 status_lacks_view "$N"
	assert_eq "$A" "$(daemon_views "$pid")" "only the host's view is left"
	assert_eq from-container "$(cat "$A/f" 2>&1)" "the host's view still works"
	assert_ok sfs_umount "$A"
	assert_ok pid_gone "$pid"
	assert_ok wait_until 3 no_loop_for "$IMG"
}

test_container_first_view_starts_daemon() {
	# the daemon started for a container's view lives in the host's namespace; when the
	# container ends, the last view goes and the daemon releases the device
	local C N=$T_DIR/ctview pid
	mkdir -p "$N"
	container_start
	C=$REPLY
	new_source first
	assert_ok "$STRICTFS" mount -N "/proc/$C/ns/mnt" "$LOOP" "$N"
	assert_eq "$LOOP $N fuse.strictfs" "$(in_ns_mounts "$C" "$N")" "a namespace file names the target too"
	pid=$(view_pid "$N")
	assert_ne "" "$pid" "status lists the container's view"
	assert_eq "$(readlink /proc/self/ns/mnt)" "$(readlink "/proc/$pid/ns/mnt")" \
		"the daemon lives in the host's mount namespace"
	assert_ok nsenter -t "$C" -m -p -- sh -c "echo kept > '$N/f'"
	kill "$C"
	assert_ok wait_daemon_gone "$pid" 10
	assert_ok device_free "$LOOP"
	mkdir "$T_DIR/nat"
	assert_ok mount "$LOOP" "$T_DIR/nat"
	assert_eq kept "$(cat "$T_DIR/nat/f" 2>&1)" "the container's data reached the backing"
	umount "$T_DIR/nat"
}

test_container_refusals() {
	local C N=$T_DIR/ct/mp
	mkdir -p "$N"
	container_start
	C=$REPLY
	new_source ref
	# the mountpoint is resolved in the container: hide it there under a tmpfs
	assert_ok nsenter -t "$C" -m mount -t tmpfs sfs-ct "$T_DIR/ct"
	assert_refused "strictfs: $N: No such file or directory" "$STRICTFS" mount -N "$C" "$LOOP" "$N"
	assert_ok not_in_ns "$C" "$N"
	assert_eq "" "$(daemons_for_source "$LOOP")" "no daemon started"
	assert_ok nsenter -t "$C" -m umount "$T_DIR/ct"

	assert_refused "strictfs: --namespace 4194304: no such process" \
		"$STRICTFS" mount -N 4194304 "$LOOP" "$N"
	assert_refused "strictfs: --namespace /proc/self/ns/net: not a mount namespace" \
		"$STRICTFS" mount -N /proc/self/ns/net "$LOOP" "$N"
	assert_refused "strictfs: --namespace $T_DIR/nons: No such file or directory" \
		"$STRICTFS" mount -N "$T_DIR/nons" "$LOOP" "$N"
	assert_refused "strictfs: --namespace web1: not a PID or a namespace file" \
		"$STRICTFS" mount -N web1 "$LOOP" "$N"
	assert_refused "strictfs: --namespace 0: not a process id" "$STRICTFS" mount -N 0 "$LOOP" "$N"
	assert_refused "strictfs: --namespace: not with remount" \
		"$STRICTFS" mount -N "$C" -o remount,ro "$LOOP" "$N"
	# a refusal of the view itself, after the namespace was entered
	assert_refused "strictfs: casefold=bogus" "$STRICTFS" mount -N "$C" -o casefold=bogus "$LOOP" "$N"
	assert_ok not_in_ns "$C" "$N"
	# usage: the option needs its argument
	assert_exit 2 "$STRICTFS" mount "$LOOP" "$N" -N
	assert_contains "$(cat "$T_DIR/.err")" "Try 'strictfs --help'" "usage error points to --help"
	assert_ok not_in_ns "$C" "$N"
	assert_eq "" "$(daemons_for_source "$LOOP")" "no daemon left"
}

test_container_refused_by_daemon_unmounts_in_namespace() {
	# the daemon refuses after the FUSE mount was made in the container: it is taken back there
	local C N=$T_DIR/ctview A=$T_DIR/a
	mkdir -p "$N"
	container_start
	C=$REPLY
	new_source wb
	view cache=writeback "$LOOP" "$A"
	assert_refused "cache=writeback" "$STRICTFS" mount -N "$C" "$LOOP" "$N"
	assert_ok not_in_ns "$C" "$N"
	assert_eq "$A" "$(daemon_views "$(view_pid "$A")")" "the host's view is untouched"
}

test_container_umount_namespace() {
	local C N=$T_DIR/ctview A=$T_DIR/a pid
	mkdir -p "$N" "$T_DIR/plain"
	container_start
	C=$REPLY
	new_source um
	view noacl "$LOOP" "$A"
	pid=$(view_pid "$A")
	assert_ok "$STRICTFS" mount -N "$C" "$LOOP" "$N"
	# what is not a view of that namespace is refused by name, nothing unmounted
	assert_refused "strictfs: $T_DIR/plain: not a strictfs view in the namespace of --namespace $C" \
		"$STRICTFS" umount -N "$C" "$T_DIR/plain"
	assert_refused "strictfs: $A: not a strictfs view in the namespace of --namespace $C" \
		"$STRICTFS" umount -N "$C" "$A"
	assert_ok is_mounted "$A"
	assert_refused "strictfs: $T_DIR/nothere: No such file or directory" \
		"$STRICTFS" umount -N "$C" "$T_DIR/nothere"
	assert_refused "strictfs: --namespace 4194304: no such process" "$STRICTFS" umount -N 4194304 "$N"
	assert_exit 2 "$STRICTFS" umount -N "$C"
	assert_contains "$(cat "$T_DIR/.err")" "umount --namespace: needs NS and MOUNTPOINT" "umount -N: usage"
	assert_eq "$LOOP $N fuse.strictfs" "$(in_ns_mounts "$C" "$N")" "the refusals left the container's view"
	# the container's view goes; the host's stays
	assert_ok "$STRICTFS" umount --namespace "$C" "$N"
	assert_ok not_in_ns "$C" "$N"
	assert_ok wait_until 3 status_lacks_view "$N"
	assert_eq "$A" "$(daemon_views "$pid")" "the host's view is still served"
	# the last view: umount -N returns once the daemon has released the device
	assert_ok sfs_umount "$A"
	assert_ok "$STRICTFS" mount -N "$C" "$LOOP" "$N"
	pid=$(view_pid "$N")
	assert_ok "$STRICTFS" umount "--namespace=$C" "$N"
	assert_ok pid_gone "$pid"
	assert_ok device_free "$LOOP"
}

test_container_mount_N_through_helper() { with_mount_helper _container_helper_body; }
_container_helper_body() {
	local C N=$T_DIR/ctview pid
	mkdir -p "$N"
	container_start
	C=$REPLY
	new_source hlp
	# mount(8) runs its helper in the original namespace with -N /proc/PID/fd/N
	assert_ok mount -N "$C" -t strictfs -o ro "$LOOP" "$N"
	assert_eq "$LOOP $N fuse.strictfs" "$(in_ns_mounts "$C" "$N")" "mount -N: the view is in the container"
	assert_ok not_mounted "$N"
	assert_eq true "$(view_opt "$N" ro)" "options passed"
	pid=$(view_pid "$N")
	assert_exit 32 mount -N "$C" -t strictfs -o bogus "$LOOP" "$T_DIR"
	assert_contains "$(cat "$T_DIR/.err")" "strictfs: bogus" "mount -N: the helper's message"
	assert_ok nsenter -t "$C" -m umount "$N"
	assert_ok wait_daemon_gone "$pid" 10
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
