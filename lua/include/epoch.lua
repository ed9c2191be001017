--[[
  A bucket's epoch: the sequence space its event numbers are unique in. An epoch belongs to the
  Redis process that started it, as master of one replication history (its run_id and
  master_replid): a script that finds the counter owned by another (after a restart, a failover
  or a failback, a slot migration) may see a counter that lags numbers already published, and
  starts a new epoch before publishing, or before naming the epoch a roster page is consistent
  with. Each epoch of the bucket gets the next ordinal 'k'; the last EPOCHS_KEPT are kept as
  'e<k>', so a kept reply names its epoch in two bytes (see replay). The epoch's key ('mk'),
  made with it from what only Redis knows (its run_id and replication id, the time to the
  microsecond), signs what the bucket's scripts publish (see events).
]]
-- @include "bucket"
local EPOCHS_KEPT = 16

-- The bucket's epoch, its ordinal and its key, started here if this process does not own it;
-- read once per call.
local currentEpoch
do
  local epoch, ordinal, key
  currentEpoch = function()
    if epoch then
      return epoch, ordinal, key
    end
    -- A promotion gives a master a new replid, even one demoted and failed back without a restart.
    local info = rcall('INFO', 'server', 'replication')
    local node = string.match(info, 'run_id:(%x+)') .. ':' .. string.match(info, 'master_replid:(%x+)')
    local stored = rcall('HMGET', seqKey, 'epoch', 'node', 'k', 'mk')
    if stored[1] and stored[2] == node and stored[4] then
      epoch, ordinal, key = stored[1], tonumber(stored[3]), stored[4]
    else
      -- The process's random run_id and the time to the microsecond (no two scripts of one
      -- process run in the same one): unique whoever starts it, wherever.
      local t = rcall('TIME')
      epoch = string.sub(node, 1, 8) .. string.format('%x%05x', tonumber(t[1]), tonumber(t[2]))
      ordinal = (tonumber(stored[3]) or 0) % 65535 + 1
      key = redis.sha1hex(node .. ':' .. t[1] .. ':' .. t[2] .. ':' .. seqKey)
      rcall('HSET', seqKey, 'epoch', epoch, 'node', node, 'k', ordinal, 'e' .. ordinal, epoch, 'mk', key)
      rcall('HDEL', seqKey, 'e' .. (ordinal - EPOCHS_KEPT))
    end
    return epoch, ordinal, key
  end
end

-- The epoch a read names (a roster page): the stored one while the replication id of its owner
-- is still this master's, else the one currentEpoch starts. A promotion always gives a master a
-- new replication id, and so does a restart on the Redis versions tested: what made an epoch
-- necessary (events of a lost history still in flight) changes it, and INFO replication costs a
-- fraction of INFO server.
local function readEpoch()
  local stored = rcall('HMGET', seqKey, 'epoch', 'node')
  local replid = string.match(rcall('INFO', 'replication'), 'master_replid:(%x+)')
  if stored[1] and stored[2] and string.sub(stored[2], -#replid - 1) == ':' .. replid then
    return stored[1]
  end
  return (currentEpoch())
end

-- The epoch of an ordinal kept in the bucket, or '' once forgotten.
local function epochOf(ordinal)
  return ordinal == 0 and '' or rcall('HGET', seqKey, 'e' .. ordinal) or ''
end
