-- Forget guests whose expiry (by the store's clock) is at or before `now` and that have no
-- stake in play: their balance leaves the ledger as `expired`, and every key of theirs goes.
-- A guest with a stake in play stays in the set (skipped) and is looked at again next time;
-- so does a guest whose balance or stake is not an integer or whose removal would take the
-- ledger past 64 bits (checked before any write of that guest: nothing of it is written).
-- KEYS: guests (zset), guest_ttl (hash), ledger.
-- ARGV: 1 now ms, 2 offset (guests skipped by earlier calls of this sweep), 3 batch size,
--       4 key prefix (the player keys are <prefix>:{p:<player>}:<kind>).
-- Reply: {removed, looked at, skipped}.
if not typed({KEYS[1], 'zset', KEYS[2], 'hash', KEYS[3], 'hash'}) then
  return redis.error_reply('expire_guests: a key of the guests or the ledger has the wrong type')
end
local ledger = redis.call('HMGET', KEYS[3], 'balances', 'expired')
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', ARGV[2], ARGV[3])
local removed, skipped = 0, 0
for _, player in ipairs(due) do
  local base = ARGV[4] .. ':{p:' .. player .. '}:'
  local values, balance, in_play = {}, nil, nil
  if typed({base .. 'balance', 'string', base .. 'in_play', 'string'}) then
    values = redis.call('MGET', base .. 'balance', base .. 'in_play')
    balance, in_play = exact(values[1]), exact(values[2])
  end
  local after = balance and {sum(ledger[1], negated(balance)), sum(ledger[2], balance)} or {}
  if not (in_play and after[1] and after[2]) or tonumber(values[2] or '0') > 0 then
    skipped = skipped + 1
  else
    ledger = after
    redis.call('HINCRBY', KEYS[3], 'balances', text(negated(balance)))
    redis.call('HINCRBY', KEYS[3], 'expired', text(balance))
    redis.call('DEL', base .. 'balance', base .. 'in_play', base .. 'movements',
      base .. 'moves', base .. 'move_keys', base .. 'history')
    redis.call('ZREM', KEYS[1], player)
    redis.call('HDEL', KEYS[2], player)
    removed = removed + 1
  end
end
return {removed, #due, skipped}
