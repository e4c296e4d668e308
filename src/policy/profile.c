/* The view profile (profile.h): what a view's options mean, derived here and nowhere else. */
#include "profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "policy.h"
#include "util.h"
#include "view.h"

struct sfs_profile *sfs_profile_make(const struct sfs_opts *o)
{
	struct sfs_profile *p = calloc(1, sizeof(*p));
	struct mount_attr attr;

	if (!p)
		return NULL;
	p->opts = *o;
	sfs_opts_mount_attr(o->mount_flags, &attr);
	p->mount_attrs = attr.attr_set;
	p->backing_attrs = sfs_policy_mount_attrs(o);
	p->no_passthrough = sfs_policy_no_passthrough(o);
	p->limits = sfs_policy_limits(o);
	return p;
}

void sfs_profile_free(struct sfs_profile *p)
{
	while (p) {
		struct sfs_profile *older = p->retired;
		free(p);
		p = older;
	}
}

char *sfs_profile_attr_names(unsigned attrs, char *buf, size_t len)
{
	static const struct { unsigned attr; const char *name; } names[] = {
		{MOUNT_ATTR_RDONLY, "ro"}, {MOUNT_ATTR_NOSUID, "nosuid"}, {MOUNT_ATTR_NODEV, "nodev"},
		{MOUNT_ATTR_NOEXEC, "noexec"}, {MOUNT_ATTR_NOSYMFOLLOW, "nosymfollow"},
		{MOUNT_ATTR_NODIRATIME, "nodiratime"}};
	unsigned atime = attrs & MOUNT_ATTR__ATIME;

	buf[0] = '\0';
	sfs_list_append(buf, len, attrs & MOUNT_ATTR_RDONLY ? "ro" : "rw");
	for (size_t i = 1; i < ARRAY_SIZE(names); i++)
		if (attrs & names[i].attr)
			sfs_list_append(buf, len, names[i].name);
	sfs_list_append(buf, len, atime == MOUNT_ATTR_NOATIME ? "noatime"
	                          : atime == MOUNT_ATTR_STRICTATIME ? "strictatime" : "relatime");
	return buf;
}
