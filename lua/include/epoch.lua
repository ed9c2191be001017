--[[
  A bucket's epoch: the sequence space its event numbers are unique in. An epoch belongs to one
  replication history of one Redis process: its master_replid, which every start of a master and
  every promotion changes (a master demoted, resynced and promoted again included): a script that
  finds the counter owned by another replication id (after a restart, a failover or a failback, a
  slot migration) may see a counter that lags numbers already published, and starts a new epoch
  before publishing, or before naming the epoch a roster page is consistent with. INFO
  replication alone tells it, at a fraction of INFO server's cost. Each epoch of the bucket gets
  the next ordinal 'k'; the last EPOCHS_KEPT are kept as 'e<k>', so a kept reply names its epoch
  in two bytes (see replay). The epoch's key ('mk'), made with it from what only Redis knows (the
  replication id, the time to the microsecond), signs what the bucket's scripts publish (see
  events).
]]
-- @include "modules"
local Epoch = defineModule('Epoch', function(bucket)
  local rcall, seqKey = redis.call, bucket.seq
  local EPOCHS_KEPT = 16
  local epoch, ordinal, key

  -- This master's replication id.
  local function replicationId()
    return string.match(rcall('INFO', 'replication'), 'master_replid:(%x+)')
  end

  -- The bucket's epoch, its ordinal and its key, started here if this replication history does
  -- not own it; read once per call.
  local function current()
    if epoch then
      return epoch, ordinal, key
    end
    local node = replicationId()
    local stored = rcall('HMGET', seqKey, 'epoch', 'node', 'k', 'mk')
    if stored[1] and stored[2] == node and stored[4] then
      epoch, ordinal, key = stored[1], tonumber(stored[3]), stored[4]
    else
      -- The random replication id and the time to the microsecond (no two scripts of one
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

  -- The epoch a read names (a roster page): the stored one while its owner is this replication
  -- history, else the one current() starts; '' for a bucket that never had one (it has no
  -- member, and a read writes nothing there).
  local function read()
    local stored = rcall('HMGET', seqKey, 'epoch', 'node')
    if not stored[1] then
      return ''
    end
    if stored[2] == replicationId() then
      return stored[1]
    end
    return (current())
  end

  -- The epoch of an ordinal kept in the bucket, or '' once forgotten.
  local function of(ordinal)
    return ordinal == 0 and '' or rcall('HGET', seqKey, 'e' .. ordinal) or ''
  end

  return { current = current, read = read, of = of }
end)
