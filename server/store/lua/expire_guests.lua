-- Forget guests whose expiry (by the store's clock) is at or before `now` and that have no
-- stake in play: their balance leaves the ledger as `expired`, and every key of theirs goes.
-- A guest with a stake in play stays in the set (skipped) and is looked at again next time;
-- so does a guest whose balance or stake is not an integer or whose removal would take the
-- ledger past 64 bits (checked before any write of that guest: nothing of it is written).
-- KEYS: guests (zset), guest_ttl (hash), ledger.
-- ARGV: 1 now ms, 2 offset (guests skipped by earlier calls of this sweep), 3 batch size,
--       4 key prefix (the player keys are <prefix>:{p:<player>}:<kind>), 5 audit ms kept,
--       6 audit entries kept.
-- A guest removed gets an `expire` entry in its audit log, which stays (by the store's clock,
-- not `now`, the time judged). A guest whose audit log is not a stream is skipped.
-- Reply: {removed, looked at, skipped}.
if not typed({KEYS[1], 'zset', KEYS[2], 'hash', KEYS[3], 'hash'}) then
  return redis.error_reply('expire_guests: a key of the guests or the ledger has the wrong type')
end
local ledger = redis.call('HMGET', KEYS[3], 'balances', 'expired')
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', ARGV[2], ARGV[3])
local removed, skipped = 0, 0
local ts = now_ms()
for _, player in ipairs(due) do
  local base = ARGV[4] .. ':{p:' .. player .. '}:'
  local values, balance, in_play = {}, nil, nil
  if typed({base .. 'balance', 'string', base .. 'in_play', 'string', base .. 'audit', 'stream'})
      then
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
    audit(base .. 'audit', audit_entry('expire', false, false, false,
      tonumber(text(negated(balance))), 0, ts), ts, ARGV[5], ARGV[6])
    removed = removed + 1
  end
end
return {removed, #due, skipped}
