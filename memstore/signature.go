package memstore

import (
	"context"
	"time"

	"github.com/oncekey/oncekey/oncekeystore"
)

var _ oncekeystore.SignatureStore = (*Store)(nil)

// resolutionSig is the signed statement of a resolution and the epoch it settled.
type resolutionSig struct {
	epoch int64
	b     []byte
}

// keepSignature records sig as the signed statement of the resolution settling r at its epoch
// (nil: an unsigned one). Called under the lock.
func (s *Store) keepSignature(r *oncekeystore.Record, sig []byte) {
	k := pk{r.Tenant, r.OperationKey}
	if len(sig) == 0 {
		delete(s.sigs, k)
		return
	}
	if s.sigs == nil {
		s.sigs = make(map[pk]resolutionSig)
	}
	s.sigs[k] = resolutionSig{epoch: r.Epoch, b: cloneBytes(sig)}
}

// ResolutionSignature implements oncekeystore.SignatureStore.
func (s *Store) ResolutionSignature(ctx context.Context, p *oncekeystore.GetParams) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	const op = "resolution signature"
	return locked(ctx, s, op, p.OperationKey, func(time.Time) ([]byte, error) {
		r, ok := s.recs[pk{p.Tenant, p.OperationKey}]
		if !ok {
			return nil, wrap(op, p.OperationKey, oncekeystore.ErrNotFound)
		}
		sig, ok := s.sigs[pk{p.Tenant, p.OperationKey}]
		if !ok || sig.epoch != r.Epoch || r.Status == oncekeystore.StatusExpired {
			return nil, nil
		}
		return cloneBytes(sig.b), nil
	})
}
