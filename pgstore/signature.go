package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncekey/oncekey/oncekeystore"
)

var _ oncekeystore.SignatureStore = (*Store)(nil)

// signatureMigration names the migration that adds the signatures' columns.
const signatureMigration = "010_decision_signatures"

// signatureMissing reports whether err is Postgres refusing a statement that names a column of
// signatureMigration the schema lacks.
func signatureMissing(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42703" && strings.Contains(pgErr.Message, "signature")
}

// wrapSignature is wrap for the statements that read or write a resolution's signature: a
// missing column means a schema migrated before signatureMigration.
func (s *Store) wrapSignature(ctx context.Context, op, key string, err error) error {
	if signatureMissing(err) {
		return s.outdated(ctx, op, key, "the column signature is missing (migration "+signatureMigration+" is not applied)", err)
	}
	return s.wrap(ctx, op, key, err)
}

// ResolutionSignature implements oncekeystore.SignatureStore: one SELECT, the signature only
// when it was written at the record's current epoch and the record is no tombstone.
func (s *Store) ResolutionSignature(ctx context.Context, p *oncekeystore.GetParams) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "resolution signature"
	q := strings.NewReplacer("{t}", s.table).Replace(`SELECT CASE WHEN signature_epoch = epoch AND NOT ` + pastRetention + ` THEN signature END
FROM {t} WHERE tenant = $1 AND operation_key = $2`)
	return queryOne(ctx, s, op, p.OperationKey, s.wrapSignature, func(ctx context.Context) ([]byte, error) {
		var sig []byte
		err := s.db().QueryRow(ctx, q, p.Tenant, p.OperationKey).Scan(&sig)
		return sig, err
	}, func() error { return fmt.Errorf("pgstore: %s %s: %w", op, p.OperationKey, oncekeystore.ErrNotFound) })
}
