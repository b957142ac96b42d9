/*
 * Moving a process's own pages onto other pages in place (pagemove.c): what
 * memory registration does to put a region on a memfd and to give it back.
 */
#ifndef SR_VERBS_PAGEMOVE_H
#define SR_VERBS_PAGEMOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A piece of an address range: one mapping, or the part of it in the range. */
struct sr_vma {
	uintptr_t start, end;
	int prot;	    /* PROT_READ | PROT_WRITE | PROT_EXEC */
	bool shared;	    /* MAP_SHARED */
	uint64_t inode;	    /* 0: anonymous memory */
	uint64_t page_size; /* 0: not known (no PROCMAP_QUERY) */
};

/* Describes [start, end) (page aligned) as the pieces of the mappings that
 * cover it, in order, in a malloc'd array.  -EFAULT if part of it is not
 * mapped. */
int sr_vmas_get(uintptr_t start, uintptr_t end, struct sr_vma **vmas, unsigned *n);
/* The same into vmas[0..cap), without allocating (for a fork child): returns
 * how many pieces there are (those beyond cap are not stored), or -errno. */
int sr_vmas_fill(uintptr_t start, uintptr_t end, struct sr_vma *vmas, unsigned cap);

/* Replaces the pages of [start, start + len) by the pages of `dst`, a
 * writable mapping of len bytes that nothing else uses, after copying the
 * current contents into it: from src_fd (offset 0 on) if src_fd >= 0, else
 * from the range itself (-EFAULT where it is not readable).  The new pages
 * get the protections of `vmas` (the pieces of the range).  With `protect`,
 * other threads' writes to the range while it moves wait and then land in
 * the new pages (see pagemove.c for where the kernel allows that); without,
 * the caller guarantees that no other thread runs (a fork child).  The
 * calling thread's own writes (its stack in the range) are never lost.  On
 * failure dst is still the caller's to unmap, and the range is unchanged
 * (but for a piece already moved when a later one failed, with the same
 * contents). */
int sr_pages_move(uintptr_t start, size_t len, void *dst, int src_fd, const struct sr_vma *vmas,
		  unsigned n, bool protect);

/* In a fork child: the mover thread did not survive the fork. */
void sr_pages_fork_child(void);

#endif
