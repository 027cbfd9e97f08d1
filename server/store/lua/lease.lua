-- The live lease, if any. KEYS: state, lease. Reply: {'OK', node, token, expires_at_ms}.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'UNKNOWN_TABLE'}
end
local ttl = redis.call('PTTL', KEYS[2])
if ttl < 0 then
  return {'NONE'}
end
local holder = redis.call('HMGET', KEYS[1], 'lease_node', 'lease_token')
return {'OK', holder[1], holder[2], int(now_ms() + ttl)}
