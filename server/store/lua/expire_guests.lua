-- Forget guests whose expiry (by the store's clock) is at or before `now` and that have no
-- stake in play: their balance leaves the ledger as `expired`, and every key of theirs goes.
-- A guest with a stake in play stays in the set (skipped) and is looked at again next time.
-- KEYS: guests (zset), guest_ttl (hash), ledger.
-- ARGV: 1 now ms, 2 offset (guests skipped by earlier calls of this sweep), 3 batch size,
--       4 key prefix (the player keys are <prefix>:{p:<player>}:<kind>).
-- Reply: {removed, looked at, skipped}.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', ARGV[2], ARGV[3])
local removed, skipped = 0, 0
for _, player in ipairs(due) do
  local base = ARGV[4] .. ':{p:' .. player .. '}:'
  if tonumber(redis.call('GET', base .. 'in_play') or '0') > 0 then
    skipped = skipped + 1
  else
    local balance = tonumber(redis.call('GET', base .. 'balance') or '0')
    redis.call('HINCRBY', KEYS[3], 'balances', int(-balance))
    redis.call('HINCRBY', KEYS[3], 'expired', int(balance))
    redis.call('DEL', base .. 'balance', base .. 'in_play', base .. 'movements',
      base .. 'moves', base .. 'move_keys', base .. 'history')
    redis.call('ZREM', KEYS[1], player)
    redis.call('HDEL', KEYS[2], player)
    removed = removed + 1
  end
end
return {removed, #due, skipped}
