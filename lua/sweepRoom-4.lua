--[[
  Expires what is due in one room, walking its members in lexical order from a cursor, at most a
  batch per call (the caller loops until the cursor comes back empty). Same events and the same
  exactly-once guarantee as sweep.

  KEYS[1..4] the bucket (see include/bucket.lua)
  ARGV[1..5] the deployment settings (see include/bucket.lua)
  ARGV[6] room   ARGV[7] cursor ('' to start)   ARGV[8] batch

  Reply: {next cursor or '', connections dropped, leaves, typing stops}
]]
-- @include "bucket"
-- @include "events"
-- @include "expire"

local room, cursor, batch = ARGV[6], ARGV[7], tonumber(ARGV[8])
local lo, hi = roomRange(room)
if cursor ~= '' then
  lo = '(' .. cursor
end

local fields = rcall('ZRANGEBYLEX', membersKey, lo, hi, 'LIMIT', 0, batch)
local dropped, leaves, stops = 0, 0, 0
for _, field in ipairs(fields) do
  local at = tonumber(rcall('ZSCORE', dueKey, field))
  local rec = at and at <= now and load(field)
  if rec then
    local _, d, l, s = expire(field, rec)
    dropped, leaves, stops = dropped + d, leaves + l, stops + s
  end
end
local nextCursor = #fields == batch and fields[#fields] or ''
return { nextCursor, dropped, leaves, stops }
