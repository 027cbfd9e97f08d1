-- Release the lease if node and token are the holder's. KEYS: state, lease. ARGV: node, token.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'UNKNOWN_TABLE'}
end
local holder = redis.call('HMGET', KEYS[1], 'lease_node', 'lease_token')
if holder[1] == ARGV[1] and holder[2] == ARGV[2] then
  redis.call('HDEL', KEYS[1], 'lease_node', 'lease_token')
  redis.call('DEL', KEYS[2])
end
return {'OK'}
