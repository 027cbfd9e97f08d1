-- Create a player with an initial balance if new; a guest's sighting; return the balance.
-- KEYS: balance, ledger, guests (zset: player -> expiry ms), guest_ttl (hash: player -> ttl).
-- ARGV: initial balance, guest ttl ms ('' for none), player.
-- Only a player created with a ttl is a guest; a later ttl changes a guest's, never makes one.
local ttl = false
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('HINCRBY', KEYS[2], 'issued', ARGV[1])
  redis.call('HINCRBY', KEYS[2], 'balances', ARGV[1])
  if ARGV[2] ~= '' then
    ttl = ARGV[2]
    redis.call('HSET', KEYS[4], ARGV[3], ttl)
  end
else
  ttl = redis.call('HGET', KEYS[4], ARGV[3])
  if ttl and ARGV[2] ~= '' then
    ttl = ARGV[2]
    redis.call('HSET', KEYS[4], ARGV[3], ttl)
  end
end
if ttl then
  redis.call('ZADD', KEYS[3], int(now_ms() + tonumber(ttl)), ARGV[3]) -- seen now
end
return redis.call('GET', KEYS[1])
