/*
 * The CM's part of `softrdma status`: counts, then one line per id (state,
 * port space, addresses, owner), so a test can wait for a listener and
 * check that nothing is left after a run.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cm/cm.h"

static const char *const state_names[] = {
    [SR_CM_IDLE] = "IDLE",
    [SR_CM_ADDR_BOUND] = "ADDR_BOUND",
    [SR_CM_ADDR_RESOLVED] = "ADDR_RESOLVED",
    [SR_CM_ROUTE_RESOLVED] = "ROUTE_RESOLVED",
    [SR_CM_LISTEN] = "LISTEN",
    [SR_CM_REQ_SENT] = "REQ_SENT",
    [SR_CM_REQ_RCVD] = "REQ_RCVD",
    [SR_CM_REP_SENT] = "REP_SENT",
    [SR_CM_REP_RCVD] = "REP_RCVD",
    [SR_CM_ESTABLISHED] = "ESTABLISHED",
    [SR_CM_DREQ_SENT] = "DREQ_SENT",
    [SR_CM_DREQ_RCVD] = "DREQ_RCVD",
    [SR_CM_TIMEWAIT] = "TIMEWAIT",
    [SR_CM_SIDR_REQ_SENT] = "SIDR_REQ_SENT",
    [SR_CM_SIDR_REQ_RCVD] = "SIDR_REQ_RCVD",
};

static void addr_str(const struct sockaddr_storage *a, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "-";

	if (a->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, ip, sizeof(ip));
	else if (a->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a)->sin6_addr, ip, sizeof(ip));
	snprintf(out, len, a->ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, sr_cm_port(a));
}

char *sr_cm_status_text(struct sr_daemon *d)
{
	struct sr_cm *cm = d->cm;
	char *buf = NULL, src[64], dst[64];
	size_t len = 0;
	FILE *f;
	unsigned n = 0;

	if (!cm)
		return NULL;
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	for (struct sr_cm_id *id = cm->all; id; id = id->next)
		n++;
	fprintf(f,
		"  cm: %u ids, %u channels, MADs sent %llu dropped %llu malformed %llu"
		" wire_tx %llu wire_rx %llu (own socket: tx %llu rx %llu) lingering_dreqs %u\n",
		n, cm->chan_alloc.in_use, (unsigned long long)cm->mads_sent,
		(unsigned long long)cm->mads_dropped, (unsigned long long)cm->mads_bad,
		(unsigned long long)cm->mads_wire_tx, (unsigned long long)cm->mads_wire_rx,
		(unsigned long long)cm->mads_wire_tx_own, (unsigned long long)cm->mads_wire_rx_own,
		cm->nlinger);
	for (struct sr_cm_id *id = cm->all; id; id = id->next) {
		addr_str(&id->src, src, sizeof(src));
		addr_str(&id->dst, dst, sizeof(dst));
		fprintf(f, "    cm id %u: %s ps %#x %s -> %s qpn %#x pid %d\n", id->handle,
			state_names[id->state], id->ps, src, dst, id->qpn, (int)id->owner->pid);
	}
	fclose(f);
	return buf;
}
