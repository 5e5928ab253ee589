#ifndef LUDX_BIND_H
#define LUDX_BIND_H

// Conventions shared by every file of the ludx.core module.
//
// - Each area has one entry, `void ludx_bind_<area>(lua_State *L)`, that adds
//   its functions to the core table on top of the stack (see core.c).
// - Runtime failures return `nil, message, code` (luv's order); `code` is the
//   libuv error name such as "ECONNRESET". Wrong argument types raise an error
//   that names the argument.
// - C objects live apart from their userdata (the userdata holds a pointer).
//   C callbacks never call Lua: they post a record to the event ring with the
//   object's `ref`, a number the Lua side chose when it created the object.

#include <lauxlib.h>
#include <lua.h>
#include <stdint.h>
#include <uv.h>

#include "../runtime/rt.h"

ludx_rt_t *
ludx_bind_rt (lua_State *L);

// nil, message, code for a negative UV_E*; returns 3.
int
ludx_push_uv_error (lua_State *L, int err);

// nil, message, code with our own code string; returns 3.
int
ludx_push_error (lua_State *L, const char *msg, const char *code);

// Strings of at least this many bytes are paid for in GC work when made.
#define LUDX_GC_PAY_MIN 16384

// Pushes n bytes from p as a string (data read for Lua: a read, a frame),
// and from LUDX_GC_PAY_MIN bytes on does the collector's work for it at
// once (bind.c). May run finalizers: call it when the C state is settled.
void
ludx_push_bytes (lua_State *L, const void *p, size_t n);

// The collector's work for a string of n bytes pushed before (the second
// half of ludx_push_bytes, for a caller that settles its state between).
void
ludx_gc_pay (lua_State *L, size_t n);

// Argument checks whose errors name the argument: "bad argument 'port' to
// 'connect' (number expected, got nil)".
const char *
ludx_check_lstring (lua_State *L, int idx, const char *name, size_t *len);

lua_Number
ludx_check_number (lua_State *L, int idx, const char *name);

lua_Integer
ludx_check_integer (lua_State *L, int idx, const char *name, lua_Integer min, lua_Integer max);

lua_Integer
ludx_opt_integer (lua_State *L, int idx, const char *name, lua_Integer def, lua_Integer min, lua_Integer max);

const char *
ludx_opt_lstring (lua_State *L, int idx, const char *name, const char *def, size_t *len);

int
ludx_check_table (lua_State *L, int idx, const char *name);

// Field getters for option tables at idx; a present field of the wrong type raises.
lua_Integer
ludx_field_integer (lua_State *L, int idx, const char *field, lua_Integer def);

int
ludx_field_boolean (lua_State *L, int idx, const char *field, int def);

const char *
ludx_field_string (lua_State *L, int idx, const char *field, const char *def);

uint32_t
ludx_check_ref (lua_State *L, int idx);

// A string of exactly `want` bytes; raises naming the argument otherwise.
const uint8_t *
ludx_check_bytes (lua_State *L, int idx, const char *name, size_t want);

int
ludx_check_boolean (lua_State *L, int idx, const char *name);

// Addresses: host (IPv4 or IPv6 literal) and port into a sockaddr (0 or
// UV_EINVAL); check_addr raises naming the arguments; push_addr pushes host,
// port, family ("IPv4"/"IPv6"; IPv4-mapped IPv6 as IPv4) and returns 3.
int
ludx_parse_addr (const char *host, int port, struct sockaddr_storage *out);

void
ludx_check_addr (lua_State *L, int host_idx, int port_idx, struct sockaddr_storage *out);

int
ludx_push_addr (lua_State *L, const struct sockaddr *sa);

// The lifecycle of a C object with two owners: Lua's userdata (released by
// __gc) and its handle (closed by its close callback). Whoever lets go
// last frees the memory: each call returns 1 when that is now.
typedef struct ludx_life_s {
  unsigned char closed, released;
} ludx_life_t;

static inline int
ludx_life_close (ludx_life_t *l) {
  l->closed = 1;
  return l->released;
}

static inline int
ludx_life_release (ludx_life_t *l) {
  l->released = 1;
  return l->closed;
}

// A FIFO of byte strings (datagrams, messages) that C fills and Lua empties.
// Each item may carry a fixed-size head (a source address) before its bytes.
typedef struct ludx_fifo_item_s {
  struct ludx_fifo_item_s *next;
  size_t head_len, len;
  uint8_t data[]; // head_len bytes of head, then len bytes
} ludx_fifo_item_t;

typedef struct ludx_fifo_s {
  ludx_fifo_item_t *head, *tail;
  size_t count, bytes; // items and their bytes (heads not counted)
} ludx_fifo_t;

// Copies head and data into a new item at the back: 1 when the FIFO was
// empty before (post the event of that edge), 0 when not, UV_ENOMEM.
int
ludx_fifo_push (ludx_fifo_t *q, const void *head, size_t head_len, const void *data, size_t len);

// The front item, taken off (the caller frees it), or NULL.
ludx_fifo_item_t *
ludx_fifo_shift (ludx_fifo_t *q);

void
ludx_fifo_clear (ludx_fifo_t *q);

// Userdata holding one pointer, with a named metatable.
void **
ludx_new_object (lua_State *L, const char *mt, void *ptr);

void *
ludx_check_object (lua_State *L, int idx, const char *mt, const char *name);

// Same, but raises "<what> is closed" when the pointer was cleared.
void *
ludx_check_open (lua_State *L, int idx, const char *mt, const char *what);

// Registers a metatable named mt with methods (and __index to itself).
void
ludx_new_class (lua_State *L, const char *mt, const luaL_Reg *methods);

// Adds the functions to the table on top of the stack.
void
ludx_set_funcs (lua_State *L, const luaL_Reg *funcs);

// The area entries.
void
ludx_bind_loop (lua_State *L);

void
ludx_bind_signal (lua_State *L);

void
ludx_bind_process (lua_State *L);

void
ludx_bind_line (lua_State *L);

void
ludx_bind_dns (lua_State *L);

void
ludx_bind_udx (lua_State *L);

void
ludx_bind_udx_stream (lua_State *L);

void
ludx_bind_testdata (lua_State *L);

void
ludx_bind_crypto (lua_State *L);

// Adds framer() to the core.crypto table on top of the stack.
void
ludx_bind_framer (lua_State *L);

void
ludx_bind_tcp (lua_State *L);

void
ludx_bind_fs (lua_State *L);

void
ludx_bind_policy (lua_State *L);

// core.EV (name -> number of each event kind); last, once all registered.
void
ludx_bind_event_kinds (lua_State *L);

#endif
