-- The owner's transition, atomically: check fence and version, store the state, credit
-- payouts (recording each player's settlement), append the events.
-- KEYS: 1 state, 2 stream, 3 rounds, 4 ledger, 5.. the balance of each paid player.
-- ARGV: 1 id, 2 prefix, 3 keep_events, 4 keep_rounds, 5 fence, 6 expected version,
--       7 state blob, 8 phase, 9 round, 10 closes_at_ms, 11 version, 12 shoe number,
--       13 n events, then (npairs, pairs) per event,
--       then (player, credit, -staked, house share, payouts) per paid player, as in KEYS.
-- Replies: {'OK', event...} or a refusal.
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
-- Everything but the blob is kept beside it too: bets are checked against these fields, and
-- a table whose blob cannot be read can still be voided and restarted from them.
redis.call('HSET', KEYS[1], 'blob', ARGV[7], 'phase', ARGV[8], 'round', ARGV[9],
  'closes_at_ms', ARGV[10], 'version', ARGV[11], 'shoe', ARGV[12])
local t = table_context(ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4])
t.round, t.ts = ARGV[9], now_ms()
local n = tonumber(ARGV[13])
local base = 13 + 2 * n
for i = 5, #KEYS do
  local a = base + (i - 5) * 5
  local balance = redis.call('INCRBY', KEYS[i], ARGV[a + 2])
  redis.call('HINCRBY', KEYS[4], 'balances', ARGV[a + 2])
  redis.call('HINCRBY', KEYS[4], 'in_play', ARGV[a + 3])
  redis.call('HINCRBY', KEYS[4], 'house', ARGV[a + 4])
  archive_round(t)
  -- a two-element msgpack array: [payouts, balance]
  redis.call('HSET', ARGV[2] .. 'settle:' .. t.round, ARGV[a + 1],
    string.char(0x92) .. ARGV[a + 5] .. cmsgpack.pack(balance))
end
local out = {'OK'}
for i = 1, n do
  out[#out + 1] = append_event(t, tonumber(ARGV[12 + 2 * i]), ARGV[13 + 2 * i])
end
return out
