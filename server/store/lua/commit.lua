-- The owner's transition, atomically: check fence and version, store the state, credit
-- payouts (recording each player's settlement and game-recall record), append the events.
-- Each player credited gets one entry in its audit log: the credit (0 included), of the kind
-- given (`settle`, or `refund` for a voided round).
-- KEYS: 1 state, 2 stream, 3 rounds, 4 ledger,
--       then (balance, in_play, history, audit) of each paid player.
-- ARGV: 1 id, 2 prefix, 3 keep_events, 4 keep_rounds, 5 fence, 6 expected version,
--       7 state blob, 8 phase, 9 round, 10 closes_at_ms, 11 version, 12 shoe number,
--       13 recall rounds kept per player, 14 n events, 15 the round whose window takes
--       entropy (core.table.entropy_window; 0 for none), then per event the three parts of
--       its msgpack around its seq and ts (see append_event),
--       then (player, credit, -staked, house share, payouts, record) per paid player, as in
--       KEYS; `record` is the msgpack map of the player's history record but its time and
--       balance after; last, the outbox's prefix and what the round owes the wallet (both ''
--       but with an operator's wallet), the audit entries' kind, the audit ms and entries
--       kept, and the channel of settled notices.
-- With an operator's wallet no money moves here: each paid player's `balance` key is the
-- wallet's latest balance (what its settlement shows), and instead of a credit and an audit
-- entry the player's entries of the owed map (msgpack {player: [[key, body], ...]}: its
-- credit, or a voided round's cancels) go to the outbox, due now (server/store/outbox.py).
-- A commit that pays PUBLISHes on that channel, in the same atomic step, a msgpack
-- [table, round, [player...]] of the players it credited: every node hears who has a
-- settlement to deliver. A player already settled in this round is not credited again.
-- Replies: {'OK', event...} or a refusal; {'BROKEN', reason} if a stored value kept it from
-- being written (checked before the first write: nothing was).
if not typed({KEYS[1], 'hash'}) then
  return {'BROKEN', 'the table state key is not a hash'}
end
local cur = redis.call('HMGET', KEYS[1], 'lease_token', 'version')
if not cur[2] then
  return {'UNKNOWN_TABLE'}
end
if cur[1] ~= ARGV[5] then
  return {'FENCE'}
end
if cur[2] ~= ARGV[6] then
  return {'VERSION', cur[2]}
end
local t = table_context(ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4])
t.round = ARGV[9]
local n = tonumber(ARGV[14])
local base = 15 + 3 * n
local players = (#KEYS - 4) / 4
local audit_kind, audit_keep, audit_max = ARGV[#ARGV - 3], ARGV[#ARGV - 2], ARGV[#ARGV - 1]
local outbox = ARGV[#ARGV - 5]
local owed = outbox ~= '' and cmsgpack.unpack(ARGV[#ARGV - 4]) or {}

-- Everything a write below could fail on, checked before the first one (see lib.lua).
local function unwritable()
  if not typed({KEYS[2], 'stream', KEYS[4], 'hash', ARGV[2] .. 'settle:' .. t.round, 'hash',
      ARGV[2] .. 'round:' .. t.round, 'list'}) or not archivable(t) then
    return 'a key of the table, the round or the ledger has the wrong type'
  end
  if outbox ~= '' then
    local keys = {outbox .. 'due', 'zset', outbox .. 'age', 'zset'}
    for _, entries in pairs(owed) do
      for _, e in ipairs(entries) do
        keys[#keys + 1], keys[#keys + 2] = outbox .. 'e:' .. e[1], 'hash'
      end
    end
    if not typed(keys) then
      return "a key of the wallet's outbox has the wrong type"
    end
  end
  local seq = redis.call('HGET', KEYS[1], 'seq')
  if not sum(seq, n) then
    return "the table's seq is not an integer"
  end
  -- Events are appended as <seq>-0: the stream must not hold a later ID already.
  if n > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
    local info = redis.call('XINFO', 'STREAM', KEYS[2])
    for j = 1, #info, 2 do
      if info[j] == 'last-generated-id' then
        local last = tonumber(string.match(info[j + 1], '^(%d+)%-'))
        if not last or last > tonumber(seq or '0') then
          return "the table's stream is ahead of its seq"
        end
      end
    end
  end
  local ledger = redis.call('HMGET', KEYS[4], 'balances', 'in_play', 'house')
  for i = 0, players - 1 do
    local k, a = 5 + 4 * i, base + 6 * i
    if not typed({KEYS[k], 'string', KEYS[k + 1], 'string', KEYS[k + 2], 'list',
        KEYS[k + 3], 'stream'}) then
      return 'a key of player ' .. ARGV[a + 1] .. ' has the wrong type'
    end
    if not sum(redis.call('GET', KEYS[k]), ARGV[a + 2])
        or not sum(redis.call('GET', KEYS[k + 1]), ARGV[a + 3]) then
      return 'a balance or stake of player ' .. ARGV[a + 1] .. ' is not an integer or would pass 64 bits'
    end
    -- each partial sum is a value the ledger will hold
    ledger = {sum(ledger[1], ARGV[a + 2]), sum(ledger[2], ARGV[a + 3]), sum(ledger[3], ARGV[a + 4])}
    if not (ledger[1] and ledger[2] and ledger[3]) then
      return 'the ledger is not an integer or would pass 64 bits'
    end
  end
  return false
end
local broken = unwritable()
if broken then
  return {'BROKEN', broken}
end
-- The events' ts (and the credits' time), read once the checks have passed, just before the
-- first write: when the commit is made, as the memory engine stamps it, not ~0.1 ms of
-- checks earlier.
t.ts = now_ms()

-- Everything but the blob is kept beside it too: bets are checked against these fields, and
-- a table whose blob cannot be read can still be voided and restarted from them.
redis.call('HSET', KEYS[1], 'blob', ARGV[7], 'phase', ARGV[8], 'round', ARGV[9],
  'closes_at_ms', ARGV[10], 'version', ARGV[11], 'shoe', ARGV[12], 'entropy_round', ARGV[15])
local paid = {}
local settle = ARGV[2] .. 'settle:' .. t.round
for i = 0, players - 1 do
  local k, a = 5 + 4 * i, base + 6 * i
  -- A player who has a settlement of this round was credited by an earlier commit: a round
  -- is settled in slices of players, and a new owner redoes the slices of a round its
  -- predecessor left half settled. Skipped, so every bet is credited exactly once.
  if redis.call('HEXISTS', settle, ARGV[a + 1]) == 0 then
    paid[#paid + 1] = ARGV[a + 1]
    local balance
    if outbox ~= '' then
      balance = tonumber(redis.call('GET', KEYS[k]) or '0')
      for _, e in ipairs(owed[ARGV[a + 1]] or {}) do
        if redis.call('EXISTS', outbox .. 'e:' .. e[1]) == 0 then -- owed once
          redis.call('HSET', outbox .. 'e:' .. e[1], 'body', e[2], 'state', 'queued',
            'created', int(t.ts), 'attempts', 0)
          redis.call('ZADD', outbox .. 'due', int(t.ts), e[1])
          redis.call('ZADD', outbox .. 'age', int(t.ts), e[1])
        end
      end
    else
      balance = redis.call('INCRBY', KEYS[k], ARGV[a + 2])
      redis.call('HINCRBY', KEYS[4], 'balances', ARGV[a + 2])
      redis.call('HINCRBY', KEYS[4], 'in_play', ARGV[a + 3])
      redis.call('HINCRBY', KEYS[4], 'house', ARGV[a + 4])
      if redis.call('INCRBY', KEYS[k + 1], ARGV[a + 3]) <= 0 then
        redis.call('DEL', KEYS[k + 1]) -- nothing in play: no key left behind
      end
    end
    archive_round(t)
    -- a two-element msgpack array: [payouts, balance]
    redis.call('HSET', settle, ARGV[a + 1],
      string.char(0x92) .. ARGV[a + 5] .. cmsgpack.pack(balance))
    -- a three-element msgpack array: [time, balance after, record], newest first
    redis.call('LPUSH', KEYS[k + 2],
      string.char(0x93) .. cmsgpack.pack(t.ts) .. cmsgpack.pack(balance) .. ARGV[a + 6])
    redis.call('LTRIM', KEYS[k + 2], 0, tonumber(ARGV[13]) - 1)
    if outbox == '' then -- a wallet's money moves in its own books
      audit(KEYS[k + 3], audit_entry(audit_kind, t.id, t.round, false, tonumber(ARGV[a + 2]),
        balance, t.ts), t.ts, audit_keep, audit_max)
    end
  end
end
local out = {'OK'}
for i = 1, n do
  local at = 13 + 3 * i
  out[#out + 1] = append_event(t, ARGV[at], ARGV[at + 1], ARGV[at + 2])
end
if #paid > 0 then
  redis.call('PUBLISH', ARGV[#ARGV], cmsgpack.pack({t.id, tonumber(t.round), paid}))
end
return out
