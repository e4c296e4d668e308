#!/bin/bash
# Idmapped views (contract §4.9, doc/design.md "Idmapped views"): a view mounted with
# X-mount.idmap= is attached through that map, and behaves as a native ext4 mount idmapped
# with the same map. Each comparison runs the same commands on both, side by side: a view of
# one image, and the kernel's own idmapped bind of a native ext4 mount of its twin.
# transport-independent: test_refusals: what is refused is decided at mount, before any request
# transport-independent: test_mount_8_takes_the_map: how mount(8) hands over the option, before any request
# transport-independent: test_quota_charged_to_disk_ids: the ledger charges the ids the daemon acts as, whichever transport brought the request
# transport-independent: test_failover_keeps_the_map: the map is in the view's options, which the handover carries; an io_uring successor is carried by t_failover's test_failover_sigkill_keeps_views in both passes
# transport-independent: test_flavoured_views: casefold and subdir=, above the identity test_ownership_shown_and_stored checks in both passes
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

IDMAP_PY=$SFS_TEST_DIR/idmap.py
MAP="b:0:100000:65536"

# The same tree in an image, made natively before any view serves it: ids inside the map
# (0, 1000, 1001, 2000) and outside it (70000), the modes each check needs.
seed_tree() {
	local r=$1
	mkdir "$r/d" "$r/st" "$r/sg" "$r/ud" "$r/open"
	chown 1000:1000 "$r/d"
	chmod 1777 "$r/st"
	chmod 777 "$r/open"
	chown 0:1000 "$r/sg"
	chmod 2775 "$r/sg"
	echo secret >"$r/o600"
	echo group >"$r/g060"
	echo other >"$r/a006"
	chown 1000:1000 "$r/o600" "$r/g060" "$r/a006"
	chmod 600 "$r/o600"
	chmod 060 "$r/g060"
	chmod 006 "$r/a006"
	echo one >"$r/st/f1000"
	echo two >"$r/st/f2000"
	chown 1000:1000 "$r/st/f1000"
	chown 2000:2000 "$r/st/f2000"
	printf '#!/bin/sh\n' >"$r/su"
	chown 1000:1000 "$r/su"
	chmod 6777 "$r/su"
	echo far >"$r/out"
	chown 70000:70000 "$r/out" "$r/ud"
	touch "$r/ud/x"
	chmod 744 "$r/ud"
	touch "$r/f"
	setfacl -m u:1000:r "$r/f"
	mkdir "$r/cfdir"
	chown 1000:1000 "$r/cfdir"
}

# twin_images [OPTIONS]: two images with the seeded tree (and ext4's default reserve: 5% for
# uid 0, which MAP gives host 100000); a native idmapped mount of the second at NATM over its
# plain mount NAT, and a view of the first idmapped at V (with OPTIONS too) beside a plain
# view P (what is on disk). IMG is the view's image.
twin_images() {
	local extra=${1:-} img
	for img in view nat; do
		mkimg "$img"
		mkdir -p "$T_DIR/seed"
		mount -o loop "$REPLY" "$T_DIR/seed" || die "mount the $img image"
		seed_tree "$T_DIR/seed"
		umount "$T_DIR/seed" || die "umount the seed"
	done
	IMG=$T_DIR/view.img
	NAT=$T_DIR/nat
	NATM=$T_DIR/natm
	V=$T_DIR/v
	P=$T_DIR/p
	mkdir -p "$NAT" "$NATM"
	attach_loop "$T_DIR/nat.img"
	mount "$REPLY" "$NAT" || die "mount the native twin"
	python3 "$IDMAP_PY" bind "$NAT" "$NATM" "$MAP" || die "idmap the native twin"
	sfs_mount -o "X-mount.idmap=$MAP${extra:+,$extra}" "$IMG" "$V" || die "mount the idmapped view"
	sfs_mount "$IMG" "$P" || die "mount the plain view"
}

# as HOST-UID HOST-GID GROUPS CMD...: CMD as that host identity, without capabilities (GROUPS a
# comma list, or - for none).
as() {
	local uid=$1 gid=$2 groups=$3
	shift 3
	if [[ $groups == - ]]; then
		setpriv --reuid "$uid" --regid "$gid" --clear-groups -- "$@"
	else
		setpriv --reuid "$uid" --regid "$gid" --groups "$groups" -- "$@"
	fi
}

# on ROOT SCRIPT: SCRIPT in bash with $R the mount's root; its output, then its status, with
# the root's path written as R, so the two mounts' transcripts compare.
on() {
	local out rc
	out=$(R=$1 bash -c "$2" 2>&1)
	rc=$?
	printf '%s\n[exit %d]\n' "${out//$1/R}" "$rc"
}

# same WHAT SCRIPT: SCRIPT on the native idmapped mount, then on the view: the same transcript.
same() {
	local nat view
	nat=$(on "$NATM" "$2")
	view=$(on "$V" "$2")
	assert_eq "$nat" "$view" "$1, as native ext4 idmapped: $(tr '\n' ' ' <<<"$view" | cut -c1-160)"
}

# ondisk PATHS...: owner, group and mode of each, as stored: the same through the native
# twin's plain mount and the plain view.
ondisk() {
	local nat view
	nat=$(cd "$NAT" && stat -c '%u:%g %a %n' "$@" 2>&1)
	view=$(cd "$P" && stat -c '%u:%g %a %n' "$@" 2>&1)
	assert_eq "$nat" "$view" "on disk: $(tr '\n' ' ' <<<"$view" | cut -c1-160)"
}

test_ownership_shown_and_stored() {
	twin_images
	same "ids shown through the map, those outside it as the overflow id" \
		'cd $R && stat -c "%u:%g %a %n" d st sg ud o600 g060 a006 st/f1000 st/f2000 su out f'
	assert_eq "101000:101000" "$(stat -c %u:%g "$V/d")" "disk 1000 shows as 101000"
	assert_eq "65534:65534" "$(stat -c %u:%g "$V/out")" "disk 70000 is outside the map"
	# what the map's ids make is stored as the ids they stand for
	same "creations by host uid 100000 (disk 0)" \
		'cd $R && setpriv --reuid 100000 --regid 100000 --clear-groups -- sh -c "
			touch open/c && mkdir open/cd && ln -s c open/cl && mkfifo open/cf &&
			stat -c \"%u:%g %n\" open/c open/cd open/cl open/cf"'
	ondisk open/c open/cd open/cl open/cf
	same "creations by host uid 101000 (disk 1000) in its directory" \
		'cd $R && setpriv --reuid 101000 --regid 101000 --clear-groups -- sh -c "
			echo hi > d/mine && mkdir d/sub && stat -c \"%u:%g %n\" d/mine d/sub"'
	ondisk d/mine d/sub
	same "a caller outside the map cannot create (EOVERFLOW)" \
		'setpriv --reuid 5 --regid 5 --clear-groups -- touch $R/open/five'
	ondisk open
	assert_ok test ! -e "$P/open/five"
	# what the plain view shows of them at once: the on-disk ids
	assert_eq "0:0" "$(stat -c %u:%g "$P/open/c")" "a plain view of the same file shows disk ids"
	assert_eq "1000:1000" "$(stat -c %u:%g "$P/d/mine")" "and the other view's creation too"
	echo changed >"$P/d/mine"
	assert_eq changed "$(cat "$V/d/mine")" "a change through the plain view shows in the idmapped one"
	assert_word "$(view_field "$V" .requested)" "X-mount.idmap=$MAP" "status: the view's options name its map"
	assert_eq "uid 0 100000 65536,gid 0 100000 65536" \
		"$(view_field "$V" '.options.idmap | map("\(.ids) \(.disk) \(.shown) \(.count)") | join(",")')" \
		"status --json: the map, extent by extent"
	assert_eq "null" "$(view_field "$P" .options.idmap)" "a plain view has none"
	assert_contains "$("$STRICTFS" status "$V")" "idmap=u:0:100000:65536 g:0:100000:65536" \
		"the status table shows it"
}

test_permission_checks() {
	twin_images
	same "owner, group and other, by the mapped ids" '
		for who in "101000 101000 -" "101001 101001 101000" "102000 102000 -"; do
			set -- $who
			for f in o600 g060 a006; do
				setpriv --reuid $1 --regid $2 $([ $3 = - ] && echo --clear-groups || echo --groups $3) \
					-- cat $R/$f 2>&1 | sed "s/^/$1 $f: /"
			done
		done'
	same "the host uid 1000 is nobody here (other)" \
		'setpriv --reuid 1000 --regid 1000 --clear-groups -- cat $R/o600 $R/a006'
	same "a sticky directory: others may not remove a file" \
		'setpriv --reuid 102000 --regid 102000 --clear-groups -- rm -f $R/st/f1000; ls $R/st'
	same "a sticky directory: the file's owner may" \
		'setpriv --reuid 101000 --regid 101000 --clear-groups -- rm -f $R/st/f1000; ls $R/st'
	ondisk st/f2000
	same "setgid inheritance" \
		'cd $R/sg && setpriv --reuid 102000 --regid 102000 --groups 101000 -- sh -c "
			touch n && mkdir nd && stat -c \"%u:%g %a %n\" n nd"'
	ondisk sg/n sg/nd
	same "a write by another kills set-user-ID and set-group-ID" \
		'setpriv --reuid 102000 --regid 102000 --clear-groups -- sh -c "echo x >> $R/su"; stat -c "%a" $R/su'
	ondisk su
}

test_chown_and_acls() {
	twin_images
	same "chown into the range by the host's root" \
		'chown 101005:101006 $R/open && stat -c "%u:%g" $R/open'
	ondisk open
	same "a chown clears set-user-ID and set-group-ID" \
		'chown 101002 $R/su && stat -c "%u:%g %a" $R/su'
	ondisk su
	same "chown to an id outside the map is refused" \
		'chown 5 $R/f; chown 200000 $R/f; stat -c "%u:%g" $R/f'
	same "an owner without capabilities may not give a file away" \
		'setpriv --reuid 101000 --regid 101000 --clear-groups -- chown 101001 $R/d/../o600; stat -c %u $R/o600'
	same "chgrp to one of the owner's groups" \
		'setpriv --reuid 101000 --regid 101000 --groups 101001 -- chgrp 101001 $R/o600; stat -c %u:%g $R/o600'
	ondisk o600 open f
	same "ACL entries shown through the map" 'getfacl -n $R/f | grep -v "^#"'
	same "ACL entries set through the map are stored as disk ids" \
		'setpriv --reuid 101000 --regid 101000 --clear-groups -- setfacl -m u:101002:rw,g:101003:r $R/o600 &&
		 getfacl -n $R/o600 | grep -v "^#"'
	assert_eq "$(getfacl -n "$NAT/o600" | grep -v '^#')" "$(getfacl -n "$P/o600" | grep -v '^#')" \
		"the stored ACL is the native one (disk ids 1002, 1003)"
	assert_contains "$(getfacl -n "$P/o600")" "user:1002:rw-" "stored as disk uid 1002"
	same "an ACL entry for an id outside the map is refused" \
		'setfacl -m u:5:r $R/o600; getfacl -n $R/o600 | grep -c "user:5"'
}

# A namespace's root: host 100000, with every capability in its user namespace, whose map is
# the view's. As native: root over the files the map covers, nobody over the others.
test_namespace_root() {
	twin_images
	local ns="python3 $IDMAP_PY run $MAP --"
	same "the namespace's root sees its own ids" "$ns stat -c '%u:%g %n' \$R/d \$R/out \$R/o600"
	same "creates as its root, chowns within its range, writes its users' files" \
		"$ns sh -c 'cd \$R && touch c && chown 1000:1000 c && echo w >> o600 && echo w > d/w &&
			stat -c \"%u:%g %n\" c o600 d/w'"
	ondisk c o600 d/w
	same "may not chown to an id its namespace lacks" "$ns chown 70000 \$R/c"
	same "keeps the set-group-ID bit it sets on a file of a group it is not in" \
		"$ns sh -c 'touch \$R/sg1 && chown 0:1001 \$R/sg1 && chmod 2755 \$R/sg1 && stat -c %a \$R/sg1'"
	ondisk sg1
	same "sets ACLs for its users" \
		"$ns sh -c 'setfacl -m u:1001:r \$R/c && getfacl -n \$R/c | grep -v \"^#\"'"
	assert_eq "$(getfacl -n "$NAT/c" | grep -v '^#')" "$(getfacl -n "$P/c" | grep -v '^#')" \
		"the ACL stored as native"
	same "no capability over a directory outside its map" \
		"$ns sh -c 'ls -ln \$R/ud; cat \$R/ud/x; touch \$R/ud/y'"
	same "nor over a file outside it" "$ns sh -c 'echo w >> \$R/out; chmod 777 \$R/out'"
	ondisk out ud
}

test_flavoured_views() {
	local C
	twin_images
	mkdir -p "$T_DIR/cf" "$T_DIR/sd"
	assert_ok "$STRICTFS" mount -o "casefold,X-mount.idmap=$MAP" "$IMG" "$T_DIR/cf"
	assert_ok "$STRICTFS" mount -o "subdir=/d,X-mount.idmap=$MAP" "$IMG" "$T_DIR/sd"
	assert_ok as 101000 101000 - sh -c "echo x > '$T_DIR/cf/cfdir/Name'"
	assert_eq "101000:101000 x" "$(stat -c %u:%g "$T_DIR/cf/cfdir/NAME") $(cat "$T_DIR/cf/cfdir/nAmE")" \
		"a casefold view idmapped: another case finds the file, with mapped ids"
	assert_eq "1000:1000" "$(stat -c %u:%g "$P/cfdir/Name")" "stored as disk 1000"
	assert_eq "101000:101000" "$(stat -c %u:%g "$T_DIR/sd")" "a subdir view's root, mapped"
	assert_ok as 101000 101000 - touch "$T_DIR/sd/insub"
	assert_eq "1000:1000" "$(stat -c %u:%g "$P/d/insub")" "a subdir view idmapped stores disk ids"
}

test_quota_charged_to_disk_ids() {
	twin_images
	local Q=$T_DIR/q
	mkdir -p "$Q"
	assert_ok "$STRICTFS" mount -o "usrquota,X-mount.idmap=$MAP" "$IMG" "$Q"
	assert_ok "$STRICTFS" quota set "$IMG" -u 1000 --bhard 1M
	assert_ok as 101000 101000 - dd if=/dev/zero of="$Q/d/fill" bs=64k count=8 status=none
	assert_fails_with "Disk quota exceeded" as 101000 101000 - \
		dd if=/dev/zero of="$Q/d/more" bs=64k count=32 status=none conv=fsync
	assert_eq "0" "$("$STRICTFS" quota report "$IMG" --json | jq '[.users[] | select(.id == 101000)] | length')" \
		"nothing is charged to the host id 101000"
	assert_ne "0" "$("$STRICTFS" quota report "$IMG" --json | jq '[.users[] | select(.id == 1000 and .bytes.used > 0)] | length')" \
		"the writes are charged to disk uid 1000"
	assert_ok as 102000 102000 - dd if=/dev/zero of="$Q/open/other" bs=64k count=32 status=none
}

# mount(8) keeps every X-mount.* option to itself and gives a helper none (util-linux 2.38
# drops X-mount.idmap= before mount.strictfs runs), so mount(8) and fstab spell it idmap=.
test_mount_8_takes_the_map() { with_mount_helper _mount_8_body; }
_mount_8_body() {
	local A=$T_DIR/m8 F=$T_DIR/f8
	mkdir -p "$A" "$F"
	mkimg m8 -m 0
	IMG=$REPLY
	assert_ok mount -t strictfs -o "idmap=$MAP" "$IMG" "$A"
	assert_eq "100000:100000" "$(stat -c %u:%g "$A")" "mount -t strictfs: the root shows as host 100000"
	assert_word "$(view_field "$A" .requested)" "idmap=$MAP" "the helper passed the map"
	assert_ok umount "$A"
	echo "$IMG $F strictfs idmap=u:0:200000:65536\\040g:0:200000:65536 0 0" >"$T_DIR/fstab"
	assert_ok mount -T "$T_DIR/fstab" "$F"
	assert_eq "200000:200000" "$(stat -c %u:%g "$F")" "fstab: the root shows as host 200000"
	assert_eq "uid 0 200000 65536,gid 0 200000 65536" \
		"$(view_field "$F" '.options.idmap | map("\(.ids) \(.disk) \(.shown) \(.count)") | join(",")')" \
		"fstab: two extents, the space written \\040"
	assert_ok umount "$F"
}

# A view outlives its daemon (contract §6): the successor serves it through the same map.
test_failover_keeps_the_map() {
	local pid key
	twin_images
	pid=$(view_pid "$V")
	key=$(source_key "$IMG")
	assert_ok kill -KILL "$pid"
	assert_ok successor_of "$pid" "$key"
	same "after a takeover, creations by host uid 101000" \
		'cd $R && setpriv --reuid 101000 --regid 101000 --clear-groups -- sh -c "
			echo hi > d/after && stat -c \"%u:%g %n\" d d/after"'
	ondisk d/after
	same "and the namespace's root's capabilities" \
		"python3 $IDMAP_PY run $MAP -- sh -c 'chown 1001 \$R/d/after && stat -c %u \$R/d/after'"
	ondisk d/after
}

test_refusals() {
	local A=$T_DIR/a
	mkdir -p "$A"
	mkimg plain
	IMG=$REPLY
	assert_refused "X-mount.idmap=b:0:100000: not an extent" \
		"$STRICTFS" mount -o "X-mount.idmap=b:0:100000" "$IMG" "$A"
	assert_refused "X-mount.idmap=b:5:200000:10: overlaps another extent" \
		"$STRICTFS" mount -o "X-mount.idmap=b:0:100000:10 b:5:200000:10" "$IMG" "$A"
	assert_refused "idmap=$T_DIR/none: No such file or directory" \
		"$STRICTFS" mount -o "idmap=$T_DIR/none" "$IMG" "$A"
	assert_refused "X-mount.idmap=/proc/self/ns/mnt: not a user namespace" \
		"$STRICTFS" mount -o "X-mount.idmap=/proc/self/ns/mnt" "$IMG" "$A"
	assert_refused "idmap=/proc/self/ns/user: is this system's own user namespace" \
		"$STRICTFS" mount -o "idmap=/proc/self/ns/user" "$IMG" "$A"
	# the reserve's owner on the host acting as another disk id would lose what ext4 lends it
	tune2fs -u 1000 "$IMG" >/dev/null || die "tune2fs -u"
	assert_refused "X-mount.idmap=: the backing reserves blocks for uid 1000" \
		"$STRICTFS" mount -o "X-mount.idmap=b:500:1000:10" "$IMG" "$A"
	tune2fs -u 0 "$IMG" >/dev/null || die "tune2fs -u 0"
	assert_refused "idmap=: the backing reserves blocks for gid 1000" \
		"$STRICTFS" mount -o "resgid=1000,idmap=$MAP" "$IMG" "$A"
	assert_ok not_mounted "$A"
	assert_ok sfs_mount -o "X-mount.idmap=b:1000:101000:1000" "$IMG" "$A"
	assert_eq "65534" "$(stat -c %u "$A")" "disk 0 is outside that map"
	assert_refused "X-mount.idmap=b:1000:201000:1000: cannot change on a live view" \
		"$STRICTFS" mount -o "remount,X-mount.idmap=b:1000:201000:1000" "$A"
	assert_ok "$STRICTFS" mount -o "remount,ro,X-mount.idmap=b:1000:101000:1000" "$A"
	assert_eq true "$(view_opt "$A" ro)" "a remount that keeps the map changes the rest"
	# the kernel's side: an idmapped mount is not idmapped again; a plain view cannot be
	assert_eq EPERM "$(python3 "$IDMAP_PY" setattr "$A" b:1000:301000:1000)" \
		"mount_setattr on a clone of the idmapped view: EPERM"
	mkdir -p "$T_DIR/plain"
	assert_ok sfs_mount "$IMG" "$T_DIR/plain"
	assert_eq EINVAL "$(python3 "$IDMAP_PY" setattr "$T_DIR/plain" b:1000:301000:1000)" \
		"mount_setattr on a clone of a view mounted without X-mount.idmap=: EINVAL"
}

# ext4 lends its reserved blocks (5% by default, for uid 0) by the writer's own id: the
# namespace's root, disk 0 through MAP, is host 100000 and gets none of them on a native
# idmapped mount. It fills each file system through its data path (OPTIONS: the view's), and
# the host's root still has the reserve.
_reserve_stays_roots() {
	local ns="python3 $IDMAP_PY run $MAP --"
	twin_images "${1:-}"
	same "the namespace's root fills the file system to the reserve, and no further" \
		"$ns sh -c 'dd if=/dev/zero of=\$R/open/fill bs=1M 2>/dev/null; echo dd \$?
			fallocate -l 1M \$R/open/more; mkdir \$R/open/newdir; ln -s \$(printf %0200d 0) \$R/open/long
			setfattr -n user.big -v \$(printf %03000d 0) \$R/open/fill'"
	assert_ok dd if=/dev/zero of="$NAT/rootfile" bs=1M count=16 conv=fsync status=none
	assert_ok dd if=/dev/zero of="$P/rootfile" bs=1M count=16 conv=fsync status=none
	assert_fails_with "No space left on device" \
		as 1000 1000 - dd if=/dev/zero of="$P/open/u1000" bs=1M count=1 conv=fsync status=none
	ondisk open/fill
}
test_reserve_stays_roots() { _reserve_stays_roots; }
test_reserve_stays_roots_daemon_path() { _reserve_stays_roots nopassthrough; }

# The kernel checks a change against the ids it holds of an object; under share=existing a
# native writer may give the object away before the daemon acts (the view's kernel keeps the
# attributes half a second). An idmapped mount writes nothing to an object whose ids it does
# not map: no removal, move, link, attribute, xattr, write open or new entry (EOVERFLOW,
# EACCES, EPERM as the call goes). The daemon looks at the object again, so the namespace's
# root cannot, by a capability the kernel weighed against the old owner, change what is no
# longer its users'.
test_given_away_meanwhile_stays() {
	local N=$T_DIR/native V=$T_DIR/v i f rd wr view="" nat=""
	# one call a round, each on objects of its own, so the view's kernel holds the old ids
	# of every one (a refused call makes it fetch the attributes anew)
	local calls=('setfattr -n user.a -v 1 $D/kept' 'rm -f $D/victim' 'mv $D/moved $D/moved2'
		'chmod 4777 $D/kept' 'chown 1000 $D/kept' 'setfacl -m u:1000:rwx $D/kept'
		'ln $D/kept $D/kept2' 'echo w >> $D/open' 'touch $D/wdir/new')
	new_source ex
	mkdir -p "$N"
	need mount "$LOOP" "$N"
	for i in "${!calls[@]}"; do
		mkdir -p "$N/st$i/wdir"
		chown 1000:1000 "$N/st$i"
		chmod 1777 "$N/st$i"
		chmod 777 "$N/st$i/wdir"
		for f in victim moved kept open; do echo "$f" >"$N/st$i/$f"; done
		chmod 666 "$N/st$i/open"
	done
	sfs_mount -o "share=existing,idmap=$MAP" "$LOOP" "$V" || die "mount the idmapped view"
	for i in "${!calls[@]}"; do
		coproc NSROOT { python3 "$IDMAP_PY" run "$MAP" -- env D="$V/st$i" sh -c '
			stat -c %u $D/victim $D/moved $D/kept $D/open $D/wdir | sort -u; read go
			('"${calls[$i]}"') 2>&1' 2>&1; }
		# bash takes a coprocess's descriptors away once it ends: read through copies
		exec {rd}<&"${NSROOT[0]}" {wr}>&"${NSROOT[1]}"
		read -r -u "$rd" f
		assert_eq 0 "$f" "the namespace's root sees its own files"
		(cd "$N/st$i" && chown 70000:70000 victim moved kept open wdir)
		echo go >&"$wr"
		view+=$(sed "s|$V/st$i|D|g; s|^sh: [0-9]*:|sh:|" <&"$rd")$'\n'
		exec {rd}<&- {wr}>&-
		wait "$NSROOT_PID" 2>/dev/null
	done
	# what native ext4 idmapped by the same map answers the same calls on such objects
	mkdir -p "$T_DIR/natm"
	python3 "$IDMAP_PY" bind "$N" "$T_DIR/natm" "$MAP" || die "idmap the native mount"
	for i in "${!calls[@]}"; do
		nat+=$(python3 "$IDMAP_PY" run "$MAP" -- env D="$T_DIR/natm/st$i" sh -c \
			"(${calls[$i]}) 2>&1" | sed "s|$T_DIR/natm/st$i|D|g; s|^sh: [0-9]*:|sh:|")$'\n'
	done
	assert_eq "$nat" "$view" "objects given away meanwhile are left as native ext4 idmapped leaves them"
	for i in "${!calls[@]}"; do
		assert_eq "kept moved open victim 70000:70000 644 open new:no" \
			"$(cd "$N/st$i" && ls kept moved open victim | tr '\n' ' ')$(stat -c '%u:%g %a' "$N/st$i/kept") $(cat "$N/st$i/open") new:$(test -e "$N/st$i/wdir/new" && echo yes || echo no)" \
			"nothing changed by: ${calls[$i]}"
	done
}

# The container of issue 32: a process in a new user namespace (0 -> 100000, 65536 ids) with its
# own mount namespace gets an idmapped view from the host, and works in it as its root.
test_container_with_namespace_mount() {
	local pid N=$T_DIR/ctview i
	twin_images
	mkdir -p "$N"
	python3 "$IDMAP_PY" run "$MAP" --mntns --pidfile "$T_DIR/ct.pid" -- \
		sleep 100000 </dev/null >/dev/null 2>&1 &
	for ((i = 0; i < 50; i++)); do
		pid=$(cat "$T_DIR/ct.pid" 2>/dev/null)
		[[ -n $pid ]] && [[ $(readlink "/proc/$pid/ns/user") != $(readlink /proc/self/ns/user) ]] && break
		sleep 0.1
	done
	[[ -n $pid ]] || die "could not start the namespaced process"
	echo "$pid $(proc_starttime "$pid")" >>"$T_DIR/.nspids"
	# util-linux's other form: the namespace's own file, whose maps strictfs reads
	assert_ok "$STRICTFS" mount --namespace "$pid" -o "X-mount.idmap=/proc/$pid/ns/user" "$IMG" "$N"
	assert_eq "uid 0 100000 65536,gid 0 100000 65536" \
		"$(view_field "$N" '.options.idmap | map("\(.ids) \(.disk) \(.shown) \(.count)") | join(",")')" \
		"the view has the namespace's maps"
	assert_ok not_mounted "$N"
	local inside="nsenter -t $pid -U -m --"
	assert_eq "0:0" "$($inside stat -c %u:%g "$N/f")" "the container's root owns disk 0's files"
	assert_ok $inside sh -c "cd '$N' && mkdir -p home/u && chown 1000:1000 home/u && touch home/u/a &&
		chown 1000:1000 home/u/a && setfacl -m u:1001:rw home/u/a"
	assert_eq "1000:1000" "$(stat -c %u:%g "$P/home/u/a")" "the host's plain view: disk ids"
	assert_contains "$(getfacl -n "$P/home/u/a")" "user:1001:rw-" "the ACL entry as disk 1001"
	assert_eq "0:0" "$(stat -c %u:%g "$P/home")" "the container root's directory is disk 0's"
	kill "$pid"
	assert_ok wait_until 10 status_lacks_view "$N"
}

[[ ${BASH_SOURCE[0]} == "$0" ]] && t_main "$@"
