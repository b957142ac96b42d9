/*
 * Fault injection on the RoCEv2 wire, the engine's part: the spec parser,
 * the engine's state, and the holding queues for delay and reorder that
 * the taps (fault_decide.c) fill and the engine's loop empties (see
 * fault.h for the grammar and the determinism rules).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "core/log.h"
#include "engine/ctl.h"
#include "engine/internal.h"
#include "transport/fault.h"
#include "wire/udp.h"
#include "wire/icrc.h"

const char *const sr_fault_kind_name[SR_FK_MAX] = {"drop", "dup", "reorder", "corrupt", "delay"};

#define REORDER_DEFAULT_NS 1000000ull

/* ---- the spec ---- */

static int parse_time(const char *s, uint64_t *ns)
{
	char *end;
	double v = strtod(s, &end);
	double mul = 1e3; /* bare: microseconds */

	if (end == s || !(v >= 0)) /* NaN too */
		return -EINVAL;
	if (!strcmp(end, "ns"))
		mul = 1;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "s"))
		mul = 1e9;
	else if (*end)
		return -EINVAL;
	if (v * mul > 60e9) /* a minute at most */
		return -EINVAL;
	*ns = (uint64_t)(v * mul);
	return 0;
}

static int parse_prob(const char *s, double *p)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s)
		return -EINVAL;
	if (*end == '%') {
		v /= 100;
		end++;
	}
	if (*end || !(v >= 0 && v <= 1))
		return -EINVAL;
	*p = v;
	return 0;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!*s || *s == '-')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return *end || errno ? -EINVAL : 0;
}

static uint64_t thresh_of(double p)
{
	if (p <= 0)
		return 0;
	if (p >= 1)
		return UINT64_MAX;
	return (uint64_t)(p * 18446744073709551616.0);
}

static void __attribute__((format(printf, 3, 4))) say(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

static void canon(struct sr_fault_cfg *cfg)
{
	static const char *const dname[SR_FAULT_DIRS] = {"tx", "rx"};
	size_t n = 0, len = sizeof(cfg->text);
	char *t = cfg->text;

	t[0] = 0;
	if (!sr_fault_cfg_on(cfg)) {
		snprintf(t, len, "off");
		return;
	}
	n += (size_t)snprintf(t + n, len - n, "seed=%llu", (unsigned long long)cfg->seed);
	for (int d = 0; d < SR_FAULT_DIRS && n < len; d++) {
		const struct sr_fault_rule *r = &cfg->dir[d];

		if (!r->on)
			continue;
		n += (size_t)snprintf(t + n, len - n, ";dir=%s", dname[d]);
		if (n < len && r->one_qp)
			n += (size_t)snprintf(t + n, len - n, ",qp=0x%06x", r->qpn);
		for (int k = 0; k < SR_FK_MAX && n < len; k++) {
			if (r->thresh[k]) {
				n += (size_t)snprintf(t + n, len - n, ",%s=%g",
						      sr_fault_kind_name[k], r->prob[k]);
				if (n < len && k == SR_FK_DELAY)
					n += (size_t)snprintf(t + n, len - n, ":%lluus",
							      (unsigned long long)r->delay_ns /
								  1000);
				if (n < len && k == SR_FK_REORDER)
					n += (size_t)snprintf(t + n, len - n, ":%lluus",
							      (unsigned long long)r->reorder_ns /
								  1000);
			}
			if (n < len && r->nth[k])
				n += (size_t)snprintf(t + n, len - n, ",%s_nth=%llu",
						      sr_fault_kind_name[k],
						      (unsigned long long)r->nth[k]);
		}
	}
	if (n >= len)
		t[len - 1] = 0;
}

bool sr_fault_cfg_on(const struct sr_fault_cfg *cfg)
{
	if (!cfg)
		return false;
	for (int d = 0; d < SR_FAULT_DIRS; d++)
		if (cfg->dir[d].on)
			return true;
	return false;
}

bool sr_fault_cfg_holds(const struct sr_fault_cfg *cfg)
{
	for (int d = 0; d < SR_FAULT_DIRS; d++) {
		const struct sr_fault_rule *r = &cfg->dir[d];

		if (r->on && (r->thresh[SR_FK_DELAY] || r->nth[SR_FK_DELAY] ||
			      r->thresh[SR_FK_REORDER] || r->nth[SR_FK_REORDER]))
			return true;
	}
	return false;
}

static bool rule_active(const struct sr_fault_rule *r)
{
	for (int k = 0; k < SR_FK_MAX; k++)
		if (r->thresh[k] || r->nth[k])
			return true;
	return false;
}

/* One clause: its items applied to the rules of the directions it names. */
static int parse_clause(char *cl, struct sr_fault_cfg *cfg, char *err, size_t errlen)
{
	struct sr_fault_rule r = {0};
	bool dirs[SR_FAULT_DIRS] = {true, false};
	char *save = NULL;

	r.reorder_ns = REORDER_DEFAULT_NS;
	for (char *it = strtok_r(cl, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		char *val = strchr(it, '=');
		int k;

		while (*it == ' ')
			it++;
		if (!*it)
			continue;
		if (!strcmp(it, "off"))
			continue;
		if (!val) {
			say(err, errlen, "'%s': expected key=value", it);
			return -EINVAL;
		}
		*val++ = 0;
		if (!strcmp(it, "seed")) {
			if (parse_u64(val, &cfg->seed))
				goto bad;
			continue;
		}
		if (!strcmp(it, "dir")) {
			dirs[SR_FAULT_TX] = !strcmp(val, "tx") || !strcmp(val, "both");
			dirs[SR_FAULT_RX] = !strcmp(val, "rx") || !strcmp(val, "both");
			if (!dirs[SR_FAULT_TX] && !dirs[SR_FAULT_RX])
				goto bad;
			continue;
		}
		if (!strcmp(it, "qp")) {
			uint64_t q;

			if (!strcmp(val, "all")) {
				r.one_qp = false;
				continue;
			}
			if (parse_u64(val, &q) || q > 0xffffff)
				goto bad;
			r.one_qp = true;
			r.qpn = (uint32_t)q;
			continue;
		}
		for (k = 0; k < SR_FK_MAX; k++) {
			size_t kl = strlen(sr_fault_kind_name[k]);

			if (!strncmp(it, sr_fault_kind_name[k], kl) &&
			    (!it[kl] || !strcmp(it + kl, "_nth")))
				break;
		}
		if (k == SR_FK_MAX) {
			say(err, errlen, "unknown key '%s'", it);
			return -EINVAL;
		}
		if (strstr(it, "_nth")) {
			if (parse_u64(val, &r.nth[k]) || !r.nth[k])
				goto bad;
			continue;
		}
		/* P, or P:T for delay and reorder */
		char *colon = strchr(val, ':');

		if (colon) {
			*colon++ = 0;
			if (k != SR_FK_DELAY && k != SR_FK_REORDER)
				goto bad;
			if (parse_time(colon, k == SR_FK_DELAY ? &r.delay_ns : &r.reorder_ns))
				goto bad;
		} else if (k == SR_FK_DELAY) {
			say(err, errlen, "delay needs a time: delay=P:T (e.g. 0.02:500us)");
			return -EINVAL;
		}
		if (parse_prob(val, &r.prob[k]))
			goto bad;
		r.thresh[k] = thresh_of(r.prob[k]);
		continue;
	bad:
		say(err, errlen, "bad value '%s' for %s", val, it);
		return -EINVAL;
	}
	if (r.nth[SR_FK_DELAY] && !r.delay_ns) {
		say(err, errlen, "delay_nth needs a delay time: delay=0:T");
		return -EINVAL;
	}
	r.on = rule_active(&r);
	for (int d = 0; d < SR_FAULT_DIRS; d++)
		if (dirs[d] && r.on)
			cfg->dir[d] = r;
	return 0;
}

int sr_fault_parse(const char *spec, struct sr_fault_cfg *cfg, char *err, size_t errlen)
{
	char buf[SR_FAULT_TEXT], *save = NULL;
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	cfg->seed = 1;
	if (err && errlen)
		err[0] = 0;
	if (!spec)
		spec = "";
	if (strlen(spec) >= sizeof(buf)) {
		say(err, errlen, "spec longer than %zu bytes", sizeof(buf) - 1);
		return -EINVAL;
	}
	strcpy(buf, spec);
	for (char *cl = strtok_r(buf, ";", &save); cl; cl = strtok_r(NULL, ";", &save)) {
		ret = parse_clause(cl, cfg, err, errlen);
		if (ret)
			return ret;
	}
	canon(cfg);
	return 0;
}

/* ---- the engine's state ---- */

struct held {
	struct held *next;
	uint64_t due;	 /* CLOCK_MONOTONIC ns */
	bool after_next; /* reorder: released once a later packet has passed */
	int sock;	 /* tx */
	uint8_t sgid[16], dgid[16];
	uint16_t sport;
	uint32_t len;
	uint8_t data[];
};

struct sr_fault {
	struct sr_fault_cfg cfg;
	struct sr_fault_shm *sh; /* the rules and counts everyone uses */
	struct held *held[SR_FAULT_DIRS], **tail[SR_FAULT_DIRS];
	unsigned nheld[SR_FAULT_DIRS];
	bool release_all;
};

struct sr_fault *sr_fault_new(const struct sr_fault_cfg *cfg, struct sr_fault_shm *sh)
{
	struct sr_fault *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	for (int d = 0; d < SR_FAULT_DIRS; d++)
		f->tail[d] = &f->held[d];
	f->sh = sh;
	sr_fault_set(f, cfg);
	return f;
}

void sr_fault_set(struct sr_fault *f, const struct sr_fault_cfg *cfg)
{
	if (cfg)
		f->cfg = *cfg;
	else
		memset(&f->cfg, 0, sizeof(f->cfg));
	sr_fault_publish(f->sh, cfg);
	f->release_all = true;
}

void sr_fault_free(struct sr_fault *f)
{
	if (!f)
		return;
	for (int d = 0; d < SR_FAULT_DIRS; d++)
		while (f->held[d]) {
			struct held *h = f->held[d];

			f->held[d] = h->next;
			free(h);
		}
	free(f);
}

void sr_fault_counts(const struct sr_fault *f, struct sr_fault_counts *out)
{
	sr_fault_shm_counts(f->sh, out);
	for (int d = 0; d < SR_FAULT_DIRS; d++)
		out->held_now[d] = f->nheld[d];
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Keeps a copy of the datagram; false if the queue is full (it passes). */
static bool hold(struct sr_engine *e, enum sr_fault_dir d, unsigned mask, int sock,
		 const uint8_t *sgid, const uint8_t *dgid, uint16_t sport, const struct iovec *iov,
		 unsigned niov)
{
	struct sr_fault *f = e->fault;
	const struct sr_fault_rule *r;
	size_t len = 0;
	struct held *h;

	if (!f)
		return false; /* the rules came before the engine's state: it passes */
	r = &f->cfg.dir[d];
	if (f->nheld[d] >= SR_FAULT_HOLD_MAX)
		return false;
	for (unsigned i = 0; i < niov; i++)
		len += iov[i].iov_len;
	h = malloc(sizeof(*h) + len);
	if (!h)
		return false;
	h->next = NULL;
	h->after_next = !(mask & (1u << SR_FK_DELAY));
	h->due = mono_ns() + (h->after_next ? r->reorder_ns : r->delay_ns);
	h->sock = sock;
	memcpy(h->sgid, sgid, 16);
	memcpy(h->dgid, dgid, 16);
	h->sport = sport;
	h->len = (uint32_t)len;
	len = 0;
	for (unsigned i = 0; i < niov; i++) {
		memcpy(h->data + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	*f->tail[d] = h;
	f->tail[d] = &h->next;
	f->nheld[d]++;
	return true;
}

bool sr_fault_tx_on(const struct sr_fault *f)
{
	return f->cfg.dir[SR_FAULT_TX].on;
}

bool sr_fault_holds(const struct sr_fault *f)
{
	return sr_fault_cfg_holds(&f->cfg);
}

/* A packet went through in direction d: reordered ones may follow it. */
static void passed(struct sr_engine *e, enum sr_fault_dir d)
{
	if (!e->fault)
		return;
	for (struct held *h = e->fault->held[d]; h; h = h->next)
		if (h->after_next)
			h->due = 0;
}

const struct sr_eng_taps sr_eng_fault_taps = {
    .hold = hold, .passed = passed, .trace = sr_eng_trace};

/* Takes the first held packet of direction d that is due, or NULL. */
static struct held *take_due(struct sr_fault *f, enum sr_fault_dir d, uint64_t now)
{
	for (struct held **pp = &f->held[d]; *pp; pp = &(*pp)->next) {
		struct held *h = *pp;

		if (h->due > now && !f->release_all)
			continue;
		*pp = h->next;
		if (f->tail[d] == &h->next)
			f->tail[d] = pp;
		f->nheld[d]--;
		return h;
	}
	return NULL;
}

/* ---- releasing ---- */

static void send_held(const struct held *h)
{
	struct sockaddr_in6 dst;
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {(void *)h->data, h->len};
	struct msghdr mh = {.msg_name = &dst,
			    .msg_namelen = sizeof(dst),
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf};

	mh.msg_controllen = sr_udp_route(&dst, &ctl.align, h->sgid, h->dgid);
	if (sendmsg(h->sock, &mh, MSG_DONTWAIT) < 0)
		sr_dbg("engine: fault: held datagram lost: %m"); /* as on a wire */
}

uint64_t sr_eng_fault_turn(struct sr_engine *e)
{
	struct sr_fault *f = e->fault;
	uint64_t now, next = 0;
	struct held *h;
	bool rx = false;

	if (!f)
		return 0;
	if (!f->held[SR_FAULT_TX] && !f->held[SR_FAULT_RX]) {
		f->release_all = false;
		if (!sr_fault_cfg_on(&f->cfg)) { /* off, and nothing held: no tap at all */
			sr_fault_free(f);
			e->fault = NULL;
		}
		return 0;
	}
	now = mono_ns();
	while ((h = take_due(f, SR_FAULT_RX, now))) {
		sr_eng_rx_one(e, h->data, h->len,
			      &(struct sr_link_addr){h->sgid, h->dgid, h->sport});
		free(h);
		rx = true;
	}
	if (rx)
		sr_eng_resp_acks(e);
	while ((h = take_due(f, SR_FAULT_TX, now))) {
		struct iovec iov = {h->data, h->len};

		sr_eng_trace(e, h->sgid, h->dgid, h->sport, SR_ROCE_PORT, &iov, 1);
		send_held(h);
		free(h);
	}
	f->release_all = false;
	for (int d = 0; d < SR_FAULT_DIRS; d++)
		for (h = f->held[d]; h; h = h->next)
			if (!next || h->due < next)
				next = h->due ? h->due : now;
	return next;
}
