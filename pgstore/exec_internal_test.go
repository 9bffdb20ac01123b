package pgstore

import (
	"testing"
	"unsafe"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeParams(t *testing.T) {
	st := newStmt("SELECT $1::text, $2::bigint, $3::smallint, $4::bytea", text, bigint, smallint, bytea)

	got, err := encodeParams(st, []arg{textArg("é\\'x"), bigintArg(-2), smallintArg(258), byteaArg(nil)})
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("é\\'x"), {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, {0x01, 0x02}, nil}, got)

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
