/**
 * The scripts redis-benchmark runs beside rollcall's own, to put its cost in scale. Each replies
 * with a bare integer, as rollcall's steady heartbeat does: a table reply costs Redis more than
 * some of these scripts take to run.
 */

/**
 * The baseline's update_presence as one script: the time (Redis's, where the baseline reads its
 * own clock), then ZSCORE, ZADD, EXPIRE on the room's sorted set, exactly its three commands.
 * What the naive tracker's own work costs Redis, without its three round trips.
 * KEYS[1] presence:<room>:online   ARGV[1] user   ARGV[2] key TTL, s
 */
export const NAIVE_HEARTBEAT = `
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', t[2])
local previous = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return previous and 0 or 1
`;

/** The floor: what any script that reads the time costs, called with the caller's arguments. */
export const TIME_ONLY = `
redis.call('TIME')
return 0
`;

/**
 * What keeping live rooms out of the sweep would add to every heartbeat at least: a look at the
 * room's entry in the bucket's due index. KEYS[1] due   ARGV[1] room
 */
export const TIME_ZSCORE = `
redis.call('TIME')
redis.call('ZSCORE', KEYS[1], ARGV[1])
return 0
`;

/**
 * The baseline's join as one script: update_presence (the time, ZSCORE, ZADD, EXPIRE), and for a
 * user it did not find, get_online_users (ZRANGEBYSCORE over the window) and the join published
 * with that list, as its WebSocket handler does in three more round trips.
 * KEYS[1] presence:<room>:online   KEYS[2] its channel   ARGV[1] user   ARGV[2] window, s
 */
export const NAIVE_JOIN = `
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', t[2])
local previous = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2] * 3)
if previous then
  return 0
end
local online = redis.call('ZRANGEBYSCORE', KEYS[1], tonumber(now) - ARGV[2], '+inf')
redis.call('PUBLISH', KEYS[2], cjson.encode({ type = 'presence.join', conversation_id = KEYS[1],
  user_id = ARGV[1], timestamp = tonumber(now), online = online }))
return 1
`;

/**
 * The baseline's clean leave as one script: remove_presence (ZREM), get_online_users and the
 * leave published with that list. Keys and arguments as NAIVE_JOIN's.
 */
export const NAIVE_LEAVE = `
local t = redis.call('TIME')
local now = tonumber(t[1] .. '.' .. string.format('%06d', t[2]))
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local online = redis.call('ZRANGEBYSCORE', KEYS[1], now - ARGV[2], '+inf')
redis.call('PUBLISH', KEYS[2], cjson.encode({ type = 'presence.leave', conversation_id = KEYS[1],
  user_id = ARGV[1], timestamp = now, online = online }))
return 1
`;

/**
 * The baseline's typing frame as one script: set_typing (ZADD, EXPIRE) and the typing event.
 * KEYS[1] presence:<room>:typing   KEYS[2] the room's channel   ARGV[1] user   ARGV[2] expiry, s
 */
export const NAIVE_TYPING = `
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', t[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', KEYS[2], cjson.encode({ type = 'presence.typing', conversation_id = KEYS[1],
  user_id = ARGV[1], timestamp = tonumber(now) }))
return 1
`;

/** What a flat typing start leaves out, to weigh each part of its work. */
export interface TypingParts {
  /** The epoch's check: INFO replication and the bucket's epoch fields (see lua/include/epoch.lua). */
  epoch: boolean;
  /** The kept reply: its header read, its entry appended, its expiry (lua/include/replay.lua). */
  keptReply: boolean;
  /** The event's mac (lua/include/events.lua). */
  mac: boolean;
  /** The bucket's typing count and the reconcile's check (lua/include/meta.lua). */
  counts: boolean;
}

/**
 * lua/startTyping's work on its path (a present user starts typing) in the fewest commands and
 * flat: no helper, no table of the record, no module. The same keys and arguments as the real
 * script, and the same record, meta, event, mac and kept reply written, in 15 commands where the
 * script runs 18: one HMGET for its two HGETs, one HSET of the meta for its two, no EXISTS of the
 * index. None of the checks the script makes on the way either (overdue, grace, hidden room,
 * reconcile, the epoch's owner): it assumes what the bench sets up, one bucket, the user present,
 * nothing overdue, no index. What the commands of a typing start cost Redis with the least Lua
 * around them, beside what the script costs: at most what restructuring the Lua could remove.
 * `parts` leaves out a part of the work, to weigh it.
 */
export function typingFlat(parts: TypingParts): string {
  const lines = [
    `local function setting(k) return tonumber(string.sub(ARGV[1], 12 * k - 11, 12 * k), 16) end`,
    `local typingWindow, replayWindow = setting(2), setting(7)`,
    `local t = redis.call('TIME')`,
    `local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`,
    `local tag, room, user = string.sub(KEYS[1], 1, -5), ARGV[3], ARGV[4]`,
    `local key = tag .. ':u:' .. room`,
    parts.keptReply ? `redis.call('GETRANGE', KEYS[4], 0, 1)` : ``,
    `local both = redis.call('HMGET', key, '', user)`,
    `local raw = both[2]`,
    `local flags = string.byte(raw, 7)`,
    `local rest = flags >= 128 and string.sub(raw, 14) or string.sub(raw, 8)`,
    `local typing = flags >= 128 and flags or flags + 128`,
    `redis.call('HSET', key, user, string.sub(raw, 1, 6) .. string.char(typing) .. struct.pack('>I6', now) .. rest)`,
    `local seq, users, conns, typists, gen, shards = struct.unpack('>I6I4I4I4I4B', both[1])`,
    parts.counts ? `redis.call('HINCRBY', KEYS[2], 'typing', 1)` : ``,
    parts.counts ? `redis.call('HGET', KEYS[2], 'ra')` : ``,
    `redis.call('ZADD', KEYS[1], 'LT', now + typingWindow, room)`,
    parts.epoch ? `string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')` : ``,
    parts.epoch
      ? `local e = redis.call('HMGET', KEYS[2], 'epoch', 'node', 'k', 'mk')`
      : `local e = { '', '', 1, '' }`,
    `local n = redis.call('HINCRBY', KEYS[2], 'n', 1)`,
    `redis.call('HSET', key, '', struct.pack('>I6I4I4I4I4B', n, users, conns, typists + 1, gen, shards))`,
    `local event = '{"v":2,"type":"typing-start","room":' .. cjson.encode(room) .. ',"user":' ..`,
    `  cjson.encode(user) .. ',"at":' .. now .. ',"epoch":"' .. (e[1] or '') .. '","seq":' .. n ..`,
    `  ',"prev":' .. seq .. '}'`,
    parts.mac
      ? `local mac = redis.sha1hex((e[4] or '') .. event .. (e[4] or ''))`
      : `local mac = ''`,
    `redis.call('SPUBLISH', tag .. ':room:' .. room, string.sub(event, 1, -2) .. ',"mac":"' .. mac .. '"}')`,
    parts.keptReply
      ? `redis.call('SETRANGE', KEYS[4], 0, struct.pack('>I2', tonumber(ARGV[2])))`
      : ``,
    parts.keptReply
      ? `redis.call('APPEND', KEYS[4], struct.pack('>I2I2BI6I2', tonumber(ARGV[2]), 0, 2, n, tonumber(e[3])))`
      : ``,
    parts.keptReply ? `redis.call('PEXPIRE', KEYS[4], replayWindow)` : ``,
    `return { 2, n, e[1] or '' }`,
  ];
  return lines.filter((line) => line !== "").join("\n") + "\n";
}
