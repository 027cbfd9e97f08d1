-- Create a player with an initial balance if new; a guest's sighting; return the balance.
-- A new player's initial balance is an `issue` entry of its audit log (see lib.lua).
-- KEYS: balance, ledger, guests (zset: player -> expiry ms), guest_ttl (hash: player -> ttl),
--       the player's audit log.
-- ARGV: initial balance, guest ttl ms ('' for none), player, audit ms kept, audit entries kept.
-- Only a player created with a ttl is a guest; a later ttl changes a guest's, never makes one.
-- Replies: the balance, or {'LEDGER', counter} (a new player's balance would take that
-- ledger counter past 64 bits) or {'BROKEN', reason}, and nothing written.
if not typed({KEYS[1], 'string', KEYS[2], 'hash', KEYS[3], 'zset', KEYS[4], 'hash',
    KEYS[5], 'stream'}) then
  return {'BROKEN', 'a key of the player, the guests or the ledger has the wrong type'}
end
local ttl = redis.call('HGET', KEYS[4], ARGV[3])
if not exact(redis.call('GET', KEYS[1])) or (ttl and not tonumber(ttl)) then
  return {'BROKEN', "the player's balance or guest ttl is not an integer"}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  local ledger = redis.call('HMGET', KEYS[2], 'issued', 'balances')
  if not exact(ledger[1]) or not exact(ledger[2]) then
    return {'BROKEN', 'the ledger is not an integer'}
  end
  if not sum(ledger[1], ARGV[1]) then
    return {'LEDGER', 'issued'}
  end
  if not sum(ledger[2], ARGV[1]) then
    return {'LEDGER', 'balances'}
  end
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('HINCRBY', KEYS[2], 'issued', ARGV[1])
  redis.call('HINCRBY', KEYS[2], 'balances', ARGV[1])
  local ts, issued = now_ms(), tonumber(ARGV[1])
  audit(KEYS[5], audit_entry('issue', false, false, false, issued, issued, ts), ts, ARGV[4],
    ARGV[5])
  ttl = false
  if ARGV[2] ~= '' then
    ttl = ARGV[2]
    redis.call('HSET', KEYS[4], ARGV[3], ttl)
  end
elseif ttl and ARGV[2] ~= '' then
  ttl = ARGV[2]
  redis.call('HSET', KEYS[4], ARGV[3], ttl)
end
if ttl then
  redis.call('ZADD', KEYS[3], int(now_ms() + tonumber(ttl)), ARGV[3]) -- seen now
end
return redis.call('GET', KEYS[1])
