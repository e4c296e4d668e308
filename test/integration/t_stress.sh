#!/bin/bash
# Load held, the short variant of test/stress/run: four views of one backing (acl, noacl,
# subdir, ro) under stress-ng and fio verify=crc32c for 20 s, then 256 views on one daemon,
# each written and read, listed by status, unmounted, and the daemon gone.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

test_stress_short() {
	local out=$T_DIR/stress.out
	"$SFS_REPO/test/stress/run" --short >"$out" 2>&1
	local rc=$?
	sed 's/^/  | /' "$out"
	assert_eq 0 "$rc" "test/stress/run --short exits 0"
	assert_contains "$(cat "$out")" "stress: no problems" "no problems reported"
	assert_contains "$(cat "$out")" "256 views mounted" "256 views mounted"
	assert_contains "$(cat "$out")" "status lists 256" "status listed 256 views"
	# (or, on a shared machine, lives on for copies another process's new namespace took)
	if grep -q "note: daemon .* still serves" "$out"; then
		ok "the daemon serves copies of its views in another namespace"
	else
		assert_contains "$(cat "$out")" "the daemon exited" "the daemon exited after the last view"
	fi
	assert_not_contains "$(cat "$out")" "PROBLEM" "no problem reported"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
