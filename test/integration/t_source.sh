#!/bin/bash
# Sources and the backing: image files (strictfs attaches and detaches the loop device), one
# daemon per source whatever its spelling, the exclusive backing, and share=existing.
# transport-independent: how a source is found and attached, before any view serves a request
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

test_image_source_attaches_loop() {
	mkimg img
	IMG=$REPLY
	local V=$T_DIR/v pid loops
	assert_ok no_loop_for "$IMG"
	view "" "$IMG" "$V"
	pid=$(view_pid "$V")
	loops=$(loops_of "$IMG")
	assert_eq 1 "$(printf '%s\n' "$loops" | grep -c .)" "one loop device attached for the image"
	assert_eq "$loops" "$(daemon_field "$V" .backing.loop)" "status: backing.loop"
	assert_eq "$IMG" "$(daemon_field "$V" .source)" "status: source is the image"
	assert_eq "$(lsblk -dno MAJ:MIN "$loops" | tr -d ' ')" "$(daemon_field "$V" .backing.device)" "status: backing device"
	assert_eq "$IMG $V fuse.strictfs" "$(mount_line "$V")" "/proc/self/mounts shows the view"
	assert_ok sh -c "echo hello > '$V/f'"
	assert_eq hello "$(cat "$V/f" 2>&1)" "view reads and writes"
	assert_ok sfs_umount "$V"
	assert_ok pid_gone "$pid"
	assert_ok wait_until 3 no_loop_for "$IMG"
	# The data is in the image.
	mkdir "$T_DIR/native"
	assert_ok mount -o loop,ro "$IMG" "$T_DIR/native"
	assert_eq hello "$(cat "$T_DIR/native/f" 2>&1)" "data written through the view is in the image"
	umount "$T_DIR/native"
}

test_image_source_plain_umount_releases_loop() {
	mkimg img
	IMG=$REPLY
	local V=$T_DIR/v pid
	view "" "$IMG" "$V"
	pid=$(view_pid "$V")
	assert_ok umount "$V"
	assert_ok wait_daemon_gone "$pid" 3
	assert_ok wait_until 3 no_loop_for "$IMG"
}

test_image_two_spellings_one_daemon() {
	mkimg img
	IMG=$REPLY
	ln -s "$IMG" "$T_DIR/link-to-image"
	mkdir "$T_DIR/sub"
	local V=$T_DIR/v W=$T_DIR/w X=$T_DIR/x pid
	view "" "$IMG" "$V"
	view "" "$T_DIR/link-to-image" "$W"
	view "" "$T_DIR/sub/../img.img" "$X"
	pid=$(view_pid "$V")
	assert_eq "$pid" "$(view_pid "$W")" "symlink spelling reaches the same daemon"
	assert_eq "$pid" "$(view_pid "$X")" "../ spelling reaches the same daemon"
	assert_eq "$V $W $X" "$(daemon_views "$pid")" "one daemon with three views"
	assert_eq 1 "$(loops_of "$IMG" | grep -c .)" "one loop device"
	echo x >"$V/f"
	assert_eq x "$(cat "$W/f" 2>&1)" "same backing"
}

test_blockdev_two_spellings_one_daemon() {
	new_source img
	ln -s "$LOOP" "$T_DIR/dev-link"
	local V=$T_DIR/v W=$T_DIR/w pid
	view "" "$LOOP" "$V"
	view "" "$T_DIR/dev-link" "$W"
	pid=$(view_pid "$V")
	assert_eq "$pid" "$(view_pid "$W")" "symlink to the device reaches the same daemon"
	assert_eq 1 "$(sq --argjson p "$pid" '[.daemons[]? | select(.pid == $p)] | length')" "listed once"
	assert_eq 1 "$(loops_of "$IMG" | grep -c .)" "no extra loop device"
}

test_concurrent_first_mounts_start_one_daemon() {
	mkimg img
	IMG=$REPLY
	local i pids=() rcs=() pid
	for i in 1 2 3 4; do
		mkdir -p "$T_DIR/v$i"
		"$STRICTFS" mount "$IMG" "$T_DIR/v$i" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do
		wait "$i"
		rcs+=($?)
	done
	assert_eq "0 0 0 0" "${rcs[*]}" "four concurrent first mounts succeed"
	pid=$(view_pid "$T_DIR/v1")
	assert_eq "$T_DIR/v1 $T_DIR/v2 $T_DIR/v3 $T_DIR/v4" "$(daemon_views "$pid")" "all views on one daemon"
	assert_eq 1 "$(sq '[.daemons[]? | select(any(.views[]?; .mountpoint | startswith("'"$T_DIR/"'")))] | length')" "one daemon"
	assert_eq 1 "$(loops_of "$IMG" | grep -c .)" "one loop device"
	assert_eq 1 "$(pgrep -f -- "__daemon .* $IMG " | grep -c .)" "one daemon process for the image"
}


test_backing_detached_and_exclusive() {
	new_source img
	local V=$T_DIR/v
	view "" "$LOOP" "$V"
	assert_eq "" "$(awk -v d="$LOOP" '$1 == d && $3 != "fuse.strictfs"' /proc/self/mounts)" \
		"the backing is not attached anywhere in this namespace"
	assert_fails device_free "$LOOP"
	assert_fails_with "Device or resource busy" "$PY" -c 'import os,sys; os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL)' "$LOOP"
}

test_exclusive_refused_when_mounted_natively() {
	new_source img
	mkdir "$T_DIR/native" "$T_DIR/v"
	need mount "$LOOP" "$T_DIR/native"
	local before
	before=$(mount_opts "$T_DIR/native")
	assert_refused "already mounted at $T_DIR/native" "$STRICTFS" mount "$LOOP" "$T_DIR/v"
	assert_contains "$(cat "$T_DIR/.err")" "share=existing" "the message points to share=existing"
	assert_ok not_mounted "$T_DIR/v"
	assert_eq "$before" "$(mount_opts "$T_DIR/native")" "native mount unchanged"
	assert_ok touch "$T_DIR/native/still-writable"
}

test_exclusive_refused_for_image_mounted_natively() {
	mkimg img
	IMG=$REPLY
	mkdir "$T_DIR/native" "$T_DIR/v"
	need mount -o loop "$IMG" "$T_DIR/native"
	assert_refused "already mounted at $T_DIR/native" "$STRICTFS" mount "$IMG" "$T_DIR/v"
	assert_eq 1 "$(loops_of "$IMG" | grep -c .)" "only the native mount's loop device"
}

test_share_existing_serves_views() {
	new_source img
	local N=$T_DIR/native V=$T_DIR/v W=$T_DIR/w pid
	mkdir "$N"
	need mount "$LOOP" "$N"
	echo native >"$N/n"
	view share=existing "$LOOP" "$V"
	pid=$(view_pid "$V")
	assert_eq shared-existing "$(daemon_field "$V" .backing.mode)" "status: mode shared-existing"
	assert_eq native "$(cat "$V/n" 2>&1)" "view sees the native mount's files"
	assert_ok sh -c "echo view > '$V/v'"
	assert_eq view "$(cat "$N/v" 2>&1)" "native mount sees the view's files"
	view "share=existing,noacl" "$LOOP" "$W"
	assert_eq "$pid" "$(view_pid "$W")" "second shared view on the same daemon"
	assert_fails_with "Operation not supported" setfacl -m "u:$SFS_ALICE:r" "$W/n"
	assert_ok sfs_umount "$W"
	assert_ok wait_until 2 status_lacks_view "$W"
	assert_ok sfs_umount "$V"
	assert_ok pid_gone "$pid"
	assert_ok is_mounted "$N"
	assert_eq native "$(cat "$N/n" 2>&1)" "native mount still works"
	assert_ok touch "$N/after"
}

test_share_existing_without_mount_refused() {
	new_source img
	mkdir "$T_DIR/v"
	assert_refused "share=existing" "$STRICTFS" mount -o share=existing "$LOOP" "$T_DIR/v"
}

test_share_mismatch_with_running_daemon_refused() {
	new_source img
	local V=$T_DIR/v pid
	view "" "$LOOP" "$V"
	pid=$(view_pid "$V")
	mkdir "$T_DIR/w"
	assert_refused "share" "$STRICTFS" mount -o share=existing "$LOOP" "$T_DIR/w"
	assert_eq "$V" "$(daemon_views "$pid")" "running daemon unchanged"
	assert_ok touch "$V/still-works"
}

test_native_mount_while_serving_is_noticed() {
	# the kernel checks exclusivity only at creation (doc/kernel.md §2): root can still mount
	# the device natively and share the superblock; the daemon notices and says so
	new_source img
	local V=$T_DIR/v NAT=$T_DIR/nat
	view "" "$LOOP" "$V"
	mkdir "$NAT"
	need mount "$LOOP" "$NAT"
	assert_ok wait_until 3 sh -c "'$STRICTFS' status --json | grep -q '\"$NAT\"'"
	assert_eq "$NAT" "$(daemon_field "$V" '.shared_with | join(",")')" "status: shared_with"
	echo native >"$NAT/f"
	assert_ok wait_until 3 sh -c "grep -q native '$V/f'"
	need umount "$NAT"
	assert_ok wait_until 3 sh -c "[ -z \"\$('$STRICTFS' status --json | jq -r '.daemons[].shared_with[]?')\" ]"
	assert_ok touch "$V/g"
}

test_casefold_refused_with_share_existing() {
	new_source img
	local NAT=$T_DIR/nat V=$T_DIR/v
	mkdir "$NAT" "$V"
	need mount "$LOOP" "$NAT"
	assert_refused casefold "$STRICTFS" mount -o share=existing,casefold "$LOOP" "$V"
	assert_ok "$STRICTFS" mount -o share=existing "$LOOP" "$V"
	mkdir "$T_DIR/w"
	assert_refused casefold "$STRICTFS" mount -o share=existing,casefold "$LOOP" "$T_DIR/w"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
