/* The daemon's capabilities per thread (see priv.h). What the thread's effective set is, as
 * sfs_priv_effective left it, is kept thread-locally; the bracket saves the whole set at its
 * outermost begin and puts it back at its end. */
#include "priv.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct thread_priv {
	/* whether the effective capabilities are all the permitted ones or none, as
	 * sfs_priv_effective set them; unknown in a thread that never set them (it has its
	 * creator's of the moment) */
	enum { EFFECTIVE_UNKNOWN, EFFECTIVE_ALL, EFFECTIVE_NONE, EFFECTIVE_SOME } effective;
	unsigned long long mask; /* EFFECTIVE_SOME: which */
	/* saved by the outermost sfs_priv_begin */
	int depth;
	bool saved_ok;
	struct __user_cap_data_struct saved[2];
};

static __thread struct thread_priv tp;

int sfs_priv_caps_get(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	return syscall(SYS_capget, &h, d);
}

int sfs_priv_caps_set(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	return syscall(SYS_capset, &h, d);
}

void sfs_priv_caps_raise(struct __user_cap_data_struct d[2], int cap)
{
	d[CAP_TO_INDEX(cap)].effective |= CAP_TO_MASK(cap);
}

void sfs_priv_fsuid_changed(void)
{
	tp.effective = EFFECTIVE_UNKNOWN;
}

int sfs_priv_effective(bool all)
{
	struct __user_cap_data_struct d[2];

	if (tp.effective == (all ? EFFECTIVE_ALL : EFFECTIVE_NONE))
		return 0;
	if (sfs_priv_caps_get(d) < 0)
		return -errno;
	for (int i = 0; i < 2; i++)
		d[i].effective = all ? d[i].permitted : 0;
	if (sfs_priv_caps_set(d) < 0)
		return -errno;
	tp.effective = all ? EFFECTIVE_ALL : EFFECTIVE_NONE;
	return 0;
}

int sfs_priv_effective_mask(unsigned long long mask)
{
	struct __user_cap_data_struct d[2];

	if (tp.effective == EFFECTIVE_SOME && tp.mask == mask)
		return 0;
	if (sfs_priv_caps_get(d) < 0)
		return -errno;
	d[0].effective = d[0].permitted & (uint32_t)mask;
	d[1].effective = d[1].permitted & (uint32_t)(mask >> 32);
	if (sfs_priv_caps_set(d) < 0)
		return -errno;
	tp.effective = EFFECTIVE_SOME;
	tp.mask = mask;
	return 0;
}

static void raise_what(struct __user_cap_data_struct d[2], unsigned what)
{
	if (what & SFS_PRIV_SEARCH)
		sfs_priv_caps_raise(d, CAP_DAC_READ_SEARCH);
	if (what & SFS_PRIV_DAC) {
		sfs_priv_caps_raise(d, CAP_DAC_READ_SEARCH);
		sfs_priv_caps_raise(d, CAP_DAC_OVERRIDE);
	}
	if (what & SFS_PRIV_FOWNER) {
		sfs_priv_caps_raise(d, CAP_FOWNER);
		sfs_priv_caps_raise(d, CAP_FSETID);
	}
	if (what & SFS_PRIV_ADMIN)
		sfs_priv_caps_raise(d, CAP_SYS_ADMIN);
	if (what & SFS_PRIV_IMMUTABLE)
		sfs_priv_caps_raise(d, CAP_LINUX_IMMUTABLE);
	if (what & SFS_PRIV_RESOURCE)
		sfs_priv_caps_raise(d, CAP_SYS_RESOURCE);
	if (what & SFS_PRIV_INSPECT)
		sfs_priv_caps_raise(d, CAP_SYS_PTRACE);
	if (what & SFS_PRIV_SETFCAP)
		sfs_priv_caps_raise(d, CAP_SETFCAP);
}

void sfs_priv_begin(unsigned what)
{
	struct __user_cap_data_struct d[2];
	bool outer = tp.depth++ == 0;

	if (tp.effective == EFFECTIVE_ALL)
		return; /* root's requests already have every capability */
	if (sfs_priv_caps_get(d) < 0)
		return;
	if (outer) {
		memcpy(tp.saved, d, sizeof(d));
		tp.saved_ok = true;
	}
	raise_what(d, what);
	sfs_priv_caps_set(d);
}

/* Ends the outermost sfs_priv_begin: the thread gets back what it had before it. */
void sfs_priv_end(void)
{
	if (--tp.depth || !tp.saved_ok)
		return;
	sfs_priv_caps_set(tp.saved);
	tp.saved_ok = false;
}
