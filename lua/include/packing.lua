-- The record's packing primitives (see record), as locals: a steady heartbeat uses them before
-- any helper is defined.
local spack, sunpack, sbyte, ssub, schar = struct.pack, struct.unpack, string.byte, string.sub, string.char
local TYPING = 128
