/*
 * The side channel of the two-host test programs (xfer.c, mcast.c,
 * ackpp.c): a TCP connection between client and server for exchanging
 * set-up records, as perftest does; the tests' fatal-error macro; and the
 * RC connection steps they share.
 */
#ifndef SR_TWOHOST_SIDE_H
#define SR_TWOHOST_SIDE_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DIE(...)                                                                                   \
	do {                                                                                       \
		fprintf(stderr, "%s: ", program_invocation_short_name);                            \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

/* Exchanges len bytes each way. */
static inline void xchg(int sock, void *out, void *in, size_t len)
{
	if (write(sock, out, len) != (ssize_t)len)
		DIE("side channel write: %s", strerror(errno));
	for (size_t got = 0; got < len;) {
		ssize_t r = read(sock, (char *)in + got, len - got);

		if (r <= 0)
			DIE("side channel read: %s", r ? strerror(errno) : "closed");
		got += (size_t)r;
	}
}

/* Connects to host:port (client) or accepts one connection on port (host NULL). */
static inline int side_channel(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = host ? 0 : AI_PASSIVE};
	struct addrinfo *ai;
	int s, one = 1;

	if (getaddrinfo(host, port, &hints, &ai))
		DIE("getaddrinfo %s", host ? host : "");
	s = socket(ai->ai_family, SOCK_STREAM, 0);
	if (s < 0)
		DIE("socket");
	if (host) {
		if (connect(s, ai->ai_addr, ai->ai_addrlen))
			DIE("connect %s: %s", host, strerror(errno));
	} else {
		int l;

		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, 1))
			DIE("bind/listen: %s", strerror(errno));
		l = accept(s, NULL, NULL);
		if (l < 0)
			DIE("accept");
		close(s);
		s = l;
	}
	freeaddrinfo(ai);
	return s;
}

/*
 * Takes an RC QP from RESET to RTS towards the peer QP dqpn at GID dgid
 * (RoCE v2, sgid index gidx, the port's active MTU), with the given remote
 * access, PSNs and READ/atomic depth both ways; perftest's timeouts
 * (timeout 14: 67 ms, 7 retries, RNR retried for ever).
 */
static inline void side_rc_connect(struct ibv_context *dev, struct ibv_qp *qp, int gidx,
				   const uint8_t dgid[16], uint32_t dqpn, uint32_t rq_psn,
				   uint32_t sq_psn, int access, uint8_t rd_atomic)
{
	struct ibv_port_attr pa;
	struct ibv_qp_attr a = {0};

	if (ibv_query_port(dev, 1, &pa))
		DIE("ibv_query_port");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = (unsigned)access;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = pa.active_mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
	a.ah_attr.grh.sgid_index = (uint8_t)gidx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = rd_atomic;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RTS: %s", strerror(errno));
}

#endif
