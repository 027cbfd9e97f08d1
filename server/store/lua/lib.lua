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
-- stakes (each player's), totals, and its bets' receipts (the fields receipt_keys:<r> names in
-- the table's bet_receipts; receipts:<r> and its receipt_rounds entries, the older layout's).
-- O(bets of r), once per round. unpack() has a stack limit, hence the slices of 1000.
local function forget_round(prefix, r)
  local function hdel_all(key, fields)
    for i = 1, #fields, 1000 do
      redis.call('HDEL', key, unpack(fields, i, math.min(i + 999, #fields)))
    end
  end
  local receipt_keys = prefix .. 'receipt_keys:' .. r
  hdel_all(prefix .. 'bet_receipts', redis.call('LRANGE', receipt_keys, 0, -1))
  local receipts = prefix .. 'receipts:' .. r -- the older layout's
  hdel_all(prefix .. 'receipt_rounds', redis.call('HKEYS', receipts))
  local bettors = prefix .. 'bettors:' .. r
  local stakes = prefix .. 'stakes:' .. r -- the older layout's (place_bet.lua)
  local players = redis.call('LRANGE', bettors, 0, -1)
  for _, field in ipairs(redis.call('HKEYS', stakes)) do
    if string.sub(field, 1, 4) == 'all:' then -- one per player who bet before the upgrade
      players[#players + 1] = string.sub(field, 5)
    end
  end
  local doomed = {} -- each player's bets and stakes in round r
  for _, player in ipairs(players) do
    doomed[#doomed + 1] = prefix .. 'mine:' .. r .. ':' .. player
    doomed[#doomed + 1] = prefix .. 'stake:' .. r .. ':' .. player
  end
  for i = 1, #doomed, 1000 do
    redis.call('DEL', unpack(doomed, i, math.min(i + 999, #doomed)))
  end
  redis.call('DEL', prefix .. 'round:' .. r, prefix .. 'settle:' .. r, prefix .. 'bets:' .. r,
    bettors, stakes, prefix .. 'totals:' .. r, receipt_keys, receipts)
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

-- Redis does not undo a script that fails: what it wrote before the failing call stays. So a
-- script that moves money checks, before its first write, everything a write could fail on:
-- each key's type, that each value it adds to is an integer, and that no sum leaves 64 bits.
-- Exact integers in Lua (whose numbers are doubles, exact below 2^53): a value is the pair
-- {high, low} = high * 1e9 + low with low in [0, 1e9), exact for any sum of a few int64s.
local BILLION = 1000000000
local INT64_MAX = {9223372036, 854775807} -- 2^63 - 1
local INT64_MIN = {-9223372037, 145224192} -- -2^63

local function carried(hi, lo)
  local carry = math.floor(lo / BILLION)
  return hi + carry, lo - carry * BILLION
end

local function in_int64(hi, lo)
  if hi == INT64_MAX[1] then
    return lo <= INT64_MAX[2]
  end
  if hi == INT64_MIN[1] then
    return lo >= INT64_MIN[2]
  end
  return hi < INT64_MAX[1] and hi > INT64_MIN[1]
end

-- An exact integer from text as Redis reads one (no sign but '-', no leading zero, 64 bits),
-- false (a missing key or field) read as 0, or a number below 2^53; nil for anything else.
local function exact(value)
  if not value then
    return {0, 0}
  end
  if type(value) == 'table' then
    return value
  end
  if type(value) == 'number' then -- exact below 2^53; parted without going through text
    local hi = math.floor(value / BILLION)
    hi, value = carried(hi, value - hi * BILLION)
    return {hi, value}
  end
  local sign, digits = string.match(value, '^(%-?)([1-9]%d*)$')
  if not digits then
    return value == '0' and {0, 0} or nil
  end
  if #digits > 19 then
    return nil
  end
  local hi = #digits > 9 and tonumber(string.sub(digits, 1, #digits - 9)) or 0
  local lo = tonumber(string.sub(digits, math.max(#digits - 8, 1)))
  if sign == '-' then
    hi, lo = carried(-hi, -lo)
  end
  if not in_int64(hi, lo) then
    return nil
  end
  return {hi, lo}
end

-- The number of text Redis reads as an integer below 10^15 in magnitude (false: 0), else nil:
-- the cheap check for a bet's per-player values, which a bet below 2^53 cannot take past 64
-- bits; anything else goes through exact() and sum().
local function small(value)
  if not value then
    return 0
  end
  if #value < 16 and (value == '0' or string.find(value, '^%-?[1-9]%d*$')) then
    return tonumber(value)
  end
  return nil
end

-- The exact sum of the values (see exact), or nil if one is not an integer or the sum (or a
-- partial sum, in order: each is a value Redis would hold) leaves 64 bits.
local function sum(...)
  local hi, lo = 0, 0
  for i = 1, select('#', ...) do
    local v = exact(select(i, ...))
    if not v then
      return nil
    end
    hi, lo = carried(hi + v[1], lo + v[2])
    if not in_int64(hi, lo) then
      return nil
    end
  end
  return {hi, lo}
end

-- An exact value's text, as INCRBY takes it.
local function text(v)
  local hi, lo, sign = v[1], v[2], ''
  if hi < 0 then
    sign = '-'
    hi, lo = carried(-hi, -lo)
  end
  if hi == 0 then
    return sign .. int(lo)
  end
  return sign .. int(hi) .. string.format('%09d', lo)
end

-- The negation of an exact value.
local function negated(v)
  local hi, lo = carried(-v[1], -v[2])
  return {hi, lo}
end

-- Whether each key is of the type given beside it, or missing: {key, type, key, type, ...}.
local function typed(keys_and_types)
  for i = 1, #keys_and_types, 2 do
    local kind = redis.call('TYPE', keys_and_types[i])['ok']
    if kind ~= 'none' and kind ~= keys_and_types[i + 1] then
      return false
    end
  end
  return true
end

-- Whether archive_round(t) can run: it forgets the oldest rounds, reading hashes of theirs.
local function archivable(t)
  if not typed({t.rounds, 'list', t.prefix .. 'bet_receipts', 'hash',
      t.prefix .. 'receipt_rounds', 'hash'}) then
    return false
  end
  if redis.call('LINDEX', t.rounds, -1) == t.round then
    return true
  end
  local gone = redis.call('LLEN', t.rounds) + 1 - t.keep_rounds -- rounds it will forget
  if gone <= 0 then
    return true
  end
  local old = redis.call('LRANGE', t.rounds, 0, gone - 1)
  for _, r in ipairs(old) do
    if not typed({t.prefix .. 'receipt_keys:' .. r, 'list', t.prefix .. 'receipts:' .. r, 'hash',
        t.prefix .. 'stakes:' .. r, 'hash',
        t.prefix .. 'bettors:' .. r, 'list'}) then
      return false
    end
  end
  return true
end

-- Append one entry to a player's audit log, a stream (see server/store/audit.py): the msgpack
-- array [kind, table, round, ref, amount, balance after, ts], false for what a kind has not.
-- The caller checked, before its first write, that the key is a stream or missing: then
-- nothing here can fail. The log keeps at most max_entries, none older than keep_ms by the
-- store's clock; a log idle that long holds nothing to keep, and expires.
local function audit_entry(kind, table_id, round, ref, amount, balance, ts)
  return cmsgpack.pack({kind, table_id or false, round and tonumber(round) or false, ref or false,
    amount, balance, ts})
end

-- The age limit, once per log a script appended to (place_bet trims before its writes, as a
-- check: see there).
local function audit_trim(key, ts, keep_ms)
  local floor = ts - tonumber(keep_ms)
  if floor > 0 then
    redis.call('XTRIM', key, 'MINID', int(floor))
  end
  redis.call('PEXPIRE', key, keep_ms)
end

local function audit(key, entry, ts, keep_ms, max_entries)
  redis.call('XADD', key, 'MAXLEN', max_entries, '*', 'a', entry)
  audit_trim(key, ts, keep_ms)
end
