--[[
  Expires what is due in one bucket, oldest first, at most a batch: connections past the presence
  window, typing past the typing window. Publishes one 'leave' (reason expired) per user who
  thereby left and one 'typing-stop' per expired typist. Concurrent calls never announce the
  same expiry twice: each due entry is settled once, atomically.

  KEYS[1..4] the bucket (see include/bucket.lua)
  ARGV[1..5] the deployment settings (see include/bucket.lua)
  ARGV[6] batch: most members to settle in this call

  Reply: {members settled, connections dropped, leaves, typing stops, 1 if more may be due}
]]
-- @include "bucket"
-- @include "events"
-- @include "expire"

local batch = tonumber(ARGV[6])
local fields = rcall('ZRANGEBYSCORE', dueKey, '-inf', now, 'LIMIT', 0, batch)
local dropped, leaves, stops = 0, 0, 0
for _, field in ipairs(fields) do
  local rec = load(field)
  if rec then
    local _, d, l, s = expire(field, rec)
    dropped, leaves, stops = dropped + d, leaves + l, stops + s
  else
    rcall('ZREM', dueKey, field)
  end
end
return { #fields, dropped, leaves, stops, #fields == batch and 1 or 0 }
