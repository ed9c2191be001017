--[[
  The deployment's settings: the first instance stores its own; every later one gets them back
  and refuses to run if they differ from its own.

  KEYS[1] the deployment hash
  ARGV    field, value, field, value, ...

  Reply: {} when these settings were just stored, else the stored ones: field, value, ...

  No flags (no `#!lua` line): it reads the stored settings wherever Redis refuses writes (at
  maxmemory, a failed save, too few replicas); only its first store is refused there.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV))
  return {}
end
return redis.call('HGETALL', KEYS[1])
