/*
 * The suite across two hosts (remote mode).  When SR_BEHAVE_PEER_NETNS names
 * a network namespace (a second host: tests/twohost/behave.sh makes two
 * joined by a veth), the runner starts a second private softrdmad inside it,
 * every agent moves into it before opening its device, and both sides use
 * the RoCE v2 GID of their veth address instead of GID 0, so every QP of a
 * test has its peer on the other host and all traffic crosses the RoCEv2
 * engines and the wire.  Unset, the suite runs on one host as before.
 *
 *   SR_BEHAVE_PEER_NETNS  path of the peer host's namespace (/run/netns/X)
 *   SR_BEHAVE_ADDR        our veth address (IPv4 or IPv6): our GID
 *   SR_BEHAVE_PEER_ADDR   the peer's veth address: the agents' GID
 *   SR_BEHAVE_PEER_SOCKET set by the runner: the peer daemon's socket
 */
#ifndef SR_BEHAVE_HOSTS_H
#define SR_BEHAVE_HOSTS_H

#include <stdbool.h>

#define SR_ENV_PEER_NETNS  "SR_BEHAVE_PEER_NETNS"
#define SR_ENV_ADDR	   "SR_BEHAVE_ADDR"
#define SR_ENV_PEER_ADDR   "SR_BEHAVE_PEER_ADDR"
#define SR_ENV_PEER_SOCKET "SR_BEHAVE_PEER_SOCKET"

/* True in remote mode. */
bool sr_remote(void);
/* Why test `name` cannot run across hosts, or NULL if it can. */
const char *sr_remote_skip_reason(const char *name);
/* Called by a helper process that is to be the peer host (an agent), before
 * it opens any verbs object: joins the peer's namespace and takes its
 * daemon and address.  Does nothing outside remote mode. */
void sr_host_enter_peer(void);
/* An AF_UNIX socket made inside network namespace nsfd (-1: ours), so that
 * abstract names resolve there; -1 on error. */
int sr_unix_socket_in(int nsfd);

#endif
