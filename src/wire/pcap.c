/*
 * The pcap writer (see pcap.h for why our own).  File format: the classic
 * libpcap one, version 2.4, in this host's byte order (readers go by the
 * magic number), magic 0xa1b23c4d for nanosecond timestamps,
 * LINKTYPE_ETHERNET.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire/frame.h"
#include "wire/pcap.h"

#define PCAP_MAGIC_NSEC	  0xa1b23c4du
#define PCAP_SNAPLEN	  262144u /* libpcap's maximum; we never truncate */
#define LINKTYPE_ETHERNET 1u
#define IOV_INLINE	  16

struct pcap_file_hdr {
	uint32_t magic;
	uint16_t version_major, version_minor;
	int32_t thiszone;
	uint32_t sigfigs, snaplen, linktype;
};

struct pcap_rec_hdr {
	uint32_t ts_sec, ts_nsec, caplen, len;
};

struct sr_pcap {
	pthread_mutex_t lock;
	int fd;
	int err;    /* first write error (-errno), sticky; under lock */
	off_t size; /* file size after the last whole record; under lock */
};

/* Writes every byte of iov (consumed in place), IOV_MAX at a time. */
static int writev_all(int fd, struct iovec *iov, int cnt)
{
	while (cnt > 0) {
		ssize_t n = writev(fd, iov, cnt < IOV_MAX ? cnt : IOV_MAX);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

int sr_pcap_open(struct sr_pcap **out, const char *path)
{
	struct pcap_file_hdr h = {
	    .magic = PCAP_MAGIC_NSEC,
	    .version_major = 2,
	    .version_minor = 4,
	    .snaplen = PCAP_SNAPLEN,
	    .linktype = LINKTYPE_ETHERNET,
	};
	struct iovec iov = {&h, sizeof(h)};
	struct sr_pcap *pc;
	int ret;

	pc = calloc(1, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	pc->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (pc->fd < 0) {
		ret = -errno;
		goto err_free;
	}
	ret = writev_all(pc->fd, &iov, 1);
	if (ret)
		goto err_close;
	pc->size = sizeof(h);
	pthread_mutex_init(&pc->lock, NULL);
	*out = pc;
	return 0;

err_close:
	close(pc->fd);
err_free:
	free(pc);
	return ret;
}

int sr_pcap_write(struct sr_pcap *pc, const struct timespec *ts, const uint8_t sgid[16],
		  const uint8_t dgid[16], uint16_t sport, uint16_t dport, uint16_t ip_id,
		  const struct iovec *iov, int iovcnt)
{
	struct iovec inl[IOV_INLINE + 2], *v = inl;
	uint8_t hdr[SR_FRAME_HDR_MAX];
	struct pcap_rec_hdr rec;
	struct timespec now;
	size_t hlen, len = 0;
	int ret;

	if (iovcnt < 0)
		return -EINVAL;
	hlen = sr_frame_hdr(hdr, sgid, dgid, sport, dport, ip_id, iov, iovcnt);
	if (!hlen)
		return -EMSGSIZE;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (!ts) {
		clock_gettime(CLOCK_REALTIME, &now);
		ts = &now;
	}
	rec.ts_sec = (uint32_t)ts->tv_sec;
	rec.ts_nsec = (uint32_t)ts->tv_nsec;
	rec.caplen = rec.len = (uint32_t)(hlen + len);

	if (iovcnt > IOV_INLINE) {
		v = malloc(sizeof(*v) * ((size_t)iovcnt + 2));
		if (!v)
			return -ENOMEM;
	}
	v[0] = (struct iovec){&rec, sizeof(rec)};
	v[1] = (struct iovec){hdr, hlen};
	memcpy(v + 2, iov, sizeof(*iov) * (size_t)iovcnt);

	pthread_mutex_lock(&pc->lock);
	ret = pc->err;
	if (!ret) {
		ret = writev_all(pc->fd, v, iovcnt + 2);
		if (!ret) {
			pc->size += (off_t)(sizeof(rec) + hlen + len);
		} else {
			/* Cut a torn record off: the file stays readable
			 * (best effort: on a full disk this still works). */
			int cut = ftruncate(pc->fd, pc->size);

			(void)cut;
			pc->err = ret;
		}
	}
	pthread_mutex_unlock(&pc->lock);

	if (v != inl)
		free(v);
	return ret;
}

int sr_pcap_close(struct sr_pcap *pc)
{
	int ret;

	if (!pc)
		return 0;
	ret = pc->err;
	if (close(pc->fd) && !ret)
		ret = -errno;
	pthread_mutex_destroy(&pc->lock);
	free(pc);
	return ret;
}
