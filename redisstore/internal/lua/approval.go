package lua

import "github.com/redis/go-redis/v9"

// The approval scripts. An approval is one hash in the bucket of its operation key (the bucket
// of the record of the same tenant and key), under the same hash tag as the bucket's approval
// indexes. Its fields:
//
//	t, k, ns, tool, fp, wf, step, sum
//	st, ep       status and episode
//	ra, dl       requested at and deadline (µs)
//	da, dby, why decided at (absent while pending), decided by, reason
//	ea           end of retention (absent while pending)
//	rq           the worker's request token (oncekeystore.Approval.Token; absent: asked under the
//	             earlier protocol), which a decision must name
//	tok          token of the request that asked the current episode (to recognise its repeat)
//	wt           token of the decision (to recognise its repeat)
//	msg, chg     the message for the model and "1" when the denial requests changes (absent: none)
//	eof, eas     the key of the call an edit replaces, and of the edit a replaced approval's call
//	             runs as (absent: none)
//	gid          the standing grant that approved the episode (absent or '': a person's decision)
//	sig          the decision's signed statement (absent: unsigned, or pending)
//	csig         the partial approvals' signed statements (oncekeystore.Approval.Cosignatures),
//	             each as its length in decimal, ':' and its bytes, oldest first (absent: none)
//
// The approval indexes of a bucket: apall (every approval, score 0, member hex16(requested) ..
// tenant .. NUL .. key, read BYLEX), apt:… (one tenant's, member hex16(requested) .. key) and
// apexp (decided approvals by end of retention, member tenant .. NUL .. key).
const approvalPrelude = `
-- The approval's fields in the order replies carry them (ApprovalFields).
local AF = {'t', 'k', 'ns', 'tool', 'fp', 'wf', 'step', 'sum', 'st', 'ep', 'ra', 'dl', 'da', 'dby', 'why', 'ea', 'rq',
  'msg', 'chg', 'eof', 'eas', 'gid', 'sig', 'csig'}
local AT, AK, ANS, ATOOL, AFP, AWF, ASTEP, ASUM, AST, AEP, ARA, ADL, ADA, ADBY, AWHY, AEA, ARQ = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17
local AMSG, ACHG, AEOF, AEAS, AGID, ASIG, ACSIG = 18, 19, 20, 21, 22, 23, 24
-- aread returns the approval's fields of AF and then extra (an absent field is false).
local function aread(ap, extra) return hfields(ap, AF, extra) end
-- astatus returns the status of the approval v (fields of AF) as it reads at now: a pending one
-- past its deadline is timed out (the reply's reader fills in the rest: oncekeystore.Approval.ReadAsOf).
local function astatus(v, now)
  if v[AST] == 'pending' and now >= tonumber(v[ADL]) then return 'timed_out' end
  return v[AST]
end
-- aout returns {code, now, v[1..#AF]}: the approval as a reply.
local function aout(code, now, v) return outof(code, now, v, #AF) end
`

// RequestApproval: KEYS ap, apall, apt, apexp. ARGV tenant, key, namespace, tool, fingerprint,
// workflow ID, step ID, summary, timeout (µs), request token, the worker's request token ("":
// none), the key of the call an edit replaces ("": none), the grant it supersedes ("": none). Codes: C a new pending episode was asked (or this is the repeat of the request that
// asked the current one: same token, returned as it is, pending or decided since), U the
// approval as it is (pending, decided within retention, or of another fingerprint, namespace or
// tool, which a request never changes). A worker's request also asks anew a pending or approved
// approval of its fingerprint asked without a worker's token or with another summary, and a
// denied, timed-out or replaced approval of another fingerprint, and an approval approved under
// the grant it supersedes.
var RequestApproval = redis.NewScript(prelude + approvalPrelude + `
local ap, all, ten, exp = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local tenant, key = ARGV[1], ARGV[2]
local pk = tenant .. '\0' .. key
local now = clock()
local v = aread(ap, 'tok')
local st, ep = v[AST] and astatus(v, now), 0
if st then
  if v[#AF + 1] == ARGV[10] then return aout('C', now, v) end
  local otherwise = ARGV[11] ~= '' and (st == 'pending' or st == 'approved') and
    ((v[ARQ] or '') == '' or v[ASUM] ~= ARGV[8] or (ARGV[13] ~= '' and st == 'approved' and (v[AGID] or '') == ARGV[13]))
  local refused = ARGV[11] ~= '' and (st == 'denied' or st == 'timed_out' or st == 'replaced')
  local anew = v[ANS] == ARGV[3] and v[ATOOL] == ARGV[4] and
    ((v[AFP] == ARGV[5] and (st == 'timed_out' or (st ~= 'pending' and now >= tonumber(v[AEA])) or otherwise)) or
     (v[AFP] ~= ARGV[5] and refused))
  if not anew then return aout('U', now, v) end
  local h = hex(tonumber(v[ARA]))
  redis.call('ZREM', all, h .. pk)
  redis.call('ZREM', ten, h .. key)
  redis.call('ZREM', exp, pk)
  redis.call('HDEL', ap, 'da', 'ea', 'wt', 'msg', 'chg', 'eof', 'eas', 'sig', 'csig')
  ep = tonumber(v[AEP])
end
v = {tenant, key, ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], 'pending', fmt(ep + 1), fmt(now),
  fmt(now + tonumber(ARGV[9])), false, '', '', false, ARGV[11], false, false, ARGV[12], false, '', false, false}
redis.call('HSET', ap, 't', tenant, 'k', key, 'ns', ARGV[3], 'tool', ARGV[4], 'fp', ARGV[5], 'wf', ARGV[6],
  'step', ARGV[7], 'sum', ARGV[8], 'st', 'pending', 'ep', v[AEP], 'ra', v[ARA], 'dl', v[ADL], 'dby', '', 'why', '',
  'tok', ARGV[10], 'rq', ARGV[11], 'eof', ARGV[12], 'gid', '')
local h = hex(now)
redis.call('ZADD', all, 0, h .. pk)
redis.call('ZADD', ten, 0, h .. key)
return aout('C', now, v)
`)

// DecideApproval: KEYS ap, apexp. ARGV tenant, key, episode, status, decided by, reason,
// retention (µs), write token, the request's token, the timeout's decider and reason, the
// message for the model, "1" when changes are requested ("" not), the edit's key ("": none), the
// decision's signed statement ("": none). Status pending records a partial approval: the signed
// statement is appended to csig, and nothing else changes (an overdue approval: C, nothing
// written). Codes: K
// decided (or the repeat of the decision that was: same write token), N no approval, S the
// approval is at another episode or request, C it is not pending, or it is overdue and the
// decision a person's: the timeout it reads as is written instead (decided at its deadline by
// the timeout's decider); S and C carry the approval as it is.
var DecideApproval = redis.NewScript(prelude + approvalPrelude + `
local ap, exp = KEYS[1], KEYS[2]
local now = clock()
local v = aread(ap, 'wt')
if not v[AST] then return {'N'} end
if v[#AF + 1] == ARGV[8] then return aout('K', now, v) end
if tonumber(v[AEP]) ~= tonumber(ARGV[3]) or (v[ARQ] or '') ~= ARGV[9] then return aout('S', now, v) end
if v[AST] ~= 'pending' then return aout('C', now, v) end
if ARGV[4] == 'pending' then
  if astatus(v, now) ~= 'pending' then return aout('C', now, v) end
  v[ACSIG] = (v[ACSIG] or '') .. #ARGV[15] .. ':' .. ARGV[15]
  redis.call('HSET', ap, 'csig', v[ACSIG], 'wt', ARGV[8])
  return aout('K', now, v)
end
if ARGV[4] ~= 'timed_out' and astatus(v, now) == 'timed_out' then
  v[AST], v[ADA], v[ADBY], v[AWHY], v[AEA] = 'timed_out', v[ADL], ARGV[10], ARGV[11], fmt(now + tonumber(ARGV[7]))
  redis.call('HSET', ap, 'st', v[AST], 'da', v[ADA], 'dby', v[ADBY], 'why', v[AWHY], 'ea', v[AEA])
  redis.call('ZADD', exp, v[AEA], ARGV[1] .. '\0' .. ARGV[2])
  return aout('C', now, v)
end
v[AST], v[ADA], v[ADBY], v[AWHY], v[AEA] = ARGV[4], fmt(now), ARGV[5], ARGV[6], fmt(now + tonumber(ARGV[7]))
v[AMSG], v[ACHG], v[AEAS], v[ASIG] = ARGV[12], ARGV[13], ARGV[14], ARGV[15]
redis.call('HSET', ap, 'st', v[AST], 'da', v[ADA], 'dby', v[ADBY], 'why', v[AWHY], 'ea', v[AEA], 'wt', ARGV[8],
  'msg', ARGV[12], 'chg', ARGV[13], 'eas', ARGV[14], 'sig', ARGV[15])
redis.call('ZADD', exp, v[AEA], ARGV[1] .. '\0' .. ARGV[2])
return aout('K', now, v)
`)

// GetApproval: KEYS ap. Codes: K found, N no approval.
var GetApproval = redis.NewScript(prelude + approvalPrelude + `
local v = redis.call('HMGET', KEYS[1], unpack(AF))
if not v[AST] then return {'N'} end
return aout('K', clock(), v)
`)

// ListApprovals reads one bucket's approval index from a ZRANGE BYLEX bound, as List does for
// records: KEYS index. ARGV approval key base, member kind ('t': hex16 .. key in a tenant's
// index, with the tenant in ARGV[3]), tenant, from, matches wanted, entries to scan at most,
// status, tool, workflow ID filters ("" does not filter). It returns {now, last member scanned,
// "1" when the index holds nothing after it, fields of AF for each matching approval...}.
var ListApprovals = redis.NewScript(prelude + approvalPrelude + listBody("AF", "AST", "ATOOL", "AWF", "astatus(v, now)"))

// PurgeApprovals deletes decided approvals of one bucket past their retention: KEYS apexp,
// apall. ARGV approval key base, tenant index key base, at most this many. An entry whose
// approval is gone, pending or not yet past retention is only taken out of apexp (a decision
// puts it back). It returns {deleted, entries looked at, "1" when none is left}.
var PurgeApprovals = redis.NewScript(prelude + approvalPrelude + `
local exp, all = KEYS[1], KEYS[2]
local now = clock()
local quota = tonumber(ARGV[3])
local done = 0
local looked = sweep(exp, ARGV[1], quota, now, {'st', 'ra', 't', 'k', 'ea'}, function(pk, ap, r)
  if r[1] and r[1] ~= 'pending' and now >= tonumber(r[5]) then
    local h = hex(tonumber(r[2]))
    redis.call('ZREM', all, h .. pk)
    redis.call('ZREM', ARGV[2] .. r[3], h .. r[4])
    redis.call('DEL', ap)
    done = done + 1
  end
  redis.call('ZREM', exp, pk)
end)
local rest = '0'
if looked < quota then rest = '1' end
return {done, looked, rest}
`)

// ForgetApprovals deletes approvals of one tenant in one bucket: KEYS apt, apall, apexp. ARGV
// approval key base, tenant, at most this many. It returns {deleted, "1" when none is left}.
var ForgetApprovals = redis.NewScript(prelude + approvalPrelude + `
local ten, all, exp = KEYS[1], KEYS[2], KEYS[3]
local quota = tonumber(ARGV[3])
local ids = redis.call('ZRANGE', ten, 0, quota - 1)
for _, m in ipairs(ids) do
  local pk = ARGV[2] .. '\0' .. string.sub(m, 17)
  redis.call('DEL', ARGV[1] .. pk)
  redis.call('ZREM', ten, m)
  redis.call('ZREM', all, string.sub(m, 1, 16) .. pk)
  redis.call('ZREM', exp, pk)
end
local rest = '0'
if #ids < quota then rest = '1' end
return {#ids, rest}
`)

// ApprovalFields is the number of approval fields a reply carries after its code and the
// server's now, in the order of AF in the approval prelude.
const ApprovalFields = 24

// ApprovalKeys returns the keys the approval scripts take for (tenant, key): the approval, the
// bucket's apall index, the tenant's apt index in the bucket, and the apexp index.
func (l Layout) ApprovalKeys(tenant, key string) []string {
	b := l.Bucket(tenant, key)
	return []string{b + ":ap:" + tenant + "\x00" + key, b + ":apall", b + ":apt:" + tenant, b + ":apexp"}
}
