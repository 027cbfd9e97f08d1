-- Connected guests were seen: each one's expiry moves to its TTL from now. A player that is
-- no guest, or was expired meanwhile (no TTL left in the hash), is skipped: nothing is created.
-- KEYS: guests (zset: player -> expiry ms), guest_ttl (hash: player -> ttl ms).
-- ARGV: the players.
local now = now_ms()
for _, player in ipairs(ARGV) do
  local ttl = redis.call('HGET', KEYS[2], player)
  if ttl then
    redis.call('ZADD', KEYS[1], int(now + tonumber(ttl)), player)
  end
end
return 0
