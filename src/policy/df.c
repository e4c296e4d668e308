/* bsddf / minixdf: statfs as ext4 reports it with that option. The backing answers bsddf
 * (metadata overhead subtracted); minixdf reports the whole device's blocks, read from the
 * superblock as ext4 does. */
#include "backing.h"
#include "services.h"
#include "view.h"
#include "policy.h"

static void df_statfs(const struct sfs_req *r, struct statvfs *st)
{
	const struct sfs_view *v = r->view;
	unsigned long long total;

	if (v->prof->opts.df != SFS_DF_MINIX)
		return;
	total = sfs_backing_total_blocks(v->svc->backing);
	if (total)
		st->f_blocks = total;
}

const struct sfs_policy sfs_policy_df = {
	.name = "df",
	.statfs = df_statfs,
};
