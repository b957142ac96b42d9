/*
 * `softrdma fault` and `softrdma trace`: the daemon's side.  The spec is
 * parsed here (transport/fault.h) and handed to the RoCEv2 engine through its
 * control mailbox (engine/ctl.h); a capture file comes as a descriptor the
 * CLI opened (so it is created with the user's own rights, in the user's
 * directory), reopened here through /proc/self/fd as a pcap writer that
 * the engine thread fills.  Also the engine's part of `softrdma status`:
 * per port, the fault counters and the capture; per wire QP, its PSNs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "core/qp_state.h"
#include "daemon/daemon.h"
#include "engine/ctl.h"
#include "engine/engine.h"
#include "wire/pcap.h"

static char trace_path[SR_CTL_TEXT]; /* "" : no capture */

int sr_ctl_fault(struct sr_daemon *d, const struct sr_req *req, struct sr_rep *rep)
{
	char spec[SR_CTL_TEXT];
	struct sr_fault_cfg *cfg = malloc(sizeof(*cfg));
	int ret;

	(void)d;
	if (!cfg)
		return -ENOMEM;
	memcpy(spec, req->u.fault.spec, sizeof(spec));
	spec[sizeof(spec) - 1] = 0;
	ret = sr_fault_parse(spec, cfg, rep->u.fault.text, sizeof(rep->u.fault.text));
	if (!ret) {
		ret = sr_engine_fault(cfg);
		if (ret == -ENOTSUP)
			snprintf(rep->u.fault.text, sizeof(rep->u.fault.text),
				 "no RoCEv2 engine on this host");
		else if (ret)
			snprintf(rep->u.fault.text, sizeof(rep->u.fault.text), "engine: %s",
				 strerror(-ret));
		else
			snprintf(rep->u.fault.text, sizeof(rep->u.fault.text), "%s", cfg->text);
		if (!ret)
			sr_info("fault injection: %s", cfg->text);
	}
	free(cfg);
	return ret;
}

int sr_ctl_trace(struct sr_daemon *d, const struct sr_req *req, int *fds, int nfds,
		 struct sr_rep *rep)
{
	struct sr_pcap *pc = NULL, *old = NULL;
	char proc[64];
	struct stat st;
	int ret;

	(void)d;
	if (nfds > 1)
		return -EINVAL;
	if (!sr_engine_running())
		return -ENOTSUP;
	if (nfds == 1) {
		/* a regular file only: a pipe or socket could block the engine */
		if (fstat(fds[0], &st) || !S_ISREG(st.st_mode))
			return -EINVAL;
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fds[0]);
		ret = sr_pcap_open(&pc, proc);
		if (ret)
			return ret;
	}
	ret = sr_engine_trace(pc, &old, &rep->u.trace.pkts);
	if (ret) {
		/* -ETIMEDOUT: the engine owns pc now */
		if (ret != -ETIMEDOUT)
			sr_pcap_close(pc);
		return ret;
	}
	if (old)
		sr_pcap_close(old);
	if (pc) {
		memcpy(trace_path, req->u.trace.path, sizeof(trace_path));
		trace_path[sizeof(trace_path) - 1] = 0;
		if (!trace_path[0])
			snprintf(trace_path, sizeof(trace_path), "(fd)");
		sr_info("trace: capturing RoCEv2 into %s", trace_path);
	} else {
		trace_path[0] = 0;
	}
	return 0;
}

static const char *type_name(uint32_t t)
{
	return t == IBV_QPT_RC	       ? "RC"
	       : t == IBV_QPT_UC       ? "UC"
	       : t == IBV_QPT_UD       ? "UD"
	       : t == IBV_QPT_XRC_SEND ? "XRC_SEND"
	       : t == IBV_QPT_XRC_RECV ? "XRC_RECV"
				       : "?";
}

char *sr_ctl_status_text(void)
{
	const struct sr_eng_snap *s;
	size_t cap = 4096 + SR_ENG_SNAP_QPS * 256, n = 0;
	char *b;
	int ret;

	if (!sr_engine_running())
		return NULL;
	b = malloc(cap);
	if (!b)
		return NULL;
#define P(...)                                                                                     \
	do {                                                                                       \
		if (n < cap)                                                                       \
			n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__);                        \
	} while (0)
	P("  fault: %s\n", sr_engine_fault_text());
	ret = sr_engine_snapshot(&s);
	if (ret) {
		P("  (engine busy: %s; no per-QP view)\n", strerror(-ret));
		return b;
	}
	if (s->fault_on && strcmp(sr_engine_fault_text(), "off")) {
		static const char *const dn[SR_FAULT_DIRS] = {"tx", "rx"};

		for (int d = 0; d < SR_FAULT_DIRS; d++) {
			P("    injected %s: matched %llu", dn[d],
			  (unsigned long long)s->fault.matched[d]);
			for (int k = 0; k < SR_FK_MAX; k++)
				P(" %s %llu", sr_fault_kind_name[k],
				  (unsigned long long)s->fault.kind[d][k]);
			P(" held %llu\n", (unsigned long long)s->fault.held_now[d]);
		}
	}
	if (s->trace_on)
		P("  trace: %s packets %llu%s%s\n", trace_path[0] ? trace_path : "(fd)",
		  (unsigned long long)s->trace_pkts, s->trace_err ? " stopped: " : "",
		  s->trace_err ? strerror(-s->trace_err) : "");
	else
		P("  trace: off\n");
	for (uint32_t i = 0; i < s->nqps; i++) {
		const struct sr_eng_qp_snap *q = &s->qps[i];

		P("  wire qp 0x%06x %s %s dest_qpn 0x%06x", q->qpn, type_name(q->type),
		  sr_qp_state_name(q->state), q->dest_qpn);
		if (q->req_init)
			P(" | req next_psn 0x%06x una_psn 0x%06x outstanding %u rd_atomic %u "
			  "retrans %llu retry_left %u rnr_left %u%s%s",
			  q->npsn, q->una, q->outstanding, q->rd_out,
			  (unsigned long long)q->retrans, q->retry_left, q->rnr_left,
			  q->timer ? " timer" : "", q->rnr_wait ? " rnr_wait" : "");
		if (q->resp_init)
			P(" | resp expected_psn 0x%06x msn %u", q->epsn, q->msn);
		P("\n");
	}
	if (s->more_qps)
		P("  ... and %u more wire QPs\n", s->more_qps);
#undef P
	if (n >= cap)
		b[cap - 1] = 0;
	return b;
}
