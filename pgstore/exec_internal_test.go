package pgstore

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeParams(t *testing.T) {
	st := newStmt("SELECT $1::text, $2::bigint, $3::smallint, $4::bytea", text, bigint, smallint, bytea)

	for range 2 { // the second time with the first call's buffers, from the pool
		got, err := encodeParams(st, []arg{textArg("é\\'x"), bigintArg(-2), smallintArg(258), byteaArg(nil)})
		require.NoError(t, err)
		assert.Equal(t, [][]byte{[]byte("é\\'x"), {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, {0x01, 0x02}, nil}, got.out)
		got.release()
	}
	// A bytea argument is passed as it is; a short text after a long one gets its own bytes.
	long, err := encodeParams(st, []arg{textArg(strings.Repeat("x", maxPooledParams+1)), bigintArg(1), smallintArg(1), byteaArg([]byte{7})})
	require.NoError(t, err)
	assert.Equal(t, []byte{7}, long.out[3])
	long.release()
	short, err := encodeParams(st, []arg{textArg("y"), bigintArg(1), smallintArg(1), byteaArg(nil)})
	require.NoError(t, err)
	assert.Equal(t, []byte("y"), short.out[0])
	assert.Nil(t, short.out[3])
	short.release()

	_, err = encodeParams(st, []arg{textArg("a"), textArg("2"), smallintArg(1), byteaArg(nil)})
	assert.ErrorContains(t, err, "parameter $2 has type 20, got 25")
	_, err = encodeParams(st, []arg{textArg("a")})
	assert.ErrorContains(t, err, "takes 4 parameters, got 1")
}

func TestScanRowKnownStrings(t *testing.T) {
	fds := []pgconn.FieldDescription{
		{Name: "tool", DataTypeOID: pgtype.TextOID, Format: pgtype.BinaryFormatCode},
		{Name: "fingerprint", DataTypeOID: pgtype.TextOID, Format: pgtype.TextFormatCode},
		{Name: "status", DataTypeOID: pgtype.TextOID, Format: pgtype.BinaryFormatCode},
	}
	sent := []arg{textArg("create_ticket"), textArg("fp-sent")}
	var tool, fp, status string
	// The stored fingerprint differs from the one sent: it must come back as stored.
	err := scanRow(fds, [][]byte{[]byte("create_ticket"), []byte("fp-stored"), []byte("applied")}, pgtype.NewMap(),
		[]any{&tool, &fp, &status}, sent)
	require.NoError(t, err)
	assert.Equal(t, "create_ticket", tool)
	assert.Equal(t, "fp-stored", fp)
	assert.Equal(t, "applied", status)
	assert.Same(t, unsafe.StringData(sent[0].s), unsafe.StringData(tool), "the tool sent is reused, not copied")
}

// TestDecodeBinaryAsPgx checks that scanRow's own decoding of the binary format gives what
// pgx's plans give, value for value and error for error, at the edges of each type.
func TestDecodeBinaryAsPgx(t *testing.T) {
	be16 := func(v int16) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
	be64 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	const maxUs, minUs = int64(^uint64(0) >> 1), -int64(^uint64(0)>>1) - 1 // infinity, -infinity
	cases := []struct {
		oid  uint32
		new  func() any
		vals [][]byte
	}{
		{pgtype.TextOID, func() any { return new(string) }, [][]byte{nil, {}, []byte("é\x00x")}},
		{pgtype.Int2OID, func() any { return new(int16) }, [][]byte{nil, {1}, be16(-32768), be16(32767), be16(0)}},
		{pgtype.Int8OID, func() any { return new(int64) }, [][]byte{nil, {1, 2}, be64(minUs), be64(maxUs), be64(-1)}},
		{pgtype.BoolOID, func() any { return new(bool) }, [][]byte{nil, {}, {0}, {1}, {2}, {1, 1}}},
		{pgtype.ByteaOID, func() any { return new([]byte) }, [][]byte{nil, {}, {0, 1, 2}}},
	}
	stamps := [][]byte{nil, {1, 2, 3}, be64(0), be64(-1), be64(1), be64(-1_000_001), be64(nearY2K), be64(-nearY2K),
		be64(nearY2K + 1), be64(-nearY2K - 1), be64(maxUs), be64(minUs), be64(852_076_800_123_456)}
	cases = append(cases,
		struct {
			oid  uint32
			new  func() any
			vals [][]byte
		}{pgtype.TimestamptzOID, func() any { return new(time.Time) }, stamps},
		struct {
			oid  uint32
			new  func() any
			vals [][]byte
		}{pgtype.TimestamptzOID, func() any { return new(pgtype.Timestamptz) }, stamps})
	for _, c := range cases {
		for _, v := range c.vals {
			fds := []pgconn.FieldDescription{{Name: "c", DataTypeOID: c.oid, Format: pgtype.BinaryFormatCode}}
			ours, theirs := c.new(), c.new()
			err := scanRow(fds, [][]byte{v}, pgtype.NewMap(), []any{ours}, nil)
			perr := planFor(c.oid, pgtype.BinaryFormatCode, theirs).Scan(v, theirs)
			if perr != nil {
				perr = fmt.Errorf("pgstore: column c: %w", perr)
			}
			assert.Equal(t, perr, err, "oid %d value %x", c.oid, v)
			assert.Equal(t, theirs, ours, "oid %d value %x", c.oid, v)
			if b, ok := theirs.(*[]byte); ok {
				assert.Equal(t, *b == nil, *ours.(*[]byte) == nil, "NULL and empty bytea stay apart")
			}
		}
	}
	// A column of another type than the destination expects is pgx's to plan or refuse.
	var s string
	require.Error(t, scanRow([]pgconn.FieldDescription{{Name: "c", DataTypeOID: pgtype.Int4OID, Format: pgtype.BinaryFormatCode}},
		[][]byte{{0, 0, 0, 1}}, pgtype.NewMap(), []any{new(bool)}, nil))
	require.NoError(t, scanRow([]pgconn.FieldDescription{{Name: "c", DataTypeOID: pgtype.VarcharOID, Format: pgtype.BinaryFormatCode}},
		[][]byte{[]byte("v")}, pgtype.NewMap(), []any{&s}, nil))
	assert.Equal(t, "v", s)
}

// BenchmarkScanClaimRow measures scanRow on the row a claim returns (keyed columns, acquired,
// past_retention), binary format, as runPrepared decodes it.
func BenchmarkScanClaimRow(b *testing.B) {
	be64 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	now := be64(849_000_000_000_000)
	cols := map[string]struct {
		oid uint32
		raw []byte
	}{
		"tool": {pgtype.TextOID, []byte("create_ticket")}, "version": {pgtype.TextOID, []byte("v1")},
		"fingerprint": {pgtype.TextOID, []byte("3f8a1c0e9b7d6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa998877")},
		"workflow_id": {pgtype.TextOID, []byte("bench-workflow")}, "step_id": {pgtype.TextOID, []byte("record_issue")},
		"effect": {pgtype.Int2OID, []byte{0, 2}}, "status": {pgtype.TextOID, []byte("pending")}, "epoch": {pgtype.Int8OID, be64(1)},
		"lease_until": {pgtype.TimestamptzOID, now}, "result": {pgtype.ByteaOID, nil}, "failure": {pgtype.ByteaOID, nil},
		"effect_ref": {pgtype.TextOID, []byte{}}, "created_at": {pgtype.TimestamptzOID, now}, "updated_at": {pgtype.TimestamptzOID, now},
		"expires_at": {pgtype.TimestamptzOID, now}, "tombstone_until": {pgtype.TimestamptzOID, now},
		"resolved_by": {pgtype.TextOID, []byte{}}, "note": {pgtype.TextOID, []byte{}}, "namespace": {pgtype.TextOID, []byte("default")},
		"lease_expired": {pgtype.BoolOID, []byte{0}}, "acquired": {pgtype.BoolOID, []byte{1}}, "past_retention": {pgtype.BoolOID, []byte{0}},
	}
	var fds []pgconn.FieldDescription
	var raw [][]byte
	for _, name := range append(recordColNames[2:], "acquired", "past_retention") {
		c := cols[name]
		fds = append(fds, pgconn.FieldDescription{Name: name, DataTypeOID: c.oid, Format: pgtype.BinaryFormatCode})
		raw = append(raw, c.raw)
	}
	args := []arg{textArg("t"), textArg("k"), textArg("create_ticket"), textArg("v1"),
		textArg("3f8a1c0e9b7d6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa998877"), textArg("bench-workflow"),
		textArg("record_issue"), smallintArg(2), bigintArg(1), bigintArg(1), bigintArg(1), bigintArg(7), textArg("default")}
	m := pgtype.NewMap()
	b.ReportAllocs()
	for b.Loop() {
		var acquired, past bool
		d := new(recordDest)
		var buf recordDests
		if err := scanRow(fds, raw, m, d.bind(&buf, true, &acquired, &past), args); err != nil {
			b.Fatal(err)
		}
	}
}
