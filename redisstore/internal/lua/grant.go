package lua

import "github.com/redis/go-redis/v9"

// The grant scripts. A grant is one hash under the store's grants hash tag (GrantBase):
//
//	id, ns, t, tool, wf, rule, by, why
//	ca, xa       created at, expires at (µs)
//	ra, rby      revoked at (absent while not revoked), revoked by
//	sig          the signed statement of its making (absent: unsigned)
//	rsig         the signed statement of its revocation (absent: not revoked, or unsigned)
//	ret          retention after the grant ends (µs; absent in a grant made before it: 30 days)
//
// and indexes, each a sorted set of grant IDs (GrantIndex names them):
//
//	gall               every grant kept, scored by created at
//	gn:NS, gt:T        the grants of namespace NS, of tenant T, scored by created at
//	gact               the grants not revoked, scored by expires at
//	ga:NS\0T           the grants of that namespace and tenant not revoked, scored by expires at
//	gs:NS\0T\0TOOL     the grants of that scope not revoked, scored by expires at
//	gpurge             every grant, scored by when Purge deletes it (its end plus its retention)
//
// A revoke takes the grant out of gact, ga and gs; an expired grant stays in them, below the range
// of scores a lookup reads (expires at > now), until Purge deletes it. So the worker's lookup
// (ListActive on the scope's gs) reads the active grants of its scope and nothing else.
//
// A revoke also leaves a marker in every bucket (GrantMark: bucket base .. ":grev:" .. id,
// holding the time it was set), written before the grant's own ra: ApproveByGrant, which runs
// in the approval's bucket, refuses under a grant whose marker is there, so an approval decided
// under a grant is decided before its revoke returns, or refused. Forget sets the markers of
// the tenant's grants too, before it deletes them.

// GrantFields are the grant's fields in the order the listing replies carry them.
var GrantFields = []string{"id", "ns", "t", "tool", "wf", "rule", "by", "why", "ca", "xa", "ra", "rby", "sig", "rsig"}

// grantPrelude holds what the grant scripts share: the fields, the index keys, the status of a
// grant at now, and drop, which deletes a grant and takes it out of every index.
const grantPrelude = `
local GF = {'id', 'ns', 't', 'tool', 'wf', 'rule', 'by', 'why', 'ca', 'xa', 'ra', 'rby', 'sig', 'rsig'}
local function gscope(base, ns, t, tool) return base .. ':gs:' .. ns .. '\0' .. t .. '\0' .. tool end
local function gstatus(v, now)
  if v[11] then return 'revoked' end
  if now >= tonumber(v[10]) then return 'expired' end
  return 'active'
end
local function gmatch(v, now, ns, t, tool, st)
  if (ns ~= '' and v[2] ~= ns) or (t ~= '' and v[3] ~= t) or (tool ~= '' and v[4] ~= tool) then return false end
  if st == '' then return true end
  local s = gstatus(v, now)
  if st == 'ended' then return s ~= 'active' end
  return s == st
end
local function drop(base, id)
  local v = redis.call('HMGET', base .. ':g:' .. id, 'ns', 't', 'tool')
  redis.call('DEL', base .. ':g:' .. id)
  redis.call('ZREM', base .. ':gall', id)
  redis.call('ZREM', base .. ':gact', id)
  redis.call('ZREM', base .. ':gpurge', id)
  if v[1] then
    redis.call('ZREM', base .. ':gn:' .. v[1], id)
    redis.call('ZREM', base .. ':gt:' .. v[2], id)
    redis.call('ZREM', gscope(base, v[1], v[2], v[3]), id)
    redis.call('ZREM', base .. ':ga:' .. v[1] .. '\0' .. v[2], id)
  end
end
`

// CreateGrant: KEYS grant, gall, gact, gs of its scope, gn of its namespace, gt of its tenant,
// gpurge, ga of its namespace and tenant. ARGV id, namespace, tenant, tool, workflow ID, rule, created by, reason, duration (µs),
// retention (µs), signed statement ("": unsigned). It returns {now}.
var CreateGrant = redis.NewScript(prelude + `
local now = clock()
local xa = now + tonumber(ARGV[9])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'ns', ARGV[2], 't', ARGV[3], 'tool', ARGV[4], 'wf', ARGV[5], 'rule', ARGV[6],
  'by', ARGV[7], 'why', ARGV[8], 'ca', fmt(now), 'xa', fmt(xa), 'rby', '', 'ret', ARGV[10])
if ARGV[11] ~= '' then redis.call('HSET', KEYS[1], 'sig', ARGV[11]) end
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('ZADD', KEYS[3], xa, ARGV[1])
redis.call('ZADD', KEYS[4], xa, ARGV[1])
redis.call('ZADD', KEYS[5], now, ARGV[1])
redis.call('ZADD', KEYS[6], now, ARGV[1])
redis.call('ZADD', KEYS[7], xa + tonumber(ARGV[10]), ARGV[1])
redis.call('ZADD', KEYS[8], xa, ARGV[1])
return {fmt(now)}
`)

// GetGrants: KEYS gall (not read: it names the grants' slot). ARGV grant key base, then grant IDs. It returns {now, reads, then the
// fields of GrantFields of each grant found}.
var GetGrants = redis.NewScript(prelude + grantPrelude + `
local r = {fmt(clock()), #ARGV - 1}
for i = 2, #ARGV do
  local v = redis.call('HMGET', ARGV[1] .. ARGV[i], unpack(GF))
  if v[1] then
    for j = 1, #GF do r[#r + 1] = v[j] end
  end
end
return r
`)

// ListActive: KEYS an index scored by expires at (gact, the ga of a namespace and tenant, or
// the gs of a scope). ARGV grant key
// base, namespace, tenant, tool ("" any). It reads the grants of the index not expired (a score
// above now) and returns {now, reads (the grants read), then the fields of GrantFields of each
// active one matching}.
var ListActive = redis.NewScript(prelude + grantPrelude + `
local now = clock()
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. fmt(now), '+inf')
local r = {fmt(now), #ids}
for _, id in ipairs(ids) do
  local v = redis.call('HMGET', ARGV[1] .. id, unpack(GF))
  if v[1] and gmatch(v, now, ARGV[2], ARGV[3], ARGV[4], 'active') then
    for j = 1, #GF do r[#r + 1] = v[j] end
  end
end
return r
`)

// ListWalk: KEYS an index scored by created at (gall, gn or gt). ARGV grant key base, namespace,
// tenant, tool, status ("" any; or active, revoked, expired, ended), the cursor's created at
// (µs; "" from the first) and ID, the most grants to return. It walks the index oldest first
// (created at, then ID: the members of one score sort by ID) after the cursor and returns {now,
// reads, then the fields of GrantFields of each grant matching}, stopping at the most.
var ListWalk = redis.NewScript(prelude + grantPrelude + `
local now = clock()
local want = tonumber(ARGV[8])
local from, cat, cid = '-inf', nil, ARGV[7]
if ARGV[6] ~= '' then from, cat = ARGV[6], tonumber(ARGV[6]) end
local r = {fmt(now), 0}
local found, off = 0, 0
while found < want do
  local page = redis.call('ZRANGEBYSCORE', KEYS[1], from, '+inf', 'WITHSCORES', 'LIMIT', off, 256)
  if #page == 0 then break end
  off = off + #page / 2
  for i = 1, #page, 2 do
    local id, score = page[i], tonumber(page[i + 1])
    if not (cat and score == cat and id <= cid) then
      local v = redis.call('HMGET', ARGV[1] .. id, unpack(GF))
      r[2] = r[2] + 1
      if v[1] and gmatch(v, now, ARGV[2], ARGV[3], ARGV[4], ARGV[5]) then
        for j = 1, #GF do r[#r + 1] = v[j] end
        found = found + 1
        if found == want then break end
      end
    end
  end
end
return r
`)

// ReindexGrants: KEYS gall. ARGV grant key base, the first rank, the most grants to look at. It
// puts the grants from that rank of gall made before grants had a retention (no ret: an earlier
// version, which kept no other index) into the indexes, with a retention of 30 days, and returns
// {reindexed, looked at}.
var ReindexGrants = redis.NewScript(prelude + grantPrelude + `
local base = ARGV[1]
local first = tonumber(ARGV[2])
local ids = redis.call('ZRANGE', KEYS[1], first, first + tonumber(ARGV[3]) - 1)
local done = 0
for _, id in ipairs(ids) do
  local h = base .. ':g:' .. id
  local v = redis.call('HMGET', h, 'ns', 't', 'tool', 'ca', 'xa', 'ra', 'ret')
  if v[1] and not v[7] then
    local ret, ca, xa = tonumber('` + defaultRetention + `'), tonumber(v[4]), tonumber(v[5])
    redis.call('ZADD', base .. ':gn:' .. v[1], ca, id)
    redis.call('ZADD', base .. ':gt:' .. v[2], ca, id)
    if v[6] then
      redis.call('ZADD', base .. ':gpurge', tonumber(v[6]) + ret, id)
    else
      redis.call('ZADD', base .. ':gpurge', xa + ret, id)
      redis.call('ZADD', base .. ':gact', xa, id)
      redis.call('ZADD', gscope(base, v[1], v[2], v[3]), xa, id)
      redis.call('ZADD', base .. ':ga:' .. v[1] .. '\0' .. v[2], xa, id)
    end
    redis.call('HSET', h, 'ret', fmt(ret))
    done = done + 1
  end
end
return {done, #ids}
`)

// PurgeGrants: KEYS gpurge. ARGV grant key base, the most grants to delete. It deletes the grants
// due in gpurge (ended longer than their retention ago) and returns {deleted, "1" when none is
// left due}.
var PurgeGrants = redis.NewScript(prelude + grantPrelude + `
local now = clock()
local n = tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(now), 'LIMIT', 0, n)
for _, id in ipairs(ids) do drop(ARGV[1], id) end
local done = '0'
if #ids < n then done = '1' end
return {#ids, done}
`)

// ForgetGrants: KEYS gt of the tenant. ARGV grant key base, the most grants to delete. It
// deletes the tenant's grants, whatever their status, and returns {deleted, "1" when none is
// left}.
var ForgetGrants = redis.NewScript(prelude + grantPrelude + `
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do drop(ARGV[1], id) end
local done = '0'
if redis.call('ZCARD', KEYS[1]) == 0 then done = '1' end
return {#ids, done}
`)

// MarkRevoked: KEYS marker. ARGV time to live (ms). It sets the marker to now unless it is set,
// and returns {now}.
var MarkRevoked = redis.NewScript(prelude + `
local now = clock()
redis.call('SET', KEYS[1], fmt(now), 'NX', 'PX', ARGV[1])
return {fmt(now)}
`)

// RevokeGrant: KEYS grant, gact, gs of its scope, gpurge, ga of its namespace and tenant. ARGV
// revoked by, signed statement of the revocation ("": unsigned). It writes ra, rby and rsig of an active grant (not revoked, not expired), takes it out
// of gact, gs and ga, moves its purge to
// now plus its retention, and returns {code, now}: K revoked now, U unchanged, N no grant.
var RevokeGrant = redis.NewScript(prelude + `
local now = clock()
local v = redis.call('HMGET', KEYS[1], 'id', 'xa', 'ra', 'ret')
if not v[1] then return {'N', fmt(now)} end
if v[3] or now >= tonumber(v[2]) then return {'U', fmt(now)} end
redis.call('HSET', KEYS[1], 'ra', fmt(now), 'rby', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'rsig', ARGV[2]) end
redis.call('ZREM', KEYS[2], v[1])
redis.call('ZREM', KEYS[3], v[1])
redis.call('ZREM', KEYS[5], v[1])
redis.call('ZADD', KEYS[4], now + tonumber(v[4] or '` + defaultRetention + `'), v[1])
return {'K', fmt(now)}
`)

// ApproveByGrant: KEYS ap, apexp, the grant's marker in the approval's bucket. ARGV tenant, key,
// episode, the request's token, grant ID, decided by, reason, retention (µs), the grant's expiry
// (µs), namespace, tenant and tool it covers. Codes: K approved, N no approval, R the grant is
// revoked, X expired, O of another scope, S the approval is at another episode or request, C it
// is not pending (or overdue); all but N carry the approval as it is.
var ApproveByGrant = redis.NewScript(prelude + approvalPrelude + `
local ap, exp, mark = KEYS[1], KEYS[2], KEYS[3]
local now = clock()
local v = aread(ap, nil)
if not v[AST] then return {'N'} end
if redis.call('EXISTS', mark) == 1 then return aout('R', now, v) end
if now >= tonumber(ARGV[9]) then return aout('X', now, v) end
if v[ANS] ~= ARGV[10] or v[AT] ~= ARGV[11] or v[ATOOL] ~= ARGV[12] then return aout('O', now, v) end
if tonumber(v[AEP]) ~= tonumber(ARGV[3]) or (v[ARQ] or '') ~= ARGV[4] then return aout('S', now, v) end
if astatus(v, now) ~= 'pending' then return aout('C', now, v) end
v[AST], v[ADA], v[ADBY], v[AWHY], v[AEA], v[AGID] = 'approved', fmt(now), ARGV[6], ARGV[7], fmt(now + tonumber(ARGV[8])), ARGV[5]
redis.call('HSET', ap, 'st', v[AST], 'da', v[ADA], 'dby', v[ADBY], 'why', v[AWHY], 'ea', v[AEA], 'gid', v[AGID])
redis.call('ZADD', exp, v[AEA], ARGV[1] .. '\0' .. ARGV[2])
return aout('K', now, v)
`)

func init() {
	All = append(All, CreateGrant, GetGrants, ListActive, ListWalk, ReindexGrants, PurgeGrants, ForgetGrants, MarkRevoked, RevokeGrant, ApproveByGrant)
}

// defaultRetention is the retention of a grant made before grants had one: 30 days, in µs.
const defaultRetention = "2592000000000"

// GrantBase returns the key base of the grants of a store with this prefix.
func GrantBase(prefix string) string { return prefix + "{grants}" }

// GrantKey returns the hash of grant id.
func GrantKey(prefix, id string) string { return GrantBase(prefix) + ":g:" + id }

// GrantIndex returns the key of a grant index of a store with this prefix: "gall", "gact" or
// "gpurge" (no names), "gn" (namespace), "gt" (tenant), "ga" (namespace and tenant) or "gs"
// (namespace, tenant and tool).
func GrantIndex(prefix, index string, names ...string) string {
	k := GrantBase(prefix) + ":" + index
	for i, n := range names {
		if i == 0 {
			k += ":" + n
		} else {
			k += "\x00" + n
		}
	}
	return k
}

// GrantMark returns the revoke marker of grant id in the bucket whose key base is base.
func GrantMark(base, id string) string { return base + ":grev:" + id }
