-- Place one bet atomically: the same checks, in the same order, as MemoryStore.place_bet.
-- Its cost does not grow with the bets already placed: the limits read the player's running
-- stake on the spot, and the round's totals are running counters. It appends no event: the
-- table's owner publishes the totals (bet_totals), so nobody sees who bet what.
-- KEYS: 1 state, 2 rounds, 3 balance, 4 ledger, 5 the player's in_play, 6 guests, 7 guest_ttl.
-- ARGV: 1 id, 2 prefix, 3 keep_rounds, 4 player, 5 bet_id,
--       6 round ('' if not a whole number), 7 spot ('' if unknown),
--       8 amount ('' unless a positive int).
-- Replies: {'OK', receipt} or a refusal with the values the caller needs to explain it.
local prefix, player, bet_id = ARGV[2], ARGV[4], ARGV[5]
-- The player's length first, so no two (player, bet_id) pairs share a field.
local receipt_field = #player .. ':' .. player .. ':' .. bet_id
local held = redis.call('HGET', prefix .. 'receipt_rounds', receipt_field)
if held then
  local receipt = redis.call('HGET', prefix .. 'receipts:' .. held, receipt_field)
  if receipt then
    return {'OK', receipt} -- the same bet_id again: the first answer, no second debit
  end
end
local st = redis.call('HMGET', KEYS[1], 'phase', 'round', 'closes_at_ms')
if not st[1] then
  return {'UNKNOWN_TABLE'}
end
local ts = now_ms()
if st[1] ~= 'betting' or ts >= tonumber(st[3]) then
  return {'CLOSED'} -- verify_bet_window, judged by Redis's clock
end
if ARGV[6] ~= st[2] then
  return {'ROUND', st[2]}
end
local round, spot, amount = st[2], ARGV[7], tonumber(ARGV[8])
if spot == '' then
  return {'SPOT'}
end
local lim = redis.call('HMGET', KEYS[1], 'min:' .. spot, 'max:' .. spot)
local stakes = prefix .. 'stakes:' .. round
local field = spot .. ':' .. player
local on_spot = tonumber(redis.call('HGET', stakes, field) or '0')
local balance = tonumber(redis.call('GET', KEYS[3]) or '0')
-- verify_bet: amount, spot offered, cumulative minimum and maximum, balance
if not amount or not lim[1] or on_spot + amount < tonumber(lim[1])
    or on_spot + amount > tonumber(lim[2]) or amount > balance then
  return {'MONEY', lim[1] or '', lim[2] or '', int(on_spot), int(balance)}
end
local t = table_context(ARGV[1], prefix, KEYS[1], nil, KEYS[2], nil, ARGV[3])
t.round = round
archive_round(t) -- normally done by round_opened; makes sure this round is forgotten in time
local after = redis.call('DECRBY', KEYS[3], ARGV[8])
redis.call('HINCRBY', KEYS[4], 'balances', int(-amount))
redis.call('HINCRBY', KEYS[4], 'in_play', ARGV[8])
redis.call('INCRBY', KEYS[5], ARGV[8]) -- the player's stake in play: a guest keeps till settled
local guest_ttl = redis.call('HGET', KEYS[7], player)
if guest_ttl then
  redis.call('ZADD', KEYS[6], int(ts + tonumber(guest_ttl)), player) -- a bet is a sighting
end
local record = cmsgpack.pack({bet_id, player, spot, amount})
redis.call('RPUSH', prefix .. 'bets:' .. round, record)
redis.call('RPUSH', prefix .. 'mine:' .. round .. ':' .. player, record) -- for snapshots
redis.call('HINCRBY', stakes, field, ARGV[8])
local totals = prefix .. 'totals:' .. round
-- 'all:<player>' (no spot is called 'all') is the player's stake on every spot this round:
-- when it equals this bet, this is the player's first bet of the round.
if tonumber(redis.call('HINCRBY', stakes, 'all:' .. player, ARGV[8])) == amount then
  redis.call('HINCRBY', totals, 'bettors', 1)
end
redis.call('HINCRBY', totals, spot, ARGV[8])
redis.call('HINCRBY', totals, 'bets', 1)
local receipt = cmsgpack.pack({ARGV[1], tonumber(round), bet_id, spot, amount, after})
redis.call('HSET', prefix .. 'receipts:' .. round, receipt_field, receipt)
redis.call('HSET', prefix .. 'receipt_rounds', receipt_field, round)
return {'OK', receipt}
