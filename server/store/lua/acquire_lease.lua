-- Take the table's lease if free or expired (a new, larger fencing token) or renew it for
-- its live holder (the same token). KEYS: state, lease. ARGV: node, ttl_ms.
-- The lease key (SET PX) says whether the lease is live, by Redis's clock; the state hash
-- keeps the holder's node and token until another node takes over or the holder releases,
-- so a holder whose lease lapsed unnoticed may still commit until someone else takes it.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'UNKNOWN_TABLE'}
end
local holder = redis.call('HMGET', KEYS[1], 'lease_node', 'lease_token')
local live = redis.call('EXISTS', KEYS[2]) == 1
local token
if live and holder[1] ~= ARGV[1] then
  return {'HELD'}
end
if live then
  token = holder[2]
else
  token = int(redis.call('HINCRBY', KEYS[1], 'fence', 1))
  redis.call('HSET', KEYS[1], 'lease_node', ARGV[1], 'lease_token', token)
end
redis.call('SET', KEYS[2], token, 'PX', ARGV[2])
return {'OK', token, int(now_ms() + tonumber(ARGV[2]))}
