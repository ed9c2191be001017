#!lua flags=no-writes
--[[
  A room's counts, read from its meta alone: no member is read.

  KEYS[1], ARGV[1..2]: see include/bucket.lua; derives the room's key.
  ARGV[3] room

  Reply: {members (those in their leave grace included), live connections, members typing}
]]
-- @include "meta"
local m = Meta.read(openRoom(ARGV[3]))
if not m then
  return { 0, 0, 0 }
end
return { m.users, m.conns, m.typing }
