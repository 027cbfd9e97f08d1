-- Place a batch of bets on one table, one after the other, each with the same checks, in the
-- same order, as MemoryStore.place_bet. A batch is the bets one node received for this table
-- in one turn of its event loop: one script call instead of one each saves Redis the call's
-- overhead, and reads the table's state, the clock and each spot's limits once. The script
-- is atomic, so every bet of a batch is judged at the same instant.
-- Its cost does not grow with the bets already placed: the limits read the player's running
-- stake on the spot, and the round's totals are running counters. It appends no event: the
-- table's owner publishes the totals (bet_totals), so nobody sees who bet what.
-- KEYS: 1 state, 2 rounds, 3 ledger, 4 guests, 5 guest_ttl; then for bet i (from 0):
--       6 + 2i the player's balance, 7 + 2i the player's in_play.
-- ARGV: 1 id, 2 prefix, 3 keep_rounds; then for bet i, from 4 + 5i: player, bet_id,
--       round ('' if not a whole number), spot ('' if unknown), amount ('' unless a positive int).
-- Replies: one per bet, in order: {'OK', receipt} or a refusal with the values the caller
-- needs to explain it.
local prefix = ARGV[2]
local st = redis.call('HMGET', KEYS[1], 'phase', 'round', 'closes_at_ms')
local ts = now_ms()
local open = st[1] == 'betting' and ts < tonumber(st[3])
local round = st[2] or '' -- none if the table is unknown
local stakes = prefix .. 'stakes:' .. round
local totals = prefix .. 'totals:' .. round
local limits = {} -- spot -> {min, max} as HMGET gave them, read once a batch
local archived = false
-- What every accepted bet adds to the ledger, the round's totals and its list of bets,
-- written at the end of the batch (nothing in the batch reads them), or before a sum would
-- reach 2^53, past which Lua's doubles are no longer exact.
local staked, added, records = 0, {bets = 0, bettors = 0}, {}
local EXACT = 9007199254740992 -- 2^53

local function write_sums()
  if staked > 0 then
    redis.call('HINCRBY', KEYS[3], 'balances', int(-staked))
    redis.call('HINCRBY', KEYS[3], 'in_play', int(staked))
    redis.call('RPUSH', prefix .. 'bets:' .. round, unpack(records)) -- at most BET_BATCH_MAX
    for name, value in pairs(added) do
      if value > 0 then
        redis.call('HINCRBY', totals, name, int(value))
      end
    end
  end
  staked, added, records = 0, {bets = 0, bettors = 0}, {}
end

local function place(balance_key, in_play_key, player, bet_id, round_arg, spot, amount_arg)
  -- The player's length first, so no two (player, bet_id) pairs share a field.
  local receipt_field = #player .. ':' .. player .. ':' .. bet_id
  local held = redis.call('HGET', prefix .. 'receipt_rounds', receipt_field)
  if held then
    local receipt = redis.call('HGET', prefix .. 'receipts:' .. held, receipt_field)
    if receipt then
      return {'OK', receipt} -- the same bet_id again: the first answer, no second debit
    end
  end
  if not st[1] then
    return {'UNKNOWN_TABLE'}
  end
  if not open then
    return {'CLOSED'} -- verify_bet_window, judged by Redis's clock
  end
  if round_arg ~= round then
    return {'ROUND', round}
  end
  if spot == '' then
    return {'SPOT'}
  end
  local amount = tonumber(amount_arg)
  local lim = limits[spot]
  if not lim then
    lim = redis.call('HMGET', KEYS[1], 'min:' .. spot, 'max:' .. spot)
    limits[spot] = lim
  end
  local field = spot .. ':' .. player
  local on_spot = tonumber(redis.call('HGET', stakes, field) or '0')
  local balance = tonumber(redis.call('GET', balance_key) or '0')
  -- verify_bet: amount, spot offered, cumulative minimum and maximum, balance
  if not amount or not lim[1] or on_spot + amount < tonumber(lim[1])
      or on_spot + amount > tonumber(lim[2]) or amount > balance then
    return {'MONEY', lim[1] or '', lim[2] or '', int(on_spot), int(balance)}
  end
  if not archived then -- normally done by round_opened; makes sure this round is forgotten
    local t = table_context(ARGV[1], prefix, KEYS[1], nil, KEYS[2], nil, ARGV[3])
    t.round = round
    archive_round(t)
    archived = true
  end
  if staked + amount >= EXACT then
    write_sums()
  end
  local after = redis.call('DECRBY', balance_key, amount_arg)
  staked = staked + amount
  redis.call('INCRBY', in_play_key, amount_arg) -- the stake in play: a guest keeps till settled
  local guest_ttl = redis.call('HGET', KEYS[5], player)
  if guest_ttl then
    redis.call('ZADD', KEYS[4], int(ts + tonumber(guest_ttl)), player) -- a bet is a sighting
  end
  local record = cmsgpack.pack({bet_id, player, spot, amount})
  records[#records + 1] = record
  redis.call('RPUSH', prefix .. 'mine:' .. round .. ':' .. player, record) -- for snapshots
  redis.call('HINCRBY', stakes, field, amount_arg)
  -- 'all:<player>' (no spot is called 'all') is the player's stake on every spot this round:
  -- when it equals this bet, this is the player's first bet of the round.
  if tonumber(redis.call('HINCRBY', stakes, 'all:' .. player, amount_arg)) == amount then
    added.bettors = added.bettors + 1
  end
  added[spot] = (added[spot] or 0) + amount
  added.bets = added.bets + 1
  local receipt = cmsgpack.pack({ARGV[1], tonumber(round), bet_id, spot, amount, after})
  redis.call('HSET', prefix .. 'receipts:' .. round, receipt_field, receipt)
  redis.call('HSET', prefix .. 'receipt_rounds', receipt_field, round)
  return {'OK', receipt}
end

local replies = {}
-- A failing call (out of memory, a key of the wrong type) ends the script, but Redis keeps
-- what it wrote: the bets already placed are written to the round's list, the ledger and the
-- totals before the error goes back, so each of them is settled like any other (a retry of
-- its bet_id gets its receipt).
local ok, failure = pcall(function()
  for i = 0, (#ARGV - 3) / 5 - 1 do
    local a = 4 + 5 * i
    replies[i + 1] = place(KEYS[6 + 2 * i], KEYS[7 + 2 * i],
      ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4])
  end
end)
write_sums()
if not ok then
  if type(failure) == 'table' then
    return failure -- redis.call's error reply
  end
  return redis.error_reply(tostring(failure))
end
return replies
