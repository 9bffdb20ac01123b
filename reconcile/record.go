package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/internal/failuredoc"
	"github.com/oncekey/oncekey/oncekeystore"
)

// EncodeResult turns a JSON result given by a person into the stored form of an activity
// result: a proto-marshalled commonpb.Payloads holding one "json/plain" payload, passed through
// dc (so a codec applies, as for results the activity itself produced). A nil dc means
// converter.GetDefaultDataConverter(). Empty jsonResult encodes to nil (no result).
func EncodeResult(dc converter.DataConverter, jsonResult json.RawMessage) ([]byte, error) {
	if len(jsonResult) == 0 {
		return nil, nil
	}
	if !json.Valid(jsonResult) {
		return nil, &InvalidResolutionError{Field: "Result", Reason: "is not valid JSON"}
	}
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	p := &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data:     append([]byte(nil), jsonResult...),
	}
	ps, err := dc.ToPayloads(converter.NewRawValue(p))
	if err != nil {
		return nil, fmt.Errorf("reconcile: encode result: %w", err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ps)
	if err != nil {
		return nil, fmt.Errorf("reconcile: encode result: %w", err)
	}
	return b, nil
}

// Record writes r for (tenant, key) straight to the store with Store.Resolve: resolved_by, note,
// effect reference and, for Applied, the result encoded by EncodeResult. The reconciliation
// workflow records its decisions with it; an operator may use it when no reconciliation workflow
// is running. It returns *InvalidResolutionError for a malformed r, also when the store refuses r
// as given (*oncekeystore.InvalidParamsError, *oncekeystore.ResultTooLargeError, kept in the chain), and the
// store's other errors (*oncekeystore.StaleDecisionError when the record has moved on from r.Epoch,
// *oncekeystore.StatusConflictError when the record is not unknown, oncekeystore.ErrNotFound) wrapped.
func Record(ctx context.Context, s oncekeystore.Store, dc converter.DataConverter, tenant, key string, r Resolution) (*oncekeystore.Record, error) {
	return RecordWithOptions(ctx, s, tenant, key, r, RecordOptions{DataConverter: dc})
}

// RecordOptions configure RecordWithOptions. Fields are alphabetical; zero values mean the
// defaults.
type RecordOptions struct {
	// DataConverter encodes an Applied result (EncodeResult). Defaults to
	// converter.GetDefaultDataConverter().
	DataConverter converter.DataConverter
	// ResultSealer seals an Applied result to the record (oncekey.SealResult), as the workers'
	// okworker.Options.ResultSealer does; workers with a sealer refuse a result stored without
	// it. Defaults to none.
	ResultSealer oncekey.ResultSealer
}

// RecordWithOptions is Record with the result's encoding and sealing configured by o. A sealer's
// error is returned as a *oncekey.ResultSealError, and nothing is written.
func RecordWithOptions(ctx context.Context, s oncekeystore.Store, tenant, key string, r Resolution, o RecordOptions) (*oncekeystore.Record, error) {
	dc := o.DataConverter
	if err := r.Validate(); err != nil {
		return nil, err
	}
	p := &oncekeystore.ResolveParams{
		Tenant:          tenant,
		OperationKey:    key,
		Epoch:           r.Epoch,
		Status:          r.Outcome.Status(),
		EffectReference: r.EffectReference,
		ResolvedBy:      r.ResolvedBy,
		Note:            r.Note,
		Signature:       r.Signature,
	}
	switch r.Outcome {
	case Applied:
		res, err := EncodeResult(dc, r.Result)
		if err != nil {
			return nil, err
		}
		if res, err = oncekey.SealResult(ctx, o.ResultSealer, tenant, key, res); err != nil {
			return nil, err
		}
		p.Result = res
	case Failed:
		msg := r.Note
		if msg == "" {
			msg = "resolved as failed"
		}
		p.Failure = failuredoc.Doc{Message: msg, ResolvedBy: r.ResolvedBy}.Bytes()
	}
	rec, err := s.Resolve(ctx, p)
	var (
		params *oncekeystore.InvalidParamsError
		tooBig *oncekeystore.ResultTooLargeError
	)
	switch {
	case err == nil:
		return rec, nil
	case errors.As(err, &params):
		return nil, &InvalidResolutionError{Field: params.Field, Reason: err.Error(), Err: err}
	case errors.As(err, &tooBig):
		return nil, &InvalidResolutionError{Field: "Result", Reason: err.Error(), Err: err}
	}
	return nil, fmt.Errorf("reconcile: record %s: %w", key, err)
}
