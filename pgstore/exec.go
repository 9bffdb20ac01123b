package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncekey/oncekey/oncekeystore"
)

// stmt is one of the store's single-row statements: its text, the name it is prepared under
// on each connection, and the types of its parameters ($1 first).
type stmt struct {
	sql  string
	name string
	oids []uint32
}

// The parameter types of the store's statements.
const (
	text     = pgtype.TextOID
	bigint   = pgtype.Int8OID
	smallint = pgtype.Int2OID
	bytea    = pgtype.ByteaOID
)

// newStmt returns the statement for sql, whose parameters $1, $2, ... have the types oids.
func newStmt(sql string, oids ...uint32) *stmt {
	digest := sha256.Sum256([]byte(sql))
	return &stmt{sql: sql, name: "oncekey_" + hex.EncodeToString(digest[:12]), oids: oids}
}

// arg is one parameter of a statement, held unboxed so that a call does not allocate an
// interface value per parameter: text in s, bigint and smallint in i, bytea in b (nil is NULL).
type arg struct {
	oid uint32
	s   string
	i   int64
	b   []byte
}

func textArg(s string) arg    { return arg{oid: text, s: s} }
func bigintArg(i int64) arg   { return arg{oid: bigint, i: i} }
func smallintArg(i int16) arg { return arg{oid: smallint, i: int64(i)} }
func byteaArg(b []byte) arg   { return arg{oid: bytea, b: b} }

// value returns a as the Go value pgx encodes to the same parameter.
func (a arg) value() any {
	switch a.oid {
	case text:
		return a.s
	case bigint:
		return a.i
	case smallint:
		return int16(a.i)
	}
	return a.b
}

// values returns args as pgx takes them: for pgx.Conn.Query and a pgx.QueryTracer.
func values(args []arg) []any {
	v := make([]any, len(args))
	for i, a := range args {
		v[i] = a.value()
	}
	return v
}

// binaryFormat asks for every parameter or result column in the binary format.
var binaryFormat = []int16{pgtype.BinaryFormatCode}

// queryRecord runs st with args and scans its single row into a record (and extra destinations
// after keyedCols). args[0] is the tenant and args[1] the operation key, as in every keyed
// statement: the record takes them from there. No row is pgx.ErrNoRows.
//
// On a connection in pgx's default mode (QueryExecModeCacheStatement) the statement is prepared
// once per connection under st.name and run with pgconn: the parameters are encoded straight
// into the Bind message and the row decoded with scanPlans, which saves the client about a
// fifth of its CPU per call compared with pgx.Conn.Query (BENCH_DEBUG=1 go run
// ./pgstore/internal/benchcmd prints the client CPU per call). A
// configured pgx.QueryTracer still sees the statement. Behind a connection pooler (pooler.go)
// it is sent without a name, in one round trip, with pgconn the same way (sendUnnamed). In any
// other mode (a pool set up for PgBouncer with the simple protocol, say) the statement goes
// through pgx.Conn.Query.
func (s *Store) queryRecord(ctx context.Context, st *stmt, args []arg, extra ...any) (*oncekeystore.Record, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	how := sendQuery
	switch {
	case s.pooled():
		how = sendUnnamed
	case s.prepare:
		how = sendPrepared
	}
	return s.queryRecordOn(ctx, c.Conn(), how, st, args, extra...)
}

// sendMode is how queryRecordOn sends a statement.
type sendMode int

const (
	sendQuery    sendMode = iota // pgx.Conn.Query, in the connection's mode
	sendPrepared                 // prepared once per connection under its name, run with pgconn
	sendUnnamed                  // parsed, bound and run in one round trip without a name, with pgconn
)

// queryRecordOn is queryRecord on conn (a Transactional call's transaction runs its completion
// on the transaction's connection), sent as how says.
func (s *Store) queryRecordOn(ctx context.Context, conn *pgx.Conn, how sendMode, st *stmt, args []arg, extra ...any) (*oncekeystore.Record, error) {
	var err error
	d := new(recordDest)
	var buf recordDests
	dest := d.bind(&buf, true, extra...)
	switch how {
	case sendQuery:
		err = queryRow(ctx, conn, st.sql, args, dest)
	case sendUnnamed:
		err = execUnnamed(ctx, conn, s.tracer, st, args, dest)
	default:
		err = execPrepared(ctx, conn, s.tracer, st, args, dest)
		if err != nil && retryPrepared(err) {
			// The statement is not what pgx says was prepared on this connection: a migration
			// changed a column's type under it (0A000 "cached plan must not change result
			// type"), or DISCARD ALL / DEALLOCATE ALL ran on the connection behind the store's
			// back (26000 "prepared statement does not exist"). Both errors come before the
			// statement does anything: forget it, prepare it again and run it once more.
			delete(conn.PgConn().CustomData(), st.name)
			if derr := conn.Deallocate(ctx, st.name); derr == nil {
				err = execPrepared(ctx, conn, s.tracer, st, args, dest)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	d.r.Tenant, d.r.OperationKey = args[0].s, args[1].s
	return d.record(), nil
}

// retryPrepared reports whether err says the named prepared statement is stale or gone.
func retryPrepared(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "0A000" || pgErr.Code == "26000")
}

// queryRow runs sql through pgx.Conn.Query and scans the first row into dest.
func queryRow(ctx context.Context, conn *pgx.Conn, sql string, args []arg, dest []any) error {
	rows, err := conn.Query(ctx, sql, values(args)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := scanRow(rows.FieldDescriptions(), rows.RawValues(), conn.TypeMap(), dest, args); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// execPrepared runs st on conn as a prepared statement and scans the first row into dest.
func execPrepared(ctx context.Context, conn *pgx.Conn, tracer pgx.QueryTracer, st *stmt, args []arg, dest []any) error {
	if tracer != nil {
		ctx = tracer.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: st.sql, Args: values(args)})
	}
	tag, found, err := runPrepared(ctx, conn, st, args, dest)
	if tracer != nil {
		tracer.TraceQueryEnd(ctx, conn, pgx.TraceQueryEndData{CommandTag: tag, Err: err})
	}
	if err == nil && !found {
		return pgx.ErrNoRows
	}
	return err
}

// execUnnamed runs st on conn in one round trip (Parse, Bind, Describe, Execute, Sync) without
// a named statement, its parameters typed and encoded as execPrepared's are, and scans the first
// row into dest: what a pooler in transaction mode passes on whole to one server connection.
func execUnnamed(ctx context.Context, conn *pgx.Conn, tracer pgx.QueryTracer, st *stmt, args []arg, dest []any) error {
	if tracer != nil {
		ctx = tracer.TraceQueryStart(ctx, conn, pgx.TraceQueryStartData{SQL: st.sql, Args: values(args)})
	}
	tag, found, err := runUnnamed(ctx, conn, st, args, dest)
	if tracer != nil {
		tracer.TraceQueryEnd(ctx, conn, pgx.TraceQueryEndData{CommandTag: tag, Err: err})
	}
	if err == nil && !found {
		return pgx.ErrNoRows
	}
	return err
}

func runUnnamed(ctx context.Context, conn *pgx.Conn, st *stmt, args []arg, dest []any) (pgconn.CommandTag, bool, error) {
	p, err := encodeParams(st, args)
	if err != nil {
		return pgconn.CommandTag{}, false, err
	}
	rr := conn.PgConn().ExecParams(ctx, st.sql, p.out, st.oids, binaryFormat, binaryFormat)
	p.release()
	return scanFirst(conn, rr, args, dest)
}

// scanFirst reads rr to its end, scanning the first row, if any, into dest.
func scanFirst(conn *pgx.Conn, rr *pgconn.ResultReader, args []arg, dest []any) (pgconn.CommandTag, bool, error) {
	found := false
	var scanErr error
	for rr.NextRow() {
		if !found {
			found = true
			scanErr = scanRow(rr.FieldDescriptions(), rr.Values(), conn.TypeMap(), dest, args)
		}
	}
	tag, err := rr.Close()
	if err == nil {
		err = scanErr
	}
	return tag, found, err
}

// runPrepared prepares st on conn (once per connection, see prepare), runs it
// and scans the first row, if any, into dest.
func runPrepared(ctx context.Context, conn *pgx.Conn, st *stmt, args []arg, dest []any) (pgconn.CommandTag, bool, error) {
	sd, err := prepare(ctx, conn, st)
	if err != nil {
		return pgconn.CommandTag{}, false, err
	}
	p, err := encodeParams(st, args)
	if err != nil {
		return pgconn.CommandTag{}, false, err
	}
	rr := conn.PgConn().ExecStatement(ctx, sd, p.out, binaryFormat, binaryFormat)
	p.release()
	return scanFirst(conn, rr, args, dest)
}

// prepare returns st's description on conn, preparing it on the connection's first use. The
// description is kept in the connection's CustomData, so that a call on a connection that has
// the statement does not go through pgx.Conn.Prepare, which would report a prepare (with
// AlreadyPrepared) to a pgx.PrepareTracer on every call; pgx's own statement cache prepares
// only on a miss too. queryRecord drops the entry when the server no longer has the statement.
func prepare(ctx context.Context, conn *pgx.Conn, st *stmt) (*pgconn.StatementDescription, error) {
	data := conn.PgConn().CustomData()
	if sd, ok := data[st.name].(*pgconn.StatementDescription); ok {
		return sd, nil
	}
	sd, err := conn.Prepare(ctx, st.name, st.sql)
	if err != nil {
		return nil, err
	}
	// The parameters are encoded by hand for the types the server inferred when it prepared the
	// statement; check them once here, not on every call.
	if len(sd.ParamOIDs) != len(st.oids) {
		return nil, fmt.Errorf("pgstore: statement %s has %d parameters, want %d", st.name, len(sd.ParamOIDs), len(st.oids))
	}
	for i, oid := range sd.ParamOIDs {
		if oid != st.oids[i] && !(st.oids[i] == pgtype.TextOID && oid == pgtype.VarcharOID) {
			// varchar takes the same bytes as text in the binary format; anything else would
			// be misread, so refuse rather than send it.
			return nil, fmt.Errorf("pgstore: statement %s parameter $%d has type %d, want %d", st.name, i+1, oid, st.oids[i])
		}
	}
	data[st.name] = sd
	return sd, nil
}

// params is one statement's encoded parameters: out[i] is $i+1, a slice of buf (a bytea
// argument's own bytes, or nil for NULL). They come from a pool: pgconn copies them into its
// Bind message before ExecStatement or ExecParams returns, so the call releases them then, and
// the next statement reuses the two buffers instead of allocating its own.
type params struct {
	buf []byte
	out [][]byte
}

var paramsPool = sync.Pool{New: func() any { return new(params) }}

// maxPooledParams is the largest text buffer kept for reuse, in bytes: a statement with larger
// text arguments (a long failure, say) does not keep its buffer alive in the pool.
const maxPooledParams = 4 << 10

// release returns p to the pool, without the references it held to the call's arguments.
func (p *params) release() {
	clear(p.out)
	p.out = p.out[:0]
	if cap(p.buf) > maxPooledParams {
		p.buf = nil
	}
	p.buf = p.buf[:0]
	paramsPool.Put(p)
}

// encodeParams encodes args, which must have st's parameter types, in the binary format (text
// and bytea as their bytes, integers big-endian) into one buffer. A nil bytea is NULL. Release
// the result once the statement has been sent.
func encodeParams(st *stmt, args []arg) (*params, error) {
	if len(args) != len(st.oids) {
		return nil, fmt.Errorf("pgstore: statement %s takes %d parameters, got %d", st.name, len(st.oids), len(args))
	}
	size := 0
	for i, a := range args {
		if a.oid != st.oids[i] {
			return nil, fmt.Errorf("pgstore: statement %s parameter $%d has type %d, got %d", st.name, i+1, st.oids[i], a.oid)
		}
		switch a.oid {
		case text:
			size += len(a.s)
		case bigint:
			size += 8
		case smallint:
			size += 2
		}
	}
	p := paramsPool.Get().(*params)
	buf := slices.Grow(p.buf[:0], size)
	out := slices.Grow(p.out[:0], len(args))[:len(args)]
	for i, a := range args {
		start := len(buf)
		switch a.oid {
		case text:
			buf = append(buf, a.s...)
		case bigint:
			buf = binary.BigEndian.AppendUint64(buf, uint64(a.i))
		case smallint:
			buf = binary.BigEndian.AppendUint16(buf, uint16(a.i))
		default:
			out[i] = a.b
			continue
		}
		out[i] = buf[start:len(buf):len(buf)]
	}
	p.buf, p.out = buf, out
	return p, nil
}
