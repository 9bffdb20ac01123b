package canonical_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/oncekey/oncekey/canonical"
)

// argsDocument builds a tool-argument document of about size bytes, the shape an agent's tool
// call has: an order with customer data, line items with prices and quantities, free text with
// some non-ASCII, members in Go struct order (not sorted).
func argsDocument(size int) []byte {
	type item struct {
		SKU      string   `json:"sku"`
		Title    string   `json:"title"`
		Quantity int      `json:"quantity"`
		Price    float64  `json:"price"`
		Tags     []string `json:"tags"`
		Gift     bool     `json:"gift"`
	}
	type order struct {
		RequestID string         `json:"request_id"`
		Customer  map[string]any `json:"customer"`
		Items     []item         `json:"items"`
		Note      string         `json:"note"`
		Total     float64        `json:"total"`
		Ledger    int64          `json:"ledger_id"`
	}
	o := order{
		RequestID: "req-7f3c2a9e-5b1d-4e8a-9c6f-2d4b8a1e7c30",
		Customer: map[string]any{"name": "Zoë Müller-Łukasiewicz", "email": "zoe@example.com",
			"tier": "gold", "since": "2019-04-01T12:00:00Z", "id": 918273645},
		Note:   "Kunde wünscht Lieferung vor 10 Uhr — bitte „Fragile“ markieren. 配送注意",
		Ledger: 9007199254740993,
	}
	for i := 0; ; i++ {
		b, _ := json.Marshal(o)
		if len(b) >= size {
			return b
		}
		o.Items = append(o.Items, item{
			SKU: fmt.Sprintf("SKU-%06d", i*7919%1000000), Title: fmt.Sprintf("Café table nº %d, oak", i),
			Quantity: i%5 + 1, Price: float64(i*137%10000) / 100, Tags: []string{"furniture", "oak"}, Gift: i%3 == 0,
		})
		o.Total += float64(i%5+1) * float64(i*137%10000) / 100
	}
}

// BenchmarkTransform runs Transform and, as the baseline, gowebpki/jcs on the same documents.
// `go run ./internal/dev/benchfmt` turns the output into BENCH lines.
func BenchmarkTransform(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"canonical_1k", 1 << 10}, {"canonical_64k", 64 << 10}} {
		doc := argsDocument(size.n)
		if _, err := canonical.Transform(doc); err != nil {
			b.Fatal(err)
		}
		b.Run(size.name+"/ours", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := canonical.Transform(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(size.name+"/baseline", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := jcs.Transform(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMarshal(b *testing.B) {
	var v any
	if err := json.Unmarshal(argsDocument(1<<10), &v); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := canonical.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}
