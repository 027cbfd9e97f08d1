-- An operator's credit (amount > 0) or debit (< 0), idempotent per (player, key).
-- KEYS: balance, movements (list, newest first), moves (hash: key -> movement),
--       move_keys (list: keys, oldest first), ledger, the player's audit log.
-- ARGV: 1 player, 2 amount, 3 idempotency key, 4 movements kept, 5 keys kept,
--       6 the money limit (2**53), 7 audit ms kept, 8 audit entries kept.
-- A movement appends an `operator_credit` or `operator_debit` entry to the audit log.
-- Replies: {'OK', movement} (the first one again for a key already used), or
--          {'FUNDS', balance} / {'LIMIT', balance} / {'LEDGER', counter} and nothing moved, or
--          {'BROKEN', reason}: a stored value kept it from being written (nothing was).
if not typed({KEYS[1], 'string', KEYS[2], 'list', KEYS[3], 'hash', KEYS[4], 'list',
    KEYS[5], 'hash', KEYS[6], 'stream'}) then
  return {'BROKEN', 'a key of the player or the ledger has the wrong type'}
end
local first = redis.call('HGET', KEYS[3], ARGV[3])
if first then
  return {'OK', first}
end
local amount = tonumber(ARGV[2])
local balance_text = redis.call('GET', KEYS[1])
if not exact(balance_text) then
  return {'BROKEN', 'the balance is not an integer'}
end
local balance = tonumber(balance_text or '0')
if balance + amount < 0 then
  return {'FUNDS', int(balance)}
end
if balance + amount >= tonumber(ARGV[6]) then
  return {'LIMIT', int(balance)}
end
-- No ledger counter may pass 64 bits (Redis would fail the write midway): checked, in the
-- order the memory engine checks them, before the first write.
local counter = amount > 0 and 'operator_in' or 'operator_out'
local ledger = redis.call('HMGET', KEYS[5], 'balances', counter)
if not exact(ledger[1]) or not exact(ledger[2]) then
  return {'BROKEN', 'the ledger is not an integer'}
end
if not sum(ledger[1], ARGV[2]) then
  return {'LEDGER', 'balances'}
end
if not sum(ledger[2], int(math.abs(amount))) then
  return {'LEDGER', counter}
end
-- A player not seen before starts at 0, not issued anything, and is no guest.
local after = redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('HINCRBY', KEYS[5], 'balances', ARGV[2])
redis.call('HINCRBY', KEYS[5], counter, int(math.abs(amount)))
local ts = now_ms()
local movement = cmsgpack.pack({ARGV[1], amount, ARGV[3], after, ts})
local kind = amount > 0 and 'operator_credit' or 'operator_debit'
audit(KEYS[6], audit_entry(kind, false, false, ARGV[3], amount, after, ts), ts, ARGV[7], ARGV[8])
redis.call('LPUSH', KEYS[2], movement)
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[4]) - 1)
redis.call('HSET', KEYS[3], ARGV[3], movement)
redis.call('RPUSH', KEYS[4], ARGV[3])
while redis.call('LLEN', KEYS[4]) > tonumber(ARGV[5]) do
  redis.call('HDEL', KEYS[3], redis.call('LPOP', KEYS[4]))
end
return {'OK', movement}
