#!/bin/bash
# The Debian package: debian/ builds a .deb with dpkg-buildpackage -us -uc -b (in a copy of the
# tree, so nothing lands in the repository), with the files where util-linux users look for
# them and the right Depends; installed, its binaries mount a view; purged, nothing is left.
# dpkg runs in a private mount namespace over throwaway overlays of /usr, /etc and /var, so
# the machine is left as it was found even if the test is killed half way.
# transport-independent: what it checks is the package, run once whatever the transport

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

meson_version() {
	sed -n "s/^  version : '\([^']*\)'.*/\1/p" "$SFS_REPO/meson.build" | head -n1
}

# build_deb: the package built from a copy of the working tree; its path in DEB.
build_deb() {
	local src version
	command -v dpkg-buildpackage >/dev/null || die "dpkg-buildpackage missing (scripts/deps installs dpkg-dev and debhelper)"
	version=$(meson_version)
	src=$T_DIR/pkg/strictfs-$version
	mkdir -p "$src"
	if git -C "$SFS_REPO" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$SFS_REPO" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - --) |
			tar -xf - -C "$src" || die "copying the tree"
	else
		tar -C "$SFS_REPO" --exclude='./build*' -cf - . | tar -xf - -C "$src" || die "copying the tree"
	fi
	rm -rf "$src/build" "$src/build-asan"
	(cd "$src" && timeout 600 dpkg-buildpackage -us -uc -b) >"$T_DIR/pkg/build.log" 2>&1 ||
		die "dpkg-buildpackage failed: $(tail -n 20 "$T_DIR/pkg/build.log" | tr '\n' '|')"
	DEB=$T_DIR/pkg/strictfs_${version}_$(dpkg --print-architecture).deb
	[[ -f $DEB ]] || die "no $DEB after the build"
}

test_deb_package_contents() {
	local before after list deps
	before=$(cd "$SFS_REPO" && find . -path ./build -prune -o -path ./build-asan -prune -o -path ./.git -prune -o -print | sort)
	build_deb
	after=$(cd "$SFS_REPO" && find . -path ./build -prune -o -path ./build-asan -prune -o -path ./.git -prune -o -print | sort)
	assert_eq "" "$(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')" "the build left nothing in the repository"
	assert_eq strictfs "$(dpkg-deb -f "$DEB" Package)" "Package"
	assert_eq "$(meson_version)" "$(dpkg-deb -f "$DEB" Version)" "Version is meson's project version"
	list=$(dpkg -c "$DEB" | awk '{ print $6 }')
	for f in ./usr/sbin/strictfs ./sbin/mount.strictfs ./sbin/mount.fuse.strictfs \
		./usr/share/man/man8/strictfs.8.gz ./usr/share/man/man8/mount.strictfs.8.gz \
		./usr/share/bash-completion/completions/strictfs ./usr/share/doc/strictfs/copyright \
		./usr/share/doc/strictfs/examples/fuse-uring.conf; do
		assert_ok grep -qx -- "$f" <<<"$list"
	done
	assert_eq "" "$(grep -E '^\./(run|var|etc)/' <<<"$list")" "nothing under /run, /var or /etc"
	deps=$(dpkg-deb -f "$DEB" Depends)
	assert_contains "$deps" libc6 "Depends: libc6"
	# every library the binary links directly (NEEDED) comes from a package in Depends,
	# whatever the release names it (libfuse3-3 on Debian 12, libfuse3-4 on 13): computed
	# from the shared libraries, not written down
	local soname lib pkg missing=
	dpkg-deb --fsys-tarfile "$DEB" | tar -xOf - ./usr/sbin/strictfs >"$T_DIR/bin" || die "extracting"
	chmod +x "$T_DIR/bin"
	for soname in $(readelf -d "$T_DIR/bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		[[ $soname == ld-linux* ]] && continue # the dynamic loader, libc6's
		lib=$(ldd "$T_DIR/bin" | awk -v s="$soname" '$1 == s { print $3 }')
		pkg=$(dpkg -S "$lib" 2>/dev/null | head -n1 | cut -d: -f1)
		[[ -n $pkg ]] || pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | head -n1 | cut -d: -f1)
		[[ -n $pkg && $deps == *"$pkg"* ]] || missing+=" $soname($pkg)"
	done
	assert_eq "" "$missing" "Depends covers every library the binary links"
}

test_deb_install_mount_purge() {
	local was
	was=$(dpkg-query -W -f '${db:Status-Status}' strictfs 2>/dev/null)
	[[ -z $was || $was == not-installed || $was == config-files ]] ||
		die "a strictfs package is installed on this machine; the test would not leave it as found"
	build_deb
	unshare -m --propagation private -- env T_INNER=1 T_DIR="$T_DIR" T_NAME="$T_NAME" DEB="$DEB" \
		T_OUTER_NS="$(readlink /proc/self/ns/mnt)" bash "$T_FILE" --deb-ns _deb_inside
	assert_eq 0 "$?" "the namespace part ran to its end"
	# the machine is as it was
	assert_eq "$was" "$(dpkg-query -W -f '${db:Status-Status}' strictfs 2>/dev/null)" "dpkg's database unchanged"
	assert_ok test ! -e /usr/sbin/strictfs
	assert_ok test ! -e /usr/share/man/man8/strictfs.8.gz
}

_overlay() { # DIR: writes to DIR go to a tmpfs, in this mount namespace only
	local d=$1 w=$T_DIR/.ovl/${1//\//_}
	mkdir -p "$w"
	mount -t tmpfs sfs-deb "$w" && mkdir "$w/up" "$w/work" &&
		mount -t overlay sfs-deb -o "lowerdir=$d,upperdir=$w/up,workdir=$w/work" "$d" ||
		die "overlay over $d"
}

_deb_inside() {
	local d V=$T_DIR/v pid exe gen new fd
	[[ $(readlink /proc/self/ns/mnt) != "$(readlink /proc/1/ns/mnt)" ]] || die "not in a private namespace"
	for d in /usr /etc /var; do _overlay "$d"; done
	[[ -L /sbin ]] || _overlay /sbin
	private_run_dir # the package's postinst upgrades every daemon it finds: only this test's
	assert_ok dpkg -i "$DEB"
	assert_eq install "$(dpkg-query -W -f '${db:Status-Want}' strictfs)" "dpkg: installed"
	assert_ok test -x /usr/sbin/strictfs
	assert_ok test -x /sbin/mount.strictfs
	assert_eq /usr/share/man/man8/strictfs.8.gz "$(man -w strictfs 2>/dev/null)" "man strictfs finds the page"
	assert_eq /usr/share/man/man8/mount.strictfs.8.gz "$(man -w mount.strictfs 2>/dev/null)" "man mount.strictfs finds the page"
	assert_ok bash -c '. /usr/share/bash-completion/completions/strictfs && complete -p strictfs'

	# mount(8) finds the installed helper; the installed strictfs reports and unmounts
	mkimg debimg
	mkdir -p "$V"
	assert_ok mount -t strictfs -o noacl "$REPLY" "$V"
	assert_eq "$REPLY $V fuse.strictfs" "$(mount_line "$V")" "mount -t strictfs with the installed helper"
	pid=$(daemon_field "$V" .pid)
	remember_pid "$pid"
	exe=$(readlink "/proc/$pid/exe")
	if [[ $exe == /usr/sbin/strictfs || $exe == */sbin/mount.strictfs ]]; then
		ok "the daemon runs the installed binary ($exe)"
	else
		fail "the daemon runs $exe, not the installed binary"
	fi
	echo x >"$V/f"
	assert_fails_with "Operation not supported" setfacl -m u:root:r "$V/f"

	# installed again (dpkg runs postinst configure OLD-VERSION, as on an upgrade): the daemon
	# hands the view over to the binary just installed; the view and its open file go on
	gen=$(daemon_field "$V" .generation)
	exec {fd}<"$V/f"
	assert_ok dpkg -i "$DEB"
	new=$(daemon_field "$V" .pid)
	remember_pid "$new"
	assert_eq $((gen + 1)) "$(daemon_field "$V" .generation)" "the reinstall handed the view to a new generation"
	assert_ok pid_gone "$pid"
	assert_eq "$REPLY $V fuse.strictfs" "$(mount_line "$V")" "the view is still mounted"
	assert_eq x "$(cat <&$fd)" "a file opened before the upgrade reads after it"
	exec {fd}<&-
	assert_fails_with "Operation not supported" setfacl -m u:root:r "$V/f"
	pid=$new

	assert_ok /usr/sbin/strictfs umount "$V"
	assert_ok pid_gone "$pid"

	assert_ok dpkg --purge strictfs
	assert_eq "" "$(dpkg-query -W -f '${db:Status-Status}' strictfs 2>/dev/null | grep -v not-installed)" "dpkg: purged"
	for d in /usr/sbin/strictfs /sbin/mount.strictfs /sbin/mount.fuse.strictfs \
		/usr/share/man/man8/strictfs.8.gz /usr/share/bash-completion/completions/strictfs \
		/usr/share/doc/strictfs; do
		assert_ok test ! -e "$d"
	done
}

if [[ ${BASH_SOURCE[0]} == "$0" && ${1:-} == --deb-ns ]]; then
	T_FILE=$(readlink -f "${BASH_SOURCE[0]}")
	t_begin "$2"
	"$2"
	exit 0
fi
[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
