// The socket transmit ring: how queued datagrams are cut into sendmmsg
// messages and UDP_SEGMENT runs, zero-copy DATA over loopback, and datagrams
// that still point into a stream's send queue when the stream goes away.

#include <netinet/udp.h>
#include <string.h>

#include "../src/io.h"
#include "io_helpers.h"

static udx_tx_slot_t slots[UDX_TX_SLOTS];

static void
slot_set (int i, uint32_t len, uint16_t port) {
  memset(&slots[i], 0, sizeof(slots[i]));
  slots[i].to.v4.sin_family = AF_INET;
  slots[i].to.v4.sin_port = htons(port);
  slots[i].to.v4.sin_addr.s_addr = htonl(0x7f000001);
  slots[i].to_len = sizeof(struct sockaddr_in);
  slots[i].len = len;
  slots[i].niov = 1;
}

// Equal datagrams to one address form one run; without GSO each is alone.
static void
test_plan_runs (void) {
  uint16_t segs[UDX_TX_SLOTS];
  for (int i = 0; i < 10; i++)
    slot_set(i, 1472, 9000);
  CHECK_EQ(udx__tx_plan(slots, 10, true, segs), 1);
  CHECK_EQ(segs[0], 10);
  CHECK_EQ(udx__tx_plan(slots, 10, false, segs), 10);
  for (int i = 0; i < 10; i++)
    CHECK_EQ(segs[i], 1);
}

// Only the last datagram of a run may be shorter; a longer one starts a new
// run (an MTU probe), so does another address.
static void
test_plan_boundaries (void) {
  uint16_t segs[UDX_TX_SLOTS];
  slot_set(0, 1472, 9000);
  slot_set(1, 1472, 9000);
  slot_set(2, 700, 9000); // shorter: ends the run
  slot_set(3, 1472, 9000);
  slot_set(4, 1500, 9000); // longer: a new run
  slot_set(5, 1500, 9000);
  slot_set(6, 1500, 9001); // another port
  slot_set(7, 20, 9001);
  slot_set(8, 20, 9001);
  int n = udx__tx_plan(slots, 9, true, segs);
  CHECK_EQ(n, 5);
  CHECK_EQ(segs[0], 3); // 1472 1472 700
  CHECK_EQ(segs[1], 1); // 1472
  CHECK_EQ(segs[2], 2); // 1500 1500
  CHECK_EQ(segs[3], 2); // 1500 20 (shorter last, same address)
  CHECK_EQ(segs[4], 1); // 20
}

// A run holds at most UDX_GSO_SEGS datagrams and UDX_GSO_BYTES bytes.
static void
test_plan_limits (void) {
  uint16_t segs[UDX_TX_SLOTS];
  for (int i = 0; i < 200; i++)
    slot_set(i, 100, 9000);
  int n = udx__tx_plan(slots, 200, true, segs);
  CHECK_EQ(n, 4);
  CHECK_EQ(segs[0], UDX_GSO_SEGS);
  CHECK_EQ(segs[1], UDX_GSO_SEGS);
  CHECK_EQ(segs[2], UDX_GSO_SEGS);
  CHECK_EQ(segs[3], 200 - 3 * UDX_GSO_SEGS);

  for (int i = 0; i < 100; i++)
    slot_set(i, 1472, 9000);
  n = udx__tx_plan(slots, 100, true, segs);
  int per = UDX_GSO_BYTES / 1472; // 44
  CHECK_EQ(segs[0], per);
  CHECK_EQ(segs[1], per);
  CHECK_EQ(segs[2], 100 - 2 * per);
  CHECK_EQ(n, 3);
  int total = 0;
  for (int i = 0; i < n; i++)
    total += segs[i];
  CHECK_EQ(total, 100);
}

// A datagram dropped while queued (niov 0) is never merged into a run.
static void
test_plan_dropped (void) {
  uint16_t segs[UDX_TX_SLOTS];
  slot_set(0, 1472, 9000);
  slot_set(1, 1472, 9000);
  slot_set(2, 1472, 9000);
  slots[1].niov = 0;
  int n = udx__tx_plan(slots, 3, true, segs);
  CHECK_EQ(n, 3);
}

// DATA leaves in batches (runs of segments when the kernel has UDP_SEGMENT)
// and arrives intact.
static void
test_batched_transfer (void) {
  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  udx_t *udx;
  CHECK(udx_init(&loop, &udx) == 0);
  udx_socket_t *sa = io_bind(udx, "127.0.0.1", 0);
  udx_socket_t *sb = io_bind(udx, "127.0.0.1", 0);
  int done = 0;
  uint64_t total = 16 << 20;
  io_app_t aa = {.seed = 3, .to_write = total, .end_after = true, .done_counter = &done};
  io_app_t ab = {.end_after = true, .read_seed = 3, .done_counter = &done};
  udx_stream_t *a = io_stream(udx, 1, &aa);
  udx_stream_t *b = io_stream(udx, 2, &ab);
  io_connect(a, sa, 2, sb, "127.0.0.1");
  io_connect(b, sb, 1, sa, "127.0.0.1");
  io_pump(a);
  io_pump(b);
  CHECK(io_run_until(&loop, &done, 2, 30000));
  CHECK_EQ(ab.read, total);
  CHECK(ab.hash == test_expect_hash(3, total));
  const udx_socket_stats_t *st = udx_socket_stats(sa);
  CHECK(st->send_batches > 0);
  if (sa->gso)
    CHECK(st->packets_tx > 4 * st->send_batches);
  CHECK_EQ(aa.tx_pins_at_finalize, 0); // a itself is freed once finalized
  udx_socket_t *socks[2] = {sa, sb};
  io_close_all(&loop, udx, socks, 2);
}

// A stream that goes away while its DATA (pointing into its send queue)
// still waits in the ring (the socket was full): those datagrams are
// dropped, never read after the stream's memory is gone.
static void
test_forget_stream (void) {
  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  udx_t *udx;
  CHECK(udx_init(&loop, &udx) == 0);
  udx_socket_t *sa = io_bind(udx, "127.0.0.1", 0);
  udx_socket_t *sb = io_bind(udx, "127.0.0.1", 0);
  io_app_t aa = {.seed = 4, .to_write = 1 << 20};
  io_app_t ab = {.read_seed = 4};
  udx_stream_t *a = io_stream(udx, 1, &aa);
  udx_stream_t *b = io_stream(udx, 2, &ab);
  io_connect(a, sa, 2, sb, "127.0.0.1");
  io_connect(b, sb, 1, sa, "127.0.0.1");
  io_pump(a);
  udx__stream_flush(a, udx__now()); // the first flight, queued in the ring
  CHECK(a->tx_pins > 0);
  CHECK(sa->tx_len >= a->tx_pins);
  uint64_t sent = udx_socket_stats(sa)->packets_tx;
  uint32_t queued = sa->tx_len;
  uint32_t pinned = a->tx_pins;

  udx__tx_forget_stream(udx, a);
  CHECK_EQ(a->tx_pins, 0);
  udx__socket_flush(sa);
  CHECK_EQ(sa->tx_len, 0);
  CHECK_EQ(udx_socket_stats(sa)->packets_tx, sent + queued - pinned);

  udx_stream_destroy(a);
  udx_stream_destroy(b);
  while (aa.finalized == 0 || ab.finalized == 0)
    uv_run(&loop, UV_RUN_ONCE);
  udx_socket_t *socks[2] = {sa, sb};
  io_close_all(&loop, udx, socks, 2);
}

// Raw datagrams queued together leave as one UDP_SEGMENT message (equal
// sizes, a shorter last one) and come out of a UDP_GRO receive as the same
// datagrams, in order, whole.
typedef struct {
  int got;
  size_t lens[16];
  uint8_t first[16];
  bool intact;
} seg_rx_t;

static void
on_seg_raw (udx_socket_t *sock, const uint8_t *buf, size_t len, const struct sockaddr *from) {
  UDX_UNUSED(from);
  seg_rx_t *r = udx_socket_get_data(sock);
  if (r->got < 16) {
    r->lens[r->got] = len;
    r->first[r->got] = buf[0];
  }
  for (size_t i = 0; i < len; i++) {
    if (buf[i] != (uint8_t) (buf[0] + i))
      r->intact = false;
  }
  r->got++;
}

static void
gso_gro_raw (bool gro) {
  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  udx_t *udx;
  CHECK(udx_init(&loop, &udx) == 0);
  udx_socket_t *sa = io_bind(udx, "127.0.0.1", 0);
  udx_socket_t *sb = io_bind(udx, "127.0.0.1", 0);
#ifdef UDP_GRO
  if (!gro && sb->gro) {
    int zero = 0; // the kernel splits the message for this socket
    CHECK(setsockopt(sb->fd, IPPROTO_UDP, UDP_GRO, &zero, sizeof(zero)) == 0);
    sb->gro = false;
  }
#else
  UDX_UNUSED(gro);
#endif
  seg_rx_t r = {.intact = true};
  udx_socket_set_data(sb, &r);
  CHECK(udx_socket_recv_start(sb, on_seg_raw) == 0);
  struct sockaddr_storage to;
  io_addr("127.0.0.1", io_port(sb), &to);

  size_t sizes[5] = {300, 300, 300, 300, 77};
  for (int i = 0; i < 5; i++) {
    uint8_t buf[300];
    for (size_t k = 0; k < sizes[i]; k++)
      buf[k] = (uint8_t) (i * 40 + k);
    struct iovec iov = {.iov_base = buf, .iov_len = sizes[i]};
    udx__socket_queue(sa, (struct sockaddr *) &to, &iov, 1, sizes[i], NULL, NULL);
  }
  udx__socket_flush(sa);
  const udx_socket_stats_t *st = udx_socket_stats(sa);
  CHECK_EQ(st->packets_tx, 5);
  if (sa->gso)
    CHECK_EQ(st->tx_segmented, 5);

  CHECK(io_run_until(&loop, &r.got, 5, 5000));
  CHECK_EQ(r.got, 5);
  CHECK(r.intact);
  for (int i = 0; i < 5; i++) {
    CHECK_EQ(r.lens[i], sizes[i]);
    CHECK_EQ(r.first[i], i * 40);
  }
  if (sa->gso && sb->gro)
    CHECK_EQ(udx_socket_stats(sb)->rx_coalesced, 5);
  if (!sb->gro)
    CHECK_EQ(udx_socket_stats(sb)->rx_coalesced, 0);
  udx_socket_t *socks[2] = {sa, sb};
  io_close_all(&loop, udx, socks, 2);
}

static void
test_gso_to_gro (void) {
  gso_gro_raw(true);
}

static void
test_gso_to_plain (void) {
  gso_gro_raw(false);
}

static const test_case_t cases[] = {
    {"plan_runs", test_plan_runs},
    {"plan_boundaries", test_plan_boundaries},
    {"plan_limits", test_plan_limits},
    {"plan_dropped", test_plan_dropped},
    {"batched_transfer", test_batched_transfer},
    {"forget_stream", test_forget_stream},
    {"gso_to_gro", test_gso_to_gro},
    {"gso_to_plain", test_gso_to_plain},
    {NULL, NULL},
};

int
main (int argc, char **argv) {
  return test_main(argc, argv, cases);
}
