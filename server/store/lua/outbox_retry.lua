-- A send of an outbox entry failed: due again `delay` ms from now, or parked (sent no more,
-- reported) once `park_after` ms have passed since it was made. Only by the sender holding
-- its claim: a sender whose claim ended meanwhile changes nothing.
-- KEYS: 1 due, 2 age, 3 parked, 4 the entry.
-- ARGV: 1 key, 2 owner, 3 delay ms, 4 park_after ms.
-- Replies: {'QUEUED'}, {'PARKED'}, {'GONE'} (not this sender's, or gone), or {'BROKEN', reason}.
if not typed({KEYS[1], 'zset', KEYS[2], 'zset', KEYS[3], 'zset', KEYS[4], 'hash'}) then
  return {'BROKEN', "a key of the outbox has the wrong type"}
end
local f = redis.call('HMGET', KEYS[4], 'state', 'owner', 'created', 'attempts')
if f[1] ~= 'queued' or f[2] ~= ARGV[2] then
  return {'GONE'}
end
local now = now_ms()
local created = tonumber(f[3]) or now
redis.call('HSET', KEYS[4], 'attempts', int((tonumber(f[4]) or 0) + 1))
if now - created >= tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[4], 'state', 'parked')
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZADD', KEYS[3], int(created), ARGV[1])
  return {'PARKED'}
end
redis.call('ZADD', KEYS[1], int(now + tonumber(ARGV[3])), ARGV[1])
return {'QUEUED'}
