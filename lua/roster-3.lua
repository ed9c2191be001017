--[[
  A room's members as the event stream has announced them, a page at a time, with the epoch and
  the sequence number the page is consistent with: apply events of that epoch whose prev is that
  number, then the later ones in order. Records are returned as stored: the client decodes them
  (see include/record.lua), so Redis spends no time per member beyond copying it. A room of at
  most `limit` members comes whole, in one page; a bigger one in pages: of `limit` members in
  the order of their ids while the room is held compactly (a listpack), else of about `limit`
  (HSCAN). Either way a member present throughout is listed on some page (HSCAN may list one
  twice). Writes nothing, except the new epoch a first call in another Redis process starts.

  KEYS[1..3], ARGV[1..5]: see include/bucket.lua; derives the room's keys.
  ARGV[6] room   ARGV[7] most members per page   ARGV[8] the page's cursor: '' for the first,
  then what the previous page returned ('>' and the last id listed, or HSCAN's cursor)

  Reply: {epoch, seq, member count, the bucket log's last entry id or '' (events of the room
  after the page come after it in the log), Redis's time, the next page's cursor or '' after the
  last, {field, record, field, record, ...}} where the field '' is the room's meta (skip it)
]]
-- @include "events"
local r, limit, cursor = openRoom(ARGV[6]), tonumber(ARGV[7]), ARGV[8]
local m = readMeta(r)
local reply = { (currentEpoch()), 0, m and m[USERS] or 0, '', now, '', {} }
if logLength > 0 then
  local last = rcall('XREVRANGE', logKey, '+', '-', 'COUNT', 1)[1]
  reply[4] = last and last[1] or '0-0'
end
if not m then
  -- An empty room's next event starts a new chain (prev 0) with a number above the counter.
  reply[2] = tonumber(rcall('HGET', seqKey, 'n')) or 0
  return reply
end
reply[2] = m[SEQ]
if cursor == '' and m[USERS] <= limit then
  reply[7] = rcall('HGETALL', r.key)
elseif string.sub(cursor, 1, 1) == '>' or (cursor == '' and rcall('OBJECT', 'ENCODING', r.key) == 'listpack') then
  -- At most 512 members (else it would not be a listpack): sorting their ids is cheap.
  local after, all, ids, records = string.sub(cursor, 2), rcall('HGETALL', r.key), {}, {}
  for i = 1, #all, 2 do
    if all[i] ~= '' and (cursor == '' or all[i] > after) then
      ids[#ids + 1], records[all[i]] = all[i], all[i + 1]
    end
  end
  table.sort(ids)
  for i = 1, math.min(#ids, limit) do
    reply[7][2 * i - 1], reply[7][2 * i] = ids[i], records[ids[i]]
  end
  reply[6] = #ids > limit and '>' .. ids[limit] or ''
else
  local page = rcall('HSCAN', r.key, cursor == '' and '0' or cursor, 'COUNT', limit)
  reply[6], reply[7] = page[1] ~= '0' and page[1] or '', page[2]
end
return reply
