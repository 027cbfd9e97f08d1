-- Create a table unless it exists. KEYS: state, tables.
-- ARGV: id, state blob, rules blob, phase, round, closes_at_ms, version,
--       then (spot, minimum, maximum) for every offered spot, then a new epoch (last).
local epoch = ARGV[#ARGV]
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSETNX', KEYS[1], 'epoch', epoch) -- a table made before histories had epochs
  return 0
end
redis.call('HSET', KEYS[1], 'blob', ARGV[2], 'rules', ARGV[3], 'phase', ARGV[4],
  'round', ARGV[5], 'closes_at_ms', ARGV[6], 'version', ARGV[7], 'seq', 0, 'fence', 0,
  'epoch', epoch)
for i = 8, #ARGV - 1, 3 do
  redis.call('HSET', KEYS[1], 'min:' .. ARGV[i], ARGV[i + 1], 'max:' .. ARGV[i], ARGV[i + 2])
end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
