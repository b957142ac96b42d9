/*
 * A pcap writer for what a daemon sends and receives on the RoCEv2 wire:
 * each datagram (given as GIDs, ports and the UDP payload up to and
 * including the ICRC) is written as an Ethernet frame (frame.h) with a
 * nanosecond timestamp, so tshark, Wireshark and scapy read it as they
 * would a capture of the real traffic.  One file per writer; any number of
 * threads may append to it.
 *
 * Our own writer, not libpcap's pcap_dump: the format is two fixed headers
 * (24 bytes per file, 16 per record), and libpcap would need every packet
 * copied into one buffer (pcap_dump takes a pointer and a length, our
 * payload is an iovec from application memory), buffers in stdio (a daemon
 * that dies loses the tail unless it flushes each packet) and is not
 * thread-safe.  Here each record leaves in one writev() under a mutex, so
 * at every moment the file holds whole records only, readable while the
 * daemon runs; and no dependency is added.
 */
#ifndef SR_WIRE_PCAP_H
#define SR_WIRE_PCAP_H

#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

struct sr_pcap;

/* Creates (or truncates) path and writes the file header; 0 or -errno. */
int sr_pcap_open(struct sr_pcap **out, const char *path);

/*
 * Appends one datagram from sgid:sport to dgid:dport (host byte order);
 * ip_id is the IPv4 identification it carried (icrc.h; ignored for IPv6);
 * ts NULL means now (CLOCK_REALTIME).  0 or -errno: -EMSGSIZE for a
 * payload too long for IP.  A failed write (disk full) cuts its torn
 * record off the file, and every later call returns the same error.
 */
int sr_pcap_write(struct sr_pcap *pc, const struct timespec *ts, const uint8_t sgid[16],
		  const uint8_t dgid[16], uint16_t sport, uint16_t dport, uint16_t ip_id,
		  const struct iovec *iov, int iovcnt);

/* Closes the file; 0, or the first write error met (-errno). */
int sr_pcap_close(struct sr_pcap *pc);

#endif
