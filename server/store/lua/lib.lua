-- Helpers shared by every script; server/store/redis.py prepends this file to each one.
-- Numbers go back to Redis through int(): Lua 5.1 numbers are doubles, and tostring()
-- would print large ones in exponent form.

local function int(n)
  return string.format('%d', n)
end

-- The store's clock. Since Redis 5 scripts replicate their effects, so reading TIME before
-- a write is allowed (on Redis 3.2-4.0 it needed redis.replicate_commands() first).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The table's context: its keys, its history limits, the round and the ts to stamp.
local function table_context(id, prefix, state, stream, rounds, keep_events, keep_rounds)
  return {
    id = id,
    prefix = prefix,
    state = state,
    stream = stream,
    rounds = rounds,
    keep_events = keep_events,
    keep_rounds = tonumber(keep_rounds),
  }
end

-- Forget everything round r left: its events, settlements, bets (all, and each player's),
-- stakes, totals and receipts, and their entries in the table's receipt index. O(bets of r),
-- once per round. unpack() has a stack limit, hence the slices of 1000.
local function forget_round(prefix, r)
  local receipts = prefix .. 'receipts:' .. r
  local fields = redis.call('HKEYS', receipts)
  for i = 1, #fields, 1000 do
    redis.call('HDEL', prefix .. 'receipt_rounds', unpack(fields, i, math.min(i + 999, #fields)))
  end
  local stakes = prefix .. 'stakes:' .. r
  local mine = {}
  for _, field in ipairs(redis.call('HKEYS', stakes)) do
    if string.sub(field, 1, 4) == 'all:' then -- one per player who bet in round r
      mine[#mine + 1] = prefix .. 'mine:' .. r .. ':' .. string.sub(field, 5)
    end
  end
  for i = 1, #mine, 1000 do
    redis.call('DEL', unpack(mine, i, math.min(i + 999, #mine)))
  end
  redis.call('DEL', prefix .. 'round:' .. r, prefix .. 'settle:' .. r, prefix .. 'bets:' .. r,
    stakes, prefix .. 'totals:' .. r, receipts)
end

-- Make t.round the newest archived round, forgetting the oldest rounds past keep_rounds.
local function archive_round(t)
  if redis.call('LINDEX', t.rounds, -1) == t.round then
    return
  end
  redis.call('RPUSH', t.rounds, t.round)
  while redis.call('LLEN', t.rounds) > t.keep_rounds do
    forget_round(t.prefix, redis.call('LPOP', t.rounds))
  end
end

-- Append one event with the next seq. The caller encoded the event (server/wire/envelope.py)
-- but for the two values assigned here, atomically with the append: this joins its three
-- parts around the msgpack of the seq and of t.ts, and defines no key itself. Stream entry
-- IDs are <seq>-0, so XRANGE by seq is direct; the stream keeps exactly keep_events entries
-- and the round's list keeps every event of the round.
local function append_event(t, before_seq, before_ts, after_ts)
  local seq = redis.call('HINCRBY', t.state, 'seq', 1)
  local ev = before_seq .. cmsgpack.pack(seq) .. before_ts .. cmsgpack.pack(t.ts) .. after_ts
  redis.call('XADD', t.stream, 'MAXLEN', t.keep_events, int(seq) .. '-0', 'e', ev)
  archive_round(t)
  redis.call('RPUSH', t.prefix .. 'round:' .. t.round, ev)
  return ev
end
