/* Table-driven tests of the view option parser: accepted options, refusals by name. */
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>

#include "check.h"
#include "options.h"

static void refused(const char *opts, const char *needle)
{
	struct sfs_opts o;
	char err[512] = "";
	int rc = sfs_opts_parse(opts, &o, err, sizeof(err));

	CHECK(rc != 0, "'%s' was accepted", opts);
	CHECK(strstr(err, needle) != NULL, "'%s': error '%s' does not name '%s'", opts, err, needle);
	CHECK(!strncmp(err, "strictfs: ", 10), "'%s': error '%s' lacks the prefix", opts, err);
}

static void accepted(const char *opts, struct sfs_opts *o)
{
	char err[512] = "";
	CHECK(sfs_opts_parse(opts, o, err, sizeof(err)) == 0, "'%s' refused: %s", opts, err);
}

/* X-mount.idmap=: util-linux's syntax, both directions of the map, refusals by extent. */
static void test_idmap(void)
{
	struct sfs_opts o, nw;
	char err[512], buf[SFS_EFFECTIVE_MAX];
	const struct sfs_idmap *m = &o.idmap;

	accepted("X-mount.idmap=b:0:100000:65536", &o);
	CHECK(m->nuid == 1 && m->ngid == 1 && sfs_idmap_active(m), "b: gives both");
	CHECK(sfs_idmap_uid_to_disk(m, 100000) == 0 && sfs_idmap_uid_to_disk(m, 165535) == 65535,
	      "host to disk at both ends");
	CHECK(sfs_idmap_uid_to_disk(m, 99999) == SFS_IDMAP_NONE &&
	      sfs_idmap_uid_to_disk(m, 165536) == SFS_IDMAP_NONE, "just outside: unmapped");
	CHECK(sfs_idmap_uid_to_host(m, 1000) == 101000 && sfs_idmap_gid_to_host(m, 65536) ==
	      SFS_IDMAP_NONE, "disk to host");
	CHECK(!strcmp(o.idmap_text, "u:0:100000:65536 g:0:100000:65536"), "spelled: %s",
	      o.idmap_text);
	CHECK(strstr(sfs_opts_format(&o, buf, sizeof(buf)), ",idmap=u:0:100000:65536 g:"),
	      "status shows the map: %s", buf);
	CHECK(!strcmp(o.idmap_name, "X-mount.idmap="), "spelled as given: %s", o.idmap_name);
	accepted("idmap=b:0:100000:65536", &o);
	CHECK(!strcmp(o.idmap_text, "u:0:100000:65536 g:0:100000:65536") &&
	      !strcmp(o.idmap_name, "idmap="), "idmap= is the same option");
	refused("idmap=b:0:1", "strictfs: idmap=b:0:1: not an extent");
	accepted("X-mount.idmap=\"u:1000:2000:1 g:5:6:2 7:8:1\"", &o);
	CHECK(m->nuid == 2 && m->ngid == 2 && sfs_idmap_gid_to_disk(m, 7) == 6 &&
	      sfs_idmap_uid_to_disk(m, 8) == 7 && sfs_idmap_gid_to_disk(m, 2000) == SFS_IDMAP_NONE,
	      "u:, g: and a bare extent, quoted");
	accepted("X-mount.idmap=u:4294967294:0:1", &o);
	refused("X-mount.idmap=u:4294967295:0:1", "X-mount.idmap=u:4294967295:0:1: not an extent");
	refused("X-mount.idmap=b:0:100000", "X-mount.idmap=b:0:100000: not an extent");
	refused("X-mount.idmap=b:0:100000:0", "X-mount.idmap=b:0:100000:0: not an extent");
	refused("X-mount.idmap=x:0:1:1", "X-mount.idmap=x:0:1:1: not an extent");
	refused("X-mount.idmap=b:-1:1:1", "not an extent");
	refused("X-mount.idmap=b:0:1:1junk", "not an extent");
	refused("X-mount.idmap=b:0:100:10 u:5:200:10", "X-mount.idmap=u:5:200:10: overlaps");
	refused("X-mount.idmap=b:0:100:10 g:50:105:1", "X-mount.idmap=g:50:105:1: overlaps");
	refused("X-mount.idmap=", "X-mount.idmap=: empty map");
	/* the daemon never reads a namespace: the mount command puts its maps in the options */
	refused("X-mount.idmap=/proc/1/ns/user", "read by the mount command only");
	refused("X-mount.idmap", "needs a value");
	accepted("X-mount.idmap=b:0:100000:65536", &o);
	CHECK(sfs_opts_remount(&o, "remount,ro,X-mount.idmap=u:0:100000:65536 g:0:100000:65536",
	                       &nw, err, sizeof(err)) == 0 && nw.ro, "the same map respelled: %s", err);
	CHECK(sfs_opts_remount(&o, "remount,idmap=b:0:100000:65536", &nw, err, sizeof(err)) == 0,
	      "the same map by its other name: %s", err);
	CHECK(sfs_opts_remount(&o, "remount,X-mount.idmap=b:0:200000:65536", &nw, err,
	                       sizeof(err)) != 0 &&
	      strstr(err, "strictfs: X-mount.idmap=b:0:200000:65536: cannot change"), "%s", err);
	accepted("acl", &o);
	CHECK(!sfs_idmap_active(&o.idmap) && !*o.idmap_text, "no map by default");
}

int main(void)
{
	struct sfs_opts o, f;
	char err[512], buf[256];

	accepted("", &o);
	CHECK(o.acl && o.user_xattr && !o.ro && !strcmp(o.subdir, "/"), "defaults");
	CHECK(o.mount_flags & MS_RELATIME, "relatime by default");
	accepted("noacl,nouser_xattr", &o);
	CHECK(!o.acl && !o.user_xattr, "noacl,nouser_xattr");
	accepted("noacl,acl", &o);
	CHECK(o.acl, "last one wins");
	accepted("ro,nosuid,nodev,noexec,nosymfollow,noatime", &o);
	CHECK(o.ro && (o.mount_flags & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME)) ==
	              (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME), "flags");
	CHECK(!strcmp(o.flag_names, "nosuid,nodev,noexec,nosymfollow,noatime"), "names %s", o.flag_names);
	accepted("nosuid,suid", &o);
	CHECK(!(o.mount_flags & MS_NOSUID), "suid clears nosuid");
	accepted("subdir=/a//b/./c/", &o);
	CHECK(!strcmp(o.subdir, "/a/b/c"), "subdir normalised: %s", o.subdir);
	accepted("subdir=x", &o);
	CHECK(!strcmp(o.subdir, "/x"), "relative subdir");
	accepted("minixdf", &o);
	CHECK(o.df == SFS_DF_MINIX, "minixdf");
	accepted("cache=writeback,share=existing", &o);
	CHECK(o.cache == SFS_CACHE_WRITEBACK && o.share == SFS_SHARE_EXISTING, "enums");
	accepted("nocasefold,noquota,defaults,x-systemd.automount,nofail", &o);
	accepted("data=journal,commit=30,nodelalloc,errors=remount-ro", &o);
	CHECK(o.n_sb == 4, "four superblock options, got %d", o.n_sb);
	sfs_opts_sb_string(&o, buf, sizeof(buf));
	CHECK(!strcmp(buf, "data=journal,commit=30,nodelalloc,errors=remount-ro"), "sb string %s", buf);

	refused("bogus", "bogus: unknown option");
	refused("acl=1", "acl: takes no value");
	refused("commit=0000000000000000000000000000000000000000000000000000000000000000005",
	        "commit: value too long");
	refused("subdir", "subdir: needs a value");
	refused("subdir=", "subdir=: empty");
	refused("subdir=/a/../b", "subdir=/a/../b");
	refused("cache=foo", "cache=foo: unknown value");
	refused("share=foo", "share=foo: unknown value");
	refused("commit=abc", "commit=abc: malformed");
	refused("data=bogus", "data=bogus: malformed");
	accepted("casefold", &o);
	CHECK(o.casefold == SFS_CASEFOLD_ON, "casefold");
	accepted("casefold=strict", &o);
	CHECK(o.casefold == SFS_CASEFOLD_STRICT, "casefold=strict");
	accepted("casefold,nocasefold", &o);
	CHECK(o.casefold == SFS_CASEFOLD_OFF, "nocasefold");
	refused("casefold=bogus", "casefold=bogus: unknown value (use casefold, casefold=strict or nocasefold)");
	accepted("", &o);
	CHECK(!o.usrquota && !o.grpquota && !o.size_limit && !o.inode_limit &&
	      !sfs_opts_enforce_quota(&o), "noquota by default");
	accepted("quota", &o);
	CHECK(o.usrquota && o.grpquota && sfs_opts_enforce_quota(&o), "quota: both");
	accepted("usrquota", &o);
	CHECK(o.usrquota && !o.grpquota, "usrquota");
	accepted("grpquota,usrquota", &o);
	CHECK(o.usrquota && o.grpquota, "grpquota,usrquota");
	accepted("quota,noquota", &o);
	CHECK(!o.usrquota && !o.grpquota, "noquota clears");
	accepted("size=10G,inodes=1k", &o);
	CHECK(o.size_limit == 10ull << 30 && o.inode_limit == 1024 && sfs_opts_enforce_quota(&o),
	      "size=, inodes=");
	accepted("size=0", &o);
	CHECK(!sfs_opts_enforce_quota(&o), "size=0 is no limit");
	refused("size=10Q", "size=10Q: not a size");
	refused("size=-1", "size=-1: not a size");
	refused("inodes=many", "inodes=many: not a count");
	refused("size", "size: needs a value");
	refused("quota=1", "quota: takes no value");
	refused("quota,cache=writeback", "cache=writeback: cannot be combined with quota");
	refused("cache=writeback,size=1G", "cache=writeback: cannot be combined with size");
	accepted("subdir=/a,size=1G", &o);
	refused("share=existing,usrquota", "usrquota: cannot be enforced with share=existing");
	accepted("cache=writeback,noquota", &o);
	accepted("subdir=/a,quota", &o);
	refused("acl,noexec,loop", "loop: unknown option");

	/* superblock options against the ones in force */
	accepted("data=journal,nodelalloc", &f);
	accepted("nodelalloc", &o);
	CHECK(sfs_opts_sb_compatible(&f, &o, err, sizeof(err)) == 0, "subset ok: %s", err);
	accepted("delalloc", &o);
	CHECK(sfs_opts_sb_compatible(&f, &o, err, sizeof(err)) != 0 && strstr(err, "delalloc: ") &&
	      strstr(err, "nodelalloc"), "mismatch names both: %s", err);
	accepted("commit=30", &o);
	CHECK(sfs_opts_sb_compatible(&f, &o, err, sizeof(err)) != 0 && strstr(err, "commit=30"),
	      "absent in force: %s", err);
	accepted("bsdgroups", &o);
	accepted("grpid", &f);
	CHECK(sfs_opts_sb_compatible(&f, &o, err, sizeof(err)) == 0, "synonyms agree: %s", err);
	/* what the kernel reports back for them, under another name of the family */
	accepted("noload,bsdgroups,dioread_lock,data=journal", &o);
	CHECK(sfs_sb_opt_shown(&o.sb[0], "norecovery") && sfs_sb_opt_shown(&o.sb[0], "noload"),
	      "noload is shown as norecovery");
	CHECK(sfs_sb_opt_shown(&o.sb[1], "grpid") && !sfs_sb_opt_shown(&o.sb[1], "nogrpid"),
	      "bsdgroups is shown as grpid");
	CHECK(sfs_sb_opt_shown(&o.sb[2], "nodioread_nolock") &&
	      !sfs_sb_opt_shown(&o.sb[2], "dioread_nolock"), "dioread_lock is nodioread_nolock");
	CHECK(sfs_sb_opt_shown(&o.sb[3], "data=journal") && !sfs_sb_opt_shown(&o.sb[3], "data=ordered") &&
	      !sfs_sb_opt_shown(&o.sb[3], "data") && !sfs_sb_opt_shown(&o.sb[0], "nodelalloc") &&
	      !sfs_sb_opt_shown(&o.sb[0], "rw") && !sfs_sb_opt_shown(&o.sb[0], "nonoload"),
	      "another setting or family is not");

	/* remount: quota enforcement and view limits change live */
	{
		struct sfs_opts live, re;
		accepted("noquota", &live);
		CHECK(sfs_opts_remount(&live, "remount,usrquota,size=1G", &re, err, sizeof(err)) == 0 &&
		      re.usrquota && !re.grpquota && re.size_limit == 1ull << 30, "remount,usrquota,size=1G");
		accepted("cache=writeback", &live);
		CHECK(sfs_opts_remount(&live, "remount,quota", &re, err, sizeof(err)) != 0 &&
		      strstr(err, "cache=writeback: cannot be combined with quota"),
		      "remount,quota on a writeback view: %s", err);
	}
	/* remount: changes on top of the live view's options; what cannot change is named */
	struct sfs_opts cur, nw;
	accepted("noacl,nouser_xattr,nosuid,subdir=/x", &cur);
	CHECK(sfs_opts_remount(&cur, "remount,user_xattr,ro", &nw, err, sizeof(err)) == 0,
	      "remount accepted: %s", err);
	CHECK(nw.user_xattr && nw.ro && !nw.acl && (nw.mount_flags & MS_NOSUID) &&
	      (nw.mount_flags & MS_RDONLY) && !strcmp(nw.subdir, "/x"), "remount keeps the rest");
	CHECK(sfs_opts_remount(&nw, "remount,rw", &cur, err, sizeof(err)) == 0 && !cur.ro &&
	      !(cur.mount_flags & MS_RDONLY), "remount rw");
	CHECK(sfs_opts_remount(&cur, "remount,acl", &nw, err, sizeof(err)) != 0 &&
	      strstr(err, "strictfs: acl: cannot change"), "acl cannot change: %s", err);
	CHECK(sfs_opts_remount(&cur, "remount,casefold", &nw, err, sizeof(err)) != 0 &&
	      strstr(err, "strictfs: casefold: cannot change"), "casefold cannot change: %s", err);
	CHECK(sfs_opts_remount(&cur, "remount,subdir=/y", &nw, err, sizeof(err)) != 0 &&
	      strstr(err, "strictfs: subdir=/y: cannot change"), "subdir cannot change: %s", err);
	/* named as spelled, however many fixed options come first; its own value is no change */
	CHECK(sfs_opts_remount(&cur, "remount,noacl,noacl,noacl,noacl,noacl,noacl,noacl,noacl,"
	                       "noacl,cache=strict,share=exclusive,nocasefold,subdir=/x/,"
	                       "subdir=/z", &nw, err, sizeof(err)) != 0 &&
	      strstr(err, "strictfs: subdir=/z: cannot change"), "the last subdir named: %s", err);
	CHECK(sfs_opts_remount(&cur, "remount,noacl,subdir=/x/,cache=strict", &nw, err,
	                       sizeof(err)) == 0, "the options in force again: %s", err);
	CHECK(sfs_opts_remount(&cur, "remount,cache=writeback", &nw, err, sizeof(err)) != 0 &&
	      strstr(err, "strictfs: cache=writeback: cannot change"), "cache: %s", err);
	/* where files' data goes is the view profile's to apply live (passthrough.c) */
	CHECK(sfs_opts_remount(&cur, "remount,nopassthrough", &nw, err, sizeof(err)) == 0 &&
	      nw.no_passthrough, "nopassthrough can change live: %s", err);
	CHECK(sfs_opts_remount(&cur, "remount,user_id=0,group_id=0,allow_other,default_permissions",
	                       &nw, err, sizeof(err)) == 0, "fuse echo options: %s", err);
	CHECK(sfs_opts_remount(&cur, "remount,user_id=1000", &nw, err, sizeof(err)) != 0 &&
	      strstr(err, "user_id=1000"), "foreign user_id refused: %s", err);

	test_idmap();
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
