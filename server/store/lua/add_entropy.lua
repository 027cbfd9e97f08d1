-- A player's entropy for the shoe being committed (docs/fairness.md), from any node: taken
-- only in that shoe's first betting window by Redis's clock (the state's entropy_round, the
-- round the owner's last commit said takes entropy, still open), one value per player per
-- shoe, at most max values; kept in the shoe's list in the order received, and announced by
-- an entropy_accepted event appended with the next seq, all in one step.
-- KEYS: 1 state, 2 stream, 3 rounds.
-- ARGV: 1 id, 2 prefix, 3 keep_events, 4 keep_rounds, 5 player, 6 value, 7 max values per
--       shoe, 8 the round and 9 the shoe the caller read (and encoded the event for), 10-12
--       the three parts of the event's msgpack around its seq and ts (see append_event).
-- Replies: {'OK', event}, {'CLOSED'}, {'SENT'}, {'FULL'}, {'UNKNOWN_TABLE'}, or
-- {'BROKEN', reason} if a stored value kept it from being written (nothing was).
if not typed({KEYS[1], 'hash'}) then
  return {'BROKEN', 'the table state key is not a hash'}
end
local st = redis.call('HMGET', KEYS[1], 'phase', 'round', 'closes_at_ms', 'shoe', 'entropy_round',
  'seq')
if not st[1] then
  return {'UNKNOWN_TABLE'}
end
local ts = now_ms()
if st[1] ~= 'betting' or st[2] ~= ARGV[8] or st[4] ~= ARGV[9] or st[5] ~= ARGV[8]
    or ts >= (tonumber(st[3]) or 0) then
  return {'CLOSED'}
end
local players = ARGV[2] .. 'entropy:' .. ARGV[9]
local values = ARGV[2] .. 'entropy_order:' .. ARGV[9]
local t = table_context(ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4])
t.round, t.ts = ARGV[8], ts
-- Everything a write below could fail on, checked before the first one (see lib.lua).
if not typed({KEYS[2], 'stream', KEYS[3], 'list', players, 'hash', values, 'list',
    ARGV[2] .. 'round:' .. t.round, 'list'}) or not archivable(t) then
  return {'BROKEN', 'a key of the table or the shoe has the wrong type'}
end
if not sum(st[6], 1) then
  return {'BROKEN', "the table's seq is not an integer"}
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[2])
  for j = 1, #info, 2 do
    if info[j] == 'last-generated-id' then
      local last = tonumber(string.match(info[j + 1], '^(%d+)%-'))
      if not last or last > tonumber(st[6] or '0') then
        return {'BROKEN', "the table's stream is ahead of its seq"}
      end
    end
  end
end
if redis.call('HEXISTS', players, ARGV[5]) == 1 then
  return {'SENT'}
end
if redis.call('HLEN', players) >= tonumber(ARGV[7]) then
  return {'FULL'}
end
-- The shoe before this one sealed long ago: its lists go (they also expire by themselves).
local before = int(tonumber(ARGV[9]) - 1)
redis.call('DEL', ARGV[2] .. 'entropy:' .. before, ARGV[2] .. 'entropy_order:' .. before)
redis.call('HSET', players, ARGV[5], ARGV[6])
redis.call('RPUSH', values, ARGV[6])
redis.call('PEXPIRE', players, 86400000)
redis.call('PEXPIRE', values, 86400000)
return {'OK', append_event(t, ARGV[10], ARGV[11], ARGV[12])}
