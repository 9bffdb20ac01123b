// Package lua holds redisstore's Lua scripts and its key layout, shared by the store and its
// benchmark's floor (which runs the same scripts with bare go-redis calls). It must not import
// the store.
package lua

import (
	"hash/fnv"
	"io"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts. Each state change is one script, run atomically by the server (EVALSHA, with
// EVAL when the server does not have the script cached: redis.Script.Run). Every script reads
// the server's clock with TIME, never the caller's; Redis 7 replicates a script by its effects,
// so a script may read TIME and then write.
//
// Times are whole microseconds since the Unix epoch, kept as decimal strings in the record hash
// (string.format('%d'), exact below 2^53). A record is one hash; its fields:
//
//	t, k        tenant and operation key
//	tool, ver, fp, wf, step, eff
//	st, ep      status and epoch
//	lu          lease end (only while pending)
//	tok         claim token of the claim that last acquired the record
//	wt          token of the last fenced write or resolution (to recognise its repeat)
//	res, fail   result and failure, byte for byte; an absent field is nil, "" is empty
//	ref, rby, note
//	ca, ua, ea, tu  created, updated, end of retention, end of the tombstone window
//
// The indexes of a bucket live under the bucket's hash tag, beside its records, so every script
// touches one hash slot. The update-ordered indexes are sorted sets with every score 0, ordered
// by member (ZRANGE … BYLEX):
//
//	all  hex16(updated) .. tenant .. NUL .. key   every record
//	unk  hex16(updated) .. tenant .. NUL .. key   unknown records (the reconciliation queue)
//	t:…  hex16(updated) .. key                    the records of one tenant
//
// hex16 is 16 lowercase hex digits, so member order is (updated, tenant, key) order: tenants
// hold no NUL, so a tenant sorts before any longer tenant it is a prefix of. The purge indexes
// are scored by time, member tenant .. NUL .. key: exp (end of retention, records not yet
// tombstones) and tomb (end of the tombstone window, every record).
const prelude = `
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%d', n) end
local function hex(n) return string.format('%016x', n) end
-- The record's fields in the order replies carry them (RecordFields).
local F = {'t', 'k', 'tool', 'ver', 'fp', 'wf', 'step', 'eff', 'st', 'ep', 'lu', 'res', 'fail', 'ref', 'ca', 'ua', 'ea', 'tu', 'rby', 'note', 'ns'}
-- Positions in F.
local T, K, TOOL, VER, FP, WF, STEP, EFF, ST, EP, LU, RES, FAIL, REF, CA, UA, EA, TU, RBY, NOTE, NS = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21
-- hfields returns the fields names of the hash h and then extra (an absent field is false).
local function hfields(h, names, extra)
  local g = {unpack(names)}
  g[#g + 1] = extra
  return redis.call('HMGET', h, unpack(g))
end
-- outof returns {code, now, v[1..n]}: n fields as a reply.
local function outof(code, now, v, n)
  local r = {code, fmt(now)}
  for i = 1, n do r[i + 2] = v[i] end
  return r
end
-- sweep reads the members of the time-scored index idx due at now (at most n), and calls
-- fn(pk, h, r) for each: pk the member, h the hash base .. pk, r its fields names (an absent
-- field is false). It returns how many members it read.
local function sweep(idx, base, n, now, names, fn)
  local ids = redis.call('ZRANGEBYSCORE', idx, '-inf', fmt(now), 'LIMIT', 0, n)
  for _, pk in ipairs(ids) do
    local h = base .. pk
    fn(pk, h, redis.call('HMGET', h, unpack(names)))
  end
  return #ids
end
-- read returns the record's fields of F and then extra (an absent field is false).
local function read(rec, extra) return hfields(rec, F, extra) end
-- out returns {code, now, v[1..#F]}: the record as a reply, from fields the script read and
-- changed, so that no script reads the record twice.
local function out(code, now, v) return outof(code, now, v, #F) end
-- reply returns {code, now, fields of F...} read from the record.
local function reply(code, rec, now)
  return out(code, now, redis.call('HMGET', rec, unpack(F)))
end
-- reindex moves a record's entries in the update-ordered indexes from (oua, ost) to (nua, nst);
-- a nil oua adds, a nil nua removes.
local function reindex(all, ten, unk, pk, key, oua, ost, nua, nst)
  if oua then
    local h = hex(oua)
    redis.call('ZREM', all, h .. pk)
    redis.call('ZREM', ten, h .. key)
    if ost == 'unknown' then redis.call('ZREM', unk, h .. pk) end
  end
  if nua then
    local h = hex(nua)
    redis.call('ZADD', all, 0, h .. pk)
    redis.call('ZADD', ten, 0, h .. key)
    if nst == 'unknown' then redis.call('ZADD', unk, 0, h .. pk) end
  end
end
-- setBytes stores v in field when flag is '1', and removes the field (nil) otherwise.
local function setBytes(rec, field, flag, v)
  if flag == '1' then redis.call('HSET', rec, field, v) else redis.call('HDEL', rec, field) end
end
-- unsettled: no outcome is known yet (pending, unknown). Such a record is never purged and never
-- past retention, however old.
local function unsettled(st) return st == 'pending' or st == 'unknown' end
-- settle restarts a settling record's retention and tombstone windows at now, with the lengths
-- its claim gave them (from its created, retention end and tombstone end ca, ea, tu), rescores it
-- in the purge indexes, and returns the new ends.
local function settle(rec, exp, tomb, pk, now, ca, ea, tu)
  ca, ea, tu = tonumber(ca), tonumber(ea), tonumber(tu)
  local e, t = fmt(now + (ea - ca)), fmt(now + (tu - ca))
  redis.call('HSET', rec, 'ea', e, 'tu', t)
  redis.call('ZADD', exp, e, pk)
  redis.call('ZADD', tomb, t, pk)
  return e, t
end
`

// Claim: KEYS rec, all, ten, unk, exp, tomb. ARGV tenant, key, tool, version,
// fingerprint, workflow ID, step ID, effect, lease, retention, tombstone (µs), claim token, namespace.
// Codes: A acquired (new), T took over, S the repeat of the claim that acquired (same token,
// live lease), E past retention, M fingerprint mismatch, O observed (an Effectful record whose
// lease ran out is marked unknown first).
var Claim = redis.NewScript(prelude + `
local rec, all, ten, unk, exp, tomb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local tenant, key = ARGV[1], ARGV[2]
local pk = tenant .. '\0' .. key
local now = clock()
local lease, ret, tw = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local v = read(rec, 'tok')
local st, ep, lu, tu, ea, ua = v[ST], tonumber(v[EP]), tonumber(v[LU]), tonumber(v[TU]), tonumber(v[EA]), tonumber(v[UA])
if st and (now < tu or unsettled(st)) then
  if st == 'expired' or (now >= ea and not unsettled(st)) then return out('E', now, v) end
  if v[FP] ~= ARGV[5] then return out('M', now, v) end
  local over = st == 'pending' and now >= lu
  if st == 'pending' and not over and v[#F + 1] == ARGV[12] then return out('S', now, v) end
  if st == 'released' or (over and v[EFF] == '2') then
    v[ST], v[EP], v[EFF], v[LU], v[UA], v[REF], v[RBY], v[NOTE], v[RES], v[FAIL] =
      'pending', fmt(ep + 1), ARGV[8], fmt(now + lease), fmt(now), '', '', '', false, false
    redis.call('HSET', rec, 'st', v[ST], 'ep', v[EP], 'eff', v[EFF], 'lu', v[LU], 'tok', ARGV[12], 'ua', v[UA],
      'ref', '', 'rby', '', 'note', '')
    redis.call('HDEL', rec, 'res', 'fail')
    reindex(all, ten, unk, pk, key, ua, st, now, 'pending')
    return out('T', now, v)
  end
  if over then
    -- Effectful and its owner is gone: the effect may have landed. The epoch stays.
    v[ST], v[UA], v[LU] = 'unknown', fmt(now), false
    redis.call('HSET', rec, 'st', 'unknown', 'ua', v[UA])
    redis.call('HDEL', rec, 'lu')
    reindex(all, ten, unk, pk, key, ua, st, now, 'unknown')
  end
  return out('O', now, v)
end
-- No record, or its tombstone window is over (the key is free again; the epoch keeps counting).
local code, epoch = 'A', 1
if st then
  code, epoch = 'T', ep + 1
  reindex(all, ten, unk, pk, key, ua, st, nil, nil)
  redis.call('DEL', rec)
end
local e = now + ret
v = {tenant, key, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], 'pending', fmt(epoch), fmt(now + lease),
  false, false, '', fmt(now), fmt(now), fmt(e), fmt(e + tw), '', '', ARGV[13]}
redis.call('HSET', rec, 't', tenant, 'k', key, 'tool', ARGV[3], 'ver', ARGV[4], 'fp', ARGV[5], 'wf', ARGV[6],
  'step', ARGV[7], 'eff', ARGV[8], 'st', 'pending', 'ep', v[EP], 'lu', v[LU], 'tok', ARGV[12],
  'ca', v[CA], 'ua', v[UA], 'ea', v[EA], 'tu', v[TU], 'ref', '', 'rby', '', 'note', '', 'ns', ARGV[13])
redis.call('ZADD', exp, v[EA], pk)
redis.call('ZADD', tomb, v[TU], pk)
reindex(all, ten, unk, pk, key, nil, nil, now, 'pending')
return out(code, now, v)
`)

// Fenced: KEYS rec, all, ten, unk, exp, tomb. ARGV tenant, key, epoch, write token, op, then per op:
// renew: lease (µs); complete: status, effect reference, result flag, result, failure flag,
// failure; release: none; unknown: failure flag, failure; handoff: lease (µs), failure flag,
// failure (the pending record keeps its status). Codes: K written (or the repeat of
// the write that was: same write token), N no record, L not pending at that epoch. A write that
// settles the record (complete, release) restarts its retention and tombstone windows.
var Fenced = redis.NewScript(prelude + `
local rec, all, ten, unk, exp, tomb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now = clock()
local v = read(rec, 'wt')
if not v[ST] then return {'N'} end
if v[#F + 1] == ARGV[4] then return out('K', now, v) end
if v[ST] ~= 'pending' or tonumber(v[EP]) ~= tonumber(ARGV[3]) then return {'L'} end
local op, ua = ARGV[5], tonumber(v[UA])
-- bytes returns the value of a result or failure argument pair: flag '1' is the bytes, else nil.
local function bytes(flag, b) if flag == '1' then return b end return false end
if op == 'renew' then
  v[LU] = fmt(now + tonumber(ARGV[6]))
  redis.call('HSET', rec, 'lu', v[LU])
elseif op == 'complete' then
  v[ST], v[REF], v[RES], v[FAIL] = ARGV[6], ARGV[7], bytes(ARGV[8], ARGV[9]), bytes(ARGV[10], ARGV[11])
  redis.call('HSET', rec, 'ref', ARGV[7])
  setBytes(rec, 'res', ARGV[8], ARGV[9])
  setBytes(rec, 'fail', ARGV[10], ARGV[11])
elseif op == 'handoff' then
  v[LU], v[FAIL] = fmt(now + tonumber(ARGV[6])), bytes(ARGV[7], ARGV[8])
  redis.call('HSET', rec, 'lu', v[LU])
  setBytes(rec, 'fail', ARGV[7], ARGV[8])
elseif op == 'release' then
  v[ST] = 'released'
elseif op == 'unknown' then
  v[ST], v[FAIL] = 'unknown', bytes(ARGV[6], ARGV[7])
  setBytes(rec, 'fail', ARGV[6], ARGV[7])
else
  return redis.error_reply('redisstore: unknown fenced op ' .. op)
end
v[UA] = fmt(now)
redis.call('HSET', rec, 'st', v[ST], 'ua', v[UA], 'wt', ARGV[4])
if v[ST] ~= 'pending' then
  v[LU] = false
  redis.call('HDEL', rec, 'lu')
end
if not unsettled(v[ST]) then v[EA], v[TU] = settle(rec, exp, tomb, ARGV[1] .. '\0' .. ARGV[2], now, v[CA], v[EA], v[TU]) end
reindex(all, ten, unk, ARGV[1] .. '\0' .. ARGV[2], ARGV[2], ua, 'pending', now, v[ST])
return out('K', now, v)
`)

// Resolve: KEYS rec, all, ten, unk, exp, tomb. ARGV tenant, key, write token, status, effect
// reference, resolved by, note, result flag, result, failure flag, failure, epoch, signed
// statement ("": unsigned; kept in sig with the epoch it settles in sige). Codes: K
// resolved (or the repeat of the resolution that was), N no record, C {C, status} not
// resolvable, S {S, status, epoch} the record is at another epoch (a stale decision). A
// resolution restarts the record's retention and tombstone windows.
var Resolve = redis.NewScript(prelude + `
local rec, all, ten, unk, exp, tomb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now = clock()
local r = redis.call('HMGET', rec, 'st', 'ea', 'lu', 'ua', 'wt', 'ca', 'tu', 'ep')
local st = r[1]
if not st then return {'N'} end
if r[5] == ARGV[3] then return reply('K', rec, now) end
if st == 'expired' or (now >= tonumber(r[2]) and not unsettled(st)) then return {'C', 'expired'} end
if tonumber(r[8]) ~= tonumber(ARGV[12]) then return {'S', st, r[8]} end
if not (st == 'unknown' or (st == 'pending' and now >= tonumber(r[3]))) then return {'C', st} end
redis.call('HSET', rec, 'st', ARGV[4], 'ref', ARGV[5], 'rby', ARGV[6], 'note', ARGV[7], 'ua', fmt(now), 'wt', ARGV[3])
setBytes(rec, 'res', ARGV[8], ARGV[9])
setBytes(rec, 'fail', ARGV[10], ARGV[11])
redis.call('HDEL', rec, 'lu')
if ARGV[13] ~= '' then redis.call('HSET', rec, 'sig', ARGV[13], 'sige', r[8]) else redis.call('HDEL', rec, 'sig', 'sige') end
reindex(all, ten, unk, ARGV[1] .. '\0' .. ARGV[2], ARGV[2], tonumber(r[4]), st, now, ARGV[4])
settle(rec, exp, tomb, ARGV[1] .. '\0' .. ARGV[2], now, r[6], r[2], r[7])
return reply('K', rec, now)
`)

// ResolutionSignature: KEYS rec. It returns {N} for no record, else {K, the signed statement of
// the resolution that settled the record at its current epoch, or false}: none for another
// epoch's, or for a tombstone or a record past retention.
var ResolutionSignature = redis.NewScript(prelude + `
local r = redis.call('HMGET', KEYS[1], 'st', 'ea', 'ep', 'sig', 'sige')
if not r[1] then return {'N'} end
if r[1] == 'expired' or (clock() >= tonumber(r[2]) and not unsettled(r[1])) or r[5] ~= r[3] then return {'K'} end
return {'K', r[4]}
`)

// Get: KEYS rec. Codes: K found, N no record.
var Get = redis.NewScript(prelude + `
if redis.call('EXISTS', KEYS[1]) == 0 then return {'N'} end
return reply('K', KEYS[1], clock())
`)

// List reads one bucket's index from a ZRANGE BYLEX bound: KEYS index. ARGV record key
// base, member kind ('t': hex16 .. key in a tenant's index, with the tenant in ARGV[3]; else
// hex16 .. tenant .. NUL .. key), tenant, from (a BYLEX bound), matches wanted, entries to scan
// at most, status, tool, workflow ID filters ("" does not filter). It returns {now, last
// member scanned ("" for none), "1" when the index holds nothing after it, fields of F for each
// matching record...}. Each call reads at most the entries it may scan.
var List = redis.NewScript(prelude + listBody("F", "9", "3", "6", "v[9]"))

// listBody is the body of List and ListApprovals, which differ only in the hash fields they
// read: fields names the Lua table of field names, status, tool and wf the positions in it of
// the fields the filters compare, statusOf the Lua expression of the status the status filter
// compares (for an approval, as it reads at now).
func listBody(fields, status, tool, wf, statusOf string) string {
	return strings.NewReplacer("FIELDS", fields, "STATUSOF", statusOf, "STATUS", status, "TOOL", tool, "WF", wf).Replace(listTemplate)
}

const listTemplate = `
local now = clock()
local scan, want = tonumber(ARGV[6]), tonumber(ARGV[5])
local ids = redis.call('ZRANGE', KEYS[1], ARGV[4], '+', 'BYLEX', 'LIMIT', 0, scan)
local out = {fmt(now), '', '0'}
if #ids < scan then out[3] = '1' end
local n = 0
for i, m in ipairs(ids) do
  out[2] = m
  local pk = string.sub(m, 17)
  if ARGV[2] == 't' then pk = ARGV[3] .. '\0' .. pk end
  local v = redis.call('HMGET', ARGV[1] .. pk, unpack(FIELDS))
  if v[STATUS] and (ARGV[7] == '' or STATUSOF == ARGV[7]) and (ARGV[8] == '' or v[TOOL] == ARGV[8]) and (ARGV[9] == '' or v[WF] == ARGV[9]) then
    for j = 1, #FIELDS do out[#out + 1] = v[j] end
    n = n + 1
    if n == want then
      if i < #ids then out[3] = '0' end
      break
    end
  end
end
return out
`

// Tombstone turns records of one bucket past retention into tombstones: KEYS exp, all,
// unk. ARGV record key base, tenant index key base, at most this many, skipping this many
// candidates first (those an earlier batch of the same purge left), candidates to look at
// beyond the quota. A record is left alone while its tombstone window is over too (the delete
// step takes it) or while it is unsettled (pending or unknown: no outcome is known yet; its
// windows restart when it settles). It returns {tombstoned, skipped, "1" when no candidate is
// left after the ones it looked at, unsettled records skipped, the creation time of the oldest
// of them ("" for none)}.
var Tombstone = redis.NewScript(prelude + `
local exp, all, unk = KEYS[1], KEYS[2], KEYS[3]
local now = clock()
local quota, extra = tonumber(ARGV[3]), tonumber(ARGV[5])
local ids = redis.call('ZRANGEBYSCORE', exp, '-inf', fmt(now), 'LIMIT', tonumber(ARGV[4]), quota + extra)
local done, skipped, looked, unset, oldest = 0, 0, 0, 0, nil
for _, pk in ipairs(ids) do
  if done == quota then break end
  looked = looked + 1
  local rec = ARGV[1] .. pk
  local r = redis.call('HMGET', rec, 'st', 'tu', 'lu', 'ua', 't', 'k', 'ca')
  local st = r[1]
  if not st or st == 'expired' then
    redis.call('ZREM', exp, pk)
  elseif unsettled(st) then
    skipped, unset = skipped + 1, unset + 1
    local ca = tonumber(r[7])
    if not oldest or ca < oldest then oldest = ca end
  elseif now >= tonumber(r[2]) then
    skipped = skipped + 1
  else
    redis.call('HSET', rec, 'st', 'expired', 'ref', '', 'note', '', 'ua', fmt(now))
    redis.call('HDEL', rec, 'res', 'fail', 'lu', 'tok')
    redis.call('ZREM', exp, pk)
    reindex(all, ARGV[2] .. r[5], unk, pk, r[6], tonumber(r[4]), st, now, 'expired')
    done = done + 1
  end
end
local rest = '0'
if looked == #ids and #ids < quota + extra then rest = '1' end
local o = ''
if oldest then o = fmt(oldest) end
return {done, skipped, rest, unset, o}
`)

// Delete deletes records of one bucket past their tombstone window: KEYS tomb, all, unk,
// exp. ARGV record key base, tenant index key base, at most this many. An unsettled record
// (pending, unknown) is not deleted, only taken out of the tomb index (settling puts it back
// with its new window). It returns {deleted, "1" when none is left, unsettled ones taken out}.
var Delete = redis.NewScript(prelude + `
local tomb, all, unk, exp = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local quota = tonumber(ARGV[3])
local kept = 0
local looked = sweep(tomb, ARGV[1], quota, clock(), {'st', 'ua', 't', 'k'}, function(pk, rec, r)
  if unsettled(r[1]) then
    kept = kept + 1
    redis.call('ZREM', tomb, pk)
  else
    if r[1] then reindex(all, ARGV[2] .. r[3], unk, pk, r[4], tonumber(r[2]), r[1], nil, nil) end
    redis.call('DEL', rec)
    redis.call('ZREM', tomb, pk)
    redis.call('ZREM', exp, pk)
  end
end)
local rest = '0'
if looked < quota then rest = '1' end
return {looked - kept, rest, kept}
`)

// Forget deletes records of one tenant in one bucket: KEYS ten, all, unk, exp, tomb. ARGV
// record key base, tenant, at most this many. It returns {deleted, "1" when none is left}.
var Forget = redis.NewScript(prelude + `
local ten, all, unk, exp, tomb = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local quota = tonumber(ARGV[3])
local ids = redis.call('ZRANGE', ten, 0, quota - 1)
for _, m in ipairs(ids) do
  local pk = ARGV[2] .. '\0' .. string.sub(m, 17)
  local member = string.sub(m, 1, 16) .. pk
  redis.call('DEL', ARGV[1] .. pk)
  redis.call('ZREM', ten, m)
  redis.call('ZREM', all, member)
  redis.call('ZREM', unk, member)
  redis.call('ZREM', exp, pk)
  redis.call('ZREM', tomb, pk)
end
local rest = '0'
if #ids < quota then rest = '1' end
return {#ids, rest}
`)

// All is every script, the approval scripts included, for Store.Check (which loads them).
var All = []*redis.Script{Claim, Fenced, Resolve, Get, List, Tombstone, Delete, Forget, Count, Preview,
	RequestApproval, DecideApproval, GetApproval, ListApprovals, PurgeApprovals, ForgetApprovals}

// RecordFields is the number of record fields a reply carries after its code and the server's
// now, in the order of F in the prelude.
const RecordFields = 21

// Layout names the keys of a store: bucket n's key base is prefix + "{b<n>}", and a record
// lives in bucket FNV-1a(tenant, NUL, key) mod the number of buckets.
type Layout struct {
	// Bases are the buckets' key bases.
	Bases []string
}

// NewLayout returns the layout of buckets buckets under prefix.
func NewLayout(prefix string, buckets int) Layout {
	l := Layout{}
	for n := range buckets {
		l.Bases = append(l.Bases, prefix+"{b"+strconv.Itoa(n)+"}")
	}
	return l
}

// Bucket returns the key base of the record (tenant, key).
func (l Layout) Bucket(tenant, key string) string {
	h := fnv.New32a()
	_, _ = io.WriteString(h, tenant)
	_, _ = h.Write([]byte{0})
	_, _ = io.WriteString(h, key)
	return l.Bases[h.Sum32()%uint32(len(l.Bases))]
}

// RecordKeys returns the keys the record scripts take: the record, the bucket's all index, the
// tenant's index in the bucket, the unknown index, and (with purge, for Claim) the retention
// and tombstone indexes.
func (l Layout) RecordKeys(tenant, key string, purge bool) []string {
	b := l.Bucket(tenant, key)
	keys := []string{b + ":r:" + tenant + "\x00" + key, b + ":all", b + ":t:" + tenant, b + ":unk"}
	if purge {
		keys = append(keys, b+":exp", b+":tomb")
	}
	return keys
}
