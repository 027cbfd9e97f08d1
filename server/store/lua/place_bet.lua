-- Place one bet atomically: the same checks, in the same order, as MemoryStore.place_bet.
-- KEYS: state, stream, rounds, balance, receipts, ledger.
-- ARGV: 1 id, 2 prefix, 3 keep_events, 4 keep_rounds, 5 player, 6 bet_id,
--       7 round ('' if not a whole number), 8 spot ('' if unknown),
--       9 amount ('' unless a positive int), 10 npairs, 11 the bet_placed payload pairs.
-- Replies: {'OK', receipt} or a refusal with the values the caller needs to explain it.
local receipt_field = ARGV[1] .. ':' .. ARGV[6] -- bet_ids are the player's, per table
local receipt = redis.call('HGET', KEYS[5], receipt_field)
if receipt then
  return {'OK', receipt} -- the same bet_id again: the first answer, no second debit
end
local st = redis.call('HMGET', KEYS[1], 'phase', 'round', 'closes_at_ms')
if not st[1] then
  return {'UNKNOWN_TABLE'}
end
local ts = now_ms()
if st[1] ~= 'betting' or ts >= tonumber(st[3]) then
  return {'CLOSED'} -- verify_bet_window, judged by Redis's clock
end
if ARGV[7] ~= st[2] then
  return {'ROUND', st[2]}
end
local player, bet_id, spot, amount = ARGV[5], ARGV[6], ARGV[8], tonumber(ARGV[9])
if spot == '' then
  return {'SPOT'}
end
local lim = redis.call('HMGET', KEYS[1], 'min:' .. spot, 'max:' .. spot)
local stakes = ARGV[2] .. 'stakes:' .. st[2]
local field = spot .. ':' .. player
local on_spot = tonumber(redis.call('HGET', stakes, field) or '0')
local balance = tonumber(redis.call('GET', KEYS[4]) or '0')
-- verify_bet: amount, spot offered, cumulative minimum and maximum, balance
if not amount or not lim[1] or on_spot + amount < tonumber(lim[1])
    or on_spot + amount > tonumber(lim[2]) or amount > balance then
  return {'MONEY', lim[1] or '', lim[2] or '', int(on_spot), int(balance)}
end
local after = redis.call('DECRBY', KEYS[4], ARGV[9])
redis.call('HINCRBY', KEYS[6], 'balances', int(-amount))
redis.call('HINCRBY', KEYS[6], 'in_play', ARGV[9])
redis.call('RPUSH', ARGV[2] .. 'bets:' .. st[2], cmsgpack.pack({bet_id, player, spot, amount}))
redis.call('HINCRBY', stakes, field, ARGV[9])
redis.call('ZADD', ARGV[2] .. 'betrounds', st[2], st[2])
receipt = cmsgpack.pack({ARGV[1], tonumber(st[2]), bet_id, spot, amount, after})
redis.call('HSET', KEYS[5], receipt_field, receipt)
local t = table_context(ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[4])
t.round, t.ts = st[2], ts
append_event(t, tonumber(ARGV[10]), ARGV[11])
return {'OK', receipt}
