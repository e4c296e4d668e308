/* One intrusive doubly linked list for the whole tree, in the manner of util-linux's
 * include/list.h (and the kernel's): a struct sfs_list in the element, a head that is a
 * struct sfs_list too, and sfs_list_entry to get from one to the other. Used for a view's
 * open files and the lock waits, and under the one LRU list (lru.h). */
#ifndef SFS_LIST_H
#define SFS_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct sfs_list {
	struct sfs_list *next, *prev;
};

#define SFS_LIST_INIT(name) {&(name), &(name)}

static inline void sfs_list_init(struct sfs_list *head)
{
	head->next = head->prev = head;
}

static inline bool sfs_list_empty(const struct sfs_list *head)
{
	return head->next == head;
}

static inline void sfs_list_insert_(struct sfs_list *e, struct sfs_list *prev, struct sfs_list *next)
{
	next->prev = e;
	e->next = next;
	e->prev = prev;
	prev->next = e;
}

/* At the front (most recently used first). */
static inline void sfs_list_add(struct sfs_list *e, struct sfs_list *head)
{
	sfs_list_insert_(e, head, head->next);
}

static inline void sfs_list_add_tail(struct sfs_list *e, struct sfs_list *head)
{
	sfs_list_insert_(e, head->prev, head);
}

/* e must be on a list; afterwards it is on none (its links are cleared). */
static inline void sfs_list_del(struct sfs_list *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->next = e->prev = NULL;
}

static inline void sfs_list_move(struct sfs_list *e, struct sfs_list *head)
{
	sfs_list_del(e);
	sfs_list_add(e, head);
}

#define sfs_list_entry(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* The first and last elements, or NULL on an empty list. */
#define sfs_list_first(head, type, member) \
	(sfs_list_empty(head) ? NULL : sfs_list_entry((head)->next, type, member))
#define sfs_list_last(head, type, member) \
	(sfs_list_empty(head) ? NULL : sfs_list_entry((head)->prev, type, member))

/* From the front; pos may be deleted in the body (n holds the next element). */
#define sfs_list_for_each_safe(pos, n, head) \
	for ((pos) = (head)->next, (n) = (pos)->next; (pos) != (head); (pos) = (n), (n) = (pos)->next)

/* From the back; pos may be deleted in the body. */
#define sfs_list_for_each_prev_safe(pos, p, head) \
	for ((pos) = (head)->prev, (p) = (pos)->prev; (pos) != (head); (pos) = (p), (p) = (pos)->prev)

#endif
