-- What only a change needs, written after the settings every call needs (ARGV[1], see
-- bucket), read once: eventRosterLimit, logLength, leaveGraceMs, replayWindowMs, and whether the
-- deployment keeps users' status (userStatus: see events).
-- @include "modules"
-- The k-th setting (see bucket).
local function setting(k)
  return tonumber(ssub(settings, 12 * k - 11, 12 * k), 16)
end
bucket.eventRosterLimit, bucket.logLength, bucket.leaveGrace, bucket.replayWindow =
  setting(4), setting(5), setting(6), setting(7)
bucket.userStatus = setting(8) == 1
