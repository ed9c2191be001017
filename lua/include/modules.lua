--[[
  EVALSHA runs a script's whole chunk at every call, so every function defined at its top level
  costs every call, whichever path it takes, and the more so the more outer locals it captures
  (Lua 5.1 walks the open upvalues for each). So the helpers of a script's slow paths are grouped
  in modules (Record, Meta, ...), each defined at its first use in a call, by a function that
  captures as little as it can: what modules share reaches them through the table `bucket`. A
  steady heartbeat defines none of them, and a room without shards or an index never defines
  theirs.
]]
-- @include "bucket"
-- What the modules share: the bucket's keys and settings, the call's time, and the modules.
local bucket = {
  due = dueKey, seq = seqKey, log = logKey, replay = replayKey, tag = tag, now = now,
  presenceWindow = presenceWindow, typingWindow = typingWindow, keyTtl = keyTtl,
}
-- A module's first use defines it; later uses read the defined table through the module's
-- metatable (copying its functions into the module measured dearer than the lookups it saves).
local LAZY = {}
LAZY.__index = function(module, name)
  local defined = module[1](bucket)
  module[1] = nil
  setmetatable(module, { __index = defined })
  return defined[name]
end
-- A module named `name` (bucket[name] too): the table `define(bucket)` returns, made at the
-- first use of any of its fields.
local function defineModule(name, define)
  local module = setmetatable({ define }, LAZY)
  bucket[name] = module
  return module
end

-- A script's outcomes, named once: outcomes('a', 'b').b == 1. The TypeScript side decodes them
-- by the same names, in the same order (a test reads both).
local function outcomes(...)
  local codes = {}
  for i, name in ipairs({ ... }) do
    codes[name] = i - 1
  end
  return codes
end
