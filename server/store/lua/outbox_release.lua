-- A debit's hold after the wallet's answer: dropped (the debit was refused: nothing to undo)
-- or queued as a cancel due now (its outcome is unknown). Nothing if it is no hold any more.
-- KEYS: 1 due, 2 age, 3 the entry. ARGV: 1 key, 2 cancel ('1' or '0').
-- Replies: {'OK'}, {'GONE'}, or {'BROKEN', reason} before any write.
if not typed({KEYS[1], 'zset', KEYS[2], 'zset', KEYS[3], 'hash'}) then
  return {'BROKEN', "a key of the outbox has the wrong type"}
end
if redis.call('HGET', KEYS[3], 'state') ~= 'hold' then
  return {'GONE'}
end
if ARGV[2] == '1' then
  local now = int(now_ms())
  redis.call('HSET', KEYS[3], 'state', 'queued', 'created', now)
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  redis.call('ZADD', KEYS[2], now, ARGV[1])
else
  redis.call('DEL', KEYS[3])
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return {'OK'}
