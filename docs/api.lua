-- The one source of the ludx API reference. tools/gendocs turns it into
-- docs/api.md (for people) and docs/types/ (LuaLS stubs, for editors);
-- spec/tools_docs_spec.lua checks that both are current and that every
-- function named here exists (and every public one is named).
--
-- A module: name, summary, doc, example, fields, functions, classes, and
-- `internal` (exported names that are not part of the API). A function or
-- method is { "name(a: T, b?: T, ...: T) -> r: T, ...", "what it does" };
-- methods start with ":". A class may name its method table (impl =
-- "module:Field") so the check can find it.
local E = "ok: true?, err: string?, code: string?" -- the usual result

return {
  {
    name = "ludx",
    summary = "Tasks over the libuv loop",
    doc = [[
Code runs in tasks: coroutines over a loop that libuv owns. A call that
waits (sleep, a read, a write above the high-water mark) suspends only its
task. Every wait takes an optional timeout in milliseconds and then returns
`nil, "timed out", "ETIMEDOUT"`. Errors are `nil, message, code`; a wrong
argument type raises an error that names the argument. `ludx script.lua`
runs a script as a task already (with `ludx` loaded, as in the REPL);
`ludx.run` starts the loop from plain LuaJIT. A task that ends is forgotten
by the scheduler, and a wait that ends by timeout or cancel leaves its queue:
a service may spawn a task per request and run for weeks.

A service stops on a signal: wait for SIGINT or SIGTERM, unannounce, close,
exit. While a task waits in `ludx.signal`, that signal does not kill the
process; once no task waits, it does again.

```lua
local ludx = require "ludx"
local dht = require "ludx.dht"
local node = assert(dht.new())
local server = node:server(function(conn) conn:write("hello") conn:close() end)
assert(server:listen(dht.keypair()))
local sig = ludx.signal({ "SIGINT", "SIGTERM" })  -- Ctrl-C, or a supervisor
io.stderr:write(sig, ": stopping\n")
server:close()                                    -- unannounces
node:destroy()                                    -- closes the rest; the script ends
```]],
    example = [[
local ludx = require "ludx"
ludx.run(function()
  local q = ludx.queue()
  ludx.spawn("worker", function() ludx.sleep(10) q:put("done") end)
  print(q:get(1000))          --> done
  print(q:get(5))             --> nil  timed out  ETIMEDOUT
end)]],
    fields = {
      { "EV", "table<string, integer>", "Event kinds of the C event ring." },
      { "core", "table", "The C module `ludx.core`." },
    },
    functions = {
      { "run(fn: function, ...: any) -> ...: any", "Runs fn as the task \"main\" and drives the loop until it and every task it spawned have ended. Returns fn's results, or nil, message, traceback when fn raised (an error fn raises while tasks it spawned still run is also written to stderr at once). Inside a task it waits for them instead." },
      { "spawn(name: string, fn: function, ...: any) -> task: ludx.Task", "Starts a named task. An uncaught error ends this task only and is reported on stderr with its name and traceback." },
      { "sleep(ms: number) -> ok: true", "Suspends the current task for ms milliseconds." },
      { "yield() -> ok: true", "Lets the other ready tasks (and the loop's I/O) run, then continues." },
      { "now() -> ms: number", "Milliseconds on a monotonic clock, with sub-millisecond precision." },
      { "after(ms: number, fn: function) -> timer: ludx.Timer", "Calls fn after ms milliseconds, outside any task (fn must not wait)." },
      { "queue(limit?: integer) -> q: ludx.Queue", "A channel between tasks: put never waits unless a limit is set; get waits." },
      { "waiters() -> w: ludx.Waiters", "A wait queue, the building block of the object APIs." },
      { "wait(what: string, timeout?: number) -> ...: any", "Suspends the current task until ludx.wake(task, ...) or the timeout; returns the values given to wake. what says what it waits on (ludx.tasks shows it)." },
      { "wake(task: ludx.Task, ...: any) -> woken: boolean", "Makes a waiting task ready; its wait returns the values given here." },
      { "current() -> task: ludx.Task?", "The running task." },
      { "in_task() -> yes: boolean", "True when the caller runs in the current task itself and so may wait; false in a timer or event callback and in a plain coroutine (close() uses it: outside a task it starts a graceful end and returns)." },
      { "tasks() -> list: table[]", "The live tasks: {id, name, state, waiting}." },
      { "cancel(task: ludx.Task|integer, reason?: string) -> ok: boolean", "Cancels a task (or a task id): its current or next wait raises, which ends it quietly." },
      { "is_cancelled(err: any) -> yes: boolean", "True when err is the error a cancelled task raises." },
      { "await(what: string, timeout?: number, start: function) -> ...: any", "Waits in the current task for a callback-style operation: calls start(cb) at once and returns the values of the first cb(...) (later calls are ignored), or nil, \"timed out\", \"ETIMEDOUT\" (a callback after that is ignored too). A cancel raises in the task as from any wait." },
      { "signal(name: string|string[], timeout?: number) -> name: string?, err: string?, code: string?", "Waits in the current task until the process gets the signal (\"SIGINT\", \"SIGTERM\", \"SIGHUP\", \"SIGQUIT\", \"SIGUSR1\", \"SIGUSR2\", \"SIGWINCH\", \"SIGCONT\") or one of a list of them, and returns its name; nil, \"timed out\", \"ETIMEDOUT\" after timeout. While a task waits, that signal does not end the process (its watcher keeps the loop alive); after the last wait, the default action is back. A name that is not one of these raises." },
      { "lookup(host: string, family?: integer, timeout?: number) -> addresses: string[]?, err: string?, code: string?", "Resolves a host name to a list of addresses; family 4, 6 or nil for both. An IP literal comes back as it is." },
      { "running() -> yes: boolean", "True while a loop runs." },
      { "version() -> v: table", "Versions: {ludx, luajit, libuv, libsodium, udx}." },
      { "on_interrupt(fn: function)", "Sets fn to run on Ctrl-C when the REPL owns the terminal." },
    },
    classes = {
      { name = "ludx.Task", doc = "A named coroutine on the loop.", fields = { { "id", "integer" }, { "name", "string" }, { "state", "string", "ready, running, waiting or dead" } },
        methods = {
          { ":join(timeout?: number) -> ...: any", "Waits until the task ends; returns its results, or nil, message when it failed." },
          { ":cancel(reason?: string) -> ok: boolean", "As ludx.cancel(task)." },
        } },
      { name = "ludx.Queue", doc = "A channel between tasks.", methods = {
          { ":put(v: any, timeout?: number) -> " .. E, "Adds v; waits only while a limited queue is full." },
          { ":get(timeout?: number) -> v: any, err: string?, code: string?", "Takes the oldest value, waiting for one; nil, \"queue closed\", \"EOF\" once closed and empty." },
          { ":size() -> n: integer", "Values waiting." },
          { ":close()", "Wakes every getter; gets return EOF once the queue is empty." },
        } },
      { name = "ludx.Waiters", doc = "A wait queue of tasks.", methods = {
          { ":wait(what: string, timeout?: number) -> ...: any", "Waits until woken (returns what wake passed) or the timeout." },
          { ":wake_one(...: any) -> woken: boolean", "Wakes the oldest waiter." },
          { ":wake_all(...: any) -> woken: boolean", "Wakes every waiter." },
          { ":count() -> n: integer", "Tasks waiting." },
        } },
      { name = "ludx.Timer", doc = "A timer from ludx.after.", methods = {
          { ":cancel()", "The function will not be called." },
        } },
    },
    internal = { "check_timeout", "user_level", "ref", "unref", "object", "on_event", "track", "untrack" },
  },

  {
    name = "ludx.udx",
    summary = "UDX streams over UDP",
    doc = [[
Reliable, congestion-controlled streams (BBR, RACK-TLP, SACK, path MTU
search), many per UDP socket, wire-compatible with Node's udx-native. Streams
of one socket towards the same address share one congestion window on top of
their own, so a thousand of them starting at once do not overflow the
receiver together. A stream has a local id; it connects to a remote id at a host and port. Reads
hand over all in-order bytes available (up to a size), never one packet at a
time; writes wait only above the high-water mark. One reader and one writer
per stream at a time (a second gets "busy", "EBUSY").]],
    example = [[
local sock = assert(udx.bind("127.0.0.1", 0))
local _, port = sock:address()
local a, b = assert(udx.stream(1)), assert(udx.stream(2))
assert(a:connect(sock, 2, port, "127.0.0.1"))
assert(b:connect(sock, 1, port, "127.0.0.1"))
assert(a:write("hello"))
print(b:read())               --> hello]],
    fields = { { "READ_MAX", "integer", "What a read hands over at most unless told otherwise (64 KiB)." },
      { "CLOSE_TIMEOUT", "integer", "How long a stream's graceful close may take by default, in ms (10 s): for the peer to acknowledge everything, and for its END while the stream lingers." },
      { "MAX_LINGERING", "integer", "How many streams the process keeps lingering after a graceful close (4096; settable); past it the oldest is reset, first among those whose END the peer acknowledged (nothing of ours is lost then: the peer sees a reset instead of our clean end). A socket's close resets the ones on it (its port is free at once)." } },
    functions = {
      { "lingering() -> n: integer", "How many streams linger now: closed gracefully, waiting for the peer's END (at most MAX_LINGERING)." },
      { "bind(host?: string, port?: integer, opts?: table) -> sock: ludx.udx.Socket?, err: string?, code: string?", "Binds a UDP socket: host \"0.0.0.0\" (default), \"::\" (dual stack), \"127.0.0.1\"...; port 0 picks one. opts.ipv6only; linger_max, linger_ms (see Socket:set_linger); ack_pause_us (see Socket:set_ack_pause)." },
      { "stream(id: integer, opts?: table) -> stream: ludx.udx.Stream?, err: string?, code: string?", "A stream with a local id (0..2^32-1, unique in the process). opts: seq, read_buffer_limit (bytes), rwnd_max, keepalive (ms), timeout (give-up ms), firewall (\"accept\", \"drop\"), ack_policy (\"each\", \"batch\"), migration (true: accept packets from addresses other than the remote; by default a connected stream drops them)." },
      { "set_fault(fault?: table) -> ok: boolean", "Fault injection for every datagram (nil clears): {seed, loss, duplicate, reorder, reorder_us, corrupt, send_error, send_errno, blackout_start_ms, blackout_ms, direction = \"tx\"|\"rx\"|\"both\"}." },
      { "mapped_blocks() -> n: integer", "Mappings of send-queue memory alive in this process: the blocks large writes (sealed SecretStream frames of 256 KiB and more) are made in, and pages kept for a queue's next one. A gauge for leak checks: it returns to its value once the streams that wrote them are gone." },
    },
    classes = {
      { name = "ludx.udx.Socket", impl = "ludx.udx:Socket", doc = "One UDP socket; many streams share it.", methods = {
          { ":address() -> host: string, port: integer, family: string", "The bound address." },
          { ":send(data: string, port: integer, host?: string, ttl?: integer) -> " .. E, "Sends one raw (non-UDX) datagram. Larger than UDP or the path allows: nil, msg, \"EMSGSIZE\" (nothing sent); other send errors are transient (counted in stats, dropped, true)." },
          { ":recv(timeout?: number) -> data: string?, host: string?, port: integer?, family: string?", "The next raw datagram that is not for a stream." },
          { ":close() -> ok: boolean", "Closes now, or once the streams using it are gone. Idempotent; waiting recv gets \"EBADF\"." },
          { ":destroy() -> ok: boolean", "As close (a socket has no graceful end)." },
          { ":stats() -> stats: table", "Counters: bytes and packets each way, batches, malformed, send errors by kind." },
          { ":set_fault(fault?: table) -> ok: boolean", "Fault injection for this socket (see udx.set_fault)." },
          { ":buffer_sizes() -> send: integer, recv: integer", "The kernel socket buffer sizes." },
          { ":set_linger(max: integer, min_ms: integer) -> " .. E, "A stream that closes gracefully leaves a small record on its socket for 4 RTO or min_ms, whichever is longer, that ACKs the peer's retransmitted END (at most 8 times) in case our last ACK was lost. At most max records (the oldest goes first); max 0 turns it off. Defaults 64 and 2000 ms; changing it forgets the records. stats(): linger_records, linger_acks, linger_evicted." },
          { ":set_ack_pause(us: integer) -> " .. E, "A peer that acks every packet (udx-native, libudx) sends an ACK per datagram we send. After a read that brought only such ACKs, for streams still waiting on data in flight, the socket stops reading for us microseconds and takes what came in one batch, instead of waking for each (a network card's interrupt moderation). A read with anything else in it (data, messages, raw datagrams) is never followed by a pause; a pause that caught fewer than two datagrams skips the next 1, 2, 4 ... 64 chances. 0..1000; 0 turns it off; default 100. Linux only. stats(): ack_pauses." },
        } },
      { name = "ludx.udx.Stream", impl = "ludx.udx:Stream", doc = "A reliable byte stream (plus unreliable messages).", fields = { { "id", "integer", "The local id." } }, methods = {
          { ":connect(sock: ludx.udx.Socket, remote_id: integer, port: integer, host?: string, opts?: table) -> " .. E, "Connects to the remote stream remote_id at host:port over sock. opts.ack: the first expected sequence number." },
          { ":write(data: string, timeout?: number) -> " .. E, "Queues data; waits only while the queue is above the high-water mark. On a timeout the data stays queued." },
          { ":read(max?: integer, timeout?: number) -> data: string?, err: string?, code: string?", "All in-order bytes available, up to max (default READ_MAX), waiting for some; nil at the end; nil, message, code on an error." },
          { ":finish(timeout?: number) -> " .. E, "Ends our half (UDX END) after what was written; returns once the remote acknowledged it." },
          { ":flush(timeout?: number) -> " .. E, "Waits until every byte written so far is acknowledged." },
          { ":close(timeout?: number) -> " .. E, "Graceful close: END after every byte written (a write in pieces under way is queued whole first: a copy of its rest, held until the remote takes it or the close times out); the remote reads to EOF, never a reset. Waiting readers (read, recv) and every later call get \"ECANCELED\"; a writer waiting for room returns true (its bytes are queued); flush and finish complete as the close does. In a task it returns true once the remote acknowledged every byte and the END; nil, msg, code when the stream failed first (ECONNRESET), or ETIMEDOUT after timeout ms (default CLOSE_TIMEOUT; then the stream is reset). A close of a stream that failed before the remote acknowledged our END (a reset, a timeout, ECANCELED when its socket closed under it or MAX_LINGERING pushed it out) returns that error, every time; after our own destroy() it returns true. A stream that never connected (no connect(), or one that failed) closes at once: true when nothing was written; else its bytes are dropped and close (in a task or not), a waiting writer and a waiting finish get nil, msg, \"ENOTCONN\", as does every later close. Outside a task it starts the close and returns true. Then the stream lingers as a TCP socket does: what the remote still sends is acknowledged and dropped, and it closes at the remote's END (wait_closed), or is reset timeout ms after the call. Idempotent; destroy() cuts it short." },
          { ":destroy() -> ok: true", "Abortive close: the remote sees ECONNRESET; bytes not yet acknowledged are dropped. Idempotent; waiting readers and writers (and a close in progress) get \"ECANCELED\"." },
          { ":send(msg: string) -> " .. E, "One MESSAGE datagram: unreliable, unordered, at most 2028 bytes." },
          { ":recv(timeout?: number) -> msg: string?, err: string?, code: string?", "The next MESSAGE datagram." },
          { ":wait_readable(timeout?: number) -> " .. E, "Waits until bytes (or the end) may be there to read: true at once when bytes are buffered or the stream is closed, else after the next readable event. For layers that read through handle()." },
          { ":wait_drain(timeout?: number) -> " .. E, "After a C-side write that returned 0 (above the high-water mark): waits until the queue is below it again; nil, msg, code when the stream closes first." },
          { ":error() -> err: string?, code: string?", "The error that ended the stream (ECANCELED after our own destroy, ETIMEDOUT after a close that timed out), or nil while open or after a clean end (a graceful close included)." },
          { ":handle() -> h: userdata", "The C stream, for C-side consumers such as core.crypto.framer (feed_udx, encrypt_udx)." },
          { ":stats() -> stats: table", "Live counters: rtt_ms, min_rtt_ms, cwnd, inflight, mtu, pacing_rate, bbr_bw, bbr_state, bytes/packets each way, retransmits, rto_count, tlp_count, lost, write_queued, read_buffered, ..." },
          { ":stats_struct() -> stats: ffi.cdata*", "The C stats struct itself (read without a call)." },
          { ":set_read_buffer_limit(bytes: integer) -> ok: boolean", "Bound on bytes held for a slow reader." },
          { ":set_keepalive(ms: integer) -> ok: boolean", "A heartbeat every ms while idle (0 = off)." },
          { ":set_timeout(ms: integer) -> ok: boolean", "Give up after ms without progress while data is outstanding." },
          { ":set_resume(rate: number, rtt_ms: number) -> " .. E, "Careful resume before the first write: jump to half a remembered rate (payload bytes/s) once the first RTT matches rtt_ms; retreat at a loss (ludx.resume keeps them)." },
          { ":set_fault(fault?: table) -> ok: boolean", "Fault injection for this stream's datagrams." },
          { ":relay_to(dst: ludx.udx.Stream) -> ok: boolean", "Forwards every datagram for this stream to dst's remote (a relay)." },
          { ":change_remote(sock: ludx.udx.Socket, remote_id: integer, port: integer, host?: string, timeout?: number) -> " .. E, "Moves the stream to another socket or remote; waits until everything sent before is acknowledged." },
          { ":firewall(mode: string, remote_id?: integer) -> ok: boolean", "Packets from unknown sources: \"accept\", \"drop\", or \"connect\" (to remote_id at the first source)." },
          { ":wait_connected(timeout?: number) -> " .. E, "Waits until connected (by connect or by the firewall)." },
          { ":wait_closed(timeout?: number) -> " .. E, "Waits until the stream has closed (ended both ways, destroyed or failed)." },
          { ":is_closed() -> closed: boolean", "True once the stream has closed (what wait_closed waits for), without waiting." },
          { ":remote_address() -> host: string?, port: integer?", "Where the stream is connected." },
          { ":trace(interval_ms: integer) -> ok: boolean", "Samples stats every interval_ms (for plots)." },
          { ":trace_take() -> samples: table[]", "The samples so far." },
        } },
    },
    internal = { "Socket", "Stream" },
  },

  {
    name = "ludx.secretstream",
    summary = "Encrypted streams (@hyperswarm/secret-stream)",
    doc = [[
A Noise handshake (XX or IK over Ed25519) and then
crypto_secretstream_xchacha20poly1305 frames over any byte stream with
read/write/finish/close (a udx stream, a TCP connection, ludx.pipe). The
framing and the encryption happen in C, one frame per write. Connections
from ludx.dht are SecretStreams already.]],
    example = [[
local a = secretstream.wrap(udx_a, { initiator = true })
local b = secretstream.wrap(udx_b, { initiator = false })
assert(a:write("secret"))
print(b:read(), b.remote_public_key == a.public_key)]],
    fields = { { "MAX_WRITE", "integer", "The largest single write (one frame)." } },
    functions = {
      { "wrap(raw: table, opts: table) -> stream: ludx.secretstream.Stream", "Wraps a raw stream; the handshake runs in its reader task (see ready). opts: initiator (required), keypair, remote_public_key, pattern (\"XX\" or \"IK\"), keepalive (ms), handshake_timeout (ms, default 10000), handshake (external keys, as hyperdht gives), messages (true: keep frame boundaries for recv_message from the start), read_highwater (bytes of unread plaintext, 64 more per buffered frame, before the reader stops pulling raw bytes; default 4 MiB)." },
      { "keypair(seed?: string) -> keypair: table", "An Ed25519 key pair {public_key (32 bytes), secret_key (64 bytes)}; from a 32-byte seed when given." },
    },
    classes = {
      { name = "ludx.secretstream.Stream", impl = "ludx.secretstream:Stream", doc = "An encrypted stream.", fields = { { "public_key", "string" }, { "remote_public_key", "string", "The peer's key, once ready." }, { "handshake_hash", "string" } }, methods = {
          { ":ready(timeout?: number) -> " .. E, "Waits for the handshake." },
          { ":read(max?: integer, timeout?: number) -> data: string?, err: string?, code: string?", "Decrypted bytes, up to max: what the reader task buffered, or else at most 64 KiB decrypted for this call (a larger frame comes in parts, none before the whole frame authenticated); nil at the end. After a failure, what was decrypted before it comes first, then the error. Codes: EDECRYPT, EFRAME, EHANDSHAKE, EREMOTEKEY, ETIMEDOUT, or the raw stream's." },
          { ":write(data: string, timeout?: number) -> " .. E, "One frame (at most MAX_WRITE bytes). Writes before the handshake are queued (up to 1 MiB)." },
          { ":recv_message(timeout?: number) -> message: string?, err: string?, code: string?", "The next message: the plaintext of one frame as the peer wrote it; nil at the end. Frames stay apart until the first read() (which joins them, the byte-stream fast path) or from wrap's opts.messages; after a read() it is an EINVAL error. Empty frames are keep-alives, never messages." },
          { ":send_message(data: string, timeout?: number) -> " .. E, "One message = one frame: the same as write." },
          { ":finish(timeout?: number) -> " .. E, "Flushes, then ends the raw stream." },
          { ":close(timeout?: number) -> " .. E, "Graceful close: the frames written so far (the one a writer is putting out included) go out, then the raw stream closes gracefully (over udx: END after the last frame; the remote reads to EOF). Reads and writes fail from now on with \"ECANCELED\" (as a udx stream's after its own close; the peer's end gives EOF, or EPIPE to a write), and what was decrypted but not read is dropped. In a task it returns what the raw close returns (over udx: true once the remote acknowledged everything; ETIMEDOUT after timeout ms, default udx.CLOSE_TIMEOUT). Outside a task it starts the close. A stream that failed (a reset, a bad frame) is destroyed and its close returns that error, nil, msg, code, unless the remote had acknowledged our END over udx (nothing was lost); one whose handshake is not done is destroyed. Idempotent: a second close waits for the first and returns what it returned." },
          { ":destroy() -> ok: true", "Abortive close: the raw stream is destroyed (the remote sees a reset). Idempotent; waiting readers and writers get a code." },
          { ":wait_closed(timeout?: number) -> " .. E, "Waits until the stream is closed or has failed, by either side (then stream.err tells a failure)." },
          { ":is_closed() -> closed: boolean", "True once the stream is closed or has failed, by either side (what wait_closed waits for), without waiting." },
          { ":wait_header(timeout?: number) -> " .. E, "Waits until the peer's id/header frame has arrived and ours is written (over a udx stream: acknowledged); both ends hold the stream." },
          { ":stats() -> stats: table", "The raw stream's stats plus frames_in/out, keepalives, plaintext_in/out, raw_bytes_in, and buffer_bytes (allocated now for frames and plaintext: about the largest frame each way while frames that large go through; at most 256 KiB once a second passed after the last frame over 256 KiB, unless one is still arriving)." },
        } },
    },
    internal = { "Stream" },
  },

  {
    name = "ludx.protomux",
    summary = "Channels over one stream (npm protomux 3.x)",
    doc = [[
Many protocol channels over one SecretStream, byte-compatible with npm
`protomux` 3.x: every Holepunch protocol is such a channel. Each message is
one frame of the stream (`recv_message`/`send_message`). A channel has a
protocol name, an optional id, a handshake codec and a list of message
codecs (ludx.compact); message types are 1-based here (protomux counts from
0 on the wire). Tasks, not events: `ch:recv()` returns the next message,
`ch:opened()` the remote's handshake. A message type given as
`{ encoding = codec, on_message = fn(value, ch) }` is delivered to fn in the
mux's reader task instead (it must not wait); `false` skips a type.

Handshake rules are protomux's: a channel is open once both sides sent
their open (either may go first; `mux:pair` answers opens we did not make,
unanswered ones are rejected with EREJECTED); `close` from either side
closes it on both (messages queued before stay readable, then `recv`
returns nil); when the stream ends every channel closes and the mux ends
its side too. Bad input never raises: a message that does not decode closes
its channel (EDECODE); a frame that breaks the protocol (a message on a
channel never opened, an open that skips ids, a reject of nothing, a nested
batch) or is over max_message_size ends the mux and destroys the stream
(EPROTO, EMSGSIZE). Caps (options of `from`, defaults in DEFAULTS):
max_channels (256, remote channels open or pending; more are rejected),
max_message_size (4 MiB), max_queued (256 messages per channel) and
max_buffered (4 MiB over the mux, with the handshakes of opens waiting
for a pair handler) before the reader stops reading (the
backpressure reaches the stream and the remote), max_name_size (1024 bytes
of a protocol name or id), max_write_buffer (1 MiB queued for the stream
before send waits), max_control_buffer (64 KiB of our replies, the rejects,
queued before the reader waits: a peer that floods opens and reads nothing
stops there). A reader that stops on a full channel stops the whole
mux, as protomux's pause does: read every channel you open, or give its
types on_message.]],
    example = [[
local mux = protomux.from(conn)              -- conn: a SecretStream
local ch = assert(mux:channel({ protocol = "chat/1", handshake = compact.string,
                                messages = { compact.string, compact.uint } }))
ch:open("hello")
print(ch:opened(5000))                       --> the remote's handshake string
ch:send(1, "text"); ch:send(2, 42)
local i, value = ch:recv()                   -- nil once the channel closed
ch:close()
mux:pair({ protocol = "chat/1" }, function(id)    -- the remote opened first
  local c = mux:channel({ protocol = "chat/1", id = id, handshake = compact.string })
  c:open("hi")
end)]],
    fields = { { "DEFAULTS", "table", "The default caps (max_channels, max_message_size, max_queued, max_buffered, max_name_size, max_write_buffer, max_control_buffer)." } },
    functions = {
      { "from(conn: table, opts?: table) -> mux: ludx.protomux.Mux", "The muxer of a stream (with recv_message/send_message, as a SecretStream, not read with read() before): the same one on a second call. Starts its reader task; the mux owns the stream from then on (it ends and destroys it). opts: the caps of DEFAULTS." },
      { "is_mux(v: any) -> yes: boolean", "True for a muxer." },
    },
    classes = {
      { name = "ludx.protomux.Mux", impl = "ludx.protomux:Mux", doc = "One muxer per stream.", methods = {
          { ":channel(opts: table) -> ch: ludx.protomux.Channel?, err: string?, code: string?", "A channel. opts: protocol (string), id (string?), aliases (string[]), handshake (codec), messages (codecs, or {encoding, on_message}, or false), unique (default true: EEXIST while one of this protocol and id is open), on_open(handshake, ch), on_close(is_remote, ch), on_destroy(ch), user_data. Inside a pair handler it takes the remote's waiting open and opens on the next turn of the loop (protomux's next tick): add message types before then, and what the remote sent meanwhile reaches them." },
          { ":pair(key: table, fn: function)", "fn(id) runs in a task when the remote opens {protocol, id} (id nil: any id) first; a channel made while it runs is paired, else the open is rejected." },
          { ":unpair(key: table)", "Removes a pair handler." },
          { ":opened(key: table) -> yes: boolean", "True while a channel of {protocol, id} is open here." },
          { ":get_last_channel(key: table) -> ch: ludx.protomux.Channel?", "The last channel of {protocol, id} opened here." },
          { ":is_idle() -> yes: boolean", "True when no channel id is in use (an id closed before the remote answered our open stays in use until it does)." },
          { ":channels() -> iter: function", "Iterates the channels." },
          { ":channel_list() -> list: ludx.protomux.Channel[]", "The channels, as a list." },
          { ":cork()", "Batches every message and open/close from now until the matching uncork into one batch frame." },
          { ":uncork()", "Sends the batch (when the last cork ends)." },
          { ":stats() -> stats: table", "{frames_in, frames_out, messages_in, messages_out, ignored, rejected, remote_channels, buffered, write_buffered}." },
          { ":destroy(msg?: string, code?: string) -> ok: true", "Closes every channel (their waiters get code) and destroys the stream. Idempotent." },
        } },
      { name = "ludx.protomux.Channel", impl = "ludx.protomux:Channel", doc = "A channel of a mux.", fields = { { "protocol", "string" }, { "id", "string?" }, { "handshake", "any", "The remote's handshake value, once open." }, { "is_open", "boolean" }, { "closed", "boolean" }, { "user_data", "any" } }, methods = {
          { ":open(handshake?: any) -> " .. E, "Sends our open with a value of the handshake codec (EBUSY when sent already)." },
          { ":opened(timeout?: number) -> handshake: any, err: string?, code: string?", "Waits until the remote opened too: its handshake value (true without a handshake codec); nil, msg, code when the channel closed first (EREJECTED, ...) or ETIMEDOUT." },
          { ":send(i: integer, value: any) -> " .. E, "Sends message type i (1-based) with a value of its codec; waits while more than max_write_buffer bytes wait for the stream. EPIPE after close, ENOTOPEN before open, EMSGSIZE." },
          { ":recv(timeout?: number) -> i: integer?, value: any, code: string?", "The next message in order: its type and value. nil when the channel closed (nil, msg, code when an error closed it: EDECODE, ECONNRESET, ...), or ETIMEDOUT." },
          { ":close() -> ok: true", "Closes the channel; the remote sees it closed. Idempotent." },
          { ":destroy() -> ok: true", "As close." },
          { ":closed_wait(timeout?: number) -> " .. E, "Waits until the channel closed (either side)." },
          { ":add_message(m: table|false) -> i: integer", "Adds a message type after the others (a codec, {encoding, on_message}, or false); returns its index." },
          { ":cork()", "The mux's cork." },
          { ":uncork()", "The mux's uncork." },
        } },
    },
    internal = { "Mux", "Channel" },
  },

  {
    name = "ludx.compact",
    summary = "compact-encoding codecs",
    doc = [[
The binary encodings of the hyperswarm stack, byte for byte as npm
`compact-encoding`. A codec is a table {encode = function(w, v), decode =
function(r)} over a writer and a reader; codecs compose (array, frame) and
are what protomux channels take. Decoding never raises and never reads past
the input: a read that does not fit sets `r.err` (the first error sticks) and
`compact.decode` returns nil, err. Encoding a wrong value raises. Strings are
bytes (`string` and `utf8` do not check UTF-8); buffer and string decode an
empty value as "", optional_buffer as nil; uint decodes up to 2^64 as a
number (uint64 stops at 2^53 - 1 as compact-encoding does).]],
    example = [[
local bytes = compact.encode(compact.array(compact.string), { "a", "b" })
print(compact.decode(compact.array(compact.string), bytes)[2])   --> b
local w = compact.writer(); w:uint(300); w:buffer("hi")
local r = compact.reader(w:finish()); print(r:uint(), r:buffer(), r.err)]],
    fields = {
      { "MAX_ARRAY", "integer", "The largest array count a reader accepts (0x100000)." },
      { "uint", "table", "Varint: 1 byte up to 0xFC, else 0xFD+u16, 0xFE+u32, 0xFF+u64." },
      { "uint8", "table" }, { "uint16", "table" }, { "uint24", "table" }, { "uint32", "table" },
      { "uint64", "table", "8 bytes little-endian, up to 2^53 - 1." },
      { "int", "table", "ZigZag over uint (0, -1, 1, -2 -> 0, 1, 2, 3)." },
      { "int8", "table" }, { "int16", "table" }, { "int24", "table" }, { "int32", "table" }, { "int64", "table" },
      { "float32", "table" }, { "float64", "table", "IEEE 754, little-endian." },
      { "bool", "table", "One byte; only 1 decodes as true." },
      { "buffer", "table", "uint length, then the bytes." },
      { "string", "table", "As buffer (UTF-8 by convention)." }, { "utf8", "table", "The same as string." },
      { "optional_buffer", "table", "A buffer or nil (nil and \"\" are one 0 byte)." }, { "optionalBuffer", "table", "The same." },
      { "raw", "table", "The rest of the input, no length." },
      { "fixed8", "table" }, { "fixed16", "table" }, { "fixed24", "table" }, { "fixed32", "table" }, { "fixed64", "table" },
      { "json", "table", "A string of JSON (ludx.json)." }, { "ndjson", "table", "JSON and a newline." },
      { "none", "table", "Nothing on the wire; decodes nil." },
      { "ipv4Address", "table", "{host, port}: 4 bytes and a uint16." }, { "ipv6Address", "table", "{host, port}: 16 bytes and a uint16." },
      { "ipv4Array", "table" }, { "ipv6Array", "table" },
    },
    functions = {
      { "encode(codec: table, value: any) -> bytes: string", "Encodes a value (raises on a wrong value)." },
      { "decode(codec: table, bytes: string, exact?: boolean) -> value: any, err: string?", "Decodes; nil, err when truncated, over a limit, or (exact) with bytes left over." },
      { "array(codec: table) -> codec: table", "uint count then the items (at most MAX_ARRAY)." },
      { "frame(codec: table) -> codec: table", "uint byte length then the value, which must fit in it." },
      { "fixed(n: integer) -> codec: table", "Exactly n bytes." },
      { "writer() -> w: ludx.compact.Writer", "A writer (reusable after finish)." },
      { "reader(s: string, i?: integer, j?: integer) -> r: ludx.compact.Reader", "A reader over s[i..j]." },
      { "ip4_bytes(host: string) -> bytes: string?", "The 4 bytes of a dotted IPv4 address, or nil." },
    },
    classes = {
      { name = "ludx.compact.Writer", doc = "Collects bytes.", methods = {
          { ":uint(n: integer) -> w: ludx.compact.Writer", "A varint (also uint8, uint16, uint32, fixed32, fixed64, ipv4, ipv6)." },
          { ":buffer(s?: string) -> w: ludx.compact.Writer", "Length and bytes (also string)." },
          { ":raw(s: string) -> w: ludx.compact.Writer", "Bytes as they are." },
          { ":finish() -> bytes: string", "The bytes; the writer is empty again." },
        } },
      { name = "ludx.compact.Reader", doc = "Walks a string; r.err is set by the first read that does not fit.", fields = { { "err", "string?" } }, methods = {
          { ":uint() -> n: integer", "A varint, 0 on error (also uint8, uint16, uint32, fixed32, fixed64, ipv4, ipv6, count)." },
          { ":buffer() -> s: string", "Length and bytes, \"\" on error (also string)." },
          { ":rest() -> s: string", "The rest of the input." },
          { ":remaining() -> n: integer", "Bytes left." },
          { ":done() -> yes: boolean", "True at the end." },
        } },
    },
  },

  {
    name = "ludx.dht",
    summary = "A HyperDHT node: find peers and connect to them by public key",
    doc = [[
A hyperdht-compatible DHT node (dht-rpc routing, announce/lookup, mutable
and immutable storage, Noise handshakes through relays, holepunching). It
joins the public HyperDHT network by default; dht.testnet(n) runs a local
one in the process. Keys, topics and hashes are 32-byte binary strings.
Connections are SecretStreams over UDX streams on the node's socket.]],
    example = [[
local tn = assert(dht.testnet(3))                 -- a local DHT
local a, b = assert(tn:create_node()), assert(tn:create_node())
local kp = dht.keypair()
local server = a:server(function(conn) conn:write("hi") conn:finish() end)
assert(server:listen(kp))
local conn = assert(b:connect(kp.public_key))     -- by public key
print(conn:read())                                --> hi]],
    fields = {
      { "BOOTSTRAP", "string[]", "The public HyperDHT bootstrap nodes." },
      { "DEFAULT_PORT", "integer", "49737." },
      { "FIREWALL", "table", "Firewall kinds: UNKNOWN, OPEN, CONSISTENT, RANDOM." },
    },
    functions = {
      { "new(opts?: table) -> node: ludx.dht.Node?, err: string?, code: string?", "A node, bound and bootstrapping. opts: bootstrap (\"host:port\" or a list of them; default the public network), host (\"0.0.0.0\"), port (nil: 49737 or the next free one; 0: any), ephemeral, firewalled, keypair (default for listen and connect). Bounds on what other nodes can make it spend (docs/security.md): max_requests (10000 a second in all), max_requests_per_source (200 per host:port), max_requests_per_prefix (2000 per IPv4 /24 or IPv6 /48), amplification (3: bytes sent to a host that has not proven it receives, per byte it sent), max_store_bytes (32 MiB over all stores), max_store_bytes_per_host (1 MiB per 10 min), max_verifications (1000 signature checks a second) and max_verifications_per_prefix (200), max_delayed_pings (1024) and max_delayed_pings_per_host (8), max_relay_pending (4096 relayed handshakes awaiting the server's answer). resume (careful resume: a table of ludx.resume store options, max (256 peer paths), max_age (1 h), min_bytes (1 MiB a connection must deliver to be remembered); false: none): connections to and from a key the handshake proved start from the rate and min RTT the last one over the same remote host measured (node.resume)." },
      { "testnet(n?: integer, opts?: table) -> testnet: ludx.dht.Testnet?, err: string?, code: string?", "A local DHT of n nodes (default 5, at least 2) on 127.0.0.1, all bootstrapped. opts: host, port (of the bootstrap node), timeout." },
      { "bootstrapper(port?: integer, host?: string, opts?: table) -> node: ludx.dht.Node?, err: string?, code: string?", "A node that is persistent at once on host:port (a bootstrap node)." },
      { "keypair(seed?: string) -> keypair: table", "An Ed25519 key pair; from a 32-byte seed when given." },
      { "hash(data: string) -> hash: string", "BLAKE2b-256, as hyperdht hashes keys into targets." },
      { "keypair_from_file(path: string) -> keypair: table?, err: string?, code: string?", "The key pair in a key file as `ludx keygen -o FILE` writes it (the secret seed, 64 hex characters; the two lines `ludx keygen` prints are read too). EINVAL when it is not a key file." },
      { "keypair_to_file(path: string, keypair: table|string) -> keypair: table?, err: string?, code: string?", "Writes a key pair (or a 32-byte seed) as a key file, mode 0600 from its creation; never replaces a file (EEXIST)." },
    },
    classes = {
      { name = "ludx.dht.Node", impl = "ludx.dht:Node", doc = "A DHT node.", fields = { { "keypair", "table", "The node's default key pair." } }, methods = {
          { ":ready(timeout?: number) -> " .. E, "Waits until the bootstrap is done." },
          { ":address() -> host: string, port: integer", "The bound address." },
          { ":remote_address() -> host: string?, port: integer?", "Our public address when known and reachable." },
          { ":id() -> id: string?", "The node id (once known)." },
          { ":is_persistent() -> yes: boolean", "False for an ephemeral node." },
          { ":is_firewalled() -> yes: boolean", "Whether others can reach us directly." },
          { ":nodes(limit?: integer) -> nodes: table[]", "The routing table, most recently seen first: {{host, port}, ...}." },
          { ":ping(host: string, port: integer, timeout?: number) -> reply: table?, err: string?, code: string?", "Pings a node." },
          { ":lookup(topic: string, opts?: table) -> replies: ludx.dht.Query?, err: string?, code: string?", "Who announced topic: an iterator over replies {from, to, peers = {{public_key, relay_addresses}}}. A topic that is not 32 bytes: nil, \"invalid topic\", \"EINVAL\"." },
          { ":find_peer(public_key: string, opts?: table) -> replies: ludx.dht.Query?, err: string?, code: string?", "Where a server with this key is announced. A key that is not 32 bytes or not an Ed25519 point: nil, \"invalid public key\", \"EINVAL\" (so for mutable_get and connect)." },
          { ":announce(topic: string, keypair: table, opts?: table) -> closest: table[]?, err: string?, code: string?", "Announces keypair.public_key under topic on the closest nodes. opts.relay_addresses, opts.timeout." },
          { ":unannounce(topic: string, keypair: table, opts?: table) -> " .. E, "Removes the announcement." },
          { ":immutable_put(value: string, opts?: table) -> result: table?, err: string?, code: string?", "Stores value under its hash: {hash, closest_nodes}." },
          { ":immutable_get(hash: string, opts?: table) -> value: string?, reply: table?", "The value stored under hash (checked); nil when nobody has it." },
          { ":mutable_put(keypair: table, value: string, opts?: table) -> result: table?, err: string?, code: string?", "Signs value at opts.seq (default 0) and stores it." },
          { ":mutable_get(public_key: string, opts?: table) -> result: table?, err: string?, code: string?", "The latest signed value of a key: {value, seq, signature, from}." },
          { ":server(handler: function, opts?: table) -> server: ludx.dht.Server", "A server: handler(conn) runs as a task for each connection (conn is a SecretStream). opts.firewall(remote_public_key, payload, address) -> true refuses a client. Caps against handshake floods (see ludx.dht.server): opts.max_handshakes (250 a second), max_handshakes_per_source (16 a second), max_pending (256 waiting for their client), max_pending_per_source (8), max_punchers (32 puncher sockets). opts.resume = false: no careful resume from the node's store." },
          { ":connect(public_key: string, opts?: table) -> conn: ludx.secretstream.Stream?, err: string?, code: string?", "Connects to the server with this key, through the DHT (relayed handshake, holepunching when needed). Returns once the server holds the connection (its header arrived). opts: keypair, timeout, relay_addresses, resume (false: start as with a stranger, whatever the node remembers)." },
          { ":destroy() -> ok: true", "Ends everything now: the servers stop (no unannounce), every connection made through the node (client and server side, connecting or open) is closed so its tasks end and its reads and writes fail at once, the sockets close, waiters get \"NODE_DESTROYED\". Server handler tasks see their connection fail (they are not cancelled). Idempotent. After it, ludx.run returns once the caller's own tasks end." },
          { ":close(timeout?: number) -> ok: true", "The graceful end: the servers unannounce (together, each up to timeout ms, default 10 s), then destroy. Idempotent: a second close returns once the node is destroyed; destroy meanwhile ends the unannounce wait at once." },
          { ":raw() -> node: table", "The callback-style node underneath (ludx.dht.hyperdht)." },
        } },
      { name = "ludx.dht.Server", doc = "A server announced under its key pair.", methods = {
          { ":listen(keypair?: table, timeout?: number) -> " .. E, "Announces the server under H(public_key); returns once the first announce round is done. On a closed server, or when close/destroy comes first: nil, \"server closed\", \"SERVER_CLOSED\" (at once)." },
          { ":close(opts?: table) -> ok: true", "Stops announcing and refuses new clients (opts.fast skips the unannounce round trip; opts.timeout bounds it, default 10000 ms). Open connections stay (node:destroy ends them). Idempotent: a second close waits for the first one's end; destroy meanwhile ends its unannounce wait." },
          { ":destroy() -> ok: true", "As close without the unannounce round trip." },
          { ":address() -> address: table?", "{public_key, host, port}." },
        } },
      { name = "ludx.dht.Testnet", doc = "A local DHT in this process.", fields = { { "bootstrap", "string[]", "The bootstrap address, {\"127.0.0.1:port\"}." }, { "nodes", "ludx.dht.Node[]" } }, methods = {
          { ":create_node(opts?: table) -> node: ludx.dht.Node?, err: string?, code: string?", "Another node joined to this testnet, ready." },
          { ":destroy() -> ok: true", "Destroys every node (and the connections made through them). Idempotent." },
          { ":close() -> ok: true", "As destroy." },
        } },
      { name = "ludx.dht.Query", doc = "Query replies: call it (or :next()) in a for loop.", methods = {
          { ":next() -> reply: table?", "The next reply, or nil at the end (then :error() tells why)." },
          { ":error() -> err: string?, code: string?", "What ended the query early, if anything." },
          { ":collect() -> replies: table[]?, err: string?, code: string?", "Every remaining reply." },
          { ":close()", "Stops the query." },
          { ":closest_nodes() -> nodes: table[]", "The closest nodes that replied (after the end)." },
        } },
    },
    internal = { "_await", "Node" },
  },

  {
    name = "ludx.swarm",
    summary = "Meet peers on topics, as Hyperswarm does",
    doc = [[
A swarm joins topics (32-byte hashes) on the DHT, finds who else joined
them, and keeps one encrypted connection per remote key. It speaks npm
`hyperswarm` 4.x: a ludx swarm and a Node swarm on one topic connect to each
other, and when both dial at once both keep the same connection (the one the
larger key dialed). A server announces the topic (and its own key, so it can
be dialed); a client looks the topic up and dials what it finds, up to
`max_parallel` at once and while fewer than `max_peers` connections are open.
A connection that ends is dialed again with backoff (1 s, 5 s, 15 s, plus
jitter) while its peer is still on a joined topic; lookups and announces
run again every 10 to 12 minutes.

Each connection runs `fn(conn, info)` in its own task; the connection
closes when fn returns. `conn` is a `ludx.secretstream.Stream`
(`conn.remote_public_key`, `conn.initiator`); `info` is the peer:
`public_key`, `topics` (the joined topics it was found under), `client` (we
dialed), `server`, `explicit`, `banned`, `attempts`, and `ban()`.

What the DHT or peers can make a swarm spend is capped (options of
swarm.new): `max_peer_table` peers remembered (1024; more discovered peers
are ignored), `max_server_connections` accepted connections (256; more are
refused during the handshake), `max_parallel` dials (3), `max_peers` (64),
`connect_timeout` per dial (30 s). The reconnect queue holds only peers of
the table; bans are kept up to `max_peer_table` (the oldest is forgotten);
a discovered peer keeps at most 3 relay addresses.

`close()` is the graceful end (every topic and the swarm key unannounced,
then destroy); `destroy()` ends at once without unannouncing. Once either
began, waiters and later calls get the swarm's own code: nil, "swarm
closed", "SWARM_CLOSED" after close, nil, "swarm destroyed",
"SWARM_DESTROYED" after destroy.]],
    example = [[
local tn = assert(dht.testnet(3))
local a = assert(swarm.new({ bootstrap = tn.bootstrap, port = 0 }))
local b = assert(swarm.new({ bootstrap = tn.bootstrap, port = 0 }))
a:on_connection(function(conn, info) conn:write("hi") conn:finish() end)
b:on_connection(function(conn, info) print(conn:read()) end)   --> hi
local topic = dht.hash("my topic")
assert(a:join(topic):flushed())             -- announced
assert(b:join(topic, { server = false }):flushed())  -- looked up and dialed
b:close()  a:close()                        -- unannounce, close connections]],
    fields = {
      { "MAX_PEERS", "integer", "64: dialing stops at this many connections (fewer with join_peer peers)." },
      { "MAX_PARALLEL", "integer", "3: dials at once." },
      { "MAX_CLIENT_CONNECTIONS", "number", "Unbounded by default (math.huge)." },
      { "MAX_SERVER_CONNECTIONS", "integer", "256: accepted connections; more are refused at the handshake." },
      { "MAX_PEER_TABLE", "integer", "1024: peers remembered; more discovered peers are ignored." },
      { "CONNECT_TIMEOUT", "integer", "30000 ms per dial." },
      { "FINISH_TIMEOUT", "integer", "10000 ms: how long a connection whose handler returned may take to end gracefully." },
      { "REFRESH_INTERVAL", "integer", "10 min between a topic's lookups/announces." },
      { "REFRESH_JITTER", "integer", "Up to 2 min added to it." },
    },
    functions = {
      { "new(opts?: table) -> swarm: ludx.swarm.Swarm?, err: string?, code: string?", "A swarm (call it in a task). opts: dht (a ludx.dht node to use; else one is made, and the other options pass through to dht.new: bootstrap, port, host, ...), keypair (or seed: 32 bytes), firewall(remote_public_key, payload) -> true refuses and bans the peer, max_peers, max_parallel, max_client_connections, max_server_connections, max_peer_table, connect_timeout, finish_timeout, backoffs ({short, medium, long, explicit-peer} ms), jitter, refresh_interval, refresh_jitter." },
    },
    classes = {
      { name = "ludx.swarm.Swarm", impl = "ludx.swarm:Swarm", doc = "A swarm.", fields = {
          { "keypair", "table", "Its key pair (the public key is what peers see)." },
          { "connections", "table<string, ludx.secretstream.Stream>", "Live view: remote public key -> the open connection." },
          { "peers", "table<string, ludx.swarm.Peer>", "Live view: public key -> what the swarm knows of the peer." },
          { "dht", "ludx.dht.Node", "The DHT node underneath." },
        }, methods = {
          { ":on_connection(fn: function) -> swarm: ludx.swarm.Swarm", "Sets fn(conn, info), run in a task of its own for each new connection; the connection closes (gracefully, up to finish_timeout) when fn returns." },
          { ":join(topic: string, opts?: table) -> session: ludx.swarm.Session?, err: string?, code: string?", "Joins a topic: opts.server (announce; default true), opts.client (look up and dial; default true), opts.limit. Returns at once. A topic that is not 32 bytes: nil, \"invalid topic\", \"EINVAL\"." },
          { ":leave(topic: string, timeout?: number) -> " .. E, "Leaves a topic: no more lookups, and our announcement is removed from the closest nodes (up to timeout ms, default 10 s). Open connections stay." },
          { ":join_peer(public_key: string) -> " .. E, "Keeps a connection to this key (reconnecting with backoff) until leave_peer." },
          { ":leave_peer(public_key: string) -> ok: true", "Stops keeping a connection to this key (an open one stays)." },
          { ":flush(timeout?: number) -> " .. E, "Waits until every topic was announced and looked up and every peer found so far was dialed (or no more dials can start). A client slot held only by a closed connection's lingering udx stream (see stats) counts as free: flush waits for it to go (at the peer's END, or at most that close's timeout + 1 s) and for the queued peer's dial to start." },
          { ":listen(timeout?: number) -> " .. E, "Announces the swarm's key so peers can dial it (join with server does it)." },
          { ":stats() -> stats: table", "Counters: attempted, client_opened, client_closed, server_opened, server_closed, duplicates, banned, peers_dropped, server_refused, bans_forgotten (past max_peer_table bans the oldest is forgotten); and now: connecting, connections, peers, queued, lingering (closed connections whose udx streams still wait for the peer's END: each keeps its client or server slot until then, at most the SecretStream close's timeout (finish_timeout for the swarm's own) + 1 s after it closed; then it is reset. A reset connection frees its slot at once)." },
          { ":topics() -> topics: string[]", "The joined topics." },
          { ":close(timeout?: number) -> ok: true", "The graceful end: leaves every topic and stops the server, unannouncing all at once (each up to timeout ms, default 10 s), then destroy. Waiting listen and flush calls, and every later call, get nil, \"swarm closed\", \"SWARM_CLOSED\". Idempotent: a second close waits for the first one's end; destroy meanwhile ends it at once." },
          { ":destroy() -> ok: true", "Ends now, without unannouncing: every connection and dial is closed (their tasks see reads and writes fail), timers stop, waiters get nil, \"swarm destroyed\", \"SWARM_DESTROYED\"; a DHT node the swarm made is destroyed. Idempotent." },
        } },
      { name = "ludx.swarm.Session", impl = "ludx.swarm.discovery:Session", doc = "A join of a topic.", fields = { { "topic", "string" }, { "is_server", "boolean" }, { "is_client", "boolean" } }, methods = {
          { ":flushed(timeout?: number) -> " .. E, "Waits until the topic is announced (server) and looked up, and the peers found were dialed (client; as flush does, also the ones waiting for a slot a lingering stream holds). False when the last round failed; nil, \"topic left\", \"SWARM_TOPIC_LEFT\" after leave." },
          { ":refresh(opts?: table) -> " .. E, "Looks up / announces again now; opts.server, opts.client change this session's role, opts.limit. Returns at once." },
          { ":destroy(timeout?: number) -> ok: true", "Leaves this session; the last one leaves the topic (unannounces)." },
          { ":close(timeout?: number) -> ok: true", "As destroy." },
        } },
      { name = "ludx.swarm.Peer", impl = "ludx.swarm:Peer", doc = "What a swarm knows of a remote key (the info of on_connection).", fields = {
          { "public_key", "string" }, { "topics", "string[]" }, { "client", "boolean", "Our last connection to it was a dial." },
          { "server", "boolean" }, { "explicit", "boolean" }, { "banned", "boolean" }, { "attempts", "integer" },
        }, methods = {
          { ":ban(yes?: boolean) -> ok: true", "Bans (or with false unbans) the peer: never dialed, its connections refused. The open connection stays." },
          { ":reconnect(yes?: boolean) -> ok: true", "Whether to dial it again after a connection ends (default true)." },
        } },
    },
    internal = { "Swarm", "Peer" },
  },
  {
    name = "ludx.tcp",
    summary = "TCP with the stream API of udx",
    doc = [[
TCP servers and connections with the same read/write/finish/close API as a
udx stream, so a SecretStream, the share protocol or a tunnel runs over
either.]],
    example = [[
local server = assert(tcp.listen("127.0.0.1", 0))
local _, port = server:address()
local c = assert(tcp.connect("127.0.0.1", port))
local s = server:accept()
c:write("ping") print(s:read())   --> ping]],
    functions = {
      { "connect(host: string, port: integer, timeout?: number) -> conn: ludx.tcp.Conn?, err: string?, code: string?", "Connects (resolving host); waits for the connection." },
      { "listen(host: string, port: integer, opts?: table) -> server: ludx.tcp.Server?, err: string?, code: string?", "Listens (port 0 picks one). opts.backlog." },
      { "listen_unix(path: string, opts?: table) -> server: ludx.tcp.Server?, err: string?, code: string?", "Listens on a Unix socket at path, made with mode 0600 and removed when the server closes. opts.backlog." },
      { "connect_unix(path: string, timeout?: number) -> conn: ludx.tcp.Conn?, err: string?, code: string?", "Connects to a Unix socket; the connection has the same API." },
      { "stdio(fd: integer) -> conn: ludx.tcp.Conn|false|nil, err: string?, code: string?", "Standard input (fd 0) or output (fd 1) as a connection with the same API when it is a pipe, a socket or a terminal (reads stop while 1 MiB waits unread, writes wait above 1 MiB queued; finish() flushes, then fails with ENOTSOCK on a pipe); false for a regular file or a device, which io.stdin/io.stdout read and write directly." },
    },
    classes = {
      { name = "ludx.tcp.Conn", doc = "A TCP connection.", methods = {
          { ":read(max?: integer, timeout?: number) -> data: string?, err: string?, code: string?", "Bytes available (up to max, default 64 KiB), waiting for some; nil at the end." },
          { ":write(data: string, timeout?: number) -> " .. E, "Queues data; waits only above the high-water mark." },
          { ":finish(timeout?: number) -> " .. E, "Ends our half (FIN) after the queued bytes." },
          { ":close() -> ok: true", "Closes the connection now. A read or write waiting, and every later call, get nil, \"connection is closed\", \"ECANCELED\" (as a udx stream's after its own close; the peer's end gives EOF, or EPIPE to a write). Idempotent." },
          { ":address() -> host: string, port: integer", "The local address." },
          { ":remote_address() -> host: string, port: integer", "The peer's address." },
        } },
      { name = "ludx.tcp.Server", doc = "A listening socket.", methods = {
          { ":accept(timeout?: number) -> conn: ludx.tcp.Conn?, err: string?, code: string?", "The next client." },
          { ":address() -> host: string, port: integer", "The bound address." },
          { ":close() -> ok: true", "Stops listening." },
        } },
    },
  },

  {
    name = "ludx.fs",
    summary = "Filesystem metadata for the peer tools",
    doc = "Synchronous metadata calls (stat, lstat, directories, renames); file contents go through Lua's io library.",
    functions = {
      { "stat(path: string) -> st: table?, err: string?, code: string?", "{type = \"file\"|\"directory\"|..., size, mtime, ctime (ns), mode, dev, ino}." },
      { "lstat(path: string) -> st: table?, err: string?, code: string?", "As stat, but a symbolic link itself (type \"link\")." },
      { "exists(path: string) -> yes: boolean", "Whether path exists." },
      { "mkdirp(path: string) -> " .. E, "Creates path and its parents." },
      { "walk(root: string) -> files: table[]?, other: table[]|string?, code: string?", "Every regular file under root, sorted: {{path = \"a/b.txt\", size, full, dev, ino}, ...}; a file root gives one entry named after it. Links below root are not followed: they and other non-files come back in the second list ({path, type})." },
      { "rename(from: string, to: string) -> " .. E, "Renames (atomically on one filesystem)." },
      { "unlink(path: string) -> " .. E, "Removes a file." },
      { "rmdir(path: string) -> " .. E, "Removes an empty directory." },
      { "realpath(path: string) -> path: string?, err: string?, code: string?", "The canonical absolute path." },
      { "truncate(path: string, size: integer) -> " .. E, "Cuts or extends a file." },
    },
  },

  {
    name = "ludx.process",
    summary = "Child processes for tasks",
    doc = "Starts programs and reads their output without blocking the loop: lines, JSON lines, patterns, exit.",
    example = [[
local p = assert(process.spawn("echo", { "hi" }))
print(p:read_line(1000))   --> hi
print(p:wait(1000))        --> 0  0
p:close()]],
    functions = {
      { "spawn(file: string, args?: string[], opts?: table) -> proc: ludx.process.Proc?, err: string?, code: string?", "Starts a program. opts: env (merged over ours unless clear_env), cwd, pty, rows, cols, stderr (\"pipe\" or \"inherit\")." },
    },
    classes = {
      { name = "ludx.process.Proc", doc = "A child process.", fields = { { "pid", "integer" } }, methods = {
          { ":read(timeout?: number) -> data: string?, err: string?, code: string?", "All stdout available now (waits for some); nil at EOF." },
          { ":read_line(timeout?: number) -> line: string?, err: string?, code: string?", "The next stdout line without its newline; nil at EOF." },
          { ":read_json(timeout?: number) -> value: table?, err: string?, code: string?", "The next stdout line that is a JSON object." },
          { ":expect(pattern: string, timeout?: number, plain?: boolean) -> text: string?, ...: string", "Waits until stdout matches; returns the output up to the match and the captures." },
          { ":stderr() -> text: string", "What the child wrote to stderr so far." },
          { ":write(data: string) -> " .. E, "Writes to the child's stdin." },
          { ":close_stdin() -> " .. E, "Closes the child's stdin." },
          { ":wait(timeout?: number) -> status: integer?, signal: integer?", "Waits for the exit." },
          { ":kill(signal?: string) -> " .. E, "Sends a signal (default SIGTERM)." },
          { ":resize(rows: integer, cols: integer) -> ok: boolean", "Resizes the pseudo-terminal." },
          { ":close()", "Kills the child if it still runs and lets go of it." },
        } },
    },
  },

  {
    name = "ludx.crypto",
    summary = "The hyperswarm crypto primitives",
    doc = "Ed25519 keys, BLAKE2b, Noise handshakes and helpers (libsodium underneath). Byte strings are Lua strings.",
    fields = { { "NS", "table<string, string>", "The 32-byte namespaces of secret-stream and hyperdht." } },
    functions = {
      { "keypair(seed?: string) -> keypair: table", "{public_key (32 bytes), secret_key (64 bytes)}; from a 32-byte seed when given." },
      { "hex(bytes: string) -> hex: string", "Lower-case hex." },
      { "unhex(hex: string) -> bytes: string", "Bytes from hex (white space ignored); raises on anything else." },
      { "blake2b(data: string, outlen?: integer, key?: string) -> hash: string", "BLAKE2b of outlen bytes (16..64, default 32)." },
      { "randombytes(n: integer, seed?: string) -> bytes: string", "n random bytes; deterministic with a 32-byte seed." },
      { "sign(message: string, secret_key: string) -> signature: string", "An Ed25519 signature." },
      { "verify(signature: string, message: string, public_key: string) -> ok: boolean", "Checks a signature." },
      { "handshake(opts: table) -> hs: table", "A Noise handshake: opts.pattern (\"XX\"), initiator, keypair, prologue, remote_public_key." },
    },
    internal = {},
  },

  {
    name = "ludx.policy",
    summary = "Transfer policies: rate limits, priorities, chunk order",
    doc = [[
Lua configures, C enforces: a limiter is a token bucket (bytes of payload
per second) in the udx send path, checked per packet in C, never in Lua.
Streams join limiters with a weight; while several have data to send they
split the rate by weight, and one alone gets all of it. A stream may be in
up to four limiters (its own, its peer's, a link's) and sends when all
allow. Retransmissions and acks are never held back. Streams are udx
streams or streams over one (SecretStreams, ludx.dht connections).]],
    example = [[
policy.limit(conn, { rate = 2e6 })              -- this connection: 2 MB/s
local peers = policy.per_peer({ rate = 5e6 })   -- every peer: 5 MB/s
peers:add(conn)
local link = policy.limiter({ rate = 20e6 })    -- a shared 20 MB/s
link:add(video, "high") link:add(backup, "low") -- 16:1 while both send]],
    fields = {
      { "PRIORITY", "table<string, integer>", "Priority classes as weights: high = 16, normal = 4, low = 1." },
      { "schedule", "table", "The chunk scheduling module (ludx.policy.schedule)." },
    },
    functions = {
      { "limit(stream: table, opts: table) -> limiter: ludx.policy.Limiter?, err: string?, code: string?", "Limits one stream on its own: a limiter of its own. opts: rate (bytes/s), burst (bytes, default 20 ms at the rate)." },
      { "limiter(opts: table) -> limiter: ludx.policy.Limiter?, err: string?, code: string?", "A limiter for streams to share. opts.rate 0 means unlimited." },
      { "per_peer(opts: table) -> peers: ludx.policy.Peers", "One limiter per peer (remote public key, or remote host for plain udx streams), each with these numbers." },
      { "priority(link: ludx.policy.Limiter, stream: table, class: string|integer) -> " .. E, "Sets a stream's class (\"high\", \"normal\", \"low\") or weight in a shared limiter." },
      { "udx_stream(stream: table) -> stream: ludx.udx.Stream?", "The udx stream under a stream (itself, or the one a SecretStream runs on)." },
    },
    classes = {
      { name = "ludx.policy.Limiter", impl = "ludx.policy.limiter:Limiter", doc = "A token bucket enforced in C.", fields = { { "rate", "integer" }, { "burst", "integer" } }, methods = {
          { ":add(stream: table, weight?: integer|string) -> " .. E, "Adds a stream (or sets its weight): a number >= 1 or a class (default \"normal\"). A stream leaves its limiters when it closes." },
          { ":remove(stream: table) -> " .. E, "Takes a stream out." },
          { ":set(opts: table) -> " .. E, "New rate and burst; they apply at once." },
          { ":stats() -> stats: table", "{rate, burst, members, active (with data waiting), bytes (sent through it), waits (times a member was held back)}." },
        } },
      { name = "ludx.policy.Peers", doc = "Limiters by peer.", methods = {
          { ":add(stream: table, weight?: integer|string) -> limiter: ludx.policy.Limiter?, err: string?, code: string?", "Adds a stream to its peer's limiter (made on first use)." },
          { ":limiter(peer: string) -> limiter: ludx.policy.Limiter", "The limiter of a peer (a public key or a host)." },
          { ":set(opts: table) -> ok: true", "New numbers for every peer." },
          { ":stats() -> stats: table", "{peer = limiter stats, ...}." },
        } },
    },
  },

  {
    name = "ludx.policy.schedule",
    summary = "Chunk scheduling for a share of many files",
    doc = [[
Which chunk a fetcher asks for next. Chunks of one file always come in
order (each file is checked and hashed as it is written); the order picks
the file: "sequential" (manifest order, the default), "smallest" (many files
complete early), "largest", "interleave" (round robin over opts.spread files,
default 4). It runs once per chunk, never per packet.]],
    fields = { { "ORDERS", "string[]", "The orders." } },
    functions = {
      { "new(order: string?, items: table[], opts?: table) -> sched: ludx.policy.Schedule", "items: {{file, first, count, size}, ...} (chunks first..first+count-1 of file)." },
    },
    classes = {
      { name = "ludx.policy.Schedule", doc = "A chunk scheduler.", methods = {
          { ":next() -> file: integer?, chunk: integer?", "The next chunk to ask for; nil when all are handed out." },
          { ":remaining() -> n: integer", "Chunks still to hand out." },
        } },
    },
  },

  {
    name = "ludx.share",
    summary = "Share a file or a directory by key; fetch it by key",
    doc = [[
The protocol behind `ludx share` and `ludx fetch`, over a DHT connection (a
SecretStream to the server's public key). The server sends a manifest:
paths, sizes, BLAKE2b-512 per file (what b2sum prints) and BLAKE2b-256 per
chunk (1 MiB by default). The client asks for chunks, pipelined (GET id,
file, offset, length; DATA id, file, offset, bytes), checks each chunk and
each file, and renames a file into place only once it checks. Paths from the
network are checked (no absolute paths, "..", NULs, control characters,
backslashes or drive letters; the share's name is one component), land
only below DEST (no link there is followed; a file ludx did not make is
replaced only with force), and manifests are capped. A server serves only
the regular files it hashed and caps what a client can make it hold
(connections, queued bytes and requests, stalled and idle clients); the
caps are in docs/share-protocol.md. An interrupted fetch keeps its verified
chunks in DEST/.ludx-partial/ and continues from them. The wire format is
in docs/share-protocol.md.]],
    example = [[
local s = assert(share.serve(alice_node, "photos/"))
print(share.hex(s.key))
local r = assert(share.fetch(bob_node, s.key, "copy", { progress = progress.new() }))
print(r.files, r.bytes)]],
    functions = {
      { "serve(node: ludx.dht.Node, what: string|table, opts?: table) -> share: ludx.share.Share?, err: string?, code: string?", "Hashes a path (or takes a manifest built before), then announces it. opts: keypair (default the node's), chunk_size, on_bytes(n) while hashing, on_connection(conn) (to attach policies), on_event(event, info) for \"connect\", \"close\" ({peer, host, bytes, error}) and \"refuse\" ({peer, host, error}). Caps: max_connections (64), max_per_peer (4), max_per_address (16), max_queued (GETs waiting, 64), write_limit (bytes queued per client, 2 MiB), read_limit (bytes buffered from a client, 256 KiB), write_timeout (ms a client may take no bytes, 30000), idle_timeout (ms without a request, 120000), hello_timeout (30000)." },
      { "fetch(node: ludx.dht.Node, key: string, dest?: string, opts?: table) -> result: table?, err: string?, code: string?", "Fetches into dest: a directory share lands in dest (default ./NAME), a file share at dest or inside it when it is a directory. opts: order (see ludx.policy.schedule), spread (files at once for \"interleave\"), window (chunks ahead, default 8, at most 64), timeout (connect, ms), force (replace files in dest that differ; else EEXIST), max_manifest (bytes, 32 MiB), max_files (262144), max_depth (components per path, 128), progress (a ludx.progress), on_manifest(m, layout) (return false to stop), on_file(path, final_path), on_check(n) (bytes on disk checked before the transfer). Result: {files, bytes, received, skipped, seconds, root, target, manifest, stats}. Codes: EVERIFY (a chunk or file does not match), EPROTO (a bad or oversized manifest or message), EEXIST (a file in the way), ELOOP (a link in the way), EREMOTE, EREFUSED, ..." },
      { "manifest(path: string, opts?: table) -> manifest: table?, err: string?, code: string?", "Builds a manifest: {version, name, kind, chunk_size, total, files = {{path, size, hash, chunks, nchunks}}, encoded, id, skipped}. Only regular files: path itself is followed when it is a link (the user's choice) and opened once (manifest.root); nothing below it is, not even a folder swapped for a link while it is walked, hashed or served. Links and files whose paths a fetcher would refuse are left out and listed in skipped ({path, why}). opts: chunk_size (16 KiB..16 MiB), on_total(bytes) once the files to hash are known, on_bytes(n) while hashing, max_entries (entries walked, 524288)." },
      { "hex(key: string) -> hex: string", "A key as 64 hex characters." },
      { "parse_key(hex: string) -> key: string?, err: string?", "A key from 64 hex characters." },
    },
    classes = {
      { name = "ludx.share.Share", doc = "A share being served.", fields = { { "key", "string", "The public key (32 bytes)." }, { "manifest", "table" } }, methods = {
          { ":close(opts?: table) -> ok: true", "Stops announcing and refuses new clients (transfers in progress go on); opts.fast skips the unannounce round trip (opts.timeout bounds it, default 10000 ms). Idempotent: a second close waits for the first one's unannounce; destroy meanwhile ends it at once." },
          { ":destroy() -> ok: true", "As close without the unannounce round trip." },
        } },
    },
  },

  {
    name = "ludx.progress",
    summary = "Progress display for transfers",
    doc = "A bar redrawn in place on a terminal (at most 10 times a second), plain lines about once a second otherwise. Bytes, rate (a moving average), ETA. Sizes are decimal (1 MB = 10^6 bytes).",
    example = [[
local p = progress.new({ label = "fetch" })
p:start(total, 0)
p:update(#chunk)      -- as bytes arrive
p:finish()            --> fetch done: 64.0 MB in 0.52 s, 122.1 MB/s]],
    functions = {
      { "new(opts?: table) -> p: ludx.progress.Progress", "opts: label, out (default io.stdout), tty (default: whether out is a terminal), width, interval (ms)." },
      { "isatty(fd?: integer) -> yes: boolean", "Whether a file descriptor (default 1) is a terminal." },
      { "bytes(n: number) -> text: string", "\"12.3 MB\"." },
      { "duration(seconds: number) -> text: string", "\"1:05\"." },
    },
    classes = {
      { name = "ludx.progress.Progress", doc = "A progress display.", methods = {
          { ":start(total: integer, have?: integer)", "Starts the clock; have: bytes already there (a resumed transfer)." },
          { ":update(n: integer)", "n more bytes arrived." },
          { ":state() -> state: table", "{bytes, total, rate, average, eta, seconds}." },
          { ":finish()", "The closing line: totals, average rate, time." },
          { ":stop()", "Ends the line without a summary (on errors)." },
          { ":line() -> text: string", "The current line." },
          { ":draw(force?: boolean)", "Draws now (if the interval passed, or forced)." },
        } },
    },
  },

  {
    name = "ludx.stdin",
    summary = "Lines from stdin for programs driven by another process",
    doc = "Reads stdin on the loop, so other tasks run meanwhile. One watcher per process (the REPL reads stdin its own way).",
    example = [[
stdin.watch(function(line) conn:write(line .. "\n") end, function() conn:finish() end)]],
    functions = {
      { "watch(on_line: function, on_eof?: function) -> task: ludx.Task", "Starts a task that calls on_line(line) for each line and on_eof() when stdin closes (default: exit the process with status 3)." },
    },
  },

  {
    name = "ludx.json",
    summary = "JSON for control lines",
    doc = "Strict JSON: anything malformed is an error, never a partial value.",
    fields = { { "null", "table", "The JSON null." }, { "array_mt", "table", "The metatable json.array sets." } },
    functions = {
      { "encode(v: any) -> text: string", "Encodes a value (tables with 1..n keys as arrays)." },
      { "decode(text: string) -> v: any, err: string?", "Decodes; nil, message on bad input." },
      { "array(t: table) -> t: table", "Marks an empty table to encode as [] instead of {}." },
    },
  },

  {
    name = "ludx.pipe",
    summary = "An in-memory duplex stream",
    doc = "Two connected ends with the stream API of a udx stream, for layering protocols without a network and for tests.",
    functions = {
      { "pair(opts?: table) -> a: ludx.pipe.End, b: ludx.pipe.End", "opts: highwater (bytes), chunk (bytes per read, or a function)." },
    },
    classes = {
      { name = "ludx.pipe.End", doc = "One end.", methods = {
          { ":read(max?: integer, timeout?: number) -> data: string?, err: string?, code: string?", "Buffered bytes up to max; nil at the end." },
          { ":write(data: string, timeout?: number) -> " .. E, "Always accepted; waits while the peer holds more than highwater." },
          { ":finish(timeout?: number) -> ok: true", "The peer reads the end after the buffered bytes." },
          { ":close() -> ok: true", "Graceful: the peer reads what is buffered for it, then EOF; what it writes later is dropped. Our waiting reads, and every later call, get \"ECANCELED\" (as a udx stream's); a writer waiting for room returns true (its bytes are the peer's to read). Idempotent." },
          { ":destroy() -> ok: true", "Abortive: the peer gets ECONNRESET and loses what was buffered for it; our waiting calls and every later one get \"ECANCELED\". Idempotent." },
          { ":stats() -> stats: table", "{bytes_written, bytes_read, writes, reads}." },
        } },
    },
  },
}
