// Operating-system specifics of the UDP socket: options, link MTU, batched
// receive and send. Linux gets recvmmsg/sendmmsg; other POSIX systems loop.

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/timerfd.h>
#endif

#include "io.h"

static const int udx__sndbuf = 212992;
static const int udx__rcvbufs[] = {4194304, 2097152, 1048576, 524288, 262144, 212992};

int
udx__sys_socket (int family, bool ipv6only, bool reuseaddr) {
#ifdef SOCK_NONBLOCK
  int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return uv_translate_sys_error(errno);
#else
  int fd = socket(family, SOCK_DGRAM, 0);
  if (fd < 0)
    return uv_translate_sys_error(errno);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
#endif
  int on = 1;
  if (family == AF_INET6) {
    int v6only = ipv6only ? 1 : 0;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
  }
  if (reuseaddr) {
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  }
  return fd;
}

// One socket option of a buffer size. Linux caps SO_RCVBUF/SO_SNDBUF at
// net.core.rmem_max/wmem_max (212992 by default) without an error; a
// process allowed to (CAP_NET_ADMIN) gets the size it asks for with the
// *FORCE options. Returns what the kernel granted (it reports twice the
// size it books).
static int
set_buffer (int fd, int opt, int force_opt, int size) {
  (void) force_opt;
#ifdef SO_RCVBUFFORCE
  if (setsockopt(fd, SOL_SOCKET, force_opt, &size, sizeof(size)) != 0)
#endif
  {
    if (setsockopt(fd, SOL_SOCKET, opt, &size, sizeof(size)) != 0)
      return -1;
  }
  int got = 0;
  socklen_t len = sizeof(got);
  if (getsockopt(fd, SOL_SOCKET, opt, &got, &len) != 0)
    return -1;
  return got / 2;
}

#ifndef SO_RCVBUFFORCE
#define SO_RCVBUFFORCE SO_RCVBUF
#define SO_SNDBUFFORCE SO_SNDBUF
#endif

// libudx's send size (212992) and a receive buffer of 4 MiB, stepping down
// where the system refuses (macOS fails on oversize). When the kernel caps
// it well below what was asked, that is said once: a fast sender then
// overflows the socket and its datagrams are lost.
void
udx__sys_set_buffers (int fd) {
  static int warned = 0;
  set_buffer(fd, SO_SNDBUF, SO_SNDBUFFORCE, udx__sndbuf);
  for (size_t i = 0; i < sizeof(udx__rcvbufs) / sizeof(udx__rcvbufs[0]); i++) {
    int got = set_buffer(fd, SO_RCVBUF, SO_RCVBUFFORCE, udx__rcvbufs[i]);
    if (got < 0)
      continue;
    if (got < udx__rcvbufs[0] / 2 && !warned) {
      warned = 1;
      fprintf(stderr, "udx: the receive buffer is %d bytes, not the %d asked for; fast transfers will lose datagrams "
                      "(raise net.core.rmem_max, e.g. sysctl -w net.core.rmem_max=%d)\n",
              got, udx__rcvbufs[0], udx__rcvbufs[0]);
    }
    break;
  }
}

int
udx__sys_set_ttl (int fd, int family, int ttl) {
  int r = 0;
  if (family == AF_INET6) {
    r = setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &ttl, sizeof(ttl));
    setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl)); // v4 traffic on a dual-stack socket
  } else {
    r = setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
  }
  return r < 0 ? uv_translate_sys_error(errno) : 0;
}

int
udx__sys_get_ttl (int fd, int family, int *ttl) {
  socklen_t len = sizeof(*ttl);
  int r = family == AF_INET6 ? getsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, ttl, &len)
                             : getsockopt(fd, IPPROTO_IP, IP_TTL, ttl, &len);
  return r < 0 ? uv_translate_sys_error(errno) : 0;
}

// Don't fragment, and ignore the kernel's PMTU cache: the MTU search probes.
void
udx__sys_set_dontfrag (int fd, int family) {
#if defined(IP_MTU_DISCOVER) && defined(IP_PMTUDISC_PROBE)
  int v = IP_PMTUDISC_PROBE;
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v));
  if (family == AF_INET6) {
    int v6 = IPV6_PMTUDISC_PROBE;
    setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v6, sizeof(v6));
  }
#elif defined(IP_DONTFRAG)
  int on = 1;
  setsockopt(fd, IPPROTO_IP, IP_DONTFRAG, &on, sizeof(on));
  if (family == AF_INET6)
    setsockopt(fd, IPPROTO_IPV6, IPV6_DONTFRAG, &on, sizeof(on));
#else
  (void) fd;
  (void) family;
#endif
}

int
udx__sys_link_mtu (const struct sockaddr *addr) {
#if defined(IP_MTU) && defined(IPV6_MTU)
  int family = addr->sa_family;
  socklen_t alen = family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  int mtu = -1;
  if (connect(fd, addr, alen) == 0) {
    socklen_t len = sizeof(mtu);
    int r = family == AF_INET6 ? getsockopt(fd, IPPROTO_IPV6, IPV6_MTU, &mtu, &len)
                               : getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len);
    if (r < 0)
      mtu = -1;
  }
  close(fd); // always, also when connect failed
  return mtu;
#else
  (void) addr;
  return -1;
#endif
}

int
udx__sys_recv_batch (int fd, uint8_t *bufs, size_t size, struct sockaddr_storage *addrs, udx_rx_msg_t *out, int n) {
#ifdef __linux__
  struct mmsghdr msgs[UDX_RX_BATCH];
  struct iovec iov[UDX_RX_BATCH];
  union {
    struct cmsghdr h;
    uint8_t buf[CMSG_SPACE(sizeof(int))];
  } ctl[UDX_RX_BATCH];
  if (n > UDX_RX_BATCH)
    n = UDX_RX_BATCH;
  for (int i = 0; i < n; i++) {
    iov[i].iov_base = bufs + (size_t) i * size;
    iov[i].iov_len = size;
    memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
    msgs[i].msg_hdr.msg_name = &addrs[i];
    msgs[i].msg_hdr.msg_namelen = sizeof(addrs[i]);
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_control = ctl[i].buf;
    msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
  }
  int r;
  do {
    r = recvmmsg(fd, msgs, (unsigned) n, MSG_DONTWAIT, NULL);
  } while (r < 0 && errno == EINTR);
  if (r < 0)
    return uv_translate_sys_error(errno);
  for (int i = 0; i < r; i++) {
    struct msghdr *h = &msgs[i].msg_hdr;
    out[i].len = msgs[i].msg_len;
    out[i].truncated = (h->msg_flags & MSG_TRUNC) != 0;
    out[i].seg = 0;
#ifdef UDP_GRO
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
      if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
        int seg;
        memcpy(&seg, CMSG_DATA(c), sizeof(seg));
        if (seg > 0 && (size_t) seg < out[i].len)
          out[i].seg = (size_t) seg;
      }
    }
#endif
  }
  return r;
#else
  int got = 0;
  while (got < n) {
    struct iovec iov = {bufs + (size_t) got * size, size};
    struct msghdr h;
    memset(&h, 0, sizeof(h));
    h.msg_name = &addrs[got];
    h.msg_namelen = sizeof(addrs[got]);
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    ssize_t r = recvmsg(fd, &h, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      if (got > 0)
        break;
      return uv_translate_sys_error(errno);
    }
    out[got].len = (size_t) r;
    out[got].seg = 0;
    out[got].truncated = (h.msg_flags & MSG_TRUNC) != 0;
    got++;
  }
  return got;
#endif
}

int
udx__sys_send_msgs (int fd, udx_mmsg_t *msgs, int n) {
#ifdef __linux__
  int r;
  do {
    r = sendmmsg(fd, msgs, (unsigned) n, MSG_DONTWAIT);
  } while (r < 0 && errno == EINTR);
  if (r < 0)
    return uv_translate_sys_error(errno);
  return r;
#else
  for (int i = 0; i < n; i++) {
    ssize_t r;
    do {
      r = sendmsg(fd, &msgs[i].msg_hdr, 0);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
      return i > 0 ? i : uv_translate_sys_error(errno);
  }
  return n;
#endif
}

void
udx__sys_gso_cmsg (struct msghdr *h, udx_gso_cmsg_t *c, uint16_t gso_size) {
#if defined(__linux__) && defined(UDP_SEGMENT)
  memset(c, 0, sizeof(*c));
  h->msg_control = c->buf;
  h->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
  struct cmsghdr *cm = CMSG_FIRSTHDR(h);
  cm->cmsg_level = IPPROTO_UDP;
  cm->cmsg_type = UDP_SEGMENT;
  cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  memcpy(CMSG_DATA(cm), &gso_size, sizeof(gso_size));
#else
  (void) h;
  (void) c;
  (void) gso_size;
#endif
}

#if defined(__linux__) && (defined(UDP_SEGMENT) || defined(UDP_GRO))
// UDX_GSO=0 / UDX_GRO=0 in the environment turn the offloads off (for
// measurements).
static bool
udx__sys_env_on (const char *name) {
  const char *e = getenv(name);
  return !(e && strcmp(e, "0") == 0);
}
#endif

bool
udx__sys_enable_gso (int fd) {
#if defined(__linux__) && defined(UDP_SEGMENT)
  if (!udx__sys_env_on("UDX_GSO"))
    return false;
  int zero = 0; // per-message sizes come in control data
  return setsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &zero, sizeof(zero)) == 0;
#else
  (void) fd;
  return false;
#endif
}

bool
udx__sys_enable_gro (int fd) {
#if defined(__linux__) && defined(UDP_GRO)
  if (!udx__sys_env_on("UDX_GRO"))
    return false;
  int one = 1;
  return setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
#else
  (void) fd;
  return false;
#endif
}

int
udx__sys_timer_fd (void) {
#ifdef __linux__
  int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  return fd < 0 ? uv_translate_sys_error(errno) : fd;
#else
  return UV_ENOSYS;
#endif
}

int
udx__sys_timer_arm (int fd, uint32_t us) {
#ifdef __linux__
  struct itimerspec its = {0};
  its.it_value.tv_sec = us / UDX_US_PER_S;
  its.it_value.tv_nsec = (long) (us % UDX_US_PER_S) * 1000;
  return timerfd_settime(fd, 0, &its, NULL) < 0 ? uv_translate_sys_error(errno) : 0;
#else
  (void) fd;
  (void) us;
  return UV_ENOSYS;
#endif
}

void
udx__sys_timer_drain (int fd) {
  uint64_t expirations;
  ssize_t r = read(fd, &expirations, sizeof(expirations));
  (void) r; // EAGAIN: nothing to drain
}

size_t
udx__sys_huge_page_size (void) {
#ifdef __linux__
  const char *e = getenv("UDX_THP");
  if (e && strcmp(e, "0") == 0)
    return 0;
  // "always [madvise] never": madvised memory gets huge pages unless never
  char mode[128] = {0};
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == NULL)
    return 0;
  size_t n = fread(mode, 1, sizeof(mode) - 1, f);
  fclose(f);
  mode[n] = '\0';
  if (strstr(mode, "[never]") != NULL || (strstr(mode, "[always]") == NULL && strstr(mode, "[madvise]") == NULL))
    return 0;
  unsigned long long size = 0;
  f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");
  if (f == NULL)
    return 0;
  if (fscanf(f, "%llu", &size) != 1)
    size = 0;
  fclose(f);
  return (size_t) size; // the pool checks it (a power of two, up to 1 GiB)
#else
  return 0;
#endif
}
