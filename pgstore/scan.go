package pgstore

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncekey/oncekey/oncekeystore"
)

// Scanning a row with pgx's Rows.Scan plans every column again for every query (a type-map
// lookup and, for most Go targets, a wrapper plan allocated per column). The store's
// statements always return the same column types into the same Go types, so the plans are
// made once here, from pgx's own type map, and reused: each row costs only the decoding.
// A column whose type or format is not among them (a pool configured with the simple
// protocol receives text) is planned by pgx as usual.

// scanPlans holds, per destination Go type, the plans for the one column type the store's
// statements scan into it, in the binary ([0]) and text ([1]) formats. Built once, then only read.
var scanPlans = func() (p struct {
	text, int2, int8, boolean, bytea, timestamptz, nullTimestamptz [2]pgtype.ScanPlan
}) {
	m := pgtype.NewMap()
	for i, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
		p.text[i] = m.PlanScan(pgtype.TextOID, format, new(string))
		p.int2[i] = m.PlanScan(pgtype.Int2OID, format, new(int16))
		p.int8[i] = m.PlanScan(pgtype.Int8OID, format, new(int64))
		p.boolean[i] = m.PlanScan(pgtype.BoolOID, format, new(bool))
		p.bytea[i] = m.PlanScan(pgtype.ByteaOID, format, new([]byte))
		p.timestamptz[i] = m.PlanScan(pgtype.TimestamptzOID, format, new(time.Time))
		p.nullTimestamptz[i] = m.PlanScan(pgtype.TimestamptzOID, format, new(pgtype.Timestamptz))
	}
	return p
}()

// planFor returns the prepared plan for a column of type oid in format scanned into dst, or nil.
func planFor(oid uint32, format int16, dst any) pgtype.ScanPlan {
	var i int
	switch format {
	case pgtype.BinaryFormatCode:
		i = 0
	case pgtype.TextFormatCode:
		i = 1
	default:
		return nil
	}
	var plans *[2]pgtype.ScanPlan
	var want uint32
	switch dst.(type) {
	case *string:
		plans, want = &scanPlans.text, pgtype.TextOID
	case *int16:
		plans, want = &scanPlans.int2, pgtype.Int2OID
	case *int64:
		plans, want = &scanPlans.int8, pgtype.Int8OID
	case *bool:
		plans, want = &scanPlans.boolean, pgtype.BoolOID
	case *[]byte:
		plans, want = &scanPlans.bytea, pgtype.ByteaOID
	case *time.Time:
		plans, want = &scanPlans.timestamptz, pgtype.TimestamptzOID
	case *pgtype.Timestamptz:
		plans, want = &scanPlans.nullTimestamptz, pgtype.TimestamptzOID
	default:
		return nil
	}
	if oid != want {
		return nil
	}
	return plans[i]
}

// scanRow scans one row (raw values described by fds) into dest, one pointer per column, using
// scanPlans where one applies and planning with m otherwise. A text column whose value is one
// of the statement's text args, or a status, takes that string rather than a new copy: a claim
// gets back the tool, version, fingerprint, workflow ID and step ID it sent.
func scanRow(fds []pgconn.FieldDescription, raw [][]byte, m *pgtype.Map, dest []any, args []arg) error {
	if len(fds) != len(dest) || len(raw) != len(dest) {
		return fmt.Errorf("pgstore: statement returned %d columns, want %d", len(fds), len(dest))
	}
	for i, fd := range fds {
		if p, ok := dest[i].(*string); ok && raw[i] != nil && fd.DataTypeOID == pgtype.TextOID {
			if v, ok := knownString(raw[i], args); ok {
				*p = v
				continue
			}
		}
		if fd.Format == pgtype.BinaryFormatCode && decodeBinary(fd.DataTypeOID, raw[i], dest[i]) {
			continue
		}
		plan := planFor(fd.DataTypeOID, fd.Format, dest[i])
		if plan == nil {
			plan = m.PlanScan(fd.DataTypeOID, fd.Format, dest[i])
		}
		if err := plan.Scan(raw[i], dest[i]); err != nil {
			return fmt.Errorf("pgstore: column %s: %w", fd.Name, err)
		}
	}
	return nil
}

// decodeBinary decodes raw, a column of type oid in the binary format, into dst as the plan
// scanPlans holds for it would, and reports whether it did. It does only what cannot fail: a
// NULL where dst takes none, a value of the wrong length or a timestamp far from now (infinity,
// say) is left to the plan, which reports it as pgx does. Decoding here saves the plan's lookup
// and its calls through interfaces on every column of every row.
func decodeBinary(oid uint32, raw []byte, dst any) bool {
	switch p := dst.(type) {
	case *string:
		if oid != pgtype.TextOID || raw == nil {
			return false
		}
		*p = string(raw)
	case *int16:
		if oid != pgtype.Int2OID || len(raw) != 2 {
			return false
		}
		*p = int16(binary.BigEndian.Uint16(raw))
	case *int64:
		if oid != pgtype.Int8OID || len(raw) != 8 {
			return false
		}
		*p = int64(binary.BigEndian.Uint64(raw))
	case *bool:
		if oid != pgtype.BoolOID || len(raw) != 1 {
			return false
		}
		*p = raw[0] == 1
	case *[]byte:
		if oid != pgtype.ByteaOID {
			return false
		}
		if raw == nil {
			*p = nil
		} else {
			*p = make([]byte, len(raw))
			copy(*p, raw)
		}
	case *time.Time:
		t, ok := timestamptz(oid, raw)
		if !ok || raw == nil {
			return false
		}
		*p = t
	case *pgtype.Timestamptz:
		t, ok := timestamptz(oid, raw)
		if !ok {
			return false
		}
		*p = pgtype.Timestamptz{Time: t, Valid: raw != nil}
	default:
		return false
	}
	return true
}

// nearY2K bounds, in microseconds either side of 2000-01-01, the timestamps decodeBinary
// decodes itself: ±5,000 years, well inside what pgx accepts and far from infinity.
const nearY2K = 5000 * 366 * 24 * 3600 * 1_000_000

// timestamptz decodes a binary timestamptz as pgx's default codec does (in the local time
// zone, like time.Unix): false when oid is not timestamptz or raw not a timestamp near Y2K. A
// NULL (raw nil) is the zero time and true.
func timestamptz(oid uint32, raw []byte) (time.Time, bool) {
	if oid != pgtype.TimestamptzOID {
		return time.Time{}, false
	}
	if raw == nil {
		return time.Time{}, true
	}
	if len(raw) != 8 {
		return time.Time{}, false
	}
	us := int64(binary.BigEndian.Uint64(raw))
	if us < -nearY2K || us > nearY2K {
		return time.Time{}, false
	}
	const y2k = 946_684_800 * 1_000_000 // 2000-01-01 in microseconds since the Unix epoch
	return time.Unix(y2k/1_000_000+us/1_000_000, (y2k%1_000_000*1_000)+(us%1_000_000*1_000)), true
}

// statuses are the values of the status column.
var statuses = [...]string{string(oncekeystore.StatusPending), string(oncekeystore.StatusApplied), string(oncekeystore.StatusFailed),
	string(oncekeystore.StatusUnknown), string(oncekeystore.StatusReleased), string(oncekeystore.StatusExpired)}

// knownString returns the text arg or status equal to b, if there is one. Text has the same
// bytes in the binary and text formats.
func knownString(b []byte, args []arg) (string, bool) {
	if len(b) == 0 {
		return "", true
	}
	for _, a := range args {
		if a.oid == text && a.s == string(b) {
			return a.s, true
		}
	}
	for _, s := range statuses {
		if s == string(b) {
			return s, true
		}
	}
	return "", false
}

// recordDest holds a record being scanned and the destinations of its columns.
type recordDest struct {
	r          oncekeystore.Record
	effect     int16
	status     string
	leaseUntil pgtype.Timestamptz
}

// recordDests holds the destinations bind returns: a record's columns and two more. A caller
// keeps it on its stack, so that the destinations are not one more object for the collector
// to allocate and scan per row.
type recordDests [len(recordColNames) + 2]any

// recordColNames names the columns of a record in the order recordDest.bind scans them. The
// last is computed (see leaseExpiredCol).
var recordColNames = [...]string{"tenant", "operation_key", "tool", "version", "fingerprint", "workflow_id",
	"step_id", "effect", "status", "epoch", "lease_until", "result", "failure", "effect_ref", "created_at",
	"updated_at", "expires_at", "tombstone_until", "resolved_by", "note", "namespace", "lease_expired"}

// leaseExpiredCol computes lease_expired on the database clock at the time of the statement.
const leaseExpiredCol = `(status = 'pending' AND lease_until <= now()) AS lease_expired`

var (
	// recordCols is the select list of a whole record (List).
	recordCols = strings.Join(recordColNames[:len(recordColNames)-1], ", ") + ", " + leaseExpiredCol
	// keyedCols is the select list of the statements on one record, which take the tenant as $1
	// and the operation key as $2: the two are not sent back (see queryRecord).
	keyedCols = strings.Join(recordColNames[2:len(recordColNames)-1], ", ") + ", " + leaseExpiredCol
)

// bind returns, in buf, the destinations of recordCols, or of keyedCols if keyed, then extra.
// The result uses buf's array when extra has at most two destinations.
func (d *recordDest) bind(buf *recordDests, keyed bool, extra ...any) []any {
	r := &d.r
	dest := append(buf[:0], &r.Tenant, &r.OperationKey, &r.Tool, &r.Version, &r.Fingerprint, &r.WorkflowID, &r.StepID,
		&d.effect, &d.status, &r.Epoch, &d.leaseUntil, &r.Result, &r.Failure, &r.EffectReference, &r.CreatedAt,
		&r.UpdatedAt, &r.ExpiresAt, &r.TombstoneUntil, &r.ResolvedBy, &r.Note, &r.Namespace, &r.LeaseExpired)
	if keyed {
		dest = dest[2:]
	}
	return append(dest, extra...)
}

func (d *recordDest) record() *oncekeystore.Record {
	d.r.Effect = oncekeystore.Effect(d.effect)
	d.r.Status = oncekeystore.Status(d.status)
	if d.leaseUntil.Valid {
		d.r.LeaseUntil = d.leaseUntil.Time
	}
	return &d.r
}
